//! The frame ring: one producer, consumers that come and go, every hand-off carried by a fence.
//!
//! NvSciStream-packet style, on every backend and for every party: the producer acquires a free
//! slot, its engine writes the frame and it presents the frame with its engine's fence and its
//! metadata (sequence, capture time, user header); each attached consumer is offered the frame
//! as its queue mode and limit say ([`QueueMode`]), acquires it, its engine waits for that
//! fence, works, and the consumer releases the frame with its own engine's fence; the producer
//! reuses a slot only after every release fence of it expired. Who holds what lives in one
//! state machine ([`super::state`]); this file turns its answers into fence waits and signals.
//!
//! Each party's engine is chosen when the ring is built ([`Engine`]) and [`split`](FrameRing::split):
//! [`Producer::acquire`] / [`Producer::present`] and [`Consumer::acquire`] /
//! [`Consumer::release`] wait and signal on that engine. A CPU party waits on the CPU and
//! signals at once; a CUDA party enqueues its waits and signals on its stream
//! ([`Producer::set_stream`]) and never blocks the CPU on a fence. The convenience closures
//! [`Producer::produce`] and [`Consumer::process`] are built on the same tokens.
//!
//! Frame tokens cannot jam the ring: a dropped [`ProducerFrame`] is discarded (the next acquire
//! hands out the same sequence again) and a dropped [`ConsumerFrame`] is released once its
//! present fence expired (waited on the CPU, up to the ring's timeout, and after the work its
//! CUDA party queued). A dropped [`Consumer`] detaches: its queued frames go back at once, and
//! its seat can be attached again ([`Attacher`]). Every ring has an identity that is never
//! reused, so a token is refused by any other ring. Steady-state frames allocate nothing in the
//! crate: bookkeeping lives in fixed-capacity containers, the backend replaces fences in place,
//! and the messages to and from consumers in other processes are built and read in stack
//! buffers (what the NvSci library does to export and import a fence is its own).
//!
//! Consumers in other processes are served from `links` (their frames sent, their releases,
//! requests and departures taken, the lost ones dropped) and `seats` (one thread per seat that
//! reads what its consumer sends while the producer is busy elsewhere, and attaches the next
//! consumer to a vacant seat while the stream runs).

use super::backend::ipc::{AttachHub, RemoteConsumer, RemoteSeat, Upstream};
use super::backend::{no_nvsci_objects, CpuWaiter, FrameRead, FrameWrite, NvSciObjects, Point, RingBackend};
use super::config::{RingConfig, MAX_CONSUMERS, MAX_FRAMES};
use super::engine::Engine;
use super::format::FrameLayout;
use super::party::{ConsumerEngine, ProducerEngine};
use super::state::{ConsumerStats, FrameMeta, QueueMode, SeatStatus, StreamState, Take, USER_HEADER_SIZE};
use crate::buf::BufObj;
use crate::error::{invalid, Error, IpcError, Result, RingError, Wait};
use crate::sync::{Fence, SyncObj};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The state machine and what the ring keeps beside it, under one lock.
struct Shared {
    st: StreamState,
    /// Per slot: bit set while its present fence is an NvSciSync fence another engine
    /// signals ([`Producer::present_after`]), not one the producer's engine signalled.
    external_present: u32,
    /// An error to report from the producer's next acquire: a consumer in another process that
    /// went away while a frame was sent to it.
    deferred: Option<Error>,
    /// Whether the producer in another process ended the stream (a consumer process).
    ended: bool,
    /// Whether the producer is ending the stream (it sends no frame any more).
    ending: bool,
    /// The consumers of this process waiting for a frame as a future.
    #[cfg(feature = "tokio")]
    wakers: wakers::ConsumerWakers,
}

/// What the parties of one ring share.
pub(crate) struct Inner {
    id: u64,
    config: RingConfig,
    shared: Mutex<Shared>,
    changed: Condvar,
    /// Notified when a consumer in another process is dropped (its seat is free): the seat
    /// service waits on it, not on `changed`, which every frame notifies.
    seat_freed: Condvar,
    producer_engine: Engine,
    /// The engine of each seat (attached or reserved).
    consumer_engines: heapless::Vec<Engine, MAX_CONSUMERS>,
    pub(crate) backend: Arc<dyn RingBackend>,
    /// What attaches consumers in other processes to vacant seats while the stream runs (it
    /// holds the backend too: before the endpoints, so that they close after it).
    hub: Option<Arc<AttachHub>>,
    /// Whether the seat service runs: it alone then reads the endpoints of the seats it serves
    /// (the producer waits for the state it updates), so no wake-up of the event descriptor is
    /// lost to a second reader, and sends them the frames the producer queues.
    serviced: std::sync::atomic::AtomicBool,
    /// The frames queued for the senders of the seat service.
    outbox: seats::Outboxes,
    /// Bit `c` set when seat `c` is a consumer in another process.
    remote_mask: u32,
    // Endpoints after the backend: they close after the frames, sync objects and fences
    // exported through them are freed.
    /// The consumers in other processes (a producer's process).
    remotes: Vec<RemoteConsumer>,
    /// The producer in another process (a consumer's process).
    upstream: Option<Upstream>,
}

/// What joins a ring to other processes: its consumers there (a producer's process) or its
/// producer there (a consumer's process), and what attaches consumers in other processes
/// while the stream runs.
#[derive(Default)]
pub(crate) struct Links {
    pub(crate) remotes: Vec<RemoteConsumer>,
    pub(crate) upstream: Option<Upstream>,
    pub(crate) hub: Option<Arc<AttachHub>>,
}

// Also in the loom build, which has no tokio (its model tests run the watcher's own code).
#[cfg(any(feature = "tokio", all(test, loom)))]
mod deadlines;
mod links;
#[cfg(feature = "tokio")]
mod next_frame;
#[cfg(feature = "tokio")]
use next_frame::Registrations;
/// Nothing to keep without the `tokio` feature.
#[cfg(not(feature = "tokio"))]
#[derive(Default)]
pub(crate) struct Registrations;
mod seats;
mod sync;
// Also in the loom build, which has no tokio (its model tests use the real registry).
#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(any(feature = "tokio", all(test, loom)))]
mod wakers;

