//! What a slow mailbox consumer in another process costs the camera, and how long its acquire
//! takes, in one run (release build):
//!
//! ```text
//! cargo run --release --example stream_ipc_bench -- [--frames 3000] [--period-us 1000] [--size 1048576]
//! ```
//!
//! 1. The floor: a stream with a seat reserved for a consumer in another process (`reserve_remote`)
//!    and nobody attached; the camera acquires and presents a frame every `--period-us` and the
//!    time of each `acquire` + `present` pair is recorded (writing the frame is not timed).
//! 2. The same stream with a mailbox consumer process attached to that seat, taking one frame
//!    every 100 camera periods (100 times slower than the camera): the same pairs are timed.
//!    Its mailbox is in the camera's process, so the camera never waits for it beyond the
//!    frame it holds; the ratio of the two p99s is what it costs.
//! 3. The viewer's side: each `acquire` (the request, the producer's answer with the newest
//!    frame and the fence import) is timed in the viewer process and printed there.
//! 4. Attach latency: another consumer process attaches to a second seat of the running stream,
//!    takes one frame and leaves, `--attaches` times (default 50); each attach is timed from
//!    its `connect_with` call to its first frame in hand (the offer, the imports of every frame
//!    and the present object, its release object's export, and the wait for the next present).
//!
//! The mock runs both processes (its channels in a temporary directory) unless NVIDIA's
//! libraries are present; the frames are checked byte by byte in the viewer.

use nvsci::ipc::{Ipc, IpcEndpoint};
use nvsci::pipeline::{Backend, Consumer, ConsumerDesc, FrameFormat, Producer};
use nvsci::{Error, NvSci, RingError};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const EP: (&str, &str) = ("stream_ipc_bench_0", "stream_ipc_bench_1");
/// The seat of the consumer process that attaches and leaves over and over.
const EP2: (&str, &str) = ("stream_ipc_attach_0", "stream_ipc_attach_1");

