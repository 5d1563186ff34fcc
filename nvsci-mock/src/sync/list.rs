//! NvSciSync attribute lists.

use super::keys::SYNC_KEYS;
use super::module::{self, SyncModuleShared};
use super::reconcile::{self, Failure, SyncMeta};
use crate::attrs::{self, Flags, RawPair, Slot};
use crate::desc;
use crate::ffi::{bad, guard, guard_val, guard_void, lock, non_null, slice_in, slice_mut, write_out, Res};
use crate::handle::{self, Record};
use crate::ledger::{Counted, Kind};
use crate::list_common::{self, gather, ListRecord};
use nvsci_sys::*;
use std::os::raw::c_void;
use std::sync::{Arc, Mutex};

/// The record behind an `NvSciSyncAttrList`.
#[repr(C)]
pub(crate) struct SyncAttrListRec {
    magic: u64,
    pub module: Arc<SyncModuleShared>,
    pub flags: Flags,
    /// Set for reconciled lists.
    pub meta: Option<SyncMeta>,
    pub slots: Mutex<Vec<Slot>>,
    /// DebugDump text of a conflict list.
    pub report: Option<String>,
    _count: Option<Counted>,
}

// SAFETY: repr(C) with the magic first.
unsafe impl Record for SyncAttrListRec {
    const MAGIC: u64 = 0x4e56_5359_4e4c_5354; // "NVSYNLST"
}

impl ListRecord for SyncAttrListRec {
    type Module = SyncModuleShared;
    fn flags(&self) -> Flags {
        self.flags
    }
    fn module(&self) -> &Arc<SyncModuleShared> {
        &self.module
    }
    fn slots(&self) -> &Mutex<Vec<Slot>> {
        &self.slots
    }
}

impl SyncAttrListRec {
    /// A new list record, counted in the module's ledger unless it is an object's view.
    pub(crate) fn new(
        module: Arc<SyncModuleShared>,
        flags: Flags,
        meta: Option<SyncMeta>,
        slots: Vec<Slot>,
        report: Option<String>,
    ) -> Box<SyncAttrListRec> {
        let count = (!flags.borrowed).then(|| module.ledger.track(Kind::AttrList));
        Box::new(SyncAttrListRec {
            magic: Self::MAGIC,
            module,
            flags,
            meta,
            slots: Mutex::new(slots),
            report,
            _count: count,
        })
    }

    /// Hands the record out as a handle.
    pub(crate) fn into_handle(self: Box<Self>) -> NvSciSyncAttrList {
        handle::into_handle(self)
    }
}

/// Borrows a list record.
///
/// # Safety
/// `l` must be NULL or a live list handle of this mock.
pub(crate) unsafe fn get<'a>(l: NvSciSyncAttrList) -> Res<&'a SyncAttrListRec> {
    // SAFETY: forwarded contract.
    unsafe { handle::get::<SyncAttrListRec, _>(l) }
}

/// Validates an input array of unreconciled lists (see [`list_common::unreconciled_inputs`]).
///
/// # Safety
/// `inputs` must be NULL or point to `count` handles, each NULL or a live list of this mock.
pub(crate) unsafe fn unreconciled_inputs<'a>(
    inputs: *const NvSciSyncAttrList,
    count: usize,
) -> Res<Vec<&'a SyncAttrListRec>> {
    // SAFETY: forwarded contract.
    unsafe { list_common::unreconciled_inputs(inputs, count) }
}

pub(crate) unsafe extern "C" fn create(module: NvSciSyncModule, out: *mut NvSciSyncAttrList) -> NvSciError {
    guard("NvSciSyncAttrListCreate", || {
        // SAFETY: `module` is NULL or a live module handle of this mock.
        let m = unsafe { module::get(module) }?;
        non_null(out)?;
        let rec =
            SyncAttrListRec::new(m.shared.clone(), Flags::UNRECONCILED, None, vec![Slot::default()], None);
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, rec.into_handle()) }
    })
}

pub(crate) unsafe extern "C" fn free(list: NvSciSyncAttrList) {
    guard_void(|| {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        if let Ok(l) = unsafe { get(list) } {
            if l.flags.borrowed {
                return;
            }
            // SAFETY: validated above; the caller gives the handle up.
            drop(unsafe { handle::take::<SyncAttrListRec, _>(list) });
        }
    });
}

pub(crate) unsafe extern "C" fn is_reconciled(list: NvSciSyncAttrList, out: *mut bool) -> NvSciError {
    guard("NvSciSyncAttrListIsReconciled", || {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        let l = unsafe { get(list) }?;
        // SAFETY: `out` is NULL (rejected) or caller storage.
        unsafe { write_out(out, l.flags.reconciled) }
    })
}

