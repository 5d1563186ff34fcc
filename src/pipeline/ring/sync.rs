//! The synchronisation primitives of the seat service's in-process protocol (the outboxes, their
//! doorbell, the senders' stop flag), in one place: the standard library's in every normal build,
//! loom's in the crate's own tests built with `--cfg loom`, where the model tests
//! (`seats::loom_tests`) run the service's own code over every interleaving loom explores. A
//! build of the library alone with `--cfg loom` (a downstream crate's own loom tests) gets the
//! standard library's, as tokio does. A normal build costs nothing for it: the names below are
//! the standard library's types, and [`Futex`] is an `AtomicU32`.

#[cfg(all(test, loom))]
pub(super) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering};
#[cfg(all(test, loom))]
pub(super) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(all(test, loom)))]
pub(super) use std::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering};
#[cfg(not(all(test, loom)))]
pub(super) use std::sync::Mutex;
use std::time::Duration;

#[cfg(not(all(test, loom)))]
pub(super) use super::lock;

/// The ring's `lock`, for loom's mutex.
#[cfg(all(test, loom))]
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A 32-bit word that threads sleep on until it changes: futex(2) on the word itself.
///
/// Under loom, the futex is emulated with loom's mutex and condition variable, with futex(2)'s
/// guarantee: `wait(v)` sleeps only while the word holds `v`, checked atomically with respect to
/// `wake_all` (a wake after a change of the word either finds the waiter asleep and wakes it, or
/// comes before the waiter's check, which then sees the change). The emulation never times out
/// and never wakes spuriously: a lost wake-up then leaves the waiter asleep for ever, which loom
/// reports as a deadlock, where the real wait would hide it behind its timeout.
#[cfg_attr(not(all(test, loom)), repr(transparent))]
pub(super) struct Futex {
    word: AtomicU32,
    #[cfg(all(test, loom))]
    sleep: Mutex<()>,
    #[cfg(all(test, loom))]
    woken: loom::sync::Condvar,
}

impl Futex {
    pub(super) fn new(value: u32) -> Self {
        Self {
            word: AtomicU32::new(value),
            #[cfg(all(test, loom))]
            sleep: Mutex::new(()),
            #[cfg(all(test, loom))]
            woken: loom::sync::Condvar::new(),
        }
    }

    /// The word.
    pub(super) fn word(&self) -> &AtomicU32 {
        &self.word
    }

    /// Sleeps while the word holds `expected`: until a [`wake_all`](Self::wake_all), `timeout`,
    /// or a spurious wake-up; returns at once if the word holds another value.
    #[cfg(not(all(test, loom)))]
    pub(super) fn wait(&self, expected: u32, timeout: Duration) {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: futex(2) FUTEX_WAIT reads the live, 4-byte aligned AtomicU32 at the address
        // and sleeps only while it still holds `expected`; `ts` is a valid relative timeout that
        // outlives the call.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                &ts as *const libc::timespec,
            )
        };
    }

    /// Wakes every thread sleeping in [`wait`](Self::wait).
    #[cfg(not(all(test, loom)))]
    pub(super) fn wake_all(&self) {
        // SAFETY: futex(2) FUTEX_WAKE reads no memory and writes none; the address is that of a
        // live, 4-byte aligned AtomicU32 of this process (FUTEX_PRIVATE_FLAG).
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            )
        };
    }

    /// Loom's emulation of FUTEX_WAIT (without the timeout).
    #[cfg(all(test, loom))]
    pub(super) fn wait(&self, expected: u32, _timeout: Duration) {
        let asleep = lock(&self.sleep);
        if self.word.load(Ordering::SeqCst) == expected {
            drop(self.woken.wait(asleep));
        }
    }

    /// Loom's emulation of FUTEX_WAKE of every waiter.
    #[cfg(all(test, loom))]
    pub(super) fn wake_all(&self) {
        let _queue = lock(&self.sleep);
        self.woken.notify_all();
    }
}

/// Runs the model `f` over the interleavings loom explores: every one (`preemptions` `None`), or
/// those in which threads are preempted at most `preemptions` times (loom's bound, which keeps
/// the larger models to seconds; the models' doc comments give theirs). With
/// `LOOM_MAX_PREEMPTIONS` set, that bound holds for every model instead, and loom's own
/// `loom::model` runs it, which also prints loom's log (`LOOM_LOG=trace`, `LOOM_LOCATION=1`):
/// for a deeper run or a failure's trace, by hand.
///
/// Each model names itself on the process's standard error when it starts and when it passed,
/// outside the test harness's capture: a deadlock that loom reports by aborting the whole binary
/// (a panic while panicking) leaves the model it happened in started and never passed.
#[cfg(all(test, loom))]
pub(super) fn model(preemptions: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let me = std::thread::current();
    let name = me.name().unwrap_or("(unnamed)");
    say(format_args!("loom model started: {name}"));
    if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_some() {
        loom::model(f);
    } else {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = preemptions;
        builder.check(f);
    }
    say(format_args!("loom model passed: {name}"));
}

/// One line on standard error, past the test harness's capture of `eprintln!`.
#[cfg(all(test, loom))]
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
