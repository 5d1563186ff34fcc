//! CPU time per frame of a consumer that waits with `Consumer::next_frame` (a tokio task) against
//! one that waits with the blocking `Consumer::acquire`, on the same stream in the same run.
//!
//! ```text
//! cargo run --release --features tokio --example async_consumer_bench [-- --frames N --period-us P]
//! ```
//!
//! A CPU camera presents a raw 64 KiB frame every `P` microseconds (default 500) into a stream of
//! 4 frames with one CPU FIFO consumer, which takes every frame in alternating blocks of 200: a
//! block through `acquire` (its thread waits on the ring's condition variable), a block through
//! `next_frame` on a current-thread tokio runtime on the same thread (it waits in the runtime's
//! reactor, woken by the ring's present). The figure is the consuming thread's CPU time
//! (getrusage of the thread, user + system) per frame, for each way, over `N` frames each
//! (default 2000); the goal is async within 1.2x of blocking. Beside it, the median of the
//! blocks' figures each way, which a block slowed by other load on the machine hardly moves.
//! Two places:
//!
//! 1. **The consumer in this process**, woken by the present (a waker for the task, a condition
//!    variable for the thread).
//!    The same again with the consuming thread's runtime built without drivers (no
//!    `enable_all`: all a consumer in this process needs), which parks its thread on a
//!    condition variable instead of in its reactor.
//! 2. **The consumer in another process** (this program again, attached through the mock's
//!    endpoints), woken by its endpoint's event descriptor: registered with tokio's reactor for
//!    the task, `poll` for the blocking thread.
//!
//! The floors beside them, the same pacing with no frame at all: a thread that only waits on a
//! condition variable, woken once per period (what a blocking `acquire` does besides the ring's
//! work), and a task on a current-thread tokio runtime (I/O and time enabled) that only waits
//! for a waker another thread calls once per period, with no tokio timer pending (as none is
//! during `next_frame`'s waits: the crate keeps the deadline on a thread of its own), and the
//! same task on a runtime without drivers. The figures over the floors are the ring's own part
//! of each.
//!
//! What it verifies (exit status non-zero on a mismatch): every frame carries its sequence in its
//! first 8 bytes and `sequence as u8` in its last byte, as the camera wrote them, and the FIFO
//! consumer sees every sequence in order.

#[path = "support/rusage.rs"]
mod rusage;

use nvsci::ipc::{Ipc, IpcEndpoint};
use nvsci::pipeline::{Backend, Consumer, ConsumerDesc, FrameFormat, Producer};
use nvsci::{Error, NvSci, RingError};
use std::process::ExitCode;
use std::time::{Duration, Instant};

type Res<T> = Result<T, String>;

fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

const SIZE: u64 = 64 * 1024;
const FORMAT: FrameFormat = FrameFormat::Raw { size: SIZE };
const BLOCK: u64 = 200;
const TIMEOUT: Duration = Duration::from_secs(10);

struct Args {
    frames: u64,
    period: Duration,
    consumer_role: bool,
}

fn args() -> Res<Args> {
    let mut a = Args { frames: 2000, period: Duration::from_micros(500), consumer_role: false };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--frames" => a.frames = v()?.parse().map_err(e)?,
            "--period-us" => a.period = Duration::from_micros(v()?.parse().map_err(e)?),
            "--role-consumer" => a.consumer_role = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    // Whole pairs of blocks.
    a.frames = a.frames.div_ceil(BLOCK).max(1) * BLOCK;
    Ok(a)
}

/// The camera: `frames` frames, one every `period` (on a schedule, so a late frame does not
/// move the later ones).
fn camera(p: &mut Producer, frames: u64, period: Duration) -> Res<()> {
    let start = Instant::now();
    for i in 0..frames {
        let f = p.acquire().map_err(e)?;
        let seq = f.sequence();
        {
            let mut w = p.cpu_write(&f).map_err(e)?;
            w[..8].copy_from_slice(&seq.to_le_bytes());
            w[SIZE as usize - 1] = seq as u8;
        }
        p.present(f).map_err(e)?;
        let next = start + period * (i as u32 + 1);
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    Ok(())
}

/// CPU time of the consuming thread per frame, each way: in all, and per block (per frame).
#[derive(Default)]
struct Split {
    blocking: Duration,
    asynchronous: Duration,
    blocks_blocking: Vec<f64>,
    blocks_async: Vec<f64>,
    frames_each: u64,
    last: Option<u64>,
    /// The consuming thread's runtime's drivers.
    drivers: Drivers,
}

/// Which drivers the consuming thread's current-thread runtime has.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Drivers {
    /// I/O and time (`enable_all`): the runtime parks in its reactor (`epoll_wait`) and is woken
    /// through its event descriptor.
    #[default]
    All,
    /// None: the runtime parks its thread on a condition variable, as a blocking `acquire` does.
    /// A consumer in this process needs no driver.
    None,
}

