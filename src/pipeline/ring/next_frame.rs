//! [`Consumer::next_frame`]: a consumer's acquire as a future (feature `tokio`).
//!
//! No thread waits for the frame and nothing polls on a timer: the task is woken by what brings
//! the frame.
//!
//! * A consumer in this process (FIFO or mailbox) leaves its task's waker with the ring
//!   ([`super::wakers`]) when its queue is empty; the producer's present wakes it once it queued
//!   a frame for it.
//! * A consumer in another process ([`Consumer::connect_with`]) registers its endpoint's event
//!   descriptor (`NvSciIpcGetLinuxEventFd`; a duplicate of it, which the consumer keeps) with
//!   tokio's reactor at its first wait on a runtime, keeps that registration for its later
//!   calls on the same runtime, and reads the endpoint whenever it becomes readable; a mailbox
//!   consumer sends its request for a frame the same way, when the channel has room.
//!
//! The ring's timeout is kept by one tokio timer per consumer and runtime, armed only when the
//! first look finds no frame and reset from one wait to the next rather than made anew
//! ([`by_deadline`]).
//!
//! Then the consumer's engine waits for the frame's present fence, as
//! [`Consumer::acquire`] does, without blocking the executor: a CUDA consumer enqueues the wait
//! on its stream (no CPU wait at all); a CPU consumer first looks at the fence without waiting
//! (a CPU producer signals it before it sends or queues the frame, so it has expired already),
//! and only a fence that has not (another engine's: a CUDA producer's, or one given to
//! `present_after`) is waited for on tokio's blocking pool, up to the acquire's deadline.

use super::{deadline_after, ConsumerFrame, Inner};
use crate::error::{Error, IpcError, Result, UnsupportedReason, Wait};
use crate::pipeline::backend::ipc::Upstream;
use crate::pipeline::backend::Point;
use crate::pipeline::party::ConsumerEngine;
use crate::pipeline::state::FrameMeta;
use crate::pipeline::Consumer;
use std::future::Future;
use std::os::fd::OwnedFd;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::time::Sleep;

