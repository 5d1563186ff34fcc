//! A camera process and a consumer process sharing frames zero-copy through NvSciIpc.
//!
//! ```text
//! cargo run --example camera_ipc                          # both roles: starts the consumer itself
//! cargo run --example camera_ipc -- --role producer       # one role per process (start both)
//! cargo run --example camera_ipc -- --role consumer
//! cargo run --release --example camera_ipc -- --cuda --frames 1000 --width 1920 --height 1080
//! ```
//!
//! The producer ("camera") is a stream whose consumer is in another process: it is built with
//! `backend.stream(format).remote_consumer(endpoint, desc).build()` and acquires,
//! writes the moving test pattern and presents exactly as it would for a consumer in its own
//! process. The consumer process connects with `Consumer::connect_with`, which imports the frames
//! read-only, and gets the same `Consumer` as an in-process one: its acquire waits on the
//! present fence (on a CUDA stream with `--cuda`, else on the CPU), it converts the frame to
//! RGBA, and its release returns a release fence to the producer. Every frame is verified: its RGB sum must equal the sum computed from the
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
use nvsci::pipeline::{Backend, Consumer, ConsumerDesc, Engine, FrameFormat, FrameLayout};
use nvsci::{Error, Implementation, NvSci, RingError};
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

const TIMEOUT: Duration = Duration::from_secs(10);

fn producer(a: &Args, lib: &NvSci, ipc: &Ipc, name: &str) -> Result<(), String> {
    let ep = IpcEndpoint::open(ipc, name).map_err(|e| e.to_string())?;
    let format = FrameFormat::nv12(a.width, a.height);
    let ring = Backend::with_library(lib.clone())
        .stream(format)
        .frames(a.buffers)
        .timeout(TIMEOUT)
        .remote_consumer(ep, ConsumerDesc::new(consumer_engine(a)?))
        .build()
        .map_err(|e| e.to_string())?;
    let (mut p, _) = ring.split().map_err(|e| e.to_string())?;
    let layout = p.layout().clone();
    let start = Instant::now();
    for _ in 0..a.frames {
        let f = p.acquire().map_err(|e| e.to_string())?;
        fill_test_pattern(&layout, f.sequence(), &mut p.cpu_write(&f).map_err(|e| e.to_string())?)?;
        p.present(f).map_err(|e| e.to_string())?;
    }
    // Dropping the producer ends the stream and takes every frame back.
    drop(p);
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

/// The engine the consumer process works on (the producer's seat must name it): CUDA device 0
/// with `--cuda`, else the CPU.
fn consumer_engine(a: &Args) -> Result<Engine, String> {
    #[cfg(feature = "cuda")]
    if a.cuda {
        return nvsci::cuda::CudaGpu::open(0).map(Engine::Cuda).map_err(|e| e.to_string());
    }
    if a.cuda {
        return Err("--cuda needs the `cuda` feature".into());
    }
    Ok(Engine::Cpu)
}

fn consumer(a: &Args, lib: &NvSci, ipc: &Ipc, name: &str) -> Result<(), String> {
    let ep = IpcEndpoint::open(ipc, name).map_err(|e| e.to_string())?;
    let format = FrameFormat::nv12(a.width, a.height);
    #[cfg(feature = "cuda")]
    if a.cuda {
        return gpu::consume(a, lib, ep, format);
    }
    if a.cuda {
        return Err("--cuda needs the `cuda` feature".into());
    }
    let mut c =
        Consumer::connect_with(lib, ep, format, ConsumerDesc::cpu(), TIMEOUT).map_err(|e| e.to_string())?;
    let layout: FrameLayout = c.layout().clone();
    let mut rgba = vec![0u8; (a.width * a.height * 4) as usize];
    let (mut frames, mut bad) = (0u64, 0u64);
    let fds = open_fds();
    loop {
        let f = match c.acquire() {
            Ok(f) => f,
            Err(Error::Ring(RingError::Ended { .. })) => break,
            Err(e) => return Err(e.to_string()),
        };
        let sum = {
            let bytes = c.cpu_read(&f).map_err(|e| e.to_string())?;
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
    //! The CUDA consumer: `Consumer::connect_with` imports the frames and both sync objects into CUDA
    //! once; per frame `process` enqueues a stream wait on the present fence, the NV12 -> RGBA
    //! kernel (with its per-frame RGB sum), and a stream signal of the release fence.
    use super::*;
    use nvsci::convert::Nv12ToRgba;
    use nvsci::cuda::cudarc::driver::DevicePtr;
    use nvsci::cuda::CudaGpu;

    pub fn consume(a: &Args, lib: &NvSci, ep: IpcEndpoint, format: FrameFormat) -> Result<(), String> {
        let dev = CudaGpu::open(0).map_err(|e| e.to_string())?;
        let free = |dev: &CudaGpu| dev.context().mem_get_info().map(|m| m.0 >> 20).unwrap_or(0);
        let mut c =
            Consumer::connect_with(lib, ep, format, ConsumerDesc::new(Engine::Cuda(dev.clone())), TIMEOUT)
                .map_err(|e| e.to_string())?;
        let layout = c.layout().clone();
        let stream = dev.context().new_stream().map_err(|e| e.to_string())?;
        c.set_stream(stream.clone()).map_err(|e| e.to_string())?;
        let kernel = Nv12ToRgba::load(&dev).map_err(|e| e.to_string())?;
        let rgba = stream.alloc_zeros::<u8>((a.width * a.height * 4) as usize).map_err(|e| e.to_string())?;
        let sums = stream.alloc_zeros::<u64>(a.frames.max(1) as usize).map_err(|e| e.to_string())?;
        let fds = open_fds();
        let free_set_up = free(&dev);
        let mut seqs = Vec::new();
        loop {
            let t = seqs.len() as u64;
            let done = c.process(|f| {
                if t >= a.frames {
                    return Ok(None);
                }
                let s = f.stream();
                let (dst, _g1) = rgba.device_ptr(s);
                let (sum0, _g2) = sums.device_ptr(s);
                let sum = sum0 + 8 * t;
                // SAFETY: the frame is a whole NV12 image of this layout, mapped read-only; `dst`
                // holds w*h*4 bytes; `sum` is element t < frames of `sums`.
                unsafe { kernel.enqueue(s, &layout, f.device_address(), dst, sum) }?;
                Ok(Some(f.sequence()))
            });
            match done {
                Ok(Some(seq)) => seqs.push(seq),
                Ok(None) => return Err(format!("more than the {} frames announced", a.frames)),
                Err(Error::Ring(RingError::Ended { .. })) => break,
                Err(e) => return Err(e.to_string()),
            }
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
        drop((rgba, sums, c));
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
