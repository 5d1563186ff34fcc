//! NvSciBuf attribute lists: create, set/get, clone, append, dump, reconcile, validate.

use super::keys::{key_type, BUF_KEYS};
use super::module::{self, BufModuleShared};
use super::reconcile::{self, Failure};
use crate::attrs::{self, Access, Flags, RawPair, Slot};
use crate::desc;
use crate::ffi::{bad, guard, guard_val, guard_void, lock, non_null, slice_in, slice_mut, write_out, Res};
use crate::handle::{self, Record};
use crate::ledger::{Counted, Kind};
use crate::list_common::{self, gather, ListRecord};
use nvsci_sys::*;
use std::os::raw::c_void;
use std::sync::{Arc, Mutex};

/// The record behind an `NvSciBufAttrList`.
#[repr(C)]
pub(crate) struct BufAttrListRec {
    magic: u64,
    pub module: Arc<BufModuleShared>,
    pub flags: Flags,
    pub slots: Mutex<Vec<Slot>>,
    /// DebugDump text of a conflict list.
    pub report: Option<String>,
    _count: Option<Counted>,
}

// SAFETY: repr(C) with the magic first.
unsafe impl Record for BufAttrListRec {
    const MAGIC: u64 = 0x4e56_4255_464c_5354; // "NVBUFLST"
}

impl ListRecord for BufAttrListRec {
    type Module = BufModuleShared;
    fn flags(&self) -> Flags {
        self.flags
    }
    fn module(&self) -> &Arc<BufModuleShared> {
        &self.module
    }
    fn slots(&self) -> &Mutex<Vec<Slot>> {
        &self.slots
    }
}

impl BufAttrListRec {
    /// A new list record, counted in the module's ledger unless it is an object's view.
    pub(crate) fn new(
        module: Arc<BufModuleShared>,
        flags: Flags,
        slots: Vec<Slot>,
        report: Option<String>,
    ) -> Box<BufAttrListRec> {
        let count = (!flags.borrowed).then(|| module.ledger.track(Kind::AttrList));
        Box::new(BufAttrListRec {
            magic: Self::MAGIC,
            module,
            flags,
            slots: Mutex::new(slots),
            report,
            _count: count,
        })
    }

    /// Hands the record out as a handle.
    pub(crate) fn into_handle(self: Box<Self>) -> NvSciBufAttrList {
        handle::into_handle(self)
    }
}

/// Borrows a list record.
///
/// # Safety
/// `l` must be NULL or a live list handle of this mock.
pub(crate) unsafe fn get<'a>(l: NvSciBufAttrList) -> Res<&'a BufAttrListRec> {
    // SAFETY: forwarded contract.
    unsafe { handle::get::<BufAttrListRec, _>(l) }
}

/// Validates an input array of unreconciled lists (see [`list_common::unreconciled_inputs`]).
///
/// # Safety
/// `inputs` must be NULL or point to `count` handles, each NULL or a live list of this mock.
pub(crate) unsafe fn unreconciled_inputs<'a>(
    inputs: *const NvSciBufAttrList,
    count: usize,
) -> Res<Vec<&'a BufAttrListRec>> {
    // SAFETY: forwarded contract.
    unsafe { list_common::unreconciled_inputs(inputs, count) }
}

pub(crate) unsafe extern "C" fn create(module: NvSciBufModule, out: *mut NvSciBufAttrList) -> NvSciError {
    guard("NvSciBufAttrListCreate", || {
        // SAFETY: `module` is NULL or a live module handle of this mock.
        let m = unsafe { module::get(module) }?;
        non_null(out)?;
        let rec = BufAttrListRec::new(m.shared.clone(), Flags::UNRECONCILED, vec![Slot::default()], None);
        // SAFETY: `out` is non-NULL caller storage for a handle.
        unsafe { write_out(out, rec.into_handle()) }
    })
}

pub(crate) unsafe extern "C" fn free(list: NvSciBufAttrList) {
    guard_void(|| {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        if let Ok(l) = unsafe { get(list) } {
            if l.flags.borrowed {
                // Owned by its object; freeing it is the object's job.
                return;
            }
            // SAFETY: validated above; the caller gives the handle up.
            drop(unsafe { handle::take::<BufAttrListRec, _>(list) });
        }
    });
}

fn to_raw(p: &NvSciBufAttrKeyValuePair) -> RawPair {
    RawPair { key: p.key, value: p.value, len: p.len }
}

