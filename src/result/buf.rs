//! `libnvscibuf.so.1`: modules, buffer objects, CPU access, pixels and the object IPC entry
//! points (the attribute-list ones, shared with NvSciSync, are in [`super::list`]).
//!
//! Contracts from nvscibuf.h (DRIVE OS 6.0): every handle passed must be a live handle made by
//! the same loaded library (it aborts the process on one it did not make), and every output
//! pointer must be valid for writes.

use super::nvfn;
use crate::error::{check, Result};
use core::ffi::c_void;
use nvsci_sys::{
    NvSciBufAttrList, NvSciBufAttrValAccessPerm, NvSciBufFns, NvSciBufModule, NvSciBufObj,
    NvSciBufObjIpcExportDescriptor, NvSciBufRect, NvSciIpcEndpoint,
};

/// `NvSciBufModuleOpen`: a new module.
///
/// # Safety
/// None beyond a table of the loaded library: the module returned must be closed once with
/// [`module_close`], after every list and object bound to it is freed.
pub(crate) unsafe fn module_open(t: &NvSciBufFns) -> Result<NvSciBufModule> {
    let f = nvfn!(t, NvSciBufModuleOpen);
    let mut raw = core::ptr::null_mut();
    // SAFETY: the only argument is a valid out-pointer for the new module.
    check("NvSciBufModuleOpen", unsafe { f(&mut raw) })?;
    Ok(raw)
}

/// `NvSciBufModuleClose`.
///
/// # Safety
/// `module` came from [`module_open`] of this library and is closed exactly once; "the module
/// is de-initialised once it is closed and every object bound to it is freed" (nvscibuf.h), so
/// nothing may use `module` itself after the call.
pub(crate) unsafe fn module_close(t: &NvSciBufFns, module: NvSciBufModule) -> Result<()> {
    let f = nvfn!(t, NvSciBufModuleClose);
    // SAFETY: caller contract.
    unsafe { f(module) };
    Ok(())
}

/// `NvSciBufObjAlloc`: a new object reference allocated from a reconciled list.
///
/// # Safety
/// `list` is a live reconciled list of this library, not freed during the call. The object
/// returned is the caller's to free with [`obj_free`].
pub(crate) unsafe fn obj_alloc(t: &NvSciBufFns, list: NvSciBufAttrList) -> Result<NvSciBufObj> {
    let f = nvfn!(t, NvSciBufObjAlloc);
    let mut raw = core::ptr::null_mut();
    // SAFETY: `list` is live (caller contract); `raw` is a valid out-pointer.
    check("NvSciBufObjAlloc", unsafe { f(list, &mut raw) })?;
    Ok(raw)
}

/// `NvSciBufAttrListReconcileAndObjAlloc`: reconciles `lists` and allocates an object from the
/// result. On a failed reconciliation the library may write a conflict list to `*conflict`
/// (on any outcome the caller takes over and frees a non-NULL `*conflict`).
///
/// # Safety
/// Every handle in `lists` is a live unreconciled list of this library, none freed during the
/// call; `conflict` holds NULL. The object returned is the caller's to free with [`obj_free`].
pub(crate) unsafe fn reconcile_and_obj_alloc(
    t: &NvSciBufFns,
    lists: &[NvSciBufAttrList],
    conflict: &mut NvSciBufAttrList,
) -> Result<NvSciBufObj> {
    let f = nvfn!(t, NvSciBufAttrListReconcileAndObjAlloc);
    let mut raw = core::ptr::null_mut();
    // SAFETY: `lists` is readable for its length and every handle live (caller contract); both
    // out-pointers are valid.
    check("NvSciBufAttrListReconcileAndObjAlloc", unsafe {
        f(lists.as_ptr(), lists.len(), &mut raw, conflict)
    })?;
    Ok(raw)
}

/// `NvSciBufObjFree`: releases one reference; the memory goes with the last one.
///
/// # Safety
/// `obj` is a live reference of this library, freed exactly once, and no import into another
/// API (CUDA, a CPU mapping) made through it is used afterwards.
pub(crate) unsafe fn obj_free(t: &NvSciBufFns, obj: NvSciBufObj) -> Result<()> {
    let f = nvfn!(t, NvSciBufObjFree);
    // SAFETY: caller contract.
    unsafe { f(obj) };
    Ok(())
}

