//! The ring scenarios, each written once against [`Env`]: parties on "the engine" run on the
//! backend's GPU engine (a CUDA stream) where it has one, else on the CPU, and every frame is
//! checked against an independent expectation (`fill_pattern`'s bytes; converted NV12 frames'
//! pixels, against the BT.601 oracle's conversion of the pattern) read back on the host.

use super::common::{expected_pattern, open_fds};
use super::nv12_pattern::bt601;
use super::Env;
use nvsci::pipeline::{
    Consumer, ConsumerDesc, Engine, FrameFormat, FrameRing, Producer, QueueMode, StreamBuilder,
};
use nvsci::{Error, RingError, Wait};
use std::time::Duration;

const N: usize = 64 * 1024;
/// Frames of the long scenarios: 1000, or 200 under an emulator (`NVSCI_CHILD_RUNNER`, which
/// toolchain/cargo-aarch64.toml sets for qemu), where a frame costs some 50 times more.
fn frames() -> usize {
    if std::env::var("NVSCI_CHILD_RUNNER").is_ok_and(|r| !r.is_empty()) {
        200
    } else {
        1000
    }
}

/// The stream parameters the scenarios vary.
#[derive(Clone, Copy)]
struct Config {
    frames: usize,
    timeout: Duration,
}

impl Config {
    fn with_frames(self, frames: usize) -> Self {
        Self { frames, ..self }
    }
    fn with_timeout(self, timeout: Duration) -> Self {
        Self { timeout, ..self }
    }
}

/// 4 frames, a 10-second timeout.
fn config() -> Config {
    Config { frames: 4, timeout: Duration::from_secs(10) }
}

/// A stream of `format` frames on the environment's backend, for a producer and FIFO consumers
/// on these engines.
fn builder(
    env: &Env,
    format: FrameFormat,
    config: Config,
    producer: &Engine,
    consumers: &[Engine],
) -> StreamBuilder {
    let b =
        env.backend.stream(format).frames(config.frames).timeout(config.timeout).producer(producer.clone());
    consumers.iter().fold(b, |b, e| b.consumer(ConsumerDesc::new(e.clone())))
}

fn ring(
    env: &Env,
    format: FrameFormat,
    config: Config,
    producer: &Engine,
    consumers: &[Engine],
) -> FrameRing {
    builder(env, format, config, producer, consumers).build().unwrap()
}

/// Every frame `t` of `results` holds pattern `t`; a failure says how many frames differ and
/// whether the first one holds the slot's previous frame (a stale read).
#[cfg(feature = "cuda")]
fn assert_frames(results: &[u8], frames: usize, slots: usize) {
    let frame = |t: usize| &results[t * N..(t + 1) * N];
    let bad: Vec<usize> = (0..frames).filter(|&t| frame(t) != &expected_pattern(N, t as u32)[..]).collect();
    if let Some(&t) = bad.first() {
        let stale = t >= slots && frame(t) == &expected_pattern(N, (t - slots) as u32)[..];
        let zero = frame(t).iter().all(|&b| b == 0);
        panic!(
            "{} of {frames} frames differ from their pattern; the first, frame {t}, holds {}",
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

/// A CPU consumer on its own thread checking that frame `t` holds pattern `t`.
fn spawn_recorder(mut r: Consumer, frames: usize) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for t in 0..frames {
            let g = r.acquire().unwrap();
            assert_eq!(g.sequence(), t as u64);
            let want = expected_pattern(N, t as u32);
            assert!(r.cpu_read(&g).unwrap()[..] == want[..], "recorder {}: frame {t} differs", r.id());
            r.release(g).unwrap();
        }
    })
}

/// A CPU camera on its own thread writing pattern `t` into frame `t` in place.
fn spawn_cpu_camera(mut p: Producer, frames: usize) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for t in 0..frames {
            let f = p.acquire().unwrap();
            assert_eq!(f.sequence(), t as u64);
            p.cpu_write(&f).unwrap().copy_from_slice(&expected_pattern(N, t as u32));
            p.present(f).unwrap();
        }
    })
}

#[cfg(feature = "cuda")]
mod gpu {
    //! The CUDA sides of the scenarios.
    pub use super::super::common::kernels::FILL_PATTERN_PTX;
    use super::*;
    use nvsci::cuda::cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
    use nvsci::cuda::cudarc::nvrtc::Ptx;
    use std::sync::Arc;

