//! A ring of frame buffers shared by one producer and several consumers, NvSciStream-packet
//! style: the producer acquires a free frame, fills it and presents it with a fence; each
//! consumer acquires it after that fence, processes it through a read-only view and releases it
//! with its own fence; the producer reuses a frame only after every consumer released it and
//! every release fence expired.
//!
//! Works on any [`NvSci`](crate::NvSci) implementation; on the mock every party is a CPU thread.
//! Steady-state frames allocate nothing: bookkeeping lives in fixed-capacity containers and the
//! fences are reused in place.

use super::format::{FrameFormat, FrameLayout};
use crate::buf::{BufAttrList, BufModule, BufObj, GpuId, Perm};
use crate::error::{invalid, Error, Result};
use crate::sync::{CpuWaitContext, Fence, SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use crate::NvSci;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Most frames a ring holds.
pub const MAX_FRAMES: usize = 16;
/// Most consumers a ring serves.
pub const MAX_CONSUMERS: usize = 4;

/// Ring parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Frame buffers in the ring (2 to [`MAX_FRAMES`]).
    pub frames: usize,
    /// Consumers (1 to [`MAX_CONSUMERS`]).
    pub consumers: usize,
    /// How long an acquire waits (for a free frame, or for a presented one) before it fails
    /// with [`Error::Timeout`].
    pub timeout: Duration,
}

impl Default for RingConfig {
    fn default() -> Self {
        Self { frames: 4, consumers: 1, timeout: Duration::from_secs(2) }
    }
}

struct State {
    /// Per frame: bit `c` set while consumer `c` holds or has yet to take the frame.
    pending: [u32; MAX_FRAMES],
    /// Per consumer: presented frames (index, sequence) not yet acquired.
    queues: [heapless::Deque<(usize, u64), MAX_FRAMES>; MAX_CONSUMERS],
}

struct Frame {
    buffer: BufObj,
    views: heapless::Vec<BufObj, MAX_CONSUMERS>,
    present: Mutex<Fence>,
    releases: heapless::Vec<Mutex<Fence>, MAX_CONSUMERS>,
    sequence: AtomicU64,
}

struct Inner {
    layout: FrameLayout,
    config: RingConfig,
    state: Mutex<State>,
    changed: Condvar,
    frames: ManuallyDrop<Vec<Frame>>,
    present_obj: SyncObj,
    release_objs: heapless::Vec<SyncObj, MAX_CONSUMERS>,
    sync: SyncModule,
}

