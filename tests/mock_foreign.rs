//! Adopting handles that another library in the process made: attribute lists, buffer and sync
//! objects and fences created through raw `nvsci_sys` calls on the same loaded implementation
//! (the mock's tables, or the mock's shared object loaded under the real SONAMEs), taken over
//! with `from_foreign` (a copy or reference of the crate's own) or `from_raw_owned` (ownership
//! passes). Each side frees its own, in either order, and the mock's ledgers come back to zero.
#![cfg(feature = "mock")]

mod common;

use core::ptr::null_mut;
use nvsci::buf::{key, BufAttr, BufAttrList, BufModule, BufObj, Perm};
use nvsci::sync::{Fence, SyncAttr, SyncAttrList, SyncModule, SyncObj};
use nvsci::{Error, HandleCounts, ListState, NvSci, NvSciError};
use nvsci_sys as sys;
use std::time::Duration;

/// Calls a table entry, asserting success for entries that return an `NvSciError`.
macro_rules! call {
    ($t:expr, $f:ident ( $($a:expr),* $(,)? )) => {
        // SAFETY: the tests pass live handles of the table's own implementation.
        unsafe { ($t.$f.expect(stringify!($f)))($($a),*) }
    };
}

macro_rules! ok {
    ($t:expr, $f:ident ( $($a:expr),* $(,)? )) => {
        assert_eq!(call!($t, $f($($a),*)), sys::NvSciError_Success, stringify!($f))
    };
}

fn buf_pair<T>(key: sys::NvSciBufAttrKey, v: &[T]) -> sys::NvSciBufAttrKeyValuePair {
    sys::NvSciBufAttrKeyValuePair { key, value: v.as_ptr().cast(), len: size_of_val(v) }
}

fn sync_pair<T>(key: sys::NvSciSyncAttrKey, v: &[T]) -> sys::NvSciSyncAttrKeyValuePair {
    sys::NvSciSyncAttrKeyValuePair { attrKey: key, value: v.as_ptr().cast(), len: size_of_val(v) }
}

/// What another library would do: a raw-buffer list made and filled through the C table.
fn raw_buf_list(
    t: &sys::NvSciBufFns,
    module: sys::NvSciBufModule,
    size: u64,
    perm: u32,
) -> sys::NvSciBufAttrList {
    let mut list = null_mut();
    ok!(t, NvSciBufAttrListCreate(module, &mut list));
    let (types, size, cpu, perm) = ([sys::NvSciBufType_RawBuffer], [size], [true], [perm]);
    let mut pairs = [
        buf_pair(sys::NvSciBufGeneralAttrKey_Types, &types),
        buf_pair(sys::NvSciBufRawBufferAttrKey_Size, &size),
        buf_pair(sys::NvSciBufGeneralAttrKey_NeedCpuAccess, &cpu),
        buf_pair(sys::NvSciBufGeneralAttrKey_RequiredPerm, &perm),
    ];
    ok!(t, NvSciBufAttrListSetAttrs(list, pairs.as_mut_ptr(), pairs.len()));
    list
}

fn raw_reconcile(t: &sys::NvSciBufFns, lists: &[sys::NvSciBufAttrList]) -> sys::NvSciBufAttrList {
    let (mut out, mut conflict) = (null_mut(), null_mut());
    ok!(t, NvSciBufAttrListReconcile(lists.as_ptr(), lists.len(), &mut out, &mut conflict));
    assert!(conflict.is_null());
    out
}

/// A raw read-write buffer object with CPU access, and the reconciled list it came from.
fn raw_buf_obj(
    t: &sys::NvSciBufFns,
    module: sys::NvSciBufModule,
) -> (sys::NvSciBufObj, sys::NvSciBufAttrList) {
    let list = raw_buf_list(t, module, 4096, sys::NvSciBufAccessPerm_ReadWrite);
    let reconciled = raw_reconcile(t, &[list]);
    call!(t, NvSciBufAttrListFree(list));
    let mut obj = null_mut();
    ok!(t, NvSciBufObjAlloc(reconciled, &mut obj));
    (obj, reconciled)
}

