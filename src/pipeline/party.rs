//! The engine state of each party, made when a ring is split: a CPU wait state for a CPU
//! party; for a CUDA party, every slot and the sync objects it uses imported into its device,
//! and the stream its waits and signals are enqueued on.
//!
//! A CUDA party maps a pitch-linear frame as one linear buffer. A block-linear frame is mapped
//! plane by plane as CUDA arrays, as NVIDIA's cudaNvSciBufMultiplanar sample maps one: a
//! producer's with `CUDA_ARRAY3D_SURFACE_LDST` and a surface object per plane, a consumer's
//! read-only view with flags 0 and a texture object per plane (CUDA does not write through
//! textures, so the read-only import never asks for load/store access). The linear mapping of a
//! block-linear frame, which no NVIDIA sample makes, is deferred: made only for a slot whose
//! linear view is asked for (`cuda_buffer`, or the frame views of `produce` / `process`).

use super::backend::{CpuWaiter, RingBackend};
use super::config::RingConfig;
use super::engine::Engine;
use crate::error::Result;

#[cfg(feature = "cuda")]
use super::backend::{CudaSync, Point};
#[cfg(feature = "cuda")]
use super::config::{MAX_CONSUMERS, MAX_FRAMES};
#[cfg(feature = "cuda")]
use crate::buf::PlaneLayout;
#[cfg(feature = "cuda")]
use crate::cuda::cudarc::driver::CudaStream;
#[cfg(feature = "cuda")]
use crate::cuda::{
    Access, ArraySurface, ArrayTexture, CudaGpu, ExternalMemory, MappedBuffer, MemSync, ReadOnly, ReadWrite,
    TextureOptions,
};
#[cfg(feature = "cuda")]
use crate::error::invalid;
use std::sync::Arc;
#[cfg(feature = "cuda")]
use std::sync::OnceLock;

/// The producer's engine.
pub(crate) enum ProducerEngine {
    Cpu(Box<dyn CpuWaiter>),
    #[cfg(feature = "cuda")]
    Cuda(Box<CudaParty<ReadWrite>>),
}

impl ProducerEngine {
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    pub(crate) fn new(backend: &Arc<dyn RingBackend>, config: RingConfig, engine: &Engine) -> Result<Self> {
        match engine {
            Engine::Cpu => Ok(Self::Cpu(backend.clone().cpu_waiter()?)),
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
    Cpu(Box<dyn CpuWaiter>),
    #[cfg(feature = "cuda")]
    Cuda(Box<CudaParty<ReadOnly>>),
}

impl ConsumerEngine {
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    pub(crate) fn new(
        backend: &Arc<dyn RingBackend>,
        config: RingConfig,
        engine: &Engine,
        id: usize,
    ) -> Result<Self> {
        match engine {
            Engine::Cpu => Ok(Self::Cpu(backend.clone().cpu_waiter()?)),
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

/// How a CUDA party of one access reads (and writes) block-linear planes.
#[cfg(feature = "cuda")]
pub(crate) trait PlaneAccess: Access + Sized {
    /// The sampling object over one plane's array.
    type Plane: Send + Sync + std::fmt::Debug;
    /// Maps `plane` of `mem` as an array and wraps it.
    fn map(mem: &ExternalMemory<Self>, plane: &PlaneLayout) -> Result<Self::Plane>;
}

#[cfg(feature = "cuda")]
impl PlaneAccess for ReadWrite {
    /// A producer writes with `sust` (and may read with `suld`): load/store arrays.
    type Plane = ArraySurface<ReadWrite>;
    fn map(mem: &ExternalMemory<Self>, plane: &PlaneLayout) -> Result<Self::Plane> {
        let ldst = crate::cuda::cudarc::driver::sys::CUDA_ARRAY3D_SURFACE_LDST;
        ArraySurface::new(mem.map_plane(plane, ldst)?)
    }
}

#[cfg(feature = "cuda")]
impl PlaneAccess for ReadOnly {
    /// A read-only import asks for no load/store access (flags 0) and is read through a
    /// texture: exact texels (point filtering, texel indices, integers as stored).
    type Plane = ArrayTexture<ReadOnly>;
    fn map(mem: &ExternalMemory<Self>, plane: &PlaneLayout) -> Result<Self::Plane> {
        ArrayTexture::new(mem.map_plane(plane, 0)?, TextureOptions::default())
    }
}

/// A slot's linear mapping, planes and stream, for a producer's frame view.
#[cfg(feature = "cuda")]
type ViewMut<'a, A> = (&'a mut MappedBuffer<A>, &'a [<A as PlaneAccess>::Plane], &'a Arc<CudaStream>);

/// A CUDA party's imports and stream.
#[cfg(feature = "cuda")]
pub(crate) struct CudaParty<A: PlaneAccess> {
    // Field order is teardown order: mappings and semaphores (their drops synchronise the
    // context) before the imports and the stream.
    /// Per slot, the frame as one linear buffer: mapped at split for a pitch-linear frame, on
    /// first request for a block-linear one ([`linear`](Self::linear)).
    frames: heapless::Vec<OnceLock<MappedBuffer<A>>, MAX_FRAMES>,
    /// Per slot, each plane as a CUDA array with a surface (producer) or texture (consumer)
    /// object: block-linear frames; empty for pitch-linear ones, read through `frames`.
    pub(crate) planes: heapless::Vec<heapless::Vec<A::Plane, 3>, MAX_FRAMES>,
    /// Per slot, the import, for a deferred linear mapping.
    mems: heapless::Vec<ExternalMemory<A>, MAX_FRAMES>,
    /// Serialises deferred linear mappings, so a slot is mapped once.
    mapping: std::sync::Mutex<()>,
    /// Bytes of a frame (the linear mapping's length).
    size: u64,
    syncs: heapless::Vec<(Point, Box<dyn CudaSync>), { MAX_CONSUMERS + 1 }>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) policy: MemSync,
    dev: CudaGpu,
}

#[cfg(feature = "cuda")]
impl<A: PlaneAccess> std::fmt::Debug for CudaParty<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cuda")
            .field("device", &self.dev.context().ordinal())
            .field("policy", &self.policy)
            .finish()
    }
}

#[cfg(feature = "cuda")]
impl<A: PlaneAccess> CudaParty<A> {
    fn new(
        backend: &Arc<dyn RingBackend>,
        dev: &CudaGpu,
        slots: impl Iterator<Item = Result<ExternalMemory<A>>>,
        points: &[Point],
    ) -> Result<Self> {
        let layout = backend.layout();
        let block_linear = layout.format.image_layout() == Some(crate::buf::ImageLayout::BlockLinear);
        let mut frames = heapless::Vec::new();
        let mut planes = heapless::Vec::new();
        let mut mems = heapless::Vec::new();
        for mem in slots {
            let mem = mem?;
            let linear = OnceLock::new();
            if block_linear {
                // Block-linear planes are tiled: kernels read them as arrays, as NVIDIA's
                // cudaNvSciBufMultiplanar sample maps them (one array per plane).
                let mut objects = heapless::Vec::new();
                for p in &layout.planes {
                    let _ = objects.push(A::map(&mem, p)?);
                }
                let _ = planes.push(objects);
            } else {
                let _ = linear.set(mem.map_buffer(0, layout.size)?);
            }
            let _ = frames.push(linear);
            let _ = mems.push(mem);
        }
        let mut syncs = heapless::Vec::new();
        for &p in points {
            let _ = syncs.push((p, backend.clone().cuda_import_sync(dev, p)?));
        }
        Ok(Self {
            frames,
            planes,
            mems,
            mapping: std::sync::Mutex::new(()),
            size: layout.size,
            syncs,
            stream: dev.default_stream(),
            policy: MemSync::Auto,
            dev: dev.clone(),
        })
    }