/// Sets `pairs` on the writable list `list`, all or nothing (the rules of
/// `NvSciSyncAttrListSetAttrs`).
///
/// # Safety
/// `list` must be NULL or a live list handle of this mock; every non-NULL value must be readable
/// for its `len` bytes.
pub(crate) unsafe fn set_pairs(list: NvSciSyncAttrList, pairs: &[RawPair]) -> Res {
    // SAFETY: forwarded contract.
    let l = unsafe { get(list) }?;
    if !l.flags.writable {
        return bad();
    }
    let mut slots = lock(&l.slots);
    let slot = slots.first_mut().ok_or(NvSciError_BadParameter)?;
    // SAFETY: forwarded contract.
    let staged = unsafe { attrs::stage(SYNC_KEYS, pairs, slot) }?;
    for (spec, value) in staged {
        slot.insert(spec.key, value);
    }
    Ok(())
}

pub(crate) unsafe extern "C" fn set_attrs(
    list: NvSciSyncAttrList,
    pairs: *const NvSciSyncAttrKeyValuePair,
    count: usize,
) -> NvSciError {
    guard("NvSciSyncAttrListSetAttrs", || {
        // SAFETY: `pairs` is NULL or points to `count` pairs.
        let pairs = unsafe { slice_in(pairs, count) }?;
        let raw: Vec<RawPair> =
            pairs.iter().map(|p| RawPair { key: p.attrKey, value: p.value, len: p.len }).collect();
        // SAFETY: `list` is NULL or live; each pair's value is readable for `len` bytes per the
        // caller's contract.
        unsafe { set_pairs(list, &raw) }
    })
}

fn lookup(slot: &Slot, key: u32) -> Res<(*const c_void, usize)> {
    attrs::find(SYNC_KEYS, key).ok_or(NvSciError_BadParameter)?;
    Ok(slot.get(key).map_or((std::ptr::null(), 0), |v| (v.as_ptr(), v.len())))
}

fn fill_pairs(l: &SyncAttrListRec, index: usize, pairs: &mut [NvSciSyncAttrKeyValuePair]) -> Res {
    let slots = lock(&l.slots);
    // "slotIndex is not a valid slot in attrList" is BadParameter
    // (NvSciSyncAttrListSlotGetAttrs, nvscisync.h).
    let slot = slots.get(index).ok_or(NvSciError_BadParameter)?;
    let found = pairs.iter().map(|p| lookup(slot, p.attrKey)).collect::<Res<Vec<_>>>()?;
    for (p, (value, len)) in pairs.iter_mut().zip(found) {
        p.value = value;
        p.len = len;
    }
    Ok(())
}

pub(crate) unsafe extern "C" fn get_attrs(
    list: NvSciSyncAttrList,
    pairs: *mut NvSciSyncAttrKeyValuePair,
    count: usize,
) -> NvSciError {
    // SAFETY: forwarded contract.
    unsafe { slot_get_attrs(list, 0, pairs, count) }
}

pub(crate) unsafe extern "C" fn slot_get_attrs(
    list: NvSciSyncAttrList,
    slot: usize,
    pairs: *mut NvSciSyncAttrKeyValuePair,
    count: usize,
) -> NvSciError {
    guard("NvSciSyncAttrListSlotGetAttrs", || {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        let l = unsafe { get(list) }?;
        // SAFETY: `pairs` is NULL or points to `count` caller-owned pairs.
        let pairs = unsafe { slice_mut(pairs, count) }?;
        fill_pairs(l, slot, pairs)
    })
}

pub(crate) unsafe extern "C" fn get_attr(
    list: NvSciSyncAttrList,
    key: NvSciSyncAttrKey,
    value: *mut *const c_void,
    len: *mut usize,
) -> NvSciError {
    guard("NvSciSyncAttrListGetAttr", || {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        let l = unsafe { get(list) }?;
        non_null(value)?;
        non_null(len)?;
        let (v, n) = {
            let slots = lock(&l.slots);
            lookup(slots.first().ok_or(NvSciError_BadParameter)?, key)?
        };
        // SAFETY: both out-pointers are non-NULL caller storage.
        unsafe {
            value.write(v);
            len.write(n);
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn get_slot_count(list: NvSciSyncAttrList) -> usize {
    guard_val(0, || {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        unsafe { get(list) }.map_or(0, |l| lock(&l.slots).len())
    })
}

pub(crate) unsafe extern "C" fn append_unreconciled(
    inputs: *const NvSciSyncAttrList,
    count: usize,
    out: *mut NvSciSyncAttrList,
) -> NvSciError {
    guard("NvSciSyncAttrListAppendUnreconciled", || {
        non_null(out)?;
        // SAFETY: `inputs` is NULL or `count` list handles of this mock.
        let lists = unsafe { unreconciled_inputs(inputs, count) }?;
        let module = lists[0].module.clone();
        let rec = SyncAttrListRec::new(module, Flags::APPENDED, None, gather(&lists), None);
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, rec.into_handle()) }
    })
}

pub(crate) unsafe extern "C" fn clone(list: NvSciSyncAttrList, out: *mut NvSciSyncAttrList) -> NvSciError {
    guard("NvSciSyncAttrListClone", || {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        let l = unsafe { get(list) }?;
        non_null(out)?;
        let slots = l.snapshot();
        let m = l.module.clone();
        let rec = if l.flags.reconciled {
            SyncAttrListRec::new(m, Flags::RECONCILED, l.meta, slots, None)
        } else if l.flags.conflict {
            SyncAttrListRec::new(m, Flags::CONFLICT, None, slots, l.report.clone())
        } else {
            let slots = slots.iter().map(Slot::unlocked).collect();
            SyncAttrListRec::new(m, Flags::UNRECONCILED, None, slots, None)
        };
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, rec.into_handle()) }
    })
}

