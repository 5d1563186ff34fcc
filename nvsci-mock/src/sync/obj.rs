//! NvSciSync objects: a 64-bit counter (the primitive, see [`super::counter`]), on which CPU
//! waits sleep.
//!
//! The object state is shared by every object handle (`NvSciSyncObjDup`) and every non-cleared
//! fence; it lives until the last of them is gone. `NvSciSyncObjGenerateFence` (CPU signaler) and
//! `SyncObjGenerateEngineFence` (any other signaler) increment the "next" value and return a
//! fence for it; `NvSciSyncObjSignal` advances the counter by one (never beyond the last generated
//! fence value) and wakes waiters. An engine signaler stores fence values into the counter itself
//! and then calls `SyncCounterNotify` (or not: CPU waits also re-read the counter every few
//! milliseconds).

use super::counter::Counter;
use super::fence;
use super::list::{self, SyncAttrListRec};
use super::reconcile::TIMESTAMP_SLOTS;
use super::state::SyncCore;
use crate::attrs::Flags;
use crate::ffi::{bad, guard, guard_void, lock, non_null, write_out, Res};
use crate::handle::{self, Record};
use crate::ledger::{Counted, Kind};
use crate::list_common::ListRecord;
use nvsci_sys::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The record behind an `NvSciSyncObj`.
#[repr(C)]
pub(crate) struct SyncObjRec {
    magic: u64,
    pub core: Arc<SyncCore>,
    view: Box<SyncAttrListRec>,
    _count: Counted,
}

// SAFETY: repr(C) with the magic first.
unsafe impl Record for SyncObjRec {
    const MAGIC: u64 = 0x4e56_5359_4e4f_424a; // "NVSYNOBJ"
}

fn new_handle(core: Arc<SyncCore>, view_src: &SyncAttrListRec) -> NvSciSyncObj {
    let view = SyncAttrListRec::new(
        core.module.clone(),
        Flags::OBJECT_VIEW,
        Some(core.meta),
        vec![view_src.slot0()],
        None,
    );
    let count = core.module.ledger.track(Kind::Object);
    handle::into_handle(Box::new(SyncObjRec { magic: SyncObjRec::MAGIC, core, view, _count: count }))
}

impl SyncObjRec {
    /// The object's reconciled attributes, as its `NvSciSyncObjGetAttrList` view holds them.
    pub(crate) fn view_slot(&self) -> crate::attrs::Slot {
        crate::list_common::ListRecord::slot0(&*self.view)
    }

    /// The object's attribute-list view.
    pub(crate) fn view(&self) -> &SyncAttrListRec {
        &self.view
    }
}

/// Borrows an object record.
///
/// # Safety
/// `obj` must be NULL or a live object handle of this mock.
pub(crate) unsafe fn get<'a>(obj: NvSciSyncObj) -> Res<&'a SyncObjRec> {
    // SAFETY: forwarded contract.
    unsafe { handle::get::<SyncObjRec, _>(obj) }
}

fn alloc_for(l: &SyncAttrListRec) -> Res<NvSciSyncObj> {
    let meta = match (l.flags.reconciled, l.meta) {
        (true, Some(meta)) => meta,
        _ => return bad(),
    };
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let uuid =
        crate::ipc::codec::fnv1a(&[u64::from(std::process::id()).to_le_bytes(), id.to_le_bytes()].concat());
    let core = Arc::new(SyncCore::new(id, uuid, l.module.clone(), meta, Counter::new()?, 0));
    Ok(new_handle(core, l))
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A handle on an object exported by another process: its counter mapped from the exporter's
/// pages, identified by the exporter's `uuid`, described by the reconciled list `l` (imported
/// from the same exporter). Fences generated here continue from the counter's current value.
pub(crate) fn from_import(
    counter: Counter,
    uuid: u64,
    l: &SyncAttrListRec,
    ep: NvSciIpcEndpoint,
) -> Res<NvSciSyncObj> {
    let meta = match (l.flags.reconciled, l.meta) {
        (true, Some(meta)) => meta,
        _ => return bad(),
    };
    let next = counter.load();
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let core = Arc::new(SyncCore::new(id, uuid, l.module.clone(), meta, counter, next));
    crate::ipc::endpoint::bind(ep, &core, crate::ipc::endpoint::BoundKind::Sync);
    Ok(new_handle(core, l))
}

pub(crate) unsafe extern "C" fn alloc(reconciled: NvSciSyncAttrList, out: *mut NvSciSyncObj) -> NvSciError {
    guard("NvSciSyncObjAlloc", || {
        // SAFETY: `reconciled` is NULL or a live list handle of this mock.
        let l = unsafe { list::get(reconciled) }?;
        non_null(out)?;
        let obj = alloc_for(l)?;
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, obj) }
    })
}