struct Args {
    viewer: bool,
    attacher: bool,
    attaches: usize,
    frames: usize,
    period: Duration,
    size: u64,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        viewer: false,
        attacher: false,
        attaches: 50,
        frames: 3000,
        period: Duration::from_micros(1000),
        size: 1 << 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || {
            it.next()
                .ok_or(format!("{flag} needs a value"))
                .and_then(|v| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}")))
        };
        match flag.as_str() {
            "--viewer" => a.viewer = true,
            "--attacher" => a.attacher = true,
            "--attaches" => a.attaches = val()? as usize,
            "--frames" => a.frames = val()? as usize,
            "--period-us" => a.period = Duration::from_micros(val()?),
            "--size" => a.size = val()?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

fn pattern(seq: u64, i: usize) -> u8 {
    (i as u64).wrapping_mul(31).wrapping_add(seq.wrapping_mul(7)) as u8
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn describe(name: &str, mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort_unstable();
    let (p50, p99) = (percentile(&v, 0.5), percentile(&v, 0.99));
    println!(
        "{name}: {} frames, acquire + present p50 {:.1} us, p99 {:.1} us, max {:.1} us",
        v.len(),
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        v[v.len() - 1].as_secs_f64() * 1e6
    );
    (p50, p99)
}

/// Runs the camera for `frames` frames; returns the time of each acquire + present.
fn run_camera(p: &mut Producer, frames: usize, period: Duration) -> Result<Vec<Duration>, Error> {
    let mut times = Vec::with_capacity(frames);
    for _ in 0..frames {
        let next = Instant::now() + period;
        let t = Instant::now();
        let f = p.acquire()?;
        let acquired = t.elapsed();
        let seq = f.sequence();
        {
            let mut w = p.cpu_write(&f)?;
            // The first and last bytes of each 4 KiB page: enough for the viewer's check to
            // see a stale frame, cheap enough not to be the camera's period.
            for i in (0..w.len()).step_by(4096) {
                w[i] = pattern(seq, i);
            }
        }
        let t = Instant::now();
        p.present(f)?;
        times.push(acquired + t.elapsed());
        while Instant::now() < next {
            std::hint::spin_loop();
        }
    }
    Ok(times)
}

fn viewer(a: &Args, lib: &NvSci, ipc: &Ipc) -> Result<(), String> {
    let ep = IpcEndpoint::open(ipc, EP.1).map_err(|e| e.to_string())?;
    let mut c = Consumer::connect_with(
        lib,
        ep,
        FrameFormat::Raw { size: a.size },
        ConsumerDesc::cpu().mailbox(),
        Duration::from_secs(30),
    )
    .map_err(|e| e.to_string())?;
    let mut times = Vec::new();
    let mut last = None;
    loop {
        let t = Instant::now();
        let f = match c.acquire() {
            Ok(f) => f,
            Err(Error::Ring(RingError::Ended { .. })) => break,
            Err(e) => return Err(e.to_string()),
        };
        times.push(t.elapsed());
        let seq = f.sequence();
        if last.is_some_and(|l| seq <= l) {
            return Err(format!("sequence {seq} after {last:?}"));
        }
        last = Some(seq);
        let bytes = c.cpu_read(&f).map_err(|e| e.to_string())?;
        if let Some(i) = (0..bytes.len()).step_by(4096).find(|&i| bytes[i] != pattern(seq, i)) {
            return Err(format!("frame {seq}: byte {i} differs"));
        }
        drop(bytes);
        c.release(f).map_err(|e| e.to_string())?;
        std::thread::sleep(a.period * 100);
    }
    times.sort_unstable();
    if !times.is_empty() {
        println!(
            "viewer (mailbox, another process): {} acquires, each asks for the newest frame: p50 {:.1} us, p99 {:.1} us",
            times.len(),
            percentile(&times, 0.5).as_secs_f64() * 1e6,
            percentile(&times, 0.99).as_secs_f64() * 1e6
        );
    }
    Ok(())
}

/// Attaches to the running stream `a.attaches` times, each time timing the attach from the
/// `connect_with` call to its first frame in hand, then leaves.
fn attacher(a: &Args, lib: &NvSci, ipc: &Ipc) -> Result<(), String> {
    let mut times = Vec::with_capacity(a.attaches);
    for _ in 0..a.attaches {
        let t = Instant::now();
        let ep = IpcEndpoint::open(ipc, EP2.1).map_err(|e| e.to_string())?;
        let mut c = Consumer::connect_with(
            lib,
            ep,
            FrameFormat::Raw { size: a.size },
            ConsumerDesc::cpu(),
            Duration::from_secs(30),
        )
        .map_err(|e| e.to_string())?;
        let f = c.acquire().map_err(|e| e.to_string())?;
        times.push(t.elapsed());
        let seq = f.sequence();
        let bytes = c.cpu_read(&f).map_err(|e| e.to_string())?;
        if let Some(i) = (0..bytes.len()).step_by(4096).find(|&i| bytes[i] != pattern(seq, i)) {
            return Err(format!("frame {seq}: byte {i} differs"));
        }
        drop(bytes);
        c.release(f).map_err(|e| e.to_string())?;
        drop(c);
    }
    times.sort_unstable();
    println!(
        "attach (another process, from connect_with to its first frame, {} attaches): p50 {:.2} ms, p99 {:.2} ms",
        times.len(),
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3
    );
    Ok(())
}

fn camera(a: &Args, lib: &NvSci, ipc: &Ipc, dir: Option<&std::path::Path>) -> Result<(), String> {
    let e = |e: Error| e.to_string();
    let ring = Backend::with_library(lib.clone())
        .stream(FrameFormat::Raw { size: a.size })
        .frames(4)
        .reserve_remote(IpcEndpoint::open(ipc, EP.0).map_err(e)?, ConsumerDesc::cpu())
        .reserve_remote(IpcEndpoint::open(ipc, EP2.0).map_err(e)?, ConsumerDesc::cpu())
        .build()
        .map_err(e)?;
    let (mut p, _) = ring.split().map_err(e)?;
    println!("stream_ipc_bench: {} frames of {} bytes, one every {:?}", a.frames, a.size, a.period);
    // Warm-up (page faults of the frames' first writes, caches), then the floor.
    run_camera(&mut p, a.frames / 10, a.period).map_err(e)?;
    let floor = run_camera(&mut p, a.frames, a.period).map_err(e)?;
    let mut cmd = std::process::Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
    cmd.args(std::env::args().skip(1)).arg("--viewer");
    if let Some(d) = dir {
        cmd.env(nvsci_mock::IPC_DIR_ENV, d);
    }
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    // Frames flow while it attaches; time the camera once it is attached.
    let until = Instant::now() + Duration::from_secs(30);
    while !p.remote_seats()[0].attached {
        if Instant::now() > until {
            return Err("the viewer did not attach".into());
        }
        run_camera(&mut p, 1, a.period).map_err(e)?;
    }
    let slow = run_camera(&mut p, a.frames, a.period).map_err(e)?;
    let stats = p.consumer_stats(0).unwrap_or_default();
    // A consumer process that attaches, takes a frame and leaves, over and over, while the
    // camera runs.
    let mut cmd = std::process::Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
    cmd.args(std::env::args().skip(1)).arg("--attacher");
    if let Some(d) = dir {
        cmd.env(nvsci_mock::IPC_DIR_ENV, d);
    }
    let mut attaching = cmd.spawn().map_err(|e| e.to_string())?;
    let attached = loop {
        if let Some(s) = attaching.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        run_camera(&mut p, 10, a.period).map_err(e)?;
    };
    let seat = p.remote_seats()[1].clone();
    drop(p);
    let status = child.wait().map_err(|e| e.to_string())?;
    let (f50, f99) = describe("no consumer attached", floor);
    let (s50, s99) = describe("a mailbox consumer process 100x slower attached", slow);
    println!(
        "ratio (slow mailbox / none): p50 {:.2}x, p99 {:.2}x; the viewer was sent {} frames and skipped {}",
        s50.as_secs_f64() / f50.as_secs_f64(),
        s99.as_secs_f64() / f99.as_secs_f64(),
        stats.delivered,
        stats.skipped
    );
    println!("attaching consumer's seat: {} attaches, {} left, {} lost", seat.attaches, seat.left, seat.lost);
    if !status.success() {
        return Err(format!("the viewer process failed ({status})"));
    }
    if !attached.success() {
        return Err(format!("the attaching process failed ({attached})"));
    }
    Ok(())
}

fn main() -> ExitCode {
    env_logger::init();
    let run = || -> Result<(), String> {
        let a = parse()?;
        let (lib, ipc) = match (NvSci::load(), Ipc::load()) {
            (Ok(l), Ok(i)) => (l, i),
            _ => (NvSci::mock(), Ipc::mock().map_err(|e| e.to_string())?),
        };
        if a.viewer {
            return viewer(&a, &lib, &ipc);
        }
        if a.attacher {
            return attacher(&a, &lib, &ipc);
        }
        let mut dir = None;
        if ipc.is_mock() && std::env::var_os(nvsci_mock::IPC_DIR_ENV).is_none() {
            let d = std::env::temp_dir().join(format!("nvsci-stream-bench-{}", std::process::id()));
            std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
            let cfg = format!(
                "INTER_PROCESS {} {} 16 4096\nINTER_PROCESS {} {} 16 4096\n",
                EP.0, EP.1, EP2.0, EP2.1
            );
            std::fs::write(d.join("nvsciipc.cfg"), cfg).map_err(|e| e.to_string())?;
            nvsci_mock::set_ipc_dir(Some(&d));
            dir = Some(d);
        }
        let r = camera(&a, &lib, &ipc, dir.as_deref());
        if let Some(d) = dir {
            let _ = std::fs::remove_dir_all(d);
        }
        r
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stream_ipc_bench: {e}");
            ExitCode::FAILURE
        }
    }
}