pub(crate) unsafe extern "C" fn set_attrs(
    list: NvSciBufAttrList,
    pairs: *mut NvSciBufAttrKeyValuePair,
    count: usize,
) -> NvSciError {
    guard("NvSciBufAttrListSetAttrs", || {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        let l = unsafe { get(list) }?;
        if !l.flags.writable {
            return bad();
        }
        // SAFETY: `pairs` is NULL or points to `count` pairs.
        let pairs = unsafe { slice_in(pairs.cast_const(), count) }?;
        let raw: Vec<RawPair> = pairs.iter().map(to_raw).collect();
        let mut slots = lock(&l.slots);
        let slot = slots.first_mut().ok_or(NvSciError_BadParameter)?;
        // SAFETY: each pair's value is readable for `len` bytes per the caller's contract.
        let staged = unsafe { attrs::stage(BUF_KEYS, &raw, slot) }?;
        // Type-specific keys need their type in Types (already set, or set by this call).
        let types = staged
            .iter()
            .find(|(s, _)| s.key == NvSciBufGeneralAttrKey_Types)
            .map(|(_, v)| v.u32s())
            .or_else(|| slot.get(NvSciBufGeneralAttrKey_Types).map(|v| v.u32s()))
            .unwrap_or_default();
        if staged.iter().any(|(s, _)| key_type(s.key) != 0 && !types.contains(&key_type(s.key))) {
            return bad();
        }
        for (spec, value) in staged {
            slot.insert(spec.key, value);
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn get_slot_count(list: NvSciBufAttrList) -> usize {
    guard_val(0, || {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        unsafe { get(list) }.map_or(0, |l| lock(&l.slots).len())
    })
}

/// Fills `pairs` from slot `index`, enforcing the documented direction rules.
fn fill_pairs(l: &BufAttrListRec, index: usize, pairs: &mut [NvSciBufAttrKeyValuePair]) -> Res {
    let slots = lock(&l.slots);
    // "slotIndex >= slot count of NvSciBufAttrList" is BadParameter (NvSciBufAttrListSlotGetAttrs,
    // nvscibuf.h).
    let slot = slots.get(index).ok_or(NvSciError_BadParameter)?;
    for p in pairs.iter() {
        let spec = attrs::find(BUF_KEYS, p.key).ok_or(NvSciError_BadParameter)?;
        let wrong_way =
            if l.flags.reconciled { spec.access == Access::In } else { spec.access == Access::Out };
        if wrong_way {
            return bad();
        }
    }
    for p in pairs.iter_mut() {
        match slot.get(p.key) {
            Some(v) => {
                p.value = v.as_ptr();
                p.len = v.len();
            }
            None => {
                p.value = std::ptr::null();
                p.len = 0;
            }
        }
    }
    Ok(())
}

pub(crate) unsafe extern "C" fn get_attrs(
    list: NvSciBufAttrList,
    pairs: *mut NvSciBufAttrKeyValuePair,
    count: usize,
) -> NvSciError {
    // SAFETY: forwarded contract.
    unsafe { slot_get_attrs(list, 0, pairs, count) }
}

pub(crate) unsafe extern "C" fn slot_get_attrs(
    list: NvSciBufAttrList,
    slot: usize,
    pairs: *mut NvSciBufAttrKeyValuePair,
    count: usize,
) -> NvSciError {
    guard("NvSciBufAttrListSlotGetAttrs", || {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        let l = unsafe { get(list) }?;
        // SAFETY: `pairs` is NULL or points to `count` pairs owned by the caller.
        let pairs = unsafe { slice_mut(pairs, count) }?;
        fill_pairs(l, slot, pairs)
    })
}

pub(crate) unsafe extern "C" fn debug_dump(
    list: NvSciBufAttrList,
    buf: *mut *mut c_void,
    len: *mut usize,
) -> NvSciError {
    guard("NvSciBufAttrListDebugDump", || {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        let l = unsafe { get(list) }?;
        non_null(buf)?;
        non_null(len)?;
        let text = match &l.report {
            Some(r) => r.clone(),
            None => attrs::dump(BUF_KEYS, "NvSciBufAttrList", l.flags.reconciled, &l.snapshot()),
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

/// Outcome of reconciling `lists`: a reconciled list handle, or the error with an optional
/// conflict list handle.
pub(crate) fn reconcile_lists(
    lists: &[&BufAttrListRec],
) -> Result<NvSciBufAttrList, (NvSciError, NvSciBufAttrList)> {
    let module = match lists.first() {
        Some(l) => l.module.clone(),
        None => return Err((NvSciError_BadParameter, std::ptr::null_mut())),
    };
    let slots = gather(lists);
    let env = module.env();
    match reconcile::reconcile(&slots, &env) {
        Ok(slot) => Ok(BufAttrListRec::new(module, Flags::RECONCILED, vec![slot], None).into_handle()),
        Err(Failure::Code(e)) => Err((e, std::ptr::null_mut())),
        Err(Failure::Conflicts { slot, report }) => {
            let c = BufAttrListRec::new(module, Flags::CONFLICT, vec![slot], Some(report));
            Err((NvSciError_ReconciliationFailed, c.into_handle()))
        }
        Err(Failure::Unsupported { slot, report }) => {
            let c = BufAttrListRec::new(module, Flags::CONFLICT, vec![slot], Some(report));
            Err((NvSciError_NotSupported, c.into_handle()))
        }
    }
}

pub(crate) unsafe extern "C" fn reconcile(
    inputs: *const NvSciBufAttrList,
    count: usize,
    out_reconciled: *mut NvSciBufAttrList,
    out_conflict: *mut NvSciBufAttrList,
) -> NvSciError {
    guard("NvSciBufAttrListReconcile", || {
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

pub(crate) unsafe extern "C" fn clone(list: NvSciBufAttrList, out: *mut NvSciBufAttrList) -> NvSciError {
    guard("NvSciBufAttrListClone", || {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        let l = unsafe { get(list) }?;
        non_null(out)?;
        let slots = l.snapshot();
        // "the NvSciBufGeneralAttrKey_Types key is not set on origAttrList" is BadParameter
        // (NvSciBufAttrListClone, nvscibuf.h).
        if slots.iter().any(|s| s.get(NvSciBufGeneralAttrKey_Types).is_none()) {
            return bad();
        }
        let rec = if l.flags.reconciled {
            BufAttrListRec::new(l.module.clone(), Flags::RECONCILED, slots, None)
        } else if l.flags.conflict {
            BufAttrListRec::new(l.module.clone(), Flags::CONFLICT, slots, l.report.clone())
        } else {
            let slots = slots.iter().map(Slot::unlocked).collect();
            BufAttrListRec::new(l.module.clone(), Flags::UNRECONCILED, slots, None)
        };
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, rec.into_handle()) }
    })
}

pub(crate) unsafe extern "C" fn append_unreconciled(
    inputs: *const NvSciBufAttrList,
    count: usize,
    out: *mut NvSciBufAttrList,
) -> NvSciError {
    guard("NvSciBufAttrListAppendUnreconciled", || {
        non_null(out)?;
        // SAFETY: `inputs` is NULL or `count` list handles of this mock.
        let lists = unsafe { unreconciled_inputs(inputs, count) }?;
        let slots = gather(&lists);
        // "the NvSciBufGeneralAttrKey_Types key is not set on any of the NvSciBufAttrList(s) in
        // inputUnreconciledAttrListArray" is BadParameter (NvSciBufAttrListAppendUnreconciled,
        // nvscibuf.h); the mock reads it as: on any one of them.
        if slots.iter().any(|s| s.get(NvSciBufGeneralAttrKey_Types).is_none()) {
            return bad();
        }
        let module = lists[0].module.clone();
        let rec = BufAttrListRec::new(module, Flags::APPENDED, slots, None);
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, rec.into_handle()) }
    })
}

pub(crate) unsafe extern "C" fn is_reconciled(list: NvSciBufAttrList, out: *mut bool) -> NvSciError {
    guard("NvSciBufAttrListIsReconciled", || {
        // SAFETY: `list` is NULL or a live list handle of this mock.
        let l = unsafe { get(list) }?;
        // SAFETY: `out` is NULL (rejected) or caller storage.
        unsafe { write_out(out, l.flags.reconciled) }
    })
}

/// Whether `given` (a reconciled slot) satisfies what reconciling the inputs again yields.
#[allow(non_upper_case_globals)]
fn satisfies(given: &Slot, fresh: &Slot) -> bool {
    fresh.iter().all(|(key, v)| match key {
        // Objects upgrade ActualPerm to ReadWrite; more permission is fine.
        NvSciBufGeneralAttrKey_ActualPerm => given.get(key).is_some_and(|g| g.u32() >= v.u32()),
        // Depends on the module configuration at reconciliation time.
        NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency => true,
        _ => given.get(key) == Some(v),
    })
}

pub(crate) unsafe extern "C" fn validate_reconciled(
    reconciled: NvSciBufAttrList,
    inputs: *const NvSciBufAttrList,
    count: usize,
    out_valid: *mut bool,
) -> NvSciError {
    guard("NvSciBufAttrListValidateReconciled", || {
        // SAFETY: `reconciled` is NULL or a live list handle of this mock.
        let r = unsafe { get(reconciled) }?;
        non_null(out_valid)?;
        if !r.flags.reconciled {
            return bad();
        }
        // SAFETY: `inputs` is NULL or `count` list handles of this mock.
        let lists = unsafe { unreconciled_inputs(inputs, count) }?;
        let env = r.module.env();
        let valid = match reconcile::reconcile(&gather(&lists), &env) {
            Ok(fresh) => satisfies(&r.slot0(), &fresh),
            Err(_) => false,
        };
        // SAFETY: `out_valid` is non-NULL caller storage.
        unsafe { out_valid.write(valid) };
        if valid {
            Ok(())
        } else {
            Err(NvSciError_ReconciliationFailed)
        }
    })
}
