//! The pixels of a CUDA consumer's frame on the host: copied device -> page-locked host memory on
//! the consumer's stream, straight into the buffers the message is published from, between the
//! present wait that `acquire` enqueued and the release signal that `release` enqueues, so the
//! ring's fences order them on both sides.
//!
//! One copy per plane, of exactly the message's rows: a pitch-linear plane whose rows the
//! message takes as stored is one `cuMemcpyDtoHAsync` of its bytes; a plane whose rows are
//! packed narrower than its pitch is one `cuMemcpy2DAsync` from the frame's mapping; a
//! block-linear plane is one `cuMemcpy2DAsync` from its CUDA array (the copy engine lays the
//! tiles out as rows). A pitch-linear frame in host memory mapped for the device (the mock
//! NvSci's frames) is copied by a kernel instead ([`crate::copy_kernel`]): a copy engine's copy
//! from host memory into page-locked host memory is synchronous with respect to the host, so it
//! would hold the bridge's thread for the whole copy and undo the pipelining below. The host
//! buffers come from a pool and go back to it when Zenoh drops the message, so no frame
//! allocates or copies on the CPU.
//!
//! The bridge pipelines frames: once a frame's copies are done, it enqueues the next frame's
//! (if the mailbox has one) before it puts the done frame's message, then waits for them after
//! the put, so a frame's copies run while the previous one is published. One frame's copies are
//! pending at a time (`enqueue` after `finish`); the done frame's buffers are lent to Zenoh
//! meanwhile, the pending frame's taken from the pool (four buffers kept: two frames of two
//! planes).

use crate::copy_kernel::{self, CopyRows, RowCopy};
use crate::pool::{Lendable, Pool};
use crate::rows::{Plan, PlaneRows};
use nvsci::cuda::cudarc::driver::{result, sys, CudaEvent, CudaStream, PinnedHostSlice};
use nvsci::pipeline::{Consumer, ConsumerFrame};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use zenoh::bytes::ZBytes;

/// Page-locked host memory of one plane's rows, and where it is.
pub(crate) struct Pinned {
    /// Owned: freed (`cuMemFreeHost`) when dropped.
    _mem: PinnedHostSlice<u8>,
    ptr: *mut u8,
    len: usize,
    /// The same memory's device address (for the copy kernel).
    dev: sys::CUdeviceptr,
}

// SAFETY: `PinnedHostSlice` is `Send` and `Sync` (cudarc); `ptr` points into it and is only
// written by copies enqueued while the bridge's thread owns it, and only read once those copies
// completed (`Readback::finish`), by whichever thread holds it then.
unsafe impl Send for Pinned {}

impl Lendable for Pinned {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `len` bytes of page-locked memory at `ptr`, alive as long as `mem`; lent only
        // after the copy that filled them completed.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Pinned {
    fn alloc(stream: &CudaStream, len: usize) -> nvsci::Result<Self> {
        // Flags 0: cacheable page-locked memory, which the CPU (Zenoh's serialisation) reads at
        // full speed (cudarc's `alloc_pinned` asks for write-combined memory, which the CPU reads
        // uncached: right for uploads, slow for a read-back).
        // SAFETY: `alloc_pinned_with_flags` is unsafe because the memory is left uninitialised;
        // every byte is written by a copy before anything reads it (`Readback::finish` lends it
        // only after the copies completed), and u8 has no invalid bit patterns.
        let mut mem = unsafe { stream.context().alloc_pinned_with_flags::<u8>(len, 0) }?;
        // No work was recorded on the slice's event yet: this does not wait.
        let ptr = mem.as_mut_slice()?.as_mut_ptr();
        let mut dev: sys::CUdeviceptr = 0;
        // SAFETY: `ptr` is page-locked memory of this context (allocated above; the context is
        // bound by the allocation); flags must be 0.
        cuda("cuMemHostGetDevicePointer", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut dev, ptr.cast(), 0)
        })?;
        Ok(Self { _mem: mem, ptr, len, dev })
    }
}

/// Buffers kept for reuse: two frames' planes (the one Zenoh is sending, the next one).
const POOL: usize = 4;

