//! The frame ring: one producer, several consumers, every hand-off carried by a fence.
//!
//! NvSciStream-packet style, on every backend: the producer acquires a free slot, has its engine
//! write the frame and presents it with the fence of that engine; each consumer acquires the
//! frame with that fence, waits for it on its own engine, works, and releases the frame with its
//! own engine's fence; the producer reuses a slot only after every release fence of it expired.
//!
//! * CPU parties use [`Producer::acquire`] / [`Producer::present`] and [`Consumer::acquire`] /
//!   [`Consumer::release`]: the CPU waits for the other side's fence and signals its own at once.
//! * Parties on another engine use the `*_unwaited` / `*_with` variants: the fence to wait for is
//!   handed over ([`Producer::release_fences`], [`Consumer::present_fence`]) and the engine's own
//!   fence is handed back. [`CudaConsumer`](super::CudaConsumer) and
//!   [`CudaProducer`](super::CudaProducer) do this on a CUDA stream without blocking the CPU.
//!
//! Frame tokens cannot jam the ring: a dropped [`ProducerFrame`] is discarded (the next acquire
//! hands out the same slot and sequence again) and a dropped [`ConsumerFrame`] is released once
//! its present fence expired (waited on the CPU, up to the ring's timeout). Every ring has an
//! identity that is never reused, so a token is refused by any other ring. Steady-state frames
//! allocate nothing: bookkeeping lives in fixed-capacity containers and fences are replaced in
//! place.

use super::config::{RingConfig, MAX_CONSUMERS, MAX_FRAMES};
use super::fence::{CpuWaiter, RingFence, SyncPoint};
use super::format::FrameLayout;
use super::memory::{FrameRead, FrameWrite, SlotMemory};
use crate::buf::BufObj;
use crate::error::{invalid, Error, Result};
use crate::sync::{SyncModule, SyncObj};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A slot's memory and fences.
pub(crate) struct Slot {
    pub(crate) memory: SlotMemory,
    present: Mutex<RingFence>,
    releases: heapless::Vec<Mutex<RingFence>, MAX_CONSUMERS>,
}

impl Slot {
    pub(crate) fn new(memory: SlotMemory, consumers: usize) -> Self {
        let mut releases = heapless::Vec::new();
        for _ in 0..consumers {
            let _ = releases.push(Mutex::new(RingFence::Expired));
        }
        Self { memory, present: Mutex::new(RingFence::Expired), releases }
    }
}

/// What a backend hands the ring: slots, sync points and the layout.
pub(crate) struct RingParts {
    pub(crate) layout: FrameLayout,
    pub(crate) slots: Vec<Slot>,
    pub(crate) present: SyncPoint,
    pub(crate) releases: heapless::Vec<SyncPoint, MAX_CONSUMERS>,
    /// The NvSciSync module CPU waits need (NvSci backends).
    pub(crate) sync_module: Option<SyncModule>,
    /// What the backend keeps alive for as long as the ring (e.g. its device).
    pub(crate) keep: Option<Box<dyn std::any::Any + Send + Sync>>,
}

struct State {
    /// Per slot: bit `c` set while consumer `c` holds the frame or has yet to take it.
    pending: [u32; MAX_FRAMES],
    /// Per slot: the sequence presented last.
    sequence: [u64; MAX_FRAMES],
    /// Per consumer: presented frames (slot, sequence) not yet acquired.
    queues: [heapless::Deque<(usize, u64), MAX_FRAMES>; MAX_CONSUMERS],
    /// Sequence of the producer's next frame.
    next: u64,
    /// Whether the producer holds a frame.
    producer_held: bool,
}

