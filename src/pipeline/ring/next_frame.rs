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
//! The ring's timeout is not a tokio timer: a wait leaves its deadline and waker in its
//! consumer's entry of the process's deadline watcher ([`super::deadlines`]), which wakes the task
//! only if the deadline passes ([`by_deadline`]). A pending tokio timer would cost every wake-up of
//! the task, not only the rare one that times out.
//!
//! Then the consumer's engine waits for the frame's present fence, as
//! [`Consumer::acquire`] does, without blocking the executor: a CUDA consumer enqueues the wait
//! on its stream (no CPU wait at all); a CPU consumer first looks at the fence without waiting
//! (a CPU producer signals it before it sends or queues the frame, so it has expired already),
//! and only a fence that has not (another engine's: a CUDA producer's, or one given to
//! `present_after`) is waited for on tokio's blocking pool, up to the acquire's deadline.

use super::deadlines::Deadline;
use super::{deadline_after, ConsumerFrame, Inner};
use crate::error::{Error, IpcError, Result, RingError, UnsupportedReason, Wait};
use crate::pipeline::backend::ipc::Upstream;
use crate::pipeline::backend::Point;
use crate::pipeline::party::ConsumerEngine;
use crate::pipeline::state::FrameMeta;
use crate::pipeline::Consumer;
use std::future::Future;
use std::os::fd::OwnedFd;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

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
    /// Poll it on a tokio runtime, current-thread or multi-thread; outside any runtime it fails
    /// with [`Error::Unsupported`] ([`UnsupportedReason::NoTokioRuntime`]). A consumer in this
    /// process needs no driver of the runtime; one in another process needs the I/O driver
    /// (`Builder::enable_io` or `enable_all`; without it tokio panics). The time driver is not
    /// used. A thread that only consumes from this process is woken more cheaply on a runtime
    /// without drivers, which parks on a condition variable as a blocking
    /// [`acquire`](Self::acquire) does, than on one with the I/O driver, which parks in its
    /// reactor (BENCHMARKS.md: about 1.14x of `acquire`'s CPU time per frame against 1.22x).
    ///
    /// The ring's timeout is kept by one thread per process (`nvsci-deadlines`, started at the
    /// first wait of any consumer, ended once no consumer that waited is left), not by a tokio
    /// timer: a wait stores its deadline and its task's waker in the consumer's entry there, and
    /// the thread wakes the task only if the deadline passes. A wait that ends in time costs no
    /// system call and no lock shared with other consumers, and the runtime parks with no timer
    /// pending. Between waits the entry holds no waker of the task. A consumer in another process
    /// also keeps its endpoint's event descriptor registered with the runtime of its last call,
    /// for its next call there (a call on another runtime registers it there instead).
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
    /// gets it. Its waker goes with it: the ring's copy and the deadline's (the event
    /// descriptor's registration stays with the consumer, for its next call on the same
    /// runtime). A mailbox
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
        let Registrations { deadline: entry, fd } = &mut self.registrations;
        let (index, meta) = match &inner.upstream {
            None => by_deadline(arrive_here(inner, id), entry, deadline, inner).await?,
            Some(up) => {
                by_deadline(arrive_from(inner, up, id, fd.on(runtime)), entry, deadline, inner).await?
            }
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

/// What a consumer keeps across its `next_frame` calls: its entry with the deadline watcher
/// (made at its first wait) and, in another process, its endpoint's event descriptor (a
/// duplicate the consumer owns) registered with a runtime's reactor. Made anew per wait, the
/// descriptor's registration would cost two `epoll_ctl` calls and tokio's bookkeeping per frame.
#[derive(Default)]
pub(crate) struct Registrations {
    deadline: Option<Deadline>,
    fd: KeptFd,
}

/// The event descriptor registered with one runtime; a call on another runtime replaces it
/// (deregistered from the earlier runtime if that still runs).
#[derive(Default)]
struct KeptFd(Option<(tokio::runtime::Id, Option<AsyncFd<OwnedFd>>)>);

impl KeptFd {
    /// The registration kept for `runtime` (none yet if the last call was on another runtime).
    fn on(&mut self, runtime: tokio::runtime::Id) -> &mut Option<AsyncFd<OwnedFd>> {
        if self.0.as_ref().is_none_or(|(r, _)| *r != runtime) {
            // Another runtime's (or none): that goes first.
            self.0 = None;
        }
        &mut self.0.get_or_insert((runtime, None)).1
    }
}

/// `arrival`, which looks for the frame at each poll, given up at `deadline` with the frame
/// timeout.
///
/// A frame there at the first look touches no deadline. Otherwise each poll that finds no frame
/// with the deadline still ahead leaves the deadline and the task's waker in the consumer's
/// entry with the deadline watcher (`entry`, made when the consumer's first look finds no
/// frame); the watcher
/// wakes the task once the deadline passes, and the next poll sees that it has. A wait that
/// ends (or whose future is dropped) takes the waker back out.
async fn by_deadline<T>(
    arrival: impl Future<Output = Result<T>>,
    entry: &mut Option<Deadline>,
    deadline: Instant,
    inner: &Inner,
) -> Result<T> {
    let mut arrival = pin!(arrival);
    let entry: &Deadline = match entry {
        Some(d) => d,
        None => {
            // The consumer's first wait, perhaps: its entry (and, for the process's first, the
            // watcher thread) made only if the frame is not there at the first look.
            let first = std::future::poll_fn(|cx| match arrival.as_mut().poll(cx) {
                Poll::Ready(got) => Poll::Ready(Some(got)),
                Poll::Pending => Poll::Ready(None),
            })
            .await;
            if let Some(got) = first {
                return got;
            }
            let made = Deadline::new().map_err(|e| {
                Error::Ring(RingError::NoThread { thread: "deadline watcher", reason: e.to_string() })
            })?;
            entry.insert(made)
        }
    };
    let mut armed = Armed { entry, armed: false };
    std::future::poll_fn(|cx| {
        if let Poll::Ready(got) = arrival.as_mut().poll(cx) {
            armed.disarm();
            return Poll::Ready(got);
        }
        if Instant::now() >= deadline {
            armed.disarm();
            return Poll::Ready(Err(inner.timeout(Wait::Frame)));
        }
        armed.armed = true;
        entry.arm(deadline, cx.waker());
        Poll::Pending
    })
    .await
}

/// A consumer's deadline entry during one wait; `armed`: it holds this wait's deadline and the
/// task's waker, taken back when the wait ends or its future is dropped.
struct Armed<'a> {
    entry: &'a Deadline,
    armed: bool,
}

impl Armed<'_> {
    fn disarm(&mut self) {
        if std::mem::replace(&mut self.armed, false) {
            self.entry.disarm();
        }
    }
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        self.disarm();
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
