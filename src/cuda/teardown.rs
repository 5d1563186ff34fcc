//! Deferred destruction of driver objects, off the dropping thread.
//!
//! When an import, a mapping, an imported semaphore or a page-locked host range is dropped, its
//! driver destroy call and everything it keeps alive go to a queue served by one long-lived
//! thread (`nvsci-cuda-teardown`). `Drop` only enqueues: it never waits, whatever the context's
//! streams are doing.
//!
//! The queue runs a destroy once a synchronisation of the object's context, started after the
//! drop, has returned: by then no work queued before the drop (on any stream of the context, the
//! crate's or the application's, with a raw device address or not) can still use the object.
//! The synchronisations run on a second long-lived thread (`nvsci-cuda-drain`); one answers every
//! request queued before it started, so a burst of drops costs one. Waiting for the streams that
//! used the object alone would not be shorter: the driver's destroy and free calls themselves wait
//! for the work in flight on the whole device (measured on an H100, driver 580: `cuMemFree` of a
//! mapping does not return while another stream of the context is blocked). Waiting for them on
//! the drain thread keeps the teardown thread out of the driver while the device is busy.
//!
//! The wait is bounded by [`DESTROY_TIMEOUT`](super::DESTROY_TIMEOUT): a stream may wait on a
//! fence that never expires. Past it, the object and what it keeps alive are leaked (logged),
//! never freed under the driver. [`CudaGpu::flush_teardown`](super::CudaGpu::flush_teardown)
//! waits until the queue holds nothing more of a context (for example before the context itself
//! is torn down, or before counting leaks).

use cudarc::driver::CudaContext;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a dropped import, mapping or semaphore waits for the work that used it before it is
/// leaked instead of destroyed (a stream may wait on a fence that never expires).
pub const DESTROY_TIMEOUT: Duration = Duration::from_secs(10);

type Destroy = Box<dyn FnOnce() + Send>;

struct Item {
    ctx: Arc<CudaContext>,
    what: &'static str,
    /// Set to 1 (done) or 2 (failed) by the drain thread once the context was synchronised.
    drain: Arc<AtomicU8>,
    deadline: Instant,
    destroy: Destroy,
}

struct Queue {
    items: Vec<Item>,
    /// Queued or in progress per context: (context, count).
    per_ctx: Vec<(usize, usize)>,
}

/// A context to synchronise and the flag that reports the outcome.
type DrainRequest = (Arc<CudaContext>, Arc<AtomicU8>);

struct Shared {
    q: Mutex<Queue>,
    /// New items.
    work: Condvar,
    /// Items finished.
    done: Condvar,
    drain: Mutex<Option<Sender<DrainRequest>>>,
}