fn raw_sync_list(t: &sys::NvSciSyncFns, module: sys::NvSciSyncModule, perm: u64) -> sys::NvSciSyncAttrList {
    let mut list = null_mut();
    ok!(t, NvSciSyncAttrListCreate(module, &mut list));
    let (cpu, perm) = ([true], [perm]);
    let pairs = [
        sync_pair(sys::NvSciSyncAttrKey_NeedCpuAccess, &cpu),
        sync_pair(sys::NvSciSyncAttrKey_RequiredPerm, &perm),
    ];
    ok!(t, NvSciSyncAttrListSetAttrs(list, pairs.as_ptr(), pairs.len()));
    list
}

/// A raw CPU-signalled sync object (reconciled from a signaler and a waiter list).
fn raw_sync_obj(
    t: &sys::NvSciSyncFns,
    module: sys::NvSciSyncModule,
) -> (sys::NvSciSyncObj, sys::NvSciSyncAttrList) {
    let s = raw_sync_list(t, module, sys::NvSciSyncAccessPerm_SignalOnly);
    let w = raw_sync_list(t, module, sys::NvSciSyncAccessPerm_WaitOnly);
    let (mut reconciled, mut conflict) = (null_mut(), null_mut());
    ok!(t, NvSciSyncAttrListReconcile([s, w].as_ptr(), 2, &mut reconciled, &mut conflict));
    assert!(conflict.is_null());
    call!(t, NvSciSyncAttrListFree(s));
    call!(t, NvSciSyncAttrListFree(w));
    let mut obj = null_mut();
    ok!(t, NvSciSyncObjAlloc(reconciled, &mut obj));
    (obj, reconciled)
}

fn raw_buf_get_u64(t: &sys::NvSciBufFns, list: sys::NvSciBufAttrList, key: sys::NvSciBufAttrKey) -> u64 {
    let mut pair = sys::NvSciBufAttrKeyValuePair { key, value: core::ptr::null(), len: 0 };
    ok!(t, NvSciBufAttrListGetAttrs(list, &mut pair, 1));
    assert_eq!(pair.len, 8);
    // SAFETY: the library returned 8 readable bytes for this key.
    unsafe { pair.value.cast::<u64>().read_unaligned() }
}

fn only_the_module(ledger: &nvsci::Ledger) {
    assert_eq!(ledger.counts(), HandleCounts { modules: 1, ..Default::default() }, "{:?}", ledger.counts());
}

#[test]
fn adopted_unreconciled_list_is_a_writable_copy_each_side_frees_its_own() {
    let t = nvsci_mock::buf_fns();
    let m = BufModule::open(&NvSci::mock()).unwrap();
    let ledger = m.mock_ledger().unwrap();

    // The other library fills a list of its own under the application's module; the foreign
    // handle is freed first and the adopted copy lives on.
    let raw = raw_buf_list(&t, m.as_raw(), 4096, sys::NvSciBufAccessPerm_ReadWrite);
    // SAFETY: a live list of the mock, which `m` uses; nothing frees it during the call.
    let mut adopted = unsafe { BufAttrList::from_foreign(&m, raw, ListState::Unreconciled) }.unwrap();
    assert_ne!(adopted.as_raw(), raw, "a copy, not the same handle");
    assert_eq!(ledger.counts().attr_lists, 2);
    call!(t, NvSciBufAttrListFree(raw));
    assert!(!adopted.is_reconciled().unwrap());
    assert_eq!(adopted.get_one(key::RAW_SIZE).unwrap(), Some(4096));
    // A copy of an unreconciled list is writable: the application adds its own requirements.
    adopted.set(&[BufAttr::RawAlign(256)]).unwrap();
    let mine = {
        let mut l = m.attr_list().unwrap();
        l.set(&[BufAttr::Types(&[nvsci::buf::BufType::RAW_BUFFER]), BufAttr::RawSize(4096)]).unwrap();
        l
    };
    let obj = BufObj::alloc(&BufAttrList::reconcile(&[&adopted, &mine]).unwrap()).unwrap();
    assert_eq!((obj.size(), obj.perm()), (4096, Perm::ReadWrite));
    assert_eq!(obj.attr_list().unwrap().get_one(key::RAW_ALIGN).unwrap(), Some(256));
    drop((obj, mine, adopted));
    only_the_module(&ledger);

    // The other way round: the adopted copy goes first, the foreign list stays usable.
    let raw = raw_buf_list(&t, m.as_raw(), 8192, sys::NvSciBufAccessPerm_Readonly);
    // SAFETY: as above.
    let adopted = unsafe { BufAttrList::from_foreign(&m, raw, ListState::Unreconciled) }.unwrap();
    drop(adopted);
    assert_eq!(raw_buf_get_u64(&t, raw, sys::NvSciBufRawBufferAttrKey_Size), 8192);
    call!(t, NvSciBufAttrListFree(raw));
    only_the_module(&ledger);
}