impl Drivers {
    fn runtime(self) -> std::io::Result<tokio::runtime::Runtime> {
        let mut b = tokio::runtime::Builder::new_current_thread();
        if self == Drivers::All {
            b.enable_all();
        }
        b.build()
    }
}

/// One place's figures, microseconds per frame: each way over all its frames, and the median of
/// its blocks' figures (a block that other load on the machine slowed moves the first, hardly
/// the second).
struct Figures {
    blocking: f64,
    asynchronous: f64,
    median_blocking: f64,
    median_async: f64,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

impl Split {
    fn check(&mut self, c: &Consumer, f: &nvsci::pipeline::ConsumerFrame) -> Res<()> {
        let seq = f.sequence();
        let r = c.cpu_read(f).map_err(e)?;
        let first = u64::from_le_bytes(r[..8].try_into().unwrap());
        if first != seq || r[SIZE as usize - 1] != seq as u8 {
            return Err(format!("frame {seq}: read sequence {first}, last byte {}", r[SIZE as usize - 1]));
        }
        if self.last.is_some_and(|l| seq != l + 1) {
            return Err(format!("frame {seq} after {:?}: a FIFO consumer gets every frame", self.last));
        }
        self.last = Some(seq);
        Ok(())
    }

    /// Takes `2 * frames_each` frames in alternating blocks; `Ok(false)`: the stream ended
    /// before.
    fn run(&mut self, c: &mut Consumer, frames_each: u64) -> Res<bool> {
        let rt = self.drivers.runtime().map_err(e)?;
        self.frames_each = frames_each;
        for block in 0..2 * frames_each / BLOCK {
            let t0 = rusage::cpu_time(rusage::THREAD);
            if block % 2 == 0 {
                for _ in 0..BLOCK {
                    let f = match c.acquire() {
                        Ok(f) => f,
                        Err(Error::Ring(RingError::Ended { .. })) => return Ok(false),
                        Err(x) => return Err(e(x)),
                    };
                    self.check(c, &f)?;
                    c.release(f).map_err(e)?;
                }
                let spent = rusage::cpu_time(rusage::THREAD) - t0;
                self.blocking += spent;
                self.blocks_blocking.push(spent.as_secs_f64() * 1e6 / BLOCK as f64);
            } else {
                let ended = rt.block_on(async {
                    for _ in 0..BLOCK {
                        let f = match c.next_frame().await {
                            Ok(f) => f,
                            Err(Error::Ring(RingError::Ended { .. })) => return Ok(true),
                            Err(x) => return Err(e(x)),
                        };
                        self.check(c, &f)?;
                        c.release(f).map_err(e)?;
                    }
                    Ok::<_, String>(false)
                })?;
                if ended {
                    return Ok(false);
                }
                let spent = rusage::cpu_time(rusage::THREAD) - t0;
                self.asynchronous += spent;
                self.blocks_async.push(spent.as_secs_f64() * 1e6 / BLOCK as f64);
            }
        }
        Ok(true)
    }

