//! Vulkan -> CUDA -> Vulkan frame hand-off: zero-copy (exported buffer + timeline semaphore)
//! against the copy path a user would otherwise write (Vulkan result read back to the host,
//! copied into CUDA, processed, copied back to the host and uploaded to Vulkan again).
//!
//! Per frame, both paths: Vulkan writes an RGBA8 frame (GPU copy from a device-local source),
//! CUDA XORs every word with a per-frame key, Vulkan takes the result back and copies 8 windows
//! of 4 KiB to the host, which checks them against the expected bytes (outside the timed part).
//! Latency is measured from the Vulkan submit to the host seeing the returned frame; the two
//! paths run in alternating blocks. Prints a markdown table; exits non-zero when any frame fails
//! verification.
//!
//! ```text
//! cargo run --release --features vulkan --example vulkan_cuda_bench -- --frames 1000
//! ```
//!
//! Then, at 1920x1080, where the zero-copy hand-off's time goes (p50 of each stage measured on
//! its own, same buffers and kernel): the Vulkan produce + return submits with a host wait and no
//! CUDA; a host-signalled timeline value -> CUDA stream wait -> kernel -> CUDA signal -> host
//! wait, with no Vulkan queue work; the kernel alone (launch + synchronise); and an empty
//! host -> CUDA -> host timeline round trip.

#[path = "support/kernels.rs"]
mod kernels;
#[path = "support/vk_cuda_raw.rs"]
mod vk_cuda_raw;

use kernels::{frame_key, xor_expected, XOR_WORDS_PTX};
use nvsci::cuda::cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use nvsci::cuda::cudarc::nvrtc::Ptx;
use nvsci::cuda::CudaGpu;
use nvsci::vulkan::ash::vk;
use nvsci::vulkan::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const WAIT: Duration = Duration::from_secs(10);
const WINDOWS: Readback = Readback::Windows { count: 8, len: 4096 };
const BLOCK: u64 = 25;

fn arg(name: &str, default: u64) -> Res<u64> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        Some(i) => Ok(args.get(i + 1).ok_or(format!("{name} needs a value"))?.parse()?),
        None => Ok(default),
    }
}

fn source_frame(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_right(13) as u8).collect()
}