impl Inner {
    /// An identity for tokens: frames from one ring are refused by another.
    fn id(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `ready` returns `Some` under the state lock, or `deadline` passes
    /// ([`Error::Timeout`] naming `what`).
    fn wait_state<T>(
        &self,
        deadline: Instant,
        what: &'static str,
        mut ready: impl FnMut(&mut State) -> Option<T>,
    ) -> Result<T> {
        let mut st = self.state();
        loop {
            if let Some(v) = ready(&mut st) {
                return Ok(v);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(timeout_error(what, self.config.timeout));
            }
            st = self.changed.wait_timeout(st, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Never free memory another engine may still use: wait for every outstanding fence
        // first; if that fails, leak the buffers rather than free them.
        let mut all_done = true;
        if let Ok(mut ctx) = self.sync.cpu_wait_context() {
            for f in self.frames.iter() {
                for r in f.releases.iter() {
                    all_done &= lock(r).wait(&mut ctx, Some(self.config.timeout)).is_ok();
                }
                all_done &= lock(&f.present).wait(&mut ctx, Some(self.config.timeout)).is_ok();
            }
        } else {
            all_done = false;
        }
        if all_done {
            // SAFETY: dropped exactly once, here; nothing uses the frames afterwards.
            unsafe { ManuallyDrop::drop(&mut self.frames) };
        } else {
            log::error!("frame ring dropped with fences that did not expire; leaking its buffers");
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
            .field("layout", &self.inner.layout)
            .field("config", &self.inner.config)
            .finish()
    }
}

fn sync_list(m: &SyncModule, perm: SyncPerm) -> Result<SyncAttrList> {
    let mut l = m.attr_list()?;
    l.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(perm)])?;
    Ok(l)
}

impl FrameRing {
    /// Allocates `config.frames` buffers of `format` and the sync objects, with the CPU as
    /// producer and as every consumer.
    pub fn new(lib: &NvSci, format: FrameFormat, config: RingConfig) -> Result<Self> {
        Self::build(lib, format, config, None)
    }

    /// As [`new`](Self::new), with `gpu` added to every buffer list so consumers can import the
    /// frames into that GPU (e.g. CUDA on Jetson).
    pub fn with_gpu(lib: &NvSci, format: FrameFormat, config: RingConfig, gpu: GpuId) -> Result<Self> {
        Self::build(lib, format, config, Some(gpu))
    }

    fn build(lib: &NvSci, format: FrameFormat, config: RingConfig, gpu: Option<GpuId>) -> Result<Self> {
        format.validate()?;
        if !(2..=MAX_FRAMES).contains(&config.frames) {
            return Err(invalid(
                "config.frames",
                format!("{} frames; 2 to {MAX_FRAMES} allowed", config.frames),
            ));
        }
        if !(1..=MAX_CONSUMERS).contains(&config.consumers) {
            return Err(invalid(
                "config.consumers",
                format!("{} consumers; 1 to {MAX_CONSUMERS} allowed", config.consumers),
            ));
        }
        let bufm = BufModule::open(lib)?;
        let producer_list = format.attr_list(&bufm, Perm::ReadWrite, true, gpu)?;
        let mut consumer_lists = Vec::with_capacity(config.consumers);
        for _ in 0..config.consumers {
            consumer_lists.push(format.attr_list(&bufm, Perm::ReadOnly, true, gpu)?);
        }
        let mut all: Vec<&BufAttrList> = vec![&producer_list];
        all.extend(consumer_lists.iter());
        let reconciled = BufAttrList::reconcile(&all)?;

        let sync = SyncModule::open(lib)?;
        let mut present_lists = vec![sync_list(&sync, SyncPerm::SignalOnly)?];
        for _ in 0..config.consumers {
            present_lists.push(sync_list(&sync, SyncPerm::WaitOnly)?);
        }
        let refs: Vec<&SyncAttrList> = present_lists.iter().collect();
        let present_obj = SyncObj::alloc(&SyncAttrList::reconcile(&refs)?)?;
        let mut release_objs = heapless::Vec::new();
        for _ in 0..config.consumers {
            let s = sync_list(&sync, SyncPerm::SignalOnly)?;
            let w = sync_list(&sync, SyncPerm::WaitOnly)?;
            let _ = release_objs.push(SyncObj::alloc(&SyncAttrList::reconcile(&[&s, &w])?)?);
        }

        let mut frames = Vec::with_capacity(config.frames);
        for _ in 0..config.frames {
            let buffer = BufObj::alloc(&reconciled)?;
            let mut views = heapless::Vec::new();
            let mut releases = heapless::Vec::new();
            for _ in 0..config.consumers {
                let _ = views.push(buffer.dup_with_reduced_perm(Perm::ReadOnly)?);
                let _ = releases.push(Mutex::new(Fence::cleared()));
            }
            frames.push(Frame {
                buffer,
                views,
                present: Mutex::new(Fence::cleared()),
                releases,
                sequence: AtomicU64::new(0),
            });
        }
        let layout =
            FrameLayout { format, size: frames[0].buffer.size(), planes: frames[0].buffer.planes()? };
        log::debug!(
            "frame ring: {} x {:?}, {} bytes per frame, {} consumers",
            config.frames,
            format,
            layout.size,
            config.consumers
        );
        let inner = Inner {
            layout,
            config,
            state: Mutex::new(State {
                pending: [0; MAX_FRAMES],
                queues: core::array::from_fn(|_| heapless::Deque::new()),
            }),
            changed: Condvar::new(),
            frames: ManuallyDrop::new(frames),
            present_obj,
            release_objs,
            sync,
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The frame layout, from the reconciled attributes.
    pub fn layout(&self) -> &FrameLayout {
        &self.inner.layout
    }

    /// The ring parameters.
    pub fn config(&self) -> RingConfig {
        self.inner.config
    }

    /// Splits the ring into its producer and its consumers (consumer `i` at index `i`).
    pub fn split(self) -> Result<(Producer, Vec<Consumer>)> {
        let producer = Producer {
            inner: self.inner.clone(),
            ctx: self.inner.sync.cpu_wait_context()?,
            next: 0,
            held: false,
        };
        let mut consumers = Vec::with_capacity(self.inner.config.consumers);
        for id in 0..self.inner.config.consumers {
            consumers.push(Consumer {
                inner: self.inner.clone(),
                ctx: self.inner.sync.cpu_wait_context()?,
                id,
            });
        }
        Ok((producer, consumers))
    }
}

/// A frame the producer holds: fill it, then [`Producer::present`] it.
#[derive(Debug)]
#[must_use = "an acquired frame must be presented"]
pub struct ProducerFrame {
    index: usize,
    sequence: u64,
    ring: usize,
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
}

/// A frame a consumer holds: read it, then [`Consumer::release`] it.
#[derive(Debug)]
#[must_use = "an acquired frame must be released"]
pub struct ConsumerFrame {
    index: usize,
    sequence: u64,
    ring: usize,
    consumer: usize,
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
}

/// `timeout` from now; timeouts too large for the clock mean "practically forever".
fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

fn timeout_error(function: &'static str, timeout: Duration) -> Error {
    Error::Timeout { function, timeout_us: i64::try_from(timeout.as_micros()).unwrap_or(i64::MAX) }
}

/// The producing side of a ring.
pub struct Producer {
    inner: Arc<Inner>,
    ctx: CpuWaitContext,
    next: u64,
    held: bool,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer").field("next", &self.next).finish()
    }
}

impl Producer {
    /// Waits (up to the ring's timeout) until the next frame is released by every consumer and
    /// their release fences expired, and hands it out.
    pub fn acquire(&mut self) -> Result<ProducerFrame> {
        if self.held {
            return Err(invalid("producer", "present the frame already acquired first"));
        }
        let cfg = self.inner.config;
        let index = (self.next % cfg.frames as u64) as usize;
        let deadline = deadline_after(cfg.timeout);
        self.inner.wait_state(
            deadline,
            "pipeline::Producer::acquire (a consumer has not released the frame)",
            |st| (st.pending[index] == 0).then_some(()),
        )?;
        let frame = &self.inner.frames[index];
        for r in frame.releases.iter() {
            let left = deadline.saturating_duration_since(Instant::now());
            lock(r).wait(&mut self.ctx, Some(left)).map_err(|e| match e {
                Error::Timeout { .. } => {
                    timeout_error("pipeline::Producer::acquire (release fence)", cfg.timeout)
                }
                e => e,
            })?;
        }
        self.held = true;
        Ok(ProducerFrame { index, sequence: self.next, ring: self.inner.id() })
    }

    fn check(&self, frame: &ProducerFrame) -> Result<()> {
        if frame.ring != self.inner.id() || frame.index >= self.inner.frames.len() {
            return Err(invalid("frame", "the frame was acquired from another ring"));
        }
        Ok(())
    }

    /// The read-write buffer of a held frame.
    pub fn buffer(&self, frame: &ProducerFrame) -> Result<&BufObj> {
        self.check(frame)?;
        Ok(&self.inner.frames[frame.index].buffer)
    }

    /// Presents a filled frame to every consumer with a CPU-signalled fence. On an error the
    /// frame is not presented and the next `acquire` hands out the same slot again.
    pub fn present(&mut self, frame: ProducerFrame) -> Result<()> {
        self.check(&frame)?;
        self.held = false;
        let f = &self.inner.frames[frame.index];
        {
            let mut fence = lock(&f.present);
            *fence = self.inner.present_obj.generate_fence()?;
            self.inner.present_obj.signal()?;
        }
        f.sequence.store(frame.sequence, Ordering::Release);
        {
            let mut st = self.inner.state();
            let n = self.inner.config.consumers;
            st.pending[frame.index] = (1u32 << n) - 1;
            for q in st.queues.iter_mut().take(n) {
                // Cannot overflow: a consumer has at most one entry per frame slot.
                let _ = q.push_back((frame.index, frame.sequence));
            }
        }
        self.inner.changed.notify_all();
        self.next += 1;
        Ok(())
    }

    /// The frame layout.
    pub fn layout(&self) -> &FrameLayout {
        &self.inner.layout
    }
}

/// One consuming side of a ring.
pub struct Consumer {
    inner: Arc<Inner>,
    ctx: CpuWaitContext,
    id: usize,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer").field("id", &self.id).finish()
    }
}

impl Consumer {
    /// Waits (up to the ring's timeout) for the next presented frame and its present fence.
    pub fn acquire(&mut self) -> Result<ConsumerFrame> {
        let cfg = self.inner.config;
        let deadline = deadline_after(cfg.timeout);
        let id = self.id;
        let (index, sequence) =
            self.inner.wait_state(deadline, "pipeline::Consumer::acquire (no frame presented)", |st| {
                st.queues[id].pop_front()
            })?;
        let left = deadline.saturating_duration_since(Instant::now());
        if let Err(e) = lock(&self.inner.frames[index].present).wait(&mut self.ctx, Some(left)) {
            // Not taken: the frame stays first in line for the next acquire.
            let _ = self.inner.state().queues[id].push_front((index, sequence));
            return Err(e);
        }
        Ok(ConsumerFrame { index, sequence, ring: self.inner.id(), consumer: id })
    }

    fn check(&self, frame: &ConsumerFrame) -> Result<()> {
        if frame.ring != self.inner.id()
            || frame.consumer != self.id
            || frame.index >= self.inner.frames.len()
        {
            return Err(invalid("frame", "the frame was acquired by another consumer or ring"));
        }
        Ok(())
    }

    /// The read-only view of a held frame.
    pub fn view(&self, frame: &ConsumerFrame) -> Result<&BufObj> {
        self.check(frame)?;
        Ok(&self.inner.frames[frame.index].views[self.id])
    }

    /// Releases a frame with this consumer's CPU-signalled fence. Even when signalling fails
    /// the frame is handed back (this consumer is done with it), and the error is returned.
    pub fn release(&mut self, frame: ConsumerFrame) -> Result<()> {
        self.check(&frame)?;
        let f = &self.inner.frames[frame.index];
        let signalled = {
            let obj = &self.inner.release_objs[self.id];
            let mut fence = lock(&f.releases[self.id]);
            let r = obj.generate_fence().and_then(|new| {
                *fence = new;
                obj.signal()
            });
            if r.is_err() {
                fence.clear();
            }
            r
        };
        {
            let mut st = self.inner.state();
            st.pending[frame.index] &= !(1u32 << self.id);
        }
        self.inner.changed.notify_all();
        signalled
    }

    /// The read-only view of frame slot `index` (for setting up imports, e.g. into CUDA).
    pub fn slot_view(&self, index: usize) -> Option<&BufObj> {
        self.inner.frames.get(index).map(|f| &f.views[self.id])
    }

    /// This consumer's index.
    pub fn id(&self) -> usize {
        self.id
    }

    /// The frame layout.
    pub fn layout(&self) -> &FrameLayout {
        &self.inner.layout
    }
}
