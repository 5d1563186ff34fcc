//! The bridge against raw Zenoh, in one process and one run: two Zenoh peer sessions over TCP
//! on the loopback interface (multicast scouting off, explicit endpoints), a raw subscriber on
//! the receiving one. The frames are 1080p NV12 of the mock's layout, whose rows are padded to
//! 2048 bytes; the bridge publishes them two ways (`Rows`), each against raw Zenoh putting a
//! message of the same bytes:
//!
//! * raw (stored rows): the sending session puts the same bytes as the bridge's message with
//!   rows as the frame stores them (`step` 2048: 3 317 808 bytes) from one shared buffer (no copy
//!   per put: the floor), with a 33-byte attachment as the bridge's, which carries the send time;
//! * raw (packed rows): the same with rows of 1920 bytes (3 110 448 bytes);
//! * raw + copy: packed, with one copy of the message into a new buffer per put (what a copy into
//!   a fresh allocation per frame costs, without the stream);
//! * bridge (stored rows): a camera (mock NvSci stream, CPU producer) presents 1080p NV12 frames;
//!   the bridge consumer (a mailbox) publishes each from the frame's mapping (no copy) on the same
//!   session;
//! * bridge (packed rows): the same, each frame's rows copied once into a message buffer the
//!   bridge reuses;
//! * with `--cuda` (a CUDA GPU, the mock in GPU mode): bridge (CUDA), a CUDA camera (producer on
//!   the GPU) and the bridge consumer on the GPU too, which copies each frame's rows device ->
//!   pinned host memory on its stream (ordered by the ring's fences) straight into the buffers it
//!   publishes, both ways; and beside it the raw floor of that copy: `cuMemcpyDtoHAsync` of the
//!   same bytes (the frame's own mapping, and device memory of the same size) into pinned
//!   memory, then a stream synchronise, timed one copy at a time against the bridge's copy time
//!   (`PublishStats::readback_ns`: enqueue to done, the present wait included; and
//!   `readback_copy_ns`: the copies alone on the device, between two CUDA events).
//!
//! Two measures each: frames/s received while the sender goes as fast as it can (raw: puts back
//! to back; bridge: the camera presents the next frame as soon as the bridge took the previous
//! one, so the bridge never waits for a frame and the camera does not spin on the shared
//! cores), and the latency of one frame at a time (put, or present, to the subscriber's
//! callback; the next one after the previous arrived), p50 and p90.
//!
//! ```text
//! cargo run --release --manifest-path nvsci-zenoh/Cargo.toml --example zenoh_bench -- --frames 300
//! cargo run --release --manifest-path nvsci-zenoh/Cargo.toml --example zenoh_bench -- --frames 300 --cuda
//! ```

#[path = "support/args.rs"]
mod args;
#[path = "../../examples/support/percentile.rs"]
mod percentile;

use args::arg;
use nvsci::pipeline::{Backend, Consumer, ConsumerDesc, FrameFormat, Producer};
use nvsci_zenoh::cdr::{Image, Time};
use nvsci_zenoh::{BridgeConfig, BridgeConsumer, PublishStats, Rows, StampClock};
use percentile::pct;
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use zenoh::bytes::ZBytes;
use zenoh::Wait;

