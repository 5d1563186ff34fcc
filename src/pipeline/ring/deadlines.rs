//! The deadlines of [`Consumer::next_frame`](crate::pipeline::Consumer::next_frame)'s waits,
//! kept by one thread per process rather than by the async runtime's timers.
//!
//! A wait's deadline is the ring's timeout: an error path, almost never reached. A timer of the
//! runtime pending for it costs every wake-up of the waiting task (a runtime with a pending timer
//! parks with a timeout and looks at its timer wheel around each park), whether it fires or not.
//! Here a wait only stores its deadline and its task's waker in its consumer's [`Deadline`]; one
//! watcher thread, shared by every consumer of the process, sleeps until the earliest deadline
//! and wakes the task whose deadline passed. A wait that ends in time touches nothing but its own
//! entry: no system call, no lock shared with other consumers. The runtime needs no time driver.
//!
//! How a deadline earlier than the watcher's sleep is not missed: the watcher publishes the time
//! it sleeps until ([`Watch::target`]) and then looks at every entry again; a wait stores its
//! deadline and then reads that time, and wakes the watcher (under its lock) if its deadline is
//! earlier. Both sides store, then load (sequentially consistent), so either the watcher's
//! second look sees the new deadline or the wait sees the watcher's time and wakes it; the wake
//! is taken under the watcher's lock, which the watcher holds from its look until it sleeps, so
//! it cannot fall between the two.
//!
//! The watcher starts with the first entry and ends once every entry is gone (their consumers
//! dropped), so a process that no longer waits keeps no thread.

#[cfg(all(test, loom))]
use loom::sync::{
    atomic::{AtomicBool, AtomicU64, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};
#[cfg(all(test, loom))]
use loom::thread;
#[cfg(not(all(test, loom)))]
use std::sync::{
    atomic::{AtomicBool, AtomicU64, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};
use std::task::Waker;
#[cfg(not(all(test, loom)))]
use std::thread;
use std::time::{Duration, Instant};

/// Not waiting: the entry's deadline between waits, and the watcher's time when it has nothing
/// to wait for.
const NEVER: u64 = u64::MAX;

/// One consumer's entry: its deadline while it waits, and its waiting task's waker. Kept by the
/// consumer across its waits (made at its first wait).
pub(crate) struct Deadline(Arc<Entry>);

struct Entry {
    /// Nanoseconds since [`origin`], or [`NEVER`].
    at: AtomicU64,
    waker: Mutex<Option<Waker>>,
    /// Its consumer dropped it (set before the last reference goes, so that the watcher, woken
    /// by the drop, does not wait for the reference's end to forget it).
    gone: AtomicBool,
}

/// The watcher's state: every entry whose consumer has not dropped it.
struct Watch {
    entries: Mutex<Entries>,
    /// Signalled when a deadline earlier than `target` comes, or an entry goes.
    changed: Condvar,
    /// The time the watcher sleeps until ([`NEVER`]: until woken).
    target: AtomicU64,
}

struct Entries {
    /// Forgotten by the watcher once `gone`.
    list: Vec<Arc<Entry>>,
    /// The watcher thread runs (it clears this, under the lock, when it ends).
    running: bool,
    /// The model's watcher thread, which the model joins before it ends.
    #[cfg(all(test, loom))]
    thread: Option<thread::JoinHandle<()>>,
}

impl Watch {
    fn new() -> Self {
        Self {
            entries: Mutex::new(Entries {
                list: Vec::new(),
                running: false,
                #[cfg(all(test, loom))]
                thread: None,
            }),
            changed: Condvar::new(),
            target: AtomicU64::new(NEVER),
        }
    }
}

/// The process's watcher.
#[cfg(not(all(test, loom)))]
fn watcher() -> &'static Watch {
    static WATCH: std::sync::OnceLock<Watch> = std::sync::OnceLock::new();
    WATCH.get_or_init(Watch::new)
}

/// The model's watcher, made anew for each execution loom explores.
#[cfg(all(test, loom))]
fn watcher() -> &'static Watch {
    loom::lazy_static! {
        static ref WATCH: Watch = Watch::new();
    }
    &WATCH
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The instant deadlines are counted from (the first use in the process).
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
fn origin() -> Instant {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// `t` as nanoseconds since [`origin`] (0 for an earlier instant; [`NEVER`] - 1 at most, so a
/// deadline is never taken for "not waiting").
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
fn nanos(t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(origin()).as_nanos()).unwrap_or(NEVER - 1).min(NEVER - 1)
}

/// The time now, as [`nanos`] counts it.
#[cfg(not(all(test, loom)))]
fn now() -> u64 {
    nanos(Instant::now())
}

/// The model's clock, which the model moves ([`loom_tests`]).
#[cfg(all(test, loom))]
fn now() -> u64 {
    loom_tests::now()
}

/// Sleeps on `changed` until woken or `left` has passed.
#[cfg(not(all(test, loom)))]
fn sleep<'a>(w: &Watch, entries: MutexGuard<'a, Entries>, left: Option<Duration>) -> MutexGuard<'a, Entries> {
    match left {
        None => w.changed.wait(entries).unwrap_or_else(|e| e.into_inner()),
        Some(left) => w.changed.wait_timeout(entries, left).unwrap_or_else(|e| e.into_inner()).0,
    }
}

