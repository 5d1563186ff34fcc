//! A synthetic camera feeding a zero-copy frame ring, with a consumer converting NV12 to RGBA.
//!
//! ```text
//! cargo run --example camera_zero_copy                      # best backend present, else the mock
//! cargo run --release --features vulkan --example camera_zero_copy -- --backend vulkan
//!     [--width 1920 --height 1080 --frames N --buffers 4 --recorder --compare-copy --out frame.png]
//! ```
//!
//! * mock: mock NvSci buffers and fences; the conversion runs on the CPU.
//! * nvsci (Jetson/DRIVE): NvSciBuf frames imported into CUDA; the conversion is a CUDA kernel.
//! * vulkan (desktop NVIDIA GPU): Vulkan-exported frames and timeline semaphores; CUDA kernel.
//!
//! Every frame's RGBA statistic is checked against the value computed from the test pattern
//! itself; the program exits non-zero on any mismatch. `--recorder` adds a second consumer, a
//! CPU recorder with a read-only view, that checksums every frame (mock and nvsci backends).
//! `--compare-copy` (CUDA backends) also runs the copy pipeline a user would otherwise write
//! (frame in host memory, cuMemcpyHtoD, same kernel) and prints both.

use nvsci::pipeline::color::{fill_test_pattern, nv12_to_rgba, test_pattern_statistic};
use nvsci::pipeline::{Backend, BackendKind, FrameFormat, FrameLayout, FrameRing, RingConfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Distinct test-pattern frames generated up front (frame `t` shows pattern `t % PATTERNS`).
const PATTERNS: u64 = 8;

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
        width: 1920,
        height: 1080,
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

/// The synthetic camera's step: acquire a free frame, write `content`, run `before_present`
/// (timestamping), present it.
fn produce(
    producer: &mut nvsci::pipeline::Producer,
    content: &[u8],
    before_present: impl FnOnce(),
) -> Result<(), String> {
    let f = producer.acquire().map_err(|e| e.to_string())?;
    producer
        .buffer(&f)
        .map_err(|e| e.to_string())?
        .cpu_write()
        .map_err(|e| e.to_string())?
        .copy_from_slice(content);
    before_present();
    producer.present(f).map_err(|e| e.to_string())
}

/// What a run produced: its timing and the last converted frame.
struct Outcome {
    stats: Vec<Stats>,
    last_rgba: Vec<u8>,
    mismatches: u64,
}

/// The mock backend: a producer thread, a CPU converter and optionally a CPU recorder.
fn run_cpu(lib: &nvsci::NvSci, a: &Args) -> Result<Outcome, String> {
    let format = FrameFormat::Nv12 { width: a.width, height: a.height };
    let config = RingConfig {
        frames: a.buffers,
        consumers: 1 + a.recorder as usize,
        timeout: Duration::from_secs(10),
    };
    let ring = FrameRing::new(lib, format, config).map_err(|e| e.to_string())?;
    let layout = ring.layout().clone();
    println!(
        "ring: {} x NV12 {}x{}, {} bytes per frame, luma pitch {}, chroma at {} pitch {} (from the reconciled attributes)",
        a.buffers, a.width, a.height, layout.size, layout.planes[0].pitch, layout.planes[1].offset, layout.planes[1].pitch
    );
    let (frames, expected) = patterns(&layout, a.width, a.height).map_err(|e| e.to_string())?;
    let sums: Vec<u64> = frames.iter().map(|f| fnv1a(f)).collect();
    let (mut producer, consumers) = ring.split().map_err(|e| e.to_string())?;
    let n = a.frames;
    let start = Instant::now();
    let present_at: std::sync::Arc<Vec<std::sync::atomic::AtomicU64>> =
        std::sync::Arc::new((0..n).map(|_| std::sync::atomic::AtomicU64::new(0)).collect());
    let mut cons = consumers.into_iter();
    let mut converter = cons.next().ok_or("no consumer")?;
    let recorder = cons.next().map(|mut rec| {
        let sums = sums.clone();
        std::thread::spawn(move || -> Result<u64, String> {
            let mut bad = 0;
            for _ in 0..n {
                let f = rec.acquire().map_err(|e| e.to_string())?;
                let sum =
                    fnv1a(&rec.view(&f).map_err(|e| e.to_string())?.cpu_read().map_err(|e| e.to_string())?);
                bad += (sum != sums[(f.sequence() % PATTERNS) as usize]) as u64;
                rec.release(f).map_err(|e| e.to_string())?;
            }
            Ok(bad)
        })
    });
    let times = present_at.clone();
    let producer_thread = std::thread::spawn(move || -> Result<(), String> {
        for t in 0..n {
            produce(&mut producer, &frames[(t % PATTERNS) as usize], || {
                times[t as usize]
                    .store(start.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Release)
            })?;
        }
        Ok(())
    });
    let mut rgba = vec![0u8; (a.width * a.height * 4) as usize];
    let mut latencies = Vec::with_capacity(n as usize);
    let mut mismatches = 0;
    for _ in 0..n {
        let f = converter.acquire().map_err(|e| e.to_string())?;
        let sum = nv12_to_rgba(
            &layout,
            &converter.view(&f).map_err(|e| e.to_string())?.cpu_read().map_err(|e| e.to_string())?,
            &mut rgba,
        )
        .map_err(|e| e.to_string())?;
        let seq = f.sequence();
        converter.release(f).map_err(|e| e.to_string())?;
        let presented =
            Duration::from_nanos(present_at[seq as usize].load(std::sync::atomic::Ordering::Acquire));
        latencies.push(start.elapsed().saturating_sub(presented));
        if sum != expected[(seq % PATTERNS) as usize] {
            mismatches += 1;
            eprintln!("frame {seq}: statistic {sum} != expected {}", expected[(seq % PATTERNS) as usize]);
        }
    }
    let elapsed = start.elapsed();
    producer_thread.join().map_err(|_| "producer panicked")??;
    if let Some(r) = recorder {
        let bad = r.join().map_err(|_| "recorder panicked")??;
        println!("recorder (CPU, read-only view): {n} frames checksummed, {bad} mismatches");
        mismatches += bad;
    }
    Ok(Outcome {
        stats: vec![Stats { label: "mock ring, CPU NV12->RGBA".into(), frames: n, elapsed, latencies }],
        last_rgba: rgba,
        mismatches,
    })
}

#[cfg(feature = "cuda")]
mod gpu {
    //! The CUDA consumer shared by the NvSci and Vulkan backends, and the copy pipeline.
    use super::*;
    use nvsci::cuda::cudarc::driver::{
        CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
    };
    use nvsci::cuda::cudarc::nvrtc::Ptx;
    use nvsci::cuda::CudaDevice;
    use nvsci::pipeline::color::NV12_TO_RGBA_PTX;
    use std::sync::Arc;

    /// The NV12 -> RGBA kernel with its output buffers.
    pub struct Converter {
        pub stream: Arc<CudaStream>,
        f: CudaFunction,
        pub rgba: CudaSlice<u8>,
        sum: CudaSlice<u64>,
        w: u32,
        h: u32,
        y_pitch: u32,
        uv_off: u64,
        uv_pitch: u32,
    }

    impl Converter {
        pub fn new(dev: &CudaDevice, layout: &FrameLayout, w: u32, h: u32) -> Result<Self, String> {
            let ctx = dev.context();
            let m = ctx.load_module(Ptx::from_src(NV12_TO_RGBA_PTX)).map_err(|e| format!("PTX: {e}"))?;
            let f = m.load_function("nv12_to_rgba").map_err(|e| e.to_string())?;
            let stream = ctx.default_stream();
            let rgba = stream.alloc_zeros::<u8>((w * h * 4) as usize).map_err(|e| e.to_string())?;
            let sum = stream.alloc_zeros::<u64>(1).map_err(|e| e.to_string())?;
            Ok(Self {
                stream,
                f,
                rgba,
                sum,
                w,
                h,
                y_pitch: layout.planes[0].pitch,
                uv_off: layout.planes[1].offset - layout.planes[0].offset,
                uv_pitch: layout.planes[1].pitch,
            })
        }

        /// Enqueues the conversion of the NV12 frame at device address `src`.
        pub fn enqueue(&mut self, src: u64) -> Result<(), String> {
            let s = self.stream.clone();
            s.memset_zeros(&mut self.sum).map_err(|e| e.to_string())?;
            let (dst, _g1) = self.rgba.device_ptr(&s);
            let (sum, _g2) = self.sum.device_ptr(&s);
            let mut b = s.launch_builder(&self.f);
            b.arg(&src).arg(&self.y_pitch).arg(&self.uv_off).arg(&self.uv_pitch).arg(&self.w).arg(&self.h);
            b.arg(&dst).arg(&sum);
            let cfg = LaunchConfig {
                grid_dim: (self.w.div_ceil(16), self.h.div_ceil(16), 1),
                block_dim: (16, 16, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: `src` maps a whole NV12 frame of this layout; `dst` holds w*h*4 bytes and
            // `sum` one u64, matching the kernel's parameter list.
            unsafe { b.launch(cfg) }.map(drop).map_err(|e| e.to_string())
        }

        /// Waits for the stream and returns the frame statistic.
        pub fn statistic(&self) -> Result<u64, String> {
            let mut host = [0u64; 1];
            self.stream.memcpy_dtoh(&self.sum, &mut host).map_err(|e| e.to_string())?;
            self.stream.synchronize().map_err(|e| e.to_string())?;
            Ok(host[0])
        }

        pub fn rgba_host(&self) -> Result<Vec<u8>, String> {
            self.stream.clone_dtoh(&self.rgba).map_err(|e| e.to_string())
        }
    }

    /// The copy pipeline: each frame in host memory, cuMemcpyHtoD into a device buffer, same
    /// kernel.
    pub fn run_copy(dev: &CudaDevice, a: &Args, layout: &FrameLayout) -> Result<(Stats, u64), String> {
        let (frames, expected) = patterns(layout, a.width, a.height).map_err(|e| e.to_string())?;
        let mut conv = Converter::new(dev, layout, a.width, a.height)?;
        let stream = conv.stream.clone();
        let mut src = stream.alloc_zeros::<u8>(layout.size as usize).map_err(|e| e.to_string())?;
        let mut latencies = Vec::with_capacity(a.frames as usize);
        let mut bad = 0;
        let start = Instant::now();
        for t in 0..a.frames {
            let t0 = Instant::now();
            stream.memcpy_htod(&frames[(t % PATTERNS) as usize][..], &mut src).map_err(|e| e.to_string())?;
            let (p, _g) = src.device_ptr(&stream);
            conv.enqueue(p)?;
            drop(_g);
            let sum = conv.statistic()?;
            latencies.push(t0.elapsed());
            bad += (sum != expected[(t % PATTERNS) as usize]) as u64;
        }
        let elapsed = start.elapsed();
        Ok((
            Stats {
                label: "copy path (host frame + cuMemcpyHtoD + kernel)".into(),
                frames: a.frames,
                elapsed,
                latencies,
            },
            bad,
        ))
    }
}

/// NvSci backend (Jetson/DRIVE): NvSciBuf frames imported into CUDA, CPU-side fences.
#[cfg(feature = "cuda")]
fn run_nvsci(b: &Backend, a: &Args) -> Result<Outcome, String> {
    use nvsci::cuda::{ExternalMemory, ReadOnly};
    let (lib, dev) = (b.nvsci.as_ref().ok_or("no NvSci")?, b.cuda.as_ref().ok_or("no CUDA device")?);
    let format = FrameFormat::Nv12 { width: a.width, height: a.height };
    let config = RingConfig {
        frames: a.buffers,
        consumers: 1 + a.recorder as usize,
        timeout: Duration::from_secs(10),
    };
    let ring = FrameRing::with_gpu(lib, format, config, dev.gpu_id()).map_err(|e| e.to_string())?;
    let layout = ring.layout().clone();
    let (frames, expected) = patterns(&layout, a.width, a.height).map_err(|e| e.to_string())?;
    let (mut producer, mut consumers) = ring.split().map_err(|e| e.to_string())?;
    let (first, rest) = consumers.split_at_mut(1);
    let consumer = &mut first[0];
    let mut recorder = rest.first_mut();
    let mut imports = Vec::new();
    for i in 0..a.buffers {
        let view = consumer.slot_view(i).ok_or("missing frame view")?;
        let mem = ExternalMemory::<ReadOnly>::from_buf_obj(dev, view).map_err(|e| e.to_string())?;
        let map = mem.map_all().map_err(|e| e.to_string())?;
        imports.push(map);
    }
    let mut conv = gpu::Converter::new(dev, &layout, a.width, a.height)?;
    let mut latencies = Vec::with_capacity(a.frames as usize);
    let mut mismatches = 0;
    let start = Instant::now();
    for t in 0..a.frames {
        let t0 = Instant::now();
        produce(&mut producer, &frames[(t % PATTERNS) as usize], || ())?;
        let g = consumer.acquire().map_err(|e| e.to_string())?;
        conv.enqueue(imports[g.index()].device_address())?;
        let sum = conv.statistic()?;
        consumer.release(g).map_err(|e| e.to_string())?;
        if let Some(r) = recorder.as_deref_mut() {
            let h = r.acquire().map_err(|e| e.to_string())?;
            let ok = fnv1a(&r.view(&h).map_err(|e| e.to_string())?.cpu_read().map_err(|e| e.to_string())?)
                == fnv1a(&frames[(t % PATTERNS) as usize]);
            mismatches += (!ok) as u64;
            r.release(h).map_err(|e| e.to_string())?;
        }
        latencies.push(t0.elapsed());
        mismatches += (sum != expected[(t % PATTERNS) as usize]) as u64;
    }
    let elapsed = start.elapsed();
    let mut stats =
        vec![Stats { label: "nvsci ring, CUDA NV12->RGBA".into(), frames: a.frames, elapsed, latencies }];
    if a.compare_copy {
        let (s, bad) = gpu::run_copy(dev, a, &layout)?;
        mismatches += bad;
        stats.push(s);
    }
    Ok(Outcome { last_rgba: conv.rgba_host()?, stats, mismatches })
}

/// Vulkan backend (desktop NVIDIA GPU): the Vulkan frame ring, CUDA converting in place.
#[cfg(feature = "vulkan")]
fn run_vulkan(b: &Backend, a: &Args) -> Result<Outcome, String> {
    use nvsci::pipeline::VulkanFrameRing;
    if a.recorder {
        println!("note: --recorder needs a ring with CPU-readable views (mock or nvsci backend); ignored on vulkan");
    }
    let (ctx, dev) =
        (b.vulkan.as_ref().ok_or("no Vulkan context")?, b.cuda.as_ref().ok_or("no CUDA device")?);
    let format = FrameFormat::Nv12 { width: a.width, height: a.height };
    let mut ring = VulkanFrameRing::new(ctx, dev, format, a.buffers, Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    let layout = ring.layout().clone();
    println!(
        "vulkan: {} ({}), hand-off mode {:?}; frame layout fixed by the backend: luma pitch {}, chroma at {}",
        ctx.info().name,
        ctx.info().uuid_string(),
        ring.mode(),
        layout.planes[0].pitch,
        layout.planes[1].offset
    );
    let (frames, expected) = patterns(&layout, a.width, a.height).map_err(|e| e.to_string())?;
    let mut conv = gpu::Converter::new(dev, &layout, a.width, a.height)?;
    let stream = conv.stream.clone();
    let mut latencies = Vec::with_capacity(a.frames as usize);
    let mut mismatches = 0;
    let start = Instant::now();
    for t in 0..a.frames {
        let t0 = Instant::now();
        let f = ring.acquire().map_err(|e| e.to_string())?;
        ring.staging_mut(&f).map_err(|e| e.to_string())?.copy_from_slice(&frames[(t % PATTERNS) as usize]);
        let p = ring.present(f, &stream).map_err(|e| e.to_string())?;
        conv.enqueue(p.device_address())?;
        ring.release(p, &stream).map_err(|e| e.to_string())?;
        let sum = conv.statistic()?;
        latencies.push(t0.elapsed());
        if sum != expected[(t % PATTERNS) as usize] {
            mismatches += 1;
            eprintln!("frame {t}: statistic {sum} != expected {}", expected[(t % PATTERNS) as usize]);
        }
    }
    let elapsed = start.elapsed();
    ring.drain().map_err(|e| e.to_string())?;
    let mut stats = vec![Stats {
        label: "vulkan ring -> CUDA NV12->RGBA (zero copy)".into(),
        frames: a.frames,
        elapsed,
        latencies,
    }];
    if a.compare_copy {
        let (s, bad) = gpu::run_copy(dev, a, &layout)?;
        mismatches += bad;
        stats.push(s);
    }
    Ok(Outcome { last_rgba: conv.rgba_host()?, stats, mismatches })
}

fn run(a: &Args) -> Result<bool, String> {
    let backend = match a.backend {
        None => Backend::auto(),
        Some(k) => Backend::new(k),
    }
    .map_err(|e| e.to_string())?;
    println!("{}", backend.explain());
    let outcome = match backend.kind {
        BackendKind::Mock => run_cpu(backend.nvsci.as_ref().ok_or("no mock")?, a)?,
        #[cfg(feature = "cuda")]
        BackendKind::NvSci => run_nvsci(&backend, a)?,
        #[cfg(feature = "vulkan")]
        BackendKind::Vulkan => run_vulkan(&backend, a)?,
        #[allow(unreachable_patterns)]
        other => return Err(format!("backend {other} is not built in")),
    };
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
    let mut a = match parse() {
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
    if a.frames == 0 {
        // The CPU conversion of the mock is slow in debug builds: keep the default run short.
        a.frames = if a.backend == Some(BackendKind::Mock) || a.backend.is_none() { 30 } else { 600 };
    }
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
