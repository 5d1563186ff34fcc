//! A sensor stream across processes: a camera process and three consumer processes that come
//! and go while it runs.
//!
//! ```text
//! cargo run --example stream_ipc                     # the camera; it starts the three consumers
//! cargo run --release --example stream_ipc -- --frames 3000 --period-us 500 --size 1048576
//! ```
//!
//! * the camera presents `--frames` frames, one every `--period-us`, each filled with a byte
//!   pattern of its sequence, and never waits for the slow ones;
//! * `fast`: a FIFO consumer attached while the stream is built (`remote_consumer`); it gets
//!   every frame and checks every byte;
//! * `viewer`: a slow CPU viewer in mailbox mode (`reserve_remote`, `ConsumerDesc::mailbox`)
//!   that attaches while the stream runs and looks at one frame every 50 ms: it gets the newest
//!   frame each time, and the frames it never asked for are replaced in its mailbox (in the
//!   camera's process) without holding the camera;
//! * `roamer`: attaches to a running stream (`reserve_remote`), takes frames, leaves, and comes
//!   back to the same seat, twice.
//!
//! Each consumer prints what it took and the sequences it missed; the camera prints, per seat,
//! the frames it sent and skipped and how many consumers attached and left. With NVIDIA's
//! libraries (Jetson, DRIVE OS) the endpoints are `--endpoints A_0,A_1,B_0,B_1,C_0,C_1` of
//! `/etc/nvsciipc.cfg`; elsewhere the mock runs every process, its channels in a temporary
//! directory.

use nvsci::ipc::{Ipc, IpcEndpoint};
use nvsci::pipeline::{Backend, Consumer, ConsumerDesc, FrameFormat};
use nvsci::{Error, NvSci, RingError};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
struct Args {
    role: Option<String>,
    frames: u64,
    period: Duration,
    size: u64,
    /// (camera end, consumer end) per consumer: fast, viewer, roamer.
    endpoints: Vec<(String, String)>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        role: None,
        frames: 1000,
        period: Duration::from_micros(1000),
        size: 64 * 1024,
        endpoints: ["stream_fast", "stream_viewer", "stream_roamer"]
            .iter()
            .map(|n| (format!("{n}_0"), format!("{n}_1")))
            .collect(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        let num = |s: String| s.parse::<u64>().map_err(|e| format!("{flag} {s}: {e}"));
        match flag.as_str() {
            "--role" => a.role = Some(val()?),
            "--frames" => a.frames = num(val()?)?,
            "--period-us" => a.period = Duration::from_micros(num(val()?)?),
            "--size" => a.size = num(val()?)?,
            "--endpoints" => {
                let v = val()?;
                let names: Vec<&str> = v.split(',').collect();
                if names.len() != 6 {
                    return Err(format!("--endpoints {v}: six names (camera and consumer end of each)"));
                }
                a.endpoints = names.chunks(2).map(|p| (p[0].to_owned(), p[1].to_owned())).collect();
            }
            "-h" | "--help" => {
                return Err("usage: stream_ipc [--frames N] [--period-us US] [--size BYTES] \
                            [--endpoints F0,F1,V0,V1,R0,R1] [--role camera|fast|viewer|roamer]"
                    .into())
            }
            other => return Err(format!("unknown argument {other} (see --help)")),
        }
    }
    Ok(a)
}

fn pattern(seq: u64, i: usize) -> u8 {
    (i as u64).wrapping_mul(31).wrapping_add(seq.wrapping_mul(7)) as u8
}

/// The first byte that differs from frame `seq`'s pattern, if any.
fn mismatch(bytes: &[u8], seq: u64) -> Option<usize> {
    bytes.iter().enumerate().position(|(i, b)| *b != pattern(seq, i))
}

fn libraries() -> Result<(NvSci, Ipc), String> {
    if let (Ok(lib), Ok(ipc)) = (NvSci::load(), Ipc::load()) {
        return Ok((lib, ipc));
    }
    Ok((NvSci::mock(), Ipc::mock().map_err(|e| e.to_string())?))
}

