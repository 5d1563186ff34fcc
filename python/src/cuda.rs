//! Ordering between the consumer's CUDA stream and a caller's stream, with events: the array
//! API's stream semantics for `__dlpack__(stream=...)`.

use nvsci::cuda::cudarc::driver::{result, sys, CudaStream, DriverError};
use nvsci::cuda::CudaGpu;

/// A caller's stream as DLPack names it, resolved to a `CUstream` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Foreign(pub(crate) usize);

/// CUDA's `CU_STREAM_LEGACY`.
pub(crate) const LEGACY: Foreign = Foreign(0x1);
/// CUDA's `CU_STREAM_PER_THREAD`.
pub(crate) const PER_THREAD: Foreign = Foreign(0x2);

impl Foreign {
    pub(crate) fn raw(self) -> sys::CUstream {
        self.0 as sys::CUstream
    }
}

/// A failed driver call and its name.
pub(crate) type Failed = (&'static str, DriverError);

fn call(function: &'static str, r: sys::CUresult) -> Result<(), Failed> {
    r.result().map_err(|e| (function, e))
}

/// Makes `gpu`'s context current on this thread (events and waits are made in it).
fn bind(gpu: &CudaGpu) -> Result<(), Failed> {
    gpu.context().bind_to_thread().map_err(|e| ("cuCtxSetCurrent", e))
}

/// Work enqueued on `to` after this call waits for the work enqueued on `from` before it.
fn order(gpu: &CudaGpu, from: sys::CUstream, to: sys::CUstream) -> Result<(), Failed> {
    bind(gpu)?;
    let event = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
        .map_err(|e| ("cuEventCreate", e))?;
    // SAFETY: `event` was just created in the current context and is destroyed below, after
    // the record and the wait were enqueued (cuEventDestroy lets enqueued work finish using
    // it: "resources associated with hEvent will be released automatically once the device
    // has completed hEvent"); `from` and `to` are live streams of the device (the consumer's,
    // and one the caller vouched for and whose device was checked).
    let done = unsafe {
        call("cuEventRecord", sys::cuEventRecord(event, from)).and_then(|()| {
            call(
                "cuStreamWaitEvent",
                sys::cuStreamWaitEvent(to, event, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT as u32),
            )
        })
    };
    // SAFETY: see above; the event is not used again.
    let destroyed = unsafe { result::event::destroy(event) }.map_err(|e| ("cuEventDestroy", e));
    done.and(destroyed)
}

/// The caller's stream waits for what the consumer's stream has enqueued (its wait for the
/// frame's present fence).
pub(crate) fn caller_waits(gpu: &CudaGpu, ours: &CudaStream, theirs: Foreign) -> Result<(), Failed> {
    order(gpu, ours.cu_stream(), theirs.raw())
}

/// The consumer's stream (whose next work is the release signal) waits for the caller's.
pub(crate) fn consumer_waits(gpu: &CudaGpu, ours: &CudaStream, theirs: Foreign) -> Result<(), Failed> {
    order(gpu, theirs.raw(), ours.cu_stream())
}

/// Work enqueued on the caller's stream `to` after this call waits for the work enqueued on
/// the caller's stream `from` before it.
pub(crate) fn after(gpu: &CudaGpu, from: Foreign, to: Foreign) -> Result<(), Failed> {
    order(gpu, from.raw(), to.raw())
}

/// Waits on the CPU for all work on `gpu`'s context (a release whose readers are unknown).
pub(crate) fn synchronize(gpu: &CudaGpu) -> Result<(), Failed> {
    gpu.context().synchronize().map_err(|e| ("cuCtxSynchronize", e))
}

/// The ordinal of the device a caller's stream belongs to. The two default-stream handles
/// belong to the current context, which is `gpu`'s.
pub(crate) fn device_of(gpu: &CudaGpu, s: Foreign) -> Result<usize, Failed> {
    if s == LEGACY || s == PER_THREAD {
        return Ok(gpu.context().ordinal());
    }
    bind(gpu)?;
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: the caller handed `s` as a live CUstream (the array API's contract for
    // `__dlpack__(stream=...)`); cuStreamGetCtx writes its context to `ctx`.
    unsafe { call("cuStreamGetCtx", sys::cuStreamGetCtx(s.raw(), &mut ctx))? };
    // SAFETY: `ctx` is the live context of a live stream; it is pushed, queried and popped,
    // leaving the thread's context stack as it was.
    unsafe {
        call("cuCtxPushCurrent", sys::cuCtxPushCurrent_v2(ctx))?;
        let mut dev: sys::CUdevice = 0;
        let got = call("cuCtxGetDevice", sys::cuCtxGetDevice(&mut dev));
        let mut popped: sys::CUcontext = std::ptr::null_mut();
        let pop = call("cuCtxPopCurrent", sys::cuCtxPopCurrent_v2(&mut popped));
        got.and(pop)?;
        Ok(dev as usize)
    }
}

/// Rows of bytes to copy into a frame's plane: `rows` rows of `row_bytes` contiguous bytes,
/// `pitch` bytes apart, in host memory or in device memory of the frame's device.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rows {
    pub(crate) ptr: u64,
    pub(crate) pitch: usize,
    pub(crate) rows: usize,
    pub(crate) row_bytes: usize,
    pub(crate) host: bool,
}

/// Enqueues on `stream` the copy of `src` into device memory at `dst`, rows `dst_pitch` apart
/// (`cuMemcpy2DAsync`).
///
/// # Safety
/// `src` must describe memory that stays readable until the copy has run (host memory: until
/// this call returns, which for pageable memory is once the bytes were staged; device memory:
/// until the work enqueued on `stream` by this call finished), and `dst` `src.rows` rows of
/// `src.row_bytes` writable bytes, `dst_pitch` apart, in `gpu`'s context.
pub(crate) unsafe fn copy_rows(
    gpu: &CudaGpu,
    stream: &CudaStream,
    src: Rows,
    dst: u64,
    dst_pitch: usize,
) -> Result<(), Failed> {
    bind(gpu)?;
    let p = sys::CUDA_MEMCPY2D_st {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: if src.host {
            sys::CUmemorytype::CU_MEMORYTYPE_HOST
        } else {
            sys::CUmemorytype::CU_MEMORYTYPE_DEVICE
        },
        srcHost: if src.host { src.ptr as *const std::ffi::c_void } else { std::ptr::null() },
        srcDevice: if src.host { 0 } else { src.ptr },
        srcArray: std::ptr::null_mut(),
        srcPitch: src.pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst,
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: src.row_bytes,
        Height: src.rows,
    };
    // SAFETY: the caller vouches for both ranges (see above); `p` describes them and outlives
    // the call, which reads it before returning.
    unsafe { call("cuMemcpy2DAsync", sys::cuMemcpy2DAsync_v2(&p, stream.cu_stream())) }
}

/// An event recorded on a stream after some work: `done` says whether that work finished.
pub(crate) struct Recorded(sys::CUevent);

// SAFETY: a CUevent is a handle the driver accepts from any thread (the context is made
// current before each use); this wrapper is its only owner and destroys it once.
unsafe impl Send for Recorded {}
// SAFETY: as above; `&Recorded` only queries or waits on the event, which the driver allows
// from several threads at once.
unsafe impl Sync for Recorded {}

impl Recorded {
    /// Records an event on `stream` after the work enqueued on it so far.
    pub(crate) fn after(gpu: &CudaGpu, stream: &CudaStream) -> Result<Self, Failed> {
        bind(gpu)?;
        let e = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(|e| ("cuEventCreate", e))?;
        let me = Self(e);
        // SAFETY: `e` is a live event of the current context and `stream` a live stream of it.
        unsafe { call("cuEventRecord", sys::cuEventRecord(me.0, stream.cu_stream()))? };
        Ok(me)
    }

    /// Whether the work before the event finished (an error counts as finished: nothing more
    /// will run of it).
    pub(crate) fn done(&self, gpu: &CudaGpu) -> bool {
        if bind(gpu).is_err() {
            return true;
        }
        // SAFETY: the event is live (owned by `self`).
        let r = unsafe { sys::cuEventQuery(self.0) };
        r != sys::CUresult::CUDA_ERROR_NOT_READY
    }

    /// Waits on the CPU for the work before the event.
    pub(crate) fn wait(&self, gpu: &CudaGpu) {
        if bind(gpu).is_ok() {
            // SAFETY: the event is live (owned by `self`).
            let _ = unsafe { sys::cuEventSynchronize(self.0) };
        }
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        // SAFETY: the event is live and destroyed once, here; cuEventDestroy lets enqueued
        // work that uses it finish ("resources ... released automatically once the device has
        // completed hEvent").
        let _ = unsafe { result::event::destroy(self.0) };
    }
}

/// A CUDA stream of `gpu`'s device (a CUDA producer's, or a caller's) as DLPack's
/// `__dlpack__(stream=...)` names it: importing a CUDA array through it makes the stream wait
/// for the work that made the array.
pub(crate) struct ImportStream<'a> {
    pub(crate) gpu: &'a CudaGpu,
    pub(crate) stream: sys::CUstream,
}

