//! Loom models of the deadline watcher ([`super`]): the watcher thread, the entries and their
//! protocol are the module's own code, run over loom's mutex, condition variable and atomics. Time
//! is the model's clock ([`now`]), which only the model moves ([`advance`]); when it passes the
//! time the watcher sleeps until, it wakes the watcher, as the end of the real sleep's timeout
//! would (loom has no timeouts). A task whose deadline passed but that is never woken stays
//! parked in `loom::future::block_on` for ever, which loom reports as a deadlock; so does a
//! watcher that never ends.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --lib loom` (`.ci/run`'s loom step).

use super::super::sync::model;
use super::{lock, watcher, Deadline, Ordering, NEVER};
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use loom::thread;
use std::task::Poll;
use std::task::Waker;

loom::lazy_static! {
    static ref CLOCK: AtomicU64 = AtomicU64::new(0);
}

/// The model's time.
pub(super) fn now() -> u64 {
    CLOCK.load(Ordering::SeqCst)
}

/// Waits for the watcher thread to end (every entry is gone by then).
fn join_watcher() {
    let handle = lock(&watcher().entries).thread.take();
    if let Some(h) = handle {
        h.join().unwrap();
    }
}

/// Moves the model's clock to `t`, and wakes the watcher if it sleeps until `t` or earlier (what
/// the end of its real sleep's timeout does).
fn advance(t: u64) {
    CLOCK.store(t, Ordering::SeqCst);
    let w = watcher();
    let entries = lock(&w.entries);
    if w.target.load(Ordering::SeqCst) <= t {
        w.changed.notify_one();
    }
    drop(entries);
}

/// A wait as `next_frame`'s `by_deadline` makes it, with no frame ever coming: until the model's
/// clock reaches `deadline`, each poll leaves the deadline and the task's waker in `entry`.
fn wait_until(entry: &Deadline, deadline: u64) {
    loom::future::block_on(std::future::poll_fn(|cx| {
        if now() >= deadline {
            entry.disarm();
            return Poll::Ready(());
        }
        entry.arm_at(deadline, cx.waker());
        Poll::Pending
    }));
}

/// A deadline nearer than the one the watcher sleeps until, stored while the watcher plans its
/// sleep, is not missed: the task is woken once the clock passes it, although the clock never
/// reaches the farther deadline the watcher had planned for. Then both entries go and the
/// watcher ends.
#[test]
fn loom_a_nearer_deadline_is_not_missed() {
    model(Some(2), || {
        let far = Deadline::new().unwrap();
        far.arm_at(1000, Waker::noop());
        let near = Arc::new(Deadline::new().unwrap());
        let task = {
            let near = near.clone();
            thread::spawn(move || wait_until(&near, 50))
        };
        // The clock moves past the near deadline (and wakes the watcher only if it sleeps
        // until then: if it learnt of the near deadline).
        thread::yield_now();
        advance(60);
        task.join().unwrap();
        assert!(lock(&near.0.waker).is_none(), "a waker left in the entry after its wait");
        drop(far);
        drop(near);
        join_watcher();
    });
}

/// A wait that ends (its frame came: `disarm`) while the watcher expires its deadline leaves no
/// waker in the entry, and the consumer's next wait, armed at once, is still woken at its own
/// deadline, whether or not the expiry of the first woke its task.
#[test]
fn loom_an_expiry_racing_the_end_of_a_wait_loses_no_later_wait() {
    model(Some(3), || {
        let entry = Arc::new(Deadline::new().unwrap());
        entry.arm_at(10, Waker::noop());
        let clock = thread::spawn(|| advance(20));
        // The first wait ends as its deadline expires; the next one is armed at once.
        entry.disarm();
        assert_eq!(entry.0.at.load(Ordering::SeqCst), NEVER);
        clock.join().unwrap();
        let task = {
            let entry = entry.clone();
            thread::spawn(move || wait_until(&entry, 30))
        };
        advance(40);
        task.join().unwrap();
        assert!(lock(&entry.0.waker).is_none());
        drop(entry);
        join_watcher();
    });
}
