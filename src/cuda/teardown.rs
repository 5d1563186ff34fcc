//! Deferred destruction of driver objects, off the dropping thread.
//!
//! When an import, a mapping, an imported semaphore or a page-locked host range is dropped, its
//! driver destroy call and everything it keeps alive go to a queue served by one long-lived
//! thread (`nvsci-cuda-teardown`). `Drop` only enqueues: it never waits, whatever the context's
//! streams are doing.
//!
//! The thread gathers the drops of a burst for up to half a millisecond (not while a
//! [`flush_teardown`](super::CudaGpu::flush_teardown) waits), then serves one context at a time:
//! it takes that context's queued drops, synchronises the context once (a synchronisation
//! started after the drops: by then no work queued before them, on any stream of the context,
//! the crate's or the application's, with a raw device address or not, can still use the
//! objects) and runs their destroys right after it, on the same thread. A burst of drops costs
//! one synchronisation, and an object whose last holder was one of those destroys (an import
//! released by its last mapping) is destroyed right away, in the same group. Waiting for the
//! streams that used an object alone would not be shorter: the driver's destroy and free calls
//! themselves wait for the work in flight on the whole device (measured on an H100, driver 580:
//! `cuMemFree` of a mapping does not return while another stream of the context is blocked).
//! Synchronising first keeps the destroy calls out of the driver while the device is busy.
//!
//! The wait is bounded by [`DESTROY_TIMEOUT`](super::DESTROY_TIMEOUT): a stream may wait on a
//! fence that never expires. Past it, an object still queued is leaked (logged), never freed
//! under the driver: [`CudaGpu::flush_teardown`](super::CudaGpu::flush_teardown) and
//! [`CudaGpu::pending_teardown`](super::CudaGpu::pending_teardown) give up on it. A thread held
//! past the deadline of its batch in a synchronisation is replaced for later drops, so one
//! context's stuck stream does not hold up the destroys of another context.

use cudarc::driver::{result as cu, CudaContext};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a dropped import, mapping or semaphore waits for the work that used it before it is
/// leaked instead of destroyed (a stream may wait on a fence that never expires).
pub const DESTROY_TIMEOUT: Duration = Duration::from_secs(10);

type Destroy = Box<dyn FnOnce() + Send>;

/// How long the teardown thread gathers drops after the first of a batch before synchronising.
/// Measured on an H100 (driver 580): cycles that import, map, use and drop a buffer and two
/// semaphores (the `soak` example) cost 41-45 us with a 500 us window against 85-95 us without,
/// since one synchronisation and one run of destroys then serve several cycles instead of
/// contending with each one; `flush_teardown` does not wait for it.
const GATHER: Duration = Duration::from_micros(500);

/// What the queue needs of a context: an identity and a way to wait for all its work.
trait Drainable: Send + Sync {
    /// Identifies the context (two values with one key are one context).
    fn key(&self) -> usize;
    /// Makes the context current on the calling thread and waits for every stream of it.
    fn drain(&self) -> Result<(), String>;
}

impl Drainable for CudaContext {
    fn key(&self) -> usize {
        self.cu_ctx() as usize
    }

    fn drain(&self) -> Result<(), String> {
        // The driver's calls, not cudarc's `bind_to_thread`, which would first hand over (and
        // so fail on) an error cudarc recorded for the context elsewhere.
        // SAFETY: the context is alive (`self`); making it current has no other precondition.
        unsafe { cu::ctx::set_current(self.cu_ctx()) }.map_err(|e| e.to_string())?;
        cu::ctx::synchronize().map_err(|e| e.to_string())
    }
}

/// One dropped object.
struct Item {
    ctx: Arc<dyn Drainable>,
    what: &'static str,
    timeout: Duration,
    deadline: Instant,
    /// The destroy, until the teardown thread runs it or it is leaked: whoever takes it decides.
    destroy: Mutex<Option<Destroy>>,
    /// Set once the destroy has returned or was leaked (a destroy taken and still running is
    /// not finished: what it frees may still be alive).
    done: AtomicBool,
}

impl Item {
    fn key(&self) -> usize {
        self.ctx.key()
    }

    fn take(&self) -> Option<Destroy> {
        lock(&self.destroy).take()
    }

    /// Whether nobody has taken the destroy yet (neither run nor leaked nor running).
    fn untaken(&self) -> bool {
        lock(&self.destroy).is_some()
    }

