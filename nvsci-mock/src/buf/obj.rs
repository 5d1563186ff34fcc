//! NvSciBuf objects: zeroed host memory shared by reference-counted object handles.
//!
//! The memory of an allocation starts on a page boundary and spans a whole number of pages (the
//! object's size rounded up; see [`crate::pages`]), so that a CUDA context can page-lock it in
//! place. `BufObjGetHostMemory` reports that whole range.
//!
//! Each object handle carries its own access permission and its own reconciled-list view (the
//! allocation's reconciled list with `ActualPerm` set to that handle's permission), returned by
//! `NvSciBufObjGetAttrList` and freed with the handle. The memory is released when the last
//! handle referring to it is freed.

use super::list::{self, BufAttrListRec};
use super::module::BufModuleShared;
use crate::attrs::{Flags, Slot, Value};
use crate::ffi::{bad, guard, non_null, write_out, Res};
use crate::handle::{self, Record};
use crate::ledger::{Counted, Kind};
use crate::list_common::ListRecord;
use crate::pages::Pages;
use nvsci_sys::*;
use std::os::raw::c_void;
use std::sync::Arc;

/// Where an allocation's bytes live.
pub(crate) enum Memory {
    /// Host pages (page-aligned, whole pages; a memfd on Linux, exportable to other processes).
    Pages(Pages),
    /// Host-NUMA CUDA VMM memory, for block-linear images that a GPU maps as arrays (see
    /// [`crate::vmm`]); exported to other processes as the allocation's POSIX fd.
    Vmm(crate::vmm::VmmMemory),
}

impl Memory {
    fn as_ptr(&self) -> *mut u8 {
        match self {
            Memory::Pages(p) => p.as_ptr(),
            Memory::Vmm(v) => v.as_ptr(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Memory::Pages(p) => p.len(),
            Memory::Vmm(v) => v.len(),
        }
    }
}

/// One allocation.
struct BufMem {
    pages: Memory,
    /// The object's size (the reconciled `Size`); `pages` may be larger.
    size: u64,
    need_cpu_access: bool,
    module: Arc<BufModuleShared>,
    /// The reconciled attributes the allocation was made from.
    attrs: Slot,
}

/// The record behind an `NvSciBufObj`.
#[repr(C)]
pub(crate) struct BufObjRec {
    magic: u64,
    mem: Arc<BufMem>,
    perm: NvSciBufAttrValAccessPerm,
    view: Box<BufAttrListRec>,
    _count: Counted,
}

// SAFETY: repr(C) with the magic first.
unsafe impl Record for BufObjRec {
    const MAGIC: u64 = 0x4e56_4255_464f_424a; // "NVBUFOBJ"
}

fn new_handle(mem: Arc<BufMem>, perm: NvSciBufAttrValAccessPerm) -> NvSciBufObj {
    let mut attrs = mem.attrs.clone();
    attrs.insert(NvSciBufGeneralAttrKey_ActualPerm, Value::from_u32s(&[perm]));
    let view = BufAttrListRec::new(mem.module.clone(), Flags::OBJECT_VIEW, vec![attrs], None);
    let count = mem.module.ledger.track(Kind::Object);
    handle::into_handle(Box::new(BufObjRec { magic: BufObjRec::MAGIC, mem, perm, view, _count: count }))
}

/// Borrows an object record.
///
/// # Safety
/// `obj` must be NULL or a live object handle of this mock.
pub(crate) unsafe fn get<'a>(obj: NvSciBufObj) -> Res<&'a BufObjRec> {
    // SAFETY: forwarded contract.
    unsafe { handle::get::<BufObjRec, _>(obj) }
}

impl BufObjRec {
    /// Notes that this object was exported through `ep` (see `ipc::endpoint::bind`).
    pub(crate) fn bind_to(&self, ep: NvSciIpcEndpoint) {
        crate::ipc::endpoint::bind(ep, &self.mem, crate::ipc::endpoint::BoundKind::Buf);
    }

