//! Streams across processes on the mock: consumer processes that attach to a running stream,
//! leave and come back, die (SIGKILL) at any point and are restarted, mailbox consumers in
//! other processes, attaches that do not fit, and the chaos test (a producer and four consumer
//! processes, one killed and restarted over and over). The peer processes are this test binary
//! again (`child_process_entry`), under `$NVSCI_CHILD_RUNNER` when set (qemu for cross-compiled
//! runs).
#![cfg(feature = "mock")]

mod common;

use nvsci::ipc::{Ipc, IpcEndpoint};
use nvsci::pipeline::{
    Attacher, Backend, Consumer, ConsumerDesc, ConsumerStats, Engine, FrameFormat, Producer, RemoteSeat,
};
use nvsci::{AttachField, Error, IpcError, NvSci, RingError, Wait};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const FRAME: u64 = 16 * 1024;
const FORMAT: FrameFormat = FrameFormat::Raw { size: FRAME };
const TIMEOUT: Duration = Duration::from_secs(5);
const CHILD_ENV: &str = "NVSCI_STREAM_TEST_CHILD";
const CHILD_EP: &str = "NVSCI_STREAM_TEST_EP";
/// Milliseconds a child waits between frames (a slow consumer) or holds each frame (the victim).
const CHILD_SLOW_MS: &str = "NVSCI_STREAM_TEST_SLOW_MS";
/// A FIFO child's limit.
const CHILD_LIMIT: &str = "NVSCI_STREAM_TEST_LIMIT";
/// The seat index a child expects.
const CHILD_INDEX: &str = "NVSCI_STREAM_TEST_INDEX";
/// How many frames a child takes (where it does not read to the end of the stream).
const CHILD_FRAMES: &str = "NVSCI_STREAM_TEST_FRAMES";
/// How many times the consumer process attaches and leaves ("leave_and_return").
const CHILD_ROUNDS: &str = "NVSCI_STREAM_TEST_ROUNDS";
/// The fewest frames a child reading to the end of the stream must have taken.
const CHILD_MIN_FRAMES: &str = "NVSCI_STREAM_TEST_MIN_FRAMES";
/// `cuda`: the child's consumer works on the GPU (a CUDA engine, the mock in GPU mode).
const CHILD_ENGINE: &str = "NVSCI_STREAM_TEST_ENGINE";

use common::processes::{env_num, ledger_is_clean, use_dir, wait_child};

fn fill(bytes: &mut [u8], seq: u64) {
    common::processes::fill(bytes, seq, FRAME as usize)
}

fn check(bytes: &[u8], seq: u64, who: &str) {
    common::processes::check(bytes, seq, FRAME as usize, who)
}

fn ipc_dir(tag: &str, pairs: &[(&str, &str)]) -> PathBuf {
    common::processes::ipc_dir("stream", tag, pairs)
}

fn spawn_child(scenario: &str, dir: &Path, env: &[(&str, String)]) -> Child {
    common::processes::spawn_child(CHILD_ENV, scenario, dir, env).child
}

/// Reads a consumer's frames as its engine sees them: the CPU through its mapping; a CUDA
/// engine (the mock in GPU mode) by a copy on the consumer's stream, which waited on the frame's
/// present fence, read back to the host.
#[derive(Default)]
struct FrameReader {
    #[cfg(feature = "cuda")]
    copy: Option<nvsci::cuda::cudarc::driver::CudaSlice<u8>>,
}

impl FrameReader {
    /// Checks every byte of frame `f` against its sequence.
    fn check(&mut self, c: &Consumer, f: &nvsci::pipeline::ConsumerFrame, who: &str) {
        #[cfg(feature = "cuda")]
        if let Some(stream) = c.stream().cloned() {
            use nvsci::cuda::cudarc::driver::DeviceSlice;
            let buffer = c.cuda_buffer(f).unwrap();
            let copy = self.copy.get_or_insert_with(|| stream.alloc_zeros::<u8>(buffer.len()).unwrap());
            stream.memcpy_dtod(buffer, copy).unwrap();
            check(&stream.clone_dtoh(copy).unwrap(), f.sequence(), who);
            return;
        }
        check(&c.cpu_read(f).unwrap(), f.sequence(), who);
    }
}

/// A consumer process's loop: takes frames until the producer ends the stream (or `frames`
/// were taken), checks every byte of each against its sequence and that sequences strictly
/// increase (and, for `contiguous`, follow one another); waits `slow` per frame. Returns the
/// frames taken and the gaps between their sequences.
fn take_frames(
    c: &mut Consumer,
    who: &str,
    frames: Option<u64>,
    slow: Duration,
    contiguous: bool,
) -> (u64, u64) {
    let mut reader = FrameReader::default();
    let (mut n, mut gaps, mut last) = (0u64, 0u64, None::<u64>);
    while frames.is_none_or(|f| n < f) {
        let f = match c.acquire() {
            Ok(f) => f,
            Err(Error::Ring(RingError::Ended { .. })) => break,
            Err(e) => panic!("{who}: acquire failed after {n} frames: {e:?}"),
        };
        let seq = f.sequence();
        if let Some(l) = last {
            assert!(seq > l, "{who}: sequence {seq} after {l}");
            if contiguous {
                assert_eq!(seq, l + 1, "{who}: a FIFO consumer gets every frame");
            }
            gaps += seq - l - 1;
        }
        last = Some(seq);
        reader.check(c, &f, who);
        if !slow.is_zero() {
            std::thread::sleep(slow);
        }
        c.release(f).unwrap();
        n += 1;
    }
    (n, gaps)
}

