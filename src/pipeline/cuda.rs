//! CUDA parties of a ring: every slot and the sync objects a party uses imported into its device
//! once, when the ring is split, and per frame only enqueued work on the party's stream (wait
//! for the other side's fence, the user's kernels, signal this side's fence). Nothing here
//! blocks the CPU on a fence or allocates per frame. How a backend's buffers and fences are
//! imported, waited and signalled is the backend's ([`RingBackend`]).

use super::backend::{CudaSyncImport, Point, RingBackend};
use super::config::{MAX_CONSUMERS, MAX_FRAMES};
use super::party::{ConsumerEngine, ProducerEngine};
use super::ring::{Consumer, Inner, Producer};
use super::FrameLayout;
use crate::cuda::cudarc::driver::CudaStream;
use crate::cuda::{Access, CudaGpu, MappedBuffer, MemSync, ReadOnly, ReadWrite};
use crate::error::{invalid, Error, Result};
use std::sync::Arc;

/// A CUDA party's imports and stream.
pub(crate) struct CudaParty<A: Access> {
    // Field order is teardown order: mappings and semaphores (their drops synchronise the
    // context) before the stream.
    frames: heapless::Vec<MappedBuffer<A>, MAX_FRAMES>,
    syncs: heapless::Vec<(Point, CudaSyncImport), { MAX_CONSUMERS + 1 }>,
    stream: Arc<CudaStream>,
    policy: MemSync,
    dev: CudaGpu,
}

impl<A: Access> std::fmt::Debug for CudaParty<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cuda")
            .field("device", &self.dev.context().ordinal())
            .field("policy", &self.policy)
            .finish()
    }
}

impl<A: Access> CudaParty<A> {
    fn new(
        inner: &Inner,
        dev: &CudaGpu,
        slots: impl Iterator<Item = Result<crate::cuda::ExternalMemory<A>>>,
        points: &[Point],
    ) -> Result<Self> {
        let layout = inner.backend.layout();
        let mut frames = heapless::Vec::new();
        for mem in slots {
            let _ = frames.push(mem?.map_buffer(0, layout.size)?);
        }
        let mut syncs = heapless::Vec::new();
        for &p in points {
            let _ = syncs.push((p, inner.backend.cuda_import_sync(dev, p)?));
        }
        Ok(Self { frames, syncs, stream: dev.default_stream(), policy: MemSync::Auto, dev: dev.clone() })
    }

    fn import(&self, point: Point) -> Result<&CudaSyncImport> {
        self.syncs
            .iter()
            .find(|(p, _)| *p == point)
            .map(|(_, i)| i)
            .ok_or_else(|| invalid("point", "this party does not use that sync object"))
    }

    /// Enqueues a wait for the fence at (`slot`, `point`) on the stream.
    pub(crate) fn wait(&self, b: &dyn RingBackend, slot: usize, point: Point, reads: bool) -> Result<()> {
        b.cuda_wait(self.import(point)?, &self.stream, slot, point, self.policy, reads)
    }

    /// Enqueues a signal of `point` on the stream; it becomes the fence at (`slot`, `point`).
    pub(crate) fn signal(&self, b: &dyn RingBackend, slot: usize, point: Point) -> Result<()> {
        b.cuda_signal(self.import(point)?, &self.stream, slot, point, self.policy)
    }

    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Switches to `stream` (of the party's context) after the old stream's queued work.
    fn set_stream(&mut self, stream: Arc<CudaStream>) -> Result<()> {
        same_context(&self.dev, &stream)?;
        if !Arc::ptr_eq(&stream, &self.stream) {
            // Fences signalled on the old stream cover the work queued for frames already
            // handed back, but a frame still held would be released from the new stream
            // without waiting for it: finish the old stream's work first.
            self.stream.synchronize().map_err(|e| Error::Cuda {
                function: "cuStreamSynchronize",
                code: e.0 as u32,
                name: "",
            })?;
            self.stream = stream;
        }
        Ok(())
    }
}

impl CudaParty<ReadWrite> {
    /// The producer's imports: every slot read-write, the present object and every release
    /// object.
    pub(crate) fn producer(inner: &Inner, dev: &CudaGpu) -> Result<Self> {
        let b = &inner.backend;
        let n = inner_consumers(inner);
        let mut points = heapless::Vec::<Point, { MAX_CONSUMERS + 1 }>::new();
        let _ = points.push(Point::Present);
        for c in 0..n {
            let _ = points.push(Point::Release(c));
        }
        Self::new(inner, dev, (0..inner_frames(inner)).map(|s| b.cuda_import_rw(dev, s)), &points)
    }