    /// Slot `slot` as one linear buffer: the mapping made at split (pitch-linear frames), or
    /// made now, once, for a block-linear frame (`cuExternalMemoryGetMappedBuffer` over a tiled
    /// image: its bytes are in the tiled order; the driver may refuse it, a typed error then).
    pub(crate) fn linear(&self, slot: usize) -> Result<&MappedBuffer<A>> {
        let cell = self.frames.get(slot).ok_or_else(|| invalid("frame", "no such slot"))?;
        if let Some(m) = cell.get() {
            return Ok(m);
        }
        let _g = self.mapping.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = cell.get() {
            return Ok(m);
        }
        let mem = self.mems.get(slot).ok_or_else(|| invalid("frame", "no such slot"))?;
        let _ = cell.set(mem.map_buffer(0, self.size)?);
        cell.get().ok_or_else(|| invalid("frame", "the slot's linear mapping was not kept"))
    }

    /// The linear mapping (made beforehand with [`linear_mut`](Self::linear_mut)), the planes
    /// and the stream of slot `slot`, for a producer's frame view.
    pub(crate) fn view_mut(&mut self, slot: usize) -> Result<ViewMut<'_, A>> {
        let buffer = self
            .frames
            .get_mut(slot)
            .and_then(OnceLock::get_mut)
            .ok_or_else(|| invalid("frame", "the slot's linear mapping was not made"))?;
        let planes = self.planes.get(slot).map_or(&[][..], |v| &v[..]);
        Ok((buffer, planes, &self.stream))
    }

    /// As [`linear`](Self::linear), for writing.
    pub(crate) fn linear_mut(&mut self, slot: usize) -> Result<&mut MappedBuffer<A>> {
        self.linear(slot)?;
        self.frames
            .get_mut(slot)
            .and_then(OnceLock::get_mut)
            .ok_or_else(|| invalid("frame", "the slot's linear mapping was not kept"))
    }

    fn import(&self, point: Point) -> Result<&dyn CudaSync> {
        self.syncs
            .iter()
            .find(|(p, _)| *p == point)
            .map(|(_, i)| &**i)
            .ok_or_else(|| invalid("point", "this party does not use that sync object"))
    }

    /// Enqueues a wait for the fence at (`slot`, `point`) on the stream.
    pub(crate) fn wait(&self, slot: usize, point: Point, reads: bool) -> Result<()> {
        self.import(point)?.wait(&self.stream, slot, self.policy, reads)
    }

    /// Enqueues a signal of `point` on the stream; it becomes the fence at (`slot`, `point`).
    pub(crate) fn signal(&self, slot: usize, point: Point) -> Result<()> {
        self.import(point)?.signal(&self.stream, slot, self.policy)
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
    pub(crate) fn producer(b: &Arc<dyn RingBackend>, config: RingConfig, dev: &CudaGpu) -> Result<Self> {
        let mut points = heapless::Vec::<Point, { MAX_CONSUMERS + 1 }>::new();
        let _ = points.push(Point::Present);
        for c in 0..config.consumers {
            let _ = points.push(Point::Release(c));
        }
        Self::new(b, dev, (0..config.frames).map(|s| b.cuda_import_rw(dev, s)), &points)
    }

    /// Enqueues a wait for every release fence of `slot` (a producer about to overwrite it).
    pub(crate) fn wait_releases(&self, slot: usize) -> Result<()> {
        for (point, import) in &self.syncs {
            if let Point::Release(_) = point {
                import.wait(&self.stream, slot, self.policy, false)?;
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
        b: &Arc<dyn RingBackend>,
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
