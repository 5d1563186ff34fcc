//! `libnvscisync.so.1`: modules, sync objects, fences, CPU waits and the object and fence IPC
//! entry points (the attribute-list ones, shared with NvSciBuf, are in [`super::list`]).
//!
//! Contracts from nvscisync.h (DRIVE OS 6.0): every handle passed must be a live handle made by
//! the same loaded library (it aborts the process on one it did not make), every fence a
//! cleared fence or one this library filled, and every output pointer valid for writes.

use super::nvfn;
use crate::error::{check, Result};
use core::ffi::c_void;
use nvsci_sys::{
    NvSciIpcEndpoint, NvSciSyncAccessPerm, NvSciSyncAttrList, NvSciSyncCpuWaitContext, NvSciSyncFence,
    NvSciSyncFenceIpcExportDescriptor, NvSciSyncFns, NvSciSyncModule, NvSciSyncObj,
    NvSciSyncObjIpcExportDescriptor,
};

/// `NvSciSyncModuleOpen`: a new module.
///
/// # Safety
/// None beyond a table of the loaded library: the module returned must be closed once with
/// [`module_close`], after every list, object and wait context bound to it is freed.
pub(crate) unsafe fn module_open(t: &NvSciSyncFns) -> Result<NvSciSyncModule> {
    let f = nvfn!(t, NvSciSyncModuleOpen);
    let mut raw = core::ptr::null_mut();
    // SAFETY: the only argument is a valid out-pointer for the new module.
    check("NvSciSyncModuleOpen", unsafe { f(&mut raw) })?;
    Ok(raw)
}

/// `NvSciSyncModuleClose`.
///
/// # Safety
/// `module` came from [`module_open`] of this library and is closed exactly once; "the module
/// is de-initialised once it is closed and every object bound to it is freed" (nvscisync.h), so
/// nothing may use `module` itself after the call.
pub(crate) unsafe fn module_close(t: &NvSciSyncFns, module: NvSciSyncModule) -> Result<()> {
    let f = nvfn!(t, NvSciSyncModuleClose);
    // SAFETY: caller contract.
    unsafe { f(module) };
    Ok(())
}

/// `NvSciSyncCpuWaitContextAlloc`: a new CPU wait context of `module`.
///
/// # Safety
/// `module` is a live module of this library. The context returned is the caller's to free
/// with [`cpu_wait_context_free`]; one context may not be used by two threads at once.
pub(crate) unsafe fn cpu_wait_context_alloc(
    t: &NvSciSyncFns,
    module: NvSciSyncModule,
) -> Result<NvSciSyncCpuWaitContext> {
    let f = nvfn!(t, NvSciSyncCpuWaitContextAlloc);
    let mut raw = core::ptr::null_mut();
    // SAFETY: `module` is live (caller contract); `raw` is a valid out-pointer.
    check("NvSciSyncCpuWaitContextAlloc", unsafe { f(module, &mut raw) })?;
    Ok(raw)
}

/// `NvSciSyncCpuWaitContextFree`.
///
/// # Safety
/// `ctx` came from [`cpu_wait_context_alloc`], is freed once, and no wait on it is running.
pub(crate) unsafe fn cpu_wait_context_free(t: &NvSciSyncFns, ctx: NvSciSyncCpuWaitContext) -> Result<()> {
    let f = nvfn!(t, NvSciSyncCpuWaitContextFree);
    // SAFETY: caller contract.
    unsafe { f(ctx) };
    Ok(())
}

/// `NvSciSyncObjAlloc`: a new sync object from a reconciled list.
///
/// # Safety
/// `list` is a live reconciled list of this library, not freed during the call. The object
/// returned is the caller's to free with [`obj_free`].
pub(crate) unsafe fn obj_alloc(t: &NvSciSyncFns, list: NvSciSyncAttrList) -> Result<NvSciSyncObj> {
    let f = nvfn!(t, NvSciSyncObjAlloc);
    let mut raw = core::ptr::null_mut();
    // SAFETY: `list` is live (caller contract); `raw` is a valid out-pointer.
    check("NvSciSyncObjAlloc", unsafe { f(list, &mut raw) })?;
    Ok(raw)
}

