//! A camera process and a consumer process sharing frames zero-copy through NvSciIpc.
//!
//! ```text
//! cargo run --example camera_ipc                          # both roles: starts the consumer itself
//! cargo run --example camera_ipc -- --role producer       # one role per process (start both)
//! cargo run --example camera_ipc -- --role consumer
//! cargo run --release --example camera_ipc -- --cuda --frames 1000 --width 1920 --height 1080
//! ```
//!
//! The producer ("camera") allocates NV12 frames, writes the moving test pattern into each and
//! presents it with a fence; the consumer imports the frames read-only, waits on the fence,
//! converts the frame to RGBA (on a CUDA stream with `--cuda`, else on the CPU) and returns a
//! release fence. Every frame is verified: its RGB sum must equal the sum computed from the
//! pattern itself. The consumer exits non-zero on any mismatch.
//!
//! With NVIDIA's NvSci and NvSciIpc libraries present (Jetson, DRIVE OS) the endpoints are
//! `nvscisync_a_0` / `nvscisync_a_1` of `/etc/nvsciipc.cfg` (override with `--endpoints A,B`).
//! Elsewhere the mock runs both processes: when `NVSCI_MOCK_IPC_DIR` is not set, a temporary
//! directory with an `nvsciipc.cfg` is made for the run. With `--cuda` the mock's frames and
//! fences reach the GPU through host memory (its GPU mode).

#[path = "support/nv12_pattern.rs"]
mod nv12_pattern;

use nv12_pattern::{fill_test_pattern, test_pattern_statistic};
use nvsci::convert::nv12_to_rgba;
use nvsci::ipc::{Ipc, IpcEndpoint};
use nvsci::pipeline::ipc::{IpcConsumer, IpcProducer};
use nvsci::pipeline::{Engine, FrameFormat, FrameLayout};
use nvsci::{Implementation, NvSci};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
struct Args {
    role: Option<String>,
    width: u32,
    height: u32,
    frames: u64,
    buffers: usize,
    cuda: bool,
    endpoints: Option<(String, String)>,
}

fn parse() -> Result<Args, String> {
    let mut a =
        Args { role: None, width: 640, height: 480, frames: 300, buffers: 4, cuda: false, endpoints: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        let num = |s: String| s.parse::<u64>().map_err(|e| format!("{flag} {s}: {e}"));
        match flag.as_str() {
            "--role" => a.role = Some(val()?),
            "--width" => a.width = num(val()?)? as u32,
            "--height" => a.height = num(val()?)? as u32,
            "--frames" => a.frames = num(val()?)?,
            "--buffers" => a.buffers = num(val()?)? as usize,
            "--cuda" => a.cuda = true,
            "--endpoints" => {
                let v = val()?;
                let (p, c) =
                    v.split_once(',').ok_or(format!("--endpoints {v}: expected PRODUCER,CONSUMER"))?;
                a.endpoints = Some((p.to_owned(), c.to_owned()));
            }
            "-h" | "--help" => {
                return Err(
                    "usage: camera_ipc [--role producer|consumer] [--width W] [--height H] [--frames N] \
                            [--buffers N] [--cuda] [--endpoints PRODUCER,CONSUMER]"
                        .into(),
                )
            }
            other => return Err(format!("unknown argument {other} (see --help)")),
        }
    }
    if let Some(r) = &a.role {
        if r != "producer" && r != "consumer" {
            return Err(format!("--role {r}: producer or consumer"));
        }
    }
    Ok(a)
}

/// The NvSci implementation and NvSciIpc to use: NVIDIA's when both load, else the mock.
fn libraries() -> Result<(NvSci, Ipc), String> {
    if let (Ok(lib), Ok(ipc)) = (NvSci::load(), Ipc::load()) {
        return Ok((lib, ipc));
    }
    Ok((NvSci::mock(), Ipc::mock().map_err(|e| e.to_string())?))
}

fn endpoints(a: &Args, lib: &NvSci) -> (String, String) {
    a.endpoints.clone().unwrap_or_else(|| match lib.implementation() {
        Implementation::Native => ("nvscisync_a_0".into(), "nvscisync_a_1".into()),
        Implementation::Mock => ("camera_ipc_0".into(), "camera_ipc_1".into()),
    })
}