/// Ring identities: never reused within a process.
static NEXT_RING_ID: AtomicU64 = AtomicU64::new(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `timeout` from now; timeouts too large for the clock mean "practically forever".
fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// A copy of a [`IpcError::PeerGone`] (reported once by the producer's next acquire).
fn clone_gone(e: &Error) -> Error {
    match e {
        Error::Ipc(IpcError::PeerGone { endpoint, during }) => {
            Error::Ipc(IpcError::PeerGone { endpoint: endpoint.clone(), during })
        }
        other => Error::Ipc(IpcError::PeerGone { endpoint: other.to_string(), during: "a session" }),
    }
}

/// CLOCK_MONOTONIC now, in nanoseconds: a frame's default capture time.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime(2) writes one timespec through the valid pointer it is given;
    // CLOCK_MONOTONIC exists on every Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

impl Inner {
    fn shared(&self) -> MutexGuard<'_, Shared> {
        lock(&self.shared)
    }

    fn timeout(&self, waited_for: Wait) -> Error {
        Error::Timeout { waited_for, timeout: self.config.timeout }
    }

    /// Waits until `ready` returns `Some` under the state lock, or `deadline` passes (the error
    /// `on_timeout` builds from the state).
    fn wait_state<T>(
        &self,
        deadline: Instant,
        mut ready: impl FnMut(&mut Shared) -> Option<T>,
        on_timeout: impl FnOnce(&Shared) -> Error,
    ) -> Result<T> {
        let mut sh = self.shared();
        loop {
            if let Some(v) = ready(&mut sh) {
                return Ok(v);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(on_timeout(&sh));
            }
            sh = self.changed.wait_timeout(sh, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    fn remote_seats(&self) -> Vec<RemoteSeat> {
        let sh = self.shared();
        self.remotes
            .iter()
            .map(|r| {
                let mut rec = r.record.lock().unwrap_or_else(|e| e.into_inner()).clone();
                rec.attached = sh.st.status(r.consumer) == SeatStatus::Attached;
                rec
            })
            .collect()
    }

    fn consumer_stats(&self, consumer: usize) -> Option<ConsumerStats> {
        (consumer < self.config.consumers).then(|| self.shared().st.stats(consumer))
    }

    pub(crate) fn waiter(&self) -> Result<Box<dyn CpuWaiter>> {
        self.backend.clone().cpu_waiter()
    }

    /// The backend's NvSci extension, or the error naming `what` needed it.
    pub(super) fn nvsci(&self, what: &'static str) -> Result<&dyn NvSciObjects> {
        self.backend.nvsci().ok_or_else(|| no_nvsci_objects(what))
    }

    /// Puts back frame (`slot`, `sequence`) that consumer `consumer` took but did not get (its
    /// engine wait failed, or the future waiting for it was dropped): it is first in line again,
    /// unless a newer frame replaced it in a mailbox meanwhile, and then it goes back unread.
    fn untake(&self, consumer: usize, slot: usize, sequence: u64) {
        let dropped = self.shared().st.consumer_untake(consumer, slot);
        if dropped {
            self.backend.clear(slot, Point::Release(consumer));
            self.changed.notify_all();
            if let Some(up) = &self.upstream {
                if let Err(e) = self.unread_upstream(up, slot, sequence) {
                    log::warn!("frame ring {}: frame {sequence} could not be handed back: {e}", self.id);
                }
            }
        }
    }

    /// Takes slot `index` back from consumer `consumer` (its release fence is recorded already;
    /// `read`: it read the frame); in a consumer's process, sends the release fence to the
    /// producer's.
    fn give_back(&self, index: usize, consumer: usize, read: bool) -> Result<()> {
        let sequence = {
            let mut sh = self.shared();
            let sequence = sh.st.sequence(index).unwrap_or(0);
            sh.st.consumer_release(consumer, index, read).map_err(|_| {
                invalid(
                    "frame",
                    format!("slot {index} is not held by consumer {consumer} (released already?)"),
                )
            })?;
            sequence
        };
        self.changed.notify_all();
        match &self.upstream {
            Some(up) => self.release_upstream(up, index, sequence),
            None => Ok(()),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Never free memory another engine may still use: wait for every outstanding fence
        // first; if that fails, leak the backend (its buffers and sync objects) rather than
        // free them.
        let timeout = self.config.timeout;
        let b = &self.backend;
        let all_done = match b.clone().cpu_waiter() {
            Ok(mut w) => (0..self.config.frames).all(|s| {
                let releases =
                    (0..self.config.consumers).all(|c| w.wait(s, Point::Release(c), timeout).is_ok());
                releases && w.wait(s, Point::Present, timeout).is_ok()
            }),
            Err(_) => false,
        };
        if all_done {
            // A consumer process leaves: every fence of it expired, so its seat is free for the
            // next consumer (and the endpoint's close that follows is no death).
            if let Some(up) = &self.upstream {
                self.detach_upstream(up);
            }
        } else {
            log::error!(
                "frame ring dropped with fences that did not expire within {timeout:?}; leaking its buffers"
            );
            // One reference that is never dropped: the backend is never freed.
            std::mem::forget(Arc::clone(&self.backend));
        }
    }
}

/// A ring of frames; split it into its [`Producer`] and [`Consumer`]s to use it.
pub struct FrameRing {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for FrameRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameRing")
            .field("id", &self.inner.id)
            .field("layout", self.inner.backend.layout())
            .field("config", &self.inner.config)
            .finish()
    }
}

impl FrameRing {
    /// A ring over `backend`'s slots and fences, built for these parties (validated by the
    /// builder), with consumers in other processes (a producer's process) or the producer in
    /// another process (a consumer's process); every seat attached as a FIFO consumer taking
    /// every frame.
    pub(crate) fn with_links(
        config: RingConfig,
        backend: Arc<dyn RingBackend>,
        producer: &Engine,
        consumers: &[Engine],
        links: Links,
    ) -> Result<Self> {
        Self::with_plan(config, backend, producer, consumers, None, links)
    }

    /// As [`with_links`](Self::with_links), with a plan per seat.
    pub(crate) fn with_plan(
        config: RingConfig,
        backend: Arc<dyn RingBackend>,
        producer: &Engine,
        consumers: &[Engine],
        plan: Option<&[SeatPlan]>,
        links: Links,
    ) -> Result<Self> {
        let Links { remotes, upstream, hub } = links;
        let mut consumer_engines = heapless::Vec::new();
        for c in consumers {
            consumer_engines
                .push(c.clone())
                .map_err(|_| invalid("consumers", format!("more than {MAX_CONSUMERS} consumers")))?;
        }
        if consumer_engines.len() != config.consumers {
            return Err(invalid("parts", "the backend built a different number of consumers"));
        }
        let layout = backend.layout();
        log::debug!(
            "frame ring: {} x {:?}, {} bytes per frame, {} consumer seats",
            config.frames,
            layout.format,
            layout.size,
            config.consumers
        );
        let remote_mask = remotes.iter().fold(0, |m, r| m | 1 << r.consumer);
        let mut st = StreamState::new(config.frames, config.consumers, remote_mask);
        for c in 0..config.consumers {
            let p = plan.and_then(|p| p.get(c)).copied().unwrap_or_default();
            if p.attached {
                st.attach(p.mode, p.limit.unwrap_or(usize::MAX), |s| s == c);
            }
        }
        let inner = Inner {
            id: NEXT_RING_ID.fetch_add(1, Ordering::Relaxed),
            config,
            shared: Mutex::new(Shared {
                st,
                external_present: 0,
                deferred: None,
                ended: false,
                ending: false,
                #[cfg(feature = "tokio")]
                wakers: wakers::ConsumerWakers::default(),
            }),
            changed: Condvar::new(),
            seat_freed: Condvar::new(),
            producer_engine: producer.clone(),
            consumer_engines,
            backend,
            hub,
            serviced: std::sync::atomic::AtomicBool::new(false),
            outbox: seats::Outboxes::new(remotes.len()),
            remote_mask,
            remotes,
            upstream,
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The frame layout.
    pub fn layout(&self) -> &FrameLayout {
        self.inner.backend.layout()
    }

    /// The frame buffers in the stream.
    pub fn frames(&self) -> usize {
        self.inner.config.frames
    }

    /// How long an acquire waits before it fails with a timeout (also how long teardown waits
    /// for outstanding fences).
    pub fn timeout(&self) -> Duration {
        self.inner.config.timeout
    }

    /// This ring's identity (never reused by another ring in this process).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Splits the ring into its producer and the consumers of this process, in index order
    /// (consumer `i` at index `i` where every consumer is in this process; consumers in other
    /// processes are served by the producer through their endpoints), each on the engine the
    /// ring was built for. A CUDA party imports every slot (the producer
    /// read-write, a consumer its read-only view) and the sync objects it waits on and signals
    /// into its device once, here, and works on the device's default stream until given
    /// another ([`Producer::set_stream`], [`Consumer::set_stream`]).
    pub fn split(self) -> Result<(Producer, Vec<Consumer>)> {
        let inner = &self.inner;
        let engine = ProducerEngine::new(&inner.backend, inner.config, &inner.producer_engine)?;
        let service = seats::SeatService::start(inner)?;
        let producer = Producer { engine, inner: inner.clone(), service };
        let mut consumers = Vec::with_capacity(inner.config.consumers);
        for (id, e) in inner.consumer_engines.iter().enumerate() {
            if inner.remote_mask & (1 << id) != 0 || inner.shared().st.status(id) != SeatStatus::Attached {
                continue;
            }
            let engine = ConsumerEngine::new(&inner.backend, inner.config, e, id)?;
            consumers.push(Consumer { registrations: Default::default(), engine, inner: inner.clone(), id });
        }
        Ok((producer, consumers))
    }
}

impl FrameRing {
    /// The one consumer of a consumer process's view of a ring (no producer here).
    pub(crate) fn into_consumer(self) -> Result<Consumer> {
        let inner = &self.inner;
        let engine = ConsumerEngine::new(&inner.backend, inner.config, &inner.consumer_engines[0], 0)?;
        Ok(Consumer { registrations: Default::default(), engine, inner: inner.clone(), id: 0 })
    }
}

/// A frame the producer holds: have it written, then present it. Dropped unpresented, it is
/// discarded and the next acquire hands out the same slot and sequence again.
#[must_use = "an acquired frame must be presented (dropping it discards the frame)"]
pub struct ProducerFrame {
    inner: Arc<Inner>,
    index: usize,
    sequence: u64,
    /// The capture time the producer set (`None`: CLOCK_MONOTONIC at present).
    capture_ns: Option<u64>,
    user: [u8; USER_HEADER_SIZE],
    pub(crate) live: bool,
    /// Whether the CPU waited for the slot's release fences (a CPU party's acquire).
    pub(crate) cpu_waited: bool,
}

impl std::fmt::Debug for ProducerFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerFrame")
            .field("ring", &self.inner.id)
            .field("index", &self.index)
            .field("sequence", &self.sequence)
            .finish()
    }
}

impl ProducerFrame {
    /// Slot in the ring.
    pub fn index(&self) -> usize {
        self.index
    }
    /// Frame number, counting from 0.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }
    /// The identity of the ring it came from.
    pub fn ring_id(&self) -> u64 {
        self.inner.id
    }
    /// Sets the frame's capture time (nanoseconds on the producer's clock; by default
    /// CLOCK_MONOTONIC when the frame is presented). Consumers read it with
    /// [`ConsumerFrame::capture_time`].
    pub fn set_capture_time(&mut self, ns: u64) {
        self.capture_ns = Some(ns);
    }
    /// The capture time set so far, if any.
    pub fn capture_time(&self) -> Option<u64> {
        self.capture_ns
    }
    /// The frame's user header: plain bytes delivered with the frame to every consumer, in
    /// this process and in others (zeros unless written).
    pub fn user_header_mut(&mut self) -> &mut [u8; USER_HEADER_SIZE] {
        &mut self.user
    }
    /// The frame's user header.
    pub fn user_header(&self) -> &[u8; USER_HEADER_SIZE] {
        &self.user
    }
}

impl Drop for ProducerFrame {
    fn drop(&mut self) {
        if self.live {
            log::debug!("frame {} (slot {}) dropped unpresented: discarded", self.sequence, self.index);
            self.inner.shared().st.producer_discard();
            self.inner.changed.notify_all();
        }
    }
}

/// A frame a consumer holds: read it, then release it. Dropped unreleased, it is released once
/// its present fence expired (waited on the CPU, up to the ring's timeout, then for the work the
/// CUDA party queued on its stream; if the fence does not expire, the frame stays held and the
/// producer's acquire reports this consumer).
#[must_use = "an acquired frame must be released (dropping it releases it after a CPU wait)"]
pub struct ConsumerFrame {
    inner: Arc<Inner>,
    index: usize,
    meta: FrameMeta,
    consumer: usize,
    pub(crate) live: bool,
    /// Whether the CPU waited for the present fence (a CPU party's acquire).
    pub(crate) cpu_waited: bool,
    /// The stream of the CUDA party that holds it, whose queued work a drop waits for.
    #[cfg(feature = "cuda")]
    pub(crate) stream: Option<Arc<crate::cuda::cudarc::driver::CudaStream>>,
}

impl std::fmt::Debug for ConsumerFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerFrame")
            .field("ring", &self.inner.id)
            .field("index", &self.index)
            .field("sequence", &self.meta.sequence)
            .field("consumer", &self.consumer)
            .finish()
    }
}

impl ConsumerFrame {
    /// Slot in the ring.
    pub fn index(&self) -> usize {
        self.index
    }
    /// Frame number, counting from 0.
    pub fn sequence(&self) -> u64 {
        self.meta.sequence
    }
    /// The producer's capture time of the frame (nanoseconds on the producer's clock,
    /// CLOCK_MONOTONIC unless the producer set another).
    pub fn capture_time(&self) -> u64 {
        self.meta.capture_ns
    }
    /// The user header the producer wrote.
    pub fn user_header(&self) -> &[u8; USER_HEADER_SIZE] {
        &self.meta.user
    }
    /// The consumer that holds it.
    pub fn consumer(&self) -> usize {
        self.consumer
    }
    /// The identity of the ring it came from.
    pub fn ring_id(&self) -> u64 {
        self.inner.id
    }
}

impl Drop for ConsumerFrame {
    fn drop(&mut self) {
        if !self.live {
            return;
        }
        let inner = &self.inner;
        let b = &inner.backend;
        let expired =
            inner.waiter().and_then(|mut w| w.wait(self.index, Point::Present, inner.config.timeout));
        match expired {
            Ok(()) => {
                // The stream's wait for the present fence can now complete: finish what it queued.
                #[cfg(feature = "cuda")]
                if let Some(s) = &self.stream {
                    let _ = s.synchronize();
                }
                log::debug!("frame {} dropped by consumer {}: released", self.meta.sequence, self.consumer);
                b.clear(self.index, Point::Release(self.consumer));
                if let Err(e) = inner.give_back(self.index, self.consumer, true) {
                    log::error!("frame {} dropped by consumer {}: {e}", self.meta.sequence, self.consumer);
                }
            }
            Err(e) => log::error!(
                "frame {} dropped by consumer {} before its present fence expired ({e}); the slot stays held",
                self.meta.sequence,
                self.consumer
            ),
        }
    }
}

/// The producing side of a ring, on the engine the ring was built for.
pub struct Producer {
    // Field order is teardown order: the engine's CUDA mappings and imports (their drops
    // synchronise the context) before the ring, so the ring frees nothing a queued kernel may
    // touch.
    pub(crate) engine: ProducerEngine,
    pub(crate) inner: Arc<Inner>,
    /// The threads that serve the seats of consumers in other processes.
    service: Option<seats::SeatService>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer").field("ring", &self.inner.id).field("engine", &self.engine).finish()
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        // The seat service first (it waits at most one step of an attach), so that nothing
        // attaches while the stream ends.
        drop(self.service.take());
        self.inner.end_remotes();
    }
}

