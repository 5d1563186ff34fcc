//! NVIDIA's cudaNvSciBufMultiplanar sample (cuda-samples,
//! `Samples/8_Platform_Specific/Tegra/cudaNvSciBufMultiplanar`) on this crate and the mock: the
//! sample's attribute list (a block-linear planar YUV 4:2:0 image, planes Y8, V8, U8, chroma at
//! half width and height, progressive, no VPR, the GPU's id where there is one) given by both of
//! its callers, reconciled with a CPU party's list and allocated once.
//!
//! Caller 1 writes a frame into the three planes on the CPU (`put_pixels` with the Y, U and V
//! user planes nvscibuf.h asks for, in that order whatever the order of the NvSciBuf planes,
//! through the block-linear layout) and signals; caller 2 flips every bit of every plane (the sample's
//! `flipSurfaceBits` kernel: `data = ~data`) and signals back; the main thread waits, reads the
//! planes with `get_pixels` and checks them against the frame flipped on the CPU (the sample's
//! `flipBits` reference), byte for byte.
//!
//! With a CUDA GPU, caller 2 is the sample's CUDA part: it imports the image
//! (`ExternalMemory::from_buf_obj`; on the mock a block-linear image for a GPU is host-NUMA CUDA
//! virtual memory, imported with `cuImportExternalMemory`), maps each plane as a CUDA array of
//! one level with surface load/store (`map_plane`, `CUDA_ARRAY3D_SURFACE_LDST`), wraps each in a
//! surface object (`ArraySurface`), and on its stream waits for caller 1's CPU-signalled fence
//! (`CudaSyncObj::wait`), runs the kernel on every plane ([`FLIP_SURFACE_BITS_PTX`],
//! hand-written PTX) and signals the fence the CPU waits for (`CudaSyncObj::signal`). The wait
//! is enqueued before caller 1 writes the frame, so the kernels are held back by the fence
//! alone. Without a GPU (or with `--cpu`) caller 2 runs on another thread with `get_pixels` /
//! `put_pixels` and CPU fences.
//!
//! On a Jetson the same list reconciles with NVIDIA's library.
//!
//! `cargo run --example cuda_nvsci_buf_multiplanar -- [--size WxH] [--cpu]` (default 720x480,
//! the sample's frame). `NVSCI_REQUIRE_GPU=1` makes a missing GPU an error.

use nvsci::buf::{
    BufAttr, BufAttrList, BufModule, BufObj, BufType, ColorFormat, ImageLayout, Perm, PlaneDst, PlaneSrc,
    ScanType,
};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::{GpuId, NvSci};
use std::time::Duration;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The sample's list (`setAttrListImageMultiPlanes`), with the GPU id it adds for its device
/// where there is one.
fn sample_list(m: &BufModule, width: u32, height: u32, gpu: Option<GpuId>) -> Res<BufAttrList> {
    let mut l = m.attr_list()?;
    l.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::NeedCpuAccess(false),
        BufAttr::RequiredPerm(Perm::ReadWrite),
        BufAttr::Layout(ImageLayout::BlockLinear),
        BufAttr::VprFlag(false),
        BufAttr::PlaneCount(3),
        BufAttr::PlaneColorFormat(&[ColorFormat::Y8, ColorFormat::V8, ColorFormat::U8]),
        BufAttr::PlaneWidth(&[width, width / 2, width / 2]),
        BufAttr::PlaneHeight(&[height, height / 2, height / 2]),
        BufAttr::ScanType(ScanType::Progressive),
    ])?;
    if let Some(id) = gpu {
        l.set(&[BufAttr::GpuId(&[id])])?;
    }
    Ok(l)
}

fn cpu_sync(m: &SyncModule) -> Res<SyncObj> {
    let mut s = m.attr_list()?;
    s.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::SignalOnly)])?;
    let mut w = m.attr_list()?;
    w.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::WaitOnly)])?;
    Ok(SyncObj::alloc(&SyncAttrList::reconcile(&[&s, &w])?)?)
}

/// A frame, one tightly packed buffer per user plane: Y, U, V (standing in for the sample's
/// YUV file).
fn frame(obj: &BufObj) -> Res<Vec<(Vec<u8>, u32)>> {
    Ok(obj
        .pixel_planes()?
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let row = p.width * p.bytes_per_pixel;
            let mut v = Vec::with_capacity(row as usize * p.height as usize);
            for y in 0..p.height {
                for x in 0..row {
                    v.push((x.wrapping_mul(3) ^ y.wrapping_mul(5) ^ (i as u32 * 77)) as u8);
                }
            }
            (v, row)
        })
        .collect())
}