/// The copies of one CUDA consumer's frames, and the events recorded around them.
pub(crate) struct Readback {
    pool: Arc<Pool<Pinned>>,
    /// The buffers the copies enqueued last write into, one per plane.
    pending: nvsci::heapless::Vec<Pinned, 2>,
    /// Recorded before and after the copies (timing enabled).
    start: Option<CudaEvent>,
    done: Option<CudaEvent>,
    /// Slot and sequence of the frame whose copies were enqueued last.
    frame: (usize, u64),
    /// The copy kernel, loaded at the first frame in host memory.
    kernel: Option<CopyRows>,
    /// Whether the consumer's frames are host memory, asked of the driver at its first
    /// pitch-linear frame: every frame of one stream comes from the same reconciled attributes.
    host_memory: Option<bool>,
}

impl Default for Readback {
    fn default() -> Self {
        Self {
            pool: Pool::new(POOL),
            pending: Default::default(),
            start: None,
            done: None,
            frame: (0, 0),
            kernel: None,
            host_memory: None,
        }
    }
}

/// Polls of the copy's event with a yield before the waits turn into sleeps of `NAP`.
const SPINS: u32 = 2000;
const NAP: Duration = Duration::from_micros(100);

/// What the copies of one frame produced: the message's pixels, one slice per plane, and the
/// time the device spent on the copies.
pub(crate) struct Copied {
    pub planes: nvsci::heapless::Vec<ZBytes, 2>,
    pub copy_ns: u64,
}

pub(crate) fn no_stream() -> nvsci::Error {
    nvsci::Error::InvalidArgument {
        name: "consumer",
        reason: "a device -> host copy needs a consumer on a CUDA engine".into(),
    }
}

fn cuda(function: &'static str, r: sys::CUresult) -> nvsci::Result<()> {
    r.result().map_err(|e| {
        log::debug!("bridge consumer: {function} failed: {e:?}");
        nvsci::Error::from(e)
    })
}

impl Readback {
    /// Enqueues on the consumer's stream (after the frame's present wait, which `acquire`
    /// enqueued there) the copies of a held frame's rows, as `plan` lays them out, into pinned
    /// buffers. Release the frame after this (its release signal then follows the copies on
    /// the stream), then [`finish`](Self::finish). Returns how many planes the copy kernel
    /// copies (a frame in host memory), the others a copy engine.
    pub(crate) fn enqueue(
        &mut self,
        consumer: &Consumer,
        frame: &ConsumerFrame,
        plan: &Plan,
    ) -> nvsci::Result<u64> {
        let stream = consumer.stream().ok_or_else(no_stream)?;
        self.frame = (frame.index(), frame.sequence());
        let refuse = |reason: String| nvsci::Error::InvalidArgument { name: "frame", reason };
        // Where each plane's rows come from, checked against the plan before anything is
        // enqueued.
        let mut sources = nvsci::heapless::Vec::<Src, 2>::new();
        if plan.block_linear {
            let arrays = consumer.cuda_planes(frame)?;
            let fits = arrays.len() == plan.planes.len()
                && arrays.iter().zip(&plan.planes).all(|(a, p)| {
                    let d = a.array().desc();
                    d.width * d.bytes_per_texel as usize == p.step && d.height == p.rows
                });
            if !fits {
                let descs: Vec<_> = arrays.iter().map(|a| a.array().desc()).collect();
                return Err(refuse(format!("plane arrays {descs:?} for rows {:?}", plan.planes)));
            }
            for a in arrays {
                let _ = sources.push(Src::Array(a.array().level0()));
            }
        } else {
            let buffer = consumer.cuda_buffer(frame)?;
            let len = nvsci::cuda::cudarc::driver::DeviceSlice::len(buffer);
            if plan.frame_bytes() > len {
                return Err(refuse(format!(
                    "a mapping of {len} bytes for rows up to {}",
                    plan.frame_bytes()
                )));
            }
            for p in &plan.planes {
                let _ = sources.push(Src::Device(buffer.device_address() + p.offset as u64, p.pitch));
            }
        }
        let ctx = stream.context();
        let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        if self.start.is_none() {
            self.start = Some(ctx.new_event(timing)?);
        }
        if self.done.is_none() {
            self.done = Some(ctx.new_event(timing)?);
        }
        // The buffers, from the pool where it has them.
        debug_assert!(self.pending.is_empty());
        for p in &plan.planes {
            let len = p.len();
            let buf = match self.pool.take(|b| b.len == len) {
                Some(b) => b,
                None => match Pinned::alloc(stream, len) {
                    Ok(b) => b,
                    Err(e) => {
                        self.unused();
                        return Err(e);
                    }
                },
            };
            let _ = self.pending.push(buf);
        }
        let (Some(start), Some(done)) = (&self.start, &self.done) else {
            self.unused();
            return Err(no_stream());
        };
        if let Err(e) = start.record(stream).and_then(|()| ctx.bind_to_thread()) {
            self.unused();
            return Err(e.into());
        }
        // A frame in host memory: copied by the kernel (see the module's doc).
        let host = match sources.first() {
            Some(Src::Device(at, _)) => {
                *self.host_memory.get_or_insert_with(|| copy_kernel::is_host_memory(*at))
            }
            _ => false,
        };
        if host && self.kernel.is_none() {
            match CopyRows::load(ctx) {
                Ok(k) => self.kernel = Some(k),
                Err(e) => {
                    self.unused();
                    return Err(e);
                }
            }
        }
        let kernel = if host { self.kernel.as_ref() } else { None };
        let by_kernel = if kernel.is_some() { plan.planes.len() as u64 } else { 0 };
        let mut copied = Ok(());
        for ((p, dst), src) in plan.planes.iter().zip(&self.pending).zip(sources) {
            // SAFETY: the source rows are the held frame's: inside its mapping (checked above;
            // the consumer keeps it mapped while the ring lives) or level 0 of its plane's CUDA
            // array of exactly these rows (checked above; the consumer's, dropped only after
            // the context's queued work); the frame's release is enqueued after these copies, so
            // the producer does not rewrite it meanwhile. `dst` holds `p.len()` bytes that
            // nothing reads or frees before the copy completed (`finish`, or leaked). The
            // context is current (bound above).
            copied = unsafe { copy_2d(stream, kernel, src, dst, p) };
            if copied.is_err() {
                break;
            }
        }
        if let Err(e) = copied.and_then(|()| done.record(stream).map_err(Into::into)) {
            // A copy may have been enqueued into these buffers: never free them under it.
            self.forget_pending();
            return Err(e);
        }
        Ok(by_kernel)
    }