/// Reconciles `lists` into a new reconciled list handle, or the error with an optional conflict
/// list handle.
pub(crate) fn reconcile_lists(
    lists: &[&SyncAttrListRec],
) -> Result<NvSciSyncAttrList, (NvSciError, NvSciSyncAttrList)> {
    let module = match lists.first() {
        Some(l) => l.module.clone(),
        None => return Err((NvSciError_BadParameter, std::ptr::null_mut())),
    };
    match reconcile::reconcile(&gather(lists)) {
        Ok((slot, meta)) => {
            Ok(SyncAttrListRec::new(module, Flags::RECONCILED, Some(meta), vec![slot], None).into_handle())
        }
        Err(Failure::Conflicts { slot, report }) => {
            let c = SyncAttrListRec::new(module, Flags::CONFLICT, None, vec![slot], Some(report));
            Err((NvSciError_ReconciliationFailed, c.into_handle()))
        }
    }
}

pub(crate) unsafe extern "C" fn reconcile(
    inputs: *const NvSciSyncAttrList,
    count: usize,
    out_reconciled: *mut NvSciSyncAttrList,
    out_conflict: *mut NvSciSyncAttrList,
) -> NvSciError {
    guard("NvSciSyncAttrListReconcile", || {
        non_null(out_reconciled)?;
        non_null(out_conflict)?;
        // SAFETY: `inputs` is NULL or `count` list handles of this mock.
        let lists = unsafe { unreconciled_inputs(inputs, count) }?;
        let (rec, conflict, result) = match reconcile_lists(&lists) {
            Ok(h) => (h, std::ptr::null_mut(), Ok(())),
            Err((e, c)) => (std::ptr::null_mut(), c, Err(e)),
        };
        // SAFETY: both out-pointers are non-NULL caller storage.
        unsafe {
            out_reconciled.write(rec);
            out_conflict.write(conflict);
        }
        result
    })
}

/// Whether the reconciled list `given` satisfies what reconciling the inputs again yields.
#[allow(non_upper_case_globals)]
fn satisfies(given: &SyncAttrListRec, fresh: &Slot, fresh_meta: &SyncMeta) -> bool {
    let slot = given.slot0();
    given.meta.as_ref() == Some(fresh_meta)
        && fresh.iter().all(|(key, v)| match key {
            NvSciSyncAttrKey_ActualPerm => slot.get(key).is_some_and(|g| g.u64() & v.u64() == v.u64()),
            _ => slot.get(key) == Some(v),
        })
}

pub(crate) unsafe extern "C" fn validate_reconciled(
    reconciled: NvSciSyncAttrList,
    inputs: *const NvSciSyncAttrList,
    count: usize,
    out_valid: *mut bool,
) -> NvSciError {
    guard("NvSciSyncAttrListValidateReconciled", || {
        non_null(out_valid)?;
        // SAFETY: `reconciled` is NULL or a live list handle of this mock.
        let r = unsafe { get(reconciled) }?;
        if !r.flags.reconciled {
            return bad();
        }
        // SAFETY: `inputs` is NULL or `count` list handles of this mock.
        let lists = unsafe { unreconciled_inputs(inputs, count) }?;
        if !Arc::ptr_eq(&lists[0].module, &r.module) {
            return bad();
        }
        let valid = match reconcile::reconcile(&gather(&lists)) {
            Ok((fresh, meta)) => satisfies(r, &fresh, &meta),
            Err(_) => false,
        };
        // SAFETY: `out_valid` is non-NULL caller storage.
        unsafe { out_valid.write(valid) };
        if valid {
            Ok(())
        } else {
            bad()
        }
    })
}

pub(crate) unsafe extern "C" fn debug_dump(
    list: NvSciSyncAttrList,
    buf: *mut *mut c_void,
    len: *mut usize,
) -> NvSciError {
    guard("NvSciSyncAttrListDebugDump", || {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        let l = unsafe { get(list) }?;
        non_null(buf)?;
        non_null(len)?;
        let text = match &l.report {
            Some(r) => r.clone(),
            None => attrs::dump(SYNC_KEYS, "NvSciSyncAttrList", l.flags.reconciled, &l.snapshot()),
        };
        let (p, n) = desc::alloc_text(&l.module.ledger, &text)?;
        // SAFETY: both out-pointers are non-NULL caller storage.
        unsafe {
            buf.write(p);
            len.write(n);
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn free_desc(desc_buf: *mut c_void) {
    // SAFETY: `desc_buf` is NULL or a buffer returned by a DebugDump of this mock.
    guard_void(|| unsafe { desc::free(desc_buf) });
}