fn put(obj: &BufObj, f: &[(Vec<u8>, u32)]) -> nvsci::Result<()> {
    let src: Vec<PlaneSrc<'_>> = f.iter().map(|(d, pitch)| PlaneSrc { data: d, pitch: *pitch }).collect();
    obj.put_pixels(None, &src)
}

fn get(obj: &BufObj, f: &mut [(Vec<u8>, u32)]) -> nvsci::Result<()> {
    let mut dst: Vec<PlaneDst<'_>> =
        f.iter_mut().map(|(d, pitch)| PlaneDst { data: d, pitch: *pitch }).collect();
    obj.get_pixels(None, &mut dst)
}

/// The sample's `flipBits`.
fn flip_bits(f: &mut [(Vec<u8>, u32)]) {
    for (plane, _) in f {
        for b in plane.iter_mut() {
            *b = !*b;
        }
    }
}

/// The image both callers' lists and the CPU party's describe, allocated; its planes printed.
fn allocate(bufs: &BufModule, width: u32, height: u32, gpu: Option<GpuId>) -> Res<BufObj> {
    let mut cpu = bufs.attr_list()?;
    cpu.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::NeedCpuAccess(true),
        BufAttr::RequiredPerm(Perm::ReadWrite),
    ])?;
    let (caller1, caller2) = (sample_list(bufs, width, height, gpu)?, sample_list(bufs, width, height, gpu)?);
    let image = BufObj::alloc(&BufAttrList::reconcile(&[&caller1, &caller2, &cpu])?)?;
    for (i, p) in image.planes()?.iter().enumerate() {
        println!(
            "plane {i}: {:?} {}x{}, pitch {}, {} rows, offset {}",
            p.format, p.width, p.height, p.pitch, p.aligned_height, p.offset
        );
    }
    Ok(image)
}

/// Reads the planes back and compares them with `source` flipped; returns the bytes checked.
fn check(image: &BufObj, source: &[(Vec<u8>, u32)]) -> Res<usize> {
    let mut want = source.to_vec();
    flip_bits(&mut want);
    let mut got = frame(image)?;
    get(image, &mut got)?;
    for (i, ((g, _), (w, _))) in got.iter().zip(&want).enumerate() {
        if let Some(at) = g.iter().zip(w).position(|(a, b)| a != b) {
            return Err(format!("plane {i} byte {at}: {} instead of {}", g[at], w[at]).into());
        }
    }
    Ok(want.iter().map(|(p, _)| p.len()).sum())
}

/// Runs both callers' CPU part on a `width` x `height` frame; returns the bytes checked.
pub fn run_cpu(width: u32, height: u32) -> Res<usize> {
    let lib = NvSci::mock();
    let bufs = BufModule::open(&lib)?;
    let syncs = SyncModule::open(&lib)?;
    let image = allocate(&bufs, width, height, None)?;
    let to_caller2 = cpu_sync(&syncs)?;
    let to_caller1 = cpu_sync(&syncs)?;
    let source = frame(&image)?;

    std::thread::scope(|scope| -> Res<usize> {
        put(&image, &source)?;
        let fence = to_caller2.generate_fence()?;
        to_caller2.signal()?;
        let (image, to_caller1, syncs) = (&image, &to_caller1, &syncs);
        let caller2 = scope.spawn(move || -> Res<nvsci::sync::Fence> {
            let mut ctx = syncs.cpu_wait_context()?;
            fence.wait(&mut ctx, Some(Duration::from_secs(10)))?;
            let mut planes = frame(image)?;
            get(image, &mut planes)?;
            flip_bits(&mut planes);
            put(image, &planes)?;
            let done = to_caller1.generate_fence()?;
            to_caller1.signal()?;
            Ok(done)
        });
        let done = caller2.join().map_err(|_| "caller 2 panicked")??;
        let mut ctx = syncs.cpu_wait_context()?;
        done.wait(&mut ctx, Some(Duration::from_secs(10)))?;
        check(image, &source)
    })
}

#[cfg(feature = "cuda")]
mod gpu {
    //! Caller 2 as the sample's CUDA part: the planes as surfaces, the kernel on a stream ordered
    //! by NvSciSync fences.
    use super::*;
    use nvsci::cuda::cudarc::driver::sys::CUDA_ARRAY3D_SURFACE_LDST;
    use nvsci::cuda::cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
    use nvsci::cuda::{
        fill_sync_attrs, ArraySurface, CudaGpu, CudaSyncObj, ExternalMemory, MemSync, ReadWrite,
    };
    use std::sync::Arc;

