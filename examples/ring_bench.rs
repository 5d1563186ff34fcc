//! Measurements of the fence-driven ring on a CUDA GPU (ratios inside one run).
//!
//! ```text
//! cargo run --release --example ring_bench [-- --backend mock|vulkan --frames N]
//! ```
//!
//! 1. CPU time per frame of the CUDA consumer thread (getrusage of that thread, user + system,
//!    divided by frames): the fence-driven consumer (`Consumer::process` of a CUDA consumer: stream wait,
//!    kernel, stream signal) against the CPU-synchronised consumer this crate used before
//!    (CPU fence wait, kernel, `cuStreamSynchronize`, CPU signal). A CPU camera thread produces
//!    in both.
//! 2. A producer on a GPU engine writing the ring's memory in place (a CUDA stream standing in
//!    for a camera/ISP: `cuMemsetD8Async` over the whole frame), consumed by the NV12 -> RGBA
//!    kernel on a second stream, against the copy pipeline a user would otherwise write (the
//!    producer writes its own device buffer, one `cuMemcpyDtoDAsync` into the consumer's, same
//!    kernel), at 1920x1080 and 3840x2160: frames per second, and what zero copy saves per
//!    frame.
//! 3. The NV12 -> RGBA converter ([`nvsci::convert::Nv12ToRgba`]) alone on a 3840x2160 frame in
//!    device memory, beside its bandwidth floor (the bytes it moves at the bandwidth of a
//!    device-to-device copy in the same run).
//! 4. The ring's own cost per frame: a GPU producer (`cuMemsetD8Async` over the frame) and a
//!    CUDA consumer running an empty kernel, through the ring in place at 3840x2160, against the
//!    same two operations on the same memory on one stream with no hand-off. The difference per
//!    frame is what the ring's fences cost the GPU timeline.
//! 5. The ring's own cost per frame with a CPU camera: a camera thread writes the frame number
//!    into the first 8 bytes of a 3840x2160 NV12 frame and presents it; a CUDA consumer thread
//!    runs the empty kernel of item 4 on it in place, the ring's fences doing the hand-off. One
//!    frame is in flight (the camera's next acquire waits for the release of the frame it just
//!    presented), so the time per frame is a round trip: p50 and p99 over the frames (at least
//!    2000). Beside it, in the same run and in alternating blocks of 200 frames (to cancel
//!    drift), the raw round trip without the crate: the CPU writes the frame number to a
//!    page-locked host counter mapped for the device, a stream waits for it
//!    (`cuStreamWaitValue64`), runs the same empty kernel and writes the number to a second
//!    counter (`cuStreamWriteValue64`), which the CPU spins on. The consumer checks that it saw
//!    every frame in order and, on the last one, the number the camera wrote.
//!
//! What each measurement verifies (the benchmark exits non-zero on a mismatch): 1 to 3 fill
//! every frame with one known byte (frame `t`: `t as u8`; measurement 3: zeros), and after the
//! timed loop read back the R + G + B the converter kernel summed over every frame it converted,
//! compared with the sum of the BT.601 oracle's colours of those bytes (`support/bt601.rs`): a
//! frame read before its producer finished, or a stale slot, changes it. It is one sum over all
//! frames, not a per-frame or per-pixel check. Measurement 4's consumer is an empty kernel: it
//! checks nothing. Measurement 5 checks that the consumer saw every frame in order and, on the
//! last one, the number the camera wrote.
//!
//! On the mock backend the ring's memory is page-locked host memory (as on Tegra, where the
//! GPU and CPU share DRAM); on a discrete GPU every access to it crosses PCIe. On the Vulkan
//! backend with only GPU parties it is device memory.

#[path = "support/bt601.rs"]
mod bt601;
#[path = "support/percentile.rs"]
mod percentile;
#[path = "support/rusage.rs"]
mod rusage;
#[cfg(feature = "vulkan")]
#[path = "support/vk_cuda_raw.rs"]
mod vk_cuda_raw;

use nvsci::convert::Nv12ToRgba;
use nvsci::cuda::cudarc::driver::{
    sys, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
};
use nvsci::cuda::cudarc::nvrtc::Ptx;
use nvsci::cuda::{CudaGpu, MemSync};
use nvsci::pipeline::{
    Backend, Consumer, ConsumerDesc, ConsumerFrame, Engine, FrameFormat, FrameLayout, FrameRing, Producer,
    ProducerFrame,
};
use percentile::pct;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

// cudarc binds the `_v2` stream memory operations from its CUDA 11.7 bindings on, the original
// entry points before (as src/cuda/semaphore.rs does).
#[cfg(any(feature = "cuda-11040", feature = "cuda-11050", feature = "cuda-11060"))]
use sys::{cuStreamWaitValue64 as stream_wait_value64, cuStreamWriteValue64 as stream_write_value64};
#[cfg(not(any(feature = "cuda-11040", feature = "cuda-11050", feature = "cuda-11060")))]
use sys::{cuStreamWaitValue64_v2 as stream_wait_value64, cuStreamWriteValue64_v2 as stream_write_value64};

