//! Mistakes a new user makes with lists, objects, fences and wait contexts: each is refused by
//! the library (here the mock, as strict as nvscibuf.h / nvscisync.h document) with its status
//! code, and the error names the key, argument or rule broken ([`Error::Refused`] and its
//! [`Culprit`]). Each test quotes the header sentence the refusal follows.
#![cfg(feature = "mock")]

use nvsci::buf::{
    BufAttr, BufAttrList, BufModule, BufObj, BufType, ColorFormat, ImageLayout, Perm, ScanType,
};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::{Culprit, Error, NvSci, NvSciError};
use std::time::Duration;

fn buf_module() -> BufModule {
    BufModule::open(&NvSci::mock()).unwrap()
}

fn sync_module() -> SyncModule {
    SyncModule::open(&NvSci::mock()).unwrap()
}

fn raw_list(m: &BufModule, cpu: bool) -> BufAttrList {
    let mut l = m.attr_list().unwrap();
    l.set(&[
        BufAttr::Types(&[BufType::RAW_BUFFER]),
        BufAttr::RawSize(4096),
        BufAttr::RequiredPerm(Perm::ReadWrite),
        BufAttr::NeedCpuAccess(cpu),
    ])
    .unwrap();
    l
}

fn sync_list(m: &SyncModule, perm: SyncPerm, cpu: bool) -> SyncAttrList {
    let mut l = m.attr_list().unwrap();
    l.set(&[SyncAttr::NeedCpuAccess(cpu), SyncAttr::RequiredPerm(perm)]).unwrap();
    l
}

/// The function, code and culprit of an [`Error::Refused`]; panics on any other outcome.
#[track_caller]
fn refused<T>(r: nvsci::Result<T>) -> (&'static str, NvSciError, Culprit) {
    match r {
        Err(Error::Refused { function, code, culprit }) => (function, code, culprit),
        Err(other) => panic!("expected Error::Refused, got {other:?}"),
        Ok(_) => panic!("expected Error::Refused, the call succeeded"),
    }
}

/// nvscibuf.h, NvSciBufObjGetCpuPtr / NvSciBufObjGetConstCpuPtr: "NvSciError_BadParameter
/// NvSciBufObj either did not request for CPU access by setting
/// NvSciBufGeneralAttrKey_NeedCpuAccess to true OR does not have ..." the permission.
#[test]
fn cpu_access_without_need_cpu_access_names_the_key() {
    let m = buf_module();
    let obj = BufObj::alloc(&BufAttrList::reconcile(&[&raw_list(&m, false)]).unwrap()).unwrap();
    let (function, code, culprit) = refused(obj.cpu_read());
    assert_eq!((function, code), ("NvSciBufObjGetConstCpuPtr", NvSciError::BAD_PARAMETER));
    assert_eq!(culprit, Culprit::CpuAccessNotRequested);
    assert_eq!(culprit.key(), Some("NvSciBufGeneralAttrKey_NeedCpuAccess"));
    let (function, code, culprit) = refused(obj.cpu_write());
    assert_eq!((function, code), ("NvSciBufObjGetCpuPtr", NvSciError::BAD_PARAMETER));
    assert_eq!(culprit, Culprit::CpuAccessNotRequested);
    // The same object with CPU access asked for maps.
    let obj = BufObj::alloc(&BufAttrList::reconcile(&[&raw_list(&m, true)]).unwrap()).unwrap();
    assert_eq!(obj.cpu_read().unwrap().len(), 4096);
}

/// nvscisync.h, NvSciSyncObjSignal: "NvSciError_BadParameter if ... syncObj is not a CPU
/// Signaler"; NvSciSyncObjGenerateFence: "syncObj is not a CPU signaler".
#[test]
fn cpu_signal_without_cpu_signaler_is_named() {
    let m = sync_module();
    // An engine signals (no NeedCpuAccess in the signaler's list); the CPU only waits.
    let s = sync_list(&m, SyncPerm::SignalOnly, false);
    let w = sync_list(&m, SyncPerm::WaitOnly, true);
    let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&s, &w]).unwrap()).unwrap();
    let (function, code, culprit) = refused(obj.signal());
    assert_eq!((function, code), ("NvSciSyncObjSignal", NvSciError::BAD_PARAMETER));
    assert_eq!(culprit, Culprit::NotCpuSignaler);
    assert_eq!(culprit.argument(), "syncObj");
    let (function, _, culprit) = refused(obj.generate_fence());
    assert_eq!(function, "NvSciSyncObjGenerateFence");
    assert_eq!(culprit, Culprit::NotCpuSignaler);
}

