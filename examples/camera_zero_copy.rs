//! A synthetic camera feeding a zero-copy frame ring, with a consumer converting NV12 to RGBA.
//!
//! ```text
//! cargo run --example camera_zero_copy                      # best backend present, else the mock
//! cargo run --release --features vulkan --example camera_zero_copy -- --backend vulkan
//!     [--width 1920 --height 1080 --frames N --buffers 4 --recorder --compare-copy --out frame.png]
//! ```
//!
//! One loop serves every backend: the camera (a CPU thread) writes each frame into the ring and
//! presents it; the converter waits for the frame's present fence on its own engine, converts,
//! and releases the frame with its own engine's fence.
//!
//! * nvsci (Jetson/DRIVE): NvSciBuf frames and NvSciSync fences imported into CUDA; the
//!   converter is a CUDA kernel that waits and signals on its stream.
//! * mock: the mock NvSci; with a CUDA GPU, the same CUDA converter as on Jetson (mock buffers
//!   page-locked in host memory, fences as counters the stream waits on and writes); without
//!   one, the conversion runs on the CPU.
//! * vulkan (desktop NVIDIA GPU, feature `vulkan`): Vulkan-exported frames and timeline
//!   semaphores; the same CUDA converter.
//!
//! Every frame's RGBA statistic is checked against the value computed from the test pattern
//! itself; the program exits non-zero on any mismatch. `--recorder` adds a second consumer, a
//! CPU recorder reading the frames in place, that checksums every frame (every backend).
//! `--compare-copy` (CUDA converter) also runs the copy pipeline a user would otherwise write
//! (the camera writes each frame into ordinary host memory, cuMemcpyHtoD, same kernel) and
//! prints both. Set `RUST_LOG=debug` to see the memory-sync decision of every wait and signal.

#[path = "support/rusage.rs"]
mod rusage;