type Res<T> = Result<T, String>;

fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

/// The NV12 -> RGBA kernel with its outputs.
struct Kernel {
    f: Nv12ToRgba,
    rgba: CudaSlice<u8>,
    sum: CudaSlice<u64>,
    layout: FrameLayout,
}

impl Kernel {
    fn new(dev: &CudaGpu, stream: &Arc<CudaStream>, layout: &FrameLayout) -> Res<Self> {
        let (w, h) = layout.format.dimensions().ok_or("an image format is needed")?;
        Ok(Self {
            f: Nv12ToRgba::load(dev).map_err(e)?,
            rgba: stream.alloc_zeros::<u8>((w * h * 4) as usize).map_err(e)?,
            sum: stream.alloc_zeros::<u64>(1).map_err(e)?,
            layout: layout.clone(),
        })
    }

    fn enqueue(&mut self, stream: &CudaStream, frame: u64) -> Res<()> {
        let (dst, _g1) = self.rgba.device_ptr(stream);
        let (sum, _g2) = self.sum.device_ptr(stream);
        // SAFETY: `frame` is a whole NV12 frame of `layout`; `dst` holds w*h*4 bytes, `sum` one
        // u64.
        unsafe { self.f.enqueue(stream, &self.layout, frame, dst, sum) }.map_err(e)
    }

    /// Reads back the R + G + B the kernel summed over every frame it converted and compares it
    /// with `values`: the byte each converted frame was filled with, in order (a uniform frame
    /// of byte `v` converts to the BT.601 oracle's colour of Y = Cb = Cr = `v` in every pixel).
    fn check(&self, stream: &Arc<CudaStream>, what: &str, values: impl IntoIterator<Item = u8>) -> Res<()> {
        let got = stream.clone_dtoh(&self.sum).map_err(e)?[0];
        let (w, h) = self.layout.format.dimensions().ok_or("an image format is needed")?;
        let pixels = w as u64 * h as u64;
        let want: u64 = values
            .into_iter()
            .map(|v| pixels * bt601::rgb(v, v, v).iter().map(|&c| c as u64).sum::<u64>())
            .sum();
        if got != want {
            return Err(format!("{what}: the converted frames sum to {got}, expected {want}"));
        }
        Ok(())
    }
}

/// The bytes frames `range` are filled with (frame `t`: `t as u8`).
fn fills(range: std::ops::Range<u64>) -> impl Iterator<Item = u8> {
    range.map(|t| t as u8)
}

/// A CPU camera thread writing every frame and presenting it.
fn camera(mut p: nvsci::pipeline::Producer, frames: u64) -> std::thread::JoinHandle<Res<()>> {
    std::thread::spawn(move || {
        for t in 0..frames {
            let f = p.acquire().map_err(e)?;
            // The whole frame, so that the consumer's checksum has a known value.
            p.cpu_write(&f).map_err(e)?.fill(t as u8);
            p.present(f).map_err(e)?;
        }
        Ok(())
    })
}

/// A stream of `frames` `format` frames on `b` with a 10-second timeout, for a producer and
/// one FIFO consumer on these engines.
fn build_stream(
    b: &Backend,
    format: FrameFormat,
    frames: usize,
    producer: Engine,
    consumer: Engine,
) -> Result<FrameRing, String> {
    b.stream(format)
        .frames(frames)
        .timeout(Duration::from_secs(10))
        .producer(producer)
        .consumer(ConsumerDesc::new(consumer))
        .build()
        .map_err(e)
}