    fn finished(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    fn set_done(&self) {
        self.done.store(true, Ordering::Release);
    }

    /// Leaks the destroy, what it owns and the context (whose teardown would free the objects
    /// too), if nobody has taken the destroy yet.
    fn leak(&self, why: &str) {
        if let Some(d) = self.take() {
            log::error!("{why} ({}); leaking it", self.what);
            std::mem::forget(d);
            std::mem::forget(self.ctx.clone());
            self.set_done();
        }
    }
}

struct Queue {
    /// Dropped and not yet taken by the teardown thread.
    waiting: Vec<Arc<Item>>,
    /// Every item neither destroyed nor leaked (`waiting` and the group in progress).
    outstanding: Vec<Arc<Item>>,
    /// The current teardown thread's generation; a thread of an older one exits after the
    /// group it holds.
    generation: u64,
    /// Whether a thread of the current generation runs.
    running: bool,
    /// The context the current thread synchronises or destroys for, and the earliest deadline
    /// of the items it took.
    draining: Option<(usize, Instant)>,
    /// Contexts an older thread is still synchronising past a deadline: no other thread
    /// synchronises them (their items wait, or are leaked at their deadlines).
    stuck: Vec<usize>,
    /// Callers of `flush` waiting: the thread then takes what is queued at once.
    flushing: usize,
}

struct Shared {
    q: Mutex<Queue>,
    /// New items, a new generation or a context no longer stuck.
    work: Condvar,
    /// Items finished.
    done: Condvar,
}

fn shared() -> &'static Shared {
    static S: OnceLock<Shared> = OnceLock::new();
    S.get_or_init(|| Shared {
        q: Mutex::new(Queue {
            waiting: Vec::new(),
            outstanding: Vec::new(),
            generation: 0,
            running: false,
            draining: None,
            stuck: Vec::new(),
            flushing: 0,
        }),
        work: Condvar::new(),
        done: Condvar::new(),
    })
}

