//! Block-linear images of the mock as CUDA arrays on a desktop GPU: the mock backs them with
//! host-NUMA CUDA virtual memory, the crate imports it with `cuImportExternalMemory` (opaque fd)
//! and maps planes as arrays, and the CPU's pixel access (`put_pixels` / `get_pixels`) and the
//! array agree byte for byte: through array copies, texture fetches and surface stores. Run with
//! `--include-ignored` on a GPU host.
#![cfg(all(feature = "cuda", feature = "mock"))]

mod common;

use common::kernels::{SURFACE_WRITE_PTX, TEXTURE_READ_PTX};
use nvsci::buf::{BufAttr, BufAttrList, BufModule, BufObj, BufType, ColorFormat, ImageLayout, Perm};
use nvsci::buf::{PlaneDst, PlaneSrc, ScanType};
use nvsci::cuda::cudarc::driver::{sys, CudaFunction, LaunchConfig, PushKernelArg};
use nvsci::cuda::cudarc::nvrtc::Ptx;
use nvsci::cuda::{ArraySurface, ArrayTexture, CudaGpu, ExternalMemory, ReadWrite, TextureOptions};
use nvsci::NvSci;

/// A block-linear image of one plane per `(format, width, height)`, CPU-accessible, for `dev`.
fn image(m: &BufModule, dev: &CudaGpu, planes: &[(ColorFormat, u32, u32)]) -> BufObj {
    let formats: Vec<ColorFormat> = planes.iter().map(|p| p.0).collect();
    let widths: Vec<u32> = planes.iter().map(|p| p.1).collect();
    let heights: Vec<u32> = planes.iter().map(|p| p.2).collect();
    let mut l = m.attr_list().unwrap();
    l.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::Layout(ImageLayout::BlockLinear),
        BufAttr::ScanType(ScanType::Progressive),
        BufAttr::PlaneCount(planes.len() as u32),
        BufAttr::PlaneColorFormat(&formats),
        BufAttr::PlaneWidth(&widths),
        BufAttr::PlaneHeight(&heights),
        BufAttr::NeedCpuAccess(true),
        BufAttr::RequiredPerm(Perm::ReadWrite),
        BufAttr::GpuId(&[dev.gpu_id()]),
    ])
    .unwrap();
    BufObj::alloc(&BufAttrList::reconcile(&[&l]).unwrap()).unwrap()
}

/// Bytes that differ at every position of a plane (row-major, `row` bytes a row), per `seed`.
fn pattern(row: usize, rows: usize, seed: u32) -> Vec<u8> {
    (0..row * rows)
        .map(|i| {
            let (x, y) = ((i % row) as u32, (i / row) as u32);
            (x.wrapping_mul(31) ^ y.wrapping_mul(131) ^ (x >> 8).wrapping_mul(7) ^ (y >> 5) ^ seed) as u8
        })
        .collect()
}

const SHAPES: &[&[(ColorFormat, u32, u32)]] = &[
    &[(ColorFormat::A8B8G8R8, 1920, 1080)],
    &[(ColorFormat::A8B8G8R8, 333, 77)],
    &[(ColorFormat::Y8, 1920, 1080), (ColorFormat::V8U8, 960, 540)],
    &[(ColorFormat::Y8, 3840, 2160), (ColorFormat::V8U8, 1920, 1080)],
    &[(ColorFormat::Y8, 64, 8), (ColorFormat::V8U8, 32, 4)],
    &[(ColorFormat::Y8, 100, 130), (ColorFormat::V8U8, 50, 65)],
];

