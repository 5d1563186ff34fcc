//! `Consumer::next_frame` (feature `tokio`) on the mock, CPU engines: FIFO and mailbox consumers
//! in this process and in another (the peer process is this test binary again,
//! `child_process_entry`, as in tests/stream_ipc.rs), on current-thread and multi-thread
//! runtimes, every frame's bytes checked against its pattern; cancellation at every point a
//! future can be dropped (waiting for a frame, waiting for its present fence), timeouts, and the
//! mock's ledger empty after each test.
#![cfg(all(feature = "mock", feature = "tokio"))]

mod common;

use nvsci::ipc::{Ipc, IpcEndpoint};
use nvsci::pipeline::{Backend, Consumer, ConsumerDesc, FrameFormat, FrameRing, Producer, RemoteSeat};
use nvsci::{Error, NvSci, RingError, UnsupportedReason, Wait};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

const FRAME: u64 = 16 * 1024;
const FORMAT: FrameFormat = FrameFormat::Raw { size: FRAME };
const TIMEOUT: Duration = Duration::from_secs(5);
const CHILD_ENV: &str = "NVSCI_ASYNC_TEST_CHILD";
const CHILD_EP: &str = "NVSCI_ASYNC_TEST_EP";
const CHILD_FRAMES: &str = "NVSCI_ASYNC_TEST_FRAMES";

use common::processes::{ledger_is_clean, use_dir, wait_child, wait_line};

fn fill(bytes: &mut [u8], seq: u64) {
    common::processes::fill(bytes, seq, FRAME as usize)
}

fn check(bytes: &[u8], seq: u64, who: &str) {
    common::processes::check(bytes, seq, FRAME as usize, who)
}

fn ipc_dir(tag: &str, pairs: &[(&str, &str)]) -> PathBuf {
    common::processes::ipc_dir("async", tag, pairs)
}

/// Starts a consumer process; its standard output lines are collected in the returned list.
fn spawn_child(scenario: &str, dir: &Path, env: &[(&str, String)]) -> (Child, Arc<Mutex<Vec<String>>>) {
    let p = common::processes::spawn_child(CHILD_ENV, scenario, dir, env);
    (p.child, p.lines)
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// A stream of raw frames with a CPU producer and the consumers `descs`, in this process.
fn stream(frames: usize, timeout: Duration, descs: &[ConsumerDesc]) -> FrameRing {
    let mut b = Backend::with_library(NvSci::mock()).stream(FORMAT).frames(frames).timeout(timeout);
    for d in descs {
        b = b.consumer(d.clone());
    }
    b.build().unwrap()
}

/// Presents one frame with its pattern.
fn present(p: &mut Producer) -> u64 {
    let f = p.acquire().unwrap();
    let seq = f.sequence();
    fill(&mut p.cpu_write(&f).unwrap(), seq);
    p.present(f).unwrap();
    seq
}

/// A producer thread presenting `frames` frames with their patterns, every `period`.
fn camera(mut p: Producer, frames: u64, period: Duration) -> std::thread::JoinHandle<Producer> {
    std::thread::spawn(move || {
        for _ in 0..frames {
            present(&mut p);
            if !period.is_zero() {
                std::thread::sleep(period);
            }
        }
        p
    })
}

/// Counts its wakes; its strong count says who holds it.
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls `fut` once with `waker`.
fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(waker))
}

// ------------------------------------------------------------------------------------------
// Consumers in this process.
// ------------------------------------------------------------------------------------------

/// A FIFO consumer on a current-thread runtime gets every frame of a producer thread, in order,
/// every byte as written; the frames are released with `release` and by dropping the token.
#[test]
fn a_fifo_consumer_in_this_process_gets_every_frame_on_a_current_thread_runtime() {
    let _g = common::serial();
    let (p, mut cs) = stream(4, TIMEOUT, &[ConsumerDesc::cpu()]).split().unwrap();
    let mut c = cs.remove(0);
    let cam = camera(p, 200, Duration::ZERO);
    current_thread().block_on(async {
        for n in 0..200u64 {
            let f = c.next_frame().await.unwrap();
            assert_eq!(f.sequence(), n, "a FIFO consumer gets every frame in order");
            check(&c.cpu_read(&f).unwrap(), n, "fifo");
            if n % 2 == 0 {
                c.release(f).unwrap();
            } else {
                // A dropped token is released as for `acquire` (its fence expired already).
                drop(f);
            }
        }
    });
    let stats = c.stats();
    assert_eq!((stats.delivered, stats.skipped, stats.last_sequence), (200, 0, Some(199)));
    let p = cam.join().unwrap();
    drop((p, c));
    ledger_is_clean();
}