impl Producer {
    /// Waits (up to the ring's timeout) until a slot is free (no consumer holds it or has it
    /// queued; the one presented longest ago first), then has this party's engine wait for the
    /// slot's release fences, and hands the slot out. A CPU producer waits for them on the CPU;
    /// a CUDA producer enqueues the waits on its stream (the CPU blocks while every slot is
    /// held, and for a slot no consumer read whose present fence came from
    /// [`present_after`](Self::present_after), another engine's fence, which it waits for on
    /// the CPU until it expires). A consumer that holds frames holds back only those slots: a mailbox consumer
    /// or one with a limit never paces the producer beyond them. A timeout is
    /// [`Error::Timeout`] naming what was waited for ([`Wait`]).
    pub fn acquire(&mut self) -> Result<ProducerFrame> {
        let inner = &self.inner;
        let deadline = deadline_after(inner.config.timeout);
        let (mut frame, unread) = acquire_slot(inner, deadline)?;
        // A slot no consumer read since its last present: no release fence covers the
        // producer's own present fence, so wait for it here (a CUDA producer's own signal is
        // ordered on its stream already; another engine's fence is waited on the CPU).
        let external = inner.shared().external_present & (1 << frame.index) != 0;
        let present_wait = unread && (external || matches!(self.engine, ProducerEngine::Cpu(_)));
        if present_wait {
            let left = deadline.saturating_duration_since(Instant::now());
            let waited = match &mut self.engine {
                ProducerEngine::Cpu(waiter) => waiter.wait(frame.index, Point::Present, left),
                #[cfg(feature = "cuda")]
                ProducerEngine::Cuda(_) => {
                    inner.waiter().and_then(|mut w| w.wait(frame.index, Point::Present, left))
                }
            };
            if let Err(e) = waited {
                let sequence = inner.shared().st.sequence(frame.index).unwrap_or(0);
                return Err(match e {
                    Error::Timeout { .. } => {
                        inner.timeout(Wait::PresentFence { slot: frame.index, sequence })
                    }
                    e => e,
                });
            }
        }
        match &mut self.engine {
            ProducerEngine::Cpu(waiter) => {
                for c in 0..inner.config.consumers {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if let Err(e) = waiter.wait(frame.index, Point::Release(c), left) {
                        return Err(match e {
                            Error::Timeout { .. } => {
                                inner.timeout(Wait::ReleaseFence { slot: frame.index, consumer: c })
                            }
                            e => e,
                        });
                        // `frame` drops here: discarded, the slot is handed out again next time.
                    }
                }
                frame.cpu_waited = true;
            }
            #[cfg(feature = "cuda")]
            ProducerEngine::Cuda(p) => p.wait_releases(frame.index)?,
        }
        Ok(frame)
    }

