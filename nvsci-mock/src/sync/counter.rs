//! The primitive of a sync object: a 64-bit counter at the start of its own page of host memory,
//! followed by the words that let CPU waiters sleep until it moves.
//!
//! The counter's address is handed out (`SyncObjGetCounter`) so that a GPU stream can wait on it
//! and store into it directly, like a Tegra syncpoint; such stores take no lock. Every access, the
//! mock's and the address holders', must therefore be a 64-bit atomic one. The mock reads with
//! `Acquire` and writes with `Release`.
//!
//! Layout of the page (shared with every process the object is exported to):
//!
//! | offset | word | written by |
//! |---:|---|---|
//! | 0 | the counter (`u64`) | CPU signals, GPU streams |
//! | 8 | the wake sequence (`u32`): incremented after every store a waiter must see | [`Counter::notify`] |
//! | 12 | the number of CPU waiters that may be asleep (`u32`) | [`Counter::wait_moved`] |
//!
//! A CPU waiter sleeps on the wake sequence (a futex on Linux, shared between processes because
//! the page is a shared mapping), so a store is seen at once if whoever stored then calls
//! [`Counter::notify`] (the CPU signal does; a GPU stream's store is followed by the
//! `SyncCounterNotify` entry point, which the CUDA binding enqueues as a host function).

use crate::ffi::Res;
use crate::pages::Pages;
use nvsci_sys::NvSciError_BadParameter;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Process-wide counts of the sleeps CPU fence waits took, and of how each ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuWaitStats {
    /// Sleeps on a counter's wake sequence (each fence wait that did not see its value while
    /// spinning sleeps at least once; a long wait sleeps once per bounded slice).
    pub sleeps: u64,
    /// Sleeps ended by a notify (a CPU signal or `SyncCounterNotify`, in this process or
    /// another that shares the counter): the futex reported a wake.
    pub woken: u64,
    /// Sleeps ended by their time bound.
    pub timed_out: u64,
}

static SLEEPS: AtomicU64 = AtomicU64::new(0);
static WOKEN: AtomicU64 = AtomicU64::new(0);
static TIMED_OUT: AtomicU64 = AtomicU64::new(0);

/// How the CPU fence waits of this process have slept so far (since the process started).
/// A test of a wake-up compares two snapshots: a wait that a signal woke shows one more
/// [`woken`](CpuWaitStats::woken) sleep.
pub fn cpu_wait_stats() -> CpuWaitStats {
    CpuWaitStats {
        sleeps: SLEEPS.load(Ordering::Relaxed),
        woken: WOKEN.load(Ordering::Relaxed),
        timed_out: TIMED_OUT.load(Ordering::Relaxed),
    }
}

/// How a futex sleep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SleepEnd {
    /// A wake on the word.
    Woken,
    /// The time bound passed.
    TimedOut,
    /// Anything else: the word had already changed, a signal interrupted the sleep, or no
    /// futex exists on this system.
    Other,
}

/// Bytes of the page the counter and its wake words use.
pub(crate) const COUNTER_BYTES: usize = 16;
const SEQ_OFFSET: usize = 8;
const WAITERS_OFFSET: usize = 12;

/// A zero-initialised 64-bit counter (and its wake words) at the start of a page-aligned
/// allocation of its own.
pub(crate) struct Counter {
    pages: Pages,
}

impl Counter {
    /// A new counter holding 0.
    pub(crate) fn new() -> Res<Counter> {
        let align = std::mem::align_of::<AtomicU64>() as u64;
        Ok(Counter { pages: Pages::zeroed(COUNTER_BYTES as u64, align)? })
    }

    /// A counter on pages mapped from another process (`BadParameter` when they are too short
    /// to hold the counter and its wake words).
    pub(crate) fn from_pages(pages: Pages) -> Res<Counter> {
        if pages.len() < COUNTER_BYTES {
            return Err(NvSciError_BadParameter);
        }
        Ok(Counter { pages })
    }

    /// The pages holding the counter (for export).
    pub(crate) fn pages(&self) -> &Pages {
        &self.pages
    }

    /// The counter as an atomic.
    pub(crate) fn atomic(&self) -> &AtomicU64 {
        // SAFETY: the allocation is at least `COUNTER_BYTES` bytes, page aligned (so aligned for
        // `AtomicU64`), zero-initialised (a valid `AtomicU64`) and lives as long as `self`. Every
        // access to it is atomic and 64 bits wide: the mock's go through this reference, and
        // holders of the address handed out by `SyncObjGetCounter` are bound by that entry
        // point's contract to do the same.
        unsafe { AtomicU64::from_ptr(self.pages.as_ptr().cast::<u64>()) }
    }

    /// The value reached by the primitive (`Acquire`).
    pub(crate) fn load(&self) -> u64 {
        self.atomic().load(Ordering::Acquire)
    }