    fn per_frame(&self) -> Figures {
        let us = |d: Duration| d.as_secs_f64() * 1e6 / self.frames_each as f64;
        Figures {
            blocking: us(self.blocking),
            asynchronous: us(self.asynchronous),
            median_blocking: median(&self.blocks_blocking),
            median_async: median(&self.blocks_async),
        }
    }
}

/// The thread floor: a thread woken once per period through a condition variable (the way a
/// blocking `acquire` waits), its CPU time per wake-up.
fn thread_floor(frames: u64, period: Duration) -> f64 {
    use std::sync::{Arc, Condvar, Mutex};
    let shared = Arc::new((Mutex::new((0u64, false)), Condvar::new()));
    let s = shared.clone();
    let waiter = std::thread::spawn(move || {
        let t0 = rusage::cpu_time(rusage::THREAD);
        let (lock, cv) = &*s;
        let mut n = 0u64;
        let mut g = lock.lock().unwrap();
        loop {
            if g.0 > 0 {
                g.0 -= 1;
                n += 1;
                continue;
            }
            if g.1 {
                break;
            }
            g = cv.wait_timeout(g, TIMEOUT).unwrap().0;
        }
        drop(g);
        (rusage::cpu_time(rusage::THREAD) - t0).as_secs_f64() * 1e6 / n.max(1) as f64
    });
    let start = Instant::now();
    let (lock, cv) = &*shared;
    for i in 0..frames {
        lock.lock().unwrap().0 += 1;
        cv.notify_all();
        let next = start + period * (i as u32 + 1);
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    lock.lock().unwrap().1 = true;
    cv.notify_all();
    waiter.join().unwrap_or(f64::NAN)
}

/// The async floor: a task on a current-thread runtime (I/O and time enabled, as the benchmark's
/// `next_frame` runtime) woken once per period by a waker another thread calls; its thread's CPU
/// time per wake-up. No tokio timer is pending during its waits, as none is during
/// `next_frame`'s (the crate keeps the deadline on a thread of its own).
fn async_floor(frames: u64, period: Duration, drivers: Drivers) -> f64 {
    use std::sync::{Arc, Mutex};
    use std::task::{Poll, Waker};
    #[derive(Default)]
    struct Slot {
        ready: u64,
        waker: Option<Waker>,
        done: bool,
    }
    let slot = Arc::new(Mutex::new(Slot::default()));
    let s = slot.clone();
    let waiter = std::thread::spawn(move || {
        let rt = drivers.runtime().unwrap();
        let t0 = rusage::cpu_time(rusage::THREAD);
        let n = rt.block_on(async {
            let mut n = 0u64;
            loop {
                let got = std::future::poll_fn(|cx| {
                    let mut g = s.lock().unwrap();
                    if g.ready > 0 {
                        g.ready -= 1;
                        return Poll::Ready(true);
                    }
                    if g.done {
                        return Poll::Ready(false);
                    }
                    g.waker = Some(cx.waker().clone());
                    Poll::Pending
                })
                .await;
                if !got {
                    return n;
                }
                n += 1;
            }
        });
        (rusage::cpu_time(rusage::THREAD) - t0).as_secs_f64() * 1e6 / n.max(1) as f64
    });
    let start = Instant::now();
    for i in 0..frames {
        let w = {
            let mut g = slot.lock().unwrap();
            g.ready += 1;
            g.waker.take()
        };
        if let Some(w) = w {
            w.wake();
        }
        let next = start + period * (i as u32 + 1);
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    let w = {
        let mut g = slot.lock().unwrap();
        g.done = true;
        g.waker.take()
    };
    if let Some(w) = w {
        w.wake();
    }
    waiter.join().unwrap_or(f64::NAN)
}

fn in_process(a: &Args, drivers: Drivers) -> Res<Figures> {
    let ring = Backend::with_library(NvSci::mock())
        .stream(FORMAT)
        .frames(4)
        .timeout(TIMEOUT)
        .consumer(ConsumerDesc::cpu())
        .build()
        .map_err(e)?;
    let (mut p, mut cs) = ring.split().map_err(e)?;
    let mut c = cs.remove(0);
    let frames_each = a.frames;
    let consumer = std::thread::Builder::new()
        .name("consumer".into())
        .spawn(move || {
            let mut s = Split { drivers, ..Split::default() };
            s.run(&mut c, frames_each).map(|_| s.per_frame())
        })
        .map_err(e)?;
    camera(&mut p, 2 * a.frames, a.period)?;
    consumer.join().map_err(|_| "the consumer thread panicked".to_string())?
}

fn endpoints() -> (&'static str, &'static str) {
    ("async_bench_0", "async_bench_1")
}

/// The consumer process: prints "cpu_us_per_frame BLOCKING ASYNC MEDIAN_BLOCKING MEDIAN_ASYNC".
fn consumer_process(a: &Args) -> Res<()> {
    let lib = NvSci::mock();
    let ipc = Ipc::mock().map_err(e)?;
    let ep = IpcEndpoint::open(&ipc, endpoints().1).map_err(e)?;
    let mut c = Consumer::connect_with(&lib, ep, FORMAT, ConsumerDesc::cpu(), TIMEOUT).map_err(e)?;
    let mut s = Split::default();
    if !s.run(&mut c, a.frames)? {
        return Err("the stream ended early".into());
    }
    let f = s.per_frame();
    println!("cpu_us_per_frame {} {} {} {}", f.blocking, f.asynchronous, f.median_blocking, f.median_async);
    Ok(())
}

fn other_process(a: &Args) -> Res<Figures> {
    let (pname, cname) = endpoints();
    let dir = std::env::temp_dir().join(format!("nvsci-async-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(e)?;
    std::fs::write(dir.join("nvsciipc.cfg"), format!("INTER_PROCESS {pname} {cname} 16 4096\n"))
        .map_err(e)?;
    nvsci_mock::set_ipc_dir(Some(&dir));
    let child = std::process::Command::new(std::env::current_exe().map_err(e)?)
        .args(std::env::args().skip(1))
        .arg("--role-consumer")
        .env(nvsci_mock::IPC_DIR_ENV, &dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(e)?;
    let run = || -> Res<()> {
        let ipc = Ipc::mock().map_err(e)?;
        let ring = Backend::with_library(NvSci::mock())
            .stream(FORMAT)
            .frames(4)
            .timeout(TIMEOUT)
            .remote_consumer(IpcEndpoint::open(&ipc, pname).map_err(e)?, ConsumerDesc::cpu())
            .build()
            .map_err(e)?;
        let (mut p, _) = ring.split().map_err(e)?;
        camera(&mut p, 2 * a.frames, a.period)
    };
    let ran = run();
    let out = child.wait_with_output().map_err(e)?;
    let _ = std::fs::remove_dir_all(&dir);
    ran?;
    if !out.status.success() {
        return Err(format!("the consumer process failed ({})", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find_map(|l| l.strip_prefix("cpu_us_per_frame ")).ok_or("no figures")?;
    let v: Vec<f64> = line.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    match v[..] {
        [blocking, asynchronous, median_blocking, median_async] => {
            Ok(Figures { blocking, asynchronous, median_blocking, median_async })
        }
        _ => Err(format!("unreadable figures: {line}")),
    }
}

fn main() -> ExitCode {
    let a = match args() {
        Ok(a) => a,
        Err(x) => {
            eprintln!("{x}");
            return ExitCode::from(2);
        }
    };
    if a.consumer_role {
        return match consumer_process(&a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(x) => {
                eprintln!("consumer process: {x}");
                ExitCode::FAILURE
            }
        };
    }
    let run = || -> Res<bool> {
        println!(
            "async_consumer_bench: {} frames each way, a frame every {} us, raw {} KiB frames, 4 in the stream",
            a.frames,
            a.period.as_micros(),
            SIZE / 1024
        );
        let thread = thread_floor(a.frames, a.period);
        let task = async_floor(a.frames, a.period, Drivers::All);
        let bare = async_floor(a.frames, a.period, Drivers::None);
        println!(
            "floors (no frame at all, one wake-up per period): a thread on a condition variable {thread:.2} us; \
             a tokio task woken by a waker {task:.2} us ({:.2}x); the same on a runtime without drivers \
             {bare:.2} us ({:.2}x)",
            task / thread,
            bare / thread
        );
        let mut met = true;
        let places = [
            ("consumer in this process", in_process(&a, Drivers::All)?, task),
            ("consumer in this process, runtime without drivers", in_process(&a, Drivers::None)?, bare),
            ("consumer in another process", other_process(&a)?, task),
        ];
        for (place, f, floor) in places {
            let (b, x) = (f.blocking, f.asynchronous);
            let ratio = x / b;
            met &= ratio <= 1.2;
            println!(
                "{place}: CPU per frame of the consuming thread: acquire {b:.2} us ({:+.2} over the thread \
                 floor), next_frame {x:.2} us ({:+.2} over the task floor); async / blocking \
                 {ratio:.2}x (goal <= 1.2x: {}); medians of the {BLOCK}-frame blocks: acquire {:.2} us, \
                 next_frame {:.2} us, {:.2}x",
                b - thread,
                x - floor,
                if ratio <= 1.2 { "met" } else { "not met" },
                f.median_blocking,
                f.median_async,
                f.median_async / f.median_blocking,
            );
        }
        Ok(met)
    };
    match run() {
        // A goal not met is reported, not a failure: the figures are the result.
        Ok(_) => ExitCode::SUCCESS,
        Err(x) => {
            eprintln!("async_consumer_bench: {x}");
            ExitCode::FAILURE
        }
    }
}
