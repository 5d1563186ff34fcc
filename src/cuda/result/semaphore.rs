//! External semaphores (NvSciSync objects, opaque-fd binary and timeline semaphores) and the
//! stream memory operations that wait on and write host counters. Streams, events and host
//! functions are cudarc's `result::{stream, event}`.
//!
//! Contract common to every function here (cuda.h): the context the semaphore was imported into
//! (and the stream belongs to) is current on the calling thread.

use super::check;
use crate::error::Result;
use cudarc::driver::sys;

// cudarc binds the `_v2` stream memory operations (new in CUDA 11.7) from its 11.7 bindings on;
// older bindings have only the original ones, which a driver may keep disabled
// (CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS), in which case the call returns an error.
#[cfg(any(feature = "cuda-11040", feature = "cuda-11050", feature = "cuda-11060"))]
use sys::{cuStreamWaitValue64 as stream_wait_value64_raw, cuStreamWriteValue64 as stream_write_value64_raw};
#[cfg(not(any(feature = "cuda-11040", feature = "cuda-11050", feature = "cuda-11060")))]
use sys::{
    cuStreamWaitValue64_v2 as stream_wait_value64_raw, cuStreamWriteValue64_v2 as stream_write_value64_raw,
};

/// `cuImportExternalSemaphore`: a new semaphore handle, to be destroyed once with
/// [`destroy_external_semaphore`].
///
/// # Safety
/// `desc` is complete and its handle (an NvSciSync object, an fd) valid for the call. An fd
/// handle is the driver's on success ("ownership of the file descriptor is transferred to the
/// CUDA driver"), the caller's still on failure; an NvSciSync object must outlive the import.
pub(crate) unsafe fn import_external_semaphore(
    desc: &sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC,
) -> Result<sys::CUexternalSemaphore> {
    let mut raw = core::ptr::null_mut();
    // SAFETY: caller contract; `raw` is a valid out-pointer.
    check("cuImportExternalSemaphore", unsafe { sys::cuImportExternalSemaphore(&mut raw, desc) })?;
    Ok(raw)
}

/// `cuDestroyExternalSemaphore`.
///
/// # Safety
/// `sem` came from [`import_external_semaphore`], is destroyed once, and the signals and waits
/// queued on it have completed ("the semaphore must not be in use", cuda.h).
pub(crate) unsafe fn destroy_external_semaphore(sem: sys::CUexternalSemaphore) -> Result<()> {
    // SAFETY: caller contract.
    check("cuDestroyExternalSemaphore", unsafe { sys::cuDestroyExternalSemaphore(sem) })
}

/// `cuSignalExternalSemaphoresAsync` of one semaphore on `stream`.
///
/// # Safety
/// `sem` is a live imported semaphore and `stream` a live stream of its context. For an
/// NvSciSync object `params` points to fence storage that stays valid and unshared for the call
/// (the driver writes the new fence into it before returning).
pub(crate) unsafe fn signal_external_semaphore_async(
    sem: sys::CUexternalSemaphore,
    params: &sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS,
    stream: sys::CUstream,
) -> Result<()> {
    // SAFETY: one semaphore and one parameter block, alive for the call; caller contract.
    check("cuSignalExternalSemaphoresAsync", unsafe {
        sys::cuSignalExternalSemaphoresAsync(&sem, params, 1, stream)
    })
}

/// `cuWaitExternalSemaphoresAsync` of one semaphore on `stream`.
///
/// # Safety
/// `sem` is a live imported semaphore and `stream` a live stream of its context. For an
/// NvSciSync object `params` points to a fence valid for the call (the driver copies what it
/// needs before returning).
pub(crate) unsafe fn wait_external_semaphore_async(
    sem: sys::CUexternalSemaphore,
    params: &sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS,
    stream: sys::CUstream,
) -> Result<()> {
    // SAFETY: one semaphore and one parameter block, alive for the call; caller contract.
    check("cuWaitExternalSemaphoresAsync", unsafe {
        sys::cuWaitExternalSemaphoresAsync(&sem, params, 1, stream)
    })
}

/// `cuStreamWaitValue64` (`_v2` in builds for CUDA 11.7 and newer): work queued on `stream` after
/// this waits until the 64-bit word at `addr` satisfies `flags` against `value`.
///
/// # Safety
/// `stream` is a live stream of the current context; `addr` is the device address of 8-byte
/// aligned memory (page-locked host memory mapped into the context, or device memory) that stays
/// allocated until the wait has run. The driver provides the entry point (`_v2`: an 11.7 driver
/// or newer, checked before the import; cudarc panics on a missing symbol).
pub(crate) unsafe fn stream_wait_value64(
    stream: sys::CUstream,
    addr: sys::CUdeviceptr,
    value: u64,
    flags: u32,
) -> Result<()> {
    // SAFETY: caller contract.
    check("cuStreamWaitValue64", unsafe { stream_wait_value64_raw(stream, addr, value, flags) })
}

/// `cuStreamWriteValue64` (`_v2` in builds for CUDA 11.7 and newer): `value` is stored at `addr`
/// once the work queued on `stream` before it has run (flags 0 keep the memory barrier that
/// orders that work before the store).
///
/// # Safety
/// As for [`stream_wait_value64`]; the memory is writable by the device.
pub(crate) unsafe fn stream_write_value64(
    stream: sys::CUstream,
    addr: sys::CUdeviceptr,
    value: u64,
    flags: u32,
) -> Result<()> {
    // SAFETY: caller contract.
    check("cuStreamWriteValue64", unsafe { stream_write_value64_raw(stream, addr, value, flags) })
}