static BASE: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since the start of the run (at least 1).
fn now_ns() -> u64 {
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A 1080p camera's stream on the mock (CPU producer) whose one consumer is a mailbox, every
/// slot holding a picture once (the benchmark then presents without rewriting them).
fn cpu_stream(w: u32, h: u32) -> Res<(Producer, Consumer)> {
    let ring = Backend::with_library(nvsci::NvSci::mock())
        .stream(FrameFormat::nv12(w, h))
        .frames(4)
        .timeout(Duration::from_millis(200))
        .consumer(ConsumerDesc::cpu().mailbox())
        .build()?;
    let (mut camera, mut consumers) = ring.split()?;
    for _ in 0..4 {
        let f = camera.acquire()?;
        camera.cpu_write(&f)?.fill(0x80);
        camera.present(f)?;
    }
    Ok((camera, consumers.remove(0)))
}

/// A message of `h` NV12 rows (and `h / 2` chroma rows) of `step` bytes, `w` pixels wide.
fn message(w: u32, h: u32, step: u32) -> Res<Vec<u8>> {
    let pixels = vec![0x80u8; (step * h * 3 / 2) as usize];
    let image = Image {
        stamp: Time::default(),
        frame_id: "",
        height: h,
        width: w,
        encoding: "nv12",
        is_bigendian: 0,
        step,
        data: &pixels,
    };
    Ok(image.encode()?)
}

fn main() -> Res<()> {
    now_ns();
    let cuda = std::env::args().any(|a| a == "--cuda");
    #[cfg(not(feature = "cuda"))]
    if cuda {
        return Err("--cuda: this build has no `cuda` feature".into());
    }
    let (w, h) = (arg("--width", 1920u32), arg("--height", 1080u32));
    let frames = arg("--frames", 300u64);
    let samples = arg("--latency-samples", 100usize);
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let cfg =
        BridgeConfig::new("/bench/image").multicast_scouting(false).reliable().stamp_clock(StampClock::AsIs);
    let tx = zenoh::open(cfg.clone().listen(format!("tcp/127.0.0.1:{port}")).zenoh_config()?).wait()?;
    let rx = zenoh::open(cfg.clone().connect(format!("tcp/127.0.0.1:{port}")).zenoh_config()?).wait()?;

    // Receiving side: (arrival, sent) nanoseconds of every message, raw and bridged.
    let (raw_tx, raw_rx) = mpsc::channel::<(u64, u64)>();
    let _raw_sub = rx
        .declare_subscriber("bench/raw")
        .callback(move |s| {
            let t = now_ns();
            let a = s.attachment().map(|a| a.to_bytes().into_owned()).unwrap_or_default();
            let sent = a.get(..8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
            let _ = raw_tx.send((t, sent));
        })
        .wait()?;
    let (br_tx, br_rx) = mpsc::channel::<(u64, u64)>();
    let _bridge_sub = rx
        .declare_subscriber(cfg.key_expr())
        .callback(move |s| {
            let t = now_ns();
            let p = s.payload().to_bytes();
            let sent = Image::decode(&p).ok().and_then(|i| i.stamp.to_nanos()).unwrap_or(0);
            let _ = br_tx.send((t, sent));
        })
        .wait()?;
    std::thread::sleep(Duration::from_millis(500));

    // The raw floors: the same bytes as a bridge message of each kind, from one shared buffer.
    let pitch = cpu_stream(w, h)?.1.layout().planes[0].pitch;
    let stored = message(w, h, pitch)?;
    let packed = message(w, h, w)?;
    let sizes = (stored.len(), packed.len());
    let raw_pub = tx
        .declare_publisher("bench/raw")
        .congestion_control(zenoh::qos::CongestionControl::Block)
        .reliability(zenoh::qos::Reliability::Reliable)
        .wait()?;
    let mut raw = Vec::new();
    for (m, copy) in [(stored, false), (packed.clone(), false), (packed, true)] {
        let payload = ZBytes::from(m.clone());
        let raw_put = |sent: u64| -> zenoh::Result<()> {
            let mut attachment = vec![0u8; 33];
            attachment[..8].copy_from_slice(&sent.to_le_bytes());
            let p = if copy { ZBytes::from(m.clone()) } else { payload.clone() };
            raw_pub.put(p).attachment(attachment).wait()
        };
        // Throughput: back to back.
        let start = Instant::now();
        for _ in 0..frames {
            raw_put(now_ns())?;
        }
        let mut got = 0;
        while got < frames && raw_rx.recv_timeout(Duration::from_secs(10)).is_ok() {
            got += 1;
        }
        let fps = got as f64 / start.elapsed().as_secs_f64();
        // Latency: one at a time.
        let mut lat = Vec::with_capacity(samples);
        for _ in 0..samples {
            raw_put(now_ns())?;
            let (t, sent) = raw_rx.recv_timeout(Duration::from_secs(10))?;
            lat.push((t - sent) as f64 / 1e6);
        }
        raw.push((fps, lat));
    }

    // The bridge, on the CPU, both ways.
    let mut cpu = Vec::new();
    for rows in [Rows::Stored, Rows::Packed] {
        let (mut camera, consumer) = cpu_stream(w, h)?;
        let cfg = cfg.clone().rows(rows);
        let run = Run { session: &tx, cfg: &cfg, arrivals: &br_rx, frames, samples };
        cpu.push(run.bridge(&mut camera, consumer)?);
    }
    #[cfg(feature = "cuda")]
    let mut gpu = if cuda {
        let run = Run { session: &tx, cfg: &cfg, arrivals: &br_rx, frames, samples };
        Some(cuda_run::run(&run, w, h)?)
    } else {
        None
    };

    println!(
        "{w}x{h} NV12 (rows of {pitch} bytes in the frames), {} bytes per message as stored, {} packed; \
         {frames} frames, {samples} latency samples",
        sizes.0, sizes.1
    );
    println!("{:<24} {:>10} {:>10} {:>10}", "", "frames/s", "p50 ms", "p90 ms");
    let mut floors = Vec::new();
    for (name, (fps, lat)) in
        ["raw (stored rows)", "raw (packed rows)", "raw + copy (packed)"].iter().zip(&mut raw)
    {
        let (p50, p90) = (pct(lat, 0.5), pct(lat, 0.9));
        println!("{name:<24} {fps:>10.1} {p50:>10.3} {p90:>10.3}");
        floors.push((*fps, p50));
    }
    let names = ["bridge (stored rows)", "bridge (packed rows)"];
    for (name, f) in names.iter().zip(&mut cpu) {
        f.row(name);
    }
    #[cfg(feature = "cuda")]
    if let Some(g) = &mut gpu {
        for (name, f) in ["bridge (CUDA, stored)", "bridge (CUDA, packed)"].iter().zip(&mut g.bridges) {
            f.row(name);
        }
    }
    for ((name, f), floor) in names.iter().zip(&mut cpu).zip(&floors) {
        f.ratios(name, "raw of the same bytes", *floor);
    }
    cpu[0].ratios(names[0], "raw (packed rows)", floors[1]);
    #[cfg(feature = "cuda")]
    if let Some(g) = &mut gpu {
        for ((name, f), floor) in
            ["bridge (CUDA, stored)", "bridge (CUDA, packed)"].iter().zip(&mut g.bridges).zip(&floors)
        {
            f.ratios(name, "raw of the same bytes", *floor);
        }
        g.report();
    }
    Ok(())
}

/// What every bridge run shares: the sending session, the configuration, the arrivals of the
/// bridge's messages at the receiving session, and the sizes of the run.
struct Run<'a> {
    session: &'a zenoh::Session,
    cfg: &'a BridgeConfig,
    arrivals: &'a mpsc::Receiver<(u64, u64)>,
    frames: u64,
    samples: usize,
}

/// A bridge's figures.
struct Figures {
    fps: f64,
    lat: Vec<f64>,
    /// During the throughput run.
    published: u64,
    skipped: u64,
    /// At the end.
    stats: PublishStats,
}

impl Figures {
    fn row(&mut self, name: &str) {
        let (p50, p90) = (pct(&mut self.lat, 0.5), pct(&mut self.lat, 0.9));
        println!("{name:<24} {:>10.1} {p50:>10.3} {p90:>10.3}", self.fps);
    }

    fn ratios(&mut self, name: &str, floor: &str, (raw_fps, raw_p50): (f64, f64)) {
        let p50 = pct(&mut self.lat, 0.5);
        println!("{name} / {floor}: frames/s {:.2}x, p50 latency {:.2}x", self.fps / raw_fps, p50 / raw_p50);
        println!(
            "  during the throughput run: {} published, {} frames skipped by its mailbox; {} copied on the CPU \
             in all; errors {}",
            self.published,
            self.skipped,
            self.stats.copied,
            self.stats.publish_errors + self.stats.stream_errors
        );
    }
}

impl Run<'_> {
    /// A bridge consumer on `consumer` (a mailbox consumer of `camera`'s stream, every slot of
    /// which holds a picture): frames/s with the camera presenting the next frame as soon as the
    /// bridge took the previous one, then the latency of one frame at a time.
    fn bridge(&self, camera: &mut Producer, consumer: Consumer) -> Res<Figures> {
        let (frames, br_rx) = (self.frames, self.arrivals);
        let bridge = BridgeConsumer::spawn_on(self.session.clone(), consumer, self.cfg)?;
        std::thread::sleep(Duration::from_millis(300));
        while br_rx.try_recv().is_ok() {}
        let published_before = bridge.stats().published;
        let start = Instant::now();
        let mut got = 0u64;
        // Throughput: the next frame as soon as the bridge took the previous one, until `frames`
        // messages arrived.
        let delivered = |c: &Producer| c.consumer_stats(0).map_or(0, |s| s.delivered);
        while got < frames && start.elapsed() < Duration::from_secs(60) {
            let taken = delivered(camera);
            let mut f = camera.acquire()?;
            f.set_capture_time(now_ns());
            camera.present(f)?;
            while delivered(camera) == taken && start.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_micros(100));
            }
            while br_rx.try_recv().is_ok() {
                got += 1;
            }
        }
        while got < frames && br_rx.recv_timeout(Duration::from_secs(10)).is_ok() {
            got += 1;
        }
        let fps = got as f64 / start.elapsed().as_secs_f64();
        let st = bridge.stats();
        let (published, skipped) = (st.published - published_before, st.skipped);
        std::thread::sleep(Duration::from_millis(300));
        while br_rx.try_recv().is_ok() {}
        // Latency: present one frame, wait for it to arrive.
        let mut lat = Vec::with_capacity(self.samples);
        for _ in 0..self.samples {
            let mut f = camera.acquire()?;
            let sent = now_ns();
            f.set_capture_time(sent);
            camera.present(f)?;
            loop {
                let (t, s) = br_rx.recv_timeout(Duration::from_secs(10))?;
                if s == sent {
                    lat.push((t - sent) as f64 / 1e6);
                    break;
                }
            }
        }
        Ok(Figures { fps, lat, published, skipped, stats: bridge.stop() })
    }
}

