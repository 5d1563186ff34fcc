//! Measurements of the stream's consumer policies (in one process; ratios inside one run).
//!
//! ```text
//! cargo run --release --example stream_bench [-- --backend mock --frames N --period-us P]
//! ```
//!
//! 1. **A slow mailbox consumer does not pace the camera.** A CPU camera presents a frame every
//!    `P` microseconds (default 1000) into two streams of 4 raw 1 MiB frames, in alternating
//!    blocks of 200 frames (to cancel drift): stream A has one mailbox seat reserved and nobody
//!    attached; stream B has a mailbox consumer attached that takes 100 periods per frame. The
//!    figure is the camera's acquire -> present time per frame (acquire, write, present), p50
//!    and p99 for each stream; the goal is B's p99 within 1.2x of A's.
//! 2. **Attach latency.** The camera presents at 60 frames/s into a stream with one reserved
//!    seat; a consumer attaches (`Attacher::attach`) and acquires its first frame, 60 times.
//!    The figure is the time from the attach call to the first frame in hand, p50 and p99; the
//!    goal is under one frame period (16.7 ms). A frame presented before the attach is never
//!    delivered, so the wait is up to one period by construction.
//!
//! What it verifies (exit status non-zero on a mismatch): every frame the consumers read carries
//! its sequence number in its first 8 bytes and the byte `sequence as u8` at its last byte, as the
//! camera wrote them; the sequences a consumer sees strictly increase; the slow mailbox consumer's
//! counters show frames skipped (replaced in its mailbox) and its delivered count equals the
//! frames it read.

#[path = "support/percentile.rs"]
mod percentile;

use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat, Producer};
use percentile::pct;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Res<T> = Result<T, String>;

fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

const FRAME: u64 = 1 << 20;
const BLOCK: u64 = 200;

struct Args {
    backend: String,
    frames: u64,
    period: Duration,
}

