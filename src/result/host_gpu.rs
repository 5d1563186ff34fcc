//! The GPU entry points of an emulated implementation (`nvsci_sys::emulation`): NVIDIA's
//! libraries offer none, so each function answers `Ok(None)` when the table lacks its entry
//! point (a capability answer, not an error).
//!
//! Contracts from `nvsci_sys::emulation` (the emulation's own header): handles are live
//! handles of the implementation the table came from; output pointers are valid for writes.

use crate::error::{check, Result};
use core::ffi::c_void;
use nvsci_sys::{
    NvSciBufObj, NvSciHostGpuFns, NvSciRmGpuId, NvSciSyncAttrList, NvSciSyncFence, NvSciSyncObj,
};

/// `BufObjGetHostMemory`: the host memory backing `obj`, `(base, size)`, shared by every
/// duplicate and alive as long as any of them.
///
/// # Safety
/// `obj` is a live buffer object of the implementation `t` belongs to.
pub(crate) unsafe fn buf_obj_get_host_memory(
    t: &NvSciHostGpuFns,
    obj: NvSciBufObj,
) -> Result<Option<(*mut c_void, u64)>> {
    let Some(f) = t.BufObjGetHostMemory else { return Ok(None) };
    let (mut base, mut size) = (core::ptr::null_mut(), 0u64);
    // SAFETY: `obj` is live (caller contract); both out-pointers are valid for writes.
    check("BufObjGetHostMemory", unsafe { f(obj, &mut base, &mut size) })?;
    Ok(Some((base, size)))
}

/// `BufObjExportGpuMemory`: a new fd of the CUDA virtual-memory allocation backing `obj` and
/// the size to import it with, `(fd, size)`; the caller owns the fd. The entry point answers
/// `NotSupported` (an `Err` here) for an object whose memory is host memory.
///
/// # Safety
/// `obj` is a live buffer object of the implementation `t` belongs to.
pub(crate) unsafe fn buf_obj_export_gpu_memory(
    t: &NvSciHostGpuFns,
    obj: NvSciBufObj,
) -> Result<Option<(i32, u64)>> {
    let Some(f) = t.BufObjExportGpuMemory else { return Ok(None) };
    let (mut fd, mut size) = (-1i32, 0u64);
    // SAFETY: `obj` is live (caller contract); both out-pointers are valid for writes.
    check("BufObjExportGpuMemory", unsafe { f(obj, &mut fd, &mut size) })?;
    Ok(Some((fd, size)))
}

/// `SyncObjGetCounter`: the host address of the object's 64-bit counter, alive as long as any
/// handle or fence of the object.
///
/// # Safety
/// `obj` is a live sync object of the implementation `t` belongs to.
pub(crate) unsafe fn sync_obj_get_counter(
    t: &NvSciHostGpuFns,
    obj: NvSciSyncObj,
) -> Result<Option<*mut u64>> {
    let Some(f) = t.SyncObjGetCounter else { return Ok(None) };
    let mut counter = core::ptr::null_mut();
    // SAFETY: `obj` is live (caller contract); the out-pointer is valid for writes.
    check("SyncObjGetCounter", unsafe { f(obj, &mut counter) })?;
    Ok(Some(counter))
}

/// `SyncObjGenerateEngineFence`: fills `fence` with the fence of the next signal by the
/// object's engine signaler ("BadParameter when the signaler is the CPU").
///
/// # Safety
/// `obj` is a live sync object of the implementation `t` belongs to; `fence` is cleared or a
/// valid fence of it (its old contents are released).
pub(crate) unsafe fn sync_obj_generate_engine_fence(
    t: &NvSciHostGpuFns,
    obj: NvSciSyncObj,
    fence: &mut NvSciSyncFence,
) -> Result<Option<()>> {
    let Some(f) = t.SyncObjGenerateEngineFence else { return Ok(None) };
    // SAFETY: caller contract.
    check("SyncObjGenerateEngineFence", unsafe { f(obj, fence) })?;
    Ok(Some(()))
}

/// `SyncAttrListFillGpu`: fills an unreconciled list for the GPU `gpu` as
/// `cuDeviceGetNvSciSyncAttributes` does on Tegra (`flags`: 1 signal, 2 wait, 3 both).
///
/// # Safety
/// `list` is a live unreconciled list of the implementation `t` belongs to, not used by
/// another thread during the call.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) unsafe fn sync_attr_list_fill_gpu(
    t: &NvSciHostGpuFns,
    list: NvSciSyncAttrList,
    gpu: &NvSciRmGpuId,
    flags: i32,
) -> Result<Option<()>> {
    let Some(f) = t.SyncAttrListFillGpu else { return Ok(None) };
    // SAFETY: caller contract; `gpu` is a valid id for the call.
    check("SyncAttrListFillGpu", unsafe { f(list, gpu, flags) })?;
    Ok(Some(()))
}