    /// Enqueues a wait for every release fence of `slot` (a producer about to overwrite it).
    pub(crate) fn wait_releases(&self, b: &dyn RingBackend, slot: usize) -> Result<()> {
        for (point, import) in &self.syncs {
            if let Point::Release(_) = point {
                b.cuda_wait(import, &self.stream, slot, *point, self.policy, false)?;
            }
        }
        Ok(())
    }
}

impl CudaParty<ReadOnly> {
    /// Consumer `id`'s imports: its read-only view of every slot, the present object and its
    /// release object.
    pub(crate) fn consumer(inner: &Inner, dev: &CudaGpu, id: usize) -> Result<Self> {
        let b = &inner.backend;
        let slots = (0..inner_frames(inner)).map(|s| b.cuda_import_ro(dev, s, id));
        Self::new(inner, dev, slots, &[Point::Present, Point::Release(id)])
    }
}

fn inner_frames(inner: &Inner) -> usize {
    inner.config().frames
}

fn inner_consumers(inner: &Inner) -> usize {
    inner.config().consumers
}

/// Fails unless `stream` belongs to `dev`'s context.
fn same_context(dev: &CudaGpu, stream: &CudaStream) -> Result<()> {
    if stream.context().cu_ctx() != dev.context().cu_ctx() {
        return Err(invalid("stream", "the stream belongs to another CUDA context than the device"));
    }
    Ok(())
}

fn not_cuda(what: &'static str) -> Error {
    invalid("engine", format!("{what} needs a party on a CUDA engine (Engine::Cuda when the ring is built)"))
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

/// A presented frame as a CUDA consumer sees it inside [`Consumer::process`].
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

/// A frame being produced on a CUDA stream inside [`Producer::produce`].
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

impl Producer {
    fn cuda(&self) -> Option<&CudaParty<ReadWrite>> {
        match &self.engine {
            ProducerEngine::Cuda(p) => Some(p),
            ProducerEngine::Cpu(_) => None,
        }
    }

    /// The stream a CUDA producer enqueues its waits and signals on (`None`: a CPU producer).
    pub fn stream(&self) -> Option<&Arc<CudaStream>> {
        self.cuda().map(|p| &p.stream)
    }

    /// Has a CUDA producer enqueue its waits and signals on `stream` (of its device's context,
    /// else `InvalidArgument` naming `stream`), after the work queued on the old stream.
    pub fn set_stream(&mut self, stream: Arc<CudaStream>) -> Result<()> {
        match &mut self.engine {
            ProducerEngine::Cuda(p) => p.set_stream(stream),
            ProducerEngine::Cpu(_) => Err(not_cuda("set_stream")),
        }
    }

    /// The NvSciBuf memory-sync policy of a CUDA producer's waits and signals.
    pub fn mem_sync(&self) -> Option<MemSync> {
        self.cuda().map(|p| p.policy)
    }

    /// Sets the memory-sync policy of a CUDA producer's waits and signals (default
    /// [`MemSync::Auto`]).
    pub fn set_mem_sync(&mut self, policy: MemSync) -> Result<()> {
        match &mut self.engine {
            ProducerEngine::Cuda(p) => {
                p.policy = policy;
                Ok(())
            }
            ProducerEngine::Cpu(_) => Err(not_cuda("set_mem_sync")),
        }
    }

    /// A held frame mapped read-write in a CUDA producer's context: enqueue its writes on
    /// [`stream`](Self::stream) between [`acquire`](Self::acquire) and
    /// [`present`](Self::present).
    pub fn cuda_buffer<'a>(
        &'a mut self,
        frame: &'a super::ProducerFrame,
    ) -> Result<&'a mut MappedBuffer<ReadWrite>> {
        if frame.ring_id() != self.ring_id() {
            return Err(invalid("frame", "the frame comes from another ring"));
        }
        match &mut self.engine {
            ProducerEngine::Cuda(p) => {
                p.frames.get_mut(frame.index()).ok_or_else(|| invalid("frame", "no such slot"))
            }
            ProducerEngine::Cpu(_) => Err(not_cuda("cuda_buffer")),
        }
    }