/// The consumer's task waits without holding the runtime's only thread: a producer task on the
/// same current-thread runtime presents while the consumer waits (were the wait blocking, the
/// present could never run and the consumer would time out).
#[test]
fn a_waiting_consumer_leaves_the_executor_to_other_tasks() {
    let _g = common::serial();
    let (mut p, mut cs) = stream(4, TIMEOUT, &[ConsumerDesc::cpu()]).split().unwrap();
    let mut c = cs.remove(0);
    let rt = current_thread();
    rt.block_on(async {
        for round in 0..5u64 {
            let producer = async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                present(&mut p)
            };
            // Both on this one thread: the consumer first, so it is waiting when the present runs.
            let consumer = async {
                let f = c.next_frame().await.unwrap();
                check(&c.cpu_read(&f).unwrap(), round, "same thread");
                c.release(f).unwrap();
            };
            let ((), seq) = join(consumer, producer).await;
            assert_eq!(seq, round);
        }
    });
    drop((p, c));
    ledger_is_clean();
}

/// A mailbox consumer in this process, slower than the producer, on a multi-thread runtime (the
/// consumer a spawned task): the newest frames, in increasing order, every byte as written;
/// frames were replaced in its mailbox meanwhile.
#[test]
fn a_slow_mailbox_consumer_in_this_process_gets_the_newest_frames_on_a_multi_thread_runtime() {
    let _g = common::serial();
    let (p, mut cs) = stream(4, TIMEOUT, &[ConsumerDesc::cpu().mailbox()]).split().unwrap();
    let mut c = cs.remove(0);
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let cam = std::thread::spawn(move || {
        let mut p = p;
        let mut n = 0u64;
        while !st.load(Ordering::Acquire) {
            present(&mut p);
            n += 1;
            std::thread::sleep(Duration::from_micros(500));
        }
        (p, n)
    });
    let rt = multi_thread();
    let task = rt.spawn(async move {
        let (mut last, mut taken) = (None::<u64>, 0u64);
        while taken < 40 {
            let f = c.next_frame().await.unwrap();
            let seq = f.sequence();
            assert!(last.is_none_or(|l| seq > l), "sequence {seq} after {last:?}");
            last = Some(seq);
            check(&c.cpu_read(&f).unwrap(), seq, "mailbox");
            c.release(f).unwrap();
            taken += 1;
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        c
    });
    let c = rt.block_on(task).unwrap();
    stop.store(true, Ordering::Release);
    let (p, presented) = cam.join().unwrap();
    let stats = c.stats();
    assert_eq!(stats.delivered, 40);
    assert!(stats.skipped > 0, "a consumer six periods slow has frames replaced: {stats:?}");
    assert!(presented > 40);
    drop((p, c, rt));
    ledger_is_clean();
}

/// Cancelled while it waits for a frame: the future's waker is let go (the ring keeps no
/// reference to the dropped task, and the next present does not wake it), and the frame
/// presented after the drop is the next one the consumer gets.
#[test]
fn dropping_a_future_that_waits_for_a_frame_loses_nothing_and_keeps_no_waker() {
    let _g = common::serial();
    let (mut p, mut cs) = stream(4, TIMEOUT, &[ConsumerDesc::cpu()]).split().unwrap();
    let mut c = cs.remove(0);
    let rt = current_thread();
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(counter.clone());
    rt.block_on(async {
        {
            let mut fut = pin!(c.next_frame());
            assert!(poll_once(fut.as_mut(), &waker).is_pending(), "no frame yet");
            // The ring's copy, and the deadline entry's.
            assert!(Arc::strong_count(&counter) > 2, "the waiting task's waker is kept");
        }
        assert_eq!(Arc::strong_count(&counter), 2, "the dropped future's wakers are let go");
        assert_eq!(present(&mut p), 0);
        assert_eq!(counter.0.load(Ordering::SeqCst), 0, "a dropped future is not woken");
        let f = c.next_frame().await.unwrap();
        assert_eq!(f.sequence(), 0, "the frame presented after the drop is the next one");
        check(&c.cpu_read(&f).unwrap(), 0, "after cancel");
        c.release(f).unwrap();
        // A waiting future is woken by the present that queues a frame for it.
        let f = {
            let mut fut = pin!(c.next_frame());
            assert!(poll_once(fut.as_mut(), &waker).is_pending());
            assert_eq!(present(&mut p), 1);
            assert_eq!(counter.0.load(Ordering::SeqCst), 1, "the present woke the waiting task");
            let Poll::Ready(Ok(f)) = poll_once(fut.as_mut(), &waker) else { panic!("woken without a frame") };
            f
        };
        // The consumer keeps its deadline entry for the next wait, but not the task's waker.
        assert_eq!(Arc::strong_count(&counter), 2, "a wait that got its frame holds no waker");
        assert_eq!(f.sequence(), 1);
        check(&c.cpu_read(&f).unwrap(), 1, "woken");
        c.release(f).unwrap();
    });
    assert_eq!(c.stats().delivered, 2);
    drop((p, c, rt));
    ledger_is_clean();
}

/// A present fence that another engine signals later (`present_after`): the consumer's future
/// waits for it off the executor (a task on the same current-thread runtime writes the frame and
/// signals), and reads what the engine wrote.
#[test]
fn a_present_fence_signalled_later_is_waited_for_off_the_executor() {
    let _g = common::serial();
    let (mut p, mut cs) = stream(2, TIMEOUT, &[ConsumerDesc::cpu()]).split().unwrap();
    let mut c = cs.remove(0);
    let rt = current_thread();
    rt.block_on(async {
        for round in 0..3u64 {
            let f = p.acquire().unwrap();
            let seq = f.sequence();
            let buffer = p.buffer(&f).unwrap().dup().unwrap();
            let obj = p.present_sync().unwrap().clone();
            p.present_after(f, obj.generate_fence().unwrap()).unwrap();
            // The "engine": a task of this very runtime, which writes the frame and signals.
            let engine = async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                fill(&mut buffer.cpu_write().unwrap(), seq);
                obj.signal().unwrap();
            };
            let consumer = async {
                let f = c.next_frame().await.unwrap();
                assert_eq!(f.sequence(), round);
                check(&c.cpu_read(&f).unwrap(), seq, "present_after");
                c.release(f).unwrap();
            };
            join(consumer, engine).await;
        }
    });
    drop((p, c, rt));
    ledger_is_clean();
}

