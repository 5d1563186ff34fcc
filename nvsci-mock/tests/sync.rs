//! NvSciSync emulation, exercised through the function table only.
// `call!` passes raw pointers to the C entry points, so its arguments expand inside `unsafe`.
#![allow(clippy::macro_metavars_in_unsafe)]

mod common;

use common::*;
use nvsci_mock::HandleCounts;
use nvsci_sys::*;
use std::ptr;
use std::time::{Duration, Instant};

/// Handles are plain pointers; the mock's records are thread-safe.
#[derive(Clone, Copy)]
struct Send<T>(T);
unsafe impl<T> std::marker::Send for Send<T> {}

#[test]
fn version_and_table() {
    let t = nvsci_mock::sync_fns();
    assert!(t.has_required());
    assert!(t.NvSciSyncObjValidate.is_some());
    assert!(t.NvSciSyncFenceExtractFence.is_some());
    assert!(t.NvSciSyncFenceWaitWithMode.is_none());
    assert!(t.NvSciSyncFenceUpdateFence.is_none());
    let mut ok = false;
    assert_eq!(call!(t.NvSciSyncCheckVersionCompatibility(2, 8, &mut ok)), NvSciError_Success);
    assert!(ok);
    assert_eq!(call!(t.NvSciSyncCheckVersionCompatibility(2, 9, &mut ok)), NvSciError_Success);
    assert!(!ok);
    assert_eq!(call!(t.NvSciSyncCheckVersionCompatibility(1, 0, &mut ok)), NvSciError_Success);
    assert!(!ok);
    assert_eq!(call!(t.NvSciSyncCheckVersionCompatibility(2, 0, ptr::null_mut())), NvSciError_BadParameter);
}