/// For the mock without a configured directory: a fresh one with this run's channel.
fn mock_dir(p: &str, c: &str) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("nvsci-camera-ipc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let cfg = format!("# camera_ipc\nINTER_PROCESS {p} {c} 16 4096\n");
    std::fs::write(dir.join("nvsciipc.cfg"), cfg).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

const TIMEOUT: Option<Duration> = Some(Duration::from_secs(10));

fn producer(a: &Args, lib: &NvSci, ipc: &Ipc, name: &str) -> Result<(), String> {
    let ep = IpcEndpoint::open(ipc, name).map_err(|e| e.to_string())?;
    let format = FrameFormat::Nv12 { width: a.width, height: a.height };
    let mut p = IpcProducer::connect(lib, ep, format, a.buffers, TIMEOUT).map_err(|e| e.to_string())?;
    let layout = p.layout().clone();
    let start = Instant::now();
    for _ in 0..a.frames {
        let mut fill = Ok(());
        p.produce(|buf, seq| fill = fill_test_pattern(&layout, seq, buf)).map_err(|e| e.to_string())?;
        fill?;
    }
    p.finish().map_err(|e| e.to_string())?;
    let s = start.elapsed().as_secs_f64();
    println!(
        "producer: {} frames of {}x{} NV12 presented in {s:.2} s ({:.1} frames/s, pattern generation included)",
        a.frames,
        a.width,
        a.height,
        a.frames as f64 / s
    );
    Ok(())
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

fn consumer(a: &Args, lib: &NvSci, ipc: &Ipc, name: &str) -> Result<(), String> {
    let ep = IpcEndpoint::open(ipc, name).map_err(|e| e.to_string())?;
    let format = FrameFormat::Nv12 { width: a.width, height: a.height };
    #[cfg(feature = "cuda")]
    if a.cuda {
        return gpu::consume(a, lib, ep, format);
    }
    if a.cuda {
        return Err("--cuda needs the `cuda` feature".into());
    }
    let mut c = IpcConsumer::connect(lib, ep, format, Engine::Cpu, TIMEOUT).map_err(|e| e.to_string())?;
    let layout: FrameLayout = c.layout().clone();
    let mut rgba = vec![0u8; (a.width * a.height * 4) as usize];
    let (mut frames, mut bad) = (0u64, 0u64);
    let fds = open_fds();
    while let Some(f) = c.next_frame().map_err(|e| e.to_string())? {
        c.wait_cpu(&f).map_err(|e| e.to_string())?;
        let sum = {
            let bytes =
                c.buffer(f.slot()).ok_or("slot out of range")?.cpu_read().map_err(|e| e.to_string())?;
            nv12_to_rgba(&layout, &bytes[..layout.size as usize], &mut rgba).map_err(|e| e.to_string())?
        };
        if sum != test_pattern_statistic(a.width, a.height, f.sequence()) {
            bad += 1;
        }
        c.release(f).map_err(|e| e.to_string())?;
        frames += 1;
    }
    report(frames, bad, fds, "CPU")
}

fn report(frames: u64, bad: u64, fds_before: usize, engine: &str) -> Result<(), String> {
    let fds = open_fds();
    println!(
        "consumer ({engine}): {frames} frames imported read-only, converted and verified: {} correct, {bad} wrong; \
         open fds {fds_before} -> {fds}",
        frames - bad
    );
    if bad > 0 || fds > fds_before {
        return Err(format!("{bad} frames wrong, {} fds more", fds.saturating_sub(fds_before)));
    }
    Ok(())
}

#[cfg(feature = "cuda")]
mod gpu {
    //! The CUDA consumer: the frames and both sync objects are imported once; per frame a stream
    //! wait on the present fence, the NV12 -> RGBA kernel (with its per-frame RGB sum), and a
    //! stream signal of the release fence.
    use super::*;
    use nvsci::convert::Nv12ToRgba;
    use nvsci::cuda::cudarc::driver::DevicePtr;
    use nvsci::cuda::{CudaGpu, CudaSyncObj, ExternalMemory, MemSync, ReadOnly};

    pub fn consume(a: &Args, lib: &NvSci, ep: IpcEndpoint, format: FrameFormat) -> Result<(), String> {
        let dev = CudaGpu::open(0).map_err(|e| e.to_string())?;
        let free = |dev: &CudaGpu| dev.context().mem_get_info().map(|m| m.0 >> 20).unwrap_or(0);
        let mut c = IpcConsumer::connect(lib, ep, format, Engine::Cuda(dev.clone()), TIMEOUT)
            .map_err(|e| e.to_string())?;
        let layout = c.layout().clone();
        let stream = dev.context().new_stream().map_err(|e| e.to_string())?;
        let mut mapped = Vec::new();
        for b in c.buffers() {
            let m =
                ExternalMemory::<ReadOnly>::from_buf_obj(&dev, b.as_buf_obj()).map_err(|e| e.to_string())?;
            let map = m.map_all().map_err(|e| e.to_string())?;
            mapped.push((m, map));
        }
        let present = CudaSyncObj::import(&dev, c.present_object()).map_err(|e| e.to_string())?;
        let release = CudaSyncObj::import(&dev, c.release_object()).map_err(|e| e.to_string())?;
        let kernel = Nv12ToRgba::load(&dev).map_err(|e| e.to_string())?;
        let rgba = stream.alloc_zeros::<u8>((a.width * a.height * 4) as usize).map_err(|e| e.to_string())?;
        let sums = stream.alloc_zeros::<u64>(a.frames.max(1) as usize).map_err(|e| e.to_string())?;
        let fds = open_fds();
        let free_set_up = free(&dev);
        let mut seqs = Vec::new();
        while let Some(f) = c.next_frame().map_err(|e| e.to_string())? {
            let t = seqs.len() as u64;
            if t >= a.frames {
                return Err(format!("more than the {} frames announced", a.frames));
            }
            present.wait(&stream, f.present_fence(), MemSync::Auto).map_err(|e| e.to_string())?;
            let src = mapped[f.slot()].1.device_address();
            let (dst, _g1) = rgba.device_ptr(&stream);
            let (sum0, _g2) = sums.device_ptr(&stream);
            let sum = sum0 + 8 * t;
            // SAFETY: `src` is a whole NV12 frame of this layout, mapped read-only; `dst` holds
            // w*h*4 bytes; `sum` is element t < frames of `sums`.
            unsafe { kernel.enqueue(&stream, &layout, src, dst, sum) }.map_err(|e| e.to_string())?;
            let done = release.signal(&stream, MemSync::Auto).map_err(|e| e.to_string())?;
            seqs.push(f.sequence());
            c.release_after(f, done).map_err(|e| e.to_string())?;
        }
        let got = stream.clone_dtoh(&sums).map_err(|e| e.to_string())?;
        stream.synchronize().map_err(|e| e.to_string())?;
        let bad = seqs
            .iter()
            .enumerate()
            .filter(|(i, seq)| got[*i] != test_pattern_statistic(a.width, a.height, **seq))
            .count() as u64;
        let frames = seqs.len() as u64;
        let free_frames = free(&dev);
        drop((present, release, mapped, rgba, sums, c));
        // The drops queue the CUDA destroys for the teardown thread: let them run first.
        dev.flush_teardown(std::time::Duration::from_secs(60));
        let free_teardown = free(&dev);
        println!(
            "consumer (CUDA): device memory free {free_set_up} MiB after set-up, {free_frames} MiB after the \
             frames, {free_teardown} MiB after teardown"
        );
        if free_frames < free_set_up {
            return Err(format!("device memory grew by {} MiB over the frames", free_set_up - free_frames));
        }
        report(frames, bad, fds, "CUDA")
    }
}

fn main() -> ExitCode {
    env_logger::init();
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let run = || -> Result<(), String> {
        let (lib, ipc) = libraries()?;
        let (pname, cname) = endpoints(&a, &lib);
        println!(
            "camera_ipc: {} NvSci, {} NvSciIpc",
            match lib.implementation() {
                Implementation::Native => "NVIDIA's",
                Implementation::Mock => "the mock",
            },
            if ipc.is_mock() { "the mock's (Unix domain sockets)" } else { "NVIDIA's" }
        );
        match a.role.as_deref() {
            Some("producer") => producer(&a, &lib, &ipc, &pname),
            Some("consumer") => consumer(&a, &lib, &ipc, &cname),
            _ => {
                // Both roles: start the consumer as a second process of this program.
                let mut cmd = std::process::Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
                cmd.args(std::env::args().skip(1)).args(["--role", "consumer"]);
                let mut dir = None;
                if ipc.is_mock() && std::env::var_os(nvsci_mock_env()).is_none() {
                    let d = mock_dir(&pname, &cname)?;
                    nvsci_mock::set_ipc_dir(Some(&d));
                    cmd.env(nvsci_mock_env(), &d);
                    dir = Some(d);
                }
                let mut child = cmd.spawn().map_err(|e| format!("starting the consumer process: {e}"))?;
                let r = producer(&a, &lib, &ipc, &pname);
                let status = child.wait().map_err(|e| e.to_string())?;
                if let Some(d) = dir {
                    let _ = std::fs::remove_dir_all(d);
                }
                r?;
                if !status.success() {
                    return Err(format!("the consumer process failed ({status})"));
                }
                Ok(())
            }
        }
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("camera_ipc: {e}");
            ExitCode::FAILURE
        }
    }
}

fn nvsci_mock_env() -> &'static str {
    nvsci_mock::IPC_DIR_ENV
}