    /// Acquires the next slot (its release waits enqueued on the stream), runs `work` (which
    /// enqueues the writes on [`CudaFrameMut::stream`]) and presents the frame with a signal
    /// enqueued after it. Blocks the CPU only while a consumer still holds the slot; allocates
    /// nothing. A CUDA producer only.
    ///
    /// If `work` fails the frame is discarded (the next call reuses the slot, after the same
    /// stream's queued work) and its error is returned.
    pub fn produce<T>(&mut self, work: impl FnOnce(&mut CudaFrameMut<'_>) -> Result<T>) -> Result<T> {
        if self.cuda().is_none() {
            return Err(not_cuda("produce"));
        }
        let frame = self.acquire()?;
        let out = {
            let ProducerEngine::Cuda(p) = &mut self.engine else { return Err(not_cuda("produce")) };
            let p = &mut **p;
            let guard = SyncOnUnwind(&p.stream);
            let mut view = CudaFrameMut {
                buffer: &mut p.frames[frame.index()],
                stream: &p.stream,
                layout: self.inner.backend.layout(),
                index: frame.index(),
                sequence: frame.sequence(),
            };
            let out = work(&mut view)?;
            drop(guard);
            out
        };
        self.present(frame)?;
        Ok(out)
    }
}

impl Consumer {
    fn cuda(&self) -> Option<&CudaParty<ReadOnly>> {
        match &self.engine {
            ConsumerEngine::Cuda(p) => Some(p),
            ConsumerEngine::Cpu(_) => None,
        }
    }

    /// The stream a CUDA consumer enqueues its waits and signals on (`None`: a CPU consumer).
    pub fn stream(&self) -> Option<&Arc<CudaStream>> {
        self.cuda().map(|p| &p.stream)
    }

    /// Has a CUDA consumer enqueue its waits and signals on `stream` (of its device's context,
    /// else `InvalidArgument` naming `stream`), after the work queued on the old stream.
    pub fn set_stream(&mut self, stream: Arc<CudaStream>) -> Result<()> {
        match &mut self.engine {
            ConsumerEngine::Cuda(p) => p.set_stream(stream),
            ConsumerEngine::Cpu(_) => Err(not_cuda("set_stream")),
        }
    }

    /// The NvSciBuf memory-sync policy of a CUDA consumer's waits and signals.
    pub fn mem_sync(&self) -> Option<MemSync> {
        self.cuda().map(|p| p.policy)
    }

    /// Sets the memory-sync policy of a CUDA consumer's waits and signals (default
    /// [`MemSync::Auto`]).
    pub fn set_mem_sync(&mut self, policy: MemSync) -> Result<()> {
        match &mut self.engine {
            ConsumerEngine::Cuda(p) => {
                p.policy = policy;
                Ok(())
            }
            ConsumerEngine::Cpu(_) => Err(not_cuda("set_mem_sync")),
        }
    }

    /// A held frame mapped read-only in a CUDA consumer's context: enqueue its reads on
    /// [`stream`](Self::stream) between [`acquire`](Self::acquire) and
    /// [`release`](Self::release).
    pub fn cuda_buffer(&self, frame: &super::ConsumerFrame) -> Result<&MappedBuffer<ReadOnly>> {
        if frame.ring_id() != self.ring_id() || frame.consumer() != self.id() {
            return Err(invalid("frame", "the frame was acquired by another consumer or ring"));
        }
        let p = self.cuda().ok_or_else(|| not_cuda("cuda_buffer"))?;
        p.frames.get(frame.index()).ok_or_else(|| invalid("frame", "no such slot"))
    }

    /// Acquires the next presented frame (its present wait enqueued on the stream), runs `work`
    /// (which enqueues kernels reading the frame on [`CudaFrame::stream`]) and releases the
    /// frame with a signal enqueued after it. Blocks the CPU only while no frame is presented;
    /// allocates nothing. A CUDA consumer only.
    ///
    /// If `work` fails, the release is still signalled after whatever it enqueued, and its
    /// error is returned.
    pub fn process<T>(&mut self, work: impl FnOnce(&CudaFrame<'_>) -> Result<T>) -> Result<T> {
        if self.cuda().is_none() {
            return Err(not_cuda("process"));
        }
        let frame = self.acquire()?;
        let out = {
            let p = self.cuda().ok_or_else(|| not_cuda("process"))?;
            let guard = SyncOnUnwind(&p.stream);
            let view = CudaFrame {
                buffer: &p.frames[frame.index()],
                stream: &p.stream,
                layout: self.inner.backend.layout(),
                index: frame.index(),
                sequence: frame.sequence(),
            };
            let out = work(&view);
            drop(guard);
            out
        };
        self.release(frame)?;
        out
    }
}