thread_local! {
    /// On the teardown thread while it runs destroys of a context it has just synchronised:
    /// that context. Destroys queued from there run at once (see `enqueue`).
    static INLINE: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Queues `destroy` to run on the teardown thread once a synchronisation of `ctx` started after
/// this call has returned (bounded by `DESTROY_TIMEOUT`; past it `destroy` and all it owns are
/// leaked). Never blocks on the device.
pub(crate) fn destroy_after_work(
    ctx: &Arc<CudaContext>,
    what: &'static str,
    destroy: impl FnOnce() + Send + 'static,
) {
    enqueue(ctx.clone(), what, DESTROY_TIMEOUT, Box::new(destroy));
}

fn enqueue(ctx: Arc<dyn Drainable>, what: &'static str, timeout: Duration, destroy: Destroy) {
    if INLINE.with(|c| c.get()) == Some(ctx.key()) {
        // Dropped by a destroy of the teardown thread right after a synchronisation of this
        // context (an import released by its last mapping's destroy). Every holder through
        // which work can reach an object (a mapping, an array, a surface) releases it through
        // this queue, so its last holder being one of these destroys means every such holder
        // was dropped, after its work was queued, before the synchronisation began.
        destroy();
        return;
    }
    let now = Instant::now();
    let item = Arc::new(Item {
        ctx,
        what,
        timeout,
        deadline: now.checked_add(timeout).unwrap_or_else(|| far_future(now)),
        destroy: Mutex::new(Some(destroy)),
        done: AtomicBool::new(false),
    });
    let s = shared();
    let mut q = lock(&s.q);
    q.outstanding.push(item.clone());
    q.waiting.push(item);
    ensure_server(&mut q);
    drop(q);
    s.work.notify_all();
}

fn far_future(now: Instant) -> Instant {
    now + Duration::from_secs(100 * 365 * 86_400)
}

/// Starts a teardown thread when none runs, or when the running one has been synchronising one
/// context past the deadline of what it took: that context is marked stuck and the old thread
/// exits once its synchronisation returns, so other contexts' drops are still served.
fn ensure_server(q: &mut Queue) {
    let held = q.draining.filter(|&(_, deadline)| Instant::now() >= deadline);
    if q.running && held.is_none() {
        return;
    }
    if let Some((key, _)) = held {
        q.stuck.push(key);
    }
    q.generation += 1;
    q.draining = None;
    let generation = q.generation;
    q.running = std::thread::Builder::new()
        .name("nvsci-cuda-teardown".into())
        .spawn(move || serve(generation))
        .is_ok();
    if !q.running {
        log::error!(
            "no teardown thread could be started; dropped CUDA objects are leaked at their deadlines"
        );
    }
}

/// Leaks every outstanding item past its deadline that nobody took, and removes finished ones
/// (returned, to be dropped once the queue's lock is released: dropping one may release a
/// context).
#[must_use]
fn reap(q: &mut Queue) -> Vec<Arc<Item>> {
    let now = Instant::now();
    for it in q.outstanding.iter().filter(|it| now >= it.deadline) {
        it.leak(&format!(
            "the work queued before it was dropped did not finish within {:?} (a stream waits on a fence that \
             never expired?)",
            it.timeout
        ));
    }
    q.waiting.retain(|it| !it.finished());
    let mut removed = Vec::new();
    q.outstanding.retain(|it| {
        let keep = !it.finished();
        if !keep {
            removed.push(it.clone());
        }
        keep
    });
    removed
}

fn count(q: &Queue, key: usize) -> usize {
    q.outstanding.iter().filter(|it| it.key() == key).count()
}

/// Destroys queued for `ctx` and not yet run (nor leaked past their deadline).
pub(crate) fn pending(ctx: &CudaContext) -> usize {
    pending_of(ctx.key())
}

fn pending_of(key: usize) -> usize {
    let mut q = lock(&shared().q);
    let removed = reap(&mut q);
    ensure_server_if_needed(&mut q);
    let n = count(&q, key);
    drop(q);
    drop(removed);
    n
}

fn ensure_server_if_needed(q: &mut Queue) {
    if !q.waiting.is_empty() {
        ensure_server(q);
    }
}

/// Waits until nothing of `ctx` is queued, at most `timeout`; returns what is still queued.
/// Items past their deadline are leaked on the way.
pub(crate) fn flush(ctx: &CudaContext, timeout: Duration) -> usize {
    flush_of(ctx.key(), timeout)
}

fn flush_of(key: usize, timeout: Duration) -> usize {
    let s = shared();
    let start = Instant::now();
    let end = start.checked_add(timeout).unwrap_or_else(|| far_future(start));
    let mut q = lock(&s.q);
    q.flushing += 1;
    s.work.notify_all();
    let mut removed = Vec::new();
    let n = loop {
        removed.extend(reap(&mut q));
        ensure_server_if_needed(&mut q);
        let n = count(&q, key);
        let now = Instant::now();
        if n == 0 || now >= end {
            break n;
        }
        // Wake at the next deadline that can change something: an item of `ctx` nobody took
        // yet (leaked then), or a thread held in a synchronisation (replaced then); a destroy
        // that is running is waited for through `done`.
        let next = q
            .outstanding
            .iter()
            .filter(|it| it.key() == key && it.untaken())
            .map(|it| it.deadline)
            .chain(q.draining.map(|d| d.1))
            .filter(|&d| d > now)
            .min()
            .unwrap_or(end)
            .min(end);
        q = s.done.wait_timeout(q, next - now).unwrap_or_else(|e| e.into_inner()).0;
    };
    q.flushing -= 1;
    drop(q);
    drop(removed);
    n
}

/// The teardown thread of `generation`: waits for drops, gathers a burst, then serves one
/// context at a time: takes its queued items, synchronises it and runs their destroys right
/// after. Exits when a newer generation replaced it.
fn serve(generation: u64) {
    let s = shared();
    loop {
        let (ctx, key, group) = {
            let mut q = lock(&s.q);
            let mut slept = false;
            loop {
                if q.generation != generation {
                    return;
                }
                if q.waiting.iter().any(|it| !q.stuck.contains(&it.key())) {
                    break;
                }
                q = s.work.wait(q).unwrap_or_else(|e| e.into_inner());
                slept = true;
            }
            if slept {
                // Gather the drops of a burst (the mapping, import and semaphores of one frame
                // or one cycle) into one group, unless a flush waits.
                let until = Instant::now() + GATHER;
                loop {
                    if q.generation != generation {
                        return;
                    }
                    let now = Instant::now();
                    if q.flushing > 0 || now >= until {
                        break;
                    }
                    q = s.work.wait_timeout(q, until - now).unwrap_or_else(|e| e.into_inner()).0;
                }
            }
            let Some(first) = q.waiting.iter().find(|it| !q.stuck.contains(&it.key())).cloned() else {
                continue;
            };
            let key = first.key();
            let mut group = Vec::new();
            q.waiting.retain(|it| {
                let mine = it.key() == key;
                if mine {
                    group.push(it.clone());
                }
                !mine
            });
            let earliest = group.iter().map(|it| it.deadline).min().unwrap_or(first.deadline);
            q.draining = Some((key, earliest));
            (first.ctx.clone(), key, group)
        };
        let synced = if group.iter().any(|it| it.untaken()) { ctx.drain() } else { Ok(()) };
        if let Err(e) = &synced {
            log::warn!("context synchronise before a destroy failed: {e}");
        }
        for it in &group {
            let Some(destroy) = it.take() else { continue }; // leaked past its deadline meanwhile
            if synced.is_err() {
                // A sticky context error: the work may never complete; nothing is destroyed
                // under it.
                log::error!("leaking what {} would destroy: its context failed", it.what);
                std::mem::forget(destroy);
                std::mem::forget(it.ctx.clone());
            } else {
                INLINE.with(|c| c.set(Some(key)));
                let r = catch_unwind(AssertUnwindSafe(destroy));
                INLINE.with(|c| c.set(None));
                if r.is_err() {
                    log::error!("the destroy of {} panicked", it.what);
                }
            }
            it.set_done();
        }
        #[cfg(test)]
        tests::group_done(key);
        let mut q = lock(&s.q);
        q.stuck.retain(|&k| k != key);
        if q.generation == generation {
            q.draining = None;
        }
        let removed = reap(&mut q);
        drop(q);
        s.done.notify_all();
        s.work.notify_all(); // a context no longer stuck
        drop(removed);
        drop(group);
    }
}

/// Logs a failed destroy call; true when it succeeded.
pub(crate) fn succeeded(what: &'static str, r: crate::Result<()>) -> bool {
    if let Err(e) = r {
        log::warn!("{what}: {e}");
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    //! The queue's rules with stand-in contexts whose synchronisation the test controls (no GPU).
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Keys of the groups the teardown threads finished (to wait for a thread's last group).
    static GROUPS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

    pub(super) fn group_done(key: usize) {
        lock(&GROUPS).push(key);
    }

    /// Waits (at most 10 s) until a thread finished a group of `key`.
    fn wait_group(key: usize) {
        let end = Instant::now() + Duration::from_secs(10);
        while !lock(&GROUPS).contains(&key) {
            assert!(Instant::now() < end, "no thread finished a group of the context");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits (at most 10 s) until `f` holds.
    fn wait_until(f: impl Fn() -> bool) {
        let end = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < end, "timed out waiting");
            std::thread::yield_now();
        }
    }

    /// A context whose synchronisation waits until the test opens its gate (or fails).
    #[derive(Default)]
    struct Fake {
        open: Mutex<bool>,
        opened: Condvar,
        fail: AtomicBool,
        started: AtomicUsize,
        finished: AtomicUsize,
    }

    impl Drainable for Fake {
        fn key(&self) -> usize {
            self as *const Fake as usize
        }

        fn drain(&self) -> Result<(), String> {
            self.started.fetch_add(1, Ordering::SeqCst);
            let mut g = lock(&self.open);
            while !*g {
                g = self.opened.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            drop(g);
            self.finished.fetch_add(1, Ordering::SeqCst);
            if self.fail.load(Ordering::SeqCst) {
                return Err("sticky error".into());
            }
            Ok(())
        }
    }

    /// Opens the fake's gate when dropped, so a failed assertion does not leave a teardown
    /// thread blocked for the tests after it.
    struct Gate(Arc<Fake>);

    impl Gate {
        fn new(open: bool) -> Gate {
            let f = Arc::new(Fake::default());
            *lock(&f.open) = open;
            Gate(f)
        }

        fn open(&self) {
            *lock(&self.0.open) = true;
            self.0.opened.notify_all();
        }

        fn key(&self) -> usize {
            self.0.key()
        }
    }

    impl Drop for Gate {
        fn drop(&mut self) {
            self.open();
        }
    }

    /// Counts how often it was dropped: a leaked destroy never drops what it owns.
    struct Owned(Arc<AtomicUsize>);

    impl Drop for Owned {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    const LONG: Duration = Duration::from_secs(30);

    /// Run and drop counters of the destroys a test queues.
    #[derive(Default, Clone)]
    struct Counts {
        ran: Arc<AtomicUsize>,
        dropped: Arc<AtomicUsize>,
        /// Set when a destroy ran before a synchronisation that started after its drop ended.
        early: Arc<AtomicBool>,
    }

    impl Counts {
        fn get(&self) -> (usize, usize) {
            (self.ran.load(Ordering::SeqCst), self.dropped.load(Ordering::SeqCst))
        }
    }

    /// Queues a destroy that checks it runs after a synchronisation started after this call,
    /// takes a while, counts its run and owns an `Owned`.
    fn queue(ctx: &Gate, timeout: Duration, c: &Counts) {
        let (c, owned, fake) = (c.clone(), Owned(c.dropped.clone()), ctx.0.clone());
        let started_before = fake.started.load(Ordering::SeqCst);
        enqueue(
            ctx.0.clone(),
            "test destroy",
            timeout,
            Box::new(move || {
                // A synchronisation that started after the drop has finished: more have finished
                // than had started at the drop.
                if fake.finished.load(Ordering::SeqCst) <= started_before {
                    c.early.store(true, Ordering::SeqCst);
                }
                // A destroy takes a while: flushing must wait until it has returned.
                std::thread::sleep(Duration::from_millis(2));
                c.ran.fetch_add(1, Ordering::SeqCst);
                drop(owned);
            }),
        );
    }

    /// The queue is process-wide: these tests take turns so that one's held synchronisation does
    /// not share the thread with another's drops.
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        static S: Mutex<()> = Mutex::new(());
        lock(&S)
    }

    #[test]
    fn a_destroy_waits_for_a_synchronisation_started_after_its_drop_and_a_burst_costs_one_more() {
        let _s = serial();
        let ctx = Gate::new(false);
        let c = Counts::default();
        queue(&ctx, LONG, &c);
        // The thread is held in the first synchronisation; a burst of drops queues behind it.
        wait_until(|| ctx.0.started.load(Ordering::SeqCst) == 1);
        for _ in 0..9 {
            queue(&ctx, LONG, &c);
        }
        assert_eq!(pending_of(ctx.key()), 10);
        assert_eq!(c.get(), (0, 0), "destroyed before the context was synchronised");
        ctx.open();
        assert_eq!(flush_of(ctx.key(), LONG), 0);
        assert_eq!(c.get(), (10, 10));
        assert!(!c.early.load(Ordering::SeqCst), "a destroy ran under a synchronisation older than its drop");
        // The first drop's synchronisation, then one for the burst queued meanwhile.
        assert_eq!(ctx.0.finished.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn an_object_released_by_a_destroy_is_destroyed_in_the_same_group_but_not_another_contexts() {
        let _s = serial();
        let (a, b) = (Gate::new(true), Gate::new(false));
        let (outer, inner, other) = (Counts::default(), Counts::default(), Counts::default());
        let (a_fake, inner2, other2) = (Gate(a.0.clone()), inner.clone(), other.clone());
        let b_fake = Gate(b.0.clone());
        let owned = Owned(outer.dropped.clone());
        let ran = outer.ran.clone();
        enqueue(
            a.0.clone(),
            "mapping",
            LONG,
            Box::new(move || {
                ran.fetch_add(1, Ordering::SeqCst);
                drop(owned);
                // Its import's last holder goes here: the import's destroy is queued from the
                // teardown thread; and an object of another context.
                queue(&a_fake, LONG, &inner2);
                queue(&b_fake, LONG, &other2);
                std::mem::forget(a_fake);
                std::mem::forget(b_fake);
            }),
        );
        assert_eq!(flush_of(a.key(), LONG), 0);
        assert_eq!((outer.get(), inner.get()), ((1, 1), (1, 1)));
        assert_eq!(a.0.finished.load(Ordering::SeqCst), 1, "the import waited for a second synchronisation");
        // The other context's object waits for its own synchronisation.
        assert_eq!(other.get(), (0, 0), "destroyed without a synchronisation of its context");
        assert_eq!(pending_of(b.key()), 1);
        b.open();
        assert_eq!(flush_of(b.key(), LONG), 0);
        assert_eq!(other.get(), (1, 1));
        assert!(!other.early.load(Ordering::SeqCst));
    }

    #[test]
    fn past_its_deadline_a_destroy_is_leaked_and_other_contexts_are_still_served() {
        let _s = serial();
        lock(&GROUPS).clear();
        let stuck = Gate::new(false);
        let c = Counts::default();
        queue(&stuck, Duration::from_millis(50), &c);
        wait_until(|| stuck.0.started.load(Ordering::SeqCst) == 1);
        // The synchronisation does not return within the bound: flushing gives up on the
        // destroy (leaked: it never ran and what it owns was not dropped).
        assert_eq!(flush_of(stuck.key(), LONG), 0);
        assert_eq!(c.get(), (0, 0));
        // Another context's drop is served by a thread that replaced the held one.
        let other = Gate::new(true);
        let c2 = Counts::default();
        queue(&other, LONG, &c2);
        assert_eq!(flush_of(other.key(), LONG), 0);
        assert_eq!(c2.get(), (1, 1));
        // A later drop of the stuck context is not synchronised by the new thread while the old
        // one still waits in that context.
        let c3 = Counts::default();
        queue(&stuck, LONG, &c3);
        let (third, c4) = (Gate::new(true), Counts::default());
        queue(&third, LONG, &c4);
        assert_eq!(flush_of(third.key(), Duration::from_secs(5)), 0, "the thread waits in the stuck context");
        assert_eq!(c4.get(), (1, 1));
        assert_eq!(stuck.0.started.load(Ordering::SeqCst), 1, "a second thread waits in the stuck context");
        // The held synchronisation returns at last: the leaked destroy stays leaked once the old
        // thread has finished its group, and the later drop is served.
        stuck.open();
        wait_group(stuck.key());
        assert_eq!(flush_of(stuck.key(), LONG), 0);
        assert_eq!(c.get(), (0, 0));
        assert_eq!(c3.get(), (1, 1));
        assert!(!c3.early.load(Ordering::SeqCst));
    }

    #[test]
    fn flushing_waits_for_a_destroy_in_progress() {
        let _s = serial();
        let ctx = Gate::new(true);
        let (started, finished) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (st, fin) = (started.clone(), finished.clone());
        enqueue(
            ctx.0.clone(),
            "slow destroy",
            LONG,
            Box::new(move || {
                st.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(50));
                fin.store(true, Ordering::SeqCst);
            }),
        );
        wait_until(|| started.load(Ordering::SeqCst));
        // The destroy is running: what it frees is still alive, so it is still pending.
        assert_eq!(pending_of(ctx.key()), 1);
        assert_eq!(flush_of(ctx.key(), LONG), 0);
        assert!(finished.load(Ordering::SeqCst), "flush returned while the destroy was still running");
    }

    #[test]
    fn a_failed_synchronisation_leaks_instead_of_destroying() {
        let _s = serial();
        let ctx = Gate::new(true);
        ctx.0.fail.store(true, Ordering::SeqCst);
        let c = Counts::default();
        queue(&ctx, LONG, &c);
        assert_eq!(flush_of(ctx.key(), LONG), 0);
        assert_eq!(c.get(), (0, 0));
    }

    #[test]
    fn a_destroy_that_panics_finishes_and_the_thread_serves_on() {
        let _s = serial();
        const MESSAGE: &str = "a destroy that panics on purpose";
        // Keep the test's own panic out of the output; any other still reaches the old hook.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&MESSAGE) {
                previous(info);
            }
        }));
        let ctx = Gate::new(true);
        enqueue(ctx.0.clone(), "panicking destroy", LONG, Box::new(|| std::panic::panic_any(MESSAGE)));
        assert_eq!(flush_of(ctx.key(), LONG), 0);
        let c = Counts::default();
        queue(&ctx, LONG, &c);
        assert_eq!(flush_of(ctx.key(), LONG), 0);
        assert_eq!(c.get(), (1, 1));
    }

    #[test]
    fn a_flush_without_bound_returns_when_done() {
        let _s = serial();
        let ctx = Gate::new(true);
        let c = Counts::default();
        queue(&ctx, LONG, &c);
        assert_eq!(flush_of(ctx.key(), Duration::MAX), 0);
        assert_eq!(c.get(), (1, 1));
    }
}
