//! Deferred destruction of driver objects, off the dropping thread.
//!
//! When an import, a mapping, an imported semaphore or a page-locked host range is dropped, its
//! driver destroy call and everything it keeps alive go to a queue served by one long-lived
//! thread (`nvsci-cuda-teardown`). `Drop` only enqueues: it never waits, whatever the context's
//! streams are doing.
//!
//! The thread gathers the drops of a burst for up to half a millisecond (not while a
//! [`flush_teardown`](super::CudaGpu::flush_teardown) waits), takes everything queued,
//! synchronises each context that has something in the batch once (a synchronisation started
//! after the drops: by then no work queued before them, on any stream of the context, the
//! crate's or the application's, with a raw device address or not, can still use the objects)
//! and runs the batch's destroys right after it, on the same thread. A burst of drops costs one
//! synchronisation, and an object whose last holder was one of those destroys (an import
//! released by its last mapping) is destroyed right away, in the same batch. Waiting for the
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

use cudarc::driver::CudaContext;
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
        self.bind_to_thread().and_then(|_| self.synchronize()).map_err(|e| e.to_string())
    }
}

/// One dropped object.
struct Item {
    ctx: Arc<dyn Drainable>,
    what: &'static str,
    deadline: Instant,
    /// The destroy, until the teardown thread runs it or it is leaked: whoever takes it decides.
    destroy: Mutex<Option<Destroy>>,
    /// Set once the destroy has returned or was leaked (a destroy taken and still running is
    /// not finished: what it frees may still be alive).
    done: std::sync::atomic::AtomicBool,
}

impl Item {
    fn key(&self) -> usize {
        self.ctx.key()
    }

    fn take(&self) -> Option<Destroy> {
        lock(&self.destroy).take()
    }

    fn finished(&self) -> bool {
        self.done.load(std::sync::atomic::Ordering::Acquire)
    }

    fn set_done(&self) {
        self.done.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Leaks the destroy (and what it owns) if it has not run yet.
    fn leak(&self, why: &str) {
        if let Some(d) = self.take() {
            log::error!("{why} ({}); leaking it", self.what);
            std::mem::forget(d);
            self.set_done();
        }
    }
}

struct Queue {
    /// Dropped and not yet taken by the teardown thread.
    waiting: Vec<Arc<Item>>,
    /// Every item neither destroyed nor leaked (`waiting` and the batch in progress).
    outstanding: Vec<Arc<Item>>,
    /// The current teardown thread's generation; a thread of an older one exits after its batch.
    generation: u64,
    /// Whether a thread of the current generation runs.
    running: bool,
    /// The earliest deadline of the batch the current thread is synchronising or destroying.
    busy_until: Option<Instant>,
    /// Callers of `flush` waiting: the thread then takes what is queued at once.
    flushing: usize,
}

struct Shared {
    q: Mutex<Queue>,
    /// New items (or a new generation).
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
            busy_until: None,
            flushing: 0,
        }),
        work: Condvar::new(),
        done: Condvar::new(),
    })
}

thread_local! {
    /// On the teardown thread while it runs destroys of a context it has just synchronised:
    /// that context. Destroys queued from there (an import whose last mapping was destroyed)
    /// run at once.
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
        // Dropped by a destroy of the teardown thread, right after a synchronisation of this
        // context: what the object was used by has finished (its last holder was a destroy of
        // that batch, so no work can have been queued on it after the synchronisation began).
        destroy();
        return;
    }
    let item = Arc::new(Item {
        ctx,
        what,
        deadline: Instant::now() + timeout,
        destroy: Mutex::new(Some(destroy)),
        done: Default::default(),
    });
    let s = shared();
    let mut q = lock(&s.q);
    // A thread held past a deadline in one context's synchronisation is replaced, so drops of
    // other contexts go on being served.
    let stuck = q.busy_until.is_some_and(|t| Instant::now() >= t);
    if !q.running || stuck {
        q.generation += 1;
        q.busy_until = None;
        let generation = q.generation;
        let spawned =
            std::thread::Builder::new().name("nvsci-cuda-teardown".into()).spawn(move || serve(generation));
        if spawned.is_err() {
            q.running = false;
            drop(q);
            item.leak("no teardown thread could be started");
            return;
        }
        q.running = true;
    }
    q.outstanding.push(item.clone());
    q.waiting.push(item);
    drop(q);
    s.work.notify_all();
}

/// Leaks every outstanding item past its deadline and forgets finished ones.
fn reap(q: &mut Queue) {
    let now = Instant::now();
    for it in q.outstanding.iter().filter(|it| now >= it.deadline) {
        it.leak(&format!(
            "the work queued before it was dropped did not finish within {DESTROY_TIMEOUT:?} (a stream waits on \
             a fence that never expired?)"
        ));
    }
    q.outstanding.retain(|it| !it.finished());
    q.waiting.retain(|it| !it.finished());
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
    reap(&mut q);
    count(&q, key)
}

