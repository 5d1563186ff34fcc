//! The bridge against raw Zenoh, in one process and one run: two Zenoh peer sessions over TCP
//! on the loopback interface (multicast scouting off, explicit endpoints), raw subscribers on
//! the receiving one. The frames are 1080p NV12 of the mock's layout, whose rows are padded to
//! 2048 bytes; the bridge publishes them two ways (`Rows`), each against raw Zenoh putting a
//! message of the same bytes:
//!
//! * raw (stored rows): the sending session puts the same bytes as the bridge's message with
//!   rows as the frame stores them (`step` 2048: 3 317 808 bytes) from one shared buffer (no copy
//!   per put: the floor), with a 33-byte attachment as the bridge's, which carries the send time;
//! * raw (packed rows): the same with rows of 1920 bytes (3 110 448 bytes);
//! * raw + copy (packed): with one copy of the message into a new buffer per put (what a copy
//!   into a fresh allocation per frame costs, without the stream);
//! * raw (stored, cold): the stored rows' message from enough buffers, put in turn, to fill
//!   twice the last-level cache, so each put reads its bytes from memory; the other raw variants
//!   put one buffer again and again, which stays in the cache, where a bridge's message is a
//!   frame the camera or a device -> host copy has just written (the benchmark's CPU cameras
//!   write each slot once, so their frames may be cached too);
//! * bridge (stored rows): a camera (mock NvSci stream, CPU producer) presents 1080p NV12 frames;
//!   the bridge consumer (a mailbox) publishes each from the frame's mapping (no copy) on the same
//!   session;
//! * bridge (packed rows): the same with rows of 1920 bytes, published from the frame's mapping
//!   too, one slice per row (each row's first 1920 bytes; no copy);
//! * with `--cuda` (a CUDA GPU, the mock in GPU mode): bridge (CUDA, stored / packed), a CUDA
//!   camera (producer on the GPU) and the bridge consumer on the GPU too, which copies each
//!   frame's rows device -> pinned host memory on its stream (ordered by the ring's fences)
//!   straight into the buffers it publishes, the next frame's copies running while the current
//!   frame is put (the mock's frames are host memory, so the copies are the bridge's kernel's:
//!   a copy engine's would hold the bridge's thread); and beside it the raw floor of that copy:
//!   `cuMemcpyDtoHAsync` of the same bytes (the frame's own mapping, and device memory of the
//!   same size) into pinned memory, then a stream synchronise, timed one copy at a time against
//!   the bridge's copy time (`PublishStats::readback_ns`: enqueue until the bridge saw them done,
//!   the present wait included, and the previous frame's put where the copies overlapped it;
//!   `readback_copy_ns`: the copies alone on the device, between two CUDA events;
//!   `readback_wait_ns`: the bridge's thread waiting for them, what the overlap did not hide).
//!   The CUDA bridges' frames/s and p50 are in the table beside raw's, and their ratios to raw
//!   below it.
//!
//! Three measures each: frames/s received while the sender goes as fast as it can (raw: puts
//! back to back; bridge: the camera presents the next frame as soon as the bridge took the
//! previous one, so the bridge never waits for a frame and the camera does not spin on the
//! shared cores); the CPU time of the whole process (every thread, the receiving side's too)
//! per message meanwhile; and the latency of one frame at a time (put, or present, to the
//! subscriber's callback; the next one after the previous arrived), p50 and p90. The subscribers
//! read a few bytes of each message only (the send time in the raw attachment, the stamp at the
//! start of the bridge's payload). So that a machine whose load changes during the run (a
//! shared one) weighs on every variant alike, the variants take turns: `--rounds` rounds (10),
//! each of `--frames / rounds` messages and `--latency-samples / rounds` latency samples of
//! every variant in turn, after one warm-up round.
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

/// The first 12 bytes of a payload (zeros where it is shorter).
fn head(payload: &ZBytes) -> [u8; 12] {
    let mut h = [0u8; 12];
    let _ = std::io::Read::read_exact(&mut payload.reader(), &mut h);
    h
}

/// CPU time this process used so far (every thread, user and system), in microseconds: what a
/// message costs, less sensitive than wall time to other work on a shared machine.
fn cpu_us() -> f64 {
    rusage_us(libc::RUSAGE_SELF)
}