#[test]
fn adopted_lists_of_another_module_keep_their_own_ledger() {
    let (bt, st) = (nvsci_mock::buf_fns(), nvsci_mock::sync_fns());
    let lib = NvSci::mock();
    let (bm, sm) = (BufModule::open(&lib).unwrap(), SyncModule::open(&lib).unwrap());
    // The other library's own modules.
    let (mut fbm, mut fsm) = (null_mut(), null_mut());
    ok!(bt, NvSciBufModuleOpen(&mut fbm));
    ok!(st, NvSciSyncModuleOpen(&mut fsm));
    // SAFETY: both are live modules of this mock.
    let (fb_ledger, fs_ledger) = unsafe {
        (nvsci_mock::buf_module_ledger(fbm).unwrap(), nvsci_mock::sync_module_ledger(fsm).unwrap())
    };

    let (raw_obj, raw_reconciled) = raw_buf_obj(&bt, fbm);
    let (raw_sync, raw_sync_reconciled) = raw_sync_obj(&st, fsm);
    // SAFETY (every adoption below): live handles of the mock `bm` and `sm` use; the foreign
    // modules stay open until the adopted values are gone.
    let list = unsafe { BufAttrList::from_foreign(&bm, raw_reconciled, ListState::Reconciled) }.unwrap();
    let obj = unsafe { BufObj::from_foreign(&bm, raw_obj) }.unwrap();
    let slist =
        unsafe { SyncAttrList::from_foreign(&sm, raw_sync_reconciled, ListState::Reconciled) }.unwrap();
    let sobj = unsafe { SyncObj::from_foreign(&sm, raw_sync) }.unwrap();
    // Copies and references are counted where the library counts them: under the module the
    // foreign handles were made under.
    assert_eq!(
        fb_ledger.counts(),
        HandleCounts { modules: 1, attr_lists: 2, objects: 2, ..Default::default() }
    );
    assert_eq!(
        fs_ledger.counts(),
        HandleCounts { modules: 1, attr_lists: 2, objects: 2, ..Default::default() }
    );

    // The foreign side frees everything first; the adopted values still work.
    call!(bt, NvSciBufObjFree(raw_obj));
    call!(bt, NvSciBufAttrListFree(raw_reconciled));
    call!(st, NvSciSyncObjFree(raw_sync));
    call!(st, NvSciSyncAttrListFree(raw_sync_reconciled));
    assert!(list.is_reconciled().unwrap() && slist.is_reconciled().unwrap());
    let again = BufObj::alloc(&list).unwrap();
    obj.cpu_write().unwrap()[..4].copy_from_slice(b"cam0");
    assert_eq!(&obj.cpu_read().unwrap()[..4], b"cam0");
    assert_eq!(again.size(), 4096);
    let fence = sobj.generate_fence().unwrap();
    sobj.signal().unwrap();
    // A CPU wait needs a wait context of the module the object was allocated under: the mock
    // refuses one of another module (BadParameter).
    match fence.wait(&mut sm.cpu_wait_context().unwrap(), Some(Duration::from_secs(5))) {
        Err(Error::NvSci { function: "NvSciSyncFenceWait", code }) => {
            assert_eq!(code, NvSciError::BAD_PARAMETER)
        }
        other => panic!("expected BadParameter, got {other:?}"),
    }
    let mut ctx = null_mut();
    ok!(st, NvSciSyncCpuWaitContextAlloc(fsm, &mut ctx));
    ok!(st, NvSciSyncFenceWait(fence.as_raw(), ctx, 5_000_000));
    call!(st, NvSciSyncCpuWaitContextFree(ctx));
    drop((again, obj, list, fence, sobj, slist));
    call!(bt, NvSciBufModuleClose(fbm));
    call!(st, NvSciSyncModuleClose(fsm));
    assert_eq!(fb_ledger.counts().total(), 0, "{:?}", fb_ledger.counts());
    assert_eq!(fs_ledger.counts().total(), 0, "{:?}", fs_ledger.counts());
    only_the_module(&bm.mock_ledger().unwrap());
    only_the_module(&sm.mock_ledger().unwrap());
}

