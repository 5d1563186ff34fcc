//! The engine state of each party, made when a ring is split: a CPU wait state for a CPU
//! party; for a CUDA party, every slot and the sync objects it uses imported into its device,
//! and the stream its waits and signals are enqueued on.

use super::backend::{CpuWaiter, RingBackend};
use super::config::RingConfig;
use super::engine::Engine;
use crate::error::Result;

#[cfg(feature = "cuda")]
use super::backend::{CudaSyncImport, Point};
#[cfg(feature = "cuda")]
use super::config::{MAX_CONSUMERS, MAX_FRAMES};
#[cfg(feature = "cuda")]
use crate::cuda::cudarc::driver::CudaStream;
#[cfg(feature = "cuda")]
use crate::cuda::{Access, ArraySurface, CudaGpu, MappedBuffer, MemSync, ReadOnly, ReadWrite};
#[cfg(feature = "cuda")]
use crate::error::invalid;
#[cfg(feature = "cuda")]
use std::sync::Arc;

/// The producer's engine.
pub(crate) enum ProducerEngine {
    Cpu(CpuWaiter),
    #[cfg(feature = "cuda")]
    Cuda(Box<CudaParty<ReadWrite>>),
}

impl ProducerEngine {
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    pub(crate) fn new(backend: &dyn RingBackend, config: RingConfig, engine: &Engine) -> Result<Self> {
        match engine {
            Engine::Cpu => Ok(Self::Cpu(backend.cpu_waiter()?)),
            #[cfg(feature = "cuda")]
            Engine::Cuda(dev) => Ok(Self::Cuda(Box::new(CudaParty::producer(backend, config, dev)?))),
        }
    }
}

impl std::fmt::Debug for ProducerEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cpu(_) => f.write_str("Cpu"),
            #[cfg(feature = "cuda")]
            Self::Cuda(p) => p.fmt(f),
        }
    }
}

/// A consumer's engine.
pub(crate) enum ConsumerEngine {
    Cpu(CpuWaiter),
    #[cfg(feature = "cuda")]
    Cuda(Box<CudaParty<ReadOnly>>),
}

impl ConsumerEngine {
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    pub(crate) fn new(
        backend: &dyn RingBackend,
        config: RingConfig,
        engine: &Engine,
        id: usize,
    ) -> Result<Self> {
        match engine {
            Engine::Cpu => Ok(Self::Cpu(backend.cpu_waiter()?)),
            #[cfg(feature = "cuda")]
            Engine::Cuda(dev) => Ok(Self::Cuda(Box::new(CudaParty::consumer(backend, config, dev, id)?))),
        }
    }
}

impl std::fmt::Debug for ConsumerEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cpu(_) => f.write_str("Cpu"),
            #[cfg(feature = "cuda")]
            Self::Cuda(p) => p.fmt(f),
        }
    }
}

/// A CUDA party's imports and stream.
#[cfg(feature = "cuda")]
pub(crate) struct CudaParty<A: Access> {
    // Field order is teardown order: mappings and semaphores (their drops synchronise the
    // context) before the stream.
    pub(crate) frames: heapless::Vec<MappedBuffer<A>, MAX_FRAMES>,
    /// Per slot, each plane as a CUDA array with a surface object (block-linear frames; empty
    /// for pitch-linear ones, read through `frames`).
    pub(crate) planes: heapless::Vec<heapless::Vec<ArraySurface<A>, 3>, MAX_FRAMES>,
    syncs: heapless::Vec<(Point, CudaSyncImport), { MAX_CONSUMERS + 1 }>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) policy: MemSync,
    dev: CudaGpu,
}

#[cfg(feature = "cuda")]
impl<A: Access> std::fmt::Debug for CudaParty<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cuda")
            .field("device", &self.dev.context().ordinal())
            .field("policy", &self.policy)
            .finish()
    }
}

#[cfg(feature = "cuda")]
impl<A: Access> CudaParty<A> {
    fn new(
        backend: &dyn RingBackend,
        dev: &CudaGpu,
        slots: impl Iterator<Item = Result<crate::cuda::ExternalMemory<A>>>,
        points: &[Point],
    ) -> Result<Self> {
        let layout = backend.layout();
        let block_linear = layout.format.image_layout() == Some(crate::buf::ImageLayout::BlockLinear);
        let mut frames = heapless::Vec::new();
        let mut planes = heapless::Vec::new();
        for mem in slots {
            let mem = mem?;
            if block_linear {
                // Block-linear planes are tiled: kernels read them as arrays, as NVIDIA's
                // cudaNvSciBufMultiplanar sample maps them (one array per plane).
                let mut surfaces = heapless::Vec::new();
                for p in &layout.planes {
                    let array =
                        mem.map_plane(p, crate::cuda::cudarc::driver::sys::CUDA_ARRAY3D_SURFACE_LDST)?;
                    let _ = surfaces.push(ArraySurface::new(array)?);
                }
                let _ = planes.push(surfaces);
            }
            let _ = frames.push(mem.map_buffer(0, layout.size)?);
        }
        let mut syncs = heapless::Vec::new();
        for &p in points {
            let _ = syncs.push((p, backend.cuda_import_sync(dev, p)?));
        }
        Ok(Self {
            frames,
            planes,
            syncs,
            stream: dev.default_stream(),
            policy: MemSync::Auto,
            dev: dev.clone(),
        })
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
    pub(crate) fn set_stream(&mut self, stream: Arc<CudaStream>) -> Result<()> {
        same_context(&self.dev, &stream)?;
        if !Arc::ptr_eq(&stream, &self.stream) {
            // Fences signalled on the old stream cover the work queued for frames already
            // handed back, but a frame still held would be released from the new stream
            // without waiting for it: finish the old stream's work first.
            self.stream.synchronize().map_err(|e| crate::cuda::from_driver("cuStreamSynchronize", e))?;
            self.stream = stream;
        }
        Ok(())
    }
}

#[cfg(feature = "cuda")]
impl CudaParty<ReadWrite> {
    /// The producer's imports: every slot read-write, the present object and every release
    /// object.
    pub(crate) fn producer(b: &dyn RingBackend, config: RingConfig, dev: &CudaGpu) -> Result<Self> {
        let mut points = heapless::Vec::<Point, { MAX_CONSUMERS + 1 }>::new();
        let _ = points.push(Point::Present);
        for c in 0..config.consumers {
            let _ = points.push(Point::Release(c));
        }
        Self::new(b, dev, (0..config.frames).map(|s| b.cuda_import_rw(dev, s)), &points)
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

#[cfg(feature = "cuda")]
impl CudaParty<ReadOnly> {
    /// Consumer `id`'s imports: its read-only view of every slot, the present object and its
    /// release object.
    pub(crate) fn consumer(
        b: &dyn RingBackend,
        config: RingConfig,
        dev: &CudaGpu,
        id: usize,
    ) -> Result<Self> {
        let slots = (0..config.frames).map(|s| b.cuda_import_ro(dev, s, id));
        Self::new(b, dev, slots, &[Point::Present, Point::Release(id)])
    }
}

/// Fails unless `stream` belongs to `dev`'s context.
#[cfg(feature = "cuda")]
fn same_context(dev: &CudaGpu, stream: &CudaStream) -> Result<()> {
    if stream.context().cu_ctx() != dev.context().cu_ctx() {
        return Err(invalid("stream", "the stream belongs to another CUDA context than the device"));
    }
    Ok(())
}
