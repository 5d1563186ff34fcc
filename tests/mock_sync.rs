//! NvSciSync through the mock: reconcile rules, CPU signal and wait, timeouts, cleared fences,
//! duplicates and handle accounting.
#![cfg(feature = "mock")]

use nvsci::sync::{key, CpuWaitContext, Fence, SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::{Error, NvSci, Wait};
use std::time::{Duration, Instant};

fn list(m: &SyncModule, perm: SyncPerm, cpu: bool) -> SyncAttrList {
    let mut l = m.attr_list().unwrap();
    l.set(&[SyncAttr::NeedCpuAccess(cpu), SyncAttr::RequiredPerm(perm)]).unwrap();
    l
}

fn cpu_pair(m: &SyncModule) -> SyncObj {
    let s = list(m, SyncPerm::SignalOnly, true);
    let w = list(m, SyncPerm::WaitOnly, true);
    let r = SyncAttrList::reconcile(&[&s, &w]).unwrap();
    SyncObj::alloc(&r).unwrap()
}

#[test]
fn reconcile_needs_one_signaler_and_a_waiter() {
    let m = SyncModule::open(&NvSci::mock()).unwrap();
    let s = list(&m, SyncPerm::SignalOnly, true);
    let w = list(&m, SyncPerm::WaitOnly, true);
    let r = SyncAttrList::reconcile(&[&s, &w]).unwrap();
    assert!(r.is_reconciled().unwrap());
    assert_eq!(r.get_one(key::ACTUAL_PERM).unwrap(), Some(SyncPerm::WaitSignal));
    assert_eq!(r.get_one(key::NEED_CPU_ACCESS).unwrap(), Some(true));
    // RequiredPerm is an 8-byte value: it reads back exactly as set.
    assert_eq!(s.get_one(key::REQUIRED_PERM).unwrap(), Some(SyncPerm::SignalOnly));

    for lists in [vec![&w], vec![&s], vec![&s, &list(&m, SyncPerm::SignalOnly, false), &w]] {
        match SyncAttrList::reconcile(&lists) {
            Err(Error::ReconcileConflict { keys, .. }) => {
                assert!(keys.contains(&"NvSciSyncAttrKey_RequiredPerm"), "{keys:?}")
            }
            other => panic!("expected a RequiredPerm conflict for {} lists, got {other:?}", lists.len()),
        }
    }
}

#[test]
fn reconcile_and_alloc_in_one_call() {
    let m = SyncModule::open(&NvSci::mock()).unwrap();
    let ledger = m.mock_ledger().unwrap();
    {
        let s = list(&m, SyncPerm::SignalOnly, true);
        let w = list(&m, SyncPerm::WaitOnly, true);
        let obj = SyncObj::reconcile_and_alloc(&[&s, &w]).unwrap();
        let r = obj.attr_list().unwrap();
        assert!(r.is_reconciled().unwrap());
        assert_eq!(r.get_one(key::ACTUAL_PERM).unwrap(), Some(SyncPerm::WaitSignal));
        drop(r);
        let mut ctx = m.cpu_wait_context().unwrap();
        let f = obj.generate_fence().unwrap();
        obj.signal().unwrap();
        f.wait(&mut ctx, Some(Duration::from_secs(1))).unwrap();

        // No signaler: the conflict names RequiredPerm, as `reconcile` does; nothing is leaked.
        let before = ledger.counts();
        match SyncObj::reconcile_and_alloc(&[&w]) {
            Err(e @ Error::ReconcileConflict { .. }) => {
                assert!(e.conflict_keys().unwrap().contains(&"NvSciSyncAttrKey_RequiredPerm"), "{e}");
                let Error::ReconcileConflict { function, .. } = &e else { unreachable!() };
                assert_eq!(*function, "NvSciSyncAttrListReconcileAndObjAlloc");
            }
            other => panic!("expected a RequiredPerm conflict, got {other:?}"),
        }
        assert_eq!(ledger.counts(), before, "the conflict list is freed");
        assert!(matches!(
            SyncObj::reconcile_and_alloc(&[]),
            Err(Error::InvalidArgument { name: "lists", .. })
        ));
    }
    assert_eq!(ledger.counts().total(), 1, "{:?}", ledger.counts());
}

#[test]
fn signal_then_wait_and_timeout() {
    let m = SyncModule::open(&NvSci::mock()).unwrap();
    let obj = cpu_pair(&m);
    let mut ctx = m.cpu_wait_context().unwrap();
    let f1 = obj.generate_fence().unwrap();
    assert!(!f1.is_cleared());
    let t = Instant::now();
    match f1.wait(&mut ctx, Some(Duration::from_millis(20))) {
        Err(Error::Timeout { waited_for, timeout }) => {
            assert_eq!(waited_for, Wait::Fence { function: "NvSciSyncFenceWait" });
            assert_eq!(timeout, Duration::from_millis(20));
        }
        other => panic!("unsignalled fence must time out, got {other:?}"),
    }
    assert!(t.elapsed() >= Duration::from_millis(15), "the wait really waited");
    obj.signal().unwrap();
    f1.wait(&mut ctx, Some(Duration::from_millis(20))).unwrap();
    f1.wait(&mut ctx, None).unwrap();
}

#[test]
fn waiter_on_another_thread_wakes_on_signal() {
    let m = SyncModule::open(&NvSci::mock()).unwrap();
    let obj = cpu_pair(&m);
    let fence = obj.generate_fence().unwrap();
    let dup = fence.try_clone().unwrap();
    let mut ctx = m.cpu_wait_context().unwrap();
    let waiter = std::thread::spawn(move || {
        let r = dup.wait(&mut ctx, Some(Duration::from_secs(5)));
        (r.is_ok(), ctx)
    });
    std::thread::sleep(Duration::from_millis(20));
    obj.signal().unwrap();
    let (ok, _ctx) = waiter.join().unwrap();
    assert!(ok);
    // Fences are ordered: a later fence is not expired by the earlier signal.
    let f2 = obj.generate_fence().unwrap();
    let mut ctx = m.cpu_wait_context().unwrap();
    assert!(matches!(
        f2.wait(&mut ctx, Some(Duration::from_millis(5))),
        Err(Error::Timeout { waited_for: Wait::Fence { .. }, .. })
    ));
}

#[test]
fn cleared_fences_wait_as_success() {
    let m = SyncModule::open(&NvSci::mock()).unwrap();
    let obj = cpu_pair(&m);
    let mut ctx = m.cpu_wait_context().unwrap();
    Fence::cleared().wait(&mut ctx, Some(Duration::ZERO)).unwrap();
    let mut f = obj.generate_fence().unwrap();
    f.clear();
    assert!(f.is_cleared());
    f.wait(&mut ctx, Some(Duration::ZERO)).unwrap();
    assert!(Fence::cleared().try_clone().unwrap().is_cleared());
}

#[test]
fn waiter_only_objects_cannot_cpu_signal() {
    let m = SyncModule::open(&NvSci::mock()).unwrap();
    // The signaler does not use the CPU: CPU fence generation and signalling are refused.
    let s = list(&m, SyncPerm::SignalOnly, false);
    let w = list(&m, SyncPerm::WaitOnly, true);
    let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&s, &w]).unwrap()).unwrap();
    let refused = nvsci::Culprit::NotCpuSignaler;
    assert!(
        matches!(obj.generate_fence(), Err(Error::Refused { function: "NvSciSyncObjGenerateFence", culprit, .. }) if culprit == refused)
    );
    assert!(
        matches!(obj.signal(), Err(Error::Refused { function: "NvSciSyncObjSignal", culprit, .. }) if culprit == refused)
    );
}

