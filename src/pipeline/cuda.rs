//! CUDA parties of a ring: every slot and sync object imported once, and per frame only
//! enqueued work on the user's stream (wait for the other side's fence, the user's kernels,
//! signal this side's fence). Nothing here blocks the CPU or allocates per frame.
//!
//! On the NvSci backends the imports are [`ExternalMemory::from_buf_obj`] and
//! [`CudaSyncObj::import`] (Tegra: NvSciBuf/NvSciSync handles; the mock on a desktop GPU: its
//! host memory page-locked and its sync counters waited and written by stream memory
//! operations); the NvSciBuf memory-sync flags follow the consumer's [`MemSync`] policy. On the
//! Vulkan backend they are the exported memory and timeline semaphores.

use super::config::{MAX_CONSUMERS, MAX_FRAMES};
use super::fence::{RingFence, SyncPoint};
use super::memory::SlotMemory;
use super::ring::{Consumer, Producer};
use super::FrameLayout;
use crate::cuda::cudarc::driver::CudaStream;
use crate::cuda::{Access, CudaGpu, CudaSyncObj, ExternalMemory, MappedBuffer, MemSync, ReadOnly, ReadWrite};
use crate::error::{invalid, Result};
use std::sync::Arc;

#[cfg(feature = "vulkan")]
use crate::cuda::{CudaSemaphore, SemaphoreKind};

/// One sync object as CUDA sees it.
enum CudaSync {
    NvSci(CudaSyncObj),
    #[cfg(feature = "vulkan")]
    Timeline(CudaSemaphore),
}

impl CudaSync {
    fn import(dev: &CudaGpu, point: &SyncPoint) -> Result<Self> {
        match point {
            SyncPoint::NvSci(obj) => Ok(Self::NvSci(CudaSyncObj::import(dev, obj)?)),
            #[cfg(feature = "vulkan")]
            SyncPoint::Timeline { semaphore, .. } => Ok(Self::Timeline(CudaSemaphore::import(
                dev,
                semaphore.export_fd()?,
                SemaphoreKind::Timeline,
            )?)),
        }
    }

    /// Enqueues a wait for `fence` on `stream`. `reads`: the waiter reads what the signaler
    /// wrote (a consumer), so an expired NvSciSync fence still needs the wait's memory
    /// synchronisation ([`CudaSyncObj::wait`] refuses it where that is needed); a producer about
    /// to overwrite a slot has nothing to synchronise with an expired release.
    fn wait(&self, stream: &CudaStream, fence: &RingFence, policy: MemSync, reads: bool) -> Result<()> {
        match (self, fence) {
            (Self::NvSci(s), RingFence::Expired) if reads => {
                s.wait(stream, &crate::sync::Fence::cleared(), policy)
            }
            (_, RingFence::Expired) => Ok(()),
            (Self::NvSci(s), RingFence::NvSci(f)) => s.wait(stream, f, policy),
            #[cfg(feature = "vulkan")]
            (Self::Timeline(s), RingFence::Timeline { value, .. }) => s.wait(stream, *value),
            #[allow(unreachable_patterns)]
            _ => Err(invalid("fence", "the fence does not come from the imported sync object")),
        }
    }

    /// Enqueues a signal on `stream` and returns its fence.
    #[cfg_attr(not(feature = "vulkan"), allow(unused_variables))]
    fn signal(&self, point: &SyncPoint, stream: &CudaStream, policy: MemSync) -> Result<RingFence> {
        match self {
            Self::NvSci(s) => Ok(RingFence::from(s.signal(stream, policy)?)),
            #[cfg(feature = "vulkan")]
            Self::Timeline(s) => {
                let (semaphore, value) = point.next_timeline_value()?;
                s.signal(stream, value)?;
                Ok(RingFence::Timeline { semaphore, value })
            }
        }
    }
}

/// Fails unless `stream` belongs to `dev`'s context.
fn same_context(dev: &CudaGpu, stream: &CudaStream) -> Result<()> {
    if stream.context().cu_ctx() != dev.context().cu_ctx() {
        return Err(invalid("stream", "the stream belongs to another CUDA context than the device"));
    }
    Ok(())
}

/// Maps every slot of a ring into CUDA with access `A`.
fn map_slots<A: Access>(
    slots: impl Iterator<Item = Result<ExternalMemory<A>>>,
    layout: &FrameLayout,
) -> Result<heapless::Vec<MappedBuffer<A>, MAX_FRAMES>> {
    let mut out = heapless::Vec::new();
    for mem in slots {
        let _ = out.push(mem?.map_buffer(0, layout.size)?);
    }
    Ok(out)
}