    /// Buffers taken for copies that were never enqueued: back to the pool.
    fn unused(&mut self) {
        for b in self.pending.drain(..) {
            self.pool.give_back(b);
        }
    }

    fn forget_pending(&mut self) {
        for b in self.pending.drain(..) {
            std::mem::forget(b);
        }
    }

    /// Waits until the copies that [`enqueue`](Self::enqueue) queued are done and returns the
    /// planes' bytes as message slices (their buffers back in the pool when Zenoh drops them).
    /// The wait is bounded, so a present fence that never expires cannot hold the bridge's
    /// thread (and a drop of the bridge) forever: it gives up after `timeout`, or `grace` after
    /// `stop` is set, with [`nvsci::Error::Timeout`] naming the frame's present fence; the
    /// buffers the copies still target are then leaked (freeing them under a pending copy would
    /// be undefined), and the next frame takes others.
    pub(crate) fn finish(
        &mut self,
        stop: &AtomicBool,
        grace: Duration,
        timeout: Duration,
    ) -> nvsci::Result<Copied> {
        let (Some(start), Some(done)) = (&self.start, &self.done) else {
            return Err(nvsci::Error::InvalidArgument {
                name: "consumer",
                reason: "no device -> host copy was enqueued".into(),
            });
        };
        let began = Instant::now();
        let mut stopping: Option<Instant> = None;
        let mut polls = 0u32;
        loop {
            match done.try_is_complete() {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => {
                    self.forget_pending();
                    return Err(e.into());
                }
            }
            if stopping.is_none() && stop.load(Ordering::Acquire) {
                stopping = Some(Instant::now());
            }
            let limit = stopping.is_some_and(|at| at.elapsed() >= grace);
            if limit || began.elapsed() >= timeout {
                self.forget_pending();
                let (slot, sequence) = self.frame;
                return Err(nvsci::Error::Timeout {
                    waited_for: nvsci::Wait::PresentFence { slot, sequence },
                    timeout: if limit { grace } else { timeout },
                });
            }
            polls += 1;
            if polls < SPINS {
                std::thread::yield_now();
            } else {
                std::thread::sleep(NAP);
            }
        }
        let copy_ns = start.elapsed_ms(done).map_or(0, |ms| (ms as f64 * 1e6) as u64);
        let mut planes = nvsci::heapless::Vec::new();
        for b in self.pending.drain(..) {
            let _ = planes.push(self.pool.lend(b));
        }
        Ok(Copied { planes, copy_ns })
    }
}

