//! The frame ring on the Vulkan backend, on a real GPU: Vulkan allocates the frames (host-visible
//! where a CPU party touches them, device-local otherwise) and the timeline semaphores, CUDA
//! parties import both and wait and signal on their streams, CPU parties write and read in place.
//! Every frame is checked against an independent expectation on the host, and no descriptor or
//! device memory may leak across rings. Run with `--include-ignored` on a GPU host
//! (`NVSCI_REQUIRE_GPU=1` turns a missing GPU or Vulkan driver into a failure).
#![cfg(feature = "vulkan")]

mod common;
#[path = "../examples/support/nv12_pattern.rs"]
mod nv12_pattern;

use common::{expected_pattern, gpu, gpu_required, open_fds, serial, FILL_PATTERN_PTX};
use nv12_pattern::{fill_test_pattern, test_pattern_statistic};
use nvsci::convert::Nv12ToRgba;
use nvsci::cuda::cudarc::driver::{CudaSlice, DevicePtr, DriverError, LaunchConfig, PushKernelArg};
use nvsci::cuda::cudarc::nvrtc::Ptx;
use nvsci::cuda::{CudaGpu, MemSync};
use nvsci::pipeline::{
    Backend, BackendKind, CudaConsumer, CudaProducer, Engine, FrameFormat, FrameRing, Producer, RingConfig,
};
use nvsci::Error;
use std::time::Duration;

const N: usize = 64 * 1024;
const FRAMES: usize = 1000;

fn config(consumers: usize) -> RingConfig {
    RingConfig { frames: 4, consumers, timeout: Duration::from_secs(10), ..Default::default() }
}

/// The Vulkan backend and its CUDA device: `None` (skip) without a GPU, or without a Vulkan
/// driver for it, unless `NVSCI_REQUIRE_GPU=1`.
fn backend() -> Option<(Backend, CudaGpu)> {
    gpu()?;
    match Backend::new(BackendKind::Vulkan) {
        Ok(b) => {
            let dev = b.cuda().expect("the Vulkan backend has a CUDA device").clone();
            Some((b, dev))
        }
        Err(e) if gpu_required() => panic!("NVSCI_REQUIRE_GPU=1 but no Vulkan backend: {e}"),
        Err(e) => {
            eprintln!("skipping: {e}");
            None
        }
    }
}

/// Device memory in use and open fds, to compare before and after a run.
fn footprint() -> (usize, usize) {
    if let Some(dev) = gpu() {
        common::settle(&dev); // destroys queued by earlier drops have run
    }
    let (free, total) = nvsci::cuda::cudarc::driver::result::mem_get_info().unwrap();
    (total - free, open_fds())
}

fn cuda_err(function: &'static str) -> impl Fn(DriverError) -> Error {
    move |e| Error::Cuda { function, code: e.0 as u32, name: "see the CUresult" }
}

/// Every frame `t` of `results` holds pattern `t`; a failure says how many frames differ and
/// whether the first one holds the slot's previous frame (a stale read).
fn assert_frames(results: &[u8], slots: usize) {
    let frame = |t: usize| &results[t * N..(t + 1) * N];
    let bad: Vec<usize> = (0..FRAMES).filter(|&t| frame(t) != &expected_pattern(N, t as u32)[..]).collect();
    if let Some(&t) = bad.first() {
        let stale = t >= slots && frame(t) == &expected_pattern(N, (t - slots) as u32)[..];
        let zero = frame(t).iter().all(|&b| b == 0);
        panic!(
            "{} of {FRAMES} frames differ from their pattern; the first, frame {t}, holds {}",
            bad.len(),
            if stale {
                "the slot's previous frame (stale read)"
            } else if zero {
                "zeros"
            } else {
                "other bytes"
            }
        );
    }
}

/// A CUDA consumer copying every frame into `results` (frame `t` at `t * N`) on its stream.
fn consume_all(c: &mut CudaConsumer, results: &mut CudaSlice<u8>) {
    for t in 0..FRAMES {
        c.process(|f| {
            assert_eq!(f.sequence(), t as u64);
            let mut dst = results.slice_mut(t * N..(t + 1) * N);
            f.stream().memcpy_dtod(f.buffer(), &mut dst).map_err(cuda_err("cuMemcpyDtoDAsync"))
        })
        .unwrap();
    }
}