fn import_slot<A: Access>(
    dev: &CudaGpu,
    memory: &SlotMemory,
    consumer: Option<usize>,
) -> Result<ExternalMemory<A>> {
    match memory {
        SlotMemory::NvSci { .. } => match consumer {
            Some(c) => ExternalMemory::from_buf_obj(dev, memory.view(c)?),
            None => ExternalMemory::from_buf_obj(dev, memory.buffer()?),
        },
        #[cfg(feature = "vulkan")]
        SlotMemory::Vulkan { buffer } => {
            crate::vulkan::check_same_gpu(buffer.context(), dev)?;
            ExternalMemory::from_opaque_fd(dev, buffer.export_fd()?, buffer.allocation_size(), true)
        }
    }
}

/// Synchronises a stream if dropped during a panic, so a frame token dropped by the unwinding
/// is not handed back while kernels queued for it may still run.
struct SyncOnUnwind<'a>(&'a CudaStream);

impl Drop for SyncOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.synchronize();
        }
    }
}

/// A presented frame as a CUDA consumer sees it inside [`CudaConsumer::process`].
#[derive(Debug)]
pub struct CudaFrame<'a> {
    buffer: &'a MappedBuffer<ReadOnly>,
    stream: &'a Arc<CudaStream>,
    layout: &'a FrameLayout,
    index: usize,
    sequence: u64,
}

impl<'a> CudaFrame<'a> {
    /// The frame mapped read-only in the consumer's context.
    pub fn buffer(&self) -> &'a MappedBuffer<ReadOnly> {
        self.buffer
    }
    /// Device address of the frame's first byte.
    pub fn device_address(&self) -> u64 {
        self.buffer.device_address()
    }
    /// The stream to enqueue work on (after the present-fence wait, before the release signal).
    pub fn stream(&self) -> &'a Arc<CudaStream> {
        self.stream
    }
    /// Plane layout of the frame.
    pub fn layout(&self) -> &'a FrameLayout {
        self.layout
    }
    /// Slot in the ring.
    pub fn index(&self) -> usize {
        self.index
    }
    /// Frame number, counting from 0.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }
}

/// A ring consumer on a CUDA stream: the present fence is waited on the stream, the user's
/// work reads the frame in place, and the release fence is signalled from the stream.
pub struct CudaConsumer {
    // Field order is teardown order: mappings and semaphores (their drops synchronise the
    // context) before the ring consumer, so the ring frees nothing a queued kernel may touch.
    frames: heapless::Vec<MappedBuffer<ReadOnly>, MAX_FRAMES>,
    present: CudaSync,
    release: CudaSync,
    stream: Arc<CudaStream>,
    policy: MemSync,
    consumer: Consumer,
}

impl std::fmt::Debug for CudaConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaConsumer")
            .field("consumer", &self.consumer)
            .field("policy", &self.policy)
            .finish()
    }
}

impl CudaConsumer {
    /// Imports every slot (read-only) and the ring's sync objects into `dev` once. The consumer
    /// must have been created for a CUDA engine on `dev` (its lists name the GPU), and `stream`
    /// must belong to `dev`'s context.
    pub fn new(consumer: Consumer, dev: &CudaGpu, stream: Arc<CudaStream>, policy: MemSync) -> Result<Self> {
        same_context(dev, &stream)?;
        let id = consumer.id();
        let slots = consumer.slots().iter().map(|s| import_slot::<ReadOnly>(dev, &s.memory, Some(id)));
        let frames = map_slots(slots, consumer.layout())?;
        let present = CudaSync::import(dev, consumer.present_point())?;
        let release = CudaSync::import(dev, consumer.release_point())?;
        Ok(Self { frames, present, release, stream, policy, consumer })
    }

    /// Takes the next presented frame, enqueues on the stream a wait for its present fence,
    /// runs `work` (which enqueues kernels reading the frame on [`CudaFrame::stream`]), enqueues
    /// the release signal and hands the frame back with that fence. Blocks the CPU only while no
    /// frame is presented; allocates nothing.
    ///
    /// If `work` fails, the release is still signalled after whatever it enqueued, and its
    /// error is returned.
    pub fn process<T>(&mut self, work: impl FnOnce(&CudaFrame<'_>) -> Result<T>) -> Result<T> {
        let frame = self.consumer.acquire_unwaited()?;
        self.present.wait(&self.stream, &*self.consumer.present_fence(&frame)?, self.policy, true)?;
        let guard = SyncOnUnwind(&self.stream);
        let view = CudaFrame {
            buffer: &self.frames[frame.index()],
            stream: &self.stream,
            layout: self.consumer.layout(),
            index: frame.index(),
            sequence: frame.sequence(),
        };
        let out = work(&view);
        drop(guard);
        let fence = match self.release.signal(self.consumer.release_point(), &self.stream, self.policy) {
            Ok(f) => f,
            Err(e) => {
                // No fence will tell the producer when the queued work is done: finish it here.
                let _ = self.stream.synchronize();
                return Err(e);
            }
        };
        self.consumer.release_with(frame, fence)?;
        out
    }

    /// The ring consumer.
    pub fn consumer(&self) -> &Consumer {
        &self.consumer
    }

    /// The stream work is enqueued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The memory-sync policy of the waits and signals.
    pub fn policy(&self) -> MemSync {
        self.policy
    }
}

/// A frame being produced on a CUDA stream inside [`CudaProducer::produce`].
#[derive(Debug)]
pub struct CudaFrameMut<'a> {
    buffer: &'a mut MappedBuffer<ReadWrite>,
    stream: &'a Arc<CudaStream>,
    layout: &'a FrameLayout,
    index: usize,
    sequence: u64,
}