/// Cancelled while it waits for the frame's present fence: the frame goes back first in line,
/// and once the fence expires the next call (async or blocking) gets that very frame. In a
/// mailbox that a newer frame reached meanwhile, the cancelled frame goes back unread and the
/// newer one comes next.
#[test]
fn dropping_a_future_that_waits_for_a_present_fence_puts_the_frame_back() {
    let _g = common::serial();
    let (mut p, mut cs) =
        stream(4, TIMEOUT, &[ConsumerDesc::cpu(), ConsumerDesc::cpu().mailbox()]).split().unwrap();
    let mut mailbox = cs.remove(1);
    let mut fifo = cs.remove(0);
    let rt = current_thread();
    rt.block_on(async {
        let f = p.acquire().unwrap();
        let buffer = p.buffer(&f).unwrap().dup().unwrap();
        let obj = p.present_sync().unwrap().clone();
        p.present_after(f, obj.generate_fence().unwrap()).unwrap();
        for c in [&mut fifo, &mut mailbox] {
            let r = tokio::time::timeout(Duration::from_millis(30), c.next_frame()).await;
            assert!(r.is_err(), "the fence is not signalled: the wait is cut short");
            assert_eq!(c.stats().delivered, 0);
        }
        // A newer frame reaches the mailbox (and queues behind frame 0 for the FIFO consumer).
        assert_eq!(present(&mut p), 1);
        fill(&mut buffer.cpu_write().unwrap(), 0);
        obj.signal().unwrap();
        // The FIFO consumer: frame 0 again, then 1; the first through the blocking call.
        let f = fifo.acquire().unwrap();
        assert_eq!(f.sequence(), 0, "the cancelled frame is first in line");
        check(&fifo.cpu_read(&f).unwrap(), 0, "fifo after cancel");
        fifo.release(f).unwrap();
        let f = fifo.next_frame().await.unwrap();
        assert_eq!(f.sequence(), 1);
        check(&fifo.cpu_read(&f).unwrap(), 1, "fifo after cancel");
        fifo.release(f).unwrap();
        // The mailbox consumer: frame 1; frame 0 went back unread.
        let f = mailbox.next_frame().await.unwrap();
        assert_eq!(f.sequence(), 1, "the mailbox's newest frame");
        check(&mailbox.cpu_read(&f).unwrap(), 1, "mailbox after cancel");
        mailbox.release(f).unwrap();
    });
    assert_eq!((fifo.stats().delivered, fifo.stats().skipped), (2, 0));
    assert_eq!((mailbox.stats().delivered, mailbox.stats().skipped), (1, 1));
    drop((p, fifo, mailbox, rt));
    ledger_is_clean();
}