/// CPU time the calling thread used so far, in microseconds.
fn thread_cpu_us() -> f64 {
    rusage_us(libc::RUSAGE_THREAD)
}

fn rusage_us(who: libc::c_int) -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` writes a `struct rusage` into the pointer, which is valid for one.
    if unsafe { libc::getrusage(who, u.as_mut_ptr()) } != 0 {
        return 0.0;
    }
    // SAFETY: initialised by the successful call (and zeroed before it).
    let u = unsafe { u.assume_init() };
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    us(u.ru_utime) + us(u.ru_stime)
}

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Arrivals at a subscriber: (arrival, sent) nanoseconds.
type Arrivals = mpsc::Receiver<(u64, u64)>;

/// A subscriber on the receiving session to `key`, reading the send time as `sent` does from
/// the first 12 bytes of each payload and its attachment.
fn subscribe(
    rx: &zenoh::Session,
    key: String,
    sent: fn(&[u8; 12], &[u8]) -> u64,
) -> Res<(zenoh::pubsub::Subscriber<()>, Arrivals)> {
    let (tx, arrivals) = mpsc::channel();
    let sub = rx
        .declare_subscriber(key)
        .callback(move |s| {
            let t = now_ns();
            let h = head(s.payload());
            let a = s.attachment().map(|a| a.to_bytes().into_owned()).unwrap_or_default();
            let _ = tx.send((t, sent(&h, &a)));
        })
        .wait()?;
    Ok((sub, arrivals))
}

/// The send time a raw message carries in its attachment.
fn raw_sent(_: &[u8; 12], attachment: &[u8]) -> u64 {
    attachment.get(..8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
}

/// The capture time a bridge's message carries as its stamp (sec, nanosec after the 4-byte
/// encapsulation header).
fn stamp_sent(h: &[u8; 12], _: &[u8]) -> u64 {
    let sec = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as u64;
    let nanosec = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as u64;
    sec * 1_000_000_000 + nanosec
}

/// A camera's stream on the mock (CPU producer) whose one consumer is a mailbox, every slot
/// holding a picture once (the benchmark then presents without rewriting them).
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

/// How many messages of `len` bytes the cold raw variant puts in turn: enough for twice the
/// last-level cache (`/sys/devices/system/cpu/cpu0/cache/index3/size`; 64 MiB where it is not
/// given), so that each put reads its bytes from memory, as a bridge's put of a frame a camera or
/// a copy has just written does, where one buffer put again and again stays in the cache.
fn cold_buffers(len: usize) -> usize {
    let llc = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index3/size")
        .ok()
        .and_then(|s| {
            let s = s.trim();
            let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
            let n: usize = n.parse().ok()?;
            Some(match unit {
                "K" => n << 10,
                "M" => n << 20,
                _ => n,
            })
        })
        .unwrap_or(64 << 20);
    (2 * llc).div_ceil(len.max(1)).max(2)
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

/// How one variant sends a message.
enum Sender {
    /// A raw put of the next of `payloads` in turn (or, `copy`, of a new copy of `message`).
    Raw {
        publisher: zenoh::pubsub::Publisher<'static>,
        payloads: Vec<ZBytes>,
        next: usize,
        message: Vec<u8>,
        copy: bool,
    },
    /// A frame presented to the bridge's stream.
    Bridge { camera: Producer, bridge: BridgeConsumer },
}

/// One variant and what was measured of it.
struct Variant {
    name: &'static str,
    sender: Sender,
    arrivals: Arrivals,
    _sub: zenoh::pubsub::Subscriber<()>,
    /// Messages received, seconds and CPU microseconds (the process's, the sending thread's) of
    /// the throughput chunks.
    got: u64,
    secs: f64,
    cpu: f64,
    sender_cpu: f64,
    lat: Vec<f64>,
    /// The bridge's counters when the measured rounds began.
    before: PublishStats,
}

impl Variant {
    fn new(
        name: &'static str,
        sender: Sender,
        (sub, arrivals): (zenoh::pubsub::Subscriber<()>, Arrivals),
    ) -> Self {
        Self {
            name,
            sender,
            arrivals,
            _sub: sub,
            got: 0,
            secs: 0.0,
            cpu: 0.0,
            sender_cpu: 0.0,
            lat: Vec::new(),
            before: PublishStats::default(),
        }
    }

    /// Sends one message stamped `sent`; a bridge's once the bridge took the frame.
    fn send(&mut self, sent: u64, wait_taken: bool) -> Res<()> {
        match &mut self.sender {
            Sender::Raw { publisher, payloads, next, message, copy } => {
                let mut attachment = vec![0u8; 33];
                attachment[..8].copy_from_slice(&sent.to_le_bytes());
                *next = (*next + 1) % payloads.len();
                let p = if *copy { ZBytes::from(message.clone()) } else { payloads[*next].clone() };
                publisher.put(p).attachment(attachment).wait()?;
            }
            Sender::Bridge { camera, .. } => {
                let delivered = |c: &Producer| c.consumer_stats(0).map_or(0, |s| s.delivered);
                let taken = delivered(camera);
                let mut f = camera.acquire()?;
                f.set_capture_time(sent);
                camera.present(f)?;
                let start = Instant::now();
                while wait_taken && delivered(camera) == taken && start.elapsed() < Duration::from_secs(10) {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
        }
        Ok(())
    }

    /// `n` messages as fast as they go (raw: back to back; bridge: the next frame as soon as the
    /// bridge took the previous one), until all arrived; added to the figures if `measure`.
    fn chunk(&mut self, n: u64, measure: bool) -> Res<()> {
        while self.arrivals.try_recv().is_ok() {}
        let (start, cpu, sender_cpu) = (Instant::now(), cpu_us(), thread_cpu_us());
        let mut got = 0u64;
        for _ in 0..n {
            self.send(now_ns(), true)?;
            while self.arrivals.try_recv().is_ok() {
                got += 1;
            }
        }
        while got < n && self.arrivals.recv_timeout(Duration::from_secs(10)).is_ok() {
            got += 1;
        }
        if measure {
            self.secs += start.elapsed().as_secs_f64();
            self.cpu += cpu_us() - cpu;
            self.sender_cpu += thread_cpu_us() - sender_cpu;
            self.got += got;
        }
        Ok(())
    }

    /// `n` latency samples: one message, wait for it to arrive, the next.
    fn latency(&mut self, n: usize) -> Res<()> {
        for _ in 0..n {
            let sent = now_ns();
            self.send(sent, false)?;
            loop {
                let (t, s) = self.arrivals.recv_timeout(Duration::from_secs(10))?;
                if s == sent {
                    self.lat.push((t - sent) as f64 / 1e6);
                    break;
                }
            }
        }
        Ok(())
    }

    fn stats(&self) -> Option<PublishStats> {
        match &self.sender {
            Sender::Bridge { bridge, .. } => Some(bridge.stats()),
            Sender::Raw { .. } => None,
        }
    }

    /// frames/s, CPU microseconds per message (the process's, the sending thread's), p50 and
    /// p90 latency (ms).
    fn figures(&mut self) -> (f64, f64, f64, f64, f64) {
        let n = self.got.max(1) as f64;
        let (p50, p90) = (pct(&mut self.lat, 0.5), pct(&mut self.lat, 0.9));
        (self.got as f64 / self.secs, self.cpu / n, self.sender_cpu / n, p50, p90)
    }
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
    let rounds = arg("--rounds", 10u64).max(1);
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let cfg =
        BridgeConfig::new("/bench/image").multicast_scouting(false).reliable().stamp_clock(StampClock::AsIs);
    let tx = zenoh::open(cfg.clone().listen(format!("tcp/127.0.0.1:{port}")).zenoh_config()?).wait()?;
    let rx = zenoh::open(cfg.clone().connect(format!("tcp/127.0.0.1:{port}")).zenoh_config()?).wait()?;

    // The raw floors: the same bytes as a bridge message of each kind, from one shared buffer.
    let pitch = cpu_stream(w, h)?.1.layout().planes[0].pitch;
    let (stored, packed) = (message(w, h, pitch)?, message(w, h, w)?);
    let sizes = (stored.len(), packed.len());
    let cold = cold_buffers(stored.len());
    let mut variants = Vec::new();
    for (i, (name, m, copy, buffers)) in [
        ("raw (stored rows)", stored.clone(), false, 1),
        ("raw (packed rows)", packed.clone(), false, 1),
        ("raw + copy (packed)", packed, true, 1),
        ("raw (stored, cold)", stored, false, cold),
    ]
    .into_iter()
    .enumerate()
    {
        let key = format!("bench/raw/{i}");
        let publisher = tx
            .declare_publisher(key.clone())
            .congestion_control(zenoh::qos::CongestionControl::Block)
            .reliability(zenoh::qos::Reliability::Reliable)
            .wait()?;
        let sub = subscribe(&rx, key, raw_sent)?;
        // Each its own copy of the message (the cold variant's, more than the last-level cache
        // holds, put in turn).
        let payloads = (0..buffers).map(|_| ZBytes::from(m.clone())).collect();
        variants.push(Variant::new(
            name,
            Sender::Raw { publisher, payloads, next: 0, message: m, copy },
            sub,
        ));
    }
    // The bridges, on the CPU, both ways (and on the GPU).
    let mut streams = Vec::new();
    for (name, rows) in [("bridge (stored rows)", Rows::Stored), ("bridge (packed rows)", Rows::Packed)] {
        streams.push((name, rows, cpu_stream(w, h)?));
    }
    #[cfg(feature = "cuda")]
    let mut gpu = if cuda { Some(cuda_run::Gpu::new(w, h, samples)?) } else { None };
    #[cfg(feature = "cuda")]
    if let Some(g) = &mut gpu {
        for (name, rows) in [("bridge (CUDA, stored)", Rows::Stored), ("bridge (CUDA, packed)", Rows::Packed)]
        {
            streams.push((name, rows, g.stream(w, h)?));
        }
    }
    for (i, (name, rows, (camera, consumer))) in streams.into_iter().enumerate() {
        let mut c = cfg.clone().rows(rows);
        c.topic = format!("/bench/bridge{i}");
        let sub = subscribe(&rx, c.key_expr(), stamp_sent)?;
        let bridge = BridgeConsumer::spawn_on(tx.clone(), consumer, &c)?;
        variants.push(Variant::new(name, Sender::Bridge { camera, bridge }, sub));
    }
    std::thread::sleep(Duration::from_millis(500));

    // One warm-up round, then the measured ones, every variant in turn.
    let (per_chunk, per_round) = (frames.div_ceil(rounds), samples.div_ceil(rounds as usize));
    for v in &mut variants {
        v.chunk(per_chunk, false)?;
        v.before = v.stats().unwrap_or_default();
    }
    for _ in 0..rounds {
        for v in &mut variants {
            v.chunk(per_chunk, true)?;
            v.latency(per_round)?;
        }
    }

    println!(
        "{w}x{h} NV12 (rows of {pitch} bytes in the frames), {} bytes per message as stored, {} packed; \
         {rounds} rounds of {per_chunk} messages and {per_round} latency samples per variant",
        sizes.0, sizes.1
    );
    println!("CPU: microseconds per message of the whole process, and of the sending thread (the put, or the camera)");
    println!(
        "{:<24} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "", "frames/s", "CPU us", "sender us", "p50 ms", "p90 ms"
    );
    let mut figures = Vec::new();
    for v in &mut variants {
        let f = v.figures();
        println!("{:<24} {:>10.1} {:>10.0} {:>10.0} {:>10.3} {:>10.3}", v.name, f.0, f.1, f.2, f.3, f.4);
        figures.push(f);
    }
    // Each bridge against the raw put of the same bytes; the stored rows also against the packed
    // message (the same image in fewer bytes) and against the cold raw put.
    let mut pairs = vec![(4, 0), (5, 1), (4, 1), (4, 3)];
    if variants.len() > 6 {
        pairs.extend([(6, 0), (7, 1), (6, 3)]);
    }
    for (b, r) in pairs {
        let (fb, fr) = (figures[b], figures[r]);
        println!(
            "{} / {}: frames/s {:.2}x, CPU per message {:.2}x, p50 latency {:.2}x",
            variants[b].name,
            variants[r].name,
            fb.0 / fr.0,
            fb.1 / fr.1,
            fb.3 / fr.3
        );
    }
    for v in &variants {
        if let Some(st) = v.stats() {
            let b = v.before;
            println!(
                "{}: {} published, {} skipped by its mailbox; errors {}",
                v.name,
                st.published - b.published,
                st.skipped - b.skipped,
                st.publish_errors + st.stream_errors
            );
        }
    }
    #[cfg(feature = "cuda")]
    if let Some(g) = &mut gpu {
        let stats: Vec<_> = variants[6..].iter().filter_map(|v| v.stats().map(|s| (v.name, s))).collect();
        g.report(&stats);
    }
    Ok(())
}

/// The CUDA variants' streams (a CUDA camera and a CUDA bridge consumer on the mock in GPU mode)
/// and the raw device -> host copy of the same bytes.
#[cfg(feature = "cuda")]
mod cuda_run {
    use super::{pct, Res};
    use nvsci::cuda::cudarc::driver::{result, CudaStream, DevicePtr, PinnedHostSlice};
    use nvsci::cuda::CudaGpu;
    use nvsci::pipeline::{Backend, Consumer, ConsumerDesc, Engine, FrameFormat, Producer};
    use nvsci_zenoh::PublishStats;
    use std::time::{Duration, Instant};

    /// The GPU and the raw copies' times (microseconds).
    pub struct Gpu {
        dev: CudaGpu,
        bytes: usize,
        device: String,
        raw_frame: Vec<f64>,
        raw_device: Vec<f64>,
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

    impl Gpu {
        /// Opens GPU 0 and measures the raw floor: copies of a frame's own mapping (held
        /// meanwhile), then of device memory of the same size, on a CUDA consumer's stream, into
        /// cacheable pinned memory as the bridge's.
        pub fn new(w: u32, h: u32, samples: usize) -> Res<Self> {
            let dev = CudaGpu::open(0)?;
            let device = dev.context().name().unwrap_or_else(|_| "a CUDA GPU".into());
            let (_camera, mut consumer) = Self::cuda_stream(&dev, w, h)?;
            let n = samples.max(100);
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
            let device_mem = cs.alloc_zeros::<u8>(len)?;
            let (dptr, sync) = device_mem.device_ptr(&cs);
            let raw_device = raw_copies(&cs, dptr, &mut pinned, n)?;
            drop(sync);
            consumer.release(f)?;
            Ok(Self { dev, bytes: len, device, raw_frame, raw_device })
        }

        /// A CUDA camera's stream and its CUDA mailbox consumer, every slot holding a picture
        /// once, written on the camera's stream.
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

        /// Another CUDA camera's stream for a bridge.
        pub fn stream(&self, w: u32, h: u32) -> Res<(Producer, Consumer)> {
            Self::cuda_stream(&self.dev, w, h)
        }

        /// The raw copies against the CUDA bridges' (`stats`: each bridge's name and counters).
        pub fn report(&mut self, stats: &[(&str, PublishStats)]) {
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            let (f_mean, d_mean) = (mean(&self.raw_frame), mean(&self.raw_device));
            println!(
                "device -> host copy of a {}-byte frame on {} (microseconds per frame):",
                self.bytes, self.device
            );
            println!("{:<56} {:>10} {:>10}", "", "mean", "p50");
            println!(
                "{:<56} {f_mean:>10.1} {:>10.1}",
                "raw cuMemcpyDtoHAsync, the frame's mapping",
                pct(&mut self.raw_frame, 0.5)
            );
            println!(
                "{:<56} {d_mean:>10.1} {:>10.1}",
                "raw cuMemcpyDtoHAsync, device memory",
                pct(&mut self.raw_device, 0.5)
            );
            for (name, st) in stats {
                let n = st.readbacks.max(1) as f64;
                let us = |ns: u64| ns as f64 / 1e3 / n;
                let (all, copy, wait) =
                    (us(st.readback_ns), us(st.readback_copy_ns), us(st.readback_wait_ns));
                println!(
                    "{:<56} {all:>10.1} {:>10}",
                    format!("{name}, {} frames: enqueue to seen done", st.readbacks),
                    "-"
                );
                println!("{:<56} {copy:>10.1} {:>10}", format!("{name}: the copies on the device"), "-");
                println!(
                    "{:<56} {wait:>10.1} {:>10}",
                    format!("{name}: waited for by the bridge (not overlapped)"),
                    "-"
                );
                println!(
                    "{name}: copy / raw copy of the frame's mapping {:.2}x (the copies alone {:.2}x, \
                     waited for {:.2}x); planes copied by the bridge's kernel {} of {}",
                    all / f_mean,
                    copy / f_mean,
                    wait / f_mean,
                    st.readback_kernel_planes,
                    2 * st.readbacks
                );
            }
        }
    }
}