/// The CUDA rows: a CUDA camera and a CUDA bridge consumer on the mock in GPU mode, the bridge
/// publishing rows as stored and packed, and the raw device -> host copy of the same bytes.
#[cfg(feature = "cuda")]
mod cuda_run {
    use super::{pct, Figures, Res, Run};
    use nvsci::cuda::cudarc::driver::{result, CudaStream, DevicePtr, PinnedHostSlice};
    use nvsci::cuda::CudaGpu;
    use nvsci::pipeline::{Backend, Consumer, ConsumerDesc, Engine, FrameFormat, Producer};
    use nvsci_zenoh::Rows;
    use std::time::{Duration, Instant};

    /// The CUDA bridges (rows as stored, packed) and the copies' times (microseconds).
    pub struct Gpu {
        pub bridges: Vec<Figures>,
        bytes: usize,
        device: String,
        raw_frame: Vec<f64>,
        raw_device: Vec<f64>,
    }

    impl Gpu {
        pub fn report(&mut self) {
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            let (f_mean, d_mean) = (mean(&self.raw_frame), mean(&self.raw_device));
            println!(
                "device -> host copy of a {}-byte frame on {} (microseconds per frame):",
                self.bytes, self.device
            );
            println!("{:<52} {:>10} {:>10}", "", "mean", "p50");
            println!(
                "{:<52} {f_mean:>10.1} {:>10.1}",
                "raw cuMemcpyDtoHAsync, the frame's mapping",
                pct(&mut self.raw_frame, 0.5)
            );
            println!(
                "{:<52} {d_mean:>10.1} {:>10.1}",
                "raw cuMemcpyDtoHAsync, device memory",
                pct(&mut self.raw_device, 0.5)
            );
            for (rows, b) in ["stored", "packed"].iter().zip(&self.bridges) {
                let st = &b.stats;
                let n = st.readbacks.max(1) as f64;
                let (all, copy) = (st.readback_ns as f64 / 1e3 / n, st.readback_copy_ns as f64 / 1e3 / n);
                println!(
                    "{:<52} {all:>10.1} {:>10}",
                    format!("bridge, {rows} rows ({} frames): enqueue to done", st.readbacks),
                    "-"
                );
                println!(
                    "{:<52} {copy:>10.1} {:>10}",
                    format!("bridge, {rows} rows: the copies on the device"),
                    "-"
                );
                println!(
                    "bridge ({rows} rows) copy / raw copy of the frame's mapping: {:.2}x (the copies alone {:.2}x)",
                    all / f_mean,
                    copy / f_mean
                );
            }
        }
    }