/// `NvSciBufObjDup`: a new reference to the same memory, with the same permission.
///
/// # Safety
/// `obj` is a live reference of this library, not freed during the call. The reference
/// returned is the caller's to free with [`obj_free`].
pub(crate) unsafe fn obj_dup(t: &NvSciBufFns, obj: NvSciBufObj) -> Result<NvSciBufObj> {
    let f = nvfn!(t, NvSciBufObjDup);
    let mut raw = core::ptr::null_mut();
    // SAFETY: `obj` is live (caller contract); `raw` is a valid out-pointer.
    check("NvSciBufObjDup", unsafe { f(obj, &mut raw) })?;
    Ok(raw)
}

/// `NvSciBufObjDupWithReducePerm`: a new reference with permission `perm` (no more than
/// `obj`'s own).
///
/// # Safety
/// As for [`obj_dup`]; `perm` is an `NvSciBufAttrValAccessPerm` value.
pub(crate) unsafe fn obj_dup_with_reduce_perm(
    t: &NvSciBufFns,
    obj: NvSciBufObj,
    perm: NvSciBufAttrValAccessPerm,
) -> Result<NvSciBufObj> {
    let f = nvfn!(t, NvSciBufObjDupWithReducePerm);
    let mut raw = core::ptr::null_mut();
    // SAFETY: `obj` is live (caller contract); `raw` is a valid out-pointer.
    check("NvSciBufObjDupWithReducePerm", unsafe { f(obj, perm, &mut raw) })?;
    Ok(raw)
}

/// `NvSciBufObjGetAttrList`: the object's reconciled list, which belongs to the object.
///
/// # Safety
/// `obj` is a live reference of this library. The list returned is valid only while `obj`
/// lives and must never be freed by the caller.
pub(crate) unsafe fn obj_get_attr_list(t: &NvSciBufFns, obj: NvSciBufObj) -> Result<NvSciBufAttrList> {
    let f = nvfn!(t, NvSciBufObjGetAttrList);
    let mut raw = core::ptr::null_mut();
    // SAFETY: `obj` is live (caller contract); `raw` is a valid out-pointer.
    check("NvSciBufObjGetAttrList", unsafe { f(obj, &mut raw) })?;
    Ok(raw)
}

/// `NvSciBufObjGetCpuPtr`: the CPU address of the object's memory, for reads and writes
/// ("BadParameter if the object did not request CPU access or does not have read-write
/// permission", nvscibuf.h).
///
/// # Safety
/// `obj` is a live reference of this library. The mapping is valid while `obj` lives; the
/// caller orders CPU accesses against every other access to the memory.
pub(crate) unsafe fn obj_get_cpu_ptr(t: &NvSciBufFns, obj: NvSciBufObj) -> Result<*mut c_void> {
    let f = nvfn!(t, NvSciBufObjGetCpuPtr);
    let mut ptr = core::ptr::null_mut();
    // SAFETY: `obj` is live (caller contract); `ptr` is a valid out-pointer.
    check("NvSciBufObjGetCpuPtr", unsafe { f(obj, &mut ptr) })?;
    Ok(ptr)
}

/// `NvSciBufObjGetConstCpuPtr`: the CPU address of the object's memory, for reads.
///
/// # Safety
/// As for [`obj_get_cpu_ptr`]; the memory is not written through the pointer.
pub(crate) unsafe fn obj_get_const_cpu_ptr(t: &NvSciBufFns, obj: NvSciBufObj) -> Result<*const c_void> {
    let f = nvfn!(t, NvSciBufObjGetConstCpuPtr);
    let mut ptr = core::ptr::null();
    // SAFETY: `obj` is live (caller contract); `ptr` is a valid out-pointer.
    check("NvSciBufObjGetConstCpuPtr", unsafe { f(obj, &mut ptr) })?;
    Ok(ptr)
}