#[test]
fn a_list_in_the_other_state_is_refused_and_nothing_leaks() {
    let (bt, st) = (nvsci_mock::buf_fns(), nvsci_mock::sync_fns());
    let lib = NvSci::mock();
    let (bm, sm) = (BufModule::open(&lib).unwrap(), SyncModule::open(&lib).unwrap());
    let (b_ledger, s_ledger) = (bm.mock_ledger().unwrap(), sm.mock_ledger().unwrap());

    let unreconciled = raw_buf_list(&bt, bm.as_raw(), 4096, sys::NvSciBufAccessPerm_ReadWrite);
    let reconciled = raw_reconcile(&bt, &[unreconciled]);
    let s_unreconciled = raw_sync_list(&st, sm.as_raw(), sys::NvSciSyncAccessPerm_WaitSignal);
    let (mut s_reconciled, mut conflict) = (null_mut(), null_mut());
    ok!(st, NvSciSyncAttrListReconcile(&s_unreconciled, 1, &mut s_reconciled, &mut conflict));
    let (b_before, s_before) = (b_ledger.counts(), s_ledger.counts());

    let mismatch = |e: Error, list: &str, expected: ListState, found: ListState| match e {
        Error::ListStateMismatch { list: l, expected: x, found: f } => {
            assert_eq!((l, x, f), (list, expected, found));
        }
        other => panic!("expected ListStateMismatch, got {other:?}"),
    };
    use ListState::{Reconciled, Unreconciled};
    // SAFETY (every call below): live lists of the mock the modules use.
    unsafe {
        let e = BufAttrList::from_foreign(&bm, reconciled, Unreconciled).unwrap_err();
        assert_eq!(e.to_string(), "the foreign NvSciBufAttrList is reconciled, not unreconciled");
        mismatch(e, "NvSciBufAttrList", Unreconciled, Reconciled);
        let e = BufAttrList::from_foreign(&bm, unreconciled, Reconciled).unwrap_err();
        mismatch(e, "NvSciBufAttrList", Reconciled, Unreconciled);
        let e = SyncAttrList::from_foreign(&sm, s_reconciled, Unreconciled).unwrap_err();
        mismatch(e, "NvSciSyncAttrList", Unreconciled, Reconciled);
        let e = SyncAttrList::from_foreign(&sm, s_unreconciled, Reconciled).unwrap_err();
        mismatch(e, "NvSciSyncAttrList", Reconciled, Unreconciled);
    }
    // Nothing was copied, nothing freed.
    assert_eq!((b_ledger.counts(), s_ledger.counts()), (b_before, s_before));

    // Given away: the refused list is freed with the error (ownership passed), the accepted
    // one is freed by its owner.
    // SAFETY: live lists of the mock, not used by this test after the call.
    unsafe {
        let e = BufAttrList::from_raw_owned(&bm, reconciled, Unreconciled).unwrap_err();
        mismatch(e, "NvSciBufAttrList", Unreconciled, Reconciled);
        let e = SyncAttrList::from_raw_owned(&sm, s_unreconciled, Reconciled).unwrap_err();
        mismatch(e, "NvSciSyncAttrList", Reconciled, Unreconciled);
    }
    assert_eq!(b_ledger.counts().attr_lists, b_before.attr_lists - 1);
    assert_eq!(s_ledger.counts().attr_lists, s_before.attr_lists - 1);
    // SAFETY: as above.
    let (mut owned, sowned) = unsafe {
        (
            BufAttrList::from_raw_owned(&bm, unreconciled, Unreconciled).unwrap(),
            SyncAttrList::from_raw_owned(&sm, s_reconciled, Reconciled).unwrap(),
        )
    };
    assert_eq!((owned.as_raw(), sowned.as_raw()), (unreconciled, s_reconciled), "no copy");
    owned.set(&[BufAttr::RawAlign(64)]).unwrap();
    assert!(sowned.is_reconciled().unwrap());
    drop((owned, sowned));
    only_the_module(&b_ledger);
    only_the_module(&s_ledger);
}