#[test]
fn timeouts_beyond_the_nvsci_maximum_wait_forever() {
    let m = SyncModule::open(&NvSci::mock()).unwrap();
    let obj = cpu_pair(&m);
    let mut ctx: CpuWaitContext = m.cpu_wait_context().unwrap();
    let f = obj.generate_fence().unwrap();
    // Duration::MAX is not an error: it is "forever" (the library's -1), so a signal from another
    // thread ends the wait.
    let signaler = {
        let obj = obj.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            obj.signal().unwrap();
        })
    };
    f.wait(&mut ctx, Some(Duration::MAX)).unwrap();
    signaler.join().unwrap();
}

#[test]
fn every_sync_handle_is_freed() {
    let m = SyncModule::open(&NvSci::mock()).unwrap();
    let ledger = m.mock_ledger().unwrap();
    {
        let obj = cpu_pair(&m);
        let mut ctx = m.cpu_wait_context().unwrap();
        let f = obj.generate_fence().unwrap();
        let g = f.try_clone().unwrap();
        let h = obj.generate_fence().unwrap();
        obj.signal().unwrap();
        obj.signal().unwrap();
        g.wait(&mut ctx, None).unwrap();
        h.wait(&mut ctx, None).unwrap();
        // The object stays alive through its fences even after the last SyncObj handle goes.
        drop(obj);
        f.wait(&mut ctx, None).unwrap();
        assert!(ledger.counts().fences >= 3);
    }
    assert_eq!(ledger.counts().total(), 1, "{:?}", ledger.counts());
    drop(m);
    assert_eq!(ledger.counts().total(), 0, "{:?}", ledger.counts());
}