fn args() -> Res<Args> {
    let mut a = Args { backend: "mock".into(), frames: 2000, period: Duration::from_micros(1000) };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--backend" => a.backend = v()?,
            "--frames" => a.frames = v()?.parse().map_err(e)?,
            "--period-us" => a.period = Duration::from_micros(v()?.parse().map_err(e)?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.frames < 2 * BLOCK {
        return Err(format!("--frames must be at least {}", 2 * BLOCK));
    }
    Ok(a)
}

/// One camera frame into `p`: its sequence number in the first 8 bytes, `seq as u8` at the
/// end. Returns the acquire -> present time.
fn camera_frame(p: &mut Producer) -> Res<Duration> {
    let t0 = Instant::now();
    let f = p.acquire().map_err(e)?;
    {
        let mut w = p.cpu_write(&f).map_err(e)?;
        let seq = f.sequence();
        w[..8].copy_from_slice(&seq.to_le_bytes());
        let last = w.len() - 1;
        w[last] = seq as u8;
    }
    p.present(f).map_err(e)?;
    Ok(t0.elapsed())
}

/// What a consumer read: the sequences, each checked against the frame's bytes.
fn check_frame(data: &[u8], seq: u64, last: &mut Option<u64>) -> Res<()> {
    let head = u64::from_le_bytes(data[..8].try_into().map_err(e)?);
    if head != seq || data[data.len() - 1] != seq as u8 {
        return Err(format!(
            "frame {seq}: holds sequence {head} and last byte {} (expected {seq} and {})",
            data[data.len() - 1],
            seq as u8
        ));
    }
    if last.is_some_and(|l| seq <= l) {
        return Err(format!("sequence {seq} after {}", last.unwrap_or(0)));
    }
    *last = Some(seq);
    Ok(())
}

/// Sleeps until `next`, then moves it one period on.
fn pace(next: &mut Instant, period: Duration) {
    let now = Instant::now();
    if *next > now {
        std::thread::sleep(*next - now);
    }
    *next += period;
}

fn stats(name: &str, v: &mut [f64]) -> (f64, f64) {
    let (p50, p99) = (pct(v, 0.5), pct(v, 0.99));
    println!("  {name:<44} p50 {p50:8.1} us   p99 {p99:8.1} us   ({} frames)", v.len());
    (p50, p99)
}

fn mailbox_does_not_pace(backend: &Backend, a: &Args) -> Res<()> {
    println!("1. camera acquire -> present with a mailbox consumer 100x slower than the camera");
    let format = FrameFormat::Raw { size: FRAME };
    let build = || {
        let s = backend.stream(format).frames(4).timeout(Duration::from_secs(1));
        s.reserve(ConsumerDesc::cpu().mailbox(), 1).build()
    };
    let (mut pa, _) = build().map_err(e)?.split().map_err(e)?;
    let (mut pb, _) = build().map_err(e)?.split().map_err(e)?;
    let mut slow = pb.attacher().attach(ConsumerDesc::cpu().mailbox()).map_err(e)?;
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = {
        let (stop, work) = (stop.clone(), a.period * 100);
        std::thread::spawn(move || -> Res<(u64, nvsci::pipeline::ConsumerStats)> {
            let (mut read, mut last) = (0u64, None);
            while !stop.load(Ordering::Relaxed) {
                let f = match slow.acquire() {
                    Ok(f) => f,
                    // The camera moved on to the other stream for good: no newer frame comes.
                    Err(_) if stop.load(Ordering::Relaxed) => break,
                    Err(x) => return Err(e(x)),
                };
                check_frame(&slow.cpu_read(&f).map_err(e)?, f.sequence(), &mut last)?;
                read += 1;
                std::thread::sleep(work);
                slow.release(f).map_err(e)?;
            }
            Ok((read, slow.stats()))
        })
    };
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    let mut next = Instant::now();
    for t in 0..a.frames {
        pace(&mut next, a.period);
        if (t / BLOCK).is_multiple_of(2) {
            ta.push(camera_frame(&mut pa)?.as_secs_f64() * 1e6);
        } else {
            tb.push(camera_frame(&mut pb)?.as_secs_f64() * 1e6);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (read, st) = consumer.join().map_err(|_| "the consumer thread panicked")??;
    drop(pb);
    let (_, a99) = stats("A: mailbox seat reserved, nobody attached", &mut ta);
    let (_, b99) = stats("B: mailbox consumer at 1/100 of the camera", &mut tb);
    println!(
        "  B/A p99 {:.2}x (goal <= 1.2x); slow consumer: read {read}, delivered {}, skipped {}, last sequence {:?}",
        b99 / a99,
        st.delivered,
        st.skipped,
        st.last_sequence
    );
    if st.delivered != read || st.skipped == 0 {
        return Err(format!("slow consumer counters: {st:?} after reading {read} frames"));
    }
    Ok(())
}

fn attach_latency(backend: &Backend, a: &Args) -> Res<()> {
    let period = Duration::from_micros(16_667);
    let rounds = (a.frames / 33).clamp(10, 60);
    println!("2. attach -> first frame, camera at 60 frames/s, {rounds} attaches");
    let ring = backend
        .stream(FrameFormat::Raw { size: FRAME })
        .frames(4)
        .reserve(ConsumerDesc::cpu(), 1)
        .build()
        .map_err(e)?;
    let (mut p, _) = ring.split().map_err(e)?;
    let attacher = p.attacher();
    let stop = Arc::new(AtomicBool::new(false));
    let camera = {
        let stop = stop.clone();
        std::thread::spawn(move || -> Res<()> {
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                pace(&mut next, period);
                camera_frame(&mut p)?;
            }
            Ok(())
        })
    };
    let mut lat = Vec::new();
    for _ in 0..rounds {
        let t0 = Instant::now();
        let mut c = attacher.attach(ConsumerDesc::cpu()).map_err(e)?;
        let f = c.acquire().map_err(e)?;
        lat.push(t0.elapsed().as_secs_f64() * 1e6);
        check_frame(&c.cpu_read(&f).map_err(e)?, f.sequence(), &mut None)?;
        c.release(f).map_err(e)?;
        drop(c);
        // Detach and attach again at a random point of the period.
        std::thread::sleep(Duration::from_micros(7919 * (lat.len() as u64 % 5)));
    }
    stop.store(true, Ordering::Relaxed);
    camera.join().map_err(|_| "the camera thread panicked")??;
    let (_, p99) = stats("attach -> first frame", &mut lat);
    println!("  p99 {:.2} frame periods (goal < 1)", p99 / (period.as_secs_f64() * 1e6));
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Res<()> {
    let a = args()?;
    let backend = Backend::by_name(&a.backend).map_err(e)?;
    println!("{}; {} frames, camera period {:?}", backend.explain(), a.frames, a.period);
    mailbox_does_not_pace(&backend, &a)?;
    attach_latency(&backend, &a)?;
    Ok(())
}