    /// A handle that attaches consumers to this stream while it runs (from any thread).
    pub fn attacher(&self) -> Attacher {
        Attacher { inner: self.inner.clone() }
    }

    /// The seats of consumers in other processes: who is attached, and how many consumers
    /// attached, were refused, left and were lost (also from any thread:
    /// [`Attacher::remote_seats`]).
    pub fn remote_seats(&self) -> Vec<RemoteSeat> {
        self.inner.remote_seats()
    }

    /// The counters of consumer `consumer` as this process sees them (for a consumer in another
    /// process: frames sent to it, and frames skipped for it), since it attached.
    pub fn consumer_stats(&self, consumer: usize) -> Option<ConsumerStats> {
        self.inner.consumer_stats(consumer)
    }

    fn check(&self, frame: &ProducerFrame) -> Result<()> {
        if frame.inner.id != self.inner.id {
            return Err(invalid(
                "frame",
                format!("frame of ring {} handed to ring {}", frame.inner.id, self.inner.id),
            ));
        }
        Ok(())
    }

    /// The read-write NvSciBuf object of a held frame (NvSci backend).
    pub fn buffer(&self, frame: &ProducerFrame) -> Result<&BufObj> {
        self.check(frame)?;
        self.inner.backend.nvsci().and_then(|n| n.buffer(frame.index)).ok_or_else(not_nvsci)
    }