/// Measurement 1: consumer-thread CPU time per frame.
fn consumer_cpu(b: &Backend, dev: &CudaGpu, frames: u64) -> Res<(f64, f64)> {
    let format = FrameFormat::nv12(1920, 1080);
    let frames_in_ring = 4;
    let gpu = b.gpu_engine();
    // Fence-driven.
    let ring = build_stream(b, format, frames_in_ring, Engine::Cpu, gpu.clone())?;
    let layout = ring.layout().clone();
    let (p, cs) = ring.split().map_err(e)?;
    let stream = dev.context().new_stream().map_err(e)?;
    let mut k = Kernel::new(dev, &stream, &layout)?;
    let mut c = cs.into_iter().next().ok_or("consumer")?;
    c.set_stream(stream.clone()).map_err(e)?;
    c.set_mem_sync(MemSync::Auto).map_err(e)?;
    let cam = camera(p, frames);
    let t0 = rusage::cpu_time(rusage::THREAD);
    for _ in 0..frames {
        let mut r = Ok(());
        c.process(|f| {
            r = k.enqueue(f.stream(), f.device_address());
            Ok(())
        })
        .map_err(e)?;
        r?;
    }
    let fence_driven = (rusage::cpu_time(rusage::THREAD) - t0).as_secs_f64() * 1e6 / frames as f64;
    stream.synchronize().map_err(e)?;
    cam.join().map_err(|_| "camera panicked")??;
    k.check(&stream, "consumer CPU time, fence-driven", fills(0..frames))?;
    drop(c);

    // CPU-synchronised: CPU fence wait, kernel, stream synchronise, CPU release. The consumer's
    // fences are the CPU's, and the frames are imported into CUDA by hand.
    let ring = build_stream(b, format, frames_in_ring, Engine::Cpu, Engine::Cpu)?;
    let (p, cs) = ring.split().map_err(e)?;
    let mut consumer: Consumer = cs.into_iter().next().ok_or("consumer")?;
    let imports = import_views(dev, &consumer)?;
    let stream = dev.context().new_stream().map_err(e)?;
    let mut k = Kernel::new(dev, &stream, &layout)?;
    let cam = camera(p, frames);
    let t0 = rusage::cpu_time(rusage::THREAD);
    for _ in 0..frames {
        let f = consumer.acquire().map_err(e)?;
        k.enqueue(&stream, imports[f.index()].device_address())?;
        stream.synchronize().map_err(e)?;
        consumer.release(f).map_err(e)?;
    }
    let cpu_synced = (rusage::cpu_time(rusage::THREAD) - t0).as_secs_f64() * 1e6 / frames as f64;
    cam.join().map_err(|_| "camera panicked")??;
    k.check(&stream, "consumer CPU time, CPU-synchronised", fills(0..frames))?;
    Ok((fence_driven, cpu_synced))
}

/// Each slot of a consumer's ring mapped read-only into `dev` (the CPU-synchronised variant
/// imports by hand what a CUDA consumer imports when the ring is split).
fn import_views(dev: &CudaGpu, c: &Consumer) -> Res<Vec<nvsci::cuda::MappedBuffer<nvsci::cuda::ReadOnly>>> {
    let mut v = Vec::new();
    for i in 0..c.frames() {
        let view = c.slot_view(i).ok_or("this measurement needs an NvSci backend (mock or Tegra)")?;
        let mem = nvsci::cuda::ExternalMemory::<nvsci::cuda::ReadOnly>::from_buf_obj(dev, view).map_err(e)?;
        v.push(mem.map_all().map_err(e)?);
    }
    Ok(v)
}

/// Measurement 2: GPU producer in place vs own buffer + copy. Frames per second of each.
fn gpu_producer(b: &Backend, dev: &CudaGpu, width: u32, height: u32, frames: u64) -> Res<(f64, f64)> {
    let format = FrameFormat::nv12(width, height);
    let frames_in_ring = 4;
    let gpu = b.gpu_engine();
    let ring = build_stream(b, format, frames_in_ring, gpu.clone(), gpu.clone())?;
    let layout = ring.layout().clone();
    let size = layout.size as usize;
    let (p, cs) = ring.split().map_err(e)?;
    let ps = dev.context().new_stream().map_err(e)?;
    let cstream = dev.context().new_stream().map_err(e)?;
    let mut producer = p;
    producer.set_stream(ps.clone()).map_err(e)?;
    let mut consumer = cs.into_iter().next().ok_or("consumer")?;
    consumer.set_stream(cstream.clone()).map_err(e)?;
    let mut k = Kernel::new(dev, &cstream, &layout)?;
    let mut step = |t: u64| -> Res<()> {
        producer
            .produce(|f| {
                // SAFETY: the frame maps `size` writable bytes; the memset is queued on the
                // producer's stream after its release-fence waits.
                let r = unsafe {
                    sys::cuMemsetD8Async(f.device_address(), t as u8, size, f.stream().cu_stream())
                };
                if r != sys::CUresult::CUDA_SUCCESS {
                    return Err(nvsci::Error::Cuda(nvsci::CudaError::Call {
                        function: "cuMemsetD8Async",
                        code: r as u32,
                        name: "memset",
                    }));
                }
                Ok(())
            })
            .map_err(e)?;
        let mut r = Ok(());
        consumer
            .process(|f| {
                r = k.enqueue(f.stream(), f.device_address());
                Ok(())
            })
            .map_err(e)?;
        r
    };
    for t in 0..16 {
        step(t)?;
    }
    cstream.synchronize().map_err(e)?;
    let start = Instant::now();
    for t in 0..frames {
        step(t)?;
    }
    cstream.synchronize().map_err(e)?;
    let zero_copy = frames as f64 / start.elapsed().as_secs_f64();
    k.check(&cstream, "GPU producer in place", fills(0..16).chain(fills(0..frames)))?;
    drop(consumer);
    drop(producer);

    // Copy pipeline: the producer's own device buffer, one device-to-device copy into the
    // consumer's, the same kernel; producer and consumer on their own streams, ordered by events
    // as a user would write it.
    let own = ps.alloc_zeros::<u8>(size).map_err(e)?;
    let mut theirs = cstream.alloc_zeros::<u8>(size).map_err(e)?;
    let mut k = Kernel::new(dev, &cstream, &layout)?;
    let mut step = |t: u64| -> Res<()> {
        {
            let (o, _g) = own.device_ptr(&ps);
            // SAFETY: `own` holds `size` bytes; queued on the producer's stream.
            let r = unsafe { sys::cuMemsetD8Async(o, t as u8, size, ps.cu_stream()) };
            if r != sys::CUresult::CUDA_SUCCESS {
                return Err(format!("cuMemsetD8Async: {r:?}"));
            }
        }
        cstream.join(&ps).map_err(e)?;
        cstream.memcpy_dtod(&own, &mut theirs).map_err(e)?;
        let (src, _g) = theirs.device_ptr(&cstream);
        k.enqueue(&cstream, src)?;
        ps.join(&cstream).map_err(e)?;
        Ok(())
    };
    for t in 0..16 {
        step(t)?;
    }
    cstream.synchronize().map_err(e)?;
    let start = Instant::now();
    for t in 0..frames {
        step(t)?;
    }
    cstream.synchronize().map_err(e)?;
    let copy = frames as f64 / start.elapsed().as_secs_f64();
    k.check(&cstream, "GPU producer, own buffer + copy", fills(0..16).chain(fills(0..frames)))?;
    Ok((zero_copy, copy))
}

