//! Deferred destruction of driver objects, after the work that used them and nothing else.
//!
//! Every object that stands for imported memory, a mapping of it, an imported semaphore or a
//! page-locked host range keeps a [`Uses`]: each time this crate enqueues work that touches it
//! on a stream, an event (one per stream, re-recorded) marks that stream's last use. When the
//! object is dropped, its driver destroy call and everything it keeps alive go to a queue served
//! by one long-lived thread (`nvsci-cuda-teardown`), which runs the destroy once those events
//! have completed. `Drop` only enqueues: it never waits, whatever other streams of the context
//! are doing.
//!
//! The driver's destroy and free calls themselves wait for the work in flight on the whole device
//! (measured on an H100 with driver 580: `cuMemFree` of a mapping does not return while another
//! stream of the context is blocked). So before it calls one, the queue also waits, on a second
//! long-lived thread (`nvsci-cuda-drain`), for a context synchronisation (one answers every
//! request queued before it started): a destroy therefore completes once the device has finished
//! the work queued before the drop, and a stream that never finishes costs a leak after the
//! bound instead of a teardown thread stuck in the driver. `Drop` waits for none of it.
//!
//! Work the crate cannot see (a kernel the application launches with a raw device address, e.g.
//! from [`MappedBuffer::device_address`](super::MappedBuffer::device_address)) is covered in two
//! ways: naming the stream after enqueueing ([`MappedBuffer::used_on`](super::MappedBuffer::used_on))
//! records it like the crate's own work; handing out an address any other way
//! ([`MappedBuffer::device_address`](super::MappedBuffer::device_address), cudarc's `DevicePtr` /
//! `DevicePtrMut`) marks the object as used by unknown streams; the context synchronisation above
//! covers such work too.
//!
//! The wait is bounded by [`DESTROY_TIMEOUT`](super::DESTROY_TIMEOUT): a stream may wait on a
//! fence that never expires. Past it, the object and what it keeps alive are leaked (logged),
//! never freed under the driver. [`CudaGpu::flush_teardown`](super::CudaGpu::flush_teardown)
//! waits until the queue holds nothing more of a context (for example before the context itself
//! is torn down).

use super::device::DESTROY_TIMEOUT;
use cudarc::driver::{sys, CudaContext};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Streams whose last use is tracked per object; an object used on more streams falls back to
/// a context synchronisation.
pub(crate) const MAX_STREAMS: usize = 8;

#[derive(Clone, Copy)]
struct Slot {
    stream: sys::CUstream,
    event: sys::CUevent,
}

const EMPTY: Slot = Slot { stream: core::ptr::null_mut(), event: core::ptr::null_mut() };

/// The last use of an object on each stream the crate enqueued work on for it.
pub(crate) struct Uses {
    slots: Mutex<([Slot; MAX_STREAMS], usize)>,
    /// Used by work the crate cannot see (a raw device address was handed out), or on more
    /// streams than there are slots, or an event could not be recorded.
    unknown: AtomicBool,
}

// SAFETY: the handles are plain driver handles, usable from any thread that binds their context;
// the slots are only touched under the mutex.
unsafe impl Send for Uses {}
// SAFETY: as above.
unsafe impl Sync for Uses {}

impl Default for Uses {
    fn default() -> Self {
        Self { slots: Mutex::new(([EMPTY; MAX_STREAMS], 0)), unknown: AtomicBool::new(false) }
    }
}

impl Uses {
    /// Records that work touching the object was just enqueued on `stream` (the object's
    /// context must be bound). Allocates nothing once the stream has a slot.
    pub(crate) fn note(&self, stream: sys::CUstream) {
        let mut g = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let (slots, n) = &mut *g;
        let i = match slots[..*n].iter().position(|s| s.stream == stream) {
            Some(i) => i,
            None if *n < MAX_STREAMS => {
                let mut ev = core::ptr::null_mut();
                let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
                // SAFETY: valid out-pointer; the context is bound by the caller.
                if unsafe { sys::cuEventCreate(&mut ev, flags) } != sys::CUresult::CUDA_SUCCESS {
                    self.unknown.store(true, Ordering::Release);
                    return;
                }
                slots[*n] = Slot { stream, event: ev };
                *n += 1;
                *n - 1
            }
            None => {
                self.unknown.store(true, Ordering::Release);
                return;
            }
        };
        // SAFETY: the event is alive (owned by this set) and the stream is the caller's live
        // stream of the bound context.
        if unsafe { sys::cuEventRecord(slots[i].event, stream) } != sys::CUresult::CUDA_SUCCESS {
            self.unknown.store(true, Ordering::Release);
        }
    }

    /// [`note`](Self::note) for a cudarc stream of `dev`'s context (binding it first); a stream
    /// of another context, or a context that cannot be bound, counts as an unknown use.
    pub(crate) fn note_stream(&self, dev: &super::CudaGpu, stream: &cudarc::driver::CudaStream) {
        if !dev.owns_stream(stream) || dev.bind().is_err() {
            self.note_unknown();
            return;
        }
        self.note(stream.cu_stream());
    }

    /// Marks the object as used by work the crate cannot see.
    pub(crate) fn note_unknown(&self) {
        self.unknown.store(true, Ordering::Release);
    }

    /// Moves the events out (the queue destroys them after the object).
    fn take(&self) -> Pending {
        let mut g = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let (slots, n) = &mut *g;
        let mut events = [core::ptr::null_mut(); MAX_STREAMS];
        for (e, s) in events.iter_mut().zip(slots[..*n].iter()) {
            *e = s.event;
        }
        let p = Pending { events, n: *n, owned: true, unknown: self.unknown.load(Ordering::Acquire) };
        *n = 0;
        p
    }