    /// CPU write access to a held frame, for as long as both the producer and the frame are
    /// borrowed. Only for a CPU producer's frames (whose release fences the CPU waited for); a
    /// CUDA producer's frame is refused, as an engine may still read it. Only for frames whose
    /// bytes are rows: a block-linear frame (tiled bytes) is refused ([`Error::InvalidArgument`]
    /// naming `frame`); write it with [`put_pixels`](Self::put_pixels).
    pub fn cpu_write<'a>(&'a self, frame: &'a ProducerFrame) -> Result<FrameWrite<'a>> {
        self.check(frame)?;
        refuse_block_linear(self.layout(), "Producer::put_pixels")?;
        if !frame.cpu_waited {
            return Err(invalid(
                "frame",
                "acquired by a CUDA producer (its release waits are on the stream): an engine may \
                 still read it; write it from the stream",
            ));
        }
        self.inner.backend.cpu_write(frame.index)
    }

    /// Writes pixels into a held frame from the CPU ([`BufObj::put_pixels`] on the frame's
    /// NvSciBuf object): `planes` (nvscibuf.h's user planes: one for RGBA, RAW and single-plane
    /// YUV images, Y, U and V for multi-plane YUV; each pitch-linear at its own pitch) into the
    /// rectangle `rect` (`None`: the whole image; RGBA and RAW only), whatever the frame's
    /// layout. Works for block-linear frames, whose raw bytes are tiled, and for pitch-linear
    /// ones. nvscibuf.h (DRIVE OS 6.0.10) restricts `NvSciBufObjPutPixels` to debug software. Only for a CPU producer's frames, as [`cpu_write`](Self::cpu_write);
    /// NvSci backends only ([`Error::Unsupported`] otherwise). Allocates nothing in the crate;
    /// what the NvSci library does in `NvSciBufObjPutPixels` is its own.
    pub fn put_pixels(
        &self,
        frame: &ProducerFrame,
        rect: Option<crate::buf::PixelRect>,
        planes: &[crate::buf::PlaneSrc<'_>],
    ) -> Result<()> {
        self.check(frame)?;
        if !frame.cpu_waited {
            return Err(invalid(
                "frame",
                "acquired by a CUDA producer (its release waits are on the stream): an engine may \
                 still read it; write it from the stream",
            ));
        }
        let buffer = self.inner.backend.nvsci().and_then(|n| n.buffer(frame.index)).ok_or_else(not_nvsci)?;
        buffer.put_pixels(rect, planes)
    }

    /// Presents a frame: a CPU producer signals the present fence now; a CUDA producer enqueues
    /// the signal on its stream (after the work that writes the frame). Consumers wait for it
    /// before reading.
    pub fn present(&mut self, frame: ProducerFrame) -> Result<()> {
        self.check(&frame)?;
        let b = &self.inner.backend;
        match &self.engine {
            ProducerEngine::Cpu(_) => b.cpu_signal(frame.index, Point::Present)?,
            #[cfg(feature = "cuda")]
            ProducerEngine::Cuda(p) => p.signal(frame.index, Point::Present)?,
        }
        self.publish(frame, false)
    }

    /// Presents a frame with an NvSciSync fence that another engine signals once it has written
    /// the frame (another thread, or on Tegra a camera or VIC): consumers wait for it before
    /// reading. The fence must come from [`present_sync`](Self::present_sync) (NvSci backend);
    /// another is refused and the frame discarded.
    pub fn present_after(&mut self, frame: ProducerFrame, fence: Fence) -> Result<()> {
        self.check(&frame)?;
        self.inner.nvsci("presenting with an NvSciSync fence")?.set_fence(
            frame.index,
            Point::Present,
            fence,
        )?;
        self.publish(frame, true)
    }

    /// Offers a presented frame (its fence recorded) to the consumers; `external`: its present
    /// fence is another engine's.
    fn publish(&mut self, mut frame: ProducerFrame, external: bool) -> Result<()> {
        frame.live = false;
        let inner = &self.inner;
        let meta = FrameMeta {
            sequence: frame.sequence,
            capture_ns: frame.capture_ns.unwrap_or_else(monotonic_ns),
            user: frame.user,
        };
        #[cfg(feature = "tokio")]
        let woken;
        let to_links = {
            let mut sh = inner.shared();
            let bit = 1u32 << frame.index;
            if external {
                sh.external_present |= bit;
            } else {
                sh.external_present &= !bit;
            }
            let out = sh
                .st
                .present(frame.index, meta)
                .map_err(|_| invalid("frame", "the producer does not hold this frame's slot"))?;
            for &(c, old) in &out.replaced {
                // Replaced in a mailbox before the consumer took it: it never read the frame.
                inner.backend.clear(old, Point::Release(c));
            }
            // The session each consumer was attached in when it was offered the frame (under
            // the lock that attaches and drops them).
            let mut sessions = [0u64; MAX_CONSUMERS];
            for c in out.send_to.iter() {
                sessions[c] = inner.link(c).session();
            }
            // The futures of consumers in this process the frame was queued for.
            #[cfg(feature = "tokio")]
            {
                let sh = &mut *sh;
                woken = sh.wakers.take_presented(&sh.st, frame.index, !inner.remote_mask);
            }
            (out.send_to, sessions)
        };
        inner.changed.notify_all();
        #[cfg(feature = "tokio")]
        woken.into_iter().for_each(std::task::Waker::wake);
        let (to, sessions) = to_links;
        if !to.is_empty() {
            inner.deliver(frame.index, &meta, to, &sessions);
        }
        Ok(())
    }

    /// The NvSciSync object present fences come from (NvSci backend): generate a fence from it
    /// for an engine that signals later ([`present_after`](Self::present_after)).
    pub fn present_sync(&self) -> Option<&SyncObj> {
        self.inner.backend.nvsci()?.sync(Point::Present)
    }

    /// The release sync object of consumer `consumer` (NvSci backend), for importing into the
    /// producer's engine.
    pub fn release_sync(&self, consumer: usize) -> Option<&SyncObj> {
        if consumer >= self.inner.config.consumers {
            return None;
        }
        self.inner.backend.nvsci()?.sync(Point::Release(consumer))
    }

    /// The engine this producer works on.
    pub fn engine(&self) -> &Engine {
        &self.inner.producer_engine
    }

    /// The frame layout.
    pub fn layout(&self) -> &FrameLayout {
        self.inner.backend.layout()
    }

    /// The frame buffers in the stream.
    pub fn frames(&self) -> usize {
        self.inner.config.frames
    }

    /// How long an acquire waits before it fails with a timeout (also how long teardown waits
    /// for outstanding fences).
    pub fn timeout(&self) -> Duration {
        self.inner.config.timeout
    }

    /// The ring's identity.
    pub fn ring_id(&self) -> u64 {
        self.inner.id
    }
}

/// Waits (until `deadline`) for a free slot and takes it; also says whether no consumer read
/// what was presented in it last.
fn acquire_slot(inner: &Arc<Inner>, deadline: Instant) -> Result<(ProducerFrame, bool)> {
    if let Some(e) = inner.shared().deferred.take() {
        return Err(e);
    }
    loop {
        let took = inner.shared().st.producer_take();
        match took {
            Take::Slot { slot, sequence, unread } => {
                let frame = ProducerFrame {
                    inner: inner.clone(),
                    index: slot,
                    sequence,
                    capture_ns: None,
                    user: [0; USER_HEADER_SIZE],
                    live: true,
                    cpu_waited: false,
                };
                return Ok((frame, unread));
            }
            Take::AlreadyHeld => {
                return Err(invalid("producer", "present (or drop) the frame already acquired first"))
            }
            Take::Busy { slot, sequence, holders } => {
                let remote_held: heapless::Vec<usize, MAX_FRAMES> = {
                    let sh = inner.shared();
                    sh.st
                        .slots_by_age()
                        .into_iter()
                        .filter(|&s| sh.st.holders(s).0 & inner.remote_mask != 0)
                        .collect()
                };
                let only_remote = {
                    let sh = inner.shared();
                    remote_held.iter().copied().find(|&s| sh.st.holders(s).0 & !inner.remote_mask == 0)
                };
                if let Some(s) = only_remote {
                    // A slot only consumers in other processes hold: take their releases.
                    inner.reclaim_remotes(s, deadline)?;
                    continue;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(inner.timeout(Wait::FreeSlot { slot, sequence, holders }));
                }
                // What the links carry back without waiting (the releases of FIFO consumers in
                // other processes already on their endpoints): take it, and look again soon.
                // Consumers in this process release with their own calls, and the seat service
                // takes a mailbox consumer's releases; both wake this wait.
                let mut polled = false;
                for c in 0..inner.config.consumers {
                    polled |= inner.link(c).poll(inner)?;
                }
                let nap = if polled { left.min(Duration::from_millis(1)) } else { left };
                let sh = inner.shared();
                if sh.st.has_free_slot() {
                    continue;
                }
                drop(inner.changed.wait_timeout(sh, nap).unwrap_or_else(|e| e.into_inner()));
            }
        }
    }
}

/// Refuses row access to the bytes of a block-linear frame, which are tiled: `instead` reads
/// or writes its pixels.
fn refuse_block_linear(layout: &FrameLayout, instead: &str) -> Result<()> {
    if layout.format.image_layout() == Some(crate::buf::ImageLayout::BlockLinear) {
        return Err(invalid(
            "frame",
            format!(
                "a block-linear frame ({:?}): its bytes are tiled, not rows; use {instead}",
                layout.format
            ),
        ));
    }
    Ok(())
}

fn not_nvsci() -> Error {
    Error::Unsupported {
        what: "NvSciBuf access to a frame",
        reason: crate::error::UnsupportedReason::NoNvSciObjects,
    }
}

/// How one consumer seat of a stream starts: attached (with its queue mode and limit) or
/// reserved for a consumer that attaches later.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SeatPlan {
    pub(crate) attached: bool,
    pub(crate) mode: QueueMode,
    /// Most frames held and queued (`None`: the ring's frames).
    pub(crate) limit: Option<usize>,
}