fn launch_xor(stream: &Arc<CudaStream>, f: &CudaFunction, ptr: u64, bytes: u64, key: u32) -> Res<()> {
    let words = bytes / 4;
    let mut b = stream.launch_builder(f);
    b.arg(&ptr).arg(&words).arg(&key);
    let cfg = LaunchConfig {
        grid_dim: (words.div_ceil(256) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the kernel touches `words` 4-byte words at `ptr`, which points to `bytes` bytes.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// Checks the readback windows of a frame against the source transformed with `key`.
fn verify(regions: &[(u64, u64)], back: &[u8], source: &[u8], key: u32) -> bool {
    let mut at = 0usize;
    for &(off, len) in regions {
        let (off, len) = (off as usize, len as usize);
        if back.len() < at + len || back[at..at + len] != xor_expected(&source[off..off + len], key)[..] {
            return false;
        }
        at += len;
    }
    true
}

struct Stats {
    latencies: Vec<Duration>,
    failures: Vec<u64>,
}

impl Stats {
    fn new(frames: u64) -> Self {
        Self { latencies: Vec::with_capacity(frames as usize), failures: Vec::new() }
    }
    fn percentile(&self, p: f64) -> Duration {
        let mut v = self.latencies.clone();
        v.sort();
        if v.is_empty() {
            return Duration::ZERO;
        }
        v[((v.len() - 1) as f64 * p).round() as usize]
    }
    fn fps(&self) -> f64 {
        let total: Duration = self.latencies.iter().sum();
        self.latencies.len() as f64 / total.as_secs_f64()
    }
}

/// The zero-copy loop: one exported buffer, imported into CUDA, timeline (or binary) hand-off.
struct ZeroCopy {
    producer: FrameProducer,
    handoff: CudaHandoff,
    imported: CudaImportedBuffer,
    frame: u64,
    /// Host-relayed hand-off: the host waits for each side's signal before the other side's
    /// wait is enqueued, so no GPU queue ever waits on the other API's queue.
    host_relay: bool,
    /// Host-relayed frames: time of the host wait for the Vulkan-signalled value, of the host
    /// wait for the CUDA-signalled value, and of the return submit with its host wait.
    relay_steps: [Vec<Duration>; 3],
}

impl ZeroCopy {
    fn new(dev: &CudaGpu, vk: &Arc<VulkanContext>, source: &[u8]) -> Res<Self> {
        let size = source.len() as u64;
        let buffer = ExportableBuffer::new(vk, size, vk::BufferUsageFlags::empty())?;
        let imported = buffer.import_into_cuda(dev)?;
        let sems = HandoffSemaphores::new(vk)?;
        let handoff = sems.import_into_cuda(dev)?;
        let config = ProducerConfig::default().with_source(FrameSource::Device).with_readback(WINDOWS);
        let mut producer = FrameProducer::new(vk, &buffer, &sems, config)?;
        producer.staging_mut()?.copy_from_slice(source);
        producer.commit_source()?;
        Ok(Self { producer, handoff, imported, frame: 0, host_relay: false, relay_steps: Default::default() })
    }

    fn frame(
        &mut self,
        stream: &Arc<CudaStream>,
        xor: &CudaFunction,
        source: &[u8],
        stats: &mut Stats,
    ) -> Res<()> {
        let key = frame_key(self.frame);
        let t0 = Instant::now();
        let v = self.producer.submit_produce()?;
        let relay = if self.host_relay { self.handoff.vulkan().timeline().cloned() } else { None };
        let step = Instant::now();
        if let Some(t) = &relay {
            t.wait(v.produced, WAIT)?; // the CUDA wait below finds its value reached
            self.relay_steps[0].push(step.elapsed());
        }
        self.handoff.wait_produced(stream, &v)?;
        launch_xor(stream, xor, self.imported.device_address(), source.len() as u64, key)?;
        self.handoff.signal_done(stream, &v)?;
        let step = Instant::now();
        if let Some(t) = &relay {
            t.wait(v.cuda_done, WAIT)?; // the return submit's wait finds its value reached
            self.relay_steps[1].push(step.elapsed());
        }
        let step = Instant::now();
        self.producer.submit_return()?;
        self.producer.wait_returned(WAIT)?;
        if relay.is_some() {
            self.relay_steps[2].push(step.elapsed());
        }
        stats.latencies.push(t0.elapsed());
        if !verify(self.producer.readback_regions(), self.producer.readback(), source, key) {
            stats.failures.push(self.frame);
        }
        self.frame += 1;
        Ok(())
    }
}

/// The copy path: Vulkan renders into its own buffer and reads it back; the host copies it into
/// CUDA memory; CUDA processes it; the host copies it back and Vulkan uploads it again.
struct CopyPath {
    render: FrameProducer,
    upload: FrameProducer,
    cuda_buf: CudaSlice<u8>,
    frame: u64,
}

impl CopyPath {
    fn new(vk: &Arc<VulkanContext>, stream: &Arc<CudaStream>, source: &[u8]) -> Res<Self> {
        let size = source.len() as u64;
        let a = ExportableBuffer::new(vk, size, vk::BufferUsageFlags::empty())?;
        let b = ExportableBuffer::new(vk, size, vk::BufferUsageFlags::empty())?;
        let render_cfg =
            ProducerConfig::default().with_source(FrameSource::Device).with_readback(Readback::Full);
        let mut render = FrameProducer::host_only(vk, &a, render_cfg)?;
        render.staging_mut()?.copy_from_slice(source);
        render.commit_source()?;
        let upload = FrameProducer::host_only(
            vk,
            &b,
            ProducerConfig::default().with_source(FrameSource::Staging).with_readback(WINDOWS),
        )?;
        let cuda_buf = stream.alloc_zeros::<u8>(source.len())?;
        Ok(Self { render, upload, cuda_buf, frame: 0 })
    }

    fn frame(
        &mut self,
        stream: &Arc<CudaStream>,
        xor: &CudaFunction,
        source: &[u8],
        stats: &mut Stats,
    ) -> Res<()> {
        use nvsci::cuda::cudarc::driver::DevicePtr;
        let key = frame_key(self.frame);
        let t0 = Instant::now();
        self.render.submit_produce()?;
        self.render.submit_return()?;
        let host = self.render.wait_returned(WAIT)?;
        stream.memcpy_htod(host, &mut self.cuda_buf)?;
        let ptr = {
            let (p, _sync) = self.cuda_buf.device_ptr(stream);
            p
        };
        launch_xor(stream, xor, ptr, source.len() as u64, key)?;
        stream.memcpy_dtoh(&self.cuda_buf, self.upload.staging_mut()?)?;
        stream.synchronize()?;
        self.upload.submit_produce()?;
        self.upload.submit_return()?;
        self.upload.wait_returned(WAIT)?;
        stats.latencies.push(t0.elapsed());
        if !verify(self.upload.readback_regions(), self.upload.readback(), source, key) {
            stats.failures.push(self.frame);
        }
        self.frame += 1;
        Ok(())
    }
}

/// p50 of `n` runs of `f` (after 20 warm-up runs).
fn p50(n: u64, mut f: impl FnMut() -> Res<()>) -> Res<f64> {
    for _ in 0..20 {
        f()?;
    }
    let mut v = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let t0 = Instant::now();
        f()?;
        v.push(t0.elapsed());
    }
    v.sort();
    Ok(ms(v[v.len() / 2]))
}

/// Where the zero-copy hand-off's time goes at `w`x`h`: each stage timed on its own.
fn breakdown(dev: &CudaGpu, vk: &Arc<VulkanContext>, xor: &CudaFunction, frames: u64) -> Res<()> {
    let (w, h) = (1920usize, 1080usize);
    let source = source_frame(w * h * 4);
    let bytes = source.len() as u64;
    let stream = dev.context().new_stream()?;
    // 1. Vulkan alone: produce (device copy into the exported buffer) + return (readback
    //    windows), two submits, host fence wait.
    let buffer = ExportableBuffer::new(vk, bytes, vk::BufferUsageFlags::empty())?;
    let cfg = ProducerConfig::default().with_source(FrameSource::Device).with_readback(WINDOWS);
    let mut vk_only = FrameProducer::host_only(vk, &buffer, cfg)?;
    vk_only.staging_mut()?.copy_from_slice(&source);
    vk_only.commit_source()?;
    let vulkan = p50(frames, || {
        vk_only.submit_produce()?;
        vk_only.submit_return()?;
        vk_only.wait_returned(WAIT)?;
        Ok(())
    })?;
    // 2. CUDA alone on the same memory: host signal -> stream wait -> kernel -> stream signal ->
    //    host wait on an exported timeline semaphore pair.
    let imported = buffer.import_into_cuda(dev)?;
    let produced = TimelineSemaphore::new_exportable(vk, 0)?;
    let done = TimelineSemaphore::new_exportable(vk, 0)?;
    let cuda_produced =
        nvsci::cuda::CudaSemaphore::import(dev, produced.export_fd()?, nvsci::cuda::SemaphoreKind::Timeline)?;
    let cuda_done =
        nvsci::cuda::CudaSemaphore::import(dev, done.export_fd()?, nvsci::cuda::SemaphoreKind::Timeline)?;
    let mut value = 0u64;
    let mut round = |kernel: bool| -> Res<()> {
        value += 1;
        cuda_produced.wait(&stream, value)?;
        if kernel {
            launch_xor(&stream, xor, imported.device_address(), bytes, value as u32)?;
        }
        cuda_done.signal(&stream, value)?;
        produced.signal(value)?;
        done.wait(value, WAIT)?;
        Ok(())
    };
    let cuda = p50(frames, || round(true))?;
    let empty = p50(frames, || round(false))?;
    // 3. The kernel alone.
    let kernel = p50(frames, || {
        launch_xor(&stream, xor, imported.device_address(), bytes, 7)?;
        stream.synchronize()?;
        Ok(())
    })?;
    // 4. The full zero-copy hand-off, GPU-to-GPU waits vs relayed through the host.
    let mut zero = ZeroCopy::new(dev, vk, &source)?;
    let mut stats = Stats::new(frames);
    let direct = p50(frames, || zero.frame(&stream, xor, &source, &mut stats))?;
    zero.host_relay = true;
    let relayed = p50(frames, || zero.frame(&stream, xor, &source, &mut stats))?;
    if !stats.failures.is_empty() {
        return Err(format!("{} hand-off frames failed verification", stats.failures.len()).into());
    }
    // 5. The raw reproduction (ash + CUDA driver calls, same GPU work), direct and relayed.
    let mut raw = vk_cuda_raw::RawChain::new(vk, dev, &source)?;
    let mut raw_failures = 0u64;
    let mut raw_frame = 0u64;
    let mut raw_p50 = |relay: vk_cuda_raw::Relay, raw: &mut vk_cuda_raw::RawChain| {
        p50(frames, || {
            let key = frame_key(raw_frame);
            raw.frame(&stream, xor, key, relay)?;
            if !verify(raw.regions(), raw.readback(), &source, key) {
                raw_failures += 1;
            }
            raw_frame += 1;
            Ok(())
        })
    };
    use vk_cuda_raw::Relay;
    let raw_direct = raw_p50(Relay::None, &mut raw)?;
    let mut raw_relays = Vec::new();
    for relay in [Relay::VkWaitSemaphores, Relay::CudaSync, Relay::CounterSpin] {
        raw.relay_waits = Default::default();
        let total = raw_p50(relay, &mut raw)?;
        raw_relays.push((relay, total, raw.relay_waits.clone()));
    }
    if raw_failures > 0 {
        return Err(format!("{raw_failures} raw hand-off frames failed verification").into());
    }
    println!();
    println!("hand-off breakdown at {w}x{h} (p50 of {frames} runs each):");
    println!("| stage | p50 (ms) |");
    println!("|---|---:|");
    println!("| Vulkan produce + return submits, host fence wait (no CUDA) | {vulkan:.3} |");
    println!("| host timeline signal -> CUDA wait -> kernel -> CUDA signal -> host wait (no Vulkan queue) | {cuda:.3} |");
    println!("| the same without the kernel (semaphore round trip alone) | {empty:.3} |");
    println!("| the kernel alone (launch + synchronise) | {kernel:.3} |");
    println!("| zero-copy hand-off, Vulkan queue <-> CUDA stream waits on each other | {direct:.3} |");
    println!("| zero-copy hand-off relayed by the host (each wait enqueued after its value is reached) | {relayed:.3} |");
    let median = |v: &[Duration]| {
        let mut v = v.to_vec();
        v.sort();
        v.get(v.len() / 2).map_or(0.0, |d| ms(*d))
    };
    let [produced, cuda_done, returned] = &zero.relay_steps;
    println!(
        "|   of which: host wait for the Vulkan-signalled value | {:.3} |\n\
         |   of which: host wait for the CUDA-signalled value | {:.3} |\n\
         |   of which: return submit + host wait for it | {:.3} |",
        median(produced),
        median(cuda_done),
        median(returned)
    );
    println!();
    println!("raw reproduction (ash + CUDA driver calls, same GPU work, same run):");
    println!("| variant | p50 (ms) | host wait, Vulkan value (ms) | host wait, CUDA value (ms) |");
    println!("|---|---:|---:|---:|");
    println!("| raw chain, queue and stream wait on each other | {raw_direct:.3} | | |");
    for (relay, total, [vk_wait, cuda_wait]) in &raw_relays {
        let name = match relay {
            Relay::VkWaitSemaphores => "raw relay: vkWaitSemaphores for both values",
            Relay::CudaSync => "raw relay: vkWaitSemaphores, then cuStreamSynchronize for CUDA's value",
            Relay::CounterSpin => "raw relay: spinning on vkGetSemaphoreCounterValue for both values",
            Relay::None => "raw chain",
        };
        println!("| {name} | {total:.3} | {:.3} | {:.3} |", median(vk_wait), median(cuda_wait));
    }
    println!("crate / raw (direct chain): {:.2}x", direct / raw_direct);
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> Res<()> {
    env_logger::init();
    let frames = arg("--frames", 1000)?.max(1);
    let warmup = arg("--warmup", 20)?;
    let dev = CudaGpu::open(0)?;
    let vk = VulkanContext::for_cuda(&dev)?;
    let mode = HandoffSemaphores::new(&vk)?.mode();
    println!(
        "GPU: {} ({}), Vulkan {} API {}, hand-off: {mode:?}, {frames} frames per path (+{warmup} warm-up)",
        dev.name()?,
        vk.info().uuid_string(),
        vk.info().name,
        vk.info().api_version_string()
    );
    let module = dev.context().load_module(Ptx::from_src(XOR_WORDS_PTX))?;
    let xor = module.load_function("xor_words")?;
    let stream = dev.context().new_stream()?;
    let mut rows = Vec::new();
    let mut failed = false;
    for (w, h) in [(1920usize, 1080usize), (3840, 2160)] {
        let source = source_frame(w * h * 4);
        let mut zero = ZeroCopy::new(&dev, &vk, &source)?;
        let mut copy = CopyPath::new(&vk, &stream, &source)?;
        let (mut zs, mut cs) = (Stats::new(warmup), Stats::new(warmup));
        for _ in 0..warmup {
            zero.frame(&stream, &xor, &source, &mut zs)?;
            copy.frame(&stream, &xor, &source, &mut cs)?;
        }
        let (mut z, mut c) = (Stats::new(frames), Stats::new(frames));
        z.failures = zs.failures;
        c.failures = cs.failures;
        let mut done = 0;
        while done < frames {
            let n = BLOCK.min(frames - done);
            // Alternate which path runs first in each block.
            let zero_first = (done / BLOCK).is_multiple_of(2);
            for pass in 0..2 {
                for _ in 0..n {
                    if (pass == 0) == zero_first {
                        zero.frame(&stream, &xor, &source, &mut z)?;
                    } else {
                        copy.frame(&stream, &xor, &source, &mut c)?;
                    }
                }
            }
            done += n;
        }
        for (name, s) in [("zero-copy", &z), ("copy", &c)] {
            if !s.failures.is_empty() {
                failed = true;
                eprintln!(
                    "{w}x{h} {name}: {} frames failed verification (first: {:?})",
                    s.failures.len(),
                    &s.failures[..s.failures.len().min(5)]
                );
            }
        }
        rows.push((w, h, z, c));
    }
    println!();
    println!("| size (RGBA8) | path | fps | p50 (ms) | p99 (ms) | copy/zero-copy p50 |");
    println!("|---|---|---:|---:|---:|---:|");
    for (w, h, z, c) in &rows {
        let ratio = ms(c.percentile(0.5)) / ms(z.percentile(0.5));
        println!(
            "| {w}x{h} | zero-copy ({mode:?}) | {:.1} | {:.3} | {:.3} | |",
            z.fps(),
            ms(z.percentile(0.5)),
            ms(z.percentile(0.99))
        );
        println!(
            "| {w}x{h} | copy via host | {:.1} | {:.3} | {:.3} | {ratio:.2}x |",
            c.fps(),
            ms(c.percentile(0.5)),
            ms(c.percentile(0.99))
        );
    }
    breakdown(&dev, &vk, &xor, frames)?;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}