#[test]
fn refused_sync_attributes_are_named() {
    let lib = NvSci::mock();
    let m = SyncModule::open(&lib).unwrap();
    let mut l = m.attr_list().unwrap();
    l.set(&[SyncAttr::RequiredPerm(SyncPerm::SignalOnly)]).unwrap();
    match l.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::WaitOnly)]) {
        Err(Error::AttrRefused { key, value, code, .. }) => {
            assert_eq!(key, "NvSciSyncAttrKey_RequiredPerm");
            assert!(value.contains("WaitOnly") && value.contains("already set"), "{value}");
            assert_eq!(code, nvsci::NvSciError::BAD_PARAMETER);
        }
        other => panic!("{other:?}"),
    }
    // All-or-nothing: NeedCpuAccess of the refused call was not set.
    assert_eq!(l.get_one(nvsci::sync::key::NEED_CPU_ACCESS).unwrap(), None);
}

#[test]
fn peer_hw_engine_array_round_trips() {
    use nvsci::buf::{HwEngine, PeerHwEngine, Platform};
    let m = SyncModule::open(&NvSci::mock()).unwrap();
    // A camera (VI, 12) signals, the GPU (107) and the display (4) wait, all on Orin (1).
    let engines = [
        PeerHwEngine { engine: HwEngine::VI, platform: Platform::ORIN },
        PeerHwEngine { engine: HwEngine::GPU, platform: Platform::ORIN },
        PeerHwEngine { engine: HwEngine::DISPLAY, platform: Platform::ORIN },
    ];
    let mut s = list(&m, SyncPerm::SignalOnly, true);
    s.set(&[SyncAttr::PeerHwEngineArray(&engines[..1])]).unwrap();
    let mut w = list(&m, SyncPerm::WaitOnly, true);
    w.set(&[SyncAttr::PeerHwEngineArray(&engines[1..])]).unwrap();
    assert_eq!(s.get(key::PEER_HW_ENGINE_ARRAY).unwrap().as_slice(), &engines[..1]);
    assert_eq!(w.get(key::PEER_HW_ENGINE_ARRAY).unwrap().as_slice(), &engines[1..]);
    // The mock reconciles the key to the union of the engines.
    let r = SyncAttrList::reconcile(&[&s, &w]).unwrap();
    assert_eq!(r.get(key::PEER_HW_ENGINE_ARRAY).unwrap().as_slice(), &engines);
}