/// CPU camera: writes pattern `t` into frame `t` in place, then presents it (host signal).
fn spawn_cpu_camera(mut p: Producer) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for t in 0..FRAMES {
            let f = p.acquire().unwrap();
            assert_eq!(f.sequence(), t as u64);
            p.cpu_write(&f).unwrap().copy_from_slice(&expected_pattern(N, t as u32));
            p.present(f).unwrap();
        }
    })
}

/// A CPU producer, a CUDA consumer and (with `recorder`) a CPU consumer checking every frame.
fn run_cpu_camera(backend: &Backend, dev: &CudaGpu, recorder: bool) {
    let mut engines = vec![backend.gpu_engine()];
    if recorder {
        engines.push(Engine::Cpu);
    }
    let ring = backend
        .build_ring(FrameFormat::Raw { size: N as u64 }, config(engines.len()), &Engine::Cpu, &engines)
        .unwrap();
    assert_eq!(ring.layout().size, N as u64);
    let (p, cs) = ring.split().unwrap();
    let mut cs = cs.into_iter();
    let stream = dev.context().new_stream().unwrap();
    let mut results = stream.alloc_zeros::<u8>(N * FRAMES).unwrap();
    let mut cuda = CudaConsumer::new(cs.next().unwrap(), dev, stream.clone(), MemSync::Auto).unwrap();
    let rec = cs.next().map(|mut r| {
        std::thread::spawn(move || {
            for t in 0..FRAMES {
                let g = r.acquire().unwrap();
                assert_eq!(g.sequence(), t as u64);
                let want = expected_pattern(N, t as u32);
                assert!(r.cpu_read(&g).unwrap()[..] == want[..], "recorder: frame {t} differs");
                r.release(g).unwrap();
            }
        })
    });
    let camera = spawn_cpu_camera(p);
    consume_all(&mut cuda, &mut results);
    camera.join().unwrap();
    if let Some(r) = rec {
        r.join().unwrap();
    }
    let host = stream.clone_dtoh(&results).unwrap();
    assert_frames(&host, 4);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cpu_camera_to_cuda_consumer_1000_frames_verified_without_leaks() {
    let _s = serial();
    let Some((backend, dev)) = backend() else { return };
    assert_eq!(backend.kind(), BackendKind::Vulkan);
    run_cpu_camera(&backend, &dev, false); // warm-up: module loading and first-use allocations
    let (mem0, fds0) = footprint();
    run_cpu_camera(&backend, &dev, false);
    let (mem1, fds1) = footprint();
    assert_eq!(fds1, fds0, "fds leaked");
    assert!(mem1 <= mem0 + (8 << 20), "device memory grew by {} bytes", mem1.saturating_sub(mem0));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cpu_camera_feeds_a_cuda_consumer_and_a_cpu_recorder_1000_frames() {
    let _s = serial();
    let Some((backend, dev)) = backend() else { return };
    run_cpu_camera(&backend, &dev, true);
    let (mem0, fds0) = footprint();
    run_cpu_camera(&backend, &dev, true);
    let (mem1, fds1) = footprint();
    assert_eq!(fds1, fds0, "fds leaked");
    assert!(mem1 <= mem0 + (8 << 20), "device memory grew by {} bytes", mem1.saturating_sub(mem0));
}

/// A CUDA producer on one stream (a kernel writes pattern `t`), a CUDA consumer on another.
fn run_cuda_to_cuda(backend: &Backend, dev: &CudaGpu) {
    let gpu_engine = backend.gpu_engine();
    let ring = backend
        .build_ring(
            FrameFormat::Raw { size: N as u64 },
            config(1),
            &gpu_engine,
            std::slice::from_ref(&gpu_engine),
        )
        .unwrap();
    let (mut p, cs) = ring.split().unwrap();
    // Only GPU parties: the frames are device-local, so the CPU cannot touch them.
    let f = p.acquire().unwrap();
    assert!(
        matches!(p.cpu_write(&f), Err(Error::Unsupported { .. })),
        "device-local frames have no host view"
    );
    drop(f); // discarded: the next acquire hands out the same slot and sequence
    let ctx = dev.context();
    let fill =
        ctx.load_module(Ptx::from_src(FILL_PATTERN_PTX)).unwrap().load_function("fill_pattern").unwrap();
    let pstream = ctx.new_stream().unwrap();
    let cstream = ctx.new_stream().unwrap();
    let mut producer = CudaProducer::new(p, dev, pstream, MemSync::Auto).unwrap();
    let mut results = cstream.alloc_zeros::<u8>(N * FRAMES).unwrap();
    let mut consumer =
        CudaConsumer::new(cs.into_iter().next().unwrap(), dev, cstream.clone(), MemSync::Auto).unwrap();
    for t in 0..FRAMES {
        producer
            .produce(|f| {
                assert_eq!(f.sequence(), t as u64);
                let ptr = f.device_address();
                let (n, seed) = (N as u64, t as u32);
                let mut b = f.stream().launch_builder(&fill);
                b.arg(&ptr).arg(&n).arg(&seed);
                let cfg = LaunchConfig {
                    grid_dim: ((N as u32).div_ceil(256), 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: `ptr` maps N writable bytes of the frame; the kernel writes p[0..n].
                unsafe { b.launch(cfg) }.map(drop).map_err(cuda_err("cuLaunchKernel"))
            })
            .unwrap();
        consumer
            .process(|f| {
                let mut dst = results.slice_mut(t * N..(t + 1) * N);
                f.stream().memcpy_dtod(f.buffer(), &mut dst).map_err(cuda_err("cuMemcpyDtoDAsync"))
            })
            .unwrap();
    }
    let host = cstream.clone_dtoh(&results).unwrap();
    assert_frames(&host, 4);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_producer_and_cuda_consumer_on_two_streams_device_local_1000_frames() {
    let _s = serial();
    let Some((backend, dev)) = backend() else { return };
    run_cuda_to_cuda(&backend, &dev);
    let (mem0, fds0) = footprint();
    run_cuda_to_cuda(&backend, &dev);
    let (mem1, fds1) = footprint();
    assert_eq!(fds1, fds0, "fds leaked");
    assert!(mem1 <= mem0 + (8 << 20), "device memory grew by {} bytes", mem1.saturating_sub(mem0));
}

/// A CUDA producer (kernel on its stream) feeding a CPU recorder: the frames are host-visible and
/// the recorder reads what the kernel wrote once the stream's signal was reached.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_producer_feeds_a_cpu_recorder_1000_frames() {
    let _s = serial();
    let Some((backend, dev)) = backend() else { return };
    let gpu_engine = backend.gpu_engine();
    let ring = backend
        .build_ring(FrameFormat::Raw { size: N as u64 }, config(1), &gpu_engine, &[Engine::Cpu])
        .unwrap();
    let (p, cs) = ring.split().unwrap();
    let ctx = dev.context();
    let fill =
        ctx.load_module(Ptx::from_src(FILL_PATTERN_PTX)).unwrap().load_function("fill_pattern").unwrap();
    let mut producer = CudaProducer::new(p, &dev, ctx.new_stream().unwrap(), MemSync::Auto).unwrap();
    let mut recorder = cs.into_iter().next().unwrap();
    let rec = std::thread::spawn(move || {
        for t in 0..FRAMES {
            let g = recorder.acquire().unwrap();
            assert_eq!(g.sequence(), t as u64);
            let want = expected_pattern(N, t as u32);
            assert!(recorder.cpu_read(&g).unwrap()[..] == want[..], "recorder: frame {t} differs");
            recorder.release(g).unwrap();
        }
    });
    for t in 0..FRAMES {
        producer
            .produce(|f| {
                let ptr = f.device_address();
                let (n, seed) = (N as u64, t as u32);
                let mut b = f.stream().launch_builder(&fill);
                b.arg(&ptr).arg(&n).arg(&seed);
                let cfg = LaunchConfig {
                    grid_dim: ((N as u32).div_ceil(256), 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: `ptr` maps N writable bytes of the frame; the kernel writes p[0..n].
                unsafe { b.launch(cfg) }.map(drop).map_err(cuda_err("cuLaunchKernel"))
            })
            .unwrap();
    }
    rec.join().unwrap();
}

/// A CPU camera writing NV12 frames in place, converted to RGBA by CUDA in place, each frame's
/// statistic checked against the pattern's (a different pattern every frame, so a stale slot
/// shows).
#[test]
#[ignore = "needs a CUDA GPU"]
fn nv12_frames_are_converted_in_place_and_verified() {
    let _s = serial();
    let Some((backend, dev)) = backend() else { return };
    let (w, h) = (640u32, 360u32);
    let ring: FrameRing = backend
        .build_ring(
            FrameFormat::Nv12 { width: w, height: h },
            config(1),
            &Engine::Cpu,
            &[backend.gpu_engine()],
        )
        .unwrap();
    let layout = ring.layout().clone();
    assert_eq!(layout.planes[0].pitch % 256, 0);
    assert_eq!(layout.planes[1].offset % 4096, 0);
    let (mut p, cs) = ring.split().unwrap();
    let kernel = Nv12ToRgba::load(&dev).unwrap();
    let stream = dev.context().new_stream().unwrap();
    let rgba = stream.alloc_zeros::<u8>((w * h * 4) as usize).unwrap();
    let frames = 200u64;
    let sums = stream.alloc_zeros::<u64>(frames as usize).unwrap();
    let mut consumer =
        CudaConsumer::new(cs.into_iter().next().unwrap(), &dev, stream.clone(), MemSync::Auto).unwrap();
    for t in 0..frames {
        let f = p.acquire().unwrap();
        fill_test_pattern(&layout, t, &mut p.cpu_write(&f).unwrap()).unwrap();
        p.present(f).unwrap();
        consumer
            .process(|f| {
                let s = f.stream();
                let (dst, _a) = rgba.device_ptr(s);
                let (sums_base, _b) = sums.device_ptr(s);
                let sum = sums_base + t * 8;
                let src = f.device_address();
                // SAFETY: the frame is a whole NV12 image of this layout; dst holds w*h RGBA
                // pixels and sum one u64.
                unsafe { kernel.enqueue(s, &layout, src, dst, sum) }
            })
            .unwrap();
    }
    let host = stream.clone_dtoh(&sums).unwrap();
    for (t, got) in host.iter().enumerate() {
        assert_eq!(*got, test_pattern_statistic(w, h, t as u64), "frame {t}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn vulkan_ring_refuses_bad_input() {
    let _s = serial();
    let Some((backend, _dev)) = backend() else { return };
    let gpu = backend.gpu_engine();
    let raw = FrameFormat::Raw { size: 4096 };
    for frames in [0usize, 1, 17] {
        let c = RingConfig { frames, ..config(1) };
        let r = backend.build_ring(raw, c, &Engine::Cpu, std::slice::from_ref(&gpu));
        assert!(matches!(r, Err(Error::InvalidArgument { name: "config.frames", .. })), "{frames}: {r:?}");
    }
    for fmt in [FrameFormat::Nv12 { width: 63, height: 64 }, FrameFormat::Nv12 { width: 64, height: 0 }] {
        let r = backend.build_ring(fmt, config(1), &Engine::Cpu, std::slice::from_ref(&gpu));
        assert!(matches!(r, Err(Error::InvalidArgument { name: "format", .. })), "{fmt:?}: {r:?}");
    }
    let r = backend.build_ring(raw, config(2), &Engine::Cpu, std::slice::from_ref(&gpu));
    assert!(matches!(r, Err(Error::InvalidArgument { name: "consumers", .. })), "{r:?}");
}

/// The backend built on the application's own cudarc context (`Backend::new_on`,
/// `Backend::auto_on`): the ring's CUDA parties import into that context and run on a stream of
/// it, 1000 frames verified.
#[test]
#[ignore = "needs a CUDA GPU"]
fn ring_on_the_applications_cuda_context() {
    let _serial = serial();
    if gpu().is_none() {
        return;
    }
    let ctx = nvsci::cuda::cudarc::driver::CudaContext::new(0).unwrap();
    let app = CudaGpu::from_context(ctx.clone()).unwrap();
    let backend = match Backend::new_on(BackendKind::Vulkan, &app) {
        Ok(b) => b,
        Err(e) if gpu_required() => panic!("NVSCI_REQUIRE_GPU=1 but no Vulkan backend: {e}"),
        Err(e) => {
            eprintln!("skipping: {e}");
            return;
        }
    };
    let used = backend.cuda().expect("the Vulkan backend has a CUDA device");
    assert!(std::sync::Arc::ptr_eq(used.context(), &ctx), "the backend opened a context of its own");
    run_cpu_camera(&backend, &app, false);
    let auto = Backend::auto_on(&app).unwrap();
    let used = auto.cuda().expect("a GPU host gives the chosen backend a CUDA engine");
    assert!(std::sync::Arc::ptr_eq(used.context(), &ctx), "{}", auto.explain());
}