    /// `n` raw copies of `len` bytes at `src` into `dst` on `stream`, each enqueued
    /// (`cuMemcpyDtoHAsync`) and waited for (`cuStreamSynchronize`) alone; microseconds each.
    fn raw_copies(stream: &CudaStream, src: u64, dst: &mut PinnedHostSlice<u8>, n: usize) -> Res<Vec<f64>> {
        let dst = dst.as_mut_slice()?;
        let mut t = Vec::with_capacity(n);
        for _ in 0..n {
            let start = Instant::now();
            // SAFETY: `src` is a device address of at least `dst.len()` bytes in `stream`'s
            // context, which stays mapped (its frame held, or its allocation alive) while this
            // function runs; `dst` is page-locked host memory of the same context, borrowed
            // mutably until the synchronise below, after which the copy is done.
            unsafe { result::memcpy_dtoh_async(dst, src, stream.cu_stream()) }?;
            stream.synchronize()?;
            t.push(start.elapsed().as_secs_f64() * 1e6);
        }
        Ok(t)
    }

    /// A CUDA camera's stream and its CUDA mailbox consumer, every slot holding a picture once,
    /// written on the camera's stream.
    fn cuda_stream(dev: &CudaGpu, w: u32, h: u32) -> Res<(Producer, Consumer)> {
        let ring = Backend::with_library_on(nvsci::NvSci::mock(), dev)
            .stream(FrameFormat::nv12(w, h))
            .frames(4)
            .timeout(Duration::from_millis(200))
            .producer(Engine::Cuda(dev.clone()))
            .consumer(ConsumerDesc::new(Engine::Cuda(dev.clone())).mailbox())
            .build()?;
        let (mut camera, mut consumers) = ring.split()?;
        let stream = camera.stream().ok_or("no camera stream")?.clone();
        let picture = vec![0x80u8; camera.layout().size as usize];
        for _ in 0..4 {
            let f = camera.acquire()?;
            stream.memcpy_htod(&picture, camera.cuda_buffer(&f)?)?;
            camera.present(f)?;
        }
        stream.synchronize()?;
        Ok((camera, consumers.remove(0)))
    }