/// nvscisync.h, NvSciSyncFenceWait: "NvSciError_BadParameter if ... caller doesn't have CPU
/// wait permissions in NvSciSyncObj associated with syncFence".
#[test]
fn cpu_wait_without_cpu_waiter_is_named() {
    let m = sync_module();
    // The CPU signals; the waiter is an engine (no NeedCpuAccess in the waiter's list).
    let s = sync_list(&m, SyncPerm::SignalOnly, true);
    let w = sync_list(&m, SyncPerm::WaitOnly, false);
    let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&s, &w]).unwrap()).unwrap();
    let fence = obj.generate_fence().unwrap();
    obj.signal().unwrap();
    let mut ctx = m.cpu_wait_context().unwrap();
    let (function, code, culprit) = refused(fence.wait(&mut ctx, Some(Duration::from_secs(1))));
    assert_eq!((function, code), ("NvSciSyncFenceWait", NvSciError::BAD_PARAMETER));
    assert_eq!(culprit, Culprit::NotCpuWaiter);
    assert_eq!(culprit.key(), Some("NvSciSyncAttrKey_NeedCpuAccess"));
}

/// nvscisync.h, NvSciSyncFenceWait: "NvSciError_BadParameter if ... syncFence and context are
/// associated with different NvSciSyncModule".
#[test]
fn wait_context_of_another_module_is_named() {
    let lib = NvSci::mock();
    let m = SyncModule::open(&lib).unwrap();
    let s = sync_list(&m, SyncPerm::SignalOnly, true);
    let w = sync_list(&m, SyncPerm::WaitOnly, true);
    let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&s, &w]).unwrap()).unwrap();
    let fence = obj.generate_fence().unwrap();
    obj.signal().unwrap();
    let mut other = SyncModule::open(&lib).unwrap().cpu_wait_context().unwrap();
    let (function, code, culprit) = refused(fence.wait(&mut other, Some(Duration::from_secs(1))));
    assert_eq!((function, code), ("NvSciSyncFenceWait", NvSciError::BAD_PARAMETER));
    assert_eq!(culprit, Culprit::WaitContextOfAnotherModule);
    assert_eq!(culprit.argument(), "context");
    // A context of the object's own module waits.
    fence.wait(&mut m.cpu_wait_context().unwrap(), Some(Duration::from_secs(1))).unwrap();
}

/// nvscibuf.h, NvSciBufAttrListReconcile: "NvSciError_BadParameter if ... an attribute key is
/// set to an unsupported value considering the data type(s)": each per-plane key holds one
/// element per plane (`NvSciBufImageAttrKey_PlaneCount`).
#[test]
fn plane_array_length_that_disagrees_with_plane_count_is_named() {
    let m = buf_module();
    let mut l = m.attr_list().unwrap();
    l.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::Layout(ImageLayout::PitchLinear),
        BufAttr::ScanType(ScanType::Progressive),
        BufAttr::PlaneCount(2),
        BufAttr::PlaneColorFormat(&[ColorFormat::Y8, ColorFormat::U8V8]),
        BufAttr::PlaneWidth(&[64, 32]),
        BufAttr::PlaneHeight(&[32]),
    ])
    .unwrap();
    for result in [BufAttrList::reconcile(&[&l]).map(drop), BufObj::reconcile_and_alloc(&[&l]).map(drop)] {
        let (_, code, culprit) = refused(result);
        assert_eq!(code, NvSciError::BAD_PARAMETER);
        assert_eq!(
            culprit,
            Culprit::PlaneArrayLength { key: "NvSciBufImageAttrKey_PlaneHeight", len: 1, plane_count: 2 }
        );
        assert_eq!(culprit.key(), Some("NvSciBufImageAttrKey_PlaneHeight"));
    }
}