/// No frame within the ring's timeout: `Error::Timeout` with `Wait::Frame` and the ring's
/// timeout; a present fence that does not expire: `Wait::PresentFence` naming the slot and
/// frame, which stays first in line.
#[test]
fn timeouts_name_the_frame_or_the_present_fence() {
    let _g = common::serial();
    let timeout = Duration::from_millis(150);
    let (mut p, mut cs) = stream(2, timeout, &[ConsumerDesc::cpu()]).split().unwrap();
    let mut c = cs.remove(0);
    let rt = current_thread();
    rt.block_on(async {
        let t = Instant::now();
        match c.next_frame().await {
            Err(Error::Timeout { waited_for: Wait::Frame, timeout: t_out }) => assert_eq!(t_out, timeout),
            r => panic!("expected a frame timeout, got {r:?}"),
        }
        assert!(t.elapsed() >= timeout, "not before the timeout");
        let f = p.acquire().unwrap();
        let slot = f.index();
        let obj = p.present_sync().unwrap().clone();
        p.present_after(f, obj.generate_fence().unwrap()).unwrap();
        match c.next_frame().await {
            Err(Error::Timeout {
                waited_for: Wait::PresentFence { slot: s, sequence: 0 },
                timeout: t_out,
            }) => {
                assert_eq!((s, t_out), (slot, timeout))
            }
            r => panic!("expected a present fence timeout, got {r:?}"),
        }
        obj.signal().unwrap();
        let f = c.next_frame().await.unwrap();
        assert_eq!((f.sequence(), f.index()), (0, slot), "the frame stayed first in line");
        c.release(f).unwrap();
    });
    drop((p, c, rt));
    ledger_is_clean();
}

/// The consumer's deadline entry, kept across waits: after waits that each got their frame (the
/// entry given a later deadline each time), a wait with no frame still ends at its own deadline
/// with the typed timeout, and the next wait after that timeout gets its frame. Then on a second
/// runtime, after the first was shut down: the same again.
#[test]
fn the_kept_deadline_times_out_each_wait_on_every_runtime() {
    let _g = common::serial();
    let timeout = Duration::from_millis(150);
    let (mut p, mut cs) = stream(4, timeout, &[ConsumerDesc::cpu()]).split().unwrap();
    let mut c = cs.remove(0);
    let mut next = 0u64;
    for round in 0..2 {
        let rt = current_thread();
        rt.block_on(async {
            for _ in 0..5 {
                let producer = async {
                    // Presented while the consumer waits (its deadline armed).
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    present(&mut p)
                };
                let consumer = async { c.next_frame().await.unwrap() };
                let (f, seq) = join(consumer, producer).await;
                assert_eq!((f.sequence(), seq), (next, next), "round {round}");
                check(&c.cpu_read(&f).unwrap(), next, "kept deadline");
                c.release(f).unwrap();
                next += 1;
            }
            let t = Instant::now();
            // An outer timer of its own: a deadline that never fired would hang the wait.
            match tokio::time::timeout(timeout * 20, c.next_frame()).await {
                Ok(Err(Error::Timeout { waited_for: Wait::Frame, timeout: t_out })) => {
                    assert_eq!(t_out, timeout)
                }
                Ok(r) => panic!("round {round}: expected a frame timeout, got {:?}", r.map(|f| f.sequence())),
                Err(_) => panic!("round {round}: the wait outlived its deadline twentyfold"),
            }
            assert!(t.elapsed() >= timeout, "round {round}: not before the timeout");
            let producer = async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                present(&mut p)
            };
            let (f, seq) = join(async { c.next_frame().await.unwrap() }, producer).await;
            assert_eq!((f.sequence(), seq), (next, next), "round {round}: the wait after the timeout");
            c.release(f).unwrap();
            next += 1;
        });
        drop(rt);
    }
    assert_eq!(c.stats().delivered, 12);
    drop((p, c));
    ledger_is_clean();
}

