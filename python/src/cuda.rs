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
    fn raw(self) -> sys::CUstream {
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