fn camera(a: &Args, lib: &NvSci, ipc: &Ipc) -> Result<(), String> {
    let open = |n: &str| IpcEndpoint::open(ipc, n).map_err(|e| e.to_string());
    let e = |e: Error| e.to_string();
    // The fast consumer attaches while the stream is built (it must be running by now).
    let ring = Backend::with_library(lib.clone())
        .stream(FrameFormat::Raw { size: a.size })
        .frames(4)
        .timeout(TIMEOUT)
        .remote_consumer(open(&a.endpoints[0].0)?, ConsumerDesc::cpu())
        .reserve_remote(open(&a.endpoints[1].0)?, ConsumerDesc::cpu())
        .reserve_remote(open(&a.endpoints[2].0)?, ConsumerDesc::cpu())
        .build()
        .map_err(e)?;
    let (mut p, _) = ring.split().map_err(e)?;
    let start = Instant::now();
    let mut lost = 0;
    for _ in 0..a.frames {
        let next = Instant::now() + a.period;
        let f = match p.acquire() {
            Ok(f) => f,
            // A consumer process that died is dropped; its loss is reported once.
            Err(Error::Ipc(nvsci::IpcError::PeerGone { endpoint, .. })) => {
                println!("camera: lost the consumer at {endpoint}");
                lost += 1;
                continue;
            }
            Err(err) => return Err(err.to_string()),
        };
        let seq = f.sequence();
        for (i, b) in p.cpu_write(&f).map_err(e)?.iter_mut().enumerate() {
            *b = pattern(seq, i);
        }
        p.present(f).map_err(e)?;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let s = start.elapsed().as_secs_f64();
    println!("camera: {} frames of {} bytes in {s:.2} s, {lost} consumers lost", a.frames, a.size);
    for (seat, name) in p.remote_seats().iter().zip(["fast", "viewer", "roamer"]) {
        let stats = p.consumer_stats(seat.consumer).unwrap_or_default();
        println!(
            "camera: seat {} ({name}): {} attaches, {} left, {} lost; since the last attach {} frames sent, {} skipped",
            seat.consumer, seat.attaches, seat.left, seat.lost, stats.delivered, stats.skipped
        );
    }
    // Dropping the producer ends the stream for every consumer process.
    drop(p);
    Ok(())
}

/// Takes frames until the stream ends or `limit` were taken, one every `every`; checks every
/// byte. Returns (taken, missed sequences, bad frames).
fn take(c: &mut Consumer, limit: Option<u64>, every: Duration) -> Result<(u64, u64, u64), String> {
    let (mut n, mut missed, mut bad, mut last) = (0, 0, 0, None::<u64>);
    while limit.is_none_or(|l| n < l) {
        let f = match c.acquire() {
            Ok(f) => f,
            Err(Error::Ring(RingError::Ended { .. })) => break,
            Err(e) => return Err(e.to_string()),
        };
        let seq = f.sequence();
        if let Some(l) = last {
            missed += seq - l - 1;
        }
        last = Some(seq);
        if let Some(i) = mismatch(&c.cpu_read(&f).map_err(|e| e.to_string())?, seq) {
            eprintln!("frame {seq}: byte {i} differs from the pattern");
            bad += 1;
        }
        c.release(f).map_err(|e| e.to_string())?;
        n += 1;
        std::thread::sleep(every);
    }
    Ok((n, missed, bad))
}

fn consumer(a: &Args, lib: &NvSci, ipc: &Ipc, role: &str) -> Result<(), String> {
    let (k, desc, every) = match role {
        "fast" => (0, ConsumerDesc::cpu(), Duration::ZERO),
        "viewer" => (1, ConsumerDesc::cpu().mailbox(), Duration::from_millis(50)),
        "roamer" => (2, ConsumerDesc::cpu(), Duration::ZERO),
        other => return Err(format!("--role {other}: camera, fast, viewer or roamer")),
    };
    let name = &a.endpoints[k].1;
    let attach = || {
        let ep = IpcEndpoint::open(ipc, name).map_err(|e| e.to_string())?;
        Consumer::connect_with(
            lib,
            ep,
            FrameFormat::Raw { size: a.size },
            desc.clone(),
            Duration::from_secs(30),
        )
        .map_err(|e| e.to_string())
    };
    let rounds = if role == "roamer" { 3 } else { 1 };
    let mut bad_total = 0;
    for round in 0..rounds {
        let mut c = attach()?;
        let limit = (role == "roamer").then_some(100);
        let (n, missed, bad) = take(&mut c, limit, every)?;
        let s = c.stats();
        println!(
            "{role}: attach {}: {n} frames (sequences {}..={}), {missed} sequences skipped, {bad} bad",
            round + 1,
            s.last_sequence.map_or(0, |l| l + 1 - n - missed),
            s.last_sequence.unwrap_or(0)
        );
        bad_total += bad;
        // The roamer leaves (its seat is free again) and comes back a little later.
        drop(c);
        std::thread::sleep(Duration::from_millis(100));
    }
    if bad_total > 0 {
        return Err(format!("{bad_total} frames differ from the pattern"));
    }
    Ok(())
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
        match a.role.as_deref() {
            Some("camera") => camera(&a, &lib, &ipc),
            Some(role) => consumer(&a, &lib, &ipc, role),
            None => {
                let mut dir = None;
                if ipc.is_mock() && std::env::var_os(nvsci_mock::IPC_DIR_ENV).is_none() {
                    let d = std::env::temp_dir().join(format!("nvsci-stream-ipc-{}", std::process::id()));
                    std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
                    let mut cfg = String::from("# stream_ipc\n");
                    for (c, p) in &a.endpoints {
                        cfg.push_str(&format!("INTER_PROCESS {c} {p} 16 4096\n"));
                    }
                    std::fs::write(d.join("nvsciipc.cfg"), cfg).map_err(|e| e.to_string())?;
                    nvsci_mock::set_ipc_dir(Some(&d));
                    dir = Some(d);
                }
                let exe = std::env::current_exe().map_err(|e| e.to_string())?;
                let spawn = |role: &str| {
                    let mut cmd = std::process::Command::new(&exe);
                    cmd.args(std::env::args().skip(1)).args(["--role", role]);
                    if let Some(d) = &dir {
                        cmd.env(nvsci_mock::IPC_DIR_ENV, d);
                    }
                    cmd.spawn().map_err(|e| format!("starting the {role} process: {e}"))
                };
                let children: Vec<_> = ["fast", "viewer", "roamer"]
                    .iter()
                    .map(|r| spawn(r).map(|c| (*r, c)))
                    .collect::<Result<_, _>>()?;
                let r = camera(&a, &lib, &ipc);
                let mut failed = Vec::new();
                for (role, mut c) in children {
                    let status = c.wait().map_err(|e| e.to_string())?;
                    if !status.success() {
                        failed.push(format!("{role} ({status})"));
                    }
                }
                if let Some(d) = dir {
                    let _ = std::fs::remove_dir_all(d);
                }
                r?;
                if !failed.is_empty() {
                    return Err(format!("consumer processes failed: {}", failed.join(", ")));
                }
                Ok(())
            }
        }
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stream_ipc: {e}");
            ExitCode::FAILURE
        }
    }
}