impl Default for SeatPlan {
    fn default() -> Self {
        Self { attached: true, mode: QueueMode::Fifo, limit: None }
    }
}

/// Attaches consumers to a running stream ([`Producer::attacher`]): each takes a vacant seat
/// whose engine fits (declared when the stream was built, attached or reserved, and since
/// left) and gets frames from the next present on. Cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct Attacher {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Attacher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attacher").field("ring", &self.inner.id).finish()
    }
}

impl Attacher {
    /// Attaches a consumer described by `desc` to a vacant seat of its engine (the same CPU,
    /// or a CUDA device with the same GPU id). Errors: a limit of 0 ([`Error::InvalidArgument`]
    /// naming `limit`); no vacant seat fits ([`RingError::NoSeat`]); the engine's imports
    /// failing (the seat stays vacant). The stream and its other consumers are unaffected.
    pub fn attach(&self, desc: super::ConsumerDesc) -> Result<Consumer> {
        let inner = &self.inner;
        desc.check()?;
        let gpu = desc.engine.gpu_id();
        let fits = |c: usize| inner.remote_mask & (1 << c) == 0 && inner.consumer_engines[c].gpu_id() == gpu;
        let seat = inner.shared().st.attach(desc.mode, desc.limit.unwrap_or(usize::MAX), fits);
        let Some(id) = seat else {
            let fitting = (0..inner.consumer_engines.len()).filter(|&c| fits(c)).count();
            return Err(Error::Ring(RingError::NoSeat { fitting }));
        };
        match ConsumerEngine::new(&inner.backend, inner.config, &desc.engine, id) {
            Ok(engine) => {
                log::debug!("frame ring {}: consumer {id} attached ({:?})", inner.id, desc.mode);
                Ok(Consumer { registrations: Default::default(), engine, inner: inner.clone(), id })
            }
            Err(e) => {
                inner.shared().st.detach(id);
                Err(e)
            }
        }
    }