/// A consumer in this process needs no driver of the runtime: on a current-thread runtime with
/// neither the I/O nor the time driver, a wait gets the frame a producer thread presents during
/// it, and a wait with no frame ends at its deadline with the typed timeout (the deadline is kept
/// by the crate's watcher thread, not a tokio timer). Once the consumer is gone, the watcher
/// thread ends.
#[test]
fn a_consumer_in_this_process_waits_and_times_out_on_a_runtime_without_drivers() {
    let _g = common::serial();
    let timeout = Duration::from_millis(120);
    let (p, mut cs) = stream(4, timeout, &[ConsumerDesc::cpu()]).split().unwrap();
    let mut c = cs.remove(0);
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let cam = std::thread::spawn(move || {
        let mut p = p;
        std::thread::sleep(Duration::from_millis(30));
        present(&mut p);
        p
    });
    let f = rt.block_on(c.next_frame()).unwrap();
    assert_eq!(f.sequence(), 0);
    check(&c.cpu_read(&f).unwrap(), 0, "no drivers");
    c.release(f).unwrap();
    let p = cam.join().unwrap();
    let t = Instant::now();
    match rt.block_on(c.next_frame()) {
        Err(Error::Timeout { waited_for: Wait::Frame, timeout: t_out }) => assert_eq!(t_out, timeout),
        r => panic!("expected a frame timeout, got {:?}", r.map(|f| f.sequence())),
    }
    let waited = t.elapsed();
    assert!(waited >= timeout, "ended {waited:?} into a {timeout:?} timeout");
    assert!(watcher_threads() >= 1, "the deadline watcher runs while a consumer that waited lives");
    drop((p, c, rt));
    let end = Instant::now() + Duration::from_secs(5);
    while watcher_threads() > 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(watcher_threads(), 0, "the deadline watcher outlived every consumer");
    ledger_is_clean();
}

/// This process's threads named as the crate's deadline watcher.
fn watcher_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "nvsci-deadlines")
        .count()
}

/// A frame that is there already is returned without a wait: on a runtime with no time driver,
/// where a tokio timer would make tokio panic ("timers are disabled").
#[test]
fn a_frame_already_there_is_returned_without_waiting() {
    let _g = common::serial();
    let (mut p, mut cs) = stream(4, TIMEOUT, &[ConsumerDesc::cpu()]).split().unwrap();
    let mut c = cs.remove(0);
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    for n in 0..3u64 {
        assert_eq!(present(&mut p), n);
        let f = rt.block_on(c.next_frame()).unwrap();
        assert_eq!(f.sequence(), n);
        check(&c.cpu_read(&f).unwrap(), n, "no timer");
        c.release(f).unwrap();
    }
    drop((p, c, rt));
    ledger_is_clean();
}

/// Outside a tokio runtime the future fails at once, naming why; the consumer goes on.
#[test]
fn outside_a_tokio_runtime_the_future_fails_with_a_typed_error() {
    let _g = common::serial();
    let (mut p, mut cs) = stream(2, TIMEOUT, &[ConsumerDesc::cpu()]).split().unwrap();
    let mut c = cs.remove(0);
    present(&mut p);
    {
        let mut fut = pin!(c.next_frame());
        match poll_once(fut.as_mut(), Waker::noop()) {
            Poll::Ready(Err(Error::Unsupported { reason: UnsupportedReason::NoTokioRuntime, .. })) => {}
            r => panic!("expected NoTokioRuntime, got {:?}", r.map(|r| r.map(|f| f.sequence()))),
        }
    }
    let f = c.acquire().unwrap();
    assert_eq!(f.sequence(), 0, "nothing was taken");
    c.release(f).unwrap();
    drop((p, c));
    ledger_is_clean();
}