impl Consumer {
    /// [`acquire`](Self::acquire) as a future: the next frame offered to this consumer (a FIFO
    /// consumer's oldest, a mailbox consumer's newest), its present fence waited for by this
    /// consumer's engine. The frame is the same [`ConsumerFrame`], read and released the same
    /// way ([`cpu_read`](Self::cpu_read), [`release`](Self::release), ...).
    ///
    /// The task waits without a thread of its own: a consumer in this process is woken by the
    /// producer's present, one in another process ([`connect_with`](Self::connect_with)) by its
    /// endpoint's event descriptor, registered with tokio's reactor. A CPU consumer's present
    /// fence has expired by then unless another engine signals it (a CUDA producer, or
    /// [`Producer::present_after`](crate::pipeline::Producer::present_after)): such a fence is
    /// waited for on tokio's blocking pool, never on the executor's thread; a CUDA consumer
    /// enqueues the wait on its stream.
    ///
    /// Poll it on a tokio runtime with I/O and time enabled (`Builder::enable_all`), current-thread
    /// or multi-thread; outside any runtime it fails with [`Error::Unsupported`]
    /// ([`UnsupportedReason::NoTokioRuntime`]), and a runtime without the time or I/O driver
    /// makes tokio panic (a frame that is there at the first look needs no timer, so only a
    /// wait needs the time driver).
    ///
    /// The consumer keeps what it registers with a runtime for its next call there: one timer
    /// for the ring's timeout (armed only by a wait, and reset from one wait to the next, so
    /// that a wait does not file a timer into tokio's wheel and take it out again) and, in
    /// another process, its endpoint's event descriptor. A call on another runtime replaces
    /// them. Between waits the timer holds no waker of the task; if the consumer does not wait
    /// again before the last wait's deadline, the timer fires once into nothing.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire): no frame within the ring's timeout is [`Error::Timeout`]
    /// with [`Wait::Frame`], a present fence that does not expire by then
    /// [`Wait::PresentFence`]; a consumer in another process whose producer ended the stream
    /// gets [`RingError::Ended`](crate::RingError::Ended).
    ///
    /// # Cancellation
    ///
    /// Cancel-safe: dropping the future before it completes loses no frame. A frame it had taken
    /// from the queue while its present fence was still being waited for is put back first in
    /// line (or, in a mailbox that a newer frame reached meanwhile, handed back unread), as a
    /// failed [`acquire`](Self::acquire) puts it back, so the next `next_frame` or `acquire`
    /// gets it. Its waker goes with it: the ring's copy and the timer's (the timer is dropped
    /// then, and the next wait makes another; the event descriptor's registration stays with
    /// the consumer, for its next call on the same runtime). A mailbox
    /// consumer in another process that had asked for a frame gets the frame answering that
    /// request at its next call. A fence wait running on the blocking pool ends by itself when
    /// the fence expires or the deadline passes; what it holds (a reference to the ring, a CPU
    /// wait context) goes then.
    pub async fn next_frame(&mut self) -> Result<ConsumerFrame> {
        let runtime = match tokio::runtime::Handle::try_current() {
            Ok(h) => h.id(),
            Err(_) => return Err(no_runtime()),
        };
        // A frame that is there already completes the future at once: take a unit of the task's
        // budget, as tokio's own resources do, so that a consumer catching up yields to the
        // other tasks of its thread now and then.
        tokio::task::coop::consume_budget().await;
        let deadline = deadline_after(self.inner.config.timeout);
        let id = self.id;
        let inner = &self.inner;
        let kept = self.registrations.on(runtime);
        let timer = &mut kept.timer;
        let (index, meta) = match &inner.upstream {
            None => by_deadline(arrive_here(inner, id), timer, deadline, inner).await?,
            Some(up) => by_deadline(arrive_from(inner, up, id, &mut kept.fd), timer, deadline, inner).await?,
        };
        // Taken from the queue: until it is handed out, a drop of this future or a failed wait
        // puts it back.
        let mut taken = Taken { inner, consumer: id, slot: index, sequence: meta.sequence, armed: true };
        #[cfg(feature = "cuda")]
        let mut stream = None;
        let cpu_waited = match &mut self.engine {
            ConsumerEngine::Cpu(waiter) => {
                let waited = match waiter.wait(index, Point::Present, Duration::ZERO) {
                    Err(Error::Timeout { .. }) => wait_on_blocking_pool(inner, index, deadline).await,
                    looked => looked,
                };
                if let Err(e) = waited {
                    return Err(match e {
                        Error::Timeout { .. } => {
                            inner.timeout(Wait::PresentFence { slot: index, sequence: meta.sequence })
                        }
                        e => e,
                    });
                }
                true
            }
            #[cfg(feature = "cuda")]
            ConsumerEngine::Cuda(p) => {
                // Enqueued on the stream (nothing was enqueued if it fails: the frame goes back).
                p.wait(index, Point::Present, true)?;
                stream = Some(p.stream().clone());
                false
            }
        };
        taken.armed = false;
        inner.shared().st.delivered(id, meta.sequence);
        Ok(ConsumerFrame {
            inner: inner.clone(),
            index,
            meta,
            consumer: id,
            live: true,
            cpu_waited,
            #[cfg(feature = "cuda")]
            stream,
        })
    }
}

fn no_runtime() -> Error {
    Error::Unsupported { what: "Consumer::next_frame", reason: UnsupportedReason::NoTokioRuntime }
}

/// A frame taken from the consumer's queue and not yet handed out: dropped armed (the future
/// was dropped, or the engine's wait failed), it puts the frame back.
struct Taken<'a> {
    inner: &'a Inner,
    consumer: usize,
    slot: usize,
    sequence: u64,
    armed: bool,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.inner.untake(self.consumer, self.slot, self.sequence);
        }
    }
}

/// A consumer in this process: its next queued frame, once a present queued one.
async fn arrive_here(inner: &Inner, id: usize) -> Result<(usize, FrameMeta)> {
    let mut registered = Registered { inner, consumer: id, left: false };
    std::future::poll_fn(|cx| {
        let mut sh = inner.shared();
        let sh = &mut *sh;
        // Under the lock the present takes wakers under: no present falls in between. A waker
        // left at an earlier look is forgotten under the same hold when the frame is taken, so
        // that the guard has nothing left to do.
        match sh.wakers.take_or_register(&mut sh.st, id, cx.waker()) {
            Some(f) => {
                registered.left = false;
                Poll::Ready(Ok(f))
            }
            None => {
                registered.left = true;
                Poll::Pending
            }
        }
    })
    .await
}

/// A consumer's waker left with the ring, forgotten when its wait ends: at once when it
/// completes, by this guard's drop when the future is dropped while it waits (the only case
/// that takes the ring's lock again; a frame that was there at the first look takes it once).
struct Registered<'a> {
    inner: &'a Inner,
    consumer: usize,
    /// A waker may be left with the ring.
    left: bool,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if self.left {
            self.inner.shared().wakers.clear(self.consumer);
        }
    }
}