/// Puts a distinct pattern (seeds `seed`, `seed + 1`, ...) into every plane of `obj` with
/// `put_pixels`, packed rows; returns the patterns. A two-plane (Y8 + V8U8) image goes through
/// `put_nv12`, which splits the interleaved chroma into the U and V user planes `put_pixels`
/// takes (V8U8 holds U in the low byte, as NV12 does).
fn put_patterns(obj: &BufObj, planes: &[nvsci::buf::PlaneLayout], seed: usize) -> Vec<Vec<u8>> {
    let data: Vec<Vec<u8>> = planes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            pattern((p.width * p.bits_per_pixel / 8) as usize, p.height as usize, (seed + i) as u32)
        })
        .collect();
    let src: Vec<PlaneSrc<'_>> = planes
        .iter()
        .zip(&data)
        .map(|(p, d)| PlaneSrc { data: d, pitch: p.width * p.bits_per_pixel / 8 })
        .collect();
    match src[..] {
        [y, uv] => obj.put_nv12(y, uv).unwrap(),
        _ => obj.put_pixels(None, &src).unwrap(),
    }
    data
}

/// Every plane of `obj` read with `get_pixels`, packed rows.
fn get_planes(obj: &BufObj, planes: &[nvsci::buf::PlaneLayout]) -> Vec<Vec<u8>> {
    let mut got: Vec<Vec<u8>> =
        planes.iter().map(|p| vec![0u8; (p.width * p.bits_per_pixel / 8 * p.height) as usize]).collect();
    let mut dst: Vec<PlaneDst<'_>> = got
        .iter_mut()
        .zip(planes)
        .map(|(g, p)| PlaneDst { data: g, pitch: p.width * p.bits_per_pixel / 8 })
        .collect();
    if dst.len() == 2 {
        let uv = dst.pop().unwrap();
        let y = dst.pop().unwrap();
        obj.get_nv12(y, uv).unwrap();
    } else {
        obj.get_pixels(None, &mut dst).unwrap();
    }
    got
}