#[test]
fn null_foreign_handles_are_typed_errors() {
    let lib = NvSci::mock();
    let (bm, sm) = (BufModule::open(&lib).unwrap(), SyncModule::open(&lib).unwrap());
    let obj = {
        let mut l = sm.attr_list().unwrap();
        l.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(nvsci::sync::SyncPerm::WaitSignal)])
            .unwrap();
        SyncObj::alloc(&SyncAttrList::reconcile(&[&l]).unwrap()).unwrap()
    };
    let (b_before, s_before) = (bm.mock_ledger().unwrap().counts(), sm.mock_ledger().unwrap().counts());
    let null = |r: nvsci::Result<()>, what: &str| match r {
        Err(e @ Error::NullHandle { .. }) => {
            let Error::NullHandle { what: w } = &e else { unreachable!() };
            assert_eq!(*w, what);
            assert_eq!(e.to_string(), format!("the foreign {what} is NULL"));
        }
        other => panic!("expected NullHandle for {what}, got {other:?}"),
    };
    // SAFETY (every call below): NULL is always allowed.
    unsafe {
        for state in [ListState::Unreconciled, ListState::Reconciled] {
            null(BufAttrList::from_foreign(&bm, null_mut(), state).map(drop), "NvSciBufAttrList");
            null(BufAttrList::from_raw_owned(&bm, null_mut(), state).map(drop), "NvSciBufAttrList");
            null(SyncAttrList::from_foreign(&sm, null_mut(), state).map(drop), "NvSciSyncAttrList");
            null(SyncAttrList::from_raw_owned(&sm, null_mut(), state).map(drop), "NvSciSyncAttrList");
        }
        null(BufObj::from_foreign(&bm, null_mut()).map(drop), "NvSciBufObj");
        null(BufObj::from_raw_owned(&bm, null_mut()).map(drop), "NvSciBufObj");
        null(SyncObj::from_foreign(&sm, null_mut()).map(drop), "NvSciSyncObj");
        null(SyncObj::from_raw_owned(&sm, null_mut()).map(drop), "NvSciSyncObj");
        null(Fence::from_foreign(&obj, core::ptr::null()).map(drop), "NvSciSyncFence");
        null(Fence::from_raw_owned(&obj, null_mut()).map(drop), "NvSciSyncFence");
    }
    assert_eq!(bm.mock_ledger().unwrap().counts(), b_before);
    assert_eq!(sm.mock_ledger().unwrap().counts(), s_before);
}