/// The model's sleep: until woken (loom has no time; the model's clock wakes the watcher when it
/// passes the time the watcher sleeps until, as the timeout would).
#[cfg(all(test, loom))]
fn sleep<'a>(
    w: &Watch,
    entries: MutexGuard<'a, Entries>,
    _left: Option<Duration>,
) -> MutexGuard<'a, Entries> {
    w.changed.wait(entries).unwrap_or_else(|e| e.into_inner())
}

impl Deadline {
    /// A new entry, known to the watcher (started if it does not run).
    pub(crate) fn new() -> std::io::Result<Self> {
        let entry = Arc::new(Entry {
            at: AtomicU64::new(NEVER),
            waker: Mutex::new(None),
            gone: AtomicBool::new(false),
        });
        let w = watcher();
        let mut entries = lock(&w.entries);
        if !entries.running {
            let _handle = thread::Builder::new().name("nvsci-deadlines".into()).spawn(run)?;
            #[cfg(all(test, loom))]
            {
                entries.thread = Some(_handle);
            }
            entries.running = true;
        }
        entries.list.push(entry.clone());
        Ok(Self(entry))
    }

    /// A wait until `deadline` for the task of `waker`: the watcher wakes it once `deadline`
    /// has passed, unless [`disarm`](Self::disarm) came first. Called at each poll of the wait
    /// that returns pending (a waker that would wake the same task is not replaced).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn arm(&self, deadline: Instant, waker: &Waker) {
        self.arm_at(nanos(deadline), waker)
    }

    /// [`arm`](Self::arm) with the deadline as [`nanos`] counts it.
    fn arm_at(&self, at: u64, waker: &Waker) {
        {
            let mut w = lock(&self.0.waker);
            match &*w {
                Some(old) if old.will_wake(waker) => {}
                _ => *w = Some(waker.clone()),
            }
        }
        if self.0.at.swap(at, Ordering::SeqCst) == at {
            return;
        }
        let w = watcher();
        if at < w.target.load(Ordering::SeqCst) {
            // Earlier than the watcher sleeps until: woken under its lock (see the module's
            // doc), so the wake cannot fall between its look and its sleep.
            let _entries = lock(&w.entries);
            w.changed.notify_one();
        }
    }

    /// The wait ended: no deadline, and the task's waker taken back (the entry holds no
    /// reference to the task between waits).
    pub(crate) fn disarm(&self) {
        self.0.at.store(NEVER, Ordering::SeqCst);
        drop(lock(&self.0.waker).take());
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        // The watcher forgets the entry at its next look, and ends if it was the last: tell it.
        self.0.gone.store(true, Ordering::SeqCst);
        drop(lock(&self.0.waker).take());
        let w = watcher();
        let _entries = lock(&w.entries);
        w.changed.notify_one();
    }
}

/// The watcher thread: wakes the tasks whose deadlines passed, sleeps until the earliest of the
/// others, ends when no entry is left.
fn run() {
    let w = watcher();
    let mut entries = lock(&w.entries);
    loop {
        entries.list.retain(|e| !e.gone.load(Ordering::SeqCst));
        if entries.list.is_empty() {
            w.target.store(NEVER, Ordering::SeqCst);
            entries.running = false;
            return;
        }
        let (now, earliest) = loop {
            let now = now();
            let earliest = expire(&entries.list, now);
            w.target.store(earliest, Ordering::SeqCst);
            // The second look (see the module's doc): a deadline stored before `target` was
            // published, earlier than it, is seen here; one stored after sees `target`.
            if pending(&entries.list) >= earliest {
                break (now, earliest);
            }
        };
        let left = (earliest != NEVER).then(|| Duration::from_nanos(earliest.saturating_sub(now)));
        entries = sleep(w, entries, left);
    }
}