/// `NvSciSyncAttrListReconcileAndObjAlloc`: reconciles `lists` and allocates an object from the
/// result. On a failed reconciliation the library may write a conflict list to `*conflict`
/// (on any outcome the caller takes over and frees a non-NULL `*conflict`).
///
/// # Safety
/// Every handle in `lists` is a live unreconciled list of this library, none freed during the
/// call; `conflict` holds NULL. The object returned is the caller's to free with [`obj_free`].
pub(crate) unsafe fn reconcile_and_obj_alloc(
    t: &NvSciSyncFns,
    lists: &[NvSciSyncAttrList],
    conflict: &mut NvSciSyncAttrList,
) -> Result<NvSciSyncObj> {
    let f = nvfn!(t, NvSciSyncAttrListReconcileAndObjAlloc);
    let mut raw = core::ptr::null_mut();
    // SAFETY: `lists` is readable for its length and every handle live (caller contract); both
    // out-pointers are valid.
    check("NvSciSyncAttrListReconcileAndObjAlloc", unsafe {
        f(lists.as_ptr(), lists.len(), &mut raw, conflict)
    })?;
    Ok(raw)
}

/// `NvSciSyncObjFree`: releases one reference to the object.
///
/// # Safety
/// `obj` is a live reference of this library, freed exactly once; no fence of it is used
/// afterwards except through the library's own references, and no import of it into another
/// API (CUDA) is used afterwards.
pub(crate) unsafe fn obj_free(t: &NvSciSyncFns, obj: NvSciSyncObj) -> Result<()> {
    let f = nvfn!(t, NvSciSyncObjFree);
    // SAFETY: caller contract.
    unsafe { f(obj) };
    Ok(())
}

/// `NvSciSyncObjDup`: a new reference to the same object.
///
/// # Safety
/// `obj` is a live reference of this library, not freed during the call. The reference
/// returned is the caller's to free with [`obj_free`].
pub(crate) unsafe fn obj_dup(t: &NvSciSyncFns, obj: NvSciSyncObj) -> Result<NvSciSyncObj> {
    let f = nvfn!(t, NvSciSyncObjDup);
    let mut raw = core::ptr::null_mut();
    // SAFETY: `obj` is live (caller contract); `raw` is a valid out-pointer.
    check("NvSciSyncObjDup", unsafe { f(obj, &mut raw) })?;
    Ok(raw)
}

/// `NvSciSyncObjGetAttrList`: the object's reconciled list, which belongs to the object.
///
/// # Safety
/// `obj` is a live reference of this library. The list returned is valid only while `obj`
/// lives and must never be freed by the caller.
pub(crate) unsafe fn obj_get_attr_list(t: &NvSciSyncFns, obj: NvSciSyncObj) -> Result<NvSciSyncAttrList> {
    let f = nvfn!(t, NvSciSyncObjGetAttrList);
    let mut raw = core::ptr::null_mut();
    // SAFETY: `obj` is live (caller contract); `raw` is a valid out-pointer.
    check("NvSciSyncObjGetAttrList", unsafe { f(obj, &mut raw) })?;
    Ok(raw)
}

/// `NvSciSyncObjGenerateFence`: fills `fence` with the fence of the object's next CPU signal
/// ("BadParameter if syncObj is not a CPU Signaler or does not own the backing primitive").
///
/// # Safety
/// `obj` is a live reference of this library; `fence` is cleared storage (its contents are
/// overwritten, not released).
pub(crate) unsafe fn obj_generate_fence(
    t: &NvSciSyncFns,
    obj: NvSciSyncObj,
    fence: &mut NvSciSyncFence,
) -> Result<()> {
    let f = nvfn!(t, NvSciSyncObjGenerateFence);
    // SAFETY: caller contract.
    check("NvSciSyncObjGenerateFence", unsafe { f(obj, fence) })
}

/// `NvSciSyncObjSignal`: signals from the CPU, expiring the oldest outstanding fence.
///
/// # Safety
/// `obj` is a live reference of this library.
pub(crate) unsafe fn obj_signal(t: &NvSciSyncFns, obj: NvSciSyncObj) -> Result<()> {
    let f = nvfn!(t, NvSciSyncObjSignal);
    // SAFETY: caller contract.
    check("NvSciSyncObjSignal", unsafe { f(obj) })
}

/// `NvSciSyncFenceClear`: releases the fence's object reference and clears it.
///
/// # Safety
/// `fence` is cleared or a fence this library filled, not used by another thread during the
/// call.
pub(crate) unsafe fn fence_clear(t: &NvSciSyncFns, fence: &mut NvSciSyncFence) -> Result<()> {
    let f = nvfn!(t, NvSciSyncFenceClear);
    // SAFETY: caller contract.
    unsafe { f(fence) };
    Ok(())
}

