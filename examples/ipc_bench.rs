//! Frame hand-off between two processes through NvSciIpc (zero-copy) against the same ring in
//! one process (two threads) and against copying each frame through a Unix socket.
//!
//! ```text
//! cargo run --release --example ipc_bench -- [--width 3840] [--height 2160] [--frames 500]
//! ```
//!
//! The producer is a ring whose one consumer is in another process (or another thread of this
//! one) at the other end of an NvSciIpc endpoint (`StreamBuilder::remote_consumer`); the consumer
//! connects with `Consumer::connect_with`. Each hand-off is timed from the producer's acquire to its
//! present: the acquire waits until the slot came back (the consumer waited on the present
//! fence, read the frame's first byte and returned a release fence), the producer writes the
//! byte and presents the frame (fence signalled, descriptor sent). With two buffers each frame
//! waits for the round trip of the frame before the last (latency); with four the two sides
//! overlap (frames/s). The copy path writes the whole NV12 frame into a Unix socket, the
//! consumer reads it into its own buffer and answers one byte. Runs on the mock unless NVIDIA's
//! libraries are present.
//!
//! `--fanout` measures instead the same hand-off (acquire to present, `--buffers`, default 2)
//! with 1, 2, 4, 8 and 16 consumer processes (`--fan 1,2,4` picks other counts, at most 16),
//! each reading and checking every frame; beside the hand-off, the producer's present alone
//! (p50) and the producer thread's CPU time per frame (its own work, which should not grow with
//! the number of consumer processes, where the hand-off on a machine with fewer cores than
//! processes does). Beside each count, in the same run, the raw floor of that round trip: one
//! thread writes 8 bytes into one Unix socket per process and reads the 8 bytes each process
//! echoes, with no crate code (`--child echo`), once with blocking reads on both sides and once
//! with reads that first look again for up to 30 us (yielding the CPU between looks, as the
//! crate's endpoint waits do on machines with 4 or more CPUs) before they block.

use nvsci::ipc::{Ipc, IpcEndpoint};
use nvsci::pipeline::{Backend, Consumer, ConsumerDesc, FrameFormat, Producer};
use nvsci::{Error, NvSci, RingError};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);
/// The most consumer processes `--fanout` starts.
const MAX_FAN: usize = 16;

/// The hand-off with 1, 2, 4, 8 and 16 consumer processes, each at the other end of its own
/// endpoint, every one reading and checking every frame; `--buffers` frames (default 2: each
/// acquire waits for every consumer's release of the frame before the last). The goal: p50 at
/// 16 consumers within 1.5x of p50 at 1.
fn fanout(lib: &NvSci, ipc: &Ipc, dir: &Path, a: &Args, fan: &[(String, String)]) {
    println!(
        "{:<44} {:>10} {:>10} {:>10} {:>12} {:>14}",
        "hand-off (round trip)", "p50 us", "p99 us", "frames/s", "present p50", "producer CPU"
    );
    let mut first = None;
    let mut raw_first = [None, None];
    for &n in &a.fan {
        let children: Vec<_> = fan[..n].iter().map(|(_, y)| spawn_on(dir, a, "ipc", a.buffers, y)).collect();
        let mut stream = Backend::with_library(lib.clone()).stream(format(a)).frames(a.buffers).timeout(T);
        for (x, _) in &fan[..n] {
            let ep = IpcEndpoint::open(ipc, x).expect("endpoint");
            stream = stream.remote_consumer(ep, ConsumerDesc::cpu());
        }
        let p = stream.build().expect("producer set-up").split().expect("split").0;
        let st = produce(p, a.frames);
        for mut c in children {
            assert!(c.wait().expect("child").success(), "a consumer process failed");
        }
        println!(
            "{:<44} {:>10.1} {:>10.1} {:>10.1} {:>9.1} us {:>8.1} us/frame",
            format!("{n} consumer process(es), {} buffer(s)", a.buffers),
            st.p50,
            st.p99,
            st.fps,
            st.present_p50,
            st.cpu_per_frame
        );
        for spin in [false, true] {
            let raw = raw_round_trips(dir, a, n, spin);
            println!(
                "{:<44} {:>10.1} {:>10.1} {:>10.1}",
                format!(
                    "  raw floor, {}",
                    if spin { "reads spin 30 us, then block" } else { "blocking reads" }
                ),
                raw.p50,
                raw.p99,
                raw.fps
            );
            let one = *raw_first[spin as usize].get_or_insert(raw.p50);
            if n != a.fan[0] {
                println!("  raw floor p50 at {n} / at {}: {:.2}x", a.fan[0], raw.p50 / one);
            }
        }
        let (one, n1) = *first.get_or_insert((st.p50, n));
        if n != n1 {
            println!("p50 at {n} consumers / p50 at {n1}: {:.2}x (goal at 16 / 1: <= 1.5x)", st.p50 / one);
        }
    }
}