// ------------------------------------------------------------------------------------------
// The peer process.
// ------------------------------------------------------------------------------------------

/// Entry point of the consumer processes the tests start: not a test of its own (ignored, so
/// it is not counted as a pass; run with `--include-ignored` alone, it is reported as not run) unless
/// started by one of them, in which case it runs that scenario and panics (a non-zero exit) on
/// any mismatch.
#[test]
#[ignore = "the consumer process of the multi-process tests, which start it"]
fn child_process_entry() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else {
        return common::require::not_a_test("only runs as the consumer process the stream tests start");
    };
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let ep_name = std::env::var(CHILD_EP).unwrap();
    let slow = Duration::from_millis(env_num(CHILD_SLOW_MS).unwrap_or(0));
    let frames = env_num(CHILD_FRAMES);
    let min_frames = env_num(CHILD_MIN_FRAMES).unwrap_or(1);
    // The consumer's engine: the CPU, or the GPU where the test asks for it.
    let on_engine = || match std::env::var(CHILD_ENGINE).as_deref() {
        #[cfg(feature = "cuda")]
        Ok("cuda") => {
            ConsumerDesc::new(nvsci::pipeline::Engine::Cuda(common::gpu().expect("the parent found a GPU")))
        }
        Ok(other) => panic!("unknown engine {other}"),
        Err(_) => ConsumerDesc::cpu(),
    };
    let attach = |desc: ConsumerDesc| {
        let ep = IpcEndpoint::open(&ipc, &ep_name).unwrap();
        let c = Consumer::connect_with(&lib, ep, FORMAT, desc, Duration::from_secs(30)).unwrap();
        if let Some(i) = env_num(CHILD_INDEX) {
            assert_eq!(c.ring_index() as u64, i, "{ep_name}: the seat the producer gave");
        }
        c
    };
    match scenario.as_str() {
        // A FIFO consumer to the end of the stream (every frame, unless it has a limit).
        "fifo" => {
            let limit = env_num(CHILD_LIMIT);
            let desc = match limit {
                Some(l) => on_engine().with_limit(l as usize),
                None => on_engine(),
            };
            let mut c = attach(desc);
            let (n, gaps) = take_frames(&mut c, &ep_name, frames, slow, limit.is_none());
            assert!(n >= min_frames, "{ep_name}: {n} frames, at least {min_frames} expected");
            println!("{ep_name}: {n} frames, {gaps} skipped");
        }
        // A slow mailbox consumer to the end of the stream: newest frames only.
        "mailbox" => {
            let mut c = attach(on_engine().mailbox());
            let (n, gaps) = take_frames(&mut c, &ep_name, frames, slow, false);
            assert!(n >= min_frames, "{ep_name}: {n} frames, at least {min_frames} expected");
            println!("{ep_name}: {n} frames, {gaps} skipped");
        }
        // Attaches, takes frames, leaves; attaches again and takes frames again (as many
        // rounds as asked, two by default), each attach getting later frames than the last.
        "leave_and_return" => {
            let n = frames.unwrap_or(20);
            let mut last = None;
            for _ in 0..env_num(CHILD_ROUNDS).unwrap_or(2) {
                let mut c = attach(ConsumerDesc::cpu());
                let (a, _) = take_frames(&mut c, &ep_name, Some(n), slow, true);
                assert_eq!(a, n);
                let now = c.stats().last_sequence.unwrap();
                assert!(last.is_none_or(|l| now > l), "each attach gets later frames");
                last = Some(now);
            }
        }
        // Takes two frames and holds them until it is killed (a limit of two: the producer
        // goes on with the other slots meanwhile).
        "hold" => {
            let mut c = attach(ConsumerDesc::cpu().with_limit(2));
            let a = c.acquire().unwrap();
            let b = c.acquire().unwrap();
            check(&c.cpu_read(&a).unwrap(), a.sequence(), "hold");
            println!("holding frames {} and {}", a.sequence(), b.sequence());
            std::thread::sleep(Duration::from_secs(600));
            drop((a, b));
        }
        // An attach with another frame format: refused, naming the format.
        "wrong_format" => {
            let ep = IpcEndpoint::open(&ipc, &ep_name).unwrap();
            let err = Consumer::connect_with(
                &lib,
                ep,
                FrameFormat::Raw { size: FRAME * 2 },
                ConsumerDesc::cpu(),
                TIMEOUT,
            )
            .unwrap_err();
            assert!(
                matches!(&err, Error::Ring(RingError::AttachRefused { field: AttachField::Format, endpoint }) if *endpoint == ep_name),
                "{err:?}"
            );
        }
        other => panic!("unknown scenario {other}"),
    }
}

