//! The GPU entry points of the emulation ([`NvSciHostGpuFns`]): host memory of buffers, the sync
//! counter, engine fences and GPU attribute lists.

use crate::attrs::RawPair;
use crate::buf;
use crate::ffi::{bad, guard, non_null};
use crate::sync;
use crate::sync::obj::Signaler;
use nvsci_sys::*;
use std::os::raw::c_void;

/// `flags` bit of [`sync_attr_list_fill_gpu`]: the GPU signals (`CUDA_NVSCISYNC_ATTR_SIGNAL`).
const FILL_SIGNAL: i32 = 1;
/// `flags` bit of [`sync_attr_list_fill_gpu`]: the GPU waits (`CUDA_NVSCISYNC_ATTR_WAIT`).
const FILL_WAIT: i32 = 2;

/// The table of the entry points.
pub(crate) fn fns() -> NvSciHostGpuFns {
    NvSciHostGpuFns {
        BufObjGetHostMemory: Some(buf_obj_get_host_memory),
        SyncObjGetCounter: Some(sync_obj_get_counter),
        SyncObjGenerateEngineFence: Some(sync_obj_generate_engine_fence),
        SyncAttrListFillGpu: Some(sync_attr_list_fill_gpu),
        SyncCounterNotify: Some(sync_counter_notify),
        BufObjExportGpuMemory: Some(buf_obj_export_gpu_memory),
    }
}

/// Wakes the CPU waiters of the counter at `counter` (see `SyncCounterNotifyFn`). A NULL
/// address is ignored.
unsafe extern "C" fn sync_counter_notify(counter: *mut c_void) {
    if counter.is_null() {
        return;
    }
    // SAFETY: the caller passes the address of a live counter of this mock (the entry point's
    // contract); the wake words lie in the same page.
    unsafe { sync::counter::notify_at(counter.cast()) }
}

unsafe extern "C" fn buf_obj_get_host_memory(
    obj: NvSciBufObj,
    base: *mut *mut c_void,
    size: *mut u64,
) -> NvSciError {
    guard("BufObjGetHostMemory", || {
        // SAFETY: `obj` is NULL or a live object handle of this mock.
        let o = unsafe { buf::obj::get(obj) }?;
        non_null(base)?;
        non_null(size)?;
        let (ptr, len) = o.host_memory();
        // SAFETY: both out-pointers are non-NULL caller storage.
        unsafe {
            base.write(ptr.cast());
            size.write(len);
        }
        Ok(())
    })
}

unsafe extern "C" fn buf_obj_export_gpu_memory(obj: NvSciBufObj, fd: *mut i32, size: *mut u64) -> NvSciError {
    guard("BufObjExportGpuMemory", || {
        // SAFETY: `obj` is NULL or a live object handle of this mock.
        let o = unsafe { buf::obj::get(obj) }?;
        non_null(fd)?;
        non_null(size)?;
        let vmm = o.vmm().ok_or(NvSciError_NotSupported)?;
        let exported = vmm.export_fd().ok_or(NvSciError_ResourceError)?;
        // SAFETY: both out-pointers are non-NULL caller storage; the caller owns the fd from now.
        unsafe {
            fd.write(std::os::fd::IntoRawFd::into_raw_fd(exported));
            size.write(vmm.len() as u64);
        }
        Ok(())
    })
}

unsafe extern "C" fn sync_obj_get_counter(obj: NvSciSyncObj, counter: *mut *mut u64) -> NvSciError {
    guard("SyncObjGetCounter", || {
        // SAFETY: `obj` is NULL or a live object handle of this mock.
        let o = unsafe { sync::obj::get(obj) }?;
        non_null(counter)?;
        // SAFETY: `counter` is non-NULL caller storage.
        unsafe { counter.write(o.core.counter.as_ptr()) };
        Ok(())
    })
}

unsafe extern "C" fn sync_obj_generate_engine_fence(
    obj: NvSciSyncObj,
    fence: *mut NvSciSyncFence,
) -> NvSciError {
    // SAFETY: `obj` is NULL or a live object handle of this mock; `fence` is NULL or a caller
    // fence (cleared or valid).
    guard("SyncObjGenerateEngineFence", || unsafe { sync::obj::generate(obj, fence, Signaler::Engine) })
}

unsafe extern "C" fn sync_attr_list_fill_gpu(
    list: NvSciSyncAttrList,
    gpu: *const NvSciRmGpuId,
    flags: i32,
) -> NvSciError {
    guard("SyncAttrListFillGpu", || {
        let perm = match flags {
            FILL_SIGNAL => NvSciSyncAccessPerm_SignalOnly,
            FILL_WAIT => NvSciSyncAccessPerm_WaitOnly,
            f if f == FILL_SIGNAL | FILL_WAIT => NvSciSyncAccessPerm_WaitSignal,
            _ => return bad(),
        };
        non_null(gpu)?;
        // SAFETY: `gpu` is non-NULL and points to a GPU id per the caller's contract (the type is
        // a byte array: no alignment requirement).
        let gpu = unsafe { gpu.read() };
        let primitive: [NvSciSyncAttrValPrimitiveType; 1] =
            [NvSciSyncAttrValPrimitiveType_SysmemSemaphorePayload64b];
        let pairs = [
            pair(NvSciSyncAttrKey_RequiredPerm, &perm),
            pair(NvSciSyncAttrKey_PrimitiveInfo, &primitive),
            pair(NvSciSyncAttrKey_GpuId, &gpu),
        ];
        // SAFETY: `list` is NULL or a live list handle of this mock; every pair points to a local
        // that outlives the call, for exactly its size.
        unsafe { sync::list::set_pairs(list, &pairs) }
    })
}

/// A pair whose value is `v`'s bytes (valid while `v` is).
fn pair<T>(key: u32, v: &T) -> RawPair {
    RawPair { key, value: (v as *const T).cast(), len: std::mem::size_of::<T>() }
}