/// `empty(u64)`: a kernel that does nothing (the consumer of measurement 4).
const EMPTY_PTX: &str = "
.version 7.0
.target sm_52
.address_size 64
.visible .entry empty(.param .u64 p) { ret; }
";

fn memset(stream: &CudaStream, at: u64, value: u8, size: usize) -> Res<()> {
    // SAFETY: `at` maps at least `size` writable bytes in the stream's context (a slot of the
    // ring held by the producer, or the same slot while the producer still holds its mapping).
    let r = unsafe { sys::cuMemsetD8Async(at, value, size, stream.cu_stream()) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(format!("cuMemsetD8Async: {r:?}"));
    }
    Ok(())
}

fn launch_empty(stream: &CudaStream, f: &CudaFunction, at: u64) -> Res<()> {
    let mut b = stream.launch_builder(f);
    b.arg(&at);
    let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: the kernel takes one u64 and touches no memory.
    unsafe { b.launch(cfg) }.map(drop).map_err(e)
}

/// Measurement 4: microseconds per frame through the ring (GPU producer, empty CUDA consumer)
/// and on one stream without hand-off, same memory, same operations.
fn ring_cost(b: &Backend, dev: &CudaGpu, width: u32, height: u32, frames: u64) -> Res<(f64, f64)> {
    let format = FrameFormat::nv12(width, height);
    let frames_in_ring = 4;
    let gpu = b.gpu_engine();
    let ring = build_stream(b, format, frames_in_ring, gpu.clone(), gpu.clone())?;
    let size = ring.layout().size as usize;
    let (mut producer, cs) = ring.split().map_err(e)?;
    let ps = dev.context().new_stream().map_err(e)?;
    let cstream = dev.context().new_stream().map_err(e)?;
    producer.set_stream(ps.clone()).map_err(e)?;
    let mut consumer = cs.into_iter().next().ok_or("consumer")?;
    consumer.set_stream(cstream.clone()).map_err(e)?;
    let empty = dev
        .context()
        .load_module(Ptx::from_src(EMPTY_PTX))
        .and_then(|m| m.load_function("empty"))
        .map_err(e)?;
    let mut slots = [0u64; 4];
    let mut step = |t: u64| -> Res<()> {
        let mut r = Ok(());
        producer
            .produce(|f| {
                slots[f.index() % 4] = f.device_address();
                r = memset(f.stream(), f.device_address(), t as u8, size);
                Ok(())
            })
            .map_err(e)?;
        r?;
        let mut r = Ok(());
        consumer
            .process(|f| {
                r = launch_empty(f.stream(), &empty, f.device_address());
                Ok(())
            })
            .map_err(e)?;
        r
    };
    for t in 0..16 {
        step(t)?;
    }
    cstream.synchronize().map_err(e)?;
    let start = Instant::now();
    for t in 0..frames {
        step(t)?;
    }
    cstream.synchronize().map_err(e)?;
    let ring_us = start.elapsed().as_secs_f64() * 1e6 / frames as f64;
    // The same work on one stream, on the same slots (the producer still holds their mappings).
    let one = dev.context().new_stream().map_err(e)?;
    let step = |t: u64| -> Res<()> {
        let at = slots[(t % 4) as usize];
        memset(&one, at, t as u8, size)?;
        launch_empty(&one, &empty, at)
    };
    for t in 0..16 {
        step(t)?;
    }
    one.synchronize().map_err(e)?;
    let start = Instant::now();
    for t in 0..frames {
        step(t)?;
    }
    one.synchronize().map_err(e)?;
    let one_us = start.elapsed().as_secs_f64() * 1e6 / frames as f64;
    Ok((ring_us, one_us))
}