// ------------------------------------------------------------------------------------------
// The producer's side.
// ------------------------------------------------------------------------------------------

/// A producer presenting frames with their patterns on its own thread, every `period`, until
/// finished; errors are collected (a consumer process lost is reported once by an acquire).
struct Camera {
    p: Arc<Mutex<Producer>>,
    /// Reads the seats and counters without the producer (whose acquire may wait).
    attacher: Attacher,
    stop: Arc<AtomicBool>,
    presented: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<(u64, Vec<Error>)>,
}

impl Camera {
    fn start(p: Producer, period: Duration) -> Self {
        let attacher = p.attacher();
        let p = Arc::new(Mutex::new(p));
        let stop = Arc::new(AtomicBool::new(false));
        let presented = Arc::new(AtomicU64::new(0));
        let (pp, st, count) = (p.clone(), stop.clone(), presented.clone());
        let thread = std::thread::spawn(move || {
            let (mut presented, mut errors) = (0u64, Vec::new());
            while !st.load(Ordering::Acquire) {
                {
                    let mut p = pp.lock().unwrap();
                    match p.acquire() {
                        Ok(f) => {
                            let seq = f.sequence();
                            fill(&mut p.cpu_write(&f).unwrap(), seq);
                            p.present(f).unwrap();
                            presented += 1;
                            count.store(presented, Ordering::Release);
                        }
                        Err(e) => errors.push(e),
                    }
                }
                std::thread::sleep(period);
            }
            (presented, errors)
        });
        Self { p, attacher, stop, presented, thread }
    }

    fn seats(&self) -> Vec<RemoteSeat> {
        self.attacher.remote_seats()
    }

    fn stats(&self, consumer: usize) -> ConsumerStats {
        self.attacher.consumer_stats(consumer).unwrap()
    }

    fn seat(&self, consumer: usize) -> RemoteSeat {
        self.seats().into_iter().find(|s| s.consumer == consumer).unwrap()
    }