/// `NvSciSyncFenceDup`: duplicates `*src` into `dst`, which takes its own object reference.
///
/// # Safety
/// `src` points to a readable fence that is cleared or was filled by this library, not written
/// during the call; `dst` is cleared storage (its contents are overwritten, not released).
pub(crate) unsafe fn fence_dup(
    t: &NvSciSyncFns,
    src: *const NvSciSyncFence,
    dst: &mut NvSciSyncFence,
) -> Result<()> {
    let f = nvfn!(t, NvSciSyncFenceDup);
    // SAFETY: caller contract.
    check("NvSciSyncFenceDup", unsafe { f(src, dst) })
}

/// `NvSciSyncFenceWait`: blocks until the fence expires or `timeout_us` passes (-1: forever;
/// `NvSciError_Timeout` on expiry of the timeout).
///
/// # Safety
/// `fence` is a fence of this library and `ctx` a live wait context of it, used by this thread
/// only during the call.
pub(crate) unsafe fn fence_wait(
    t: &NvSciSyncFns,
    fence: &NvSciSyncFence,
    ctx: NvSciSyncCpuWaitContext,
    timeout_us: i64,
) -> Result<()> {
    let f = nvfn!(t, NvSciSyncFenceWait);
    // SAFETY: caller contract.
    check("NvSciSyncFenceWait", unsafe { f(fence, ctx, timeout_us) })
}

/// `NvSciSyncFenceExtractFence` (optional, NvSciSync 2.3+): the fence's primitive id and value.
///
/// # Safety
/// `fence` is a fence of this library.
pub(crate) unsafe fn fence_extract_fence(t: &NvSciSyncFns, fence: &NvSciSyncFence) -> Result<(u64, u64)> {
    let f = nvfn!(t, NvSciSyncFenceExtractFence);
    let (mut id, mut value) = (0u64, 0u64);
    // SAFETY: caller contract; both out-pointers are valid.
    check("NvSciSyncFenceExtractFence", unsafe { f(fence, &mut id, &mut value) })?;
    Ok((id, value))
}

/// `NvSciSyncObjIpcExport`: a descriptor of `obj` for the peer of `ep`, granting `perm`.
///
/// # Safety
/// `obj` is a live reference of this library and `ep` an open endpoint of the NvSciIpc the
/// library was paired with.
pub(crate) unsafe fn obj_ipc_export(
    t: &NvSciSyncFns,
    obj: NvSciSyncObj,
    perm: NvSciSyncAccessPerm,
    ep: NvSciIpcEndpoint,
) -> Result<NvSciSyncObjIpcExportDescriptor> {
    let f = nvfn!(t, NvSciSyncObjIpcExport);
    let mut d = NvSciSyncObjIpcExportDescriptor { payload: [0; 128] };
    // SAFETY: caller contract; `d` is a valid out-pointer.
    check("NvSciSyncObjIpcExport", unsafe { f(obj, perm, ep, &mut d) })?;
    Ok(d)
}

/// `NvSciSyncObjIpcImport`: the object the peer of `ep` exported in `desc`, described by
/// `reconciled`, with permission `perm`, waiting up to `timeout_us` (-1: forever).
///
/// # Safety
/// `ep` is an open endpoint and `reconciled` a live reconciled list of this library (imported
/// from the same peer). The object returned is the caller's to free with [`obj_free`].
pub(crate) unsafe fn obj_ipc_import(
    t: &NvSciSyncFns,
    ep: NvSciIpcEndpoint,
    desc: &NvSciSyncObjIpcExportDescriptor,
    reconciled: NvSciSyncAttrList,
    perm: NvSciSyncAccessPerm,
    timeout_us: i64,
) -> Result<NvSciSyncObj> {
    let f = nvfn!(t, NvSciSyncObjIpcImport);
    let mut raw = core::ptr::null_mut();
    // SAFETY: caller contract; `desc` is a descriptor value and `raw` a valid out-pointer.
    check("NvSciSyncObjIpcImport", unsafe { f(ep, desc, reconciled, perm, timeout_us, &mut raw) })?;
    Ok(raw)
}