/// Byte-exact comparison naming the first difference.
fn assert_same(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let bad = got.iter().zip(want).position(|(a, b)| a != b);
    assert!(bad.is_none(), "{what}: first difference at byte {bad:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn block_linear_frames_put_on_the_cpu_read_back_through_arrays() {
    let _serial = common::serial();
    let Some(dev) = common::gpu() else { return };
    let m = BufModule::open(&NvSci::mock()).unwrap();
    for (s, shape) in SHAPES.iter().enumerate() {
        let obj = image(&m, &dev, shape);
        let planes = obj.planes().unwrap();
        let data = put_patterns(&obj, &planes, s * 8);
        let mem = ExternalMemory::<ReadWrite>::from_buf_obj(&dev, &obj).unwrap();
        for (i, p) in planes.iter().enumerate() {
            assert_eq!(p.offset % nvsci_mock::GPU_ARRAY_PLANE_ALIGN, 0, "{shape:?} plane {i} offset");
            let array = mem.map_plane(p, 0).unwrap();
            let mut back = vec![0u8; data[i].len()];
            array.copy_to_host(&mut back).unwrap();
            assert_same(&back, &data[i], &format!("{shape:?} plane {i}"));
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn array_writes_read_back_through_get_pixels() {
    let _serial = common::serial();
    let Some(dev) = common::gpu() else { return };
    let m = BufModule::open(&NvSci::mock()).unwrap();
    for (s, shape) in SHAPES.iter().enumerate() {
        let obj = image(&m, &dev, shape);
        let planes = obj.planes().unwrap();
        let mem = ExternalMemory::<ReadWrite>::from_buf_obj(&dev, &obj).unwrap();
        let mut want = Vec::new();
        for (i, p) in planes.iter().enumerate() {
            let row = (p.width * p.bits_per_pixel / 8) as usize;
            let d = pattern(row, p.height as usize, (100 + s * 8 + i) as u32);
            mem.map_plane(p, 0).unwrap().copy_from_host(&d).unwrap();
            want.push(d);
        }
        let got = get_planes(&obj, &planes);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_same(g, w, &format!("{shape:?} plane {i}"));
        }
    }
}

/// Shapes for the kernel tests: RGBA and NV12 (luma and interleaved chroma), odd and full HD.
const KERNEL_SHAPES: &[&[(ColorFormat, u32, u32)]] = &[
    &[(ColorFormat::A8B8G8R8, 37, 19)],
    &[(ColorFormat::A8B8G8R8, 1920, 1080)],
    &[(ColorFormat::Y8, 37, 19), (ColorFormat::V8U8, 19, 10)],
    &[(ColorFormat::Y8, 1920, 1080), (ColorFormat::V8U8, 960, 540)],
];

fn function(dev: &CudaGpu, ptx: &str, name: &str) -> CudaFunction {
    let module = dev.context().load_module(Ptx::from_src(ptx)).expect("load PTX");
    module.load_function(name).expect("kernel")
}

/// One thread per texel of a `width` x `height` grid, in 16 x 16 blocks.
fn texel_grid(width: u32, height: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (width.div_ceil(16), height.div_ceil(16), 1),
        block_dim: (16, 16, 1),
        shared_mem_bytes: 0,
    }
}

/// Every texel of `texture`'s array (8-bit unsigned channels) fetched through it (the default
/// options: point filtering, unnormalised coordinates, elements read as integers) by
/// `texture_read`, packed row-major.
fn read_through_texture(dev: &CudaGpu, texture: &ArrayTexture<ReadWrite>) -> Vec<u8> {
    let d = *texture.array().desc();
    assert_eq!(
        d.format,
        sys::CUarray_format::CU_AD_FORMAT_UNSIGNED_INT8,
        "texture_read reads 8-bit channels"
    );
    let f = function(dev, TEXTURE_READ_PTX, "texture_read");
    let stream = dev.default_stream();
    dev.context().bind_to_thread().unwrap();
    let (w, h, channels, obj) = (d.width as u32, d.height as u32, d.channels, texture.handle());
    let mut out = stream.alloc_zeros::<u8>(d.width * d.height * channels as usize).unwrap();
    let mut b = stream.launch_builder(&f);
    b.arg(&obj).arg(&mut out).arg(&w).arg(&h).arg(&channels);
    // SAFETY: the kernel fetches texels inside the texture's width x height and writes
    // width * height * channels bytes into `out`, which is that long.
    unsafe { b.launch(texel_grid(w, h)) }.unwrap();
    let host = stream.clone_dtoh(&out).unwrap();
    stream.synchronize().unwrap();
    host
}

/// Writes every texel of `surface`'s array from `texels` (packed row-major) with `surface_write`,
/// and waits for it.
fn write_through_surface(dev: &CudaGpu, surface: &ArraySurface<ReadWrite>, texels: &[u8]) {
    let d = *surface.array().desc();
    assert_eq!(texels.len(), d.width * d.height * d.bytes_per_texel as usize, "texels of {d:?}");
    let f = function(dev, SURFACE_WRITE_PTX, "surface_write");
    let stream = dev.default_stream();
    dev.context().bind_to_thread().unwrap();
    let input = stream.clone_htod(texels).unwrap();
    let (w, h, bpt, surf) = (d.width as u32, d.height as u32, d.bytes_per_texel, surface.handle());
    let mut b = stream.launch_builder(&f);
    b.arg(&surf).arg(&input).arg(&w).arg(&h).arg(&bpt);
    // SAFETY: the kernel reads width * height * bpt bytes of `input`, which is that long, and
    // stores texels inside the surface's width x height; both outlive the synchronisation.
    unsafe { b.launch(texel_grid(w, h)) }.unwrap();
    stream.synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn block_linear_frames_put_on_the_cpu_read_back_through_textures() {
    let _serial = common::serial();
    let Some(dev) = common::gpu() else { return };
    let m = BufModule::open(&NvSci::mock()).unwrap();
    for (s, shape) in KERNEL_SHAPES.iter().enumerate() {
        let obj = image(&m, &dev, shape);
        let planes = obj.planes().unwrap();
        let data = put_patterns(&obj, &planes, 200 + s * 8);
        let mem = ExternalMemory::<ReadWrite>::from_buf_obj(&dev, &obj).unwrap();
        for (i, p) in planes.iter().enumerate() {
            let array = mem.map_plane(p, 0).unwrap();
            assert_eq!(array.desc().channels * 8, p.bits_per_pixel, "{shape:?} plane {i}: 8-bit channels");
            let texture = ArrayTexture::new(array, TextureOptions::default()).unwrap();
            let back = read_through_texture(&dev, &texture);
            assert_eq!(back.len(), data[i].len(), "{shape:?} plane {i}: bytes fetched");
            assert_same(&back, &data[i], &format!("{shape:?} plane {i}"));
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn surface_writes_read_back_through_get_pixels() {
    let _serial = common::serial();
    let Some(dev) = common::gpu() else { return };
    let m = BufModule::open(&NvSci::mock()).unwrap();
    for (s, shape) in KERNEL_SHAPES.iter().enumerate() {
        let obj = image(&m, &dev, shape);
        let planes = obj.planes().unwrap();
        let mem = ExternalMemory::<ReadWrite>::from_buf_obj(&dev, &obj).unwrap();
        let mut want = Vec::new();
        for (i, p) in planes.iter().enumerate() {
            let row = (p.width * p.bits_per_pixel / 8) as usize;
            let d = pattern(row, p.height as usize, (300 + s * 8 + i) as u32);
            let array = mem.map_plane(p, sys::CUDA_ARRAY3D_SURFACE_LDST).unwrap();
            write_through_surface(&dev, &ArraySurface::new(array).unwrap(), &d);
            want.push(d);
        }
        let got = get_planes(&obj, &planes);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_same(g, w, &format!("{shape:?} plane {i}"));
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn no_fd_or_device_memory_growth_over_1000_cycles() {
    let _serial = common::serial();
    let Some(dev) = common::gpu() else { return };
    let m = BufModule::open(&NvSci::mock()).unwrap();
    let shape = [(ColorFormat::Y8, 256, 128), (ColorFormat::V8U8, 128, 64)];
    // The host-NUMA VMM allocations the mock holds while a cycle's image lives (cuMemGetInfo does
    // not see host memory, so this is the only view of a leak of them).
    let held = std::cell::Cell::new(nvsci_mock::GpuMemoryStats::default());
    let cycle = || {
        let obj = image(&m, &dev, &shape);
        let planes = obj.planes().unwrap();
        let mem = ExternalMemory::<ReadWrite>::from_buf_obj(&dev, &obj).unwrap();
        let arrays: Vec<_> = planes.iter().map(|p| mem.map_plane(p, 0).unwrap()).collect();
        held.set(nvsci_mock::gpu_memory_stats());
        drop((arrays, mem, obj));
    };
    cycle();
    common::settle(&dev);
    let vmm = nvsci_mock::gpu_memory_stats();
    let (fds, (free, _)) = (common::open_fds(), dev.context().mem_get_info().unwrap());
    for i in 0..1000 {
        cycle();
        // Each cycle's image is one VMM allocation of at least its planes' bytes (earlier cycles'
        // may still be live: an import releases its duplicate of the object on the teardown
        // thread), so the final comparison cannot pass with allocations left uncounted.
        let h = held.get();
        assert!(h.allocations > vmm.allocations, "cycle {i}: {h:?} while the image lives, {vmm:?} before");
        assert!(
            h.bytes >= vmm.bytes + 256 * 128 + 128 * 64 * 2,
            "cycle {i}: {h:?} while the image lives, {vmm:?} before"
        );
    }
    common::settle(&dev);
    let (fds_after, (free_after, _)) = (common::open_fds(), dev.context().mem_get_info().unwrap());
    assert_eq!(fds_after, fds, "open fds before and after 1000 cycles");
    assert_eq!(nvsci_mock::gpu_memory_stats(), vmm, "live VMM allocations before and after 1000 cycles");
    // One cycle's arrays and imports (two planes of 256 x 128) take far less than 2 MiB of device
    // memory: a leak of one cycle each would lose over 1000 x that.
    assert!(free_after + (2 << 20) >= free, "device memory free: {free} before, {free_after} after");
}