#[test]
fn adopted_buffer_object_is_a_reference_of_its_own() {
    let t = nvsci_mock::buf_fns();
    let m = BufModule::open(&NvSci::mock()).unwrap();
    let ledger = m.mock_ledger().unwrap();
    let (raw, reconciled) = raw_buf_obj(&t, m.as_raw());

    // The foreign reference is freed first; the adopted one keeps the memory.
    // SAFETY: a live object of the mock `m` uses; nobody else touches its memory from the CPU.
    let obj = unsafe { BufObj::from_foreign(&m, raw) }.unwrap();
    assert_ne!(obj.as_raw(), raw, "a reference of its own");
    assert_eq!((obj.size(), obj.perm()), (4096, Perm::ReadWrite));
    call!(t, NvSciBufObjFree(raw));
    obj.cpu_write().unwrap()[..5].copy_from_slice(b"frame");
    assert_eq!(&obj.cpu_read().unwrap()[..5], b"frame");
    drop(obj);
    assert_eq!(ledger.counts().objects, 0);

    // The other way round: the adopted reference goes first, the foreign one still reads.
    let mut raw = null_mut();
    ok!(t, NvSciBufObjAlloc(reconciled, &mut raw));
    {
        // SAFETY: as above.
        let obj = unsafe { BufObj::from_foreign(&m, raw) }.unwrap();
        obj.cpu_write().unwrap()[..3].copy_from_slice(b"isp");
    }
    let mut ptr = core::ptr::null();
    ok!(t, NvSciBufObjGetConstCpuPtr(raw, &mut ptr));
    // SAFETY: the mock maps the object's 4096 bytes at `ptr` while `raw` lives.
    assert_eq!(unsafe { core::slice::from_raw_parts(ptr.cast::<u8>(), 3) }, b"isp");
    call!(t, NvSciBufObjFree(raw));

    // Given away: the crate frees it.
    let mut raw = null_mut();
    ok!(t, NvSciBufObjAlloc(reconciled, &mut raw));
    // SAFETY: a live object of the mock, not used by this test after the call.
    let owned = unsafe { BufObj::from_raw_owned(&m, raw) }.unwrap();
    assert_eq!((owned.as_raw(), owned.size(), owned.perm()), (raw, 4096, Perm::ReadWrite));
    drop(owned);
    call!(t, NvSciBufAttrListFree(reconciled));
    only_the_module(&ledger);
}

#[test]
fn a_read_only_foreign_object_stays_read_only() {
    let t = nvsci_mock::buf_fns();
    let m = BufModule::open(&NvSci::mock()).unwrap();
    let ledger = m.mock_ledger().unwrap();
    let (rw, reconciled) = raw_buf_obj(&t, m.as_raw());
    let mut ro = null_mut();
    ok!(t, NvSciBufObjDupWithReducePerm(rw, sys::NvSciBufAccessPerm_Readonly, &mut ro));

    let mut given = null_mut();
    ok!(t, NvSciBufObjDupWithReducePerm(rw, sys::NvSciBufAccessPerm_Readonly, &mut given));
    // SAFETY: live objects of the mock `m` uses (`given` is not used after the call); the test
    // makes no CPU access through `rw` or `ro` while the adopted objects hold CPU borrows.
    let (adopted, owned) =
        unsafe { (BufObj::from_foreign(&m, ro).unwrap(), BufObj::from_raw_owned(&m, given).unwrap()) };
    for obj in [&adopted, &owned] {
        assert_eq!(obj.perm(), Perm::ReadOnly);
        assert_eq!(obj.attr_list().unwrap().get_one(key::ACTUAL_PERM).unwrap(), Some(Perm::ReadOnly));
        assert!(matches!(obj.cpu_write(), Err(Error::PermissionDenied(_))));
        assert!(matches!(obj.dup_with_reduced_perm(Perm::ReadWrite), Err(Error::PermissionDenied(_))));
        assert_eq!(obj.dup().unwrap().perm(), Perm::ReadOnly);
        assert_eq!(obj.cpu_read().unwrap().len(), 4096);
    }
    call!(t, NvSciBufObjFree(ro));
    call!(t, NvSciBufObjFree(rw));
    call!(t, NvSciBufAttrListFree(reconciled));
    drop((adopted, owned));
    only_the_module(&ledger);
}