/// `NvSciBufObjFlushCpuCacheRange`: flushes `len` bytes at `offset` from the CPU caches.
///
/// # Safety
/// `obj` is a live reference of this library and `offset + len` lies inside its memory.
pub(crate) unsafe fn obj_flush_cpu_cache_range(
    t: &NvSciBufFns,
    obj: NvSciBufObj,
    offset: u64,
    len: u64,
) -> Result<()> {
    let f = nvfn!(t, NvSciBufObjFlushCpuCacheRange);
    // SAFETY: caller contract.
    check("NvSciBufObjFlushCpuCacheRange", unsafe { f(obj, offset, len) })
}

/// `NvSciBufObjPutPixels` (optional, NvSciBuf 2.8+): writes the rectangle `rect` (`None`: NULL,
/// the whole image) from the caller's user planes, swizzling block-linear planes.
///
/// # Safety
/// `obj` is a live read-write reference of this library to an image that asked for CPU access;
/// `rect` is `None` for a YUV image ("it must be NULL for NvSciSurfType_YUV"); `ptrs`, `sizes`
/// and `pitches` hold one entry per user plane of the image ("single member representing single
/// user plane" for RGBA, RAW and single-plane YUV images, "separate plane pointers for Y, U and V
/// planes" for YUV images of more planes; nvscibuf.h), each describing a caller buffer of at
/// least `sizes[i]` readable bytes covering the plane's rectangle at `pitches[i]`, none
/// overlapping another or the object's memory; no CPU access to the memory runs meanwhile.
pub(crate) unsafe fn obj_put_pixels(
    t: &NvSciBufFns,
    obj: NvSciBufObj,
    rect: Option<&NvSciBufRect>,
    ptrs: &mut [*const c_void],
    sizes: &[u32],
    pitches: &[u32],
) -> Result<()> {
    let f = nvfn!(t, NvSciBufObjPutPixels);
    // SAFETY: caller contract; the arrays are readable for their lengths.
    check("NvSciBufObjPutPixels", unsafe {
        f(
            obj,
            rect.map_or(core::ptr::null(), core::ptr::from_ref),
            ptrs.as_mut_ptr(),
            sizes.as_ptr(),
            pitches.as_ptr(),
        )
    })
}

/// `NvSciBufObjGetPixels` (optional, NvSciBuf 2.8+): reads the rectangle `rect` (`None`: NULL,
/// the whole image) into the caller's user planes.
///
/// # Safety
/// As for [`obj_put_pixels`], except that a read-only reference may read, and each buffer is
/// writable for `sizes[i]` bytes and not otherwise accessed during the call.
pub(crate) unsafe fn obj_get_pixels(
    t: &NvSciBufFns,
    obj: NvSciBufObj,
    rect: Option<&NvSciBufRect>,
    ptrs: &mut [*mut c_void],
    sizes: &[u32],
    pitches: &[u32],
) -> Result<()> {
    let f = nvfn!(t, NvSciBufObjGetPixels);
    // SAFETY: caller contract; the arrays are readable for their lengths.
    check("NvSciBufObjGetPixels", unsafe {
        f(
            obj,
            rect.map_or(core::ptr::null(), core::ptr::from_ref),
            ptrs.as_mut_ptr(),
            sizes.as_ptr(),
            pitches.as_ptr(),
        )
    })
}

/// `NvSciBufObjIpcExport`: a descriptor of `obj` for the peer of `ep`, granting `perm`.
///
/// # Safety
/// `obj` is a live reference of this library and `ep` an open endpoint of the NvSciIpc the
/// library was paired with.
pub(crate) unsafe fn obj_ipc_export(
    t: &NvSciBufFns,
    obj: NvSciBufObj,
    perm: NvSciBufAttrValAccessPerm,
    ep: NvSciIpcEndpoint,
) -> Result<NvSciBufObjIpcExportDescriptor> {
    let f = nvfn!(t, NvSciBufObjIpcExport);
    let mut d = NvSciBufObjIpcExportDescriptor::default();
    // SAFETY: caller contract; `d` is a valid out-pointer.
    check("NvSciBufObjIpcExport", unsafe { f(obj, perm, ep, &mut d) })?;
    Ok(d)
}