    /// `flip_surface_bits(u64 surf, u32 width, u32 height)`: the sample's `flipSurfaceBits`:
    /// every texel `(x, y)` of a surface of one-byte texels, `x < width`, `y < height`, is read
    /// (`suld.b.2d.b8`), inverted and written back (`sust.b.2d.b8`). 2D grid, one thread per
    /// texel, blocks of 16 x 16 as the sample launches it.
    pub const FLIP_SURFACE_BITS_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry flip_surface_bits(
    .param .u64 p_surf,
    .param .u32 p_width,
    .param .u32 p_height
)
{
    .reg .pred %p<4>;
    .reg .b16 %rs<3>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<2>;

    ld.param.u64 %rd1, [p_surf];
    ld.param.u32 %r1, [p_width];
    ld.param.u32 %r2, [p_height];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r6, %r3, %r4, %r5;
    mov.u32 %r3, %ctaid.y;
    mov.u32 %r4, %ntid.y;
    mov.u32 %r5, %tid.y;
    mad.lo.s32 %r7, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r6, %r1;
    setp.ge.u32 %p2, %r7, %r2;
    or.pred %p3, %p1, %p2;
    @%p3 bra DONE;
    suld.b.2d.b8.trap {%rs1}, [%rd1, {%r6, %r7}];
    not.b16 %rs2, %rs1;
    sust.b.2d.b8.trap [%rd1, {%r6, %r7}], {%rs2};
DONE:
    ret;
}
"#;

    /// What caller 2 keeps alive until its work has completed.
    /// The kernel is among them: dropping the last reference to its module unloads it
    /// (`cuModuleUnload`), which waits for the context's work, and the stream's work waits for
    /// a fence the caller signals only after this returns.
    type Held = (Arc<CudaStream>, Vec<ArraySurface<ReadWrite>>, CudaSyncObj, CudaSyncObj, CudaFunction);

    /// Caller 2 on `gpu`: imports the image, maps every plane as a surface, and on its stream
    /// waits for `fence` (of `ready`), flips every plane and signals `done`.
    fn caller2(
        gpu: &CudaGpu,
        image: &BufObj,
        (ready, fence): (&SyncObj, &nvsci::sync::Fence),
        done: &SyncObj,
    ) -> Res<(nvsci::sync::Fence, Held)> {
        let stream = gpu.context().new_stream()?;
        let mem = ExternalMemory::<ReadWrite>::from_buf_obj(gpu, image)?;
        let mut surfaces = Vec::new();
        for p in image.planes()? {
            // `copyExtMemToMultiPlanarArrays`: one array per plane at the plane's offset, its
            // width and height, one level, `cudaArraySurfaceLoadStore`.
            let array = mem.map_plane(&p, CUDA_ARRAY3D_SURFACE_LDST)?;
            if array.desc().bytes_per_texel != 1 {
                return Err(format!("plane {:?}: the kernel flips one-byte texels", p.format).into());
            }
            surfaces.push(ArraySurface::new(array)?);
        }
        // Everything that may make the driver synchronise the context comes before the wait:
        // the imports, and the kernel's loading. With lazy loading (CUDA 12's default) a kernel
        // is loaded at its first launch, which may synchronise the context (CUDA C++ Programming
        // Guide, "Lazy Loading", "Concurrent Execution"); behind a wait for a fence that this
        // thread's caller signals afterwards, that would never return (a first version that
        // imported and loaded after queuing the wait hung on an H200, driver 580). A launch over
        // no texels, completed here, loads it.
        let wait = CudaSyncObj::import(gpu, ready)?;
        let signal = CudaSyncObj::import(gpu, done)?;
        let m =
            gpu.context().load_module(nvsci::cuda::cudarc::nvrtc::Ptx::from_src(FLIP_SURFACE_BITS_PTX))?;
        let flip = m.load_function("flip_surface_bits")?;
        let launch = |s: &ArraySurface<ReadWrite>, (w, h): (u32, u32)| -> Res<()> {
            let handle = s.handle();
            let mut b = stream.launch_builder(&flip);
            b.arg(&handle).arg(&w).arg(&h);
            let cfg = LaunchConfig {
                grid_dim: (w.div_ceil(16).max(1), h.div_ceil(16).max(1), 1),
                block_dim: (16, 16, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the arguments match the kernel's parameters; the surface covers at least
            // `w` x `h` one-byte texels (checked above) and is returned to the caller, which
            // keeps it until the work completed.
            unsafe { b.launch(cfg) }?;
            Ok(())
        };
        launch(&surfaces[0], (0, 0))?;
        stream.synchronize()?;

        wait.wait(&stream, fence, MemSync::Auto)?;
        for s in &surfaces {
            launch(s, (s.array().desc().width as u32, s.array().desc().height as u32))?;
        }
        let out = signal.signal(&stream, MemSync::Auto)?;
        Ok((out, (stream, surfaces, wait, signal, flip)))
    }

    /// Runs the sample with caller 2 on `gpu`; returns the bytes checked.
    pub fn run(gpu: &CudaGpu, width: u32, height: u32) -> Res<usize> {
        let lib = NvSci::mock();
        let bufs = BufModule::open(&lib)?;
        let syncs = SyncModule::open(&lib)?;
        let image = allocate(&bufs, width, height, Some(gpu.gpu_id()))?;
        // Caller 1 (the CPU) signals, CUDA waits; CUDA signals, the CPU waits.
        let mut cpu_signals = syncs.attr_list()?;
        cpu_signals.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::SignalOnly)])?;
        let mut cuda_waits = syncs.attr_list()?;
        fill_sync_attrs(gpu, &mut cuda_waits, false, true)?;
        let to_caller2 = SyncObj::alloc(&SyncAttrList::reconcile(&[&cpu_signals, &cuda_waits])?)?;
        let mut cuda_signals = syncs.attr_list()?;
        fill_sync_attrs(gpu, &mut cuda_signals, true, false)?;
        let mut cpu_waits = syncs.attr_list()?;
        cpu_waits.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::WaitOnly)])?;
        let to_caller1 = SyncObj::alloc(&SyncAttrList::reconcile(&[&cuda_signals, &cpu_waits])?)?;
        let source = frame(&image)?;

        let fence = to_caller2.generate_fence()?;
        // Caller 2 queues its wait, kernels and signal first; caller 1 then writes the frame and
        // signals, which releases them.
        let queued = caller2(gpu, &image, (&to_caller2, &fence), &to_caller1);
        let written = put(&image, &source);
        // Signalled whatever happened, so that a wait caller 2 queued never holds its stream.
        to_caller2.signal()?;
        let (done, held) = queued?;
        written?;
        let mut ctx = syncs.cpu_wait_context()?;
        done.wait(&mut ctx, Some(Duration::from_secs(10)))?;
        let n = check(&image, &source)?;
        held.0.synchronize()?;
        drop(held);
        Ok(n)
    }
}