/// Frames per block of measurement 5: ring and raw floor alternate in blocks this long.
const CAMERA_BLOCK: u64 = 200;

/// p50 and p99 of per-frame times, in microseconds.
struct Spread {
    p50: f64,
    p99: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Res<Self> {
        if v.is_empty() {
            return Err("no samples".into());
        }
        Ok(Self { p50: pct(&mut v, 0.5), p99: pct(&mut v, 0.99) })
    }
}

/// The CUDA consumer of measurement 5, on its own thread: acquires every frame (its present
/// wait enqueued on the consumer's stream), enqueues the empty kernel on it, then releases the
/// frame before it (its release signal enqueued after the kernel just queued). Holding each frame
/// until the next one's kernel is queued makes the producer's acquire of frame n + 1 (on a
/// ring of 2 slots: the slot of frame n - 1) wait for the completion of frame n's kernel: one
/// frame in flight. Checks that frames come in order, every one of `total`, and that the last
/// frame's first 8 bytes (read on the stream, after its present wait) hold its number.
fn camera_consumer(
    mut c: Consumer,
    empty: CudaFunction,
    dev: CudaGpu,
    total: u64,
) -> std::thread::JoinHandle<Res<()>> {
    std::thread::spawn(move || {
        dev.context().bind_to_thread().map_err(e)?;
        let stream = c.stream().ok_or("the CUDA consumer has no stream")?.clone();
        let mut held: Option<ConsumerFrame> = None;
        for n in 0..total {
            let f = c.acquire().map_err(e)?;
            if f.sequence() != n || f.index() as u64 != n % 2 {
                return Err(format!(
                    "consumer: expected frame {n} in slot {}, got frame {} in slot {}",
                    n % 2,
                    f.sequence(),
                    f.index()
                ));
            }
            let at = c.cuda_buffer(&f).map_err(e)?.device_address();
            launch_empty(&stream, &empty, at)?;
            if let Some(prev) = held.replace(f) {
                c.release(prev).map_err(e)?;
            }
        }
        let last = held.ok_or("consumer: no frame")?;
        let at = c.cuda_buffer(&last).map_err(e)?.device_address();
        let mut seen = [0u8; 8];
        // SAFETY: `at` maps the held frame (more than 8 bytes); `seen` is 8 writable bytes that
        // outlive the copy (the stream is synchronised before they are read or dropped).
        let r = unsafe { sys::cuMemcpyDtoHAsync_v2(seen.as_mut_ptr().cast(), at, 8, stream.cu_stream()) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(format!("cuMemcpyDtoHAsync: {r:?}"));
        }
        stream.synchronize().map_err(e)?;
        if u64::from_le_bytes(seen) != total - 1 {
            return Err(format!(
                "consumer: frame {} holds counter {}, expected {}",
                total - 1,
                u64::from_le_bytes(seen),
                total - 1
            ));
        }
        c.release(last).map_err(e)?;
        stream.synchronize().map_err(e)?;
        Ok(())
    })
}

/// One frame of the CPU camera of measurement 5: writes frame `n`'s number into the first 8
/// bytes of the held frame, presents it and acquires the next one (which waits for the release
/// of frame `n`, see [`camera_consumer`]). Returns the wall time of the round trip in
/// microseconds.
fn camera_frame(p: &mut Producer, held: &mut Option<ProducerFrame>, n: u64) -> Res<f64> {
    let f = held.take().ok_or("camera: no frame held")?;
    if f.sequence() != n {
        return Err(format!("camera: expected frame {n}, acquired frame {}", f.sequence()));
    }
    let t = Instant::now();
    p.cpu_write(&f).map_err(e)?[..8].copy_from_slice(&n.to_le_bytes());
    p.present(f).map_err(e)?;
    *held = Some(p.acquire().map_err(e)?);
    Ok(t.elapsed().as_secs_f64() * 1e6)
}

/// The raw floor of measurement 5: a page-locked host counter pair mapped for the device. Frame
/// `n`: the CPU writes `n` to `ready`; the stream waits for `ready >= n`, runs the empty kernel
/// and writes `n` to `done`; the CPU spins until it reads `n` there.
struct RawRoundTrip {
    stream: Arc<CudaStream>,
    host: *mut core::ffi::c_void,
    ready: *mut u64,
    done: *mut u64,
    ready_dev: u64,
    done_dev: u64,
    next: u64,
}