/// `NvSciSyncIpcExportFence`: a descriptor of `fence` for the peer of `ep`.
///
/// # Safety
/// `fence` is a fence of this library and `ep` an open endpoint.
pub(crate) unsafe fn ipc_export_fence(
    t: &NvSciSyncFns,
    fence: &NvSciSyncFence,
    ep: NvSciIpcEndpoint,
) -> Result<NvSciSyncFenceIpcExportDescriptor> {
    let f = nvfn!(t, NvSciSyncIpcExportFence);
    let mut d = NvSciSyncFenceIpcExportDescriptor { payload: [0; 7] };
    // SAFETY: caller contract; `d` is a valid out-pointer.
    check("NvSciSyncIpcExportFence", unsafe { f(fence, ep, &mut d) })?;
    Ok(d)
}

/// `NvSciSyncIpcImportFence`: fills `fence` with the fence the peer exported in `desc` for
/// `obj` ("BadParameter if desc does not describe a fence of syncObj").
///
/// # Safety
/// `obj` is a live (imported) object of this library; `fence` is cleared storage.
pub(crate) unsafe fn ipc_import_fence(
    t: &NvSciSyncFns,
    obj: NvSciSyncObj,
    desc: &NvSciSyncFenceIpcExportDescriptor,
    fence: &mut NvSciSyncFence,
) -> Result<()> {
    let f = nvfn!(t, NvSciSyncIpcImportFence);
    // SAFETY: caller contract.
    check("NvSciSyncIpcImportFence", unsafe { f(obj, desc, fence) })
}

/// `NvSciSyncIpcExportAttrListAndObj`: one descriptor of `obj` and its reconciled list, in a
/// buffer the library allocates: `(pointer, length)`.
///
/// # Safety
/// As for [`obj_ipc_export`]. The buffer returned is the caller's to free once with
/// [`attr_list_and_obj_free_desc`].
pub(crate) unsafe fn ipc_export_attr_list_and_obj(
    t: &NvSciSyncFns,
    obj: NvSciSyncObj,
    perm: NvSciSyncAccessPerm,
    ep: NvSciIpcEndpoint,
) -> Result<(*mut c_void, usize)> {
    let f = nvfn!(t, NvSciSyncIpcExportAttrListAndObj);
    let (mut p, mut n) = (core::ptr::null_mut(), 0usize);
    // SAFETY: caller contract; `p` and `n` are valid out-pointers.
    check("NvSciSyncIpcExportAttrListAndObj", unsafe { f(obj, perm, ep, &mut p, &mut n) })?;
    Ok((p, n))
}

/// `NvSciSyncIpcImportAttrListAndObj`: the object and reconciled list the peer of `ep` exported
/// in `desc`, checked against this process's unreconciled `inputs` (none: nothing checked), with
/// permission `perm`, waiting up to `timeout_us` (-1: forever).
///
/// # Safety
/// `module` is a live module and every handle in `inputs` a live unreconciled list of this
/// library; `ep` is an open endpoint. The object returned is the caller's to free with
/// [`obj_free`].
pub(crate) unsafe fn ipc_import_attr_list_and_obj(
    t: &NvSciSyncFns,
    module: NvSciSyncModule,
    ep: NvSciIpcEndpoint,
    desc: &[u8],
    inputs: &[NvSciSyncAttrList],
    perm: NvSciSyncAccessPerm,
    timeout_us: i64,
) -> Result<NvSciSyncObj> {
    let f = nvfn!(t, NvSciSyncIpcImportAttrListAndObj);
    let ptr = if inputs.is_empty() { core::ptr::null() } else { inputs.as_ptr() };
    let mut raw = core::ptr::null_mut();
    // SAFETY: caller contract; `desc` is readable for its length, `ptr` NULL or readable for
    // `inputs.len()` handles, `raw` a valid out-pointer.
    let code = unsafe {
        f(module, ep, desc.as_ptr().cast(), desc.len(), ptr, inputs.len(), perm, timeout_us, &mut raw)
    };
    check("NvSciSyncIpcImportAttrListAndObj", code)?;
    Ok(raw)
}

/// `NvSciSyncAttrListAndObjFreeDesc`: frees a buffer [`ipc_export_attr_list_and_obj`] returned.
///
/// # Safety
/// `desc` was returned by [`ipc_export_attr_list_and_obj`] of this library and is freed once.
pub(crate) unsafe fn attr_list_and_obj_free_desc(t: &NvSciSyncFns, desc: *mut c_void) -> Result<()> {
    let f = nvfn!(t, NvSciSyncAttrListAndObjFreeDesc);
    // SAFETY: caller contract.
    unsafe { f(desc) };
    Ok(())
}
