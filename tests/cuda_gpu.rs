//! CUDA interop on a real GPU: fd import, mapping, kernels, arrays, leak checks, and the
//! NvSci-specific answers of a desktop driver. Run with `--include-ignored` on a GPU host.
#![cfg(feature = "cuda")]

mod common;

use common::{expected_pattern, gpu, open_fds, FILL_PATTERN_PTX};
use nvsci::cuda::cudarc::driver::{DevicePtr, LaunchConfig, PushKernelArg};
use nvsci::cuda::cudarc::nvrtc::Ptx;
use nvsci::cuda::{self, CudaGpu, ExportableAllocation, ExternalMemory, ReadOnly, ReadWrite};
use nvsci::{CudaError, Error};

fn fill(dev: &CudaGpu, ptr: u64, n: usize, seed: u32) {
    let module = dev.context().load_module(Ptx::from_src(FILL_PATTERN_PTX)).expect("load PTX");
    let f = module.load_function("fill_pattern").expect("function");
    let stream = dev.default_stream();
    let n64 = n as u64;
    let mut b = stream.launch_builder(&f);
    b.arg(&ptr).arg(&n64).arg(&seed);
    // SAFETY: the kernel writes `n` bytes at `ptr`, a mapping of at least `n` bytes.
    unsafe { b.launch(LaunchConfig::for_num_elems(n as u32)) }.expect("launch");
    stream.synchronize().expect("sync");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn vmm_fd_import_map_kernel_write_read_back() {
    let _serial = common::serial();
    let Some(dev) = gpu() else { return };
    let alloc = ExportableAllocation::new(&dev, 3 << 20).unwrap();
    let size = alloc.size();
    let mem =
        ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, alloc.export_fd().unwrap(), size as u64, false)
            .unwrap();
    let mapped = mem.map_all().unwrap();
    fill(&dev, mapped.device_address(), size, 13);
    let stream = dev.default_stream();
    let via_import = stream.clone_dtoh(&mapped).unwrap();
    assert!(via_import == expected_pattern(size, 13), "kernel output differs");
    // Zero copy: the exporting allocation sees the same bytes.
    let via_export = stream.clone_dtoh(&alloc).unwrap();
    assert!(via_export == via_import, "exporter sees different bytes");
    // An offset mapping sees the same bytes at that offset.
    let part = mem.map_buffer(4096, 8192).unwrap();
    assert!(stream.clone_dtoh(&part).unwrap() == expected_pattern(size, 13)[4096..4096 + 8192]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn read_only_import_reads_and_ranges_are_checked() {
    let _serial = common::serial();
    let Some(dev) = gpu() else { return };
    let alloc = ExportableAllocation::new(&dev, 1 << 20).unwrap();
    fill(&dev, alloc.device_address(), alloc.size(), 99);
    let ro = ExternalMemory::<ReadOnly>::from_opaque_fd(
        &dev,
        alloc.export_fd().unwrap(),
        alloc.size() as u64,
        false,
    )
    .unwrap();
    let view = ro.map_all().unwrap();
    let stream = dev.default_stream();
    let (ptr, _guard) = view.device_ptr(&stream);
    assert_ne!(ptr, 0);
    assert!(dev.default_stream().clone_dtoh(&view).unwrap() == expected_pattern(alloc.size(), 99));
    for (off, len) in [(0, 0), (alloc.size() as u64, 1), (1, alloc.size() as u64), (u64::MAX, 2)] {
        assert!(matches!(ro.map_buffer(off, len), Err(Error::InvalidArgument { .. })), "{off}+{len}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn plane_array_maps_at_the_plane_offset() {
    let _serial = common::serial();
    let Some(dev) = gpu() else { return };
    let alloc = ExportableAllocation::new(&dev, 2 << 20).unwrap();
    fill(&dev, alloc.device_address(), alloc.size(), 3);
    let mem = ExternalMemory::<ReadWrite>::from_opaque_fd(
        &dev,
        alloc.export_fd().unwrap(),
        alloc.size() as u64,
        false,
    )
    .unwrap();
    // A hand-made NV12-like chroma plane: 128 x 2-byte texels per 256-byte row, 64 rows, at 64 KiB.
    let plane = nvsci::buf::PlaneLayout {
        format: nvsci::buf::ColorFormat::V8U8,
        width: 128,
        height: 64,
        pitch: 256,
        offset: 65536,
        aligned_height: 64,
        aligned_size: 256 * 64,
        bits_per_pixel: 16,
        channel_count: 2,
    };
    let arr = mem.map_plane(&plane, 0).unwrap();
    assert_eq!((arr.desc().width, arr.desc().height, arr.desc().channels), (128, 64, 2));
    // CUDA arrays over opaque memory use the driver's own (tiled) layout, so the check is a
    // round trip through the array plus "the array lives at the plane offset and nowhere else".
    let ramp: Vec<u8> = (0..256 * 64).map(|i| (i % 253) as u8).collect();
    arr.copy_from_host(&ramp).unwrap();
    let mut back = vec![0u8; ramp.len()];
    arr.copy_to_host(&mut back).unwrap();
    assert!(back == ramp, "array round trip differs");
    let whole = dev.default_stream().clone_dtoh(&mem.map_all().unwrap()).unwrap();
    let expected = expected_pattern(alloc.size(), 3);
    assert!(whole[..65536] == expected[..65536], "bytes before the plane offset changed");
    assert!(whole[65536 + ramp.len()..] == expected[65536 + ramp.len()..], "bytes after the plane changed");
    assert!(
        whole[65536..65536 + ramp.len()] != expected[65536..65536 + ramp.len()],
        "the plane did not change"
    );
    assert!(matches!(arr.copy_to_host(&mut [0u8; 3]), Err(Error::InvalidArgument { .. })));
    // An array that would run past the import is refused before any CUDA call.
    let mut big = plane;
    big.offset = alloc.size() as u64 - 100;
    assert!(matches!(mem.map_plane(&big, 0), Err(Error::InvalidArgument { .. })));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn thousand_import_map_drop_cycles_leak_nothing() {
    let _serial = common::serial();
    let Some(dev) = gpu() else { return };
    let alloc = ExportableAllocation::new(&dev, 4 << 20).unwrap();
    let cycle = || {
        let fd = alloc.export_fd().unwrap();
        let mem = ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, fd, alloc.size() as u64, false).unwrap();
        let m = mem.map_buffer(0, alloc.size() as u64).unwrap();
        assert_ne!(m.device_address(), 0);
    };
    for _ in 0..5 {
        cycle();
    }
    common::settle(&dev);
    let fds = open_fds();
    let (free, _) = dev.context().mem_get_info().unwrap();
    for _ in 0..1000 {
        cycle();
    }
    common::settle(&dev);
    let (free_after, _) = dev.context().mem_get_info().unwrap();
    assert_eq!(open_fds(), fds, "open fds changed over 1000 cycles");
    assert_eq!(free_after, free, "device free memory changed over 1000 cycles");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn failed_fd_import_closes_the_fd_once() {
    let _serial = common::serial();
    let Some(dev) = gpu() else { return };
    let before = open_fds();
    // A file of our own, so its /proc/self/fd link is unique to this descriptor.
    let path = std::env::temp_dir().join(format!("nvsci-not-cuda-memory-{}", std::process::id()));
    std::fs::write(&path, [0u8; 4096]).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let fd: std::os::fd::OwnedFd = file.into();
    let n = std::os::fd::AsRawFd::as_raw_fd(&fd);
    eprintln!("fd {n} -> {:?}", std::fs::read_link(format!("/proc/self/fd/{n}")));
    // Not a CUDA memory fd: the import fails; the fd is closed exactly once, by the driver or
    // by us, and nothing aborts on a double close.
    let r = ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, fd, 4096, false);
    eprintln!("after: fd {n} -> {:?}; result {r:?}", std::fs::read_link(format!("/proc/self/fd/{n}")));
    assert!(matches!(r, Err(Error::Cuda(CudaError::Call { .. }))), "{r:?}");
    // No descriptor of the process refers to the file any more. (The count of open fds is not
    // the check: the driver opens and closes descriptors of its own around a failed import.)
    let ours: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| *target == path)
        .map(|t| t.display().to_string())
        .collect();
    assert!(ours.is_empty(), "descriptors still open on {}: {ours:?}", path.display());
    let after = open_fds();
    if after != before {
        eprintln!("open fds {before} -> {after} (the driver's own)");
    }
    let _ = std::fs::remove_file(path);
}

#[cfg(feature = "mock")]
#[test]
#[ignore = "needs a CUDA GPU"]
fn desktop_driver_refuses_nvscibuf_with_a_typed_error() {
    let _serial = common::serial();
    let Some(dev) = gpu() else { return };
    // No native NvSci on a desktop: the mock, loaded as if it were the native library, provides a
    // genuine-looking object for CUDA to refuse.
    let (lib, dir) = common::mock_as_native("nvscibuf-probe");
    let r = cuda::probe_nvscibuf_import(&dev, &lib);
    let _ = std::fs::remove_dir_all(dir);
    match r {
        Err(Error::Unsupported { reason, .. }) => {
            assert_eq!(reason, nvsci::UnsupportedReason::CudaWithoutNvSciBuf)
        }
        other => panic!("a desktop GPU should refuse NvSciBuf imports, got {other:?}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn nvscisync_attribute_entry_point_resolves() {
    let _serial = common::serial();
    let Some(dev) = gpu() else { return };
    assert!(cuda::nvsci_sync_attrs_available());
    // A NULL list is answered with CUDA_ERROR_INVALID_HANDLE by a present entry point.
    assert_eq!(cuda::probe_sync_attrs_entry(&dev).unwrap(), 400);
}

#[cfg(feature = "mock")]
#[test]
#[ignore = "needs a CUDA GPU"]
fn mock_objects_reach_cuda_through_page_locked_host_memory() {
    use nvsci::buf::{BufAttr, BufAttrList, BufModule, BufObj, BufType, Perm};
    let _serial = common::serial();
    let Some(dev) = gpu() else { return };
    let lib = nvsci::NvSci::mock();
    assert_eq!(lib.gpu_interop(), nvsci::GpuInterop::HostMemory);
    let m = BufModule::open(&lib).unwrap();
    let mut l = m.attr_list().unwrap();
    l.set(&[
        BufAttr::Types(&[BufType::RAW_BUFFER]),
        BufAttr::RawSize(8192),
        BufAttr::NeedCpuAccess(true),
        BufAttr::RequiredPerm(Perm::ReadWrite),
        BufAttr::GpuId(&[dev.gpu_id()]),
    ])
    .unwrap();
    let obj = BufObj::alloc(&BufAttrList::reconcile(&[&l]).unwrap()).unwrap();
    let pattern = common::expected_pattern(8192, 5);
    obj.cpu_write().unwrap().copy_from_slice(&pattern);
    let ro = obj.dup_with_reduced_perm(Perm::ReadOnly).unwrap();
    assert!(matches!(ExternalMemory::<ReadWrite>::from_buf_obj(&dev, &ro), Err(Error::PermissionDenied(_))));
    // Two imports of the same memory at once (the range is registered once, counted twice),
    // made while the CPU holds a mapping: the two coexist (documented rule; fences order them).
    let cpu = obj.cpu_read().unwrap();
    let rw = ExternalMemory::<ReadWrite>::from_buf_obj(&dev, &obj).unwrap();
    drop(cpu);
    let ro_mem = ExternalMemory::<ReadOnly>::from_buf_obj(&dev, &ro).unwrap();
    let (a, b) = (rw.map_all().unwrap(), ro_mem.map_all().unwrap());
    assert_eq!(a.device_address(), b.device_address());
    let stream = dev.default_stream();
    let mut copy = stream.alloc_zeros::<u8>(8192).unwrap();
    stream.memcpy_dtod(&b, &mut copy).unwrap();
    assert_eq!(stream.clone_dtoh(&copy).unwrap(), pattern, "the GPU read other bytes than the CPU wrote");
    drop((a, rw));
    // Still registered for the read-only import: the GPU keeps reading the CPU's writes in place.
    obj.cpu_write().unwrap().fill(0xa5);
    stream.memcpy_dtod(&b, &mut copy).unwrap();
    assert!(stream.clone_dtoh(&copy).unwrap().iter().all(|&x| x == 0xa5));
    let plane = nvsci::buf::PlaneLayout {
        format: nvsci::buf::ColorFormat::Y8,
        width: 64,
        height: 64,
        pitch: 64,
        offset: 0,
        aligned_height: 64,
        aligned_size: 4096,
        bits_per_pixel: 8,
        channel_count: 1,
    };
    assert!(matches!(ro_mem.map_plane(&plane, 0), Err(Error::Unsupported { .. })));
    drop((b, ro_mem));
    let sm = nvsci::sync::SyncModule::open(&lib).unwrap();
    let mut sl = sm.attr_list().unwrap();
    cuda::fill_sync_attrs(&dev, &mut sl, true, false).unwrap();
    // Filled twice: the mock refuses the keys already set, as SetAttrs does.
    assert!(
        matches!(
            cuda::fill_sync_attrs(&dev, &mut sl, true, false),
            Err(Error::NvSci { function: "SyncAttrListFillGpu", code }) if code == nvsci::NvSciError::BAD_PARAMETER
        ),
        "filled twice"
    );
    cuda::probe_nvscibuf_import(&dev, &lib).unwrap();
}

/// An RGBA8-style or single-channel array description at `offset`.
fn array_desc(offset: u64, width: usize, height: usize, channels: u32, levels: u32) -> cuda::ArrayDesc {
    cuda::ArrayDesc {
        offset,
        width,
        height,
        format: nvsci::cuda::cudarc::driver::sys::CUarray_format::CU_AD_FORMAT_UNSIGNED_INT8,
        channels,
        bytes_per_texel: channels,
        flags: 0,
        levels,
    }
}

/// `map_array` checks the array's footprint in the driver's layout, not only its packed
/// texels: an array whose packed texels fit at the end of the import but whose tiled layout
/// reaches past it is refused with `CudaError::ArrayFootprint`; placed where its footprint fits,
/// the same array maps, round-trips and leaves the bytes before it alone. Mip chains count all
/// their levels.
#[test]
#[ignore = "needs a CUDA GPU"]
fn map_array_checks_the_real_footprint() {
    let _serial = common::serial();
    let Some(dev) = gpu() else { return };
    let alloc = ExportableAllocation::new(&dev, 2 << 20).unwrap();
    fill(&dev, alloc.device_address(), alloc.size(), 9);
    let size = alloc.size() as u64;
    let mem =
        ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, alloc.export_fd().unwrap(), size, false).unwrap();

    // 1000 x 3 one-byte texels: 3000 bytes packed, far more in the driver's tiled layout.
    let (w, h) = (1000usize, 3usize);
    let packed = (w * h) as u64;
    let fp = dev
        .array_footprint(&array_desc(0, w, h, 1, 1))
        .unwrap()
        .expect("the driver reports array footprints on this GPU (deferred-mapping arrays)");
    eprintln!("{w}x{h} u8 array: {fp:?}");
    assert!(fp.size > packed, "{fp:?}: the driver's layout should cover more than the {packed} packed bytes");
    let tail = size - packed;
    match mem.map_array(array_desc(tail, w, h, 1, 1)) {
        Err(Error::Cuda(CudaError::ArrayFootprint { offset, footprint, size: imported })) => {
            assert_eq!((offset, footprint, imported), (tail, fp.size, size))
        }
        other => panic!("expected the footprint refusal, got {:?}", other.map(|_| ())),
    }
    let align = fp.alignment.max(1);
    let fits = (size - fp.size) / align * align;
    let arr = mem.map_array(array_desc(fits, w, h, 1, 1)).unwrap();
    let ramp: Vec<u8> = (0..packed as usize).map(|i| (i % 251) as u8).collect();
    arr.copy_from_host(&ramp).unwrap();
    let mut back = vec![0u8; ramp.len()];
    arr.copy_to_host(&mut back).unwrap();
    assert!(back == ramp, "array round trip differs");
    drop(arr);
    let whole = dev.default_stream().clone_dtoh(&mem.map_all().unwrap()).unwrap();
    let expected = expected_pattern(alloc.size(), 9);
    assert!(whole[..fits as usize] == expected[..fits as usize], "bytes before the array changed");
    if fits + align + packed <= size {
        assert!(
            matches!(
                mem.map_array(array_desc(fits + align, w, h, 1, 1)),
                Err(Error::Cuda(CudaError::ArrayFootprint { .. }))
            ),
            "one alignment further the footprint reaches past the import"
        );
    }

    // A mip chain: level 0 alone fits where the whole chain does not.
    let one = dev.array_footprint(&array_desc(0, 256, 256, 4, 1)).unwrap().unwrap();
    let chain = dev.array_footprint(&array_desc(0, 256, 256, 4, 9)).unwrap().unwrap();
    eprintln!("256x256 RGBA8: 1 level {one:?}, 9 levels {chain:?}");
    assert!(chain.size > one.size, "the levels after 0 take memory too");
    let at = (size - one.size) / one.alignment.max(1) * one.alignment.max(1);
    if at + chain.size > size {
        assert!(matches!(
            mem.map_array(array_desc(at, 256, 256, 4, 9)),
            Err(Error::Cuda(CudaError::ArrayFootprint { .. }))
        ));
    }
    mem.map_array(array_desc(at, 256, 256, 4, 1)).unwrap();
    mem.map_array(array_desc(0, 256, 256, 4, 9)).unwrap();
    // Surface load/store arrays are measured with their flags.
    let mut surf = array_desc(0, 640, 480, 4, 1);
    surf.flags = nvsci::cuda::cudarc::driver::sys::CUDA_ARRAY3D_SURFACE_LDST;
    let fs = dev.array_footprint(&surf).unwrap().unwrap();
    assert!(fs.size >= 640 * 480 * 4, "{fs:?}");
    mem.map_array(surf).unwrap();
}

/// `MappedArray` copies on the application's stream: every level and sub-rectangles, through
/// pinned memory (returns at once; the slice's event waits) and plain vectors (returns when
/// done), with bounds errors naming the field and another context's stream refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn mapped_array_copies_levels_and_rectangles_on_a_stream() {
    use nvsci::cuda::ArrayRegion;
    let _serial = common::serial();
    let Some(dev) = gpu() else { return };
    let alloc = ExportableAllocation::new(&dev, 2 << 20).unwrap();
    let size = alloc.size() as u64;
    let mem =
        ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, alloc.export_fd().unwrap(), size, false).unwrap();
    let arr = mem.map_array(array_desc(0, 64, 32, 4, 3)).unwrap();
    let ctx = dev.context();
    let stream = ctx.new_stream().unwrap();

    for level in 0..3 {
        let region = arr.level_region(level).unwrap();
        assert_eq!((region.width, region.height), (64 >> level, 32 >> level));
        let n = region.width * region.height * 4;
        let want = expected_pattern(n, level + 1);
        // SAFETY: written in full before any use.
        let mut src = unsafe { ctx.alloc_pinned_with_flags::<u8>(n, 0) }.unwrap();
        src.as_mut_slice().unwrap().copy_from_slice(&want);
        arr.copy_from_host_async(&stream, level, region, &src).unwrap();
        // SAFETY: only read after the copy into it (as_slice waits for it).
        let mut dst = unsafe { ctx.alloc_pinned_with_flags::<u8>(n, 0) }.unwrap();
        arr.copy_to_host_async(&stream, level, region, &mut dst).unwrap();
        assert!(dst.as_slice().unwrap() == &want[..], "level {level} round trip differs");
    }

    // A 10x5 rectangle at (7, 3) of level 0, from and to plain vectors: only it changes.
    let mut before = vec![0u8; 64 * 32 * 4];
    arr.copy_to_host_async(&stream, 0, arr.level_region(0).unwrap(), &mut before).unwrap();
    let rect = ArrayRegion::new(7, 3, 10, 5);
    let patch = vec![0xeeu8; 10 * 5 * 4];
    arr.copy_from_host_async(&stream, 0, rect, &patch).unwrap();
    let mut read_rect = vec![0u8; patch.len()];
    arr.copy_to_host_async(&stream, 0, rect, &mut read_rect).unwrap();
    assert_eq!(read_rect, patch);
    let mut after = vec![0u8; before.len()];
    arr.copy_to_host(&mut after).unwrap();
    for y in 0..32 {
        for x in 0..64 {
            let i = (y * 64 + x) * 4;
            let inside = (7..17).contains(&x) && (3..8).contains(&y);
            let want = if inside { &[0xee; 4][..] } else { &before[i..i + 4] };
            assert_eq!(&after[i..i + 4], want, "texel ({x}, {y})");
        }
    }

    let name = |r: nvsci::Result<()>| match r {
        Err(Error::InvalidArgument { name, .. }) => name,
        other => panic!("expected InvalidArgument, got {other:?}"),
    };
    let mut buf = vec![0u8; 4];
    assert_eq!(name(arr.copy_to_host_async(&stream, 3, ArrayRegion::new(0, 0, 1, 1), &mut buf)), "level");
    assert_eq!(name(arr.copy_to_host_async(&stream, 1, ArrayRegion::new(32, 0, 1, 1), &mut buf)), "region.x");
    assert_eq!(name(arr.copy_to_host_async(&stream, 0, ArrayRegion::new(0, 32, 1, 1), &mut buf)), "region.y");
    assert_eq!(
        name(arr.copy_to_host_async(&stream, 0, ArrayRegion::new(63, 0, 2, 1), &mut buf)),
        "region.width"
    );
    assert_eq!(
        name(arr.copy_to_host_async(&stream, 2, ArrayRegion::new(0, 7, 1, 2), &mut buf)),
        "region.height"
    );
    assert_eq!(name(arr.copy_to_host_async(&stream, 0, ArrayRegion::new(0, 0, 2, 1), &mut buf)), "dst");
    assert_eq!(name(arr.copy_from_host_async(&stream, 0, ArrayRegion::new(0, 0, 2, 1), &buf)), "src");
    #[cfg(not(any(feature = "cuda-13020", feature = "cuda-13030", feature = "cuda-13040")))]
    {
        let other = nvsci::cuda::cudarc::driver::CudaContext::new_non_primary(0, 0).unwrap();
        let foreign = other.new_stream().unwrap();
        assert_eq!(
            name(arr.copy_to_host_async(&foreign, 0, ArrayRegion::new(0, 0, 1, 1), &mut buf)),
            "stream"
        );
        assert_eq!(name(arr.copy_from_host_async(&foreign, 0, ArrayRegion::new(0, 0, 1, 1), &buf)), "stream");
    }
    stream.synchronize().unwrap();
}