/// nvscibuf.h, NvSciBufAttrListReconcile: "not all the NvSciBufAttrLists in inputArray are
/// bound to the same NvSciBufModule"; nvscisync.h, NvSciSyncAttrListReconcile: "not all the
/// NvSciSyncAttrLists in inputArray are bound to the same NvSciSyncModule instance".
#[test]
fn lists_of_two_modules_are_named() {
    // Two modules of one loaded library (lists of two loaded libraries never reach one).
    let lib = NvSci::mock();
    let (a, b) = (BufModule::open(&lib).unwrap(), BufModule::open(&lib).unwrap());
    let (one, two) = (raw_list(&a, true), raw_list(&b, true));
    let (function, code, culprit) = refused(BufAttrList::reconcile(&[&one, &two]));
    assert_eq!((function, code), ("NvSciBufAttrListReconcile", NvSciError::BAD_PARAMETER));
    assert_eq!(culprit, Culprit::ListsOfTwoModules { index: 1 });
    assert_eq!(refused(BufAttrList::append(&[&one, &two])).2, Culprit::ListsOfTwoModules { index: 1 });
    assert_eq!(
        refused(BufObj::reconcile_and_alloc(&[&one, &two])).2,
        Culprit::ListsOfTwoModules { index: 1 }
    );

    let (a, b) = (SyncModule::open(&lib).unwrap(), SyncModule::open(&lib).unwrap());
    let (s, w) = (sync_list(&a, SyncPerm::SignalOnly, true), sync_list(&b, SyncPerm::WaitOnly, true));
    let (function, _, culprit) = refused(SyncAttrList::reconcile(&[&s, &w]));
    assert_eq!(function, "NvSciSyncAttrListReconcile");
    assert_eq!(culprit, Culprit::ListsOfTwoModules { index: 1 });
    assert_eq!(refused(SyncObj::reconcile_and_alloc(&[&s, &w])).2, Culprit::ListsOfTwoModules { index: 1 });
}

/// nvscibuf.h, NvSciBufAttrListReconcile: "any of the NvSciBufAttrList in inputArray is
/// reconciled"; nvscisync.h, NvSciSyncAttrListReconcile: "any of the input NvSciSyncAttrLists
/// are not unreconciled".
#[test]
fn reconciling_a_reconciled_list_is_named() {
    let m = buf_module();
    let l = raw_list(&m, true);
    let r = BufAttrList::reconcile(&[&l]).unwrap();
    let (function, code, culprit) = refused(BufAttrList::reconcile(&[&l, &r]));
    assert_eq!((function, code), ("NvSciBufAttrListReconcile", NvSciError::BAD_PARAMETER));
    assert_eq!(culprit, Culprit::AlreadyReconciled { index: 1 });
    assert_eq!(culprit.argument(), "inputArray");

    let m = sync_module();
    let (s, w) = (sync_list(&m, SyncPerm::SignalOnly, true), sync_list(&m, SyncPerm::WaitOnly, true));
    let r = SyncAttrList::reconcile(&[&s, &w]).unwrap();
    assert_eq!(refused(SyncAttrList::reconcile(&[&r])).2, Culprit::AlreadyReconciled { index: 0 });
}

/// nvscibuf.h, NvSciBufAttrListReconcile: "an NvSciBufAttrList appears multiple times in
/// inputArray[]"; nvscisync.h, NvSciSyncAttrListReconcile: "an NvSciSyncAttrList appears
/// multiple times in inputArray".
#[test]
fn the_same_list_twice_is_named() {
    let m = buf_module();
    let (a, b) = (raw_list(&m, true), raw_list(&m, false));
    let (function, code, culprit) = refused(BufAttrList::reconcile(&[&a, &b, &a]));
    assert_eq!((function, code), ("NvSciBufAttrListReconcile", NvSciError::BAD_PARAMETER));
    assert_eq!(culprit, Culprit::SameListTwice { first: 0, second: 2 });

    let m = sync_module();
    let (s, w) = (sync_list(&m, SyncPerm::SignalOnly, true), sync_list(&m, SyncPerm::WaitOnly, true));
    assert_eq!(
        refused(SyncAttrList::reconcile(&[&s, &w, &w])).2,
        Culprit::SameListTwice { first: 1, second: 2 }
    );
}