/// How long a raw floor's read looks again before it blocks (the crate's endpoint wait spins as
/// long, on machines with 4 or more CPUs).
const RAW_SPIN: Duration = Duration::from_micros(30);

/// Reads exactly `buf.len()` bytes from `s`. A non-blocking `s` is read again (yielding the CPU
/// between looks) for up to [`RAW_SPIN`] after it last gave bytes, then waited for in `poll`.
/// Returns false at the end of the stream.
fn raw_read(s: &mut UnixStream, buf: &mut [u8]) -> bool {
    use std::os::fd::AsRawFd;
    let mut got = 0;
    let mut since = Instant::now();
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => return false,
            Ok(k) => {
                got += k;
                since = Instant::now();
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if since.elapsed() < RAW_SPIN {
                    std::thread::yield_now();
                } else {
                    let mut p = libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                    // SAFETY: one valid pollfd for the duration of the call.
                    unsafe { libc::poll(&mut p, 1, -1) };
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("raw floor read: {e}"),
        }
    }
    true
}

/// The raw floor of the fan-out round trip: `n` processes (`--child echo`) each echo 8 bytes on
/// their own Unix socket; one thread writes the frame's number to every socket and then reads
/// every answer, `a.frames` times after 20 warm-up rounds. Checks each answer.
fn raw_round_trips(dir: &Path, a: &Args, n: usize, spin: bool) -> Stats {
    let sock = dir.join("echo.sock");
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock).expect("bind");
    let children: Vec<_> =
        (0..n).map(|_| spawn_on(dir, a, if spin { "echo-spin" } else { "echo" }, 1, "none")).collect();
    let mut socks: Vec<UnixStream> = (0..n).map(|_| listener.accept().expect("accept").0).collect();
    for s in &socks {
        s.set_nonblocking(spin).expect("non-blocking");
    }
    let warm = 20;
    let mut lat = Vec::with_capacity(a.frames);
    let mut start = Instant::now();
    for i in 0..warm + a.frames {
        if i == warm {
            start = Instant::now();
        }
        let t0 = Instant::now();
        let msg = (i as u64).to_le_bytes();
        for s in &mut socks {
            write_all_raw(s, &msg);
        }
        for s in &mut socks {
            let mut back = [0u8; 8];
            assert!(raw_read(s, &mut back), "an echo process ended early");
            assert_eq!(back, msg, "an echo process answered another round");
        }
        if i >= warm {
            lat.push(t0.elapsed());
        }
    }
    let total = start.elapsed();
    drop(socks);
    for mut c in children {
        assert!(c.wait().expect("child").success(), "an echo process failed");
    }
    let _ = std::fs::remove_file(&sock);
    stats(lat, total)
}

/// Writes all of `msg` into `s`, blocking or not.
fn write_all_raw(s: &mut UnixStream, mut msg: &[u8]) {
    while !msg.is_empty() {
        match s.write(msg) {
            Ok(k) => msg = &msg[k..],
            Err(e)
                if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) =>
            {
                std::thread::yield_now()
            }
            Err(e) => panic!("raw floor write: {e}"),
        }
    }
}

/// An echo process of the raw floor: answers every 8-byte message on its socket until the end
/// of the stream.
fn echo(dir: &Path, spin: bool) {
    let mut s = UnixStream::connect(dir.join("echo.sock")).expect("connect");
    s.set_nonblocking(spin).expect("non-blocking");
    let mut msg = [0u8; 8];
    while raw_read(&mut s, &mut msg) {
        write_all_raw(&mut s, &msg);
    }
}

struct Args {
    width: u32,
    height: u32,
    frames: usize,
    child: Option<String>,
    buffers: usize,
    /// The endpoint a consumer process opens (`--ep`).
    ep: String,
    /// Measure the hand-off with 1, 2, 4, 8 and 16 consumer processes instead (`--fanout`).
    fanout: bool,
    /// The consumer process counts of `--fanout` (`--fan 1,2,4`).
    fan: Vec<usize>,
}