#[test]
fn adopted_sync_object_and_fences_each_side_frees_its_own() {
    let t = nvsci_mock::sync_fns();
    let m = SyncModule::open(&NvSci::mock()).unwrap();
    let ledger = m.mock_ledger().unwrap();
    let (raw_obj, reconciled) = raw_sync_obj(&t, m.as_raw());
    let mut raw_fence = sys::NVSCI_SYNC_FENCE_INITIALIZER;
    ok!(t, NvSciSyncObjGenerateFence(raw_obj, &mut raw_fence));

    // SAFETY: a live object of the mock `m` uses, and a fence of that object.
    let (obj, fence) = unsafe {
        let obj = SyncObj::from_foreign(&m, raw_obj).unwrap();
        let fence = Fence::from_foreign(&obj, &raw_fence).unwrap();
        (obj, fence)
    };
    assert!(!fence.is_cleared());
    assert_eq!(ledger.counts().objects, 2);
    assert_eq!(ledger.counts().fences, 2);
    // The foreign side lets go of everything first.
    call!(t, NvSciSyncFenceClear(&mut raw_fence));
    call!(t, NvSciSyncObjFree(raw_obj));
    call!(t, NvSciSyncAttrListFree(reconciled));
    let mut ctx = m.cpu_wait_context().unwrap();
    assert!(matches!(
        fence.wait(&mut ctx, Some(Duration::from_millis(5))),
        Err(Error::Timeout { waited_for: nvsci::Wait::Fence { .. }, .. })
    ));
    obj.signal().unwrap();
    fence.wait(&mut ctx, Some(Duration::from_secs(5))).unwrap();
    drop((fence, obj));
    assert_eq!(ledger.counts(), HandleCounts { modules: 1, wait_contexts: 1, ..Default::default() });

    // The other way round: the adopted fence and object go first; the foreign ones still wait.
    let (raw_obj, reconciled) = raw_sync_obj(&t, m.as_raw());
    let mut raw_fence = sys::NVSCI_SYNC_FENCE_INITIALIZER;
    ok!(t, NvSciSyncObjGenerateFence(raw_obj, &mut raw_fence));
    {
        // SAFETY: as above.
        let obj = unsafe { SyncObj::from_foreign(&m, raw_obj) }.unwrap();
        // SAFETY: as above.
        let fence = unsafe { Fence::from_foreign(&obj, &raw_fence) }.unwrap();
        assert!(!fence.is_cleared());
        // A cleared foreign fence adopts as a cleared fence.
        let cleared = sys::NVSCI_SYNC_FENCE_INITIALIZER;
        // SAFETY: an all-zero fence is a valid cleared fence.
        assert!(unsafe { Fence::from_foreign(&obj, &cleared) }.unwrap().is_cleared());
    }
    ok!(t, NvSciSyncObjSignal(raw_obj));
    let mut raw_ctx = null_mut();
    ok!(t, NvSciSyncCpuWaitContextAlloc(m.as_raw(), &mut raw_ctx));
    ok!(t, NvSciSyncFenceWait(&raw_fence, raw_ctx, 5_000_000));
    call!(t, NvSciSyncCpuWaitContextFree(raw_ctx));

    // Given away: the fence moves into the crate's, leaving the foreign storage cleared.
    let mut given = sys::NVSCI_SYNC_FENCE_INITIALIZER;
    ok!(t, NvSciSyncObjGenerateFence(raw_obj, &mut given));
    let fences = ledger.counts().fences;
    // SAFETY: a live object of the mock, given away; a fence of it, given away.
    let (owned_obj, owned_fence) = unsafe {
        let obj = SyncObj::from_raw_owned(&m, raw_obj).unwrap();
        let fence = Fence::from_raw_owned(&obj, &mut given).unwrap();
        (obj, fence)
    };
    assert_eq!(given.payload, [0; 6], "the foreign storage is left cleared");
    call!(t, NvSciSyncFenceClear(&mut given)); // harmless: nothing left to release
    assert_eq!(ledger.counts().fences, fences, "moved, not duplicated");
    owned_obj.signal().unwrap();
    owned_fence.wait(&mut ctx, Some(Duration::from_secs(5))).unwrap();
    drop((owned_fence, owned_obj));
    call!(t, NvSciSyncFenceClear(&mut raw_fence));
    call!(t, NvSciSyncAttrListFree(reconciled));
    drop(ctx);
    only_the_module(&ledger);
}