    /// The counter's address, for the GPU entry points. Derived from the whole page (not from
    /// the counter's atomic), so that the wake words after it are reachable through it.
    pub(crate) fn as_ptr(&self) -> *mut u64 {
        self.pages.as_ptr().cast()
    }

    /// Wakes every CPU waiter of this counter (after a store into it).
    pub(crate) fn notify(&self) {
        // SAFETY: `as_ptr` is the start of this counter's live page.
        unsafe { notify_at(self.as_ptr().cast()) }
    }

    /// Sleeps until the counter may have moved past `seen_below`, or `timeout` passes (`None`:
    /// no bound). Spurious returns are allowed: the caller re-reads the counter.
    pub(crate) fn wait_moved(&self, below: u64, timeout: Option<Duration>) {
        let (seq, waiters) = words(self.as_ptr().cast());
        waiters.fetch_add(1, Ordering::SeqCst);
        let s = seq.load(Ordering::SeqCst);
        // Re-checked after announcing the waiter and reading the sequence: a notify from here on
        // changes the sequence, so the sleep below returns at once.
        if self.atomic().load(Ordering::SeqCst) < below {
            SLEEPS.fetch_add(1, Ordering::Relaxed);
            match futex::wait(seq, s, timeout) {
                SleepEnd::Woken => WOKEN.fetch_add(1, Ordering::Relaxed),
                SleepEnd::TimedOut => TIMED_OUT.fetch_add(1, Ordering::Relaxed),
                SleepEnd::Other => 0,
            };
        }
        waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The wake sequence and waiter count of the counter at `base`.
fn words<'a>(base: *mut u8) -> (&'a AtomicU32, &'a AtomicU32) {
    // SAFETY: callers pass the start of a live counter page (at least `COUNTER_BYTES` bytes,
    // page aligned); both words are only ever accessed atomically.
    unsafe {
        (
            AtomicU32::from_ptr(base.add(SEQ_OFFSET).cast()),
            AtomicU32::from_ptr(base.add(WAITERS_OFFSET).cast()),
        )
    }
}

/// Advances the wake sequence of the counter at `base` and wakes its sleeping waiters.
///
/// # Safety
///
/// `base` is the address of a live counter of this mock (as `SyncObjGetCounter` hands out).
pub(crate) unsafe fn notify_at(base: *mut u8) {
    let (seq, waiters) = words(base);
    seq.fetch_add(1, Ordering::SeqCst);
    if waiters.load(Ordering::SeqCst) > 0 {
        futex::wake_all(seq);
    }
}

#[cfg(target_os = "linux")]
mod futex {
    use super::SleepEnd;
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    /// Sleeps while `*word == expected` (at most `timeout`). Not private (no
    /// `FUTEX_PRIVATE_FLAG`): the page may be shared with another process, whose wake must
    /// reach this sleep.
    pub(super) fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> SleepEnd {
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `word` is a live, aligned 32-bit word; `tsp` is NULL or a valid timespec.
        // Every outcome (woken, value changed, timeout, interrupted) returns to the caller,
        // which re-reads the counter.
        let r = unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, tsp) };
        if r == 0 {
            SleepEnd::Woken
        } else if std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT) {
            SleepEnd::TimedOut
        } else {
            SleepEnd::Other
        }
    }

    /// Wakes every sleeper on `word`.
    pub(super) fn wake_all(word: &AtomicU32) {
        // SAFETY: `word` is a live, aligned 32-bit word.
        unsafe {
            libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod futex {
    use super::SleepEnd;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    /// No futex: a short sleep, after which the caller re-reads the counter.
    pub(super) fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> SleepEnd {
        if word.load(Ordering::SeqCst) == expected {
            std::thread::sleep(timeout.unwrap_or(Duration::MAX).min(Duration::from_micros(100)));
        }
        SleepEnd::Other
    }

    pub(super) fn wake_all(_: &AtomicU32) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A waiter with no time bound only returns once the counter moved and someone notified:
    /// a store followed by `notify_at` (what `SyncCounterNotify` does after a GPU stream's
    /// store) must wake it, or this test never ends.
    #[test]
    fn a_store_and_a_notify_wake_a_waiter_without_a_time_bound() {
        let c = Arc::new(Counter::new().unwrap());
        let waiter = {
            let c = c.clone();
            std::thread::spawn(move || {
                while c.load() < 1 {
                    c.wait_moved(1, None);
                }
            })
        };
        // Let the waiter go to sleep first (if it has not, the store is seen at once).
        std::thread::sleep(Duration::from_millis(20));
        c.atomic().store(1, Ordering::Release);
        // SAFETY: the counter is alive.
        unsafe { notify_at(c.as_ptr().cast()) };
        waiter.join().unwrap();
        let (_, waiters) = words(c.as_ptr().cast());
        assert_eq!(waiters.load(Ordering::SeqCst), 0, "the waiter did not deregister");
    }
}