/// What a consumer keeps registered with one tokio runtime across its `next_frame` calls there:
/// its deadline timer and, in another process, its endpoint's event descriptor (a duplicate the
/// consumer owns) with the runtime's reactor. Made anew per wait, they would cost the timer
/// wheel's lock twice per wait that finds no frame (filing the timer and taking it out again)
/// and, for the descriptor, two `epoll_ctl` calls and tokio's bookkeeping per frame. A call on
/// another runtime replaces them (what the earlier runtime had goes, deregistered from it if it
/// still runs).
#[derive(Default)]
pub(crate) struct Registrations(Option<Kept>);

struct Kept {
    runtime: tokio::runtime::Id,
    /// Made at the first wait on this runtime that finds no frame at its first look.
    timer: Option<Pin<Box<Sleep>>>,
    /// A consumer in another process: made at its first call on this runtime.
    fd: Option<AsyncFd<OwnedFd>>,
}

impl Registrations {
    /// What is kept for `runtime` (nothing yet if the last call was on another runtime).
    fn on(&mut self, runtime: tokio::runtime::Id) -> &mut Kept {
        if self.0.as_ref().is_none_or(|k| k.runtime != runtime) {
            // Another runtime's (or none): that goes first.
            self.0 = None;
        }
        self.0.get_or_insert_with(|| Kept { runtime, timer: None, fd: None })
    }
}