/// Runs `a` and `b` to completion on this task, polling `a` first each time (so a consumer in
/// `a` is waiting before a producer in `b` presents).
async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    let (mut ra, mut rb) = (None, None);
    std::future::poll_fn(|cx| {
        if ra.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v);
            }
        }
        if rb.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v);
            }
        }
        if ra.is_some() && rb.is_some() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    (ra.unwrap(), rb.unwrap())
}

// ------------------------------------------------------------------------------------------
// A consumer in another process.
// ------------------------------------------------------------------------------------------

/// A consumer process's async loop: `frames` frames through `next_frame`, each first asked for
/// with a deadline so short that most asks are cancelled (a frame is due every 2 ms): not one
/// frame may be lost to a cancellation (a FIFO consumer's sequences follow one another, from
/// `after` on), every byte is checked. Returns the cancelled asks.
async fn take_async(c: &mut Consumer, who: &str, frames: u64, fifo: bool, after: Option<u64>) -> u64 {
    let (mut n, mut cancelled, mut last) = (0u64, 0u64, after);
    while n < frames {
        let f = match tokio::time::timeout(Duration::from_micros(300), c.next_frame()).await {
            Err(_elapsed) => {
                cancelled += 1;
                continue;
            }
            Ok(f) => f.unwrap_or_else(|e| panic!("{who}: next_frame failed after {n} frames: {e:?}")),
        };
        let seq = f.sequence();
        if let Some(l) = last {
            assert!(seq > l, "{who}: sequence {seq} after {l}");
            if fifo {
                assert_eq!(seq, l + 1, "{who}: a FIFO consumer gets every frame, cancelled asks or not");
            }
        }
        last = Some(seq);
        check(&c.cpu_read(&f).unwrap(), seq, who);
        c.release(f).unwrap();
        n += 1;
        if !fifo {
            // A slow mailbox consumer.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    cancelled
}

/// Entry point of the consumer processes the tests start: not a test of its own (ignored;
/// reported as not run when run alone) unless started by one of them.
#[test]
#[ignore = "the consumer process of the multi-process tests, which start it"]
fn child_process_entry() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else {
        return common::require::not_a_test("only runs as the consumer process the async tests start");
    };
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let ep_name = std::env::var(CHILD_EP).unwrap();
    let frames: u64 = std::env::var(CHILD_FRAMES).ok().map_or(50, |v| v.parse().unwrap());
    let connect = |desc: ConsumerDesc, timeout: Duration| {
        let ep = IpcEndpoint::open(&ipc, &ep_name).unwrap();
        Consumer::connect_with(&lib, ep, FORMAT, desc, timeout).unwrap()
    };
    match scenario.as_str() {
        // FIFO, current-thread runtime (a third of the frames), blocking acquires (a third),
        // then another current-thread runtime while the first is still there (the rest: the
        // endpoint's event descriptor must be registered with the runtime that waits); then,
        // with the producer stopped, a frame timeout; then the end of the stream.
        "fifo" => {
            let timeout = Duration::from_secs(2);
            let mut c = connect(ConsumerDesc::cpu(), timeout);
            let first = current_thread();
            let third = frames / 3;
            let mut cancelled = first.block_on(take_async(&mut c, &ep_name, third, true, None));
            let mut last = c.stats().last_sequence.unwrap();
            for _ in 0..third {
                let f = c.acquire().unwrap();
                assert_eq!(f.sequence(), last + 1, "{ep_name}: every frame, blocking between async");
                last = f.sequence();
                check(&c.cpu_read(&f).unwrap(), last, &ep_name);
                c.release(f).unwrap();
            }
            current_thread().block_on(async {
                // Waits that only a wake-up from this runtime's reactor ends (a frame is due
                // every 2 ms; the ring's timeout is 2 s).
                for _ in 0..10 {
                    let f = c
                        .next_frame()
                        .await
                        .unwrap_or_else(|e| panic!("{ep_name}: on the second runtime: {e:?}"));
                    assert_eq!(f.sequence(), last + 1, "{ep_name}: every frame on the second runtime");
                    last = f.sequence();
                    check(&c.cpu_read(&f).unwrap(), last, &ep_name);
                    c.release(f).unwrap();
                }
                cancelled += take_async(&mut c, &ep_name, frames - 2 * third - 10, true, Some(last)).await;
                assert!(cancelled > 0, "{ep_name}: no ask was cancelled");
                println!("{ep_name}: {frames} frames, {cancelled} asks cancelled");
                // The producer pauses once it sent this many: the frames sent since come next,
                // in order, then a frame timeout.
                let mut last = c.stats().last_sequence.unwrap();
                let drained = loop {
                    match c.next_frame().await {
                        Ok(f) => {
                            assert_eq!(f.sequence(), last + 1, "{ep_name}: every frame");
                            last = f.sequence();
                            check(&c.cpu_read(&f).unwrap(), last, &ep_name);
                            c.release(f).unwrap();
                        }
                        Err(Error::Timeout { waited_for: Wait::Frame, timeout: t }) => {
                            assert_eq!(t, timeout);
                            break last;
                        }
                        Err(e) => panic!("{ep_name}: expected frames, then a frame timeout: {e:?}"),
                    }
                };
                println!("{ep_name}: timed out as expected after frame {drained}");
                // Told so on stdout: the producer ends the stream now.
                let until = Instant::now() + Duration::from_secs(30);
                loop {
                    match c.next_frame().await {
                        Err(Error::Ring(RingError::Ended { endpoint })) => {
                            assert_eq!(endpoint, ep_name);
                            break;
                        }
                        Err(Error::Timeout { waited_for: Wait::Frame, .. }) => {
                            assert!(Instant::now() < until, "{ep_name}: the stream did not end")
                        }
                        r => panic!("{ep_name}: expected the end, got {:?}", r.map(|f| f.sequence())),
                    }
                }
            });
            drop(first);
        }
        // A slow mailbox consumer on a multi-thread runtime, as a spawned task.
        "mailbox" => {
            let mut c = connect(ConsumerDesc::cpu().mailbox(), Duration::from_secs(5));
            let rt = multi_thread();
            let who = ep_name.clone();
            let cancelled = rt
                .block_on(rt.spawn(async move {
                    let cancelled = take_async(&mut c, &who, frames, false, None).await;
                    drop(c);
                    cancelled
                }))
                .unwrap();
            println!("{ep_name}: {frames} frames, {cancelled} asks cancelled");
        }
        other => panic!("unknown scenario {other}"),
    }
    drop(ipc);
    ledger_is_clean();
}

/// A producer thread presenting frames with their patterns every `period` until stopped.
struct Camera {
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    presented: Arc<AtomicU64>,
    seats: nvsci::pipeline::Attacher,
    thread: std::thread::JoinHandle<(Producer, Vec<Error>)>,
}

impl Camera {
    fn start(p: Producer, period: Duration) -> Self {
        let (stop, paused, presented) =
            (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let seats = p.attacher();
        let (st, pa, count) = (stop.clone(), paused.clone(), presented.clone());
        let thread = std::thread::spawn(move || {
            let mut p = p;
            let mut errors = Vec::new();
            while !st.load(Ordering::Acquire) {
                if !pa.load(Ordering::Acquire) {
                    match p.acquire() {
                        Ok(f) => {
                            let seq = f.sequence();
                            fill(&mut p.cpu_write(&f).unwrap(), seq);
                            p.present(f).unwrap();
                            count.fetch_add(1, Ordering::AcqRel);
                        }
                        Err(e) => errors.push(e),
                    }
                }
                std::thread::sleep(period);
            }
            (p, errors)
        });
        Self { stop, paused, presented, seats, thread }
    }

    fn seat(&self, consumer: usize) -> RemoteSeat {
        self.seats.remote_seats().into_iter().find(|s| s.consumer == consumer).unwrap()
    }

    fn wait_seat(&self, consumer: usize, cond: impl Fn(&RemoteSeat) -> bool) -> RemoteSeat {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.seat(consumer);
            if cond(&s) {
                return s;
            }
            assert!(Instant::now() < until, "seat {consumer} not as expected: {s:?}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn finish(self) -> (Producer, u64, Vec<Error>) {
        self.stop.store(true, Ordering::Release);
        let (p, errors) = self.thread.join().unwrap();
        (p, self.presented.load(Ordering::Acquire), errors)
    }
}

/// A FIFO consumer process on a current-thread runtime attaches to a running stream and takes
/// 150 frames through cancelled and completed asks, every frame in order and every byte checked;
/// with the producer paused it times out with `Wait::Frame`; dropping the producer ends the
/// stream for it (`RingError::Ended`); it leaves, and the mock's ledger is empty on both sides.
#[test]
fn a_fifo_consumer_process_takes_every_frame_through_cancelled_asks() {
    let dir = ipc_dir("fifo", &[("af_0", "af_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let ring = Backend::with_library(lib.clone())
        .stream(FORMAT)
        .frames(4)
        .timeout(TIMEOUT)
        .reserve_remote(IpcEndpoint::open(&ipc, "af_0").unwrap(), ConsumerDesc::cpu())
        .build()
        .unwrap();
    let (p, local) = ring.split().unwrap();
    assert!(local.is_empty());
    let cam = Camera::start(p, Duration::from_millis(2));
    let (child, lines) =
        spawn_child("fifo", &dir, &[(CHILD_EP, "af_1".into()), (CHILD_FRAMES, "150".into())]);
    cam.wait_seat(0, |s| s.attached);
    // Until the child took its frames (the producer's count of frames sent to it).
    let until = Instant::now() + Duration::from_secs(60);
    while cam.seats.consumer_stats(0).unwrap().delivered < 150 {
        assert!(Instant::now() < until, "the consumer process took too long");
        std::thread::sleep(Duration::from_millis(2));
    }
    // No more frames: once it took what was sent, its next ask times out.
    cam.paused.store(true, Ordering::Release);
    wait_line(&lines, "timed out as expected");
    let (p, _, errors) = cam.finish();
    assert!(errors.is_empty(), "{errors:?}");
    let sent = p.consumer_stats(0).unwrap();
    let printed = lines.lock().unwrap().iter().find_map(|l| {
        l.split("timed out as expected after frame ").nth(1).map(|n| n.trim().parse::<u64>().unwrap())
    });
    assert_eq!(printed, sent.last_sequence, "the consumer process took the last frame sent to it");
    // Ends the stream: the child's next ask gets `Ended`, and it leaves.
    drop(p);
    let status = wait_child(child, Duration::from_secs(60));
    assert!(status.success(), "consumer process failed: {status}");
    drop(ipc);
    ledger_is_clean();
}

/// A slow mailbox consumer process on a multi-thread runtime (its asks cancelled as often as
/// they complete) gets the newest frames, in increasing order, every byte checked; it leaves
/// (its seat's record says so, no loss), and the producer went on without waiting for it.
#[test]
fn a_slow_mailbox_consumer_process_gets_the_newest_frames_through_cancelled_asks() {
    let dir = ipc_dir("mailbox", &[("am_0", "am_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let ring = Backend::with_library(lib.clone())
        .stream(FORMAT)
        .frames(4)
        .timeout(TIMEOUT)
        .reserve_remote(IpcEndpoint::open(&ipc, "am_0").unwrap(), ConsumerDesc::cpu().mailbox())
        .build()
        .unwrap();
    let (p, _) = ring.split().unwrap();
    let cam = Camera::start(p, Duration::from_millis(1));
    let (child, _) = spawn_child("mailbox", &dir, &[(CHILD_EP, "am_1".into()), (CHILD_FRAMES, "40".into())]);
    let status = wait_child(child, Duration::from_secs(60));
    assert!(status.success(), "consumer process failed: {status}");
    let seat = cam.wait_seat(0, |s| s.left == 1);
    assert_eq!((seat.attaches, seat.left, seat.lost), (1, 1, 0), "{seat:?}");
    let (p, presented, errors) = cam.finish();
    assert!(errors.is_empty(), "{errors:?}");
    let stats = p.consumer_stats(0).unwrap();
    assert!(presented > stats.delivered, "frames were replaced while the consumer was slow");
    drop((p, ipc));
    ledger_is_clean();
}