#[test]
fn set_get_and_rejections() {
    let s = Sync::new();
    let t = s.t;
    let l = s.party(NvSciSyncAccessPerm_WaitOnly, true);
    assert_eq!(s.get(l, NvSciSyncAttrKey_RequiredPerm).unwrap(), bytes_of(&NvSciSyncAccessPerm_WaitOnly));
    assert_eq!(s.get(l, NvSciSyncAttrKey_NeedCpuAccess).unwrap(), [1]);
    assert_eq!(s.get(l, NvSciSyncAttrKey_GpuId), None);
    let bad = |pairs: &[(u32, Vec<u8>)]| assert_eq!(s.set(l, pairs), NvSciError_BadParameter, "{pairs:?}");
    // Already set.
    bad(&[(NvSciSyncAttrKey_NeedCpuAccess, bytes_of(&false))]);
    // RequiredPerm is 8 bytes; 4 is wrong, and only 1..=3 are valid.
    let fresh = s.list(&[]);
    assert_eq!(s.set(fresh, &[(NvSciSyncAttrKey_RequiredPerm, bytes_of(&1u32))]), NvSciError_BadParameter);
    assert_eq!(s.set(fresh, &[(NvSciSyncAttrKey_RequiredPerm, bytes_of(&4u64))]), NvSciError_BadParameter);
    assert_eq!(
        s.set(fresh, &[(NvSciSyncAttrKey_RequiredPerm, bytes_of(&NvSciSyncAccessPerm_Auto))]),
        NvSciError_BadParameter
    );
    // Output-only and unknown keys.
    bad(&[(NvSciSyncAttrKey_ActualPerm, bytes_of(&NvSciSyncAccessPerm_WaitOnly))]);
    bad(&[(NvSciSyncAttrKey_MaxPrimitiveValue, bytes_of(&1u64))]);
    bad(&[(NvSciSyncAttrKey_NumTimestampSlots, bytes_of(&1u32))]);
    bad(&[(NvSciSyncAttrKey_LowerBound, bytes_of(&true))]);
    bad(&[(99, bytes_of(&true))]);
    bad(&[(NvSciSyncAttrKey_PrimitiveInfo, bytes_of(&7u32))]);
    bad(&[(NvSciSyncAttrKey_GpuId, vec![0u8; 8])]);
    assert_eq!(
        s.set(fresh, &[(NvSciSyncAttrKey_PrimitiveInfo, bytes_of_slice(&[4u32, 2]))]),
        NvSciError_Success
    );
    // Unknown key on get.
    let mut v: *const std::ffi::c_void = ptr::null();
    let mut len = 0usize;
    assert_eq!(call!(t.NvSciSyncAttrListGetAttr(l, 99, &mut v, &mut len)), NvSciError_BadParameter);
    assert_eq!(
        call!(t.NvSciSyncAttrListGetAttr(l, NvSciSyncAttrKey_NeedCpuAccess, ptr::null_mut(), &mut len)),
        NvSciError_BadParameter
    );
    // Multi-pair get and slot get.
    let mut pairs = [
        NvSciSyncAttrKeyValuePair { attrKey: NvSciSyncAttrKey_RequiredPerm, value: ptr::null(), len: 0 },
        NvSciSyncAttrKeyValuePair { attrKey: NvSciSyncAttrKey_GpuId, value: ptr::null(), len: 5 },
    ];
    assert_eq!(call!(t.NvSciSyncAttrListGetAttrs(l, pairs.as_mut_ptr(), 2)), NvSciError_Success);
    assert_eq!((pairs[0].len, pairs[1].len), (8, 0));
    assert_eq!(call!(t.NvSciSyncAttrListSlotGetAttrs(l, 1, pairs.as_mut_ptr(), 2)), NvSciError_BadParameter);
    // Clone allows setting again; append is read-only.
    let mut c = ptr::null_mut();
    assert_eq!(call!(t.NvSciSyncAttrListClone(l, &mut c)), NvSciError_Success);
    assert_eq!(s.set(c, &[(NvSciSyncAttrKey_NeedCpuAccess, bytes_of(&false))]), NvSciError_Success);
    let inputs = [l, fresh];
    let mut ap = ptr::null_mut();
    assert_eq!(call!(t.NvSciSyncAttrListAppendUnreconciled(inputs.as_ptr(), 2, &mut ap)), NvSciError_Success);
    assert_eq!(call!(t.NvSciSyncAttrListGetSlotCount(ap)), 2);
    assert_eq!(s.set(ap, &[(NvSciSyncAttrKey_GpuId, bytes_of(&gpu(1)))]), NvSciError_BadParameter);
    let text = s.dump(ap);
    assert!(text.contains("NvSciSyncAttrKey_PrimitiveInfo = [4, 2]"), "{text}");
    for x in [l, fresh, c, ap] {
        s.free(x);
    }
    assert_eq!(s.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn reconcile_success() {
    let s = Sync::new();
    let t = s.t;
    let signaler = s.party(NvSciSyncAccessPerm_SignalOnly, true);
    let waiter = s.party(NvSciSyncAccessPerm_WaitOnly, false);
    assert_eq!(s.set(waiter, &[(NvSciSyncAttrKey_GpuId, bytes_of(&gpu(7)))]), NvSciError_Success);
    let r = s.reconcile(&[signaler, waiter]).unwrap();
    let mut rec = false;
    assert_eq!(call!(t.NvSciSyncAttrListIsReconciled(r, &mut rec)), NvSciError_Success);
    assert!(rec);
    assert_eq!(s.get(r, NvSciSyncAttrKey_ActualPerm).unwrap(), bytes_of(&NvSciSyncAccessPerm_WaitSignal));
    assert_eq!(s.get(r, NvSciSyncAttrKey_NeedCpuAccess).unwrap(), [1]);
    assert_eq!(s.get(r, NvSciSyncAttrKey_MaxPrimitiveValue).unwrap(), bytes_of(&u64::MAX));
    assert_eq!(
        u32s(&s.get(r, NvSciSyncAttrKey_PrimitiveInfo).unwrap()),
        [NvSciSyncAttrValPrimitiveType_SysmemSemaphorePayload64b]
    );
    assert_eq!(s.get(r, NvSciSyncAttrKey_GpuId).unwrap(), bytes_of(&gpu(7)));
    assert_eq!(
        s.set(r, &[(NvSciSyncAttrKey_RequireDeterministicFences, bytes_of(&true))]),
        NvSciError_BadParameter
    );
    // Validation.
    let inputs = [signaler, waiter];
    let mut valid = false;
    assert_eq!(
        call!(t.NvSciSyncAttrListValidateReconciled(r, inputs.as_ptr(), 2, &mut valid)),
        NvSciError_Success
    );
    assert!(valid);
    // The object's list is a borrowed reconciled view.
    let mut o = ptr::null_mut();
    assert_eq!(call!(t.NvSciSyncObjAlloc(r, &mut o)), NvSciError_Success);
    let mut ol = ptr::null_mut();
    assert_eq!(call!(t.NvSciSyncObjGetAttrList(o, &mut ol)), NvSciError_Success);
    assert_eq!(s.get(ol, NvSciSyncAttrKey_ActualPerm).unwrap(), bytes_of(&NvSciSyncAccessPerm_WaitSignal));
    assert_eq!(s.ledger().counts().attr_lists, 3);
    // The waiter is not a CPU waiter: CPU waits are refused.
    let ctx = s.context();
    let mut f = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_Success);
    assert_eq!(call!(t.NvSciSyncFenceWait(&f, ctx, 0)), NvSciError_BadParameter);
    call!(t.NvSciSyncFenceClear(&mut f));
    call!(t.NvSciSyncCpuWaitContextFree(ctx));
    call!(t.NvSciSyncObjFree(o));
    // Unreconciled lists cannot be allocated.
    assert_eq!(call!(t.NvSciSyncObjAlloc(signaler, &mut o)), NvSciError_BadParameter);
    for x in [signaler, waiter, r] {
        s.free(x);
    }
    assert_eq!(s.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn reconcile_failures() {
    let s = Sync::new();
    let w1 = s.party(NvSciSyncAccessPerm_WaitOnly, true);
    let w2 = s.party(NvSciSyncAccessPerm_WaitOnly, true);
    let s1 = s.party(NvSciSyncAccessPerm_SignalOnly, true);
    let s2 = s.party(NvSciSyncAccessPerm_WaitSignal, false);
    // No signaler.
    let (e, c) = s.reconcile(&[w1, w2]).unwrap_err();
    assert_eq!(e, NvSciError_ReconciliationFailed);
    assert_eq!(s.get(c, NvSciSyncAttrKey_RequiredPerm).unwrap(), bytes_of(&NvSciSyncAccessPerm_WaitOnly));
    let text = s.dump(c);
    assert!(text.starts_with("NvSciSyncAttrKey_RequiredPerm: 0 signaler(s) and 2 waiter(s)"), "{text}");
    s.free(c);
    // Two signalers.
    let (e, c) = s.reconcile(&[s1, s2]).unwrap_err();
    assert_eq!(e, NvSciError_ReconciliationFailed);
    s.free(c);
    // No waiter.
    let (e, c) = s.reconcile(&[s1]).unwrap_err();
    assert_eq!(e, NvSciError_ReconciliationFailed);
    s.free(c);
    // WaitSignal alone is both.
    let r = s.reconcile(&[s2]).unwrap();
    s.free(r);
    // Primitive the mock cannot offer.
    let sp = s.party(NvSciSyncAccessPerm_SignalOnly, true);
    assert_eq!(
        s.set(sp, &[(NvSciSyncAttrKey_PrimitiveInfo, bytes_of(&NvSciSyncAttrValPrimitiveType_Syncpoint))]),
        NvSciError_Success
    );
    let (e, c) = s.reconcile(&[sp, w1]).unwrap_err();
    assert_eq!(e, NvSciError_ReconciliationFailed);
    assert!(s.get(c, NvSciSyncAttrKey_PrimitiveInfo).is_some());
    s.free(c);
    // ReconcileAndObjAlloc reports the conflict list too.
    let t = s.t;
    let inputs = [w1, w2];
    let mut o = ptr::null_mut();
    let mut c = ptr::null_mut();
    assert_eq!(
        call!(t.NvSciSyncAttrListReconcileAndObjAlloc(inputs.as_ptr(), 2, &mut o, &mut c)),
        NvSciError_ReconciliationFailed
    );
    assert!(o.is_null() && !c.is_null());
    s.free(c);
    // Duplicate and reconciled inputs.
    assert_eq!(s.reconcile(&[w1, w1]).unwrap_err().0, NvSciError_BadParameter);
    for x in [w1, w2, s1, s2, sp] {
        s.free(x);
    }
    assert_eq!(s.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn fence_wait_timeout_and_signal_from_thread() {
    let s = Sync::new();
    let t = s.t;
    let o = s.cpu_object();
    let ctx = s.context();
    let mut f = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_Success);
    let (mut id, mut value) = (99u64, 99u64);
    assert_eq!(call!(t.NvSciSyncFenceExtractFence(&f, &mut id, &mut value)), NvSciError_Success);
    assert_eq!((id, value), (0, 1));
    assert_eq!(s.ledger().counts().fences, 1);

    // Not signaled yet: times out.
    let start = Instant::now();
    assert_eq!(call!(t.NvSciSyncFenceWait(&f, ctx, 20_000)), NvSciError_Timeout);
    assert!(start.elapsed() >= Duration::from_millis(20));
    assert_eq!(call!(t.NvSciSyncFenceWait(&f, ctx, 0)), NvSciError_Timeout);

    // Signal from another thread while this one waits.
    let obj = Send(o);
    let signaler = std::thread::spawn(move || {
        let obj = obj;
        std::thread::sleep(Duration::from_millis(10));
        let t = nvsci_mock::sync_fns();
        call!(t.NvSciSyncObjSignal(obj.0))
    });
    assert_eq!(call!(t.NvSciSyncFenceWait(&f, ctx, 5_000_000)), NvSciError_Success);
    assert_eq!(signaler.join().unwrap(), NvSciError_Success);
    // Expired fences do not block, whatever the timeout.
    assert_eq!(call!(t.NvSciSyncFenceWait(&f, ctx, 0)), NvSciError_Success);
    assert_eq!(call!(t.NvSciSyncFenceWait(&f, ctx, -1)), NvSciError_Success);

    // No fence outstanding: nothing to signal.
    assert_eq!(call!(t.NvSciSyncObjSignal(o)), NvSciError_InvalidState);
    // Generating into a non-cleared fence releases the old reference.
    assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_Success);
    assert_eq!(call!(t.NvSciSyncFenceExtractFence(&f, &mut id, &mut value)), NvSciError_Success);
    assert_eq!(value, 2);
    assert_eq!(s.ledger().counts().fences, 1);
    call!(t.NvSciSyncFenceClear(&mut f));
    assert_eq!(f.payload, [0; 6]);
    assert_eq!(s.ledger().counts().fences, 0);

    call!(t.NvSciSyncCpuWaitContextFree(ctx));
    call!(t.NvSciSyncObjFree(o));
    assert_eq!(s.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn wait_argument_checks() {
    let s = Sync::new();
    let t = s.t;
    let o = s.cpu_object();
    let ctx = s.context();
    let mut f = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_Success);
    assert_eq!(call!(t.NvSciSyncFenceWait(&f, ctx, -2)), NvSciError_BadParameter);
    assert_eq!(
        call!(t.NvSciSyncFenceWait(&f, ctx, NVSCI_SYS_SYNC_FENCE_MAX_TIMEOUT_US + 1)),
        NvSciError_BadParameter
    );
    assert_eq!(call!(t.NvSciSyncFenceWait(&f, ptr::null_mut(), 0)), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciSyncFenceWait(ptr::null(), ctx, 0)), NvSciError_BadParameter);
    // A context of another module.
    let other = Sync::new();
    let foreign = other.context();
    assert_eq!(call!(t.NvSciSyncFenceWait(&f, foreign, 0)), NvSciError_BadParameter);
    call!(t.NvSciSyncCpuWaitContextFree(foreign));
    // Garbage in a fence.
    let junk = NvSciSyncFence { payload: [1, 2, 3, 4, 5, 6] };
    assert_eq!(call!(t.NvSciSyncFenceWait(&junk, ctx, 0)), NvSciError_BadParameter);
    let (mut id, mut value) = (0u64, 0u64);
    assert_eq!(call!(t.NvSciSyncFenceExtractFence(&junk, &mut id, &mut value)), NvSciError_BadParameter);
    // A forged fence with the mock's tag and a made-up state id: refused without touching memory.
    let mut forged = f.payload;
    forged[1] = u64::MAX - 7;
    let forged = NvSciSyncFence { payload: forged };
    assert_eq!(call!(t.NvSciSyncFenceWait(&forged, ctx, 0)), NvSciError_BadParameter);
    // A copy of a cleared fence's old bits no longer refers to anything once the last real fence
    // of its object is cleared (checked below, after the clear).
    let stale = NvSciSyncFence { payload: f.payload };
    // A list passed as an object.
    let l = s.party(NvSciSyncAccessPerm_WaitOnly, true);
    assert_eq!(call!(t.NvSciSyncObjSignal(l.cast())), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciSyncObjValidate(l.cast())), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciSyncObjValidate(o)), NvSciError_Success);
    s.free(l);
    call!(t.NvSciSyncFenceClear(&mut f));
    call!(t.NvSciSyncObjFree(o));
    assert_eq!(call!(t.NvSciSyncFenceWait(&stale, ctx, 0)), NvSciError_BadParameter);
    call!(t.NvSciSyncCpuWaitContextFree(ctx));
    assert_eq!(s.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn non_cpu_signaler() {
    let s = Sync::new();
    let t = s.t;
    let o = s.object(false, true, false);
    let mut f = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciSyncObjSignal(o)), NvSciError_BadParameter);
    assert_eq!(f.payload, [0; 6]);
    call!(t.NvSciSyncObjFree(o));
}

#[test]
fn cleared_fences_and_dup() {
    let s = Sync::new();
    let t = s.t;
    let o = s.cpu_object();
    let ctx = s.context();
    let mut cleared = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(call!(t.NvSciSyncFenceWait(&cleared, ctx, 0)), NvSciError_Success);
    let (mut id, mut value) = (0u64, 0u64);
    assert_eq!(call!(t.NvSciSyncFenceExtractFence(&cleared, &mut id, &mut value)), NvSciError_ClearedFence);
    let mut ts = 0u64;
    assert_eq!(call!(t.NvSciSyncFenceGetTimestamp(&cleared, &mut ts)), NvSciError_ClearedFence);
    call!(t.NvSciSyncFenceClear(&mut cleared));
    call!(t.NvSciSyncFenceClear(ptr::null_mut()));

    let mut f = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_Success);
    let mut d = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(call!(t.NvSciSyncFenceDup(&f, &mut d)), NvSciError_Success);
    assert_eq!(s.ledger().counts().fences, 2);
    assert_eq!(call!(t.NvSciSyncFenceExtractFence(&d, &mut id, &mut value)), NvSciError_Success);
    assert_eq!(value, 1);
    assert_eq!(call!(t.NvSciSyncFenceDup(&f, &mut f)), NvSciError_BadParameter);
    // Dup of a cleared fence clears the destination (releasing its reference).
    assert_eq!(call!(t.NvSciSyncFenceDup(&cleared, &mut d)), NvSciError_Success);
    assert_eq!(d.payload, [0; 6]);
    assert_eq!(s.ledger().counts().fences, 1);

    // The object outlives ObjFree while a fence refers to it.
    call!(t.NvSciSyncObjFree(o));
    assert_eq!(s.ledger().counts().objects, 0);
    assert_eq!(call!(t.NvSciSyncFenceWait(&f, ctx, 1_000)), NvSciError_Timeout);
    assert_eq!(call!(t.NvSciSyncFenceExtractFence(&f, &mut id, &mut value)), NvSciError_Success);
    call!(t.NvSciSyncFenceClear(&mut f));
    call!(t.NvSciSyncCpuWaitContextFree(ctx));
    assert_eq!(s.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn dup_objects_share_the_timeline() {
    let s = Sync::new();
    let t = s.t;
    let o = s.cpu_object();
    let mut d = ptr::null_mut();
    assert_eq!(call!(t.NvSciSyncObjDup(o, &mut d)), NvSciError_Success);
    let ctx = s.context();
    let mut f = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(call!(t.NvSciSyncObjGenerateFence(d, &mut f)), NvSciError_Success);
    assert_eq!(call!(t.NvSciSyncObjSignal(o)), NvSciError_Success);
    assert_eq!(call!(t.NvSciSyncFenceWait(&f, ctx, 0)), NvSciError_Success);
    assert_eq!(s.ledger().counts().objects, 2);
    call!(t.NvSciSyncFenceClear(&mut f));
    call!(t.NvSciSyncObjFree(o));
    call!(t.NvSciSyncObjFree(d));
    call!(t.NvSciSyncCpuWaitContextFree(ctx));
    assert_eq!(s.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

/// DRIVE OS 6.0.10's reconciliation of `WaiterRequireTimestamps` (its nvscisync.h: true when
/// any list involved is a WaitOnly/WaitSignal list with NeedCpuAccess) against the earlier
/// headers' ("Only valid for CPU waiters": true when a CPU waiter asks for it).
#[test]
fn timestamps_by_release() {
    use nvsci_mock::rules::{set_timestamp_rule, timestamp_rule, TimestampRule};
    let s = Sync::new();
    let t = s.t;
    // (signaler perm, signaler cpu, waiter perm, waiter cpu, waiter asks) -> (6.0.5-6.0.8, 6.0.10)
    type Case = ((u64, bool, u64, bool, bool), (bool, bool));
    let cases: [Case; 6] = [
        ((NvSciSyncAccessPerm_SignalOnly, false, NvSciSyncAccessPerm_WaitOnly, true, false), (false, true)),
        ((NvSciSyncAccessPerm_SignalOnly, false, NvSciSyncAccessPerm_WaitOnly, true, true), (true, true)),
        ((NvSciSyncAccessPerm_SignalOnly, true, NvSciSyncAccessPerm_WaitOnly, false, false), (false, false)),
        // A waiter without CPU access gets no timestamps under either rule, asked or not.
        ((NvSciSyncAccessPerm_SignalOnly, true, NvSciSyncAccessPerm_WaitOnly, false, true), (false, false)),
        // A WaitSignal list with CPU access is a CPU waiter too (6.0.10 names WaitSignal).
        ((NvSciSyncAccessPerm_WaitSignal, true, NvSciSyncAccessPerm_WaitOnly, false, false), (false, true)),
        ((NvSciSyncAccessPerm_WaitSignal, true, NvSciSyncAccessPerm_WaitOnly, false, true), (false, true)),
    ];
    assert_eq!(timestamp_rule(), TimestampRule::CpuWaiterRequest, "the default");
    for (rule, pick) in [(TimestampRule::CpuWaiterRequest, 0), (TimestampRule::AnyCpuWaiter, 1)] {
        set_timestamp_rule(rule);
        for ((sp, sc, wp, wc, ask), expect) in cases {
            let want = if pick == 0 { expect.0 } else { expect.1 };
            let sl = s.party(sp, sc);
            let wl = s.party(wp, wc);
            if ask {
                assert_eq!(
                    s.set(wl, &[(NvSciSyncAttrKey_WaiterRequireTimestamps, bytes_of(&true))]),
                    NvSciError_Success
                );
            }
            let lists = [sl, wl];
            let (mut r, mut c) = (ptr::null_mut(), ptr::null_mut());
            assert_eq!(
                call!(t.NvSciSyncAttrListReconcile(lists.as_ptr(), 2, &mut r, &mut c)),
                NvSciError_Success
            );
            let case = format!("{rule:?}: {sp} {sc} {wp} {wc} {ask}");
            assert_eq!(
                s.get(r, NvSciSyncAttrKey_WaiterRequireTimestamps).unwrap(),
                [u8::from(want)],
                "{case}"
            );
            let slots = u32s(&s.get(r, NvSciSyncAttrKey_NumTimestampSlots).unwrap());
            assert_eq!(slots, [if want { 1024 } else { 0 }], "{case}");
            // ValidateReconciled re-runs the thread's rule: the list is valid under it.
            let mut valid = false;
            assert_eq!(
                call!(t.NvSciSyncAttrListValidateReconciled(r, lists.as_ptr(), 2, &mut valid)),
                NvSciError_Success,
                "{case}"
            );
            assert!(valid, "{case}");
            if want && sc && sp == NvSciSyncAccessPerm_WaitSignal {
                // A CPU signal of such an object records a timestamp the CPU waiter reads.
                let mut o = ptr::null_mut();
                assert_eq!(call!(t.NvSciSyncObjAlloc(r, &mut o)), NvSciError_Success);
                let mut f = NVSCI_SYNC_FENCE_INITIALIZER;
                assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_Success);
                assert_eq!(call!(t.NvSciSyncObjSignal(o)), NvSciError_Success);
                let mut ts = 0u64;
                assert_eq!(call!(t.NvSciSyncFenceGetTimestamp(&f, &mut ts)), NvSciError_Success, "{case}");
                assert!(ts > 0);
                call!(t.NvSciSyncFenceClear(&mut f));
                call!(t.NvSciSyncObjFree(o));
            }
            s.free(r);
            s.free(sl);
            s.free(wl);
        }
    }
    set_timestamp_rule(TimestampRule::CpuWaiterRequest);
    // Another thread keeps the default.
    set_timestamp_rule(TimestampRule::AnyCpuWaiter);
    assert_eq!(std::thread::spawn(timestamp_rule).join().unwrap(), TimestampRule::CpuWaiterRequest);
    set_timestamp_rule(TimestampRule::CpuWaiterRequest);
    assert_eq!(s.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn timestamps() {
    let s = Sync::new();
    let t = s.t;
    let o = s.object(true, true, true);
    let mut l = ptr::null_mut();
    assert_eq!(call!(t.NvSciSyncObjGetAttrList(o, &mut l)), NvSciError_Success);
    assert_eq!(s.get(l, NvSciSyncAttrKey_WaiterRequireTimestamps).unwrap(), [1]);
    assert_eq!(u32s(&s.get(l, NvSciSyncAttrKey_NumTimestampSlots).unwrap()), [1024]);
    let mut f = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_Success);
    let mut ts = 0u64;
    assert_eq!(call!(t.NvSciSyncFenceGetTimestamp(&f, &mut ts)), NvSciError_NotYetAvailable);
    assert_eq!(call!(t.NvSciSyncObjSignal(o)), NvSciError_Success);
    assert_eq!(call!(t.NvSciSyncFenceGetTimestamp(&f, &mut ts)), NvSciError_Success);
    assert!(ts > 0);
    call!(t.NvSciSyncFenceClear(&mut f));
    call!(t.NvSciSyncObjFree(o));

    // Without timestamps requested.
    let o = s.cpu_object();
    assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_Success);
    assert_eq!(call!(t.NvSciSyncObjSignal(o)), NvSciError_Success);
    assert_eq!(call!(t.NvSciSyncFenceGetTimestamp(&f, &mut ts)), NvSciError_BadParameter);
    call!(t.NvSciSyncFenceClear(&mut f));
    call!(t.NvSciSyncObjFree(o));
    assert_eq!(s.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn ledger_back_to_zero() {
    let s = Sync::new();
    let ledger = s.ledger();
    let t = s.t;
    let o = s.cpu_object();
    let ctx = s.context();
    let mut f = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_Success);
    assert_eq!(
        ledger.counts(),
        HandleCounts { modules: 1, objects: 1, wait_contexts: 1, fences: 1, ..Default::default() }
    );
    // Exporting through something that is not an open endpoint.
    let mut desc = NvSciSyncFenceIpcExportDescriptor::default();
    assert_eq!(call!(t.NvSciSyncIpcExportFence(&f, 0, &mut desc)), NvSciError_BadParameter);
    call!(t.NvSciSyncAttrListFreeDesc(ptr::null_mut()));
    call!(t.NvSciSyncFenceClear(&mut f));
    call!(t.NvSciSyncObjFree(o));
    call!(t.NvSciSyncCpuWaitContextFree(ctx));
    drop(s);
    assert_eq!(ledger.counts().total(), 0);
}
