//! What a ring party on a CUDA engine offers beyond the tokens: its stream and memory-sync
//! policy, the frame's mapping, and the convenience closures `produce` / `process` built on the
//! tokens. Per frame only work is enqueued on the party's stream (wait for the other side's
//! fence, the user's kernels, signal this side's fence); nothing here blocks the CPU on a fence
//! or allocates per frame.

use super::format::FrameLayout;
use super::party::{ConsumerEngine, CudaParty, ProducerEngine};
use super::ring::{Consumer, Producer};
use crate::cuda::cudarc::driver::{CudaStream, HostSlice};
use crate::cuda::{ArraySurface, ArrayTexture, MappedBuffer, MemSync, ReadOnly, ReadWrite};
use crate::error::{invalid, Error, Result};
use std::sync::Arc;

/// Copies `src` (one pitch-linear buffer per plane, rows packed: `width * bytes per texel`
/// bytes each, `height` rows) into level 0 of each plane's array on `stream`: the GPU's copy
/// engine lays the rows out in the planes' block-linear order (`cuMemcpy2DAsync` into the
/// mapped array).
fn upload<H: HostSlice<u8> + ?Sized>(
    planes: &[ArraySurface<ReadWrite>],
    stream: &CudaStream,
    src: &[&H],
) -> Result<()> {
    if planes.is_empty() {
        return Err(invalid(
            "frame",
            "a pitch-linear frame has no plane arrays: write its bytes through its linear mapping",
        ));
    }
    if src.len() != planes.len() {
        return Err(invalid("src", format!("{} buffers for {} planes", src.len(), planes.len())));
    }
    for (plane, &s) in planes.iter().zip(src) {
        let a = plane.array();
        let d = a.desc();
        a.copy_from_host_async(stream, 0, crate::cuda::ArrayRegion::new(0, 0, d.width, d.height), s)?;
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
    planes: &'a [ArrayTexture<ReadOnly>],
    stream: &'a Arc<CudaStream>,
    layout: &'a FrameLayout,
    index: usize,
    sequence: u64,
}

impl<'a> CudaFrame<'a> {
    /// The frame mapped read-only in the consumer's context, as one linear buffer (for a
    /// block-linear frame: its tiled bytes, a mapping made at the first `process` of the slot;
    /// see [`Consumer::cuda_buffer`]).
    pub fn buffer(&self) -> &'a MappedBuffer<ReadOnly> {
        self.buffer
    }
    /// Device address of the frame's first byte.
    pub fn device_address(&self) -> u64 {
        self.buffer.device_address()
    }
    /// A block-linear frame's planes, each a CUDA array (mapped read-only, flags 0) with a
    /// texture object that reads exact texels (point filtering, texel indices, integers as
    /// stored), in plane order (NV12: luma as one-channel 8-bit texels, chroma as two-channel
    /// ones); empty for a pitch-linear frame, whose planes are read at
    /// [`device_address`](Self::device_address) plus each plane's offset.
    pub fn planes(&self) -> &'a [ArrayTexture<ReadOnly>] {
        self.planes
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
    planes: &'a [ArraySurface<ReadWrite>],
    stream: &'a Arc<CudaStream>,
    layout: &'a FrameLayout,
    index: usize,
    sequence: u64,
}