/// `arrival`, which looks for the frame at each poll, given up at `deadline` with the frame
/// timeout.
///
/// One timer per consumer and runtime (`timer`) serves every wait. It is armed only once a look
/// found no frame (a frame that is there already touches no timer), by a `reset` rather than a
/// new timer: reset to a later deadline while it is still in tokio's timer wheel (as it is from
/// one frame to the next), it only records the new deadline (the wheel files the entry again
/// when its earlier time comes), where a new timer per wait would be filed into the wheel and
/// taken out again under the time driver's lock. A wait that ends with its arrival takes the
/// task's waker back out of the timer (a look at it with a no-op waker, no lock), so the timer
/// holds no reference to the task: if the consumer does not wait again before the deadline, it
/// fires once into nothing. A future dropped while the timer holds its waker drops the timer
/// (the next wait makes another).
async fn by_deadline<T>(
    arrival: impl Future<Output = Result<T>>,
    timer: &mut Option<Pin<Box<Sleep>>>,
    deadline: Instant,
    inner: &Inner,
) -> Result<T> {
    let mut arrival = pin!(arrival);
    let mut armed = Armed { timer, armed: false };
    std::future::poll_fn(|cx| {
        if let Poll::Ready(got) = arrival.as_mut().poll(cx) {
            armed.disarm();
            return Poll::Ready(got);
        }
        match armed.arm(deadline).poll(cx) {
            Poll::Ready(()) => {
                // Fired: the timer woke the task and holds no waker.
                armed.armed = false;
                Poll::Ready(Err(inner.timeout(Wait::Frame)))
            }
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// A consumer's timer during one wait. `armed`: reset to this wait's deadline, and holding the
/// waiting task's waker until the wait ends.
struct Armed<'a> {
    timer: &'a mut Option<Pin<Box<Sleep>>>,
    armed: bool,
}

impl Armed<'_> {
    /// The timer, set to `deadline` at the first call of this wait.
    fn arm(&mut self, deadline: Instant) -> Pin<&mut Sleep> {
        let deadline = tokio::time::Instant::from_std(deadline);
        let first = !std::mem::replace(&mut self.armed, true);
        match self.timer {
            Some(t) => {
                if first {
                    t.as_mut().reset(deadline);
                }
                t.as_mut()
            }
            // Filed into the wheel at its first poll.
            None => self.timer.insert(Box::pin(tokio::time::sleep_until(deadline))).as_mut(),
        }
    }

    /// The wait ended with its arrival, on the runtime of the timer (it is polling this wait):
    /// the task's waker is taken out of the timer, which stays filed.
    fn disarm(&mut self) {
        if !std::mem::replace(&mut self.armed, false) {
            return;
        }
        if let Some(t) = self.timer {
            // Unconstrained: with the task's budget spent, a timer's poll would return at once
            // without taking the no-op waker in.
            let mut look = pin!(tokio::task::unconstrained(t.as_mut()));
            let _ = look.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        }
    }
}

impl Drop for Armed<'_> {
    /// Dropped while waiting (the future was dropped): the timer goes with the task's waker.
    /// Not a look as in `disarm`: the timer's runtime may have shut down by now, and a look
    /// would panic then; a drop takes the wheel's lock once, and works on a runtime shut down.
    fn drop(&mut self) {
        if self.armed {
            *self.timer = None;
        }
    }
}

/// A consumer in another process: the next frame from the producer's process, read whenever
/// the endpoint's event descriptor is readable.
///
/// The registration in `kept` outlives each call, and readiness that tokio saw carries over
/// to the next. Readiness is cleared only after a look that found the endpoint empty
/// (`receive` reads it until there is nothing) and only if no event came since that readiness
/// was taken, so the edge-triggered registration misses no frame: one that arrives during or
/// after a look is an event that sets it again.
async fn arrive_from(
    inner: &Inner,
    up: &Upstream,
    id: usize,
    kept: &mut Option<AsyncFd<OwnedFd>>,
) -> Result<(usize, FrameMeta)> {
    let registration_failed = |e: std::io::Error| {
        Error::Ipc(IpcError::Endpoint {
            endpoint: up.ep.name().to_owned(),
            reason: format!("its event descriptor could not be registered with tokio: {e}"),
            code: None,
        })
    };
    let fd = match kept {
        Some(fd) => &*fd,
        None => {
            // The endpoint's descriptor registered with this runtime. A duplicate (nvsciipc.h,
            // NvSciIpcGetLinuxEventFd: "Returns the NvSciIpc file descriptor for a given
            // endpoint"; one open file, so its readiness is the endpoint's): owned by the
            // consumer, it is closed with it, before the ring and its endpoint.
            let dup = up.ep.event_fd().try_clone_to_owned().map_err(registration_failed)?;
            // SAFETY: `register_with_interest` needs the descriptor open, and the same, for as
            // long as the registration lives: it is the `OwnedFd` the `AsyncFd` owns, closed
            // only when that drops, and `OwnedFd::as_raw_fd` always returns it.
            let fd = unsafe { AsyncFd::register_with_interest(dup, Interest::READABLE) }
                .map_err(|e| registration_failed(e.into()))?;
            &*kept.insert(fd)
        }
    };
    // The readiness tokio holds now (left by an earlier call, say), taken without waiting
    // (nor leaving a waker) before the first look: a look that finds nothing clears it, so the
    // wait below is for the next event, not a second look at an empty endpoint.
    let before = match fd.poll_read_ready(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(Ok(guard)) => Some(guard),
        _ => None,
    };
    if let Some(f) = try_take_upstream(inner, up, id)? {
        return Ok(f);
    }
    if let Some(mut guard) = before {
        guard.clear_ready();
    }
    loop {
        let mut ready = fd.readable().await.map_err(|_| no_runtime())?;
        match try_take_upstream(inner, up, id)? {
            Some(f) => return Ok(f),
            // Only readiness from before this look is cleared: an event since keeps it set.
            None => ready.clear_ready(),
        }
    }
}

/// A consumer in another process takes its next frame without waiting: one queued already, or
/// one the endpoint holds (a mailbox consumer asks for one first, once, when the channel has
/// room). `None`: nothing there yet.
fn try_take_upstream(inner: &Inner, up: &Upstream, id: usize) -> Result<Option<(usize, FrameMeta)>> {
    let take = || {
        inner
            .shared()
            .st
            .consumer_take(id)
            .ok_or_else(|| up.protocol_error("a frame that could not be queued".into()))
            .map(Some)
    };
    if let Some(f) = inner.shared().st.consumer_take(id) {
        return Ok(Some(f));
    }
    let nothing = |e: &Error| matches!(e, Error::Timeout { waited_for: Wait::Frame, .. });
    if up.mailbox && !up.asked.load(std::sync::atomic::Ordering::Acquire) {
        // What is there already first (the end of the stream, say, after which the channel may
        // have no room for a request), as `acquire` does.
        match inner.receive(up, Instant::now()) {
            Ok(()) => return take(),
            Err(e) if nothing(&e) => {}
            Err(e) => return Err(e),
        }
        match up.ask(Duration::ZERO) {
            // Not sent (the channel is full): asked again at the next wake-up, which the
            // channel's room reports on the event descriptor too.
            Ok(()) | Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. }) => {}
            Err(e) => return Err(e),
        }
    }
    match inner.receive(up, Instant::now()) {
        Ok(()) => take(),
        Err(e) if nothing(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Waits on tokio's blocking pool, until `deadline`, for the present fence of `slot`, which
/// another engine signals (a zero-time look found it pending).
async fn wait_on_blocking_pool(inner: &Arc<Inner>, slot: usize, deadline: Instant) -> Result<()> {
    let ring = inner.clone();
    let left = deadline.saturating_duration_since(Instant::now());
    let wait = tokio::task::spawn_blocking(move || ring.waiter()?.wait(slot, Point::Present, left));
    match wait.await {
        Ok(waited) => waited,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Cancelled: the runtime is shutting down.
        Err(_) => Err(no_runtime()),
    }
}