    pub fn fill_kernel(dev: &nvsci::cuda::CudaGpu) -> CudaFunction {
        dev.context()
            .load_module(Ptx::from_src(FILL_PATTERN_PTX))
            .unwrap()
            .load_function("fill_pattern")
            .unwrap()
    }

    /// A CUDA consumer on a stream of its own, copying every frame into device memory.
    pub struct Copier {
        pub consumer: Consumer,
        pub stream: Arc<CudaStream>,
        pub results: CudaSlice<u8>,
    }

    impl Copier {
        pub fn new(mut consumer: Consumer, frames: usize) -> Self {
            let stream = consumer.stream().expect("a CUDA consumer").context().new_stream().unwrap();
            consumer.set_stream(stream.clone()).unwrap();
            let results = stream.alloc_zeros::<u8>(N * frames).unwrap();
            Self { consumer, stream, results }
        }

        /// Takes frame `t` on the stream.
        pub fn take(&mut self, t: usize) {
            let results = &mut self.results;
            self.consumer
                .process(|f| {
                    assert_eq!(f.sequence(), t as u64);
                    let mut dst = results.slice_mut(t * N..(t + 1) * N);
                    f.stream().memcpy_dtod(f.buffer(), &mut dst).map_err(Error::from)
                })
                .unwrap();
        }

        pub fn check(&self, frames: usize) {
            let host = self.stream.clone_dtoh(&self.results).unwrap();
            assert_frames(&host, frames, 4);
        }
    }