    /// This handle's access permission.
    pub(crate) fn perm(&self) -> NvSciBufAttrValAccessPerm {
        self.perm
    }

    /// The allocation's object size (the reconciled size; the pages may be larger).
    pub(crate) fn size(&self) -> u64 {
        self.mem.size
    }

    /// The reconciled attributes the allocation was made from.
    pub(crate) fn attrs(&self) -> &Slot {
        &self.mem.attrs
    }

    /// The module the allocation was made under.
    pub(crate) fn view_module(&self) -> &std::sync::Arc<BufModuleShared> {
        &self.mem.module
    }

    /// The allocation's host pages (for export); `None` for VMM memory.
    pub(crate) fn pages(&self) -> Option<&Pages> {
        match &self.mem.pages {
            Memory::Pages(p) => Some(p),
            Memory::Vmm(_) => None,
        }
    }

    /// The allocation's VMM memory, if that is what backs it.
    pub(crate) fn vmm(&self) -> Option<&crate::vmm::VmmMemory> {
        match &self.mem.pages {
            Memory::Pages(_) => None,
            Memory::Vmm(v) => Some(v),
        }
    }

    /// The host memory of the allocation: its first byte and its size in bytes (whole pages, or
    /// whole VMM granules). The same for every handle of the allocation; valid while any of them
    /// lives.
    pub(crate) fn host_memory(&self) -> (*mut u8, u64) {
        (self.mem.pages.as_ptr(), self.mem.pages.len() as u64)
    }
}

/// A handle with permission `perm` on `memory` exported by another process, described by the
/// reconciled list `l` (imported from the same exporter) and of object size `size`.
pub(crate) fn from_import(
    memory: Memory,
    size: u64,
    l: &BufAttrListRec,
    perm: NvSciBufAttrValAccessPerm,
    ep: NvSciIpcEndpoint,
) -> NvSciBufObj {
    let mut attrs = l.slot0();
    attrs.insert(NvSciBufGeneralAttrKey_ActualPerm, Value::from_u32s(&[perm]));
    let need_cpu_access = attrs.get(NvSciBufGeneralAttrKey_NeedCpuAccess).is_some_and(Value::bool);
    let mem = Arc::new(BufMem { pages: memory, size, need_cpu_access, module: l.module.clone(), attrs });
    crate::ipc::endpoint::bind(ep, &mem, crate::ipc::endpoint::BoundKind::Buf);
    new_handle(mem, perm)
}

/// Allocates memory for the reconciled list `l`.
pub(crate) fn alloc_for(l: &BufAttrListRec) -> Res<NvSciBufObj> {
    if !l.flags.reconciled {
        return bad();
    }
    let attrs = l.slot0();
    let types = attrs.get(NvSciBufGeneralAttrKey_Types).map(Value::u32s).unwrap_or_default();
    let (size, align) = if types.contains(&NvSciBufType_RawBuffer) {
        let size = attrs.get(NvSciBufRawBufferAttrKey_Size).map_or(0, Value::u64);
        let align = attrs.get(NvSciBufRawBufferAttrKey_Align).map_or(1, Value::u64);
        (size, align)
    } else if types.contains(&NvSciBufType_Image) {
        let size = attrs.get(NvSciBufImageAttrKey_Size).map_or(0, Value::u64);
        let align = attrs
            .get(NvSciBufImageAttrKey_PlaneBaseAddrAlign)
            .and_then(|v| v.u32s().into_iter().max())
            .map_or(1, u64::from);
        (size, align)
    } else {
        return Err(NvSciError_NotSupported);
    };
    if size == 0 {
        return bad();
    }
    let pages = match gpu_array_memory(&attrs, size, align) {
        Some(v) => Memory::Vmm(v),
        None => Memory::Pages(Pages::zeroed(size, align)?),
    };
    let need_cpu_access = attrs.get(NvSciBufGeneralAttrKey_NeedCpuAccess).is_some_and(Value::bool);
    let mem = Arc::new(BufMem { pages, size, need_cpu_access, module: l.module.clone(), attrs });
    Ok(new_handle(mem, NvSciBufAccessPerm_ReadWrite))
}

/// VMM memory for a block-linear image that names a GPU, where that GPU and its driver offer
/// host-NUMA VMM memory (see [`crate::vmm`]); `None` otherwise (the allocation uses host pages).
fn gpu_array_memory(attrs: &Slot, size: u64, align: u64) -> Option<crate::vmm::VmmMemory> {
    let block_linear =
        attrs.get(NvSciBufImageAttrKey_Layout).map(Value::u32) == Some(NvSciBufImage_BlockLinearType);
    let gpu = first_gpu(attrs)?;
    if !block_linear {
        return None;
    }
    let v = crate::vmm::VmmMemory::alloc(&gpu, size)?;
    // The granule (2 MiB on an H100) is a multiple of any plane alignment the mock reconciles;
    // checked rather than assumed.
    (v.as_ptr() as usize as u64).is_multiple_of(align.max(1)).then_some(v)
}

/// The first GPU the reconciled attributes name (`GpuId`): the one VMM memory is made for.
pub(crate) fn first_gpu(attrs: &Slot) -> Option<[u8; 16]> {
    attrs.get(NvSciBufGeneralAttrKey_GpuId)?.bytes().get(..16)?.try_into().ok()
}

pub(crate) unsafe extern "C" fn alloc(reconciled: NvSciBufAttrList, out: *mut NvSciBufObj) -> NvSciError {
    guard("NvSciBufObjAlloc", || {
        // SAFETY: `reconciled` is NULL or a live list handle of this mock.
        let l = unsafe { list::get(reconciled) }?;
        non_null(out)?;
        let obj = alloc_for(l)?;
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, obj) }
    })
}