pub(crate) unsafe extern "C" fn reconcile_and_alloc(
    inputs: *const NvSciSyncAttrList,
    count: usize,
    out: *mut NvSciSyncObj,
    out_conflict: *mut NvSciSyncAttrList,
) -> NvSciError {
    guard("NvSciSyncAttrListReconcileAndObjAlloc", || {
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

pub(crate) unsafe extern "C" fn dup(obj: NvSciSyncObj, out: *mut NvSciSyncObj) -> NvSciError {
    guard("NvSciSyncObjDup", || {
        // SAFETY: `obj` is NULL or a live object handle of this mock.
        let o = unsafe { get(obj) }?;
        non_null(out)?;
        let d = new_handle(o.core.clone(), &o.view);
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, d) }
    })
}

pub(crate) unsafe extern "C" fn get_attr_list(obj: NvSciSyncObj, out: *mut NvSciSyncAttrList) -> NvSciError {
    guard("NvSciSyncObjGetAttrList", || {
        // SAFETY: `obj` is NULL or a live object handle of this mock.
        let o = unsafe { get(obj) }?;
        let view: *const SyncAttrListRec = &*o.view;
        // SAFETY: `out` is NULL (rejected) or caller storage; the view lives as long as the object.
        unsafe { write_out(out, view.cast_mut().cast()) }
    })
}

pub(crate) unsafe extern "C" fn free(obj: NvSciSyncObj) {
    // SAFETY: `obj` is NULL or a live object handle of this mock; freeing consumes it.
    guard_void(|| drop(unsafe { handle::take::<SyncObjRec, _>(obj) }));
}

pub(crate) unsafe extern "C" fn validate(obj: NvSciSyncObj) -> NvSciError {
    // SAFETY: `obj` is NULL or a live object handle of this mock.
    guard("NvSciSyncObjValidate", || unsafe { get(obj) }.map(|_| ()))
}

/// Who may request the fence of the next signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signaler {
    /// The CPU (`NvSciSyncObjGenerateFence`): the object's signaler must be the CPU.
    Cpu,
    /// The object's engine (`SyncObjGenerateEngineFence`): the signaler must not be the CPU.
    Engine,
}

/// Reserves the next value of `obj`'s timeline for `by` and writes its fence into `out`,
/// releasing the fence `out` held before.
///
/// # Safety
/// `obj` must be NULL or a live object handle of this mock; `out` must be NULL or point to a
/// caller fence (cleared or valid).
pub(crate) unsafe fn generate(obj: NvSciSyncObj, out: *mut NvSciSyncFence, by: Signaler) -> Res {
    // SAFETY: forwarded contract.
    let o = unsafe { get(obj) }?;
    non_null(out)?;
    // "syncObj is not a CPU signaler" is BadParameter (NvSciSyncObjGenerateFence, nvscisync.h):
    // the CPU generates fences only where this process's own lists made it the signaler; an
    // engine only where the signaler is not a CPU.
    let allowed = match by {
        Signaler::Cpu => o.core.meta.cpu_signal_here,
        Signaler::Engine => !o.core.meta.cpu_signaler,
    };
    if !allowed {
        return bad();
    }
    // SAFETY: `out` is non-NULL and points to a caller fence (cleared or valid).
    let old = unsafe { out.read() };
    fence::check(&old)?;
    let value = {
        let mut st = lock(&o.core.state);
        if st.next >= o.core.meta.max_value {
            return Err(NvSciError_Overflow);
        }
        st.next += 1;
        st.next
    };
    let new = fence::make(&o.core, value);
    // SAFETY: `out` is caller storage; the previous contents were validated above and their
    // reference is released after the overwrite.
    unsafe { out.write(new) };
    fence::release(old);
    Ok(())
}

pub(crate) unsafe extern "C" fn generate_fence(obj: NvSciSyncObj, out: *mut NvSciSyncFence) -> NvSciError {
    // SAFETY: `obj` is NULL or a live object handle of this mock; `out` is NULL or a caller fence.
    guard("NvSciSyncObjGenerateFence", || unsafe { generate(obj, out, Signaler::Cpu) })
}

pub(crate) unsafe extern "C" fn signal(obj: NvSciSyncObj) -> NvSciError {
    guard("NvSciSyncObjSignal", || {
        // SAFETY: `obj` is NULL or a live object handle of this mock.
        let o = unsafe { get(obj) }?;
        // "syncObj is not a CPU Signaler" is BadParameter (NvSciSyncObjSignal, nvscisync.h).
        if !o.core.meta.cpu_signal_here {
            return bad();
        }
        let mut st = lock(&o.core.state);
        let next = st.next;
        let previous = o
            .core
            .counter
            .atomic()
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| (c < next).then(|| c + 1))
            .map_err(|_| NvSciError_InvalidState)?;
        if o.core.meta.timestamps {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
            let value = previous + 1;
            if st.stamps.len() >= TIMESTAMP_SLOTS as usize {
                st.stamps.pop_front();
            }
            st.stamps.push_back((value, now));
        }
        drop(st);
        o.core.counter.notify();
        Ok(())
    })
}