impl CudaFrameMut<'_> {
    /// The frame mapped read-write in the producer's context.
    pub fn buffer(&mut self) -> &mut MappedBuffer<ReadWrite> {
        self.buffer
    }
    /// Device address of the frame's first byte.
    pub fn device_address(&self) -> u64 {
        self.buffer.device_address()
    }
    /// The stream to enqueue work on (after the release-fence waits, before the present signal).
    pub fn stream(&self) -> &Arc<CudaStream> {
        self.stream
    }
    /// Plane layout of the frame.
    pub fn layout(&self) -> &FrameLayout {
        self.layout
    }
    /// Slot in the ring.
    pub fn index(&self) -> usize {
        self.index
    }
    /// Frame number, counting from 0.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }
}

/// A ring producer on a CUDA stream (a GPU engine standing in for a camera, ISP or VIC): the
/// release fences of a slot are waited on the stream, the user's work writes the frame in
/// place, and the present fence is signalled from the stream.
pub struct CudaProducer {
    frames: heapless::Vec<MappedBuffer<ReadWrite>, MAX_FRAMES>,
    present: CudaSync,
    releases: heapless::Vec<CudaSync, MAX_CONSUMERS>,
    stream: Arc<CudaStream>,
    policy: MemSync,
    producer: Producer,
}

impl std::fmt::Debug for CudaProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaProducer")
            .field("producer", &self.producer)
            .field("policy", &self.policy)
            .finish()
    }
}

impl CudaProducer {
    /// Imports every slot (read-write) and the ring's sync objects into `dev` once. The
    /// producer must have been created for a CUDA engine on `dev`, and `stream` must belong to
    /// `dev`'s context.
    pub fn new(producer: Producer, dev: &CudaGpu, stream: Arc<CudaStream>, policy: MemSync) -> Result<Self> {
        same_context(dev, &stream)?;
        let slots = producer.slots().iter().map(|s| import_slot::<ReadWrite>(dev, &s.memory, None));
        let frames = map_slots(slots, producer.layout())?;
        let present = CudaSync::import(dev, producer.present_point())?;
        let mut releases = heapless::Vec::new();
        for c in 0..producer.config().consumers {
            let point =
                producer.release_point(c).ok_or_else(|| invalid("consumer", "missing release sync"))?;
            let _ = releases.push(CudaSync::import(dev, point)?);
        }
        Ok(Self { frames, present, releases, stream, policy, producer })
    }

    /// Takes the next free slot, enqueues on the stream a wait for each of its release fences,
    /// runs `work` (which enqueues the writes on [`CudaFrameMut::stream`]), enqueues the present
    /// signal and presents the frame with that fence. Blocks the CPU only while a consumer still
    /// holds the slot; allocates nothing.
    ///
    /// If `work` fails the frame is discarded (the next call reuses the slot, after the same
    /// stream's queued work) and its error is returned.
    pub fn produce<T>(&mut self, work: impl FnOnce(&mut CudaFrameMut<'_>) -> Result<T>) -> Result<T> {
        let frame = self.producer.acquire_unwaited()?;
        for (c, fence) in self.producer.release_fences(&frame)?.enumerate() {
            self.releases[c].wait(&self.stream, &fence, self.policy, false)?;
        }
        let guard = SyncOnUnwind(&self.stream);
        let mut view = CudaFrameMut {
            buffer: &mut self.frames[frame.index()],
            stream: &self.stream,
            layout: self.producer.layout(),
            index: frame.index(),
            sequence: frame.sequence(),
        };
        let out = work(&mut view)?;
        drop(guard);
        let fence = self.present.signal(self.producer.present_point(), &self.stream, self.policy)?;
        self.producer.present_with(frame, fence)?;
        Ok(out)
    }

    /// The ring producer.
    pub fn producer(&self) -> &Producer {
        &self.producer
    }

    /// The stream work is enqueued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}