impl Drop for Readback {
    fn drop(&mut self) {
        // Buffers of copies enqueued and never waited for (the bridge's thread waits for them
        // before it ends, `Worker::drain`, so only if it unwound): leaked, never freed under a
        // copy that may still be pending.
        self.forget_pending();
    }
}

/// Where a plane's rows come from.
enum Src {
    /// The frame's mapping: the first row's device address, and the pitch.
    Device(sys::CUdeviceptr, usize),
    /// Level 0 of a block-linear plane's CUDA array.
    Array(sys::CUarray),
}

/// Enqueues on `stream` the copy of `p.rows` rows of `p.step` bytes from `src` into `dst`, rows
/// packed: with `kernel` where given (rows in the frame's mapping only), else
/// `cuMemcpyDtoHAsync` where the rows lie back to back and `cuMemcpy2DAsync` otherwise.
///
/// # Safety
/// `src` holds the rows and stays valid until the copy completed; `dst` holds `p.len()` bytes
/// and nothing reads or frees it before the copy completed; `stream`'s context is current.
unsafe fn copy_2d(
    stream: &CudaStream,
    kernel: Option<&CopyRows>,
    src: Src,
    dst: &Pinned,
    p: &PlaneRows,
) -> nvsci::Result<()> {
    debug_assert_eq!(dst.len, p.len());
    match (src, kernel) {
        (Src::Device(at, pitch), Some(k)) => {
            let (step, rows) = (p.step as u64, p.rows as u64);
            let copy = RowCopy {
                src: at,
                src_pitch: pitch as u64,
                dst: dst.dev,
                dst_pitch: step,
                width: step,
                rows,
            };
            // SAFETY: caller contract: `src` holds `rows` rows `pitch` apart of at least `step`
            // bytes; `dst` (its device address) holds `rows * step` bytes.
            unsafe { k.enqueue(stream, &copy) }
        }
        // SAFETY: caller contract, the same as `copy_engine`'s.
        (src, _) => unsafe { copy_engine(stream, src, dst, p) },
    }
}

/// [`copy_2d`] by a copy engine.
///
/// # Safety
/// As [`copy_2d`].
unsafe fn copy_engine(stream: &CudaStream, src: Src, dst: &Pinned, p: &PlaneRows) -> nvsci::Result<()> {
    match src {
        Src::Device(at, pitch) if pitch == p.step => {
            // SAFETY: caller contract; the slice covers exactly `dst`'s bytes, handed to the
            // driver and not touched by Rust until the copy completed.
            let d = unsafe { std::slice::from_raw_parts_mut(dst.ptr, dst.len) };
            // SAFETY: caller contract: `src` holds `dst.len` bytes.
            unsafe { result::memcpy_dtoh_async(d, at, stream.cu_stream()) }.map_err(Into::into)
        }
        src => {
            let (src_type, src_device, src_array, src_pitch) = match src {
                Src::Device(at, pitch) => {
                    (sys::CUmemorytype::CU_MEMORYTYPE_DEVICE, at, std::ptr::null_mut(), pitch)
                }
                Src::Array(a) => (sys::CUmemorytype::CU_MEMORYTYPE_ARRAY, 0, a, 0),
            };
            let copy = sys::CUDA_MEMCPY2D {
                srcXInBytes: 0,
                srcY: 0,
                srcMemoryType: src_type,
                srcHost: std::ptr::null(),
                srcDevice: src_device,
                srcArray: src_array,
                srcPitch: src_pitch,
                dstXInBytes: 0,
                dstY: 0,
                dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
                dstHost: dst.ptr.cast(),
                dstDevice: 0,
                dstArray: std::ptr::null_mut(),
                dstPitch: p.step,
                WidthInBytes: p.step,
                Height: p.rows,
            };
            // SAFETY: caller contract; the descriptor names `p.rows` rows of `p.step` bytes on
            // both sides, the source rows `src_pitch` apart (or the array's level 0), the
            // destination rows packed in `dst`.
            cuda("cuMemcpy2DAsync", unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) })
        }
    }
}