    pub fn run(run: &Run<'_>, w: u32, h: u32) -> Res<Gpu> {
        let dev = CudaGpu::open(0)?;
        let device = dev.context().name().unwrap_or_else(|_| "a CUDA GPU".into());
        let (camera, mut consumer) = cuda_stream(&dev, w, h)?;
        // The raw floor: copies of a frame's own mapping (held meanwhile), then of device memory
        // of the same size, on the consumer's stream, into cacheable pinned memory as the
        // bridge's.
        let n = run.samples.max(100);
        let (raw_frame, raw_device, bytes) = {
            let f = consumer.acquire()?;
            let cs = consumer.stream().ok_or("no consumer stream")?.clone();
            let buffer = consumer.cuda_buffer(&f)?;
            let len = nvsci::cuda::cudarc::driver::DeviceSlice::len(buffer);
            // SAFETY: the memory is left uninitialised by the allocation; the copies write
            // every byte before anything reads it (nothing here reads it at all).
            let mut pinned = unsafe { cs.context().alloc_pinned_with_flags::<u8>(len, 0) }?;
            let warm = raw_copies(&cs, buffer.device_address(), &mut pinned, 10)?;
            drop(warm);
            let raw_frame = raw_copies(&cs, buffer.device_address(), &mut pinned, n)?;
            let device = cs.alloc_zeros::<u8>(len)?;
            let (dptr, _sync) = device.device_ptr(&cs);
            let raw_device = raw_copies(&cs, dptr, &mut pinned, n)?;
            drop(_sync);
            consumer.release(f)?;
            (raw_frame, raw_device, len)
        };
        let mut bridges = Vec::new();
        let mut first = Some((camera, consumer));
        for rows in [Rows::Stored, Rows::Packed] {
            let (mut camera, consumer) = match first.take() {
                Some(s) => s,
                None => cuda_stream(&dev, w, h)?,
            };
            let cfg = run.cfg.clone().rows(rows);
            let r = Run { cfg: &cfg, ..*run };
            bridges.push(r.bridge(&mut camera, consumer)?);
        }
        Ok(Gpu { bridges, bytes, device, raw_frame, raw_device })
    }
}