/// Opens the first CUDA GPU, or says why there is none (an error with `NVSCI_REQUIRE_GPU=1`).
#[cfg(feature = "cuda")]
fn open_gpu() -> Res<Option<nvsci::cuda::CudaGpu>> {
    match nvsci::cuda::CudaGpu::open(0) {
        Ok(g) => Ok(Some(g)),
        Err(e) if std::env::var("NVSCI_REQUIRE_GPU").is_ok_and(|v| v == "1") => {
            Err(format!("NVSCI_REQUIRE_GPU=1 but no CUDA GPU: {e}").into())
        }
        Err(e) => {
            println!("no CUDA GPU ({e}): running the sample's CPU part only");
            Ok(None)
        }
    }
}

fn main() -> Res<()> {
    let (mut width, mut height) = (720u32, 480u32);
    let mut cpu = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--size" => {
                let v = args.next().ok_or("--size needs WxH")?;
                let (w, h) = v.split_once('x').ok_or("--size needs WxH")?;
                (width, height) = (w.parse()?, h.parse()?);
            }
            "--cpu" => cpu = true,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    #[cfg(feature = "cuda")]
    if !cpu {
        if let Some(dev) = open_gpu()? {
            println!("GPU: {}", dev.name()?);
            let n = gpu::run(&dev, width, height)?;
            println!(
                "cudaNvSciBufMultiplanar CUDA path: {n} bytes of three block-linear planes put on the CPU, \
                 flipped through CUDA surfaces behind an NvSciSync fence and read back with get_pixels match"
            );
            return Ok(());
        }
    }
    #[cfg(not(feature = "cuda"))]
    if !cpu {
        println!("built without the `cuda` feature: running the sample's CPU part only");
    }
    let n = run_cpu(width, height)?;
    println!("cudaNvSciBufMultiplanar CPU part: {n} bytes of three block-linear planes flipped and checked");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cpu_part_runs_on_the_mock() {
        assert_eq!(super::run_cpu(64, 36).unwrap(), 64 * 36 + 2 * 32 * 18);
    }

    #[cfg(feature = "cuda")]
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn the_cuda_path_flips_every_plane() {
        let Some(dev) = super::open_gpu().unwrap() else { return };
        for (w, h) in [(64, 36), (720, 480), (130, 98)] {
            let n = super::gpu::run(&dev, w, h).unwrap();
            assert_eq!(n, (w * h + 2 * (w / 2) * (h / 2)) as usize);
        }
    }
}