fn parse() -> Args {
    let mut a = Args {
        width: 3840,
        height: 2160,
        frames: 500,
        child: None,
        buffers: 2,
        ep: "bench_1".into(),
        fanout: false,
        fan: vec![1, 2, 4, 8, MAX_FAN],
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let next = v.get(i + 1).cloned().unwrap_or_default();
        match v[i].as_str() {
            "--width" => a.width = next.parse().expect("--width"),
            "--height" => a.height = next.parse().expect("--height"),
            "--frames" => a.frames = next.parse().expect("--frames"),
            "--child" => a.child = Some(next),
            "--buffers" => a.buffers = next.parse().expect("--buffers"),
            "--ep" => a.ep = next,
            "--fan" => {
                a.fan = next.split(',').map(|n| n.parse().expect("--fan")).collect();
                assert!(a.fan.iter().all(|&n| (1..=MAX_FAN).contains(&n)), "--fan: 1 to {MAX_FAN}");
            }
            "--fanout" => {
                a.fanout = true;
                i += 1;
                continue;
            }
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    a
}

fn format(a: &Args) -> FrameFormat {
    FrameFormat::nv12(a.width, a.height)
}

/// The consumer loop of the zero-copy ring: wait, read the byte the producer wrote (its
/// sequence number, modulo 256) and check it, release. Returns the frames seen; a mismatch
/// panics (a non-zero exit of the consumer process).
fn consume(lib: &NvSci, ep: IpcEndpoint, a: &Args) -> u64 {
    let mut c = Consumer::connect_with(lib, ep, format(a), ConsumerDesc::cpu(), T).expect("consumer set-up");
    let mut seen = 0u64;
    loop {
        let f = match c.acquire() {
            Ok(f) => f,
            Err(Error::Ring(RingError::Ended { .. })) => return seen,
            Err(e) => panic!("acquire: {e}"),
        };
        let got = c.cpu_read(&f).expect("read")[0];
        assert_eq!(got, f.sequence() as u8, "frame {}: the producer's byte", f.sequence());
        seen += 1;
        c.release(f).expect("release");
    }
}

struct Stats {
    p50: f64,
    p99: f64,
    fps: f64,
    /// The producer's present alone, p50 (us).
    present_p50: f64,
    /// The producer thread's CPU time per frame (us): its own work, whatever it waited for.
    cpu_per_frame: f64,
}

fn stats(mut lat: Vec<Duration>, total: Duration) -> Stats {
    let n = lat.len();
    lat.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    Stats {
        p50: us(lat[n / 2]),
        p99: us(lat[(n * 99 / 100).min(n - 1)]),
        fps: n as f64 / total.as_secs_f64(),
        present_p50: f64::NAN,
        cpu_per_frame: f64::NAN,
    }
}

/// The CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime(2) writes one timespec through the valid pointer it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A ring of `buffers` frames whose one consumer is at the other end of `ep`.
fn producer(lib: &NvSci, ep: IpcEndpoint, a: &Args, buffers: usize) -> Producer {
    let ring = Backend::with_library(lib.clone())
        .stream(format(a))
        .frames(buffers)
        .timeout(T)
        .remote_consumer(ep, ConsumerDesc::cpu())
        .build()
        .expect("producer set-up");
    ring.split().expect("split").0
}

/// Presents `frames` frames through `p`, timing each from acquire to present.
fn produce(mut p: Producer, frames: usize) -> Stats {
    let mut lat = Vec::with_capacity(frames);
    let mut presents = Vec::with_capacity(frames);
    let start = Instant::now();
    let cpu0 = thread_cpu();
    for _ in 0..frames {
        let t0 = Instant::now();
        let f = p.acquire().expect("acquire");
        p.cpu_write(&f).expect("write")[0] = f.sequence() as u8;
        let t1 = Instant::now();
        p.present(f).expect("present");
        let t2 = Instant::now();
        lat.push(t2 - t0);
        presents.push(t2 - t1);
    }
    let cpu = thread_cpu() - cpu0;
    let total = start.elapsed();
    // Dropping the producer ends the stream and takes the frames back.
    drop(p);
    presents.sort();
    Stats {
        present_p50: presents[frames / 2].as_secs_f64() * 1e6,
        cpu_per_frame: cpu.as_secs_f64() * 1e6 / frames as f64,
        ..stats(lat, total)
    }
}

fn config(dir: &Path, names: &[(&str, &str)]) {
    let mut cfg = String::new();
    for (x, y) in names {
        cfg.push_str(&format!("INTER_PROCESS {x} {y} 16 4096\n"));
    }
    std::fs::write(dir.join("nvsciipc.cfg"), cfg).expect("config");
}

fn spawn(dir: &Path, a: &Args, child: &str, buffers: usize) -> std::process::Child {
    spawn_on(dir, a, child, buffers, "bench_1")
}

fn spawn_on(dir: &Path, a: &Args, child: &str, buffers: usize, ep: &str) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().expect("exe"))
        .args(["--width", &a.width.to_string(), "--height", &a.height.to_string()])
        .args(["--frames", &a.frames.to_string(), "--child", child, "--buffers", &buffers.to_string()])
        .args(["--ep", ep])
        .env(nvsci_mock::IPC_DIR_ENV, dir)
        .spawn()
        .expect("spawn")
}

fn frame_bytes(a: &Args) -> usize {
    (a.width * a.height * 3 / 2) as usize
}