pub(crate) unsafe extern "C" fn reconcile_and_alloc(
    inputs: *const NvSciBufAttrList,
    count: usize,
    out: *mut NvSciBufObj,
    out_conflict: *mut NvSciBufAttrList,
) -> NvSciError {
    guard("NvSciBufAttrListReconcileAndObjAlloc", || {
        non_null(out)?;
        non_null(out_conflict)?;
        // SAFETY: `inputs` is NULL or `count` list handles of this mock.
        let lists = unsafe { list::unreconciled_inputs(inputs, count) }?;
        let (obj, conflict, result) = match list::reconcile_lists(&lists) {
            Ok(rec) => {
                // SAFETY: `rec` was just created by `reconcile_lists`.
                let r = unsafe { list::get(rec) }.and_then(alloc_for);
                // SAFETY: the intermediate reconciled list is ours to free.
                unsafe { list::free(rec) };
                match r {
                    Ok(obj) => (obj, std::ptr::null_mut(), Ok(())),
                    Err(e) => (std::ptr::null_mut(), std::ptr::null_mut(), Err(e)),
                }
            }
            Err((e, c)) => (std::ptr::null_mut(), c, Err(e)),
        };
        // SAFETY: both out-pointers are non-NULL caller storage.
        unsafe {
            out.write(obj);
            out_conflict.write(conflict);
        }
        result
    })
}

pub(crate) unsafe extern "C" fn free(obj: NvSciBufObj) {
    // SAFETY: `obj` is NULL or a live object handle of this mock; freeing consumes it.
    crate::ffi::guard_void(|| drop(unsafe { handle::take::<BufObjRec, _>(obj) }));
}

pub(crate) unsafe extern "C" fn dup(obj: NvSciBufObj, out: *mut NvSciBufObj) -> NvSciError {
    guard("NvSciBufObjDup", || {
        // SAFETY: `obj` is NULL or a live object handle of this mock.
        let o = unsafe { get(obj) }?;
        non_null(out)?;
        let d = new_handle(o.mem.clone(), o.perm);
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, d) }
    })
}