    /// The ring's identity.
    pub fn ring_id(&self) -> u64 {
        self.inner.id
    }

    /// The seats of consumers in other processes ([`Producer::remote_seats`]), from any thread.
    pub fn remote_seats(&self) -> Vec<RemoteSeat> {
        self.inner.remote_seats()
    }

    /// Consumer `consumer`'s counters ([`Producer::consumer_stats`]), from any thread.
    pub fn consumer_stats(&self, consumer: usize) -> Option<ConsumerStats> {
        self.inner.consumer_stats(consumer)
    }
}

/// One consuming side of a ring, on the engine the ring was built for.
pub struct Consumer {
    // Field order is teardown order (see `Producer`).
    /// What `next_frame` keeps between calls: its entry with the deadline watcher and, in
    /// another process, its endpoint's event descriptor registered with a tokio runtime
    /// (feature `tokio`; nothing otherwise).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) registrations: Registrations,
    pub(crate) engine: ConsumerEngine,
    pub(crate) inner: Arc<Inner>,
    pub(crate) id: usize,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("ring", &self.inner.id)
            .field("id", &self.id)
            .field("engine", &self.engine)
            .finish()
    }
}

impl Drop for Consumer {
    /// Detaches: in the producer's process, the frames queued for this consumer go back at
    /// once; the frames it still holds as their tokens are released or dropped. Its seat can
    /// then be attached again. In a consumer process ([`Consumer::connect_with`]) this drop does
    /// nothing itself: the departure message is sent when the process's ring drops (after the
    /// last handle to it), once its fences expired, and the producer frees the seat then.
    fn drop(&mut self) {
        let inner = &self.inner;
        if inner.upstream.is_some() {
            return;
        }
        {
            let mut sh = inner.shared();
            for s in sh.st.detach(self.id) {
                inner.backend.clear(s, Point::Release(self.id));
            }
        }
        inner.changed.notify_all();
        log::debug!("frame ring {}: consumer {} detached", inner.id, self.id);
    }
}

impl Consumer {
    /// Waits (up to the ring's timeout) for the next frame offered to this consumer (a FIFO
    /// consumer's oldest, a mailbox consumer's newest), then has this party's engine wait for
    /// its present fence. A CPU consumer waits on the CPU (on a fence timeout the frame stays
    /// first in line, unless a newer one replaced it in a mailbox); a CUDA consumer enqueues
    /// the wait on its stream (the CPU blocks only while no frame is there).
    pub fn acquire(&mut self) -> Result<ConsumerFrame> {
        self.acquire_within(self.inner.config.timeout)
    }

    /// As [`acquire`](Self::acquire), waiting at most `timeout` instead of the ring's timeout
    /// (for the frame and for its present fence together): a loop that must also notice a stop
    /// request waits in short slices; `Duration::ZERO` takes a frame only if one is there and its
    /// fence expired. On a timeout, `Error::Timeout` names what was waited for and `timeout`,
    /// and nothing is taken.
    pub fn acquire_within(&mut self, timeout: Duration) -> Result<ConsumerFrame> {
        self.acquire_by(deadline_after(timeout)).map_err(|e| match e {
            Error::Timeout { waited_for, .. } => Error::Timeout { waited_for, timeout },
            e => e,
        })
    }