use nvsci::pipeline::color::{fill_test_pattern, nv12_to_rgba, test_pattern_statistic};
use nvsci::pipeline::{Backend, BackendKind, Consumer, Engine, FrameFormat, FrameLayout, RingConfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Width or height not given on the command line (the default depends on the converter).
const UNSET: u32 = u32::MAX;

/// Distinct test-pattern frames generated up front (frame `t` shows pattern `t % PATTERNS`).
const PATTERNS: u64 = 8;

#[derive(Clone)]
struct Args {
    width: u32,
    height: u32,
    frames: u64,
    buffers: usize,
    backend: Option<BackendKind>,
    out: Option<PathBuf>,
    recorder: bool,
    compare_copy: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        width: UNSET,
        height: UNSET,
        frames: 0,
        buffers: 4,
        backend: None,
        out: None,
        recorder: false,
        compare_copy: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--width" => a.width = value()?.parse().map_err(|e| format!("--width: {e}"))?,
            "--height" => a.height = value()?.parse().map_err(|e| format!("--height: {e}"))?,
            "--frames" => a.frames = value()?.parse().map_err(|e| format!("--frames: {e}"))?,
            "--buffers" => a.buffers = value()?.parse().map_err(|e| format!("--buffers: {e}"))?,
            "--backend" => {
                let v = value()?;
                a.backend = if v == "auto" { None } else { Some(v.parse().map_err(|e| format!("{e}"))?) };
            }
            "--out" => a.out = Some(PathBuf::from(value()?)),
            "--recorder" => a.recorder = true,
            "--compare-copy" => a.compare_copy = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

/// Frame rate and latency summary of one run.
struct Stats {
    label: String,
    frames: u64,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Stats {
    fn percentile(&self, p: f64) -> Duration {
        let mut v = self.latencies.clone();
        v.sort();
        v.get(((v.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or_default()
    }
    fn fps(&self) -> f64 {
        self.frames as f64 / self.elapsed.as_secs_f64()
    }
    fn print(&self) {
        println!(
            "{}: {} frames, {:.1} frames/s, latency p50 {:.3} ms, p99 {:.3} ms",
            self.label,
            self.frames,
            self.fps(),
            self.percentile(0.5).as_secs_f64() * 1e3,
            self.percentile(0.99).as_secs_f64() * 1e3
        );
    }
}

/// The test-pattern frames in `layout` and their expected statistics.
fn patterns(layout: &FrameLayout, w: u32, h: u32) -> nvsci::Result<(Vec<Vec<u8>>, Vec<u64>)> {
    let mut frames = Vec::new();
    let mut stats = Vec::new();
    for t in 0..PATTERNS {
        let mut f = vec![0u8; layout.size as usize];
        fill_test_pattern(layout, t, &mut f)?;
        frames.push(f);
        stats.push(test_pattern_statistic(w, h, t));
    }
    Ok((frames, stats))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

fn write_png(path: &PathBuf, w: u32, h: u32, rgba: &[u8]) -> Result<(), String> {
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    let mut wr = enc.write_header().map_err(|e| e.to_string())?;
    wr.write_image_data(rgba).map_err(|e| e.to_string())?;
    wr.finish().map_err(|e| e.to_string())
}

/// What a run produced: its timing and the last converted frame.
struct Outcome {
    stats: Vec<Stats>,
    last_rgba: Vec<u8>,
    mismatches: u64,
}

/// The converting consumer: on the CPU, or a CUDA kernel queued on a stream.
enum Converter {
    Cpu {
        consumer: Consumer,
        rgba: Vec<u8>,
    },
    #[cfg(feature = "cuda")]
    Cuda(Box<gpu::CudaConverter>),
}

impl Converter {
    /// Converts the next frame. The CPU returns its statistic at once; the CUDA converter
    /// records it on the device (read back once at the end) and returns `None`.
    fn convert_next(&mut self, layout: &FrameLayout) -> Result<(u64, Option<u64>), String> {
        match self {
            Converter::Cpu { consumer, rgba } => {
                let f = consumer.acquire().map_err(|e| e.to_string())?;
                let sum = nv12_to_rgba(layout, &consumer.cpu_read(&f).map_err(|e| e.to_string())?, rgba)
                    .map_err(|e| e.to_string())?;
                let seq = f.sequence();
                consumer.release(f).map_err(|e| e.to_string())?;
                Ok((seq, Some(sum)))
            }
            #[cfg(feature = "cuda")]
            Converter::Cuda(c) => c.convert_next().map(|seq| (seq, None)),
        }
    }

    /// The statistics recorded on the device (CUDA) and the last converted frame.
    fn finish(self, frames: u64) -> Result<(Vec<Option<u64>>, Vec<u8>), String> {
        match self {
            Converter::Cpu { rgba, .. } => Ok((vec![None; frames as usize], rgba)),
            #[cfg(feature = "cuda")]
            Converter::Cuda(c) => c.finish(),
        }
    }
}

/// The camera, a CPU thread: writes pattern `t % PATTERNS` into each frame and presents it.
fn spawn_camera(
    mut producer: nvsci::pipeline::Producer,
    frames: Vec<Vec<u8>>,
    n: u64,
) -> std::thread::JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        for t in 0..n {
            let f = producer.acquire().map_err(|e| e.to_string())?;
            producer
                .cpu_write(&f)
                .map_err(|e| e.to_string())?
                .copy_from_slice(&frames[(t % PATTERNS) as usize]);
            producer.present(f).map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

/// The recorder, a CPU consumer reading every frame in place and checksumming it.
fn spawn_recorder(mut rec: Consumer, sums: Vec<u64>, n: u64) -> std::thread::JoinHandle<Result<u64, String>> {
    std::thread::spawn(move || {
        let mut bad = 0;
        for _ in 0..n {
            let f = rec.acquire().map_err(|e| e.to_string())?;
            let sum = fnv1a(&rec.cpu_read(&f).map_err(|e| e.to_string())?);
            bad += (sum != sums[(f.sequence() % PATTERNS) as usize]) as u64;
            rec.release(f).map_err(|e| e.to_string())?;
        }
        Ok(bad)
    })
}

/// The one loop: build the ring on the backend, camera and recorder threads, the converter
/// here.
fn run_ring(backend: &Backend, a: &Args) -> Result<Outcome, String> {
    let format = FrameFormat::Nv12 { width: a.width, height: a.height };
    let config = RingConfig {
        frames: a.buffers,
        consumers: 1 + a.recorder as usize,
        timeout: Duration::from_secs(10),
        ..Default::default()
    };
    let engine = backend.gpu_engine();
    let mut consumers_engines = vec![engine.clone()];
    if a.recorder {
        consumers_engines.push(Engine::Cpu);
    }
    let ring =
        backend.build_ring(format, config, &Engine::Cpu, &consumers_engines).map_err(|e| e.to_string())?;
    let layout = ring.layout().clone();
    println!(
        "ring: {} x NV12 {}x{}, {} bytes per frame, luma pitch {}, chroma at {} pitch {}; camera on the CPU, converter on {}",
        a.buffers,
        a.width,
        a.height,
        layout.size,
        layout.planes[0].pitch,
        layout.planes[1].offset,
        layout.planes[1].pitch,
        if engine.is_cpu() { "the CPU" } else { "a CUDA stream (fence waits and signals on the stream)" }
    );
    let (frames, expected) = patterns(&layout, a.width, a.height).map_err(|e| e.to_string())?;
    let sums: Vec<u64> = frames.iter().map(|f| fnv1a(f)).collect();
    let (producer, consumers) = ring.split().map_err(|e| e.to_string())?;
    let mut cons = consumers.into_iter();
    let first = cons.next().ok_or("no consumer")?;
    let mut converter = match &engine {
        Engine::Cpu => Converter::Cpu { consumer: first, rgba: vec![0u8; (a.width * a.height * 4) as usize] },
        #[cfg(feature = "cuda")]
        Engine::Cuda(dev) => Converter::Cuda(Box::new(gpu::CudaConverter::new(first, dev, &layout, a)?)),
    };
    let n = a.frames;
    let recorder = cons.next().map(|rec| spawn_recorder(rec, sums, n));
    let start = Instant::now();
    let cpu0 = rusage::cpu_time(rusage::PROCESS);
    let camera = spawn_camera(producer, frames, n);
    let mut latencies = Vec::with_capacity(n as usize);
    let mut mismatches = 0;
    let mut immediate = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let t0 = Instant::now();
        let (seq, sum) = converter.convert_next(&layout)?;
        latencies.push(t0.elapsed());
        immediate.push((seq, sum));
    }
    let (device_sums, last_rgba) = converter.finish(n)?;
    let elapsed = start.elapsed();
    let cpu = rusage::cpu_time(rusage::PROCESS).saturating_sub(cpu0);
    camera.join().map_err(|_| "camera panicked")??;
    for (i, (seq, sum)) in immediate.into_iter().enumerate() {
        let sum = sum.or(device_sums[i]).ok_or("missing frame statistic")?;
        if sum != expected[(seq % PATTERNS) as usize] {
            mismatches += 1;
            eprintln!("frame {seq}: statistic {sum} != expected {}", expected[(seq % PATTERNS) as usize]);
        }
    }
    if let Some(r) = recorder {
        let bad = r.join().map_err(|_| "recorder panicked")??;
        println!("recorder (CPU, in place): {n} frames checksummed, {bad} mismatches");
        mismatches += bad;
    }
    println!(
        "process CPU time (user+sys, all threads): {:.1} us per frame",
        cpu.as_secs_f64() * 1e6 / n as f64
    );
    let label = format!(
        "{} ring, {} NV12->RGBA (call time per frame)",
        backend.kind(),
        if engine.is_cpu() { "CPU" } else { "CUDA" }
    );
    let mut stats = vec![Stats { label, frames: n, elapsed, latencies }];
    #[cfg(feature = "cuda")]
    if a.compare_copy {
        if let Engine::Cuda(dev) = &engine {
            let (s, bad) = gpu::run_copy(dev, a, &layout)?;
            mismatches += bad;
            stats.push(s);
        } else {
            println!("note: --compare-copy needs a CUDA converter; skipped");
        }
    }
    Ok(Outcome { stats, last_rgba, mismatches })
}

#[cfg(feature = "cuda")]
mod gpu {
    //! The CUDA converter (one per backend: NvSci, mock on a GPU, Vulkan) and the copy pipeline.
    use super::*;
    use nvsci::cuda::cudarc::driver::{
        CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
    };
    use nvsci::cuda::cudarc::nvrtc::Ptx;
    use nvsci::cuda::{CudaGpu, MemSync};
    use nvsci::pipeline::color::NV12_TO_RGBA_PTX;
    use nvsci::pipeline::CudaConsumer;
    use std::sync::Arc;

    /// The NV12 -> RGBA kernel and its outputs: the RGBA image and one statistic per frame.
    pub struct Kernel {
        f: CudaFunction,
        pub rgba: CudaSlice<u8>,
        sums: CudaSlice<u64>,
        w: u32,
        h: u32,
        y_off: u64,
        y_pitch: u32,
        uv_off: u64,
        uv_pitch: u32,
    }

    impl Kernel {
        pub fn new(
            dev: &CudaGpu,
            stream: &Arc<CudaStream>,
            layout: &FrameLayout,
            a: &Args,
        ) -> Result<Self, String> {
            let m = dev
                .context()
                .load_module(Ptx::from_src(NV12_TO_RGBA_PTX))
                .map_err(|e| format!("PTX: {e}"))?;
            let f = m.load_function("nv12_to_rgba").map_err(|e| e.to_string())?;
            let rgba =
                stream.alloc_zeros::<u8>((a.width * a.height * 4) as usize).map_err(|e| e.to_string())?;
            let sums = stream.alloc_zeros::<u64>(a.frames as usize).map_err(|e| e.to_string())?;
            Ok(Self {
                f,
                rgba,
                sums,
                w: a.width,
                h: a.height,
                y_off: layout.planes[0].offset,
                y_pitch: layout.planes[0].pitch,
                uv_off: layout.planes[1].offset - layout.planes[0].offset,
                uv_pitch: layout.planes[1].pitch,
            })
        }

        /// Enqueues the conversion of the frame at `src` (buffer start) on `stream`, its
        /// statistic going to slot `t`.
        pub fn enqueue(&mut self, stream: &CudaStream, src: u64, t: u64) -> Result<(), String> {
            let src = src + self.y_off;
            let (dst, _g1) = self.rgba.device_ptr(stream);
            let (sums, _g2) = self.sums.device_ptr(stream);
            let sum = sums + 8 * t;
            let mut b = stream.launch_builder(&self.f);
            b.arg(&src).arg(&self.y_pitch).arg(&self.uv_off).arg(&self.uv_pitch).arg(&self.w).arg(&self.h);
            b.arg(&dst).arg(&sum);
            let cfg = LaunchConfig {
                grid_dim: (self.w.div_ceil(16), self.h.div_ceil(16), 1),
                block_dim: (16, 16, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: `src` points to the luma plane of a whole NV12 frame of this layout (the
            // chroma plane at `uv_off` from it); `dst` holds w*h*4 bytes; `sum` is element `t`
            // of the statistics array (t < frames); the arguments match the kernel's list.
            unsafe { b.launch(cfg) }.map(drop).map_err(|e| e.to_string())
        }

        /// Waits for `stream` and reads back the statistics and the RGBA image.
        pub fn read_back(&self, stream: &Arc<CudaStream>) -> Result<(Vec<u64>, Vec<u8>), String> {
            let sums = stream.clone_dtoh(&self.sums).map_err(|e| e.to_string())?;
            let rgba = stream.clone_dtoh(&self.rgba).map_err(|e| e.to_string())?;
            stream.synchronize().map_err(|e| e.to_string())?;
            Ok((sums, rgba))
        }
    }

    /// The ring consumer on a CUDA stream: per frame, a stream wait on the present fence, the
    /// kernel, a stream signal of the release fence; no CPU wait, no synchronisation.
    pub struct CudaConverter {
        kernel: Kernel,
        consumer: CudaConsumer,
        converted: u64,
    }

    impl CudaConverter {
        pub fn new(
            consumer: Consumer,
            dev: &CudaGpu,
            layout: &FrameLayout,
            a: &Args,
        ) -> Result<Self, String> {
            let stream = dev.context().new_stream().map_err(|e| e.to_string())?;
            let kernel = Kernel::new(dev, &stream, layout, a)?;
            let consumer =
                CudaConsumer::new(consumer, dev, stream, MemSync::Auto).map_err(|e| e.to_string())?;
            Ok(Self { kernel, consumer, converted: 0 })
        }

        pub fn convert_next(&mut self) -> Result<u64, String> {
            let t = self.converted;
            let kernel = &mut self.kernel;
            let mut launch = Ok(());
            let seq = self
                .consumer
                .process(|f| {
                    launch = kernel.enqueue(f.stream(), f.device_address(), t);
                    Ok(f.sequence())
                })
                .map_err(|e| e.to_string())?;
            launch?;
            self.converted += 1;
            Ok(seq)
        }

        pub fn finish(self) -> Result<(Vec<Option<u64>>, Vec<u8>), String> {
            let (sums, rgba) = self.kernel.read_back(self.consumer.stream())?;
            Ok((sums.into_iter().map(Some).collect(), rgba))
        }
    }

    /// The copy pipeline: the camera writes each frame into ordinary host memory, cuMemcpyHtoD
    /// into a device buffer, same kernel (one thread, as a user would write it).
    pub fn run_copy(dev: &CudaGpu, a: &Args, layout: &FrameLayout) -> Result<(Stats, u64), String> {
        let (frames, expected) = patterns(layout, a.width, a.height).map_err(|e| e.to_string())?;
        let stream = dev.context().new_stream().map_err(|e| e.to_string())?;
        let mut kernel = Kernel::new(dev, &stream, layout, a)?;
        let mut src = stream.alloc_zeros::<u8>(layout.size as usize).map_err(|e| e.to_string())?;
        let mut camera_frame = vec![0u8; layout.size as usize];
        let mut latencies = Vec::with_capacity(a.frames as usize);
        let start = Instant::now();
        for t in 0..a.frames {
            let t0 = Instant::now();
            // The camera writes the frame into host memory (as it writes into the ring on the
            // zero-copy path), then it is copied to the device.
            camera_frame.copy_from_slice(&frames[(t % PATTERNS) as usize]);
            stream.memcpy_htod(&camera_frame[..], &mut src).map_err(|e| e.to_string())?;
            let (p, g) = src.device_ptr(&stream);
            kernel.enqueue(&stream, p, t)?;
            drop(g);
            latencies.push(t0.elapsed());
        }
        let (sums, _) = kernel.read_back(&stream)?;
        let elapsed = start.elapsed();
        let bad =
            (0..a.frames).filter(|&t| sums[t as usize] != expected[(t % PATTERNS) as usize]).count() as u64;
        Ok((
            Stats {
                label: "copy path (camera writes a host frame, cuMemcpyHtoD, kernel; time per frame)".into(),
                frames: a.frames,
                elapsed,
                latencies,
            },
            bad,
        ))
    }
}

fn run(a: &Args) -> Result<bool, String> {
    let backend = match a.backend {
        None => Backend::auto(),
        Some(k) => Backend::new(k),
    }
    .map_err(|e| e.to_string())?;
    println!("{}", backend.explain());
    let mut a = a.clone();
    let gpu = !backend.gpu_engine().is_cpu();
    // The CPU converter is slow in a debug build: keep its default run small.
    let (w, h) = if gpu { (1920, 1080) } else { (640, 360) };
    if a.width == UNSET {
        a.width = w;
    }
    if a.height == UNSET {
        a.height = h;
    }
    if a.frames == 0 {
        a.frames = if gpu { 600 } else { 24 };
    }
    if cfg!(debug_assertions) {
        println!("(debug build: use `cargo run --release --example camera_zero_copy` for figures)");
    }
    let outcome = run_ring(&backend, &a)?;
    for s in &outcome.stats {
        s.print();
    }
    if outcome.stats.len() == 2 {
        println!("zero-copy / copy frame rate: {:.2}x", outcome.stats[0].fps() / outcome.stats[1].fps());
    }
    // The last frame, converted by the consumer, against the CPU reference conversion.
    let layout = FrameLayout::packed(FrameFormat::Nv12 { width: a.width, height: a.height }, 256, 4096)
        .map_err(|e| e.to_string())?;
    let mut reference = vec![0u8; outcome.last_rgba.len()];
    let mut frame = vec![0u8; layout.size as usize];
    fill_test_pattern(&layout, (a.frames - 1) % PATTERNS, &mut frame).map_err(|e| e.to_string())?;
    nv12_to_rgba(&layout, &frame, &mut reference).map_err(|e| e.to_string())?;
    let last_ok = reference == outcome.last_rgba;
    if !last_ok {
        eprintln!("the last frame's RGBA differs from the CPU reference conversion");
    }
    if let Some(path) = &a.out {
        write_png(path, a.width, a.height, &outcome.last_rgba)?;
        println!("wrote the last converted frame to {}", path.display());
    }
    println!(
        "verified {} frames: {} mismatches{}",
        a.frames,
        outcome.mismatches,
        if last_ok { ", last frame identical to the CPU reference" } else { "" }
    );
    Ok(outcome.mismatches == 0 && last_ok)
}

fn main() -> ExitCode {
    env_logger::init();
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}");
            }
            eprintln!(
                "usage: camera_zero_copy [--width W] [--height H] [--frames N] [--buffers N] \
                 [--backend auto|nvsci|vulkan|mock] [--recorder] [--compare-copy] [--out frame.png]"
            );
            return ExitCode::from(2);
        }
    };
    match run(&a) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(w: u32, h: u32, frames: u64, out: Option<PathBuf>) -> Args {
        Args {
            width: w,
            height: h,
            frames,
            buffers: 3,
            backend: Some(BackendKind::Mock),
            out,
            recorder: true,
            compare_copy: false,
        }
    }

    #[test]
    fn mock_run_verifies_every_frame_and_writes_a_decodable_png() {
        let out = std::env::temp_dir().join(format!("camera-zero-copy-{}.png", std::process::id()));
        assert!(run(&args(64, 48, 12, Some(out.clone()))).unwrap());
        let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&out).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height, info.color_type), (64, 48, png::ColorType::Rgba));
        // The decoded image is the CPU reference conversion of the last frame (pattern 11 % 8).
        let layout = FrameLayout::packed(FrameFormat::Nv12 { width: 64, height: 48 }, 256, 4096).unwrap();
        let mut nv12 = vec![0u8; layout.size as usize];
        fill_test_pattern(&layout, 11 % PATTERNS, &mut nv12).unwrap();
        let mut reference = vec![0u8; 64 * 48 * 4];
        nv12_to_rgba(&layout, &nv12, &mut reference).unwrap();
        assert!(buf[..info.buffer_size()] == reference[..]);
        let _ = std::fs::remove_file(out);
    }

    #[test]
    fn bad_sizes_are_reported_not_panicked() {
        assert!(run(&args(63, 48, 2, None)).unwrap_err().contains("even"));
        assert!(run(&args(0, 48, 2, None)).unwrap_err().contains("zero"));
    }
}