pub(crate) struct Inner {
    id: u64,
    layout: FrameLayout,
    config: RingConfig,
    state: Mutex<State>,
    changed: Condvar,
    slots: ManuallyDrop<Vec<Slot>>,
    present: SyncPoint,
    releases: heapless::Vec<SyncPoint, MAX_CONSUMERS>,
    sync_module: Option<SyncModule>,
    _keep: Option<Box<dyn std::any::Any + Send + Sync>>,
}

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

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Waits until `ready` returns `Some` under the state lock, or `deadline` passes (the error
    /// `on_timeout` builds from the state).
    fn wait_state<T>(
        &self,
        deadline: Instant,
        mut ready: impl FnMut(&mut State) -> Option<T>,
        on_timeout: impl FnOnce(&State) -> Error,
    ) -> Result<T> {
        let mut st = self.state();
        loop {
            if let Some(v) = ready(&mut st) {
                return Ok(v);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(on_timeout(&st));
            }
            st = self.changed.wait_timeout(st, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    fn waiter(&self) -> Result<CpuWaiter> {
        CpuWaiter::new(self.sync_module.as_ref())
    }

    /// The error for a producer that found slot `index` still held.
    fn stuck_consumers(&self, st: &State, index: usize) -> Error {
        let holders: Vec<String> = (0..self.config.consumers)
            .filter(|c| st.pending[index] & (1 << c) != 0)
            .map(|c| c.to_string())
            .collect();
        ring_timeout(
            format!(
            "pipeline::Producer::acquire timed out after {:?}: consumer(s) {} have not released slot {index} \
             (frame {})",
            self.config.timeout,
            holders.join(", "),
            st.sequence[index]
        ),
            self.config.timeout,
        )
    }

    /// Takes the frame back from consumer `consumer` with `fence` (its release fence).
    fn give_back(&self, index: usize, consumer: usize, fence: RingFence) {
        *lock(&self.slots[index].releases[consumer]) = fence;
        self.state().pending[index] &= !(1u32 << consumer);
        self.changed.notify_all();
    }
}

/// A ring timeout naming who held the frame or whose fence did not expire.
fn ring_timeout(detail: String, timeout: Duration) -> Error {
    Error::RingTimeout { detail, timeout_us: i64::try_from(timeout.as_micros()).unwrap_or(i64::MAX) }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Never free memory another engine may still use: wait for every outstanding fence
        // first; if that fails, leak the slots rather than free them.
        let timeout = self.config.timeout;
        let all_done = match self.waiter() {
            Ok(mut w) => self.slots.iter().all(|s| {
                let releases = s.releases.iter().all(|r| w.wait(&lock(r), timeout).is_ok());
                releases && w.wait(&lock(&s.present), timeout).is_ok()
            }),
            Err(_) => false,
        };
        if all_done {
            // SAFETY: dropped exactly once, here; nothing uses the slots afterwards.
            unsafe { ManuallyDrop::drop(&mut self.slots) };
        } else {
            log::error!(
                "frame ring dropped with fences that did not expire within {timeout:?}; leaking its buffers"
            );
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
            .field("layout", &self.inner.layout)
            .field("config", &self.inner.config)
            .finish()
    }
}

impl FrameRing {
    pub(crate) fn from_parts(config: RingConfig, parts: RingParts) -> Result<Self> {
        config.validate()?;
        if parts.slots.len() != config.frames || parts.releases.len() != config.consumers {
            return Err(invalid("parts", "the backend built a different number of slots or consumers"));
        }
        log::debug!(
            "frame ring: {} x {:?}, {} bytes per frame, {} consumers",
            config.frames,
            parts.layout.format,
            parts.layout.size,
            config.consumers
        );
        let inner = Inner {
            id: NEXT_RING_ID.fetch_add(1, Ordering::Relaxed),
            layout: parts.layout,
            config,
            state: Mutex::new(State {
                pending: [0; MAX_FRAMES],
                sequence: [0; MAX_FRAMES],
                queues: core::array::from_fn(|_| heapless::Deque::new()),
                next: 0,
                producer_held: false,
            }),
            changed: Condvar::new(),
            slots: ManuallyDrop::new(parts.slots),
            present: parts.present,
            releases: parts.releases,
            sync_module: parts.sync_module,
            _keep: parts.keep,
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The frame layout.
    pub fn layout(&self) -> &FrameLayout {
        &self.inner.layout
    }

    /// The ring parameters.
    pub fn config(&self) -> RingConfig {
        self.inner.config
    }

    /// This ring's identity (never reused by another ring in this process).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Splits the ring into its producer and its consumers (consumer `i` at index `i`).
    pub fn split(self) -> Result<(Producer, Vec<Consumer>)> {
        let producer = Producer { inner: self.inner.clone(), waiter: self.inner.waiter()? };
        let mut consumers = Vec::with_capacity(self.inner.config.consumers);
        for id in 0..self.inner.config.consumers {
            consumers.push(Consumer { inner: self.inner.clone(), waiter: self.inner.waiter()?, id });
        }
        Ok((producer, consumers))
    }
}

/// A frame the producer holds: have it written, then present it. Dropped unpresented, it is
/// discarded and the next acquire hands out the same slot and sequence again.
#[must_use = "an acquired frame must be presented (dropping it discards the frame)"]
pub struct ProducerFrame {
    inner: Arc<Inner>,
    index: usize,
    sequence: u64,
    live: bool,
    /// Whether the CPU waited for the slot's release fences (`acquire`, not `acquire_unwaited`).
    cpu_waited: bool,
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
}

impl Drop for ProducerFrame {
    fn drop(&mut self) {
        if self.live {
            log::debug!("frame {} (slot {}) dropped unpresented: discarded", self.sequence, self.index);
            self.inner.state().producer_held = false;
            self.inner.changed.notify_all();
        }
    }
}

/// A frame a consumer holds: read it, then release it. Dropped unreleased, it is released once
/// its present fence expired (waited on the CPU, up to the ring's timeout; if it does not
/// expire, the frame stays held and the producer's acquire reports this consumer).
#[must_use = "an acquired frame must be released (dropping it releases it after a CPU wait)"]
pub struct ConsumerFrame {
    inner: Arc<Inner>,
    index: usize,
    sequence: u64,
    consumer: usize,
    live: bool,
    /// Whether the CPU waited for the present fence (`acquire`, not `acquire_unwaited`).
    cpu_waited: bool,
}

impl std::fmt::Debug for ConsumerFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerFrame")
            .field("ring", &self.inner.id)
            .field("index", &self.index)
            .field("sequence", &self.sequence)
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
        self.sequence
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
        let expired = inner
            .waiter()
            .and_then(|mut w| w.wait(&lock(&inner.slots[self.index].present), inner.config.timeout));
        match expired {
            Ok(()) => {
                log::debug!("frame {} dropped by consumer {}: released", self.sequence, self.consumer);
                inner.give_back(self.index, self.consumer, RingFence::Expired);
            }
            Err(e) => log::error!(
                "frame {} dropped by consumer {} before its present fence expired ({e}); the slot stays held",
                self.sequence,
                self.consumer
            ),
        }
    }
}

/// The producing side of a ring.
pub struct Producer {
    inner: Arc<Inner>,
    waiter: CpuWaiter,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer").field("ring", &self.inner.id).finish()
    }
}

impl Producer {
    /// Waits (up to the ring's timeout) until the next slot is released by every consumer, then
    /// waits on the CPU for their release fences, and hands the slot out (CPU producers).
    pub fn acquire(&mut self) -> Result<ProducerFrame> {
        let deadline = deadline_after(self.inner.config.timeout);
        let frame = self.acquire_until(deadline)?;
        for (c, r) in self.inner.slots[frame.index].releases.iter().enumerate() {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Err(e) = self.waiter.wait(&lock(r), left) {
                return Err(match e {
                    Error::Timeout { .. } => ring_timeout(
                        format!(
                        "pipeline::Producer::acquire timed out after {:?}: the release fence of consumer {c} \
                         for slot {} did not expire",
                        self.inner.config.timeout, frame.index
                    ),
                        self.inner.config.timeout,
                    ),
                    e => e,
                });
                // `frame` drops here: discarded, the slot is handed out again next time.
            }
        }
        let mut frame = frame;
        frame.cpu_waited = true;
        Ok(frame)
    }

    /// As [`acquire`](Self::acquire) without the CPU wait: the caller's engine must wait for
    /// every fence of [`release_fences`](Self::release_fences) before writing the frame.
    pub fn acquire_unwaited(&mut self) -> Result<ProducerFrame> {
        self.acquire_until(deadline_after(self.inner.config.timeout))
    }

    fn acquire_until(&mut self, deadline: Instant) -> Result<ProducerFrame> {
        let inner = &self.inner;
        let frames = inner.config.frames as u64;
        let mut held_already = false;
        let (index, sequence) = inner.wait_state(
            deadline,
            |st| {
                if st.producer_held {
                    held_already = true;
                    return Some((usize::MAX, 0));
                }
                let index = (st.next % frames) as usize;
                (st.pending[index] == 0).then(|| {
                    st.producer_held = true;
                    (index, st.next)
                })
            },
            |st| inner.stuck_consumers(st, (st.next % frames) as usize),
        )?;
        if held_already {
            return Err(invalid("producer", "present (or drop) the frame already acquired first"));
        }
        Ok(ProducerFrame { inner: inner.clone(), index, sequence, live: true, cpu_waited: false })
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

    /// The release fences of a held frame, one per consumer: an engine producer waits for all
    /// of them before writing (after [`acquire_unwaited`](Self::acquire_unwaited)).
    pub fn release_fences<'a>(
        &'a self,
        frame: &ProducerFrame,
    ) -> Result<impl Iterator<Item = MutexGuard<'a, RingFence>> + 'a> {
        self.check(frame)?;
        Ok(self.inner.slots[frame.index].releases.iter().map(lock))
    }

    /// The read-write NvSciBuf object of a held frame (NvSci backends).
    pub fn buffer(&self, frame: &ProducerFrame) -> Result<&BufObj> {
        self.check(frame)?;
        self.inner.slots[frame.index].memory.buffer()
    }

    /// CPU write access to a held frame, for as long as both the producer and the frame are
    /// borrowed. Only for frames from [`acquire`](Self::acquire) (whose release fences the CPU
    /// waited for); a frame from `acquire_unwaited` is refused, as an engine may still read it.
    pub fn cpu_write<'a>(&'a self, frame: &'a ProducerFrame) -> Result<FrameWrite<'a>> {
        self.check(frame)?;
        if !frame.cpu_waited {
            return Err(invalid(
                "frame",
                "acquired without a CPU wait (acquire_unwaited): an engine may still read it; use acquire",
            ));
        }
        self.inner.slots[frame.index].memory.cpu_write()
    }

    /// Presents a frame the CPU has written: signals the present fence now.
    pub fn present(&mut self, frame: ProducerFrame) -> Result<()> {
        self.check(&frame)?;
        let fence = self.inner.present.cpu_signal()?;
        self.publish(frame, fence);
        Ok(())
    }

    /// Presents a frame with the fence of the engine that writes it: consumers wait for it
    /// before reading. The fence must come from [`present_sync`](Self::present_sync) (or the
    /// ring's present semaphore on Vulkan); another is refused and the frame stays held.
    pub fn present_with(&mut self, frame: ProducerFrame, fence: impl Into<RingFence>) -> Result<()> {
        self.check(&frame)?;
        let fence = fence.into();
        if !self.inner.present.owns(&fence) {
            return Err(invalid("fence", "the fence does not come from this ring's present sync object"));
        }
        self.publish(frame, fence);
        Ok(())
    }

    fn publish(&mut self, mut frame: ProducerFrame, fence: RingFence) {
        frame.live = false;
        let inner = &self.inner;
        *lock(&inner.slots[frame.index].present) = fence;
        {
            let mut st = inner.state();
            let n = inner.config.consumers;
            st.pending[frame.index] = (1u32 << n) - 1;
            st.sequence[frame.index] = frame.sequence;
            for q in st.queues.iter_mut().take(n) {
                // Cannot overflow: a consumer has at most one entry per slot.
                let _ = q.push_back((frame.index, frame.sequence));
            }
            st.next += 1;
            st.producer_held = false;
        }
        inner.changed.notify_all();
    }

    /// The NvSciSync object present fences come from (NvSci backends): generate a fence from it
    /// for an engine that signals later, e.g. another thread or, on Tegra, a camera or VIC.
    pub fn present_sync(&self) -> Option<&SyncObj> {
        self.inner.present.nvsci()
    }

    /// The release sync object of consumer `consumer` (NvSci backends), for importing into the
    /// producer's engine.
    pub fn release_sync(&self, consumer: usize) -> Option<&SyncObj> {
        self.inner.releases.get(consumer).and_then(SyncPoint::nvsci)
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn present_point(&self) -> &SyncPoint {
        &self.inner.present
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn release_point(&self, consumer: usize) -> Option<&SyncPoint> {
        self.inner.releases.get(consumer)
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn slots(&self) -> &[Slot] {
        &self.inner.slots
    }

    /// The frame layout.
    pub fn layout(&self) -> &FrameLayout {
        &self.inner.layout
    }

    /// The ring parameters.
    pub fn config(&self) -> RingConfig {
        self.inner.config
    }

    /// The ring's identity.
    pub fn ring_id(&self) -> u64 {
        self.inner.id
    }
}

/// One consuming side of a ring.
pub struct Consumer {
    inner: Arc<Inner>,
    waiter: CpuWaiter,
    id: usize,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer").field("ring", &self.inner.id).field("id", &self.id).finish()
    }
}

impl Consumer {
    /// Waits (up to the ring's timeout) for the next presented frame, then waits on the CPU for
    /// its present fence (CPU consumers). On a fence timeout the frame stays first in line.
    pub fn acquire(&mut self) -> Result<ConsumerFrame> {
        let deadline = deadline_after(self.inner.config.timeout);
        let mut frame = self.acquire_until(deadline)?;
        let left = deadline.saturating_duration_since(Instant::now());
        if let Err(e) = self.waiter.wait(&lock(&self.inner.slots[frame.index].present), left) {
            frame.live = false;
            let _ = self.inner.state().queues[self.id].push_front((frame.index, frame.sequence));
            return Err(match e {
                Error::Timeout { .. } => ring_timeout(
                    format!(
                    "pipeline::Consumer::acquire timed out after {:?}: the present fence of frame {} did not \
                     expire",
                    self.inner.config.timeout, frame.sequence
                ),
                    self.inner.config.timeout,
                ),
                e => e,
            });
        }
        frame.cpu_waited = true;
        Ok(frame)
    }

    /// As [`acquire`](Self::acquire) without the CPU wait: the caller's engine must wait for
    /// [`present_fence`](Self::present_fence) before reading.
    pub fn acquire_unwaited(&mut self) -> Result<ConsumerFrame> {
        self.acquire_until(deadline_after(self.inner.config.timeout))
    }

    fn acquire_until(&mut self, deadline: Instant) -> Result<ConsumerFrame> {
        let id = self.id;
        let timeout = self.inner.config.timeout;
        let (index, sequence) = self.inner.wait_state(
            deadline,
            |st| st.queues[id].pop_front(),
            |_| {
                ring_timeout(
                    format!("pipeline::Consumer::acquire: no frame presented within {timeout:?}"),
                    timeout,
                )
            },
        )?;
        Ok(ConsumerFrame {
            inner: self.inner.clone(),
            index,
            sequence,
            consumer: id,
            live: true,
            cpu_waited: false,
        })
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

    /// The present fence of a held frame: an engine consumer waits for it before reading
    /// (after [`acquire_unwaited`](Self::acquire_unwaited)).
    pub fn present_fence(&self, frame: &ConsumerFrame) -> Result<MutexGuard<'_, RingFence>> {
        self.check(frame)?;
        Ok(lock(&self.inner.slots[frame.index].present))
    }

    /// The read-only NvSciBuf view of a held frame (NvSci backends).
    pub fn view(&self, frame: &ConsumerFrame) -> Result<&BufObj> {
        self.check(frame)?;
        self.inner.slots[frame.index].memory.view(self.id)
    }

    /// CPU read access to a held frame, for as long as both the consumer and the frame are
    /// borrowed. Only for frames from [`acquire`](Self::acquire) (whose present fence the CPU
    /// waited for); a frame from `acquire_unwaited` is refused, as its writer may not be done.
    pub fn cpu_read<'a>(&'a self, frame: &'a ConsumerFrame) -> Result<FrameRead<'a>> {
        self.check(frame)?;
        if !frame.cpu_waited {
            return Err(invalid(
                "frame",
                "acquired without a CPU wait (acquire_unwaited): its writer may not be done; use acquire",
            ));
        }
        self.inner.slots[frame.index].memory.cpu_read(self.id)
    }

    /// Releases a frame the CPU is done with: signals this consumer's release fence now.
    /// Even when signalling fails the frame is handed back (the CPU is done with it) and the
    /// error is returned.
    pub fn release(&mut self, frame: ConsumerFrame) -> Result<()> {
        self.check(&frame)?;
        match self.inner.releases[self.id].cpu_signal() {
            Ok(fence) => {
                self.finish(frame, fence);
                Ok(())
            }
            Err(e) => {
                self.finish(frame, RingFence::Expired);
                Err(e)
            }
        }
    }

    /// Releases a frame with the fence of the engine that reads it: the producer reuses the slot
    /// once it expired. The fence must come from this consumer's release sync object
    /// ([`release_sync`](Self::release_sync)); another is refused and the frame stays held.
    pub fn release_with(&mut self, frame: ConsumerFrame, fence: impl Into<RingFence>) -> Result<()> {
        self.check(&frame)?;
        let fence = fence.into();
        if !self.inner.releases[self.id].owns(&fence) {
            return Err(invalid("fence", "the fence does not come from this consumer's release sync object"));
        }
        self.finish(frame, fence);
        Ok(())
    }

    fn finish(&mut self, mut frame: ConsumerFrame, fence: RingFence) {
        frame.live = false;
        self.inner.give_back(frame.index, self.id, fence);
    }

    /// The NvSciSync object this consumer's release fences come from (NvSci backends).
    pub fn release_sync(&self) -> Option<&SyncObj> {
        self.inner.releases[self.id].nvsci()
    }

    /// The present sync object (NvSci backends), for importing into this consumer's engine.
    pub fn present_sync(&self) -> Option<&SyncObj> {
        self.inner.present.nvsci()
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn present_point(&self) -> &SyncPoint {
        &self.inner.present
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn release_point(&self) -> &SyncPoint {
        &self.inner.releases[self.id]
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn slots(&self) -> &[Slot] {
        &self.inner.slots
    }

    /// The read-only NvSciBuf view of slot `index` (NvSci backends; for imports, e.g. into
    /// CUDA).
    pub fn slot_view(&self, index: usize) -> Option<&BufObj> {
        self.inner.slots.get(index).and_then(|s| s.memory.view(self.id).ok())
    }

    /// This consumer's index.
    pub fn id(&self) -> usize {
        self.id
    }

    /// The frame layout.
    pub fn layout(&self) -> &FrameLayout {
        &self.inner.layout
    }

    /// The ring parameters.
    pub fn config(&self) -> RingConfig {
        self.inner.config
    }

    /// The ring's identity.
    pub fn ring_id(&self) -> u64 {
        self.inner.id
    }
}