// SAFETY: `as_python_arg` names a live stream of the device (a CUDA producer's, which outlives
// the import call, or one the caller vouched for and whose device was checked) in the CUDA
// convention (1 for the null stream) and only for a CUDA device; `wait_for_producer` orders it
// after the producer's live stream with an event.
unsafe impl dlpark::python::consumer::DlpackStream for ImportStream<'_> {
    fn as_python_arg(
        &self,
        _py: pyo3::Python<'_>,
        device: dlpark::ffi::DLDevice,
    ) -> pyo3::PyResult<dlpark::python::consumer::StreamArg> {
        Ok(if device.device_type == dlpark::ffi::DLDeviceType::CUDA {
            dlpark::python::consumer::stream::cuda(self.stream.cast())
        } else {
            dlpark::python::consumer::stream::none()
        })
    }

    unsafe fn wait_for_producer(
        &self,
        device: dlpark::ffi::DLDevice,
        producer: *mut std::ffi::c_void,
    ) -> pyo3::PyResult<bool> {
        if device.device_type != dlpark::ffi::DLDeviceType::CUDA {
            return Ok(false);
        }
        // Work on one stream is ordered already: the null stream and CU_STREAM_LEGACY are the
        // same (the legacy default stream), as PyTorch's default stream and DLPack's 1 name it.
        let legacy = |s: sys::CUstream| s.is_null() || s as usize == LEGACY.0;
        let producer: sys::CUstream = producer.cast();
        if producer == self.stream || (legacy(producer) && legacy(self.stream)) {
            return Ok(true);
        }
        Ok(order(self.gpu, producer, self.stream).is_ok())
    }
}

/// The ordinal of the device whose memory `ptr` (a device address) is.
pub(crate) fn device_of_pointer(gpu: &CudaGpu, ptr: u64) -> Result<usize, Failed> {
    bind(gpu)?;
    let mut ordinal: i32 = -1;
    // SAFETY: cuPointerGetAttribute writes one int for CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL to
    // `ordinal`, which outlives the call; any `ptr` value is allowed (an unknown one fails).
    unsafe {
        call(
            "cuPointerGetAttribute",
            sys::cuPointerGetAttribute(
                (&mut ordinal as *mut i32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                ptr,
            ),
        )?
    };
    Ok(ordinal.max(0) as usize)
}