/// `NvSciBufObjIpcImport`: the object the peer of `ep` exported in `desc`, described by
/// `reconciled`, with at least `min` permission, waiting up to `timeout_us` (-1: forever).
///
/// # Safety
/// `ep` is an open endpoint and `reconciled` a live reconciled list of this library (imported
/// from the same peer). The reference returned is the caller's to free with [`obj_free`].
pub(crate) unsafe fn obj_ipc_import(
    t: &NvSciBufFns,
    ep: NvSciIpcEndpoint,
    desc: &NvSciBufObjIpcExportDescriptor,
    reconciled: NvSciBufAttrList,
    min: NvSciBufAttrValAccessPerm,
    timeout_us: i64,
) -> Result<NvSciBufObj> {
    let f = nvfn!(t, NvSciBufObjIpcImport);
    let mut raw = core::ptr::null_mut();
    // SAFETY: caller contract; `desc` is a descriptor value and `raw` a valid out-pointer.
    check("NvSciBufObjIpcImport", unsafe { f(ep, desc, reconciled, min, timeout_us, &mut raw) })?;
    Ok(raw)
}

/// `NvSciBufIpcExportAttrListAndObj`: one descriptor of `obj` and its reconciled list, in a
/// buffer the library allocates: `(pointer, length)`.
///
/// # Safety
/// As for [`obj_ipc_export`]. The buffer returned is the caller's to free once with
/// [`attr_list_and_obj_free_desc`].
pub(crate) unsafe fn ipc_export_attr_list_and_obj(
    t: &NvSciBufFns,
    obj: NvSciBufObj,
    perm: NvSciBufAttrValAccessPerm,
    ep: NvSciIpcEndpoint,
) -> Result<(*mut c_void, usize)> {
    let f = nvfn!(t, NvSciBufIpcExportAttrListAndObj);
    let (mut p, mut n) = (core::ptr::null_mut(), 0usize);
    // SAFETY: caller contract; `p` and `n` are valid out-pointers.
    check("NvSciBufIpcExportAttrListAndObj", unsafe { f(obj, perm, ep, &mut p, &mut n) })?;
    Ok((p, n))
}

/// `NvSciBufIpcImportAttrListAndObj`: the object and reconciled list the peer of `ep` exported
/// in `desc`, checked against this process's unreconciled `inputs` (none: nothing checked),
/// with at least `min` permission, waiting up to `timeout_us` (-1: forever).
///
/// # Safety
/// `module` is a live module and every handle in `inputs` a live unreconciled list of this
/// library; `ep` is an open endpoint. The reference returned is the caller's to free with
/// [`obj_free`].
pub(crate) unsafe fn ipc_import_attr_list_and_obj(
    t: &NvSciBufFns,
    module: NvSciBufModule,
    ep: NvSciIpcEndpoint,
    desc: &[u8],
    inputs: &[NvSciBufAttrList],
    min: NvSciBufAttrValAccessPerm,
    timeout_us: i64,
) -> Result<NvSciBufObj> {
    let f = nvfn!(t, NvSciBufIpcImportAttrListAndObj);
    let ptr = if inputs.is_empty() { core::ptr::null() } else { inputs.as_ptr() };
    let mut raw = core::ptr::null_mut();
    // SAFETY: caller contract; `desc` is readable for its length, `ptr` NULL or readable for
    // `inputs.len()` handles, `raw` a valid out-pointer.
    let code = unsafe {
        f(module, ep, desc.as_ptr().cast(), desc.len(), ptr, inputs.len(), min, timeout_us, &mut raw)
    };
    check("NvSciBufIpcImportAttrListAndObj", code)?;
    Ok(raw)
}

/// `NvSciBufAttrListAndObjFreeDesc`: frees a buffer [`ipc_export_attr_list_and_obj`] returned.
///
/// # Safety
/// `desc` was returned by [`ipc_export_attr_list_and_obj`] of this library and is freed once.
pub(crate) unsafe fn attr_list_and_obj_free_desc(t: &NvSciBufFns, desc: *mut c_void) -> Result<()> {
    let f = nvfn!(t, NvSciBufAttrListAndObjFreeDesc);
    // SAFETY: caller contract.
    unsafe { f(desc) };
    Ok(())
}