/// Waits until nothing of `ctx` is queued, at most `timeout`; returns what is still queued.
/// Items past their deadline are leaked on the way.
pub(crate) fn flush(ctx: &CudaContext, timeout: Duration) -> usize {
    flush_of(ctx.key(), timeout)
}

fn flush_of(key: usize, timeout: Duration) -> usize {
    let s = shared();
    let end = Instant::now() + timeout;
    let mut q = lock(&s.q);
    q.flushing += 1;
    s.work.notify_all();
    let r = loop {
        reap(&mut q);
        let n = count(&q, key);
        let now = Instant::now();
        if n == 0 || now >= end {
            break n;
        }
        let next =
            q.outstanding.iter().filter(|it| it.key() == key).map(|it| it.deadline).min().unwrap_or(end);
        let until = next.min(end).max(now + Duration::from_micros(1));
        q = s.done.wait_timeout(q, until - now).unwrap_or_else(|e| e.into_inner()).0;
    };
    q.flushing -= 1;
    r
}

/// The teardown thread of `generation`: takes everything queued, synchronises each context of
/// the batch once and runs the destroys of that context right after; sleeps while nothing is
/// queued.
fn serve(generation: u64) {
    let s = shared();
    loop {
        let batch = {
            let mut q = lock(&s.q);
            loop {
                if q.generation != generation {
                    return;
                }
                if !q.waiting.is_empty() {
                    break;
                }
                q = s.work.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            // Gather the drops of a burst (the mapping, import and semaphores of one frame or
            // one cycle) into one batch, unless a flush waits.
            let until = Instant::now() + GATHER;
            while q.flushing == 0 && q.generation == generation {
                let now = Instant::now();
                if now >= until {
                    break;
                }
                q = s.work.wait_timeout(q, until - now).unwrap_or_else(|e| e.into_inner()).0;
            }
            q.busy_until = q.waiting.iter().map(|it| it.deadline).min();
            std::mem::take(&mut q.waiting)
        };
        let mut rest: Vec<&Arc<Item>> = batch.iter().collect();
        while let Some(first) = rest.first() {
            let ctx = first.ctx.clone();
            let key = first.key();
            let synced = ctx.drain();
            if let Err(e) = &synced {
                log::warn!("context synchronise before a destroy failed: {e}");
            }
            for it in rest.iter().filter(|it| it.key() == key) {
                match (&synced, it.take()) {
                    (Ok(()), Some(destroy)) => {
                        INLINE.with(|c| c.set(Some(key)));
                        destroy();
                        INLINE.with(|c| c.set(None));
                        it.set_done();
                    }
                    (Err(_), Some(destroy)) => {
                        // A sticky context error: the work may never complete; nothing is
                        // destroyed under it.
                        log::error!("leaking what {} would destroy: its context failed", it.what);
                        std::mem::forget(destroy);
                        it.set_done();
                    }
                    (_, None) => {} // leaked past its deadline meanwhile
                }
            }
            rest.retain(|it| it.key() != key);
        }
        let mut q = lock(&s.q);
        if q.generation == generation {
            q.busy_until = None;
        }
        q.outstanding.retain(|it| !it.finished());
        drop(q);
        s.done.notify_all();
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
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A context whose synchronisation waits until the test opens its gate (or fails).
    #[derive(Default)]
    struct Fake {
        open: Mutex<bool>,
        opened: Condvar,
        fail: AtomicBool,
        syncs: AtomicUsize,
    }

    impl Drainable for Fake {
        fn key(&self) -> usize {
            self as *const Fake as usize
        }

        fn drain(&self) -> Result<(), String> {
            let mut g = lock(&self.open);
            while !*g {
                g = self.opened.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            self.syncs.fetch_add(1, Ordering::SeqCst);
            if self.fail.load(Ordering::SeqCst) {
                return Err("sticky error".into());
            }
            Ok(())
        }
    }

    impl Fake {
        fn new(open: bool) -> Arc<Fake> {
            let f = Arc::new(Fake::default());
            *lock(&f.open) = open;
            f
        }

        fn open(&self) {
            *lock(&self.open) = true;
            self.opened.notify_all();
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

    /// The queue is process-wide: these tests take turns so that one's held synchronisation does
    /// not share a batch with another's drops.
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        static S: Mutex<()> = Mutex::new(());
        lock(&S)
    }

    /// Queues a destroy that counts its runs and owns an `Owned`.
    fn queue(ctx: &Arc<Fake>, timeout: Duration, ran: &Arc<AtomicUsize>, dropped: &Arc<AtomicUsize>) {
        let (ran, owned) = (ran.clone(), Owned(dropped.clone()));
        enqueue(
            ctx.clone(),
            "test destroy",
            timeout,
            Box::new(move || {
                // A destroy takes a while: flushing must wait until it has returned.
                std::thread::sleep(Duration::from_millis(2));
                ran.fetch_add(1, Ordering::SeqCst);
                drop(owned);
            }),
        );
    }

    #[test]
    fn a_destroy_waits_for_the_synchronisation_and_a_burst_costs_one_more() {
        let _s = serial();
        let ctx = Fake::new(false);
        let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        queue(&ctx, LONG, &ran, &dropped);
        // The thread is held in the first synchronisation; a burst of drops queues behind it.
        for _ in 0..9 {
            queue(&ctx, LONG, &ran, &dropped);
        }
        assert_eq!(pending_of(ctx.key()), 10);
        assert_eq!(ran.load(Ordering::SeqCst), 0, "destroyed before the context was synchronised");
        ctx.open();
        assert_eq!(flush_of(ctx.key(), LONG), 0);
        assert_eq!((ran.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst)), (10, 10));
        // The first drop's synchronisation, then at most one for the burst queued meanwhile.
        let syncs = ctx.syncs.load(Ordering::SeqCst);
        assert!((1..=2).contains(&syncs), "{syncs} synchronisations for two batches");
    }

    #[test]
    fn an_object_released_by_a_destroy_is_destroyed_in_the_same_batch() {
        let _s = serial();
        let ctx = Fake::new(true);
        let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (inner_ctx, inner_ran, inner_dropped) = (ctx.clone(), ran.clone(), dropped.clone());
        let (outer_ran, outer_owned) = (ran.clone(), Owned(dropped.clone()));
        enqueue(
            ctx.clone(),
            "mapping",
            LONG,
            Box::new(move || {
                outer_ran.fetch_add(1, Ordering::SeqCst);
                drop(outer_owned);
                // Its import's last holder goes here: the import's destroy is queued from the
                // teardown thread.
                queue(&inner_ctx, LONG, &inner_ran, &inner_dropped);
            }),
        );
        assert_eq!(flush_of(ctx.key(), LONG), 0);
        assert_eq!((ran.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst)), (2, 2));
        assert_eq!(ctx.syncs.load(Ordering::SeqCst), 1, "the import waited for a second synchronisation");
    }

    #[test]
    fn past_its_deadline_a_destroy_is_leaked_and_other_contexts_are_still_served() {
        let _s = serial();
        let stuck = Fake::new(false);
        let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        queue(&stuck, Duration::from_millis(50), &ran, &dropped);
        // The synchronisation never returns within the bound: flushing gives up on the destroy
        // (leaked: it never ran and what it owns was not dropped).
        assert_eq!(flush_of(stuck.key(), LONG), 0);
        assert_eq!((ran.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst)), (0, 0));
        // Another context's drop is served by a thread that replaced the held one.
        let other = Fake::new(true);
        let (ran2, dropped2) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        queue(&other, LONG, &ran2, &dropped2);
        assert_eq!(flush_of(other.key(), LONG), 0);
        assert_eq!((ran2.load(Ordering::SeqCst), dropped2.load(Ordering::SeqCst)), (1, 1));
        // The held synchronisation returns at last: the leaked destroy stays leaked.
        stuck.open();
        assert_eq!(flush_of(stuck.key(), LONG), 0);
        assert_eq!((ran.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst)), (0, 0));
    }

    #[test]
    fn flushing_waits_for_a_destroy_in_progress() {
        let _s = serial();
        let ctx = Fake::new(true);
        let (started, finished) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (st, fin) = (started.clone(), finished.clone());
        enqueue(
            ctx.clone(),
            "slow destroy",
            LONG,
            Box::new(move || {
                st.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(50));
                fin.store(true, Ordering::SeqCst);
            }),
        );
        while !started.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // The destroy is running: what it frees is still alive, so it is still pending.
        assert_eq!(pending_of(ctx.key()), 1);
        assert_eq!(flush_of(ctx.key(), LONG), 0);
        assert!(finished.load(Ordering::SeqCst), "flush returned while the destroy was still running");
    }

    #[test]
    fn a_failed_synchronisation_leaks_instead_of_destroying() {
        let _s = serial();
        let ctx = Fake::new(true);
        ctx.fail.store(true, Ordering::SeqCst);
        let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        queue(&ctx, LONG, &ran, &dropped);
        assert_eq!(flush_of(ctx.key(), LONG), 0);
        assert_eq!((ran.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst)), (0, 0));
    }
}