/// nvscibuf.h, NvSciBufAttrListSlotGetAttrs: "NvSciError_BadParameter if ... slotIndex >= slot
/// count of NvSciBufAttrList"; nvscisync.h, NvSciSyncAttrListSlotGetAttrs: "slotIndex is not a
/// valid slot in attrList".
#[test]
fn a_slot_index_out_of_range_is_named() {
    let m = buf_module();
    let (a, b) = (raw_list(&m, true), raw_list(&m, false));
    let appended = BufAttrList::append(&[&a, &b]).unwrap();
    assert_eq!(appended.slot_get(1, nvsci::buf::key::NEED_CPU_ACCESS).unwrap().as_slice(), &[false]);
    let (function, code, culprit) = refused(appended.slot_get(2, nvsci::buf::key::NEED_CPU_ACCESS));
    assert_eq!((function, code), ("NvSciBufAttrListSlotGetAttrs", NvSciError::BAD_PARAMETER));
    assert_eq!(culprit, Culprit::SlotOutOfRange { slot: 2, slot_count: 2 });
    assert_eq!(culprit.argument(), "slotIndex");

    let m = sync_module();
    let s = sync_list(&m, SyncPerm::SignalOnly, true);
    let (function, _, culprit) = refused(s.slot_get(1, nvsci::sync::key::NEED_CPU_ACCESS));
    assert_eq!(function, "NvSciSyncAttrListSlotGetAttrs");
    assert_eq!(culprit, Culprit::SlotOutOfRange { slot: 1, slot_count: 1 });
}

/// nvscibuf.h, NvSciBufAttrListClone: "NvSciError_BadParameter if ... the
/// NvSciBufGeneralAttrKey_Types key is not set on origAttrList". NvSciSync documents no such
/// rule (NvSciSyncAttrListClone refuses only NULL arguments): an empty NvSciSync list clones.
#[test]
fn cloning_an_empty_list_is_named() {
    let m = buf_module();
    let empty = m.attr_list().unwrap();
    let (function, code, culprit) = refused(empty.try_clone());
    assert_eq!((function, code), ("NvSciBufAttrListClone", NvSciError::BAD_PARAMETER));
    assert_eq!(culprit, Culprit::ListWithoutTypes { index: 0 });
    assert_eq!(culprit.key(), Some("NvSciBufGeneralAttrKey_Types"));
    // AppendUnreconciled follows the same rule ("the NvSciBufGeneralAttrKey_Types key is not
    // set on any of the NvSciBufAttrList(s) in inputUnreconciledAttrListArray").
    let typed = raw_list(&m, true);
    assert_eq!(refused(BufAttrList::append(&[&typed, &empty])).2, Culprit::ListWithoutTypes { index: 1 });

    let empty = sync_module().attr_list().unwrap();
    assert_eq!(empty.try_clone().unwrap().slot_count(), 1);
}

/// nvscibuf.h, NvSciBufAttrListGetAttrs / NvSciBufAttrListSlotGetAttrs: "NvSciError_BadParameter
/// if ... attrList is unreconciled and any of the NvSciBufAttrKey(s) specified in
/// NvSciBufAttrKeyValuePair is output only" (and "attrList is reconciled and any ... is input
/// only"). NvSciSync documents no such rule.
#[test]
fn reading_a_key_of_the_other_direction_is_named() {
    let m = buf_module();
    let l = raw_list(&m, true);
    let (function, code, culprit) = refused(l.get(nvsci::buf::key::ACTUAL_PERM));
    assert_eq!((function, code), ("NvSciBufAttrListSlotGetAttrs", NvSciError::BAD_PARAMETER));
    assert_eq!(culprit, Culprit::OutputOnlyKey { key: "NvSciBufGeneralAttrKey_ActualPerm" });
    assert_eq!(culprit.key(), Some("NvSciBufGeneralAttrKey_ActualPerm"));
    assert_eq!(culprit.argument(), "pairArray");
    let r = BufAttrList::reconcile(&[&l]).unwrap();
    assert_eq!(r.get_one(nvsci::buf::key::ACTUAL_PERM).unwrap(), Some(Perm::ReadWrite));
    let (_, _, culprit) = refused(r.get(nvsci::buf::key::REQUIRED_PERM));
    assert_eq!(culprit, Culprit::InputOnlyKey { key: "NvSciBufGeneralAttrKey_RequiredPerm" });
}