impl RawRoundTrip {
    fn new(dev: &CudaGpu) -> Res<Self> {
        let stream = dev.context().new_stream().map_err(e)?;
        dev.context().bind_to_thread().map_err(e)?;
        let mut host: *mut core::ffi::c_void = core::ptr::null_mut();
        // SAFETY: valid out-pointer; 128 bytes of page-locked memory mapped for the device.
        ck("cuMemHostAlloc", unsafe { sys::cuMemHostAlloc(&mut host, 128, sys::CU_MEMHOSTALLOC_DEVICEMAP) })?;
        let ready = host.cast::<u64>();
        // SAFETY: offset 64 bytes (its own cache line) inside the 128-byte allocation.
        let done = unsafe { ready.add(8) };
        let mut raw = Self { stream, host, ready, done, ready_dev: 0, done_dev: 0, next: 1 };
        // SAFETY: both counters lie in the mapped allocation, which `raw` frees on drop.
        unsafe {
            raw.ready.write_volatile(0);
            raw.done.write_volatile(0);
            ck(
                "cuMemHostGetDevicePointer",
                sys::cuMemHostGetDevicePointer_v2(&mut raw.ready_dev, ready.cast(), 0),
            )?;
            ck(
                "cuMemHostGetDevicePointer",
                sys::cuMemHostGetDevicePointer_v2(&mut raw.done_dev, done.cast(), 0),
            )?;
        }
        Ok(raw)
    }

    /// One round trip; its wall time in microseconds.
    fn frame(&mut self, empty: &CudaFunction) -> Res<f64> {
        let n = self.next;
        self.next += 1;
        let s = self.stream.cu_stream();
        let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
        let t = Instant::now();
        // SAFETY: an aligned u64 of the live allocation; the device reads it only through the
        // stream wait.
        unsafe { self.ready.write_volatile(n) };
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        // SAFETY: both device addresses map the live allocation, freed only after the stream
        // is synchronised (drop).
        ck("cuStreamWaitValue64", unsafe { stream_wait_value64(s, self.ready_dev, n, geq) })?;
        launch_empty(&self.stream, empty, self.ready_dev)?;
        // SAFETY: as above.
        ck("cuStreamWriteValue64", unsafe { stream_write_value64(s, self.done_dev, n, 0) })?;
        let deadline = t + Duration::from_secs(10);
        // SAFETY: an aligned u64 of the live allocation, written by the device.
        while unsafe { self.done.read_volatile() } < n {
            if Instant::now() > deadline {
                return Err(format!("raw round trip: frame {n} not done after 10 s"));
            }
            std::hint::spin_loop();
        }
        Ok(t.elapsed().as_secs_f64() * 1e6)
    }
}

impl Drop for RawRoundTrip {
    fn drop(&mut self) {
        // A wait still queued (a round trip that failed) passes, so the synchronise returns.
        // SAFETY: an aligned u64 of the live allocation.
        unsafe { self.ready.write_volatile(u64::MAX) };
        let _ = self.stream.synchronize();
        // SAFETY: allocated in `new`; the stream that used it is synchronised above.
        unsafe { sys::cuMemFreeHost(self.host) };
    }
}

fn ck(what: &str, r: sys::CUresult) -> Res<()> {
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(format!("{what}: {r:?}"));
    }
    Ok(())
}

/// The raw floors of measurement 5 on the Vulkan backend: the CPU camera's round trip through
/// Vulkan objects with ash and the CUDA driver API ([`vk_cuda_raw::RawCamera`]), the present's
/// queue batch not waited for, and waited for before the stream's wait is enqueued.
struct VulkanFloors {
    #[cfg(feature = "vulkan")]
    raw: vk_cuda_raw::RawCamera,
    no_wait: Vec<f64>,
    wait: Vec<f64>,
}

impl VulkanFloors {
    fn new(b: &Backend, dev: &CudaGpu, bytes: u64) -> Res<Option<Self>> {
        #[cfg(feature = "vulkan")]
        if let Some(ctx) = b.vulkan() {
            let raw = vk_cuda_raw::RawCamera::new(ctx, dev, bytes).map_err(e)?;
            return Ok(Some(Self { raw, no_wait: Vec::new(), wait: Vec::new() }));
        }
        let _ = (b, dev, bytes);
        Ok(None)
    }

    /// One frame of each floor; kept unless `warm`.
    fn frames(&mut self, empty: &CudaFunction, warm: bool) -> Res<()> {
        #[cfg(feature = "vulkan")]
        for wait in [false, true] {
            let us = self.raw.frame(wait, &mut |s, at| launch_empty(s, empty, at)).map_err(e)?;
            if !warm {
                if wait { &mut self.wait } else { &mut self.no_wait }.push(us);
            }
        }
        let _ = (empty, warm);
        Ok(())
    }
}

/// Measurement 5's figures: ring, raw host counters, and on Vulkan the raw floors without and
/// with a wait for the present.
type CameraCost = (Spread, Spread, Option<(Spread, Spread)>);