    fn acquire_by(&mut self, deadline: Instant) -> Result<ConsumerFrame> {
        let mut frame = self.acquire_until(deadline)?;
        let inner = &self.inner;
        match &mut self.engine {
            ConsumerEngine::Cpu(waiter) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if let Err(e) = waiter.wait(frame.index, Point::Present, left) {
                    frame.live = false;
                    self.untake(frame.index, frame.meta.sequence);
                    return Err(match e {
                        Error::Timeout { .. } => inner
                            .timeout(Wait::PresentFence { slot: frame.index, sequence: frame.meta.sequence }),
                        e => e,
                    });
                }
                frame.cpu_waited = true;
            }
            #[cfg(feature = "cuda")]
            ConsumerEngine::Cuda(p) => {
                if let Err(e) = p.wait(frame.index, Point::Present, true) {
                    // Nothing was enqueued: the frame is first in line again.
                    frame.live = false;
                    self.untake(frame.index, frame.meta.sequence);
                    return Err(e);
                }
                frame.stream = Some(p.stream().clone());
            }
        }
        inner.shared().st.delivered(self.id, frame.meta.sequence);
        Ok(frame)
    }

    /// Puts back a frame whose engine wait failed; one a newer frame replaced meanwhile goes
    /// back unread.
    fn untake(&self, slot: usize, sequence: u64) {
        self.inner.untake(self.id, slot, sequence);
    }

    fn acquire_until(&mut self, deadline: Instant) -> Result<ConsumerFrame> {
        let id = self.id;
        let inner = &self.inner;
        let taken = inner.shared().st.consumer_take(id);
        let (index, meta) = match (&inner.upstream, taken) {
            (_, Some(f)) => f,
            (Some(up), None) => inner.take_upstream(up, id, deadline)?,
            (None, None) => {
                inner.wait_state(deadline, |sh| sh.st.consumer_take(id), |_| inner.timeout(Wait::Frame))?
            }
        };
        Ok(ConsumerFrame {
            inner: inner.clone(),
            index,
            meta,
            consumer: id,
            live: true,
            cpu_waited: false,
            #[cfg(feature = "cuda")]
            stream: None,
        })
    }

    /// This consumer's counters: frames delivered, frames skipped (replaced in its mailbox or
    /// refused by its limit), and the last sequence it acquired.
    pub fn stats(&self) -> ConsumerStats {
        self.inner.shared().st.stats(self.id)
    }

    /// This consumer's queue mode.
    pub fn mode(&self) -> QueueMode {
        self.inner.shared().st.mode(self.id)
    }

    fn check(&self, frame: &ConsumerFrame) -> Result<()> {
        if frame.inner.id != self.inner.id {
            return Err(invalid(
                "frame",
                format!("frame of ring {} handed to ring {}", frame.inner.id, self.inner.id),
            ));
        }
        if frame.consumer != self.id {
            return Err(invalid(
                "frame",
                format!("frame acquired by consumer {} handed to consumer {}", frame.consumer, self.id),
            ));
        }
        Ok(())
    }

    /// The read-only NvSciBuf view of a held frame (NvSci backend).
    pub fn view(&self, frame: &ConsumerFrame) -> Result<&BufObj> {
        self.check(frame)?;
        self.inner.backend.nvsci().and_then(|n| n.view(frame.index, self.id)).ok_or_else(not_nvsci)
    }

    /// CPU read access to a held frame, for as long as both the consumer and the frame are
    /// borrowed. Only for a CPU consumer's frames (whose present fence the CPU waited for); a
    /// CUDA consumer's frame is refused, as its writer may not be done. Only for frames whose
    /// bytes are rows: a block-linear frame (tiled bytes) is refused ([`Error::InvalidArgument`]
    /// naming `frame`); read it with [`get_pixels`](Self::get_pixels).
    pub fn cpu_read<'a>(&'a self, frame: &'a ConsumerFrame) -> Result<FrameRead<'a>> {
        self.check(frame)?;
        refuse_block_linear(self.layout(), "Consumer::get_pixels")?;
        if !frame.cpu_waited {
            return Err(invalid(
                "frame",
                "acquired by a CUDA consumer (its present wait is on the stream): its writer may not \
                 be done; read it from the stream",
            ));
        }
        self.inner.backend.cpu_read(frame.index, self.id)
    }

    /// Reads pixels of a held frame on the CPU ([`BufObj::get_pixels`] on this consumer's
    /// read-only view): the rectangle `rect` (`None`: the whole image; RGBA and RAW only) into
    /// `planes` (nvscibuf.h's user planes: one for RGBA, RAW and single-plane YUV images, Y, U
    /// and V for multi-plane YUV; each pitch-linear at its own pitch), whatever the frame's
    /// layout. nvscibuf.h (DRIVE OS 6.0.10) restricts `NvSciBufObjGetPixels` to debug software. Only for a CPU consumer's frames, as [`cpu_read`](Self::cpu_read);
    /// NvSci backends only ([`Error::Unsupported`] otherwise). Allocates nothing in the crate;
    /// what the NvSci library does in `NvSciBufObjGetPixels` is its own.
    pub fn get_pixels(
        &self,
        frame: &ConsumerFrame,
        rect: Option<crate::buf::PixelRect>,
        planes: &mut [crate::buf::PlaneDst<'_>],
    ) -> Result<()> {
        self.check(frame)?;
        if !frame.cpu_waited {
            return Err(invalid(
                "frame",
                "acquired by a CUDA consumer (its present wait is on the stream): its writer may not \
                 be done; read it from the stream",
            ));
        }
        let view =
            self.inner.backend.nvsci().and_then(|n| n.view(frame.index, self.id)).ok_or_else(not_nvsci)?;
        view.get_pixels(rect, planes)
    }

    /// Releases a frame: a CPU consumer signals its release fence now; a CUDA consumer enqueues
    /// the signal on its stream (after the work that reads the frame). Even when signalling
    /// fails the frame is handed back (a CUDA consumer's stream is synchronised first) and the
    /// error is returned.
    pub fn release(&mut self, frame: ConsumerFrame) -> Result<()> {
        self.check(&frame)?;
        let b = &self.inner.backend;
        let point = Point::Release(self.id);
        let signalled = match &self.engine {
            ConsumerEngine::Cpu(_) => b.cpu_signal(frame.index, point),
            #[cfg(feature = "cuda")]
            ConsumerEngine::Cuda(p) => p.signal(frame.index, point).inspect_err(|_| {
                // No fence will tell the producer when the queued work is done: finish it here.
                let _ = p.stream().synchronize();
            }),
        };
        if signalled.is_err() {
            b.clear(frame.index, point);
        }
        let sent = self.finish(frame);
        signalled.and(sent)
    }

    /// Releases a frame with an NvSciSync fence that another engine signals once it is done
    /// reading: the producer reuses the slot once it expired. The fence must come from this
    /// consumer's [`release_sync`](Self::release_sync) (NvSci backend); another is refused, and
    /// the frame is released as a dropped token is (after a CPU wait for its present fence).
    pub fn release_after(&mut self, frame: ConsumerFrame, fence: Fence) -> Result<()> {
        self.check(&frame)?;
        self.inner.nvsci("releasing with an NvSciSync fence")?.set_fence(
            frame.index,
            Point::Release(self.id),
            fence,
        )?;
        self.finish(frame)
    }

    fn finish(&mut self, mut frame: ConsumerFrame) -> Result<()> {
        frame.live = false;
        self.inner.give_back(frame.index, self.id, true)
    }

    /// The NvSciSync object this consumer's release fences come from (NvSci backend).
    pub fn release_sync(&self) -> Option<&SyncObj> {
        self.inner.backend.nvsci()?.sync(Point::Release(self.id))
    }

    /// The present sync object (NvSci backend), for importing into this consumer's engine.
    pub fn present_sync(&self) -> Option<&SyncObj> {
        self.inner.backend.nvsci()?.sync(Point::Present)
    }

    /// The read-only NvSciBuf view of slot `index` (NvSci backend; for imports, e.g. into
    /// CUDA).
    pub fn slot_view(&self, index: usize) -> Option<&BufObj> {
        self.inner.backend.nvsci()?.view(index, self.id)
    }

    /// This consumer's index.
    pub fn id(&self) -> usize {
        self.id
    }

    /// This consumer's index in the producer's ring: its [`id`](Self::id), or for a consumer
    /// connected from another process ([`connect_with`](Self::connect_with)) the index the producer gave
    /// it.
    pub fn ring_index(&self) -> usize {
        self.inner.upstream.as_ref().map_or(self.id, |u| u.index)
    }

    /// The engine this consumer works on.
    pub fn engine(&self) -> &Engine {
        &self.inner.consumer_engines[self.id]
    }

    /// The frame layout.
    pub fn layout(&self) -> &FrameLayout {
        self.inner.backend.layout()
    }

    /// The frame buffers in the stream.
    pub fn frames(&self) -> usize {
        self.inner.config.frames
    }

    /// How long an acquire waits before it fails with a timeout (also how long teardown waits
    /// for outstanding fences).
    pub fn timeout(&self) -> Duration {
        self.inner.config.timeout
    }

    /// The ring's identity.
    pub fn ring_id(&self) -> u64 {
        self.inner.id
    }
}

// Parties move to the threads that drive their engines.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Producer>();
    send::<Consumer>();
    send::<ProducerFrame>();
    send::<ConsumerFrame>();
};