/// Wakes the task of every entry whose deadline is at or before `now` (its deadline cleared,
/// unless its consumer stored another meanwhile); the earliest deadline left.
fn expire(list: &[Arc<Entry>], now: u64) -> u64 {
    let mut earliest = NEVER;
    for entry in list {
        let at = entry.at.load(Ordering::SeqCst);
        if at > now {
            earliest = earliest.min(at);
        } else if entry.at.compare_exchange(at, NEVER, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            // Taken out under the entry's lock, woken after it: the task's poll may arm again.
            let waker = lock(&entry.waker).take();
            if let Some(w) = waker {
                w.wake();
            }
        }
    }
    earliest
}

/// The earliest deadline of all entries.
fn pending(list: &[Arc<Entry>]) -> u64 {
    list.iter().map(|e| e.at.load(Ordering::SeqCst)).min().unwrap_or(NEVER)
}

#[cfg(all(test, loom))]
mod loom_tests;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    /// A waker that counts its wakes and records when the first came.
    struct Count {
        woken: AtomicUsize,
        first: Mutex<Option<Instant>>,
    }

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref()
        }
        fn wake_by_ref(self: &Arc<Self>) {
            lock(&self.first).get_or_insert_with(Instant::now);
            self.woken.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count { woken: AtomicUsize::new(0), first: Mutex::new(None) });
        (c.clone(), Waker::from(c))
    }

    fn until(what: impl Fn() -> bool, within: Duration) -> bool {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if what() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        what()
    }

    #[test]
    fn a_passed_deadline_wakes_its_task_once_and_not_before() {
        let d = Deadline::new().unwrap();
        let (count, waker) = counter();
        let start = Instant::now();
        let deadline = start + Duration::from_millis(30);
        d.arm(deadline, &waker);
        assert!(until(|| count.woken.load(Ordering::SeqCst) > 0, Duration::from_secs(5)));
        let first = lock(&count.first).unwrap();
        assert!(first >= deadline, "woken {:?} before its deadline", deadline - first);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(count.woken.load(Ordering::SeqCst), 1);
        // The waker was taken out when it was woken.
        assert!(lock(&d.0.waker).is_none());
    }

    #[test]
    fn a_disarmed_wait_is_not_woken_and_holds_no_waker() {
        let d = Deadline::new().unwrap();
        let (count, waker) = counter();
        d.arm(Instant::now() + Duration::from_millis(20), &waker);
        d.disarm();
        assert!(lock(&d.0.waker).is_none());
        assert_eq!(Arc::strong_count(&count), 2, "the test's and the waker's");
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(count.woken.load(Ordering::SeqCst), 0);
    }

    /// The watcher sleeps until a far deadline; a nearer one, stored later, wakes it.
    #[test]
    fn a_nearer_deadline_stored_while_the_watcher_sleeps_is_kept() {
        let far = Deadline::new().unwrap();
        let (far_count, far_waker) = counter();
        far.arm(Instant::now() + Duration::from_secs(3600), &far_waker);
        std::thread::sleep(Duration::from_millis(20));
        let near = Deadline::new().unwrap();
        let (count, waker) = counter();
        let deadline = Instant::now() + Duration::from_millis(30);
        near.arm(deadline, &waker);
        assert!(until(|| count.woken.load(Ordering::SeqCst) > 0, Duration::from_secs(5)));
        assert!(lock(&count.first).unwrap() >= deadline);
        assert_eq!(far_count.woken.load(Ordering::SeqCst), 0);
        far.disarm();
    }

    /// A wait moved to a later deadline (the next wait of the same consumer) is woken at the
    /// later one, not at the one the watcher had planned for.
    #[test]
    fn a_rearmed_wait_is_woken_at_its_new_deadline() {
        let d = Deadline::new().unwrap();
        let (count, waker) = counter();
        d.arm(Instant::now() + Duration::from_millis(20), &waker);
        d.disarm();
        let later = Instant::now() + Duration::from_millis(80);
        d.arm(later, &waker);
        assert!(until(|| count.woken.load(Ordering::SeqCst) > 0, Duration::from_secs(5)));
        assert!(lock(&count.first).unwrap() >= later);
        assert_eq!(count.woken.load(Ordering::SeqCst), 1);
    }
}