fn main() {
    env_logger::init();
    let a = parse();
    let lib = NvSci::load().unwrap_or_else(|_| NvSci::mock());
    let ipc = Ipc::for_library(&lib).expect("NvSciIpc");
    if let Some(child) = &a.child {
        match child.as_str() {
            "ipc" => {
                let ep = IpcEndpoint::open(&ipc, &a.ep).expect("endpoint");
                let seen = consume(&lib, ep, &a);
                assert_eq!(seen, a.frames as u64, "frames the consumer process saw");
            }
            "copy" => {
                let dir = PathBuf::from(std::env::var_os(nvsci_mock::IPC_DIR_ENV).expect("dir"));
                let mut s = UnixStream::connect(dir.join("copy.sock")).expect("connect");
                let mut frame = vec![0u8; frame_bytes(&a)];
                for _ in 0..a.frames {
                    s.read_exact(&mut frame).expect("read frame");
                    s.write_all(&frame[..1]).expect("answer");
                }
            }
            "echo" | "echo-spin" => {
                let dir = PathBuf::from(std::env::var_os(nvsci_mock::IPC_DIR_ENV).expect("dir"));
                echo(&dir, child == "echo-spin");
            }
            other => panic!("unknown child {other}"),
        }
        return;
    }
    let dir = std::env::temp_dir().join(format!("nvsci-ipc-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let fan: Vec<(String, String)> =
        (0..MAX_FAN).map(|i| (format!("fan{i}_0"), format!("fan{i}_1"))).collect();
    let mut names = vec![("bench_0", "bench_1"), ("local_0", "local_1")];
    names.extend(fan.iter().map(|(x, y)| (x.as_str(), y.as_str())));
    config(&dir, &names);
    nvsci_mock::set_ipc_dir(Some(&dir));
    if a.fanout {
        fanout(&lib, &ipc, &dir, &a, &fan);
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    println!(
        "{}x{} NV12 ({} bytes), {} frames per run, NvSci: {:?}",
        a.width,
        a.height,
        frame_bytes(&a),
        a.frames,
        lib.implementation()
    );

    let mut rows = Vec::new();
    for buffers in [2usize, 4] {
        // One process, two threads.
        let (lib2, ipc2) = (lib.clone(), ipc.clone());
        let args2 = Args { child: None, ep: a.ep.clone(), fan: a.fan.clone(), ..a };
        let a = &args2;
        let cons = std::thread::scope(|s| {
            let h = s.spawn(|| {
                let ep = IpcEndpoint::open(&ipc2, "local_1").expect("endpoint");
                consume(&lib2, ep, a)
            });
            let ep = IpcEndpoint::open(&ipc, "local_0").expect("endpoint");
            let st = produce(producer(&lib, ep, a, buffers), a.frames);
            let seen = h.join().expect("consumer thread");
            assert_eq!(seen, a.frames as u64, "frames the consumer thread saw");
            st
        });
        rows.push((format!("one process, {buffers} buffer(s)"), cons));
        // Two processes.
        let mut child = spawn(&dir, a, "ipc", buffers);
        let ep = IpcEndpoint::open(&ipc, "bench_0").expect("endpoint");
        let st = produce(producer(&lib, ep, a, buffers), a.frames);
        assert!(child.wait().expect("child").success());
        rows.push((format!("two processes, {buffers} buffer(s)"), st));
        let _ = &args2;
    }
    // Copy through a socket, two processes.
    let sock = dir.join("copy.sock");
    let listener = UnixListener::bind(&sock).expect("bind");
    let mut child = spawn(&dir, &a, "copy", 1);
    let (mut s, _) = listener.accept().expect("accept");
    let frame = vec![7u8; frame_bytes(&a)];
    let mut ack = [0u8; 1];
    let mut lat = Vec::with_capacity(a.frames);
    let start = Instant::now();
    for _ in 0..a.frames {
        let t0 = Instant::now();
        s.write_all(&frame).expect("write frame");
        s.read_exact(&mut ack).expect("ack");
        lat.push(t0.elapsed());
    }
    let copy = stats(lat, start.elapsed());
    assert!(child.wait().expect("child").success());
    rows.push(("two processes, copy through a Unix socket".into(), copy));

    println!("{:<44} {:>10} {:>10} {:>10}", "hand-off (round trip)", "p50 us", "p99 us", "frames/s");
    for (name, s) in &rows {
        println!("{name:<44} {:>10.1} {:>10.1} {:>10.1}", s.p50, s.p99, s.fps);
    }
    let (one, two, copy) = (&rows[0].1, &rows[1].1, &rows[4].1);
    println!("two processes / one process, p50 latency (2 buffers): {:.2}x", two.p50 / one.p50);
    println!("two processes / one process, frames/s (4 buffers): {:.2}x", rows[3].1.fps / rows[2].1.fps);
    println!("copy / zero-copy across processes, p50 latency (2 buffers): {:.1}x", copy.p50 / two.p50);
    let _ = std::fs::remove_dir_all(&dir);
}