#[test]
#[cfg_attr(miri, ignore = "loads the mock's shared object, which Miri cannot run")]
fn handles_of_the_library_loaded_under_the_real_sonames_are_adopted() {
    // The mock's shared object, loaded like NVIDIA's libraries: the raw tables used here and the
    // crate's `NvSci` are the same loaded instance, whose own ledger is read through dlsym.
    let (_, dir) = common::mock_as_native("foreign-test");
    // SAFETY: `dir` holds only links to this workspace's mock shared object.
    let libs = unsafe { sys::loader::load_from(std::slice::from_ref(&dir), false) }.unwrap();
    let (bt, st) = (*libs.buf(), *libs.sync());
    let lib = NvSci::from_libraries(libs);
    // SAFETY: the mock exports `uint64_t NvSciMockLiveHandles(void)`; the library stays loaded
    // (`lib` holds it) while the symbol is used.
    let so = unsafe { libloading::Library::new(dir.join("libnvscibuf.so.1")) }.unwrap();
    // SAFETY: as above.
    let live = unsafe { so.get::<unsafe extern "C" fn() -> u64>(b"NvSciMockLiveHandles\0") }.unwrap();
    // SAFETY: as above.
    let live = || unsafe { live() };
    {
        let (bm, sm) = (BufModule::open(&lib).unwrap(), SyncModule::open(&lib).unwrap());
        let raw_list = raw_buf_list(&bt, bm.as_raw(), 4096, sys::NvSciBufAccessPerm_ReadWrite);
        let (raw_obj, raw_reconciled) = raw_buf_obj(&bt, bm.as_raw());
        let (raw_sync, raw_sync_reconciled) = raw_sync_obj(&st, sm.as_raw());
        let mut raw_fence = sys::NVSCI_SYNC_FENCE_INITIALIZER;
        ok!(st, NvSciSyncObjGenerateFence(raw_sync, &mut raw_fence));
        // SAFETY: live handles of the loaded library that `bm` and `sm` use.
        let (list, obj, sobj, fence) = unsafe {
            let list = BufAttrList::from_foreign(&bm, raw_list, ListState::Unreconciled).unwrap();
            let obj = BufObj::from_foreign(&bm, raw_obj).unwrap();
            let sobj = SyncObj::from_foreign(&sm, raw_sync).unwrap();
            let fence = Fence::from_foreign(&sobj, &raw_fence).unwrap();
            (list, obj, sobj, fence)
        };
        call!(st, NvSciSyncFenceClear(&mut raw_fence));
        call!(st, NvSciSyncObjFree(raw_sync));
        call!(st, NvSciSyncAttrListFree(raw_sync_reconciled));
        call!(bt, NvSciBufObjFree(raw_obj));
        call!(bt, NvSciBufAttrListFree(raw_reconciled));
        call!(bt, NvSciBufAttrListFree(raw_list));
        assert_eq!(list.get_one(key::RAW_SIZE).unwrap(), Some(4096));
        obj.cpu_write().unwrap().fill(0x5a);
        sobj.signal().unwrap();
        fence.wait(&mut sm.cpu_wait_context().unwrap(), Some(Duration::from_secs(5))).unwrap();
        assert!(live() > 0);
    }
    drop(lib);
    assert_eq!(live(), 0, "every handle of the loaded library was freed");
    let _ = std::fs::remove_dir_all(&dir);
}