    /// A CUDA producer writing pattern `t` into frame `t` with a kernel on its stream.
    pub fn produce(p: &mut Producer, fill: &CudaFunction, t: usize) {
        p.produce(|f| {
            assert_eq!(f.sequence(), t as u64);
            let ptr = f.device_address();
            let (n, seed) = (N as u64, t as u32);
            let mut b = f.stream().launch_builder(fill);
            b.arg(&ptr).arg(&n).arg(&seed);
            let cfg = LaunchConfig {
                grid_dim: ((N as u32).div_ceil(256), 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: `ptr` maps N writable bytes of the frame; the kernel writes p[0..n].
            unsafe { b.launch(cfg) }.map(drop).map_err(Error::from)
        })
        .unwrap();
    }
}

/// Runs `frames` frames of `N` bytes from a producer on `producer` to consumers on
/// `consumers`, each frame checked by every consumer: CPU parties on threads of their own,
/// CUDA parties on this thread, each on a stream of its own.
fn run_frames(env: &Env, producer: &Engine, consumers: &[Engine], frames: usize) {
    let ring = ring(env, FrameFormat::Raw { size: N as u64 }, config(), producer, consumers);
    assert_eq!(ring.layout().size, N as u64);
    #[cfg_attr(not(feature = "cuda"), allow(unused_mut))]
    let (mut p, cs) = ring.split().unwrap();
    let mut recorders = Vec::new();
    #[cfg(feature = "cuda")]
    let mut copiers = Vec::new();
    for c in cs {
        if c.engine().is_cpu() {
            recorders.push(spawn_recorder(c, frames));
        } else {
            #[cfg(feature = "cuda")]
            copiers.push(gpu::Copier::new(c, frames));
        }
    }
    if producer.is_cpu() {
        let camera = spawn_cpu_camera(p, frames);
        #[cfg(feature = "cuda")]
        for t in 0..frames {
            for c in copiers.iter_mut() {
                c.take(t);
            }
        }
        camera.join().unwrap();
    } else {
        #[cfg(feature = "cuda")]
        {
            let stream = p.stream().unwrap().context().new_stream().unwrap();
            p.set_stream(stream).unwrap();
            let fill = gpu::fill_kernel(&env.dev().unwrap());
            for t in 0..frames {
                gpu::produce(&mut p, &fill, t);
                for c in copiers.iter_mut() {
                    c.take(t);
                }
            }
        }
    }
    for r in recorders {
        r.join().unwrap();
    }
    #[cfg(feature = "cuda")]
    for c in &copiers {
        c.check(frames);
    }
}

/// Frames come in order, slot after slot, with their contents, to three CPU consumers on
/// threads of their own.
pub fn frames_arrive_in_order_with_their_contents(env: &Env) {
    let r = ring(env, FrameFormat::Raw { size: 4096 }, config().with_frames(3), &Engine::Cpu, &[Engine::Cpu]);
    let (mut p, mut cs) = r.split().unwrap();
    let c = &mut cs[0];
    for seq in 0..10u64 {
        let f = p.acquire().unwrap();
        assert_eq!((f.sequence(), f.index()), (seq, (seq % 3) as usize));
        p.cpu_write(&f).unwrap().fill(seq as u8);
        p.present(f).unwrap();
        let g = c.acquire().unwrap();
        assert_eq!((g.sequence(), g.index()), (seq, (seq % 3) as usize));
        assert!(c.cpu_read(&g).unwrap().iter().all(|&b| b == seq as u8));
        c.release(g).unwrap();
    }
    run_frames(env, &Engine::Cpu, &[Engine::Cpu, Engine::Cpu, Engine::Cpu], 200);
}

/// The producer waits for every consumer and times out naming the one that holds the slot; a
/// consumer times out without frames; an unbounded timeout does not overflow the clock.
pub fn timeouts_name_who_holds_the_frame(env: &Env) {
    let cfg = config().with_frames(2).with_timeout(Duration::from_millis(50));
    let r = ring(env, FrameFormat::Raw { size: 256 }, cfg, &Engine::Cpu, &[Engine::Cpu, Engine::Cpu]);
    let (mut p, mut cs) = r.split().unwrap();
    for _ in 0..2 {
        let f = p.acquire().unwrap();
        p.present(f).unwrap();
    }
    // Consumer 0 takes and releases frame 0; consumer 1 takes it but never releases.
    let a = cs[0].acquire().unwrap();
    cs[0].release(a).unwrap();
    let _stuck = cs[1].acquire().unwrap();
    match p.acquire() {
        Err(Error::Timeout { timeout, waited_for }) => {
            assert_eq!(timeout, Duration::from_millis(50));
            match waited_for {
                Wait::FreeSlot { slot: 0, sequence: 0, holders } => {
                    assert_eq!(holders.iter().collect::<Vec<_>>(), [1], "only consumer 1 holds frame 0")
                }
                other => panic!("expected a wait for a free slot (slot 0, frame 0), got {other:?}"),
            }
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    let (_p, mut cs) =
        ring(env, FrameFormat::Raw { size: 256 }, cfg, &Engine::Cpu, &[Engine::Cpu, Engine::Cpu])
            .split()
            .unwrap();
    assert!(matches!(cs[0].acquire(), Err(Error::Timeout { waited_for: Wait::Frame, .. })));
    let cfg = config().with_timeout(Duration::MAX);
    let (mut p, mut cs) =
        ring(env, FrameFormat::Raw { size: 64 }, cfg, &Engine::Cpu, &[env.engine()]).split().unwrap();
    let f = p.acquire().unwrap();
    p.present(f).unwrap();
    let g = cs[0].acquire().unwrap();
    cs[0].release(g).unwrap();
}

pub fn cpu_camera_feeds_an_engine_consumer_and_a_cpu_recorder_1000_frames(env: &Env) {
    run_frames(env, &Engine::Cpu, &[env.engine(), Engine::Cpu], frames());
}

pub fn engine_producer_feeds_an_engine_consumer_and_a_cpu_recorder_1000_frames(env: &Env) {
    run_frames(env, &env.engine(), &[env.engine(), Engine::Cpu], frames());
}

/// Only engine parties (on a GPU backend: CUDA streams; on Vulkan the frames are device-local,
/// so the CPU cannot touch them).
pub fn engine_producer_feeds_two_engine_consumers_1000_frames(env: &Env) {
    let e = env.engine();
    if !e.is_cpu() {
        // An engine party's frames are not the CPU's: refused before any byte is touched.
        let r = ring(env, FrameFormat::Raw { size: N as u64 }, config(), &e, std::slice::from_ref(&e));
        let (mut p, mut cs) = r.split().unwrap();
        let f = p.acquire().unwrap();
        assert!(matches!(p.cpu_write(&f), Err(Error::InvalidArgument { name: "frame", .. })));
        p.present(f).unwrap();
        let g = cs[0].acquire().unwrap();
        assert!(matches!(cs[0].cpu_read(&g), Err(Error::InvalidArgument { name: "frame", .. })));
        cs[0].release(g).unwrap();
    }
    run_frames(env, &e, &[e.clone(), e.clone()], frames());
}

/// What a ring can leave behind: open fds, mock handles, and device memory where the backend
/// has a CUDA device (`None` on the CPU-only backend, whose buffers are mock objects the handle
/// ledger counts), counted once the CUDA destroys queued by earlier drops have run.
#[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
fn footprint(env: &Env) -> (usize, nvsci_mock::HandleCounts, Option<usize>) {
    #[cfg(feature = "cuda")]
    let mem = env.dev().map(|dev| {
        super::common::settle(&dev);
        let (free, total) = nvsci::cuda::cudarc::driver::result::mem_get_info().unwrap();
        total - free
    });
    #[cfg(not(feature = "cuda"))]
    let mem = None;
    (open_fds(), nvsci_mock::global_ledger().counts(), mem)
}

/// Whole rings come and go without leaking fds, mock handles or device memory (the first run
/// warms up module loading and first-use allocations).
pub fn rings_leak_nothing(env: &Env) {
    let run = || run_frames(env, &Engine::Cpu, &[env.engine()], 200);
    run();
    let (fds0, handles0, mem0) = footprint(env);
    run();
    let (fds1, handles1, mem1) = footprint(env);
    assert_eq!(fds1, fds0, "fds leaked");
    // The harness runs one scenario at a time, so the mock's ledger is exact.
    assert_eq!(handles1, handles0, "mock handles leaked");
    if let (Some(mem0), Some(mem1)) = (mem0, mem1) {
        assert!(mem1 <= mem0 + (8 << 20), "device memory grew by {} bytes", mem1.saturating_sub(mem0));
    }
}

pub fn bad_input_is_refused(env: &Env) {
    let e = env.engine();
    let raw = FrameFormat::Raw { size: 4096 };
    for frames in [0usize, 1, 17] {
        let c = config().with_frames(frames);
        let r = builder(env, raw, c, &Engine::Cpu, std::slice::from_ref(&e)).build();
        assert!(matches!(r, Err(Error::InvalidArgument { name: "frames", .. })), "{frames}: {r:?}");
    }
    for consumers in [0usize, nvsci::pipeline::MAX_CONSUMERS + 1] {
        let engines = vec![e.clone(); consumers];
        let r = builder(env, raw, config(), &Engine::Cpu, &engines).build();
        assert!(matches!(r, Err(Error::InvalidArgument { name: "consumers", .. })), "{consumers}: {r:?}");
    }
    let formats = [
        (FrameFormat::Raw { size: 0 }, "format.size"),
        (FrameFormat::nv12(0, 480), "format"),
        (FrameFormat::nv12(641, 480), "format"),
        (FrameFormat::nv12(640, 481), "format"),
        (FrameFormat::nv12(64, 0), "format"),
        (FrameFormat::Rgba { width: 64, height: 0 }, "format"),
    ];
    for (fmt, field) in formats {
        match builder(env, fmt, config(), &Engine::Cpu, std::slice::from_ref(&e)).build() {
            Err(Error::InvalidArgument { name, .. }) => assert_eq!(name, field, "{fmt:?}"),
            other => panic!("{fmt:?}: expected InvalidArgument, got {other:?}"),
        }
    }
    let r = builder(env, raw, config(), &Engine::Cpu, std::slice::from_ref(&e))
        .consumer(ConsumerDesc::cpu().with_limit(0))
        .build();
    assert!(matches!(r, Err(Error::InvalidArgument { name: "limit", .. })), "{r:?}");
}

/// Tokens cannot jam the ring: a dropped producer frame is discarded (the same slot and
/// sequence come again), a dropped consumer frame is released after its present fence, also
/// when dropped during a panic.
pub fn dropped_tokens_do_not_jam_the_ring(env: &Env) {
    let e = env.engine();
    let r = ring(env, FrameFormat::Raw { size: 4096 }, config(), &Engine::Cpu, std::slice::from_ref(&e));
    let (mut p, mut cs) = r.split().unwrap();
    let f = p.acquire().unwrap();
    assert_eq!((f.index(), f.sequence()), (0, 0));
    drop(f);
    let f = p.acquire().unwrap();
    assert_eq!((f.index(), f.sequence()), (0, 0));
    assert!(matches!(p.acquire(), Err(Error::InvalidArgument { name: "producer", .. })));
    p.present(f).unwrap();
    drop(cs[0].acquire().unwrap());
    for seq in 1..10 {
        let f = p.acquire().unwrap();
        assert_eq!(f.sequence(), seq);
        p.present(f).unwrap();
        if seq % 3 == 0 {
            // The frame is held when the closure panics: its drop during the unwind releases it
            // (the ring's last check below fails if it does not).
            let mut held = None;
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let g = cs[0].acquire().unwrap();
                held = Some(g.sequence());
                panic!("consumer failed");
            }));
            assert_eq!(held, Some(seq), "the closure acquired frame {seq} before it panicked");
            let payload = r.expect_err("the consumer panicked");
            assert_eq!(payload.downcast_ref::<&str>(), Some(&"consumer failed"), "its own panic");
        } else {
            let g = cs[0].acquire().unwrap();
            assert_eq!(g.sequence(), seq);
            cs[0].release(g).unwrap();
        }
    }
    // Every slot came back: four more frames fit without a consumer.
    for _ in 0..4 {
        let f = p.acquire().unwrap();
        p.present(f).unwrap();
    }
}

pub fn tokens_of_other_rings_and_consumers_are_refused(env: &Env) {
    let e = env.engine();
    let fmt = FrameFormat::Raw { size: 4096 };
    let a = ring(env, fmt, config(), &Engine::Cpu, &[e.clone(), e.clone()]);
    let b = ring(env, fmt, config(), &Engine::Cpu, &[e.clone(), e.clone()]);
    assert_ne!(a.id(), b.id());
    let (mut pa, mut ca) = a.split().unwrap();
    let (mut pb, _cb) = b.split().unwrap();
    let f = pa.acquire().unwrap();
    assert!(matches!(pb.present(f), Err(Error::InvalidArgument { name: "frame", .. })));
    let f = pa.acquire().unwrap();
    pa.present(f).unwrap();
    let g = ca[0].acquire().unwrap();
    let (c0, c1) = ca.split_at_mut(1);
    assert!(matches!(c1[0].release(g), Err(Error::InvalidArgument { name: "frame", .. })));
    let g = c1[0].acquire().unwrap();
    c1[0].release(g).unwrap();
    // Consumer 0's frame was dropped by the refused release: released after a CPU wait, so the
    // slot is free again once consumer 1 released it too.
    let _ = c0;
    for _ in 0..4 {
        let f = pa.acquire().unwrap();
        pa.present(f).unwrap();
        for c in ca.iter_mut() {
            let g = c.acquire().unwrap();
            c.release(g).unwrap();
        }
    }
}

/// NV12 frames of the conversion scenarios: a small run where the CPU converts (a debug build
/// converts pixel by pixel), a larger one on a GPU engine; more frames than slots either way,
/// so a stale slot shows.
fn nv12_run(env: &Env) -> (u32, u32, u64) {
    if env.engine().is_cpu() {
        (128, 72, 12)
    } else {
        (640, 360, 120)
    }
}

/// What the converting consumer made of the NV12 frames: the statistic it computed for each
/// frame and each frame's packed RGBA, read back on the host.
struct Converted {
    width: u32,
    height: u32,
    sums: Vec<u64>,
    rgba: Vec<u8>,
}

/// Why converted frames are wrong: the first frame whose statistic (the fast pre-check) or
/// whose pixels differ from the oracle's.
#[derive(Debug)]
#[allow(dead_code)] // the fields are read through Debug, in the failure message
enum FrameMismatch {
    Statistic { frame: u64, got: u64, want: u64 },
    Pixels { frame: u64, at: bt601::Difference },
}

/// A CPU camera writes frame `t` of the NV12 pattern in place; the consumer on the engine
/// converts it to RGBA in place (`nvsci::convert` on the CPU, its CUDA kernel on a stream, each
/// frame into an RGBA buffer of its own), and `fault`, where given, breaks each converted frame
/// as a broken converter would.
fn convert_nv12_frames(env: &Env, fault: Option<bt601::Fault>) -> Converted {
    use super::nv12_pattern::fill_test_pattern;
    let (w, h, frames) = nv12_run(env);
    let frame_bytes = (w * h * 4) as usize;
    let r = ring(env, FrameFormat::nv12(w, h), config(), &Engine::Cpu, &[env.engine()]);
    let layout = r.layout().clone();
    let (mut p, cs) = r.split().unwrap();
    let mut consumer = cs.into_iter().next().unwrap();
    let mut present = |t: u64| {
        let f = p.acquire().unwrap();
        fill_test_pattern(&layout, t, &mut p.cpu_write(&f).unwrap()).unwrap();
        p.present(f).unwrap();
    };
    let (sums, mut rgba) = if consumer.engine().is_cpu() {
        let mut rgba = vec![0u8; frame_bytes * frames as usize];
        let mut sums = Vec::new();
        for (t, out) in (0..frames).zip(rgba.chunks_exact_mut(frame_bytes)) {
            present(t);
            let g = consumer.acquire().unwrap();
            assert_eq!(g.sequence(), t);
            sums.push(nvsci::convert::nv12_to_rgba(&layout, &consumer.cpu_read(&g).unwrap(), out).unwrap());
            consumer.release(g).unwrap();
        }
        (sums, rgba)
    } else {
        #[cfg(feature = "cuda")]
        {
            use nvsci::cuda::cudarc::driver::DevicePtr;
            let dev = env.dev().unwrap();
            let kernel = nvsci::convert::Nv12ToRgba::load(&dev).unwrap();
            let stream = dev.context().new_stream().unwrap();
            let rgba = stream.alloc_zeros::<u8>(frame_bytes * frames as usize).unwrap();
            let sums = stream.alloc_zeros::<u64>(frames as usize).unwrap();
            consumer.set_stream(stream.clone()).unwrap();
            for t in 0..frames {
                present(t);
                consumer
                    .process(|f| {
                        assert_eq!(f.sequence(), t);
                        let s = f.stream();
                        let (rgba_base, _a) = rgba.device_ptr(s);
                        let (sums_base, _b) = sums.device_ptr(s);
                        let dst = rgba_base + t * frame_bytes as u64;
                        let sum = sums_base + t * 8;
                        // SAFETY: the frame is a whole NV12 image of this layout; dst is frame
                        // t's w*h RGBA pixels of `rgba` and sum element t of `sums` (zeroed),
                        // all alive until the stream is read back below.
                        unsafe { kernel.enqueue(s, &layout, f.device_address(), dst, sum) }
                    })
                    .unwrap();
            }
            (stream.clone_dtoh(&sums).unwrap(), stream.clone_dtoh(&rgba).unwrap())
        }
        #[cfg(not(feature = "cuda"))]
        unreachable!("a GPU engine without the cuda feature")
    };
    if let Some(fault) = fault {
        rgba.chunks_exact_mut(frame_bytes).for_each(|f| fault.apply(f, w));
    }
    Converted { width: w, height: h, sums, rgba }
}

/// Checks every converted frame against the oracle's conversion of the pattern (computed from
/// the pattern's definition, not from the buffer or the crate's converters): its statistic
/// first, as a fast pre-check, then every pixel.
fn verify_nv12_frames(c: &Converted) -> Result<(), FrameMismatch> {
    use super::nv12_pattern::test_pattern_rgba;
    let frame_bytes = (c.width * c.height * 4) as usize;
    for (t, (&got, rgba)) in c.sums.iter().zip(c.rgba.chunks_exact(frame_bytes)).enumerate() {
        let frame = t as u64;
        let want = test_pattern_rgba(c.width, c.height, frame);
        let want_sum = bt601::statistic(&want);
        if got != want_sum {
            return Err(FrameMismatch::Statistic { frame, got, want: want_sum });
        }
        if let Some(at) = bt601::first_difference(rgba, &want, c.width) {
            return Err(FrameMismatch::Pixels { frame, at });
        }
    }
    Ok(())
}

/// A CPU camera writing NV12 frames in place, converted to RGBA in place by the engine, every
/// frame's pixels checked against the oracle (a different pattern every frame, so a stale slot
/// shows).
pub fn nv12_frames_are_converted_in_place_and_verified(env: &Env) {
    let c = convert_nv12_frames(env, None);
    assert_eq!(c.sums.len() as u64, nv12_run(env).2);
    if let Err(e) = verify_nv12_frames(&c) {
        panic!("{e:?}");
    }
}

/// The check of the scenario above fails on a broken converter: red and blue swapped, or one
/// pixel moved. Neither changes a frame's statistic, so the check passes its pre-check and
/// finds the pixels of frame 0.
pub fn a_broken_converter_fails_the_frame_check(env: &Env) {
    let (w, h, _) = nv12_run(env);
    // A pixel whose right neighbour differs, in the middle row of frame 0.
    let row = h / 2;
    let frame0 = super::nv12_pattern::test_pattern_rgba(w, h, 0);
    let px = |x: u32| &frame0[((row * w + x) * 4) as usize..][..4];
    let x = (w / 2..w - 1).find(|&x| px(x) != px(x + 1)).expect("neighbours that differ");
    for fault in [bt601::Fault::SwapRedBlue, bt601::Fault::MovePixel { x, y: row }] {
        let c = convert_nv12_frames(env, Some(fault));
        match (fault, verify_nv12_frames(&c)) {
            (bt601::Fault::SwapRedBlue, Err(FrameMismatch::Pixels { frame: 0, at })) => {
                let w = at.want;
                assert_eq!(at.got, [w[2], w[1], w[0], w[3]], "{fault:?}: {at:?}")
            }
            (bt601::Fault::MovePixel { x, y }, Err(FrameMismatch::Pixels { frame: 0, at })) => {
                assert_eq!((at.x, at.y), (x, y), "{fault:?}: {at:?}");
                assert_eq!(at.got[..], *px(x + 1), "{fault:?}: {at:?}");
            }
            (_, other) => panic!("{fault:?}: expected frame 0's pixels to differ, got {other:?}"),
        }
    }
}

/// The backend built on the application's own cudarc context (`Backend::new_on`,
/// `Backend::with_library_on`): the ring's CUDA parties import into that context and run on a
/// stream of it, frames verified; `Backend::auto_on` keeps the context too.
pub fn ring_on_the_applications_cuda_context(env: &Env) {
    #[cfg(feature = "cuda")]
    {
        let ctx = nvsci::cuda::cudarc::driver::CudaContext::new(0).unwrap();
        let app = nvsci::cuda::CudaGpu::from_context(ctx.clone()).unwrap();
        let Some(on_app) = env.reopen_on(&app) else { return };
        let used = on_app.backend.cuda().expect("a GPU backend has a CUDA device");
        assert!(std::sync::Arc::ptr_eq(used.context(), &ctx), "the backend opened a context of its own");
        run_frames(&on_app, &Engine::Cpu, &[on_app.engine(), Engine::Cpu], 200);
        let auto = nvsci::pipeline::Backend::auto_on(&app).unwrap();
        let used = auto.cuda().expect("a GPU host gives the chosen backend a CUDA engine");
        assert!(std::sync::Arc::ptr_eq(used.context(), &ctx), "{}", auto.explain());
    }
    #[cfg(not(feature = "cuda"))]
    let _ = env;
}

/// Writes pattern `t` into a CPU producer's frame `t`, stamps its capture time and user
/// header, and presents it.
fn present_cpu(p: &mut Producer, t: u64) {
    let mut f = p.acquire().unwrap();
    assert_eq!(f.sequence(), t);
    let n = p.layout().size as usize;
    p.cpu_write(&f).unwrap()[..n].copy_from_slice(&expected_pattern(n, t as u32));
    f.set_capture_time(1_000_000 + t);
    f.user_header_mut()[..8].copy_from_slice(&t.to_le_bytes());
    p.present(f).unwrap();
}

/// Checks a CPU consumer's frame against pattern `t` and the metadata `present_cpu` set.
fn check_cpu(c: &Consumer, f: &nvsci::pipeline::ConsumerFrame, t: u64) {
    assert_eq!(f.sequence(), t);
    assert_eq!(f.capture_time(), 1_000_000 + t, "capture time of frame {t}");
    assert_eq!(f.user_header()[..8], t.to_le_bytes(), "user header of frame {t}");
    assert!(f.user_header()[8..].iter().all(|&b| b == 0));
    let n = c.layout().size as usize;
    assert!(c.cpu_read(f).unwrap()[..n] == expected_pattern(n, t as u32)[..], "frame {t} differs");
}

/// A slow mailbox consumer gets the newest frame each time and holds the camera back by the
/// one frame it holds: the CPU camera presents every frame without waiting (its timeout is
/// short, so a wait for the mailbox consumer would fail the acquire) while a FIFO consumer on
/// the engine takes every frame.
pub fn a_slow_mailbox_consumer_gets_the_newest_frame_and_never_holds_the_camera(env: &Env) {
    let ring = env
        .backend
        .stream(FrameFormat::Raw { size: 4096 })
        .frames(3)
        .timeout(Duration::from_millis(300))
        .consumer(ConsumerDesc::cpu().mailbox())
        .consumer(ConsumerDesc::new(env.engine()))
        .build()
        .unwrap();
    let (mut p, mut cs) = ring.split().unwrap();
    let (mailbox, fifo) = cs.split_at_mut(1);
    let (mailbox, fifo) = (&mut mailbox[0], &mut fifo[0]);
    assert_eq!(mailbox.mode(), QueueMode::Mailbox);
    let mut held = None;
    for t in 0..60u64 {
        present_cpu(&mut p, t);
        let g = fifo.acquire().unwrap();
        assert_eq!(g.sequence(), t, "the FIFO consumer gets every frame in order");
        fifo.release(g).unwrap();
        if t % 10 == 0 {
            // The newest frame, whatever came before it.
            let f = mailbox.acquire().unwrap();
            check_cpu(mailbox, &f, t);
            held = Some(f);
        } else if t % 10 == 5 {
            // Held across five presents: the camera never waited for it.
            let f = held.take().unwrap();
            check_cpu(mailbox, &f, t - 5);
            mailbox.release(f).unwrap();
        }
    }
    // 60 presents: 6 acquired, frame 59 waiting in the mailbox, every other one skipped.
    let s = mailbox.stats();
    assert_eq!((s.delivered, s.skipped, s.last_sequence), (6, 53, Some(50)));
    let s = fifo.stats();
    assert_eq!((s.delivered, s.skipped, s.last_sequence), (60, 0, Some(59)));
}

/// A consumer attaches to a running stream and gets frames from the next present on, within
/// its limit (frames beyond are skipped for it, not waited for); it detaches by being dropped,
/// with frames still queued, and the camera does not wait for them; the seat is attached
/// again. Attaching beyond the reserved seats, or with a limit of 0, is refused.
pub fn consumers_attach_leave_and_come_back(env: &Env) {
    let e = env.engine();
    let ring = env
        .backend
        .stream(FrameFormat::Raw { size: 4096 })
        .frames(4)
        .timeout(Duration::from_millis(300))
        .consumer(ConsumerDesc::cpu())
        .reserve(ConsumerDesc::new(e.clone()), 1)
        .build()
        .unwrap();
    let (mut p, mut cs) = ring.split().unwrap();
    assert_eq!(cs.len(), 1, "the reserved seat is not handed out by split");
    let c0 = &mut cs[0];
    let attacher = p.attacher();
    let t = std::cell::Cell::new(0u64);
    let step = |p: &mut Producer, c0: &mut Consumer| {
        present_cpu(p, t.get());
        let g = c0.acquire().unwrap();
        check_cpu(c0, &g, t.get());
        c0.release(g).unwrap();
        t.set(t.get() + 1);
    };
    for _ in 0..3 {
        step(&mut p, c0);
    }
    let mut late = attacher.attach(ConsumerDesc::new(e.clone()).with_limit(2)).unwrap();
    assert_eq!(late.id(), 1);
    // Seats whose engine fits: the reserved one, and the first one too where both are the CPU.
    let fitting = if e.is_cpu() { 2 } else { 1 };
    match attacher.attach(ConsumerDesc::new(e.clone())) {
        Err(Error::Ring(RingError::NoSeat { fitting: f })) => assert_eq!(f, fitting),
        other => panic!("expected no seat, got {other:?}"),
    }
    assert!(matches!(
        attacher.attach(ConsumerDesc::new(e.clone()).with_limit(0)),
        Err(Error::InvalidArgument { name: "limit", .. })
    ));
    // Frames 3, 4 and 5: the late consumer takes 3 and 4 (its limit), 5 is skipped for it.
    for _ in 0..3 {
        step(&mut p, c0);
    }
    for want in [3u64, 4] {
        let g = late.acquire().unwrap();
        assert_eq!(g.sequence(), want);
        if e.is_cpu() {
            check_cpu(&late, &g, want);
        }
        late.release(g).unwrap();
    }
    assert!(matches!(late.acquire(), Err(Error::Timeout { waited_for: Wait::Frame, .. })));
    let s = late.stats();
    assert_eq!((s.delivered, s.skipped, s.last_sequence), (2, 1, Some(4)));
    // Two frames queued for it when it leaves: the camera goes on at once.
    for _ in 0..2 {
        step(&mut p, c0);
    }
    drop(late);
    for _ in 0..8 {
        step(&mut p, c0);
    }
    // The seat is free again: a new consumer gets frames from the next present on.
    let mut again = attacher.attach(ConsumerDesc::new(e.clone())).unwrap();
    assert_eq!(again.id(), 1);
    let next = t.get();
    step(&mut p, c0);
    let g = again.acquire().unwrap();
    assert_eq!(g.sequence(), next);
    again.release(g).unwrap();
    assert_eq!(again.stats().delivered, 1);
}