    /// Waits until `cond` holds for seat `consumer` (at most `within`).
    fn wait_seat(&self, consumer: usize, within: Duration, cond: impl Fn(&RemoteSeat) -> bool) -> RemoteSeat {
        let until = Instant::now() + within;
        loop {
            let s = self.seat(consumer);
            if cond(&s) {
                return s;
            }
            assert!(Instant::now() < until, "seat {consumer} not as expected within {within:?}: {s:?}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn presented_now(&self) -> u64 {
        self.presented.load(Ordering::Acquire)
    }

    fn finish(self) -> (Producer, u64, Vec<Error>) {
        self.stop.store(true, Ordering::Release);
        let (n, errors) = self.thread.join().unwrap();
        let p = Arc::try_unwrap(self.p).ok().unwrap().into_inner().unwrap();
        (p, n, errors)
    }
}

/// Errors the producer met besides consumer processes lost (`PeerGone` naming `lost`).
fn unexpected(errors: &[Error], lost: &[&str]) -> Vec<String> {
    errors
        .iter()
        .filter(|e| !matches!(e, Error::Ipc(IpcError::PeerGone { endpoint, .. }) if lost.contains(&endpoint.as_str())))
        .map(|e| format!("{e:?}"))
        .collect()
}

/// An in-process FIFO consumer checking every frame on its own thread until stopped; returns
/// how many it took.
fn local_consumer(mut c: Consumer, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(Consumer, u64)> {
    std::thread::spawn(move || {
        let (mut n, mut last) = (0u64, None::<u64>);
        loop {
            match c.acquire() {
                Ok(f) => {
                    let seq = f.sequence();
                    if let Some(l) = last {
                        assert_eq!(seq, l + 1, "the in-process FIFO consumer gets every frame");
                    }
                    last = Some(seq);
                    check(&c.cpu_read(&f).unwrap(), seq, "local");
                    c.release(f).unwrap();
                    n += 1;
                }
                Err(Error::Timeout { waited_for: Wait::Frame | Wait::PresentFence { .. }, .. })
                    if stop.load(Ordering::Acquire) =>
                {
                    break
                }
                Err(e) => panic!("local consumer: {e:?}"),
            }
        }
        (c, n)
    })
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Resident memory of this process, in bytes.
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// A consumer process attaches to a stream that runs (frames from the next present on, every
/// byte checked), leaves, attaches again to the same seat and leaves again; the in-process
/// consumer gets every frame throughout, and the seat's record counts two attaches and two
/// departures and no loss.
#[test]
fn a_consumer_process_attaches_to_a_running_stream_leaves_and_comes_back() {
    let dir = ipc_dir("return", &[("ret_0", "ret_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let ring = Backend::with_library(lib.clone())
        .stream(FORMAT)
        .frames(4)
        .timeout(TIMEOUT)
        .consumer(ConsumerDesc::cpu())
        .reserve_remote(IpcEndpoint::open(&ipc, "ret_0").unwrap(), ConsumerDesc::cpu())
        .build()
        .unwrap();
    let (p, mut local) = ring.split().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let local = local_consumer(local.remove(0), stop.clone());
    let cam = Camera::start(p, Duration::from_millis(1));
    // Frames flow before anyone attaches to the seat.
    while cam.presented_now() < 20 {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(!cam.seat(1).attached);
    // Each departure is one more chance for the producer to see the endpoint close before it
    // read the departure message (which would count a loss).
    let rounds: u64 = if std::env::var("NVSCI_CHILD_RUNNER").is_ok_and(|r| !r.is_empty()) { 4 } else { 12 };
    let child = spawn_child(
        "leave_and_return",
        &dir,
        &[
            (CHILD_EP, "ret_1".into()),
            (CHILD_FRAMES, "30".into()),
            (CHILD_INDEX, "1".into()),
            (CHILD_ROUNDS, rounds.to_string()),
        ],
    );
    let status = wait_child(child, Duration::from_secs(60));
    assert!(status.success(), "consumer process failed: {status}");
    let seat = cam.wait_seat(1, TIMEOUT, |s| s.left + s.lost == rounds);
    assert_eq!((seat.attaches, seat.left, seat.lost, seat.refused), (rounds, rounds, 0, 0), "{seat:?}");
    let (p, presented, errors) = cam.finish();
    assert!(errors.is_empty(), "{errors:?}");
    stop.store(true, Ordering::Release);
    let (c, taken) = local.join().unwrap();
    assert_eq!(taken, presented, "the in-process consumer got every frame");
    drop((p, c, ipc));
    ledger_is_clean();
}

/// A consumer process killed with SIGKILL while it holds two frames is detached within the
/// ring's timeout, its frames reclaimed (the producer goes on; its next acquire reports the
/// loss once), and a new process attaches to the same seat and reads frames. While the seat is
/// taken, another consumer's attach on its endpoint times out.
#[test]
fn a_killed_consumer_process_is_detached_and_its_restart_attaches_again() {
    let dir = ipc_dir("kill", &[("kill_0", "kill_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let ring = Backend::with_library(lib.clone())
        .stream(FORMAT)
        .frames(4)
        .timeout(TIMEOUT)
        .consumer(ConsumerDesc::cpu())
        .reserve_remote(IpcEndpoint::open(&ipc, "kill_0").unwrap(), ConsumerDesc::cpu())
        .build()
        .unwrap();
    let (p, mut local) = ring.split().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let local = local_consumer(local.remove(0), stop.clone());
    let cam = Camera::start(p, Duration::from_millis(1));
    let mut child = spawn_child("hold", &dir, &[(CHILD_EP, "kill_1".into())]);
    cam.wait_seat(1, Duration::from_secs(30), |s| s.attached);
    // Until it holds two frames (the producer's count of frames sent to it).
    let until = Instant::now() + Duration::from_secs(30);
    while cam.stats(1).delivered < 2 {
        assert!(Instant::now() < until);
        std::thread::sleep(Duration::from_millis(2));
    }
    // A second consumer for the seat while it is taken: nobody answers on the endpoint until
    // the seat is free again (one consumer per seat and endpoint).
    let ep = IpcEndpoint::open(&ipc, "kill_1").unwrap();
    let second = Consumer::connect_with(&lib, ep, FORMAT, ConsumerDesc::cpu(), Duration::from_millis(300));
    assert!(
        matches!(&second, Err(Error::Timeout { waited_for: Wait::Endpoint { endpoint, .. }, .. }) if endpoint == "kill_1"),
        "{second:?}"
    );
    std::thread::sleep(Duration::from_millis(20));
    let before = cam.presented_now();
    child.kill().unwrap();
    let killed = Instant::now();
    let _ = child.wait();
    let seat = cam.wait_seat(1, TIMEOUT, |s| !s.attached && s.lost == 1);
    assert!(killed.elapsed() < TIMEOUT, "detached within the ring's timeout");
    assert_eq!(seat.attaches, 1);
    // The producer goes on past the frames the dead process held.
    let until = Instant::now() + TIMEOUT;
    while cam.presented_now() < before + 20 {
        assert!(Instant::now() < until, "the producer stalled after the kill");
        std::thread::sleep(Duration::from_millis(2));
    }
    let child = spawn_child(
        "fifo",
        &dir,
        &[(CHILD_EP, "kill_1".into()), (CHILD_FRAMES, "50".into()), (CHILD_INDEX, "1".into())],
    );
    let status = wait_child(child, Duration::from_secs(60));
    assert!(status.success(), "restarted consumer process failed: {status}");
    let seat = cam.wait_seat(1, TIMEOUT, |s| s.left == 1);
    assert_eq!((seat.attaches, seat.lost), (2, 1), "{seat:?}");
    let (p, _, errors) = cam.finish();
    assert!(unexpected(&errors, &["kill_0"]).is_empty(), "{errors:?}");
    assert_eq!(errors.len(), 1, "the loss is reported once: {errors:?}");
    stop.store(true, Ordering::Release);
    let (c, _) = local.join().unwrap();
    drop((p, c, ipc));
    ledger_is_clean();
}

/// A slow mailbox consumer in another process (it waits 20 ms per frame) gets the newest
/// frames, every byte checked, and never holds the producer back: frames are skipped for it
/// (replaced in its mailbox, in the producer's process, without a message), while the
/// in-process FIFO consumer gets every frame.
#[test]
fn a_slow_mailbox_consumer_process_gets_the_newest_frames_and_never_holds_the_producer() {
    let dir = ipc_dir("mailbox", &[("mb_0", "mb_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let ring = Backend::with_library(lib.clone())
        .stream(FORMAT)
        .frames(3)
        .timeout(TIMEOUT)
        .consumer(ConsumerDesc::cpu())
        .reserve_remote(IpcEndpoint::open(&ipc, "mb_0").unwrap(), ConsumerDesc::cpu())
        .build()
        .unwrap();
    let (p, mut local) = ring.split().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let local = local_consumer(local.remove(0), stop.clone());
    let cam = Camera::start(p, Duration::from_millis(1));
    let child = spawn_child(
        "mailbox",
        &dir,
        &[(CHILD_EP, "mb_1".into()), (CHILD_FRAMES, "25".into()), (CHILD_SLOW_MS, "20".into())],
    );
    let status = wait_child(child, Duration::from_secs(60));
    assert!(status.success(), "mailbox consumer process failed: {status}");
    let stats = cam.stats(1);
    let (p, presented, errors) = cam.finish();
    assert!(errors.is_empty(), "{errors:?}");
    // 25 frames taken at 20 ms each while the producer presented one every millisecond or so:
    // most frames were replaced in the mailbox.
    assert_eq!(stats.delivered, 25, "{stats:?}");
    assert!(stats.skipped > stats.delivered, "frames replaced in the mailbox: {stats:?}");
    stop.store(true, Ordering::Release);
    let (c, taken) = local.join().unwrap();
    assert_eq!(taken, presented);
    drop((p, c, ipc));
    ledger_is_clean();
}

/// A mailbox consumer process that takes one frame and then stops (it sleeps holding it, and
/// never asks again) holds the producer back by that frame only: the producer cycles through
/// the other slots, and nothing more is sent to the stalled process. Killed, its frame comes back.
#[test]
fn a_stalled_mailbox_consumer_process_holds_only_the_frame_it_took() {
    let dir = ipc_dir("stall", &[("st_0", "st_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let ring = Backend::with_library(lib.clone())
        .stream(FORMAT)
        .frames(3)
        .timeout(TIMEOUT)
        .reserve_remote(IpcEndpoint::open(&ipc, "st_0").unwrap(), ConsumerDesc::cpu())
        .build()
        .unwrap();
    let (p, _) = ring.split().unwrap();
    let cam = Camera::start(p, Duration::from_millis(1));
    let mut child = spawn_child(
        "mailbox",
        &dir,
        &[(CHILD_EP, "st_1".into()), (CHILD_FRAMES, "1".into()), (CHILD_SLOW_MS, "600000".into())],
    );
    let until = Instant::now() + Duration::from_secs(30);
    while cam.stats(0).delivered < 1 {
        assert!(Instant::now() < until, "the mailbox consumer got no frame");
        std::thread::sleep(Duration::from_millis(2));
    }
    let before = cam.presented_now();
    let until = Instant::now() + TIMEOUT;
    while cam.presented_now() < before + 300 {
        assert!(Instant::now() < until, "the producer stalled with the mailbox consumer");
        std::thread::sleep(Duration::from_millis(2));
    }
    let stats = cam.stats(0);
    assert_eq!(stats.delivered, 1, "nothing more was sent to it: {stats:?}");
    // Each frame since replaced the one before it in the mailbox (the first of them may have
    // found it empty, and the last waits there now).
    assert!(stats.skipped >= 298, "{stats:?}");
    child.kill().unwrap();
    let _ = child.wait();
    cam.wait_seat(0, TIMEOUT, |s| !s.attached && s.lost == 1);
    let (p, _, errors) = cam.finish();
    assert!(unexpected(&errors, &["st_0"]).is_empty(), "{errors:?}");
    drop((p, ipc));
    ledger_is_clean();
}

/// Attaches that do not fit the seat or the stream are refused, each naming what did not fit,
/// while the stream runs on: a consumer process with another frame format (its `connect_with`
/// gets `AttachRefused` naming the format), and a peer that is not a consumer (it speaks the
/// protocol by hand) answering with another stream's token, a stale offer, another engine, a
/// limit of 0, or no attach message at all. The producer's record of the seat counts each
/// refusal; afterwards a consumer attaches to the same seat and reads frames. A limit of 0 is
/// refused before anything is sent, and an in-process attach with no seat for it gets `NoSeat`.
#[test]
fn attaches_that_do_not_fit_are_refused_naming_the_field_and_the_stream_goes_on() {
    let dir = ipc_dir("refuse", &[("bad_0", "bad_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let ring = Backend::with_library(lib.clone())
        .stream(FORMAT)
        .frames(4)
        .timeout(TIMEOUT)
        .consumer(ConsumerDesc::cpu())
        .reserve_remote(IpcEndpoint::open(&ipc, "bad_0").unwrap(), ConsumerDesc::cpu())
        .build()
        .unwrap();
    let (p, mut local) = ring.split().unwrap();
    // The only in-process seat is taken; the other seat is for another process.
    assert!(matches!(
        p.attacher().attach(ConsumerDesc::cpu()),
        Err(Error::Ring(RingError::NoSeat { fitting: 1 }))
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let local = local_consumer(local.remove(0), stop.clone());
    let cam = Camera::start(p, Duration::from_millis(1));

    let child = spawn_child("wrong_format", &dir, &[(CHILD_EP, "bad_1".into())]);
    assert!(wait_child(child, Duration::from_secs(60)).success());
    let seat = cam.wait_seat(1, TIMEOUT, |s| s.refused == 1);
    assert_eq!(seat.last_refusal, Some(AttachField::Format));

    // By hand: the offer is `W`, index u32, gpu_cache u8, token u64, generation u32, lists;
    // the answer `C`, token u64, generation u32, engine (17 bytes), mode u8, limit u32,
    // format (18 bytes: kind 1 = raw, size u64, width u32, height u32, layout u8), lists.
    let raw_format = {
        let mut f = [0u8; 18];
        f[0] = 1;
        f[1..9].copy_from_slice(&FRAME.to_le_bytes());
        f
    };
    /// How an answer is spoilt.
    type Spoil = fn(&mut Vec<u8>);
    let cases: [(AttachField, Spoil); 5] = [
        (AttachField::Stream, |m| m[1] ^= 0x40),
        (AttachField::Generation, |m| m[9] = m[9].wrapping_sub(1)),
        (AttachField::Engine, |m| m[13] = 1),
        (AttachField::Limit, |m| m[31..35].copy_from_slice(&0u32.to_le_bytes())),
        (AttachField::Message, |m| m[0] = b'Z'),
    ];
    for (n, (field, spoil)) in cases.into_iter().enumerate() {
        let (ep, offer) = offered(&ipc, "bad_1");
        assert_eq!(offer[0], b'W');
        assert_eq!(u32::from_le_bytes(offer[1..5].try_into().unwrap()), 1, "the seat's index");
        let (token, generation) = (&offer[6..14], &offer[14..18]);
        let mut m = vec![b'C'];
        m.extend_from_slice(token);
        m.extend_from_slice(generation);
        m.extend_from_slice(&[0u8; 17]);
        m.push(0);
        m.extend_from_slice(&u32::MAX.to_le_bytes());
        m.extend_from_slice(&raw_format);
        spoil(&mut m);
        ep.send_message(&m, Some(TIMEOUT)).unwrap();
        let answer = ep.recv_message(Some(TIMEOUT)).unwrap();
        assert_eq!(answer, [b'X', field_code(field)], "{field:?}");
        drop(ep);
        let seat = cam.wait_seat(1, TIMEOUT, |s| s.refused == n as u64 + 2);
        assert_eq!(seat.last_refusal, Some(field));
        assert!(!seat.attached);
    }
    // A limit of 0 never leaves the process.
    let ep = IpcEndpoint::open(&ipc, "bad_1").unwrap();
    assert!(matches!(
        Consumer::connect_with(&lib, ep, FORMAT, ConsumerDesc::cpu().with_limit(0), TIMEOUT),
        Err(Error::InvalidArgument { name: "limit", .. })
    ));
    // The seat still takes a consumer that fits.
    let child = spawn_child(
        "fifo",
        &dir,
        &[(CHILD_EP, "bad_1".into()), (CHILD_FRAMES, "30".into()), (CHILD_INDEX, "1".into())],
    );
    assert!(wait_child(child, Duration::from_secs(60)).success());
    let seat = cam.wait_seat(1, TIMEOUT, |s| s.left == 1);
    assert_eq!((seat.attaches, seat.refused, seat.lost), (1, 6, 0), "{seat:?}");
    let (p, presented, errors) = cam.finish();
    assert!(errors.is_empty(), "{errors:?}");
    stop.store(true, Ordering::Release);
    let (c, taken) = local.join().unwrap();
    assert_eq!(taken, presented, "the in-process consumer got every frame throughout");
    drop((p, c, ipc));
    ledger_is_clean();
}

/// Opens `name` and takes the producer's offer of its seat, on a new endpoint session where
/// the one it connected to was ended by the producer's side (which reopens a seat after each
/// attach, refused or not).
fn offered(ipc: &Ipc, name: &str) -> (IpcEndpoint, Vec<u8>) {
    let until = Instant::now() + TIMEOUT;
    loop {
        let ep = IpcEndpoint::open(ipc, name).unwrap();
        match ep.wait_connected(Some(TIMEOUT)).and_then(|()| ep.recv_message(Some(TIMEOUT))) {
            Ok(m) => return (ep, m),
            Err(Error::Ipc(IpcError::PeerGone { .. })) if Instant::now() < until => {
                drop(ep);
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("no offer on {name}: {e:?}"),
        }
    }
}

/// The wire code of a refusal (`X`, code).
fn field_code(f: AttachField) -> u8 {
    match f {
        AttachField::Stream => 1,
        AttachField::Generation => 2,
        AttachField::Engine => 3,
        AttachField::Format => 4,
        AttachField::Limit => 5,
        AttachField::Mode => 6,
        AttachField::Message => 7,
        _ => unreachable!(),
    }
}

/// How many times the chaos test kills its victim: `NVSCI_CHAOS_KILLS`, else 100, or 10 under
/// an emulator (`NVSCI_CHILD_RUNNER`).
fn chaos_kills() -> u64 {
    env_num("NVSCI_CHAOS_KILLS").unwrap_or_else(|| {
        if std::env::var("NVSCI_CHILD_RUNNER").is_ok_and(|r| !r.is_empty()) {
            10
        } else {
            100
        }
    })
}

/// A small random number generator (xorshift), seeded from the clock; the seed is printed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The chaos test: a producer (this process, one frame every millisecond) and four consumer
/// processes (a fast FIFO consumer, a slow FIFO consumer with a limit of two frames, a slow
/// mailbox consumer, and one that attaches late) whose late one is killed with SIGKILL at a
/// random point (starting up, attaching, importing, holding frames, mid-message) and
/// restarted, `chaos_kills()` times. Every frame any consumer process reads is checked byte by
/// byte against the producer's pattern for its sequence; each dead consumer is detached
/// within the ring's timeout and its seat taken by its successor; the producer reports only
/// those losses; and at the end the mock's ledger is empty and the producer process's open
/// descriptors and resident memory are back where they were.
#[test]
fn chaos_four_consumer_processes_one_killed_and_restarted_at_random_points() {
    let dir = chaos_dir();
    let _g = use_dir(&dir);
    chaos(&dir, &Chaos { engine: Engine::Cpu, slow_ms: 15, mailbox_ms: 25, min_frames: 1 });
}

/// The chaos test with CUDA consumers (the mock in GPU mode): each consumer process's engine
/// waits on the present fence on its stream, copies the frame there and reads the copy back,
/// every byte checked; the stream runs until each of the four consumer processes that stay
/// (the last victim included) took at least 1000 frames.
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA GPU"]
fn chaos_with_cuda_consumer_processes_each_verifying_a_thousand_frames() {
    let dir = chaos_dir();
    // Serialised before CUDA starts: the driver opens descriptors, which other tests count.
    let _g = use_dir(&dir);
    let Some(dev) = common::gpu() else { return };
    chaos(&dir, &Chaos { engine: Engine::Cuda(dev), slow_ms: 2, mailbox_ms: 3, min_frames: 1000 });
}

/// The IPC directory of a chaos run.
fn chaos_dir() -> PathBuf {
    ipc_dir(
        "chaos",
        &[("fast_0", "fast_1"), ("slow_0", "slow_1"), ("mbox_0", "mbox_1"), ("late_0", "late_1")],
    )
}

/// One chaos run: the consumer processes' engine, how long the slow FIFO and the mailbox
/// consumer take per frame, and how many frames each consumer process that stays must take.
struct Chaos {
    engine: Engine,
    slow_ms: u64,
    mailbox_ms: u64,
    min_frames: u64,
}

/// Runs the chaos scenario in `dir` (made by [`chaos_dir`], the mock pointed at it).
fn chaos(dir: &Path, run: &Chaos) {
    let _ = env_logger::builder().is_test(true).try_init();
    let kills = chaos_kills();
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    eprintln!("chaos: {kills} kills, seed {seed}");
    assert!(kills >= 2, "NVSCI_CHAOS_KILLS: at least 2");
    let mut rng = Rng(seed);
    // The backend before the descriptor count: on a machine with a GPU it opens the CUDA device,
    // whose driver descriptors stay open for the process and are not what the check is about.
    let lib = NvSci::mock();
    let backend = Backend::with_library(lib.clone());
    let fds = open_fds();
    let started = Instant::now();
    let ipc = Ipc::mock().unwrap();
    let desc = || ConsumerDesc::new(run.engine.clone());
    // Every child on the run's engine, and with the frames it must take.
    let child = |scenario: &str, mut env: Vec<(&'static str, String)>| {
        env.push((CHILD_MIN_FRAMES, run.min_frames.to_string()));
        if !run.engine.is_cpu() {
            env.push((CHILD_ENGINE, "cuda".into()));
        }
        spawn_child(scenario, dir, &env)
    };
    // The fast and slow FIFO consumers attach while the stream is built, the others while it runs.
    let fast = child("fifo", vec![(CHILD_EP, "fast_1".into()), (CHILD_INDEX, "0".into())]);
    let slow = child(
        "fifo",
        vec![
            (CHILD_EP, "slow_1".into()),
            (CHILD_LIMIT, "2".into()),
            (CHILD_SLOW_MS, run.slow_ms.to_string()),
        ],
    );
    let ring = backend
        .stream(FORMAT)
        .frames(6)
        .timeout(TIMEOUT)
        .remote_consumer(IpcEndpoint::open(&ipc, "fast_0").unwrap(), desc())
        .remote_consumer(IpcEndpoint::open(&ipc, "slow_0").unwrap(), desc())
        .reserve_remote(IpcEndpoint::open(&ipc, "mbox_0").unwrap(), desc())
        .reserve_remote(IpcEndpoint::open(&ipc, "late_0").unwrap(), desc())
        .build()
        .unwrap();
    let (p, local) = ring.split().unwrap();
    assert!(local.is_empty());
    let cam = Camera::start(p, Duration::from_millis(1));
    let mbox =
        child("mailbox", vec![(CHILD_EP, "mbox_1".into()), (CHILD_SLOW_MS, run.mailbox_ms.to_string())]);
    cam.wait_seat(2, Duration::from_secs(30), |s| s.attached);
    let victim_env =
        || vec![(CHILD_EP, "late_1".to_string()), (CHILD_INDEX, "3".into()), (CHILD_SLOW_MS, "2".into())];
    // How long a victim takes to attach here: the kills below fall anywhere from its start to
    // well after its attach. The first victim is killed once attached.
    let mut v = child("fifo", victim_env());
    let spawned = Instant::now();
    cam.wait_seat(3, Duration::from_secs(60), |s| s.attached);
    let attach_us = spawned.elapsed().as_micros() as u64;
    v.kill().unwrap();
    let _ = v.wait();
    cam.wait_seat(3, TIMEOUT, |s| !s.attached);
    let mut rss_early = None;
    for k in 1..kills {
        let mut v = child("fifo", victim_env());
        // Kill it at a random point of its life: starting up, attaching, importing, or taking
        // and holding frames.
        std::thread::sleep(Duration::from_micros(rng.below(attach_us * 2 + 20_000)));
        if let Some(s) = v.try_wait().unwrap() {
            panic!("victim {k} ended by itself: {s}");
        }
        v.kill().unwrap();
        let killed = Instant::now();
        let _ = v.wait();
        // Detached (or never attached) within the ring's timeout.
        cam.wait_seat(3, TIMEOUT, |s| !s.attached);
        assert!(killed.elapsed() < TIMEOUT, "victim {k} detached within the ring's timeout");
        if k == kills / 10 {
            rss_early = Some(resident());
        }
    }
    // The last one lives to the end of the stream, which runs at least two more seconds and
    // until every consumer process that stays was sent its frames.
    let last = child("fifo", victim_env());
    // Attached, and every earlier attach accounted for (left or lost): a victim killed while its
    // attach was in flight can still be attached for a moment after the loop saw the seat free.
    let seat = cam.wait_seat(3, Duration::from_secs(30), |s| s.attached && s.attaches == s.lost + s.left + 1);
    let until = Instant::now() + Duration::from_secs(2);
    let enough = Instant::now() + Duration::from_secs(120);
    while Instant::now() < until || (0..4).any(|c| cam.stats(c).delivered < run.min_frames) {
        assert!(Instant::now() < enough, "consumers short of {} frames: {:?}", run.min_frames, {
            (0..4).map(|c| cam.stats(c)).collect::<Vec<_>>()
        });
        std::thread::sleep(Duration::from_millis(20));
    }
    let rss_end = resident();
    let seats = cam.seats();
    let (p, presented, errors) = cam.finish();
    drop(p);
    for (name, c) in [("fast", fast), ("slow", slow), ("mailbox", mbox), ("last victim", last)] {
        let status = wait_child(c, Duration::from_secs(60));
        assert!(status.success(), "{name} consumer process failed: {status}");
    }
    let lost = seats[3].lost;
    eprintln!(
        "chaos: {presented} frames, {kills} kills ({lost} while attached, {} attaches of the victim's seat), \
         seats {seats:?}, {:.1} s",
        seat.attaches,
        started.elapsed().as_secs_f64()
    );
    assert!(unexpected(&errors, &["late_0"]).is_empty(), "{errors:?}");
    // The producer's acquire reports a loss once; losses between two of its acquires (a
    // consumer killed, restarted and killed again while the camera was between frames) share
    // one report. The seat's own record counts every loss.
    assert!(
        (1..=lost).contains(&(errors.len() as u64)),
        "{} loss reports for {lost} losses: {errors:?}",
        errors.len()
    );
    assert!(seats[..3].iter().all(|s| s.lost == 0 && s.attached), "the other consumers stayed: {seats:?}");
    assert!(lost > 0 && seat.attaches > lost, "kills hit attached consumers: {seats:?}");
    drop(ipc);
    #[cfg(feature = "cuda")]
    if let Engine::Cuda(dev) = &run.engine {
        // The destroys of what the mock made on the GPU, deferred to the teardown thread.
        common::settle(dev);
    }
    ledger_is_clean();
    assert_eq!(open_fds(), fds, "open descriptors back where they were");
    // Under an emulator the resident memory is the emulator's, whose translated code grows
    // with every new path run: checked natively only.
    let emulated = std::env::var("NVSCI_CHILD_RUNNER").is_ok_and(|r| !r.is_empty());
    if let Some(early) = rss_early.filter(|_| !emulated) {
        // Leak-sized growth only: a frame is 16 KiB, each cycle imports six of them.
        assert!(rss_end < early + 4 * 1024 * 1024, "resident memory grew from {early} to {rss_end} bytes");
    }
}