    /// The events as they are now, still owned by this set (for a mapping dropped before the
    /// import it maps: the import outlives the mapping's destroy, so its events do too).
    fn snapshot(&self) -> Pending {
        let g = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let (slots, n) = &*g;
        let mut events = [core::ptr::null_mut(); MAX_STREAMS];
        for (e, s) in events.iter_mut().zip(slots[..*n].iter()) {
            *e = s.event;
        }
        Pending { events, n: *n, owned: false, unknown: self.unknown.load(Ordering::Acquire) }
    }
}

/// What a queued destroy waits for.
struct Pending {
    events: [sys::CUevent; MAX_STREAMS],
    n: usize,
    /// Whether the queue destroys the events once done.
    owned: bool,
    unknown: bool,
}

/// Whose uses a destroy waits for.
pub(crate) enum After<'a> {
    /// The object's own uses; the events go with it.
    Own(&'a Uses),
    /// The uses of an object that outlives this destroy (a mapping's import).
    Borrowed(&'a Uses),
}

type Destroy = Box<dyn FnOnce() + Send>;

struct Item {
    ctx: Arc<CudaContext>,
    what: &'static str,
    pending: Pending,
    /// Set to 1 (done) or 2 (failed) by the drain thread once the context was synchronised.
    drain: Option<Arc<AtomicU8>>,
    deadline: Instant,
    destroy: Destroy,
}

// SAFETY: the event handles are plain driver handles; the rest is Send.
unsafe impl Send for Item {}

enum Ready {
    Yes,
    NotYet,
}

impl Item {
    fn ready(&self) -> Ready {
        if let Some(d) = &self.drain {
            if d.load(Ordering::Acquire) == 0 {
                return Ready::NotYet;
            }
        }
        for &ev in &self.pending.events[..self.pending.n] {
            // SAFETY: the event is alive (destroyed by this queue or by the import's destroy,
            // which is queued after this one).
            match unsafe { sys::cuEventQuery(ev) } {
                sys::CUresult::CUDA_SUCCESS => {}
                sys::CUresult::CUDA_ERROR_NOT_READY => return Ready::NotYet,
                r => log::warn!("cuEventQuery before {} answered {r:?}; treating it as complete", self.what),
            }
        }
        Ready::Yes
    }

    fn free_events(&self) {
        if !self.pending.owned {
            return;
        }
        for &ev in &self.pending.events[..self.pending.n] {
            // SAFETY: owned by this item, destroyed once (the driver releases an event whose
            // work is still pending once it completes).
            unsafe { sys::cuEventDestroy_v2(ev) };
        }
    }
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

/// Queues `destroy` to run on the teardown thread once the uses in `after` completed (bounded by
/// `DESTROY_TIMEOUT`; past it `destroy` and all it owns are leaked). Never blocks.
pub(crate) fn destroy_after(
    ctx: &Arc<CudaContext>,
    after: After<'_>,
    what: &'static str,
    destroy: impl FnOnce() + Send + 'static,
) {
    let pending = match after {
        After::Own(u) => u.take(),
        After::Borrowed(u) => u.snapshot(),
    };
    let destroy: Destroy = Box::new(destroy);
    if !started() {
        log::error!("no teardown thread could be started; leaking what {what} would destroy");
        std::mem::forget(destroy);
        return;
    }
    // Every destroy also waits for a context synchronisation: the driver's destroy and free
    // calls themselves wait for the work in flight on the whole device (measured on an H100: the
    // free of a mapping does not return while another stream of the context is blocked), so
    // calling one while unrelated work may never finish would block this queue for good. The
    // synchronisation runs on the drain thread, where it is bounded like every other wait here.
    let drain = match request_drain(ctx) {
        Some(f) => Some(f),
        None => {
            log::error!("no drain thread could be started; leaking what {what} would destroy");
            std::mem::forget(destroy);
            return;
        }
    };
    let item =
        Item { ctx: ctx.clone(), what, pending, drain, deadline: Instant::now() + DESTROY_TIMEOUT, destroy };
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

/// The teardown thread: runs each queued destroy once its uses completed, leaks it past its
/// deadline. Polls queued items with a short, growing pause; sleeps while the queue is empty.
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
            let it = &mine[i];
            if it.ctx.bind_to_thread().is_err() {
                log::warn!("cannot bind the CUDA context before {}; retrying", it.what);
            }
            let outcome = match it.ready() {
                Ready::Yes => Some(true),
                Ready::NotYet if Instant::now() >= it.deadline => Some(false),
                Ready::NotYet => None,
            };
            match outcome {
                None => i += 1,
                Some(ok) => {
                    let it = mine.swap_remove(i);
                    finished.push(it.ctx.cu_ctx() as usize);
                    if ok {
                        log::trace!(
                            "{} after {} stream events{}",
                            it.what,
                            it.pending.n,
                            if it.pending.unknown {
                                " and uses on streams the crate does not know"
                            } else {
                                ""
                            }
                        );
                        it.free_events();
                        (it.destroy)();
                    } else {
                        log::error!(
                            "work using what {} would destroy did not finish within {DESTROY_TIMEOUT:?} (a stream \
                             waits on a fence that never expired?); leaking it",
                            it.what
                        );
                        it.free_events();
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
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }
}

/// Logs a failed destroy call; true when it succeeded.
pub(crate) fn succeeded(what: &'static str, r: sys::CUresult) -> bool {
    if r != sys::CUresult::CUDA_SUCCESS {
        log::warn!("{what} failed: {r:?}");
        return false;
    }
    true
}