/// Measurement 5: the ring's round trip per frame with a CPU camera (8 bytes written, then
/// present) and a CUDA consumer running the empty kernel in place, one frame in flight,
/// against the raw host-counter round trip (and, on the Vulkan backend, the raw round trips
/// through Vulkan objects), in alternating blocks of [`CAMERA_BLOCK`] frames.
/// Returns (ring, raw host counters, Vulkan floors without and with a wait for the present).
fn camera_cost(b: &Backend, dev: &CudaGpu, width: u32, height: u32, frames: u64) -> Res<CameraCost> {
    let format = FrameFormat::nv12(width, height);
    let frames_in_ring = 2;
    let gpu = b.gpu_engine();
    let ring = build_stream(b, format, frames_in_ring, Engine::Cpu, gpu.clone())?;
    let (mut p, cs) = ring.split().map_err(e)?;
    let mut c = cs.into_iter().next().ok_or("consumer")?;
    c.set_stream(dev.context().new_stream().map_err(e)?).map_err(e)?;
    let empty = dev
        .context()
        .load_module(Ptx::from_src(EMPTY_PTX))
        .and_then(|m| m.load_function("empty"))
        .map_err(e)?;
    const WARM: u64 = 50;
    let blocks = frames.div_ceil(CAMERA_BLOCK);
    let total = WARM + blocks * CAMERA_BLOCK;
    let consumer = camera_consumer(c, empty.clone(), dev.clone(), total);
    let mut raw = RawRoundTrip::new(dev)?;
    let mut vk_floors = VulkanFloors::new(b, dev, u64::from(width) * u64::from(height) * 3 / 2)?;
    let (mut ring_us, mut raw_us) = (Vec::new(), Vec::new());
    let mut camera = || -> Res<()> {
        let mut held = Some(p.acquire().map_err(e)?);
        for n in 0..WARM {
            camera_frame(&mut p, &mut held, n)?;
            raw.frame(&empty)?;
            if let Some(f) = vk_floors.as_mut() {
                f.frames(&empty, true)?;
            }
        }
        for k in 0..blocks {
            for i in 0..CAMERA_BLOCK {
                ring_us.push(camera_frame(&mut p, &mut held, WARM + k * CAMERA_BLOCK + i)?);
            }
            for _ in 0..CAMERA_BLOCK {
                raw_us.push(raw.frame(&empty)?);
            }
            if let Some(f) = vk_floors.as_mut() {
                for _ in 0..CAMERA_BLOCK {
                    f.frames(&empty, false)?;
                }
            }
        }
        // `held` (frame `total`, never presented) is discarded here.
        Ok(())
    };
    let cam = camera();
    // After a camera error no frame comes: the consumer's acquire fails at the ring's timeout
    // (10 s) and its thread ends with that error, reported beside the camera's.
    drop(p);
    let cons = consumer.join().map_err(|_| "consumer thread panicked")?;
    match (cam, cons) {
        (Ok(()), Ok(())) => {}
        (Err(c), Ok(())) => return Err(format!("camera: {c}")),
        (Ok(()), Err(k)) => return Err(k),
        (Err(c), Err(k)) => return Err(format!("camera: {c}; {k}")),
    }
    if ring_us.len() as u64 != blocks * CAMERA_BLOCK || raw_us.len() != ring_us.len() {
        return Err(format!(
            "{} ring and {} raw samples, expected {}",
            ring_us.len(),
            raw_us.len(),
            blocks * CAMERA_BLOCK
        ));
    }
    let vk = match vk_floors {
        Some(f) => Some((Spread::of(f.no_wait)?, Spread::of(f.wait)?)),
        None => None,
    };
    Ok((Spread::of(ring_us)?, Spread::of(raw_us)?, vk))
}

/// GPU time of `f` enqueued `reps` times on `stream`, per repetition, in microseconds (CUDA
/// events around the whole batch).
fn gpu_time(stream: &CudaStream, reps: u32, mut f: impl FnMut() -> Res<()>) -> Res<f64> {
    let ctx = stream.context();
    let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    let (a, b) = (ctx.new_event(timing).map_err(e)?, ctx.new_event(timing).map_err(e)?);
    a.record(stream).map_err(e)?;
    for _ in 0..reps {
        f()?;
    }
    b.record(stream).map_err(e)?;
    b.synchronize().map_err(e)?;
    let ms = a.elapsed_ms(&b).map_err(e)?;
    Ok(ms as f64 * 1000.0 / reps as f64)
}