impl CudaFrameMut<'_> {
    /// The frame mapped read-write in the producer's context, as one linear buffer (for a
    /// block-linear frame: its tiled bytes, a mapping made at the first `produce` of the slot;
    /// see [`Producer::cuda_buffer`]).
    pub fn buffer(&mut self) -> &mut MappedBuffer<ReadWrite> {
        self.buffer
    }
    /// Device address of the frame's first byte.
    pub fn device_address(&self) -> u64 {
        self.buffer.device_address()
    }
    /// A block-linear frame's planes, each a CUDA array with a surface object for `sust` /
    /// `suld`, in plane order; empty for a pitch-linear frame.
    pub fn planes(&self) -> &[ArraySurface<ReadWrite>] {
        self.planes
    }
    /// The stream to enqueue work on (after the release-fence waits, before the present signal).
    pub fn stream(&self) -> &Arc<CudaStream> {
        self.stream
    }
    /// Lays pitch-linear pixels from host memory out into this block-linear frame on the GPU,
    /// as [`Producer::upload_planes`] does (whose doc says why that one is the production path:
    /// [`Producer::produce`] maps the frame linearly before its closure runs).
    pub fn upload_planes<H: HostSlice<u8> + ?Sized>(&self, src: &[&H]) -> Result<()> {
        upload(self.planes, self.stream, src)
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
    ///
    /// A pitch-linear frame is mapped when the ring is split. A block-linear frame is written
    /// through its planes' arrays ([`CudaFrameMut::planes`]); its linear mapping (the tiled
    /// bytes, which no NVIDIA sample maps) is made only here, once per slot, at the first
    /// request: where the driver refuses it, a typed CUDA error.
    pub fn cuda_buffer<'a>(
        &'a mut self,
        frame: &'a super::ring::ProducerFrame,
    ) -> Result<&'a mut MappedBuffer<ReadWrite>> {
        if frame.ring_id() != self.ring_id() {
            return Err(invalid("frame", "the frame comes from another ring"));
        }
        match &mut self.engine {
            ProducerEngine::Cuda(p) => p.linear_mut(frame.index()),
            ProducerEngine::Cpu(_) => Err(not_cuda("cuda_buffer")),
        }
    }

    /// The production path for pixels a CPU makes into a block-linear frame (NvSciBuf's
    /// `NvSciBufObjPutPixels` is "restricted for use in debug software only", nvscibuf.h,
    /// DRIVE OS 6.0.10): the CPU writes pitch-linear host memory and the GPU lays it out. For a
    /// held frame of a CUDA producer, enqueues on [`stream`](Self::stream) one copy per
    /// NvSciBuf plane (`cuMemcpy2DAsync` into the plane's mapped array; NV12: luma, then the
    /// interleaved chroma) from `src`, one buffer per plane, rows packed (`width * bytes per
    /// texel` bytes each, `height` rows, as [`CudaFrameMut::planes`]' arrays describe them).
    /// The ring's fences order it: the copy runs after the release waits that
    /// [`acquire`](Self::acquire) enqueued, and [`present`](Self::present) signals after it.
    /// This call maps nothing linearly. [`CudaFrameMut::upload_planes`] inside
    /// [`produce`](Self::produce) does the same copies, but `produce` maps the frame linearly
    /// first, which the driver may refuse for a block-linear image: call this one between
    /// `acquire` and `present` instead.
    ///
    /// Pinned host memory ([`PinnedHostSlice`](crate::cuda::cudarc::driver::PinnedHostSlice)
    /// of the producer's context) returns at once, its event guarding later writes to it; any
    /// other host memory returns once the copy is done. `InvalidArgument` naming `frame` for a
    /// pitch-linear frame or a frame of another ring, `src` for a buffer count other than the
    /// plane count or a buffer of another size; a CPU producer is refused (`engine`).
    pub fn upload_planes<H: HostSlice<u8> + ?Sized>(
        &self,
        frame: &super::ring::ProducerFrame,
        src: &[&H],
    ) -> Result<()> {
        if frame.ring_id() != self.ring_id() {
            return Err(invalid("frame", "the frame comes from another ring"));
        }
        let p = self.cuda().ok_or_else(|| not_cuda("upload_planes"))?;
        let planes = p.planes.get(frame.index()).map_or(&[][..], |v| &v[..]);
        upload(planes, &p.stream, src)
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
            p.linear_mut(frame.index())?;
            let on_unwind = p.stream.clone();
            let guard = SyncOnUnwind(&on_unwind);
            let (buffer, planes, stream) = p.view_mut(frame.index())?;
            let mut view = CudaFrameMut {
                buffer,
                planes,
                stream,
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
    ///
    /// A pitch-linear frame is mapped when the ring is split. A block-linear frame is read
    /// through its planes' textures ([`cuda_planes`](Self::cuda_planes)); its linear mapping
    /// (the tiled bytes, which no NVIDIA sample maps) is made only here, once per slot, at the
    /// first request: where the driver refuses it, a typed CUDA error.
    pub fn cuda_buffer(&self, frame: &super::ring::ConsumerFrame) -> Result<&MappedBuffer<ReadOnly>> {
        if frame.ring_id() != self.ring_id() || frame.consumer() != self.id() {
            return Err(invalid("frame", "the frame was acquired by another consumer or ring"));
        }
        self.cuda().ok_or_else(|| not_cuda("cuda_buffer"))?.linear(frame.index())
    }

    /// A held block-linear frame's planes as read-only arrays (mapped with flags 0) with
    /// texture objects in a CUDA consumer's context (empty for a pitch-linear frame): enqueue
    /// their reads on [`stream`](Self::stream) between [`acquire`](Self::acquire) and
    /// [`release`](Self::release). Reading a block-linear frame this way maps nothing linearly.
    pub fn cuda_planes(&self, frame: &super::ring::ConsumerFrame) -> Result<&[ArrayTexture<ReadOnly>]> {
        if frame.ring_id() != self.ring_id() || frame.consumer() != self.id() {
            return Err(invalid("frame", "the frame was acquired by another consumer or ring"));
        }
        let p = self.cuda().ok_or_else(|| not_cuda("cuda_planes"))?;
        Ok(p.planes.get(frame.index()).map_or(&[][..], |v| &v[..]))
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
            let buffer = match p.linear(frame.index()) {
                Ok(b) => b,
                Err(e) => {
                    // Hand the frame back (nothing was enqueued for it) before failing.
                    drop(guard);
                    self.release(frame)?;
                    return Err(e);
                }
            };
            let view = CudaFrame {
                buffer,
                planes: p.planes.get(frame.index()).map_or(&[][..], |v| &v[..]),
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