fn shared() -> &'static Shared {
    static S: OnceLock<Shared> = OnceLock::new();
    S.get_or_init(|| Shared {
        q: Mutex::new(Queue { items: Vec::new(), per_ctx: Vec::new() }),
        work: Condvar::new(),
        done: Condvar::new(),
        drain: Mutex::new(None),
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the teardown thread once per process; false when it cannot be started.
fn started() -> bool {
    static STARTED: OnceLock<bool> = OnceLock::new();
    *STARTED
        .get_or_init(|| std::thread::Builder::new().name("nvsci-cuda-teardown".into()).spawn(serve).is_ok())
}

/// Asks the drain thread (started once) to synchronise `ctx`; the flag turns 1 (done) or 2.
fn request_drain(ctx: &Arc<CudaContext>) -> Option<Arc<AtomicU8>> {
    let s = shared();
    let mut g = lock(&s.drain);
    if g.is_none() {
        let (tx, rx) = std::sync::mpsc::channel::<DrainRequest>();
        let spawned = std::thread::Builder::new().name("nvsci-cuda-drain".into()).spawn(move || {
            // Requests that arrive while a synchronisation runs are answered by the next one, once
            // per context: a synchronisation started after a request covers everything queued
            // before it.
            while let Ok(first) = rx.recv() {
                let mut batch = vec![first];
                batch.extend(rx.try_iter());
                while let Some((ctx, _)) = batch.first() {
                    let ctx = ctx.clone();
                    let r = ctx.bind_to_thread().and_then(|_| ctx.synchronize());
                    if let Err(e) = &r {
                        log::warn!("context synchronise before a destroy failed: {e}");
                    }
                    let key = ctx.cu_ctx();
                    batch.retain(|(c, flag)| {
                        if c.cu_ctx() != key {
                            return true;
                        }
                        flag.store(if r.is_ok() { 1 } else { 2 }, Ordering::Release);
                        false
                    });
                }
                let s = shared();
                drop(lock(&s.q)); // the teardown thread is waiting on `work` or checking flags
                s.work.notify_one();
            }
        });
        if spawned.is_err() {
            return None;
        }
        *g = Some(tx);
    }
    let flag = Arc::new(AtomicU8::new(0));
    g.as_ref()?.send((ctx.clone(), flag.clone())).ok()?;
    Some(flag)
}

/// Queues `destroy` to run on the teardown thread once a synchronisation of `ctx` started after
/// this call has returned (bounded by `DESTROY_TIMEOUT`; past it `destroy` and all it owns are
/// leaked). Never blocks.
pub(crate) fn destroy_after_work(
    ctx: &Arc<CudaContext>,
    what: &'static str,
    destroy: impl FnOnce() + Send + 'static,
) {
    let destroy: Destroy = Box::new(destroy);
    if !started() {
        log::error!("no teardown thread could be started; leaking what {what} would destroy");
        std::mem::forget(destroy);
        return;
    }
    let Some(drain) = request_drain(ctx) else {
        log::error!("no drain thread could be started; leaking what {what} would destroy");
        std::mem::forget(destroy);
        return;
    };
    let item = Item { ctx: ctx.clone(), what, drain, deadline: Instant::now() + DESTROY_TIMEOUT, destroy };
    let s = shared();
    let mut q = lock(&s.q);
    let key = ctx.cu_ctx() as usize;
    match q.per_ctx.iter_mut().find(|e| e.0 == key) {
        Some(e) => e.1 += 1,
        None => q.per_ctx.push((key, 1)),
    }
    q.items.push(item);
    drop(q);
    s.work.notify_one();
}

/// Destroys queued for `ctx` and not yet run.
pub(crate) fn pending(ctx: &CudaContext) -> usize {
    let key = ctx.cu_ctx() as usize;
    lock(&shared().q).per_ctx.iter().find(|e| e.0 == key).map_or(0, |e| e.1)
}

/// Waits until nothing of `ctx` is queued, at most `timeout`; returns what is still queued.
pub(crate) fn flush(ctx: &CudaContext, timeout: Duration) -> usize {
    let key = ctx.cu_ctx() as usize;
    let s = shared();
    let end = Instant::now() + timeout;
    let mut q = lock(&s.q);
    loop {
        let n = q.per_ctx.iter().find(|e| e.0 == key).map_or(0, |e| e.1);
        let now = Instant::now();
        if n == 0 || now >= end {
            return n;
        }
        q = s.done.wait_timeout(q, end - now).unwrap_or_else(|e| e.into_inner()).0;
    }
}

/// The teardown thread: runs each queued destroy once its context synchronisation returned, leaks
/// it past its deadline. Sleeps while the queue is empty.
fn serve() {
    let s = shared();
    let mut mine: Vec<Item> = Vec::new();
    let mut pause = Duration::from_micros(20);
    loop {
        {
            let mut q = lock(&s.q);
            while mine.is_empty() && q.items.is_empty() {
                q = s.work.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            if !q.items.is_empty() {
                mine.append(&mut q.items);
                pause = Duration::from_micros(20);
            }
        }
        let mut finished: Vec<usize> = Vec::new();
        let mut i = 0;
        while i < mine.len() {
            let outcome = match mine[i].drain.load(Ordering::Acquire) {
                0 if Instant::now() >= mine[i].deadline => Some(false),
                0 => None,
                1 => Some(true),
                _ => {
                    // The synchronisation failed (a sticky context error): the work may never
                    // complete; nothing is destroyed under it.
                    Some(false)
                }
            };
            match outcome {
                None => i += 1,
                Some(ok) => {
                    let it = mine.swap_remove(i);
                    finished.push(it.ctx.cu_ctx() as usize);
                    if ok {
                        if it.ctx.bind_to_thread().is_err() {
                            log::warn!("cannot bind the CUDA context before {}", it.what);
                        }
                        (it.destroy)();
                    } else {
                        log::error!(
                            "the work queued before {} was dropped did not finish within {DESTROY_TIMEOUT:?} (a \
                             stream waits on a fence that never expired?); leaking it",
                            it.what
                        );
                        std::mem::forget(it.destroy);
                    }
                }
            }
        }
        if !finished.is_empty() {
            let mut q = lock(&s.q);
            for key in finished {
                if let Some(e) = q.per_ctx.iter_mut().find(|e| e.0 == key) {
                    e.1 -= 1;
                }
            }
            q.per_ctx.retain(|e| e.1 > 0);
            drop(q);
            s.done.notify_all();
        }
        if !mine.is_empty() {
            // The drain thread notifies `work` once a synchronisation returned; the timeout only
            // bounds a missed notification.
            let q = lock(&s.q);
            if q.items.is_empty() {
                drop(s.work.wait_timeout(q, pause).unwrap_or_else(|e| e.into_inner()));
            }
            pause = (pause * 2).min(Duration::from_millis(1));
        }
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