/// Measurement 3: the converter alone on a 4K NV12 frame in device memory, beside the
/// bandwidth floor: the bytes it moves (luma + chroma read, RGBA written) at the bandwidth a
/// device-to-device copy reaches in the same run. Returns (converter us, floor us, GB/s).
fn converter_alone(b: &Backend, dev: &CudaGpu, width: u32, height: u32) -> Res<(f64, f64, f64)> {
    let format = FrameFormat::nv12(width, height);
    let frames_in_ring = 2;
    let gpu = b.gpu_engine();
    let layout = build_stream(b, format, frames_in_ring, gpu.clone(), gpu.clone())?.layout().clone();
    let stream = dev.context().new_stream().map_err(e)?;
    let src = stream.alloc_zeros::<u8>(layout.size as usize).map_err(e)?;
    let mut k = Kernel::new(dev, &stream, &layout)?;
    let (frame, _g) = src.device_ptr(&stream);
    for _ in 0..20 {
        k.enqueue(&stream, frame)?;
    }
    let conv = gpu_time(&stream, 200, || k.enqueue(&stream, frame))?;
    // The frame is zeros (Y = Cb = Cr = 0) every time.
    k.check(&stream, "converter alone", std::iter::repeat_n(0, 220))?;
    // Copy bandwidth: 256 MiB device to device (read + write counted).
    let n = 256usize << 20;
    let a = stream.alloc_zeros::<u8>(n).map_err(e)?;
    let mut c = stream.alloc_zeros::<u8>(n).map_err(e)?;
    for _ in 0..3 {
        stream.memcpy_dtod(&a, &mut c).map_err(e)?;
    }
    let copy_us = gpu_time(&stream, 20, || stream.memcpy_dtod(&a, &mut c).map_err(e))?;
    let gbps = (2 * n) as f64 / (copy_us * 1e-6) / 1e9;
    let moved = (width as f64 * height as f64) * (1.0 + 0.5 + 4.0);
    let floor = moved / (gbps * 1e9) * 1e6;
    Ok((conv, floor, gbps))
}

fn run() -> Res<()> {
    let mut name = "auto".to_owned();
    let mut frames = 1000u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--backend" => name = args.next().ok_or("--backend needs a value")?,
            "--frames" => frames = args.next().ok_or("--frames needs a value")?.parse().map_err(e)?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let b = Backend::by_name(&name).map_err(e)?;
    println!("{}", b.explain());
    let dev = b.cuda().ok_or("this benchmark needs a CUDA GPU")?.clone();
    println!("device: {}", dev.name().map_err(e)?);
    if b.nvsci().is_some() {
        let (fd, cs) = consumer_cpu(&b, &dev, frames)?;
        println!(
            "consumer thread CPU time per frame (1920x1080, {frames} frames): fence-driven {fd:.1} us, \
             CPU wait + synchronize {cs:.1} us, ratio {:.3}x",
            fd / cs
        );
    } else {
        println!("consumer CPU time: needs an NvSci backend for the CPU-synchronised variant; skipped");
    }
    let (conv, floor, gbps) = converter_alone(&b, &dev, 3840, 2160)?;
    println!(
        "NV12 -> RGBA 3840x2160 alone: {conv:.1} us per frame; floor {floor:.1} us (45.6 MB at the {gbps:.0} GB/s \
         of a device-to-device copy, same run); ratio {:.2}x",
        conv / floor
    );
    let (ring_us, one_us) = ring_cost(&b, &dev, 3840, 2160, frames)?;
    println!(
        "ring cost 3840x2160 (GPU producer memset, empty CUDA consumer kernel): through the ring {ring_us:.1} us \
         per frame, same work on one stream without hand-off {one_us:.1} us; the ring adds {:.1} us per frame",
        ring_us - one_us
    );
    for (w, h) in [(1920, 1080), (3840, 2160)] {
        let (zc, cp) = gpu_producer(&b, &dev, w, h, frames)?;
        println!(
            "GPU producer -> CUDA consumer {w}x{h}: in place {zc:.0} frames/s, own buffer + copy {cp:.0} frames/s, \
             ratio {:.2}x; zero copy saves {:.1} us per frame",
            zc / cp,
            1e6 / cp - 1e6 / zc
        );
    }
    let label = if name == "auto" { b.kind().to_string() } else { name.clone() };
    let (ring, raw, vk) = camera_cost(&b, &dev, 3840, 2160, frames.max(2000))?;
    println!(
        "ring's own cost, CPU camera -> CUDA consumer (empty kernel), 3840x2160, {label}: ring p50 {:.1} us \
         p99 {:.1} us; raw host-counter round trip p50 {:.1} us p99 {:.1} us; the ring adds p50 {:.1} us \
         ({} frames each, one in flight)",
        ring.p50,
        ring.p99,
        raw.p50,
        raw.p99,
        ring.p50 - raw.p50,
        frames.max(2000).div_ceil(CAMERA_BLOCK) * CAMERA_BLOCK
    );
    if let Some((no_wait, wait)) = vk {
        println!(
            "raw Vulkan camera round trip (ash + CUDA driver API, same blocks): present batch not waited p50 {:.1} us \
             p99 {:.1} us; waited for before the stream wait p50 {:.1} us p99 {:.1} us; the ring adds p50 {:.1} us \
             over the first, {:.1} us over the second",
            no_wait.p50,
            no_wait.p99,
            wait.p50,
            wait.p99,
            ring.p50 - no_wait.p50,
            ring.p50 - wait.p50
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    env_logger::init();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}