pub(crate) unsafe extern "C" fn dup_with_reduce_perm(
    obj: NvSciBufObj,
    perm: NvSciBufAttrValAccessPerm,
    out: *mut NvSciBufObj,
) -> NvSciError {
    guard("NvSciBufObjDupWithReducePerm", || {
        // SAFETY: `obj` is NULL or a live object handle of this mock.
        let o = unsafe { get(obj) }?;
        non_null(out)?;
        let valid = perm == NvSciBufAccessPerm_Readonly || perm == NvSciBufAccessPerm_ReadWrite;
        if !valid || perm > o.perm {
            return bad();
        }
        let d = new_handle(o.mem.clone(), perm);
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, d) }
    })
}

pub(crate) unsafe extern "C" fn get_attr_list(obj: NvSciBufObj, out: *mut NvSciBufAttrList) -> NvSciError {
    guard("NvSciBufObjGetAttrList", || {
        // SAFETY: `obj` is NULL or a live object handle of this mock.
        let o = unsafe { get(obj) }?;
        let view: *const BufAttrListRec = &*o.view;
        // SAFETY: `out` is NULL (rejected) or caller storage; the view lives as long as the object.
        unsafe { write_out(out, view.cast_mut().cast()) }
    })
}

pub(crate) unsafe extern "C" fn get_cpu_ptr(obj: NvSciBufObj, out: *mut *mut c_void) -> NvSciError {
    guard("NvSciBufObjGetCpuPtr", || {
        // SAFETY: `obj` is NULL or a live object handle of this mock.
        let o = unsafe { get(obj) }?;
        non_null(out)?;
        // "NvSciError_BadParameter NvSciBufObj either did not request for CPU access by setting
        // NvSciBufGeneralAttrKey_NeedCpuAccess to true OR does not have
        // NvSciBufAccessPerm_ReadWrite to the buffer" (NvSciBufObjGetCpuPtr, nvscibuf.h).
        if !o.mem.need_cpu_access || o.perm != NvSciBufAccessPerm_ReadWrite {
            return bad();
        }
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, o.host_memory().0.cast()) }
    })
}

pub(crate) unsafe extern "C" fn get_const_cpu_ptr(obj: NvSciBufObj, out: *mut *const c_void) -> NvSciError {
    guard("NvSciBufObjGetConstCpuPtr", || {
        // SAFETY: `obj` is NULL or a live object handle of this mock.
        let o = unsafe { get(obj) }?;
        non_null(out)?;
        // "NvSciError_BadParameter NvSciBufObj either did not request for CPU access by setting
        // NvSciBufGeneralAttrKey_NeedCpuAccess to true OR does not have at least
        // NvSciBufAccessPerm_ReadOnly" (NvSciBufObjGetConstCpuPtr, nvscibuf.h).
        if !o.mem.need_cpu_access {
            return bad();
        }
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, o.host_memory().0.cast_const().cast()) }
    })
}

pub(crate) unsafe extern "C" fn flush_cpu_cache_range(obj: NvSciBufObj, offset: u64, len: u64) -> NvSciError {
    guard("NvSciBufObjFlushCpuCacheRange", || {
        // SAFETY: `obj` is NULL or a live object handle of this mock.
        let o = unsafe { get(obj) }?;
        if len == 0 {
            return bad();
        }
        let end = offset.checked_add(len).ok_or(NvSciError_Overflow)?;
        if end > o.mem.size {
            return bad();
        }
        if !o.mem.need_cpu_access {
            return Err(NvSciError_NotPermitted);
        }
        // Host memory is coherent: nothing to flush, but the call is recorded so that tests can
        // check the CPU party flushed where CpuNeedSwCacheCoherency asks it to.
        o.mem.module.ledger.record_flush(crate::ledger::Flush { offset, len });
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn validate(obj: NvSciBufObj) -> NvSciError {
    // SAFETY: `obj` is NULL or a live object handle of this mock.
    guard("NvSciBufObjValidate", || unsafe { get(obj) }.map(|_| ()))
}
