//! Every failure path of the main flows, swept: each flow is traced once to list the NvSci calls
//! it makes, then run again once per call with that call made to fail (the mock's fault
//! injection, per thread). For every injection point the failure must surface as a typed error
//! naming the failing function, and the mock's live-handle ledger must come back to where it was:
//! nothing leaked, nothing freed twice (a double free would corrupt the mock's records). The one
//! documented exception is ring teardown, which leaks rather than frees when it cannot prove the
//! outstanding fences expired.
//!
//! One test in this binary: the ledger it reads is process-wide.
#![cfg(feature = "mock")]

use nvsci::buf::{BufAttr, BufAttrList, BufModule, BufObj, Perm};
use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat, Nv12Image};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::NvSci;
use std::time::Duration;

mod common;

use common::sweep::sweep;

type Flow = fn(&NvSci) -> nvsci::Result<()>;

fn buffer_flow(lib: &NvSci) -> nvsci::Result<()> {
    let m = BufModule::open(lib)?;
    let mut producer = m.attr_list()?;
    Nv12Image::pitch_linear(64, 32).set_on(&mut producer)?;
    producer.set(&[BufAttr::NeedCpuAccess(true), BufAttr::RequiredPerm(Perm::ReadWrite)])?;
    let mut consumer = producer.try_clone()?;
    consumer.set(&[BufAttr::RequiredPerm(Perm::ReadOnly)])?; // a clone's keys may be set again
    let reconciled = BufAttrList::reconcile(&[&producer, &consumer])?;
    let obj = BufObj::alloc(&reconciled)?;
    let planes = obj.planes()?;
    obj.cpu_write()?[planes[1].offset as usize] = 7;
    let dup = obj.dup()?;
    let ro = dup.dup_with_reduced_perm(Perm::ReadOnly)?;
    if ro.cpu_read()?[planes[1].offset as usize] != 7 {
        return Err(nvsci::Error::InvalidArgument { name: "test", reason: "bytes differ".into() });
    }
    Ok(())
}

fn sync_flow(lib: &NvSci) -> nvsci::Result<()> {
    let m = SyncModule::open(lib)?;
    let mut s = m.attr_list()?;
    s.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::SignalOnly)])?;
    let mut w = m.attr_list()?;
    w.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::WaitOnly)])?;
    let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&s, &w])?)?;
    let mut ctx = m.cpu_wait_context()?;
    let fence = obj.generate_fence()?;
    let copy = fence.try_clone()?;
    obj.signal()?;
    fence.wait(&mut ctx, Some(Duration::from_secs(1)))?;
    copy.wait(&mut ctx, Some(Duration::from_secs(1)))?;
    Ok(())
}

/// A raw handle of "another library", freed when dropped (on every path of the flow).
struct Raw<T: Copy> {
    raw: T,
    free: fn(T),
}

impl<T: Copy> Drop for Raw<T> {
    fn drop(&mut self) {
        (self.free)(self.raw)
    }
}

/// A raw fence of "another library", cleared when dropped.
struct RawFence(nvsci_sys::NvSciSyncFence);

impl Drop for RawFence {
    fn drop(&mut self) {
        // SAFETY: the storage holds a fence of the mock or zeroes.
        unsafe { (nvsci_mock::sync_fns().NvSciSyncFenceClear.unwrap())(&mut self.0) }
    }
}

/// A raw call's status as the crate reports it (an error naming the function).
fn raw_check(function: &'static str, code: nvsci_sys::NvSciError) -> nvsci::Result<()> {
    if code == nvsci_sys::NvSciError_Success {
        Ok(())
    } else {
        Err(nvsci::Error::NvSci { function, code: nvsci::NvSciError(code) })
    }
}

/// Calls a mock table entry returning an `NvSciError`, as `raw_check` reports it.
macro_rules! raw {
    ($t:expr, $f:ident ( $($a:expr),* $(,)? )) => {
        // SAFETY: the flow passes live handles of the mock (or out-pointers to its own storage).
        raw_check(stringify!($f), unsafe { ($t.$f.unwrap())($($a),*) })
    };
}

/// Another library's lists, buffer, sync object and fence (made through the raw tables)
/// adopted by the crate, with a copy or reference of its own or by taking ownership.
fn foreign_flow(lib: &NvSci) -> nvsci::Result<()> {
    use core::ptr::null_mut;
    use nvsci::sync::Fence;
    use nvsci::ListState;
    let (bt, st) = (nvsci_mock::buf_fns(), nvsci_mock::sync_fns());
    // SAFETY (the four closures): each frees, once, the mock handle its `Raw` guard owns.
    let free_list: fn(nvsci_sys::NvSciBufAttrList) =
        |l| unsafe { (nvsci_mock::buf_fns().NvSciBufAttrListFree.unwrap())(l) };
    let free_obj: fn(nvsci_sys::NvSciBufObj) =
        |o| unsafe { (nvsci_mock::buf_fns().NvSciBufObjFree.unwrap())(o) };
    let free_slist: fn(nvsci_sys::NvSciSyncAttrList) =
        |l| unsafe { (nvsci_mock::sync_fns().NvSciSyncAttrListFree.unwrap())(l) };
    let free_sobj: fn(nvsci_sys::NvSciSyncObj) =
        |o| unsafe { (nvsci_mock::sync_fns().NvSciSyncObjFree.unwrap())(o) };

    let bm = BufModule::open(lib)?;
    let mut raw = null_mut();
    raw!(bt, NvSciBufAttrListCreate(bm.as_raw(), &mut raw))?;
    let list = Raw { raw, free: free_list };
    let (types, size, cpu, perm) =
        ([nvsci_sys::NvSciBufType_RawBuffer], [4096u64], [true], [nvsci_sys::NvSciBufAccessPerm_ReadWrite]);
    let pair =
        |key, value: *const core::ffi::c_void, len| nvsci_sys::NvSciBufAttrKeyValuePair { key, value, len };
    let mut pairs = [
        pair(nvsci_sys::NvSciBufGeneralAttrKey_Types, types.as_ptr().cast(), 4),
        pair(nvsci_sys::NvSciBufRawBufferAttrKey_Size, size.as_ptr().cast(), 8),
        pair(nvsci_sys::NvSciBufGeneralAttrKey_NeedCpuAccess, cpu.as_ptr().cast(), 1),
        pair(nvsci_sys::NvSciBufGeneralAttrKey_RequiredPerm, perm.as_ptr().cast(), 4),
    ];
    raw!(bt, NvSciBufAttrListSetAttrs(list.raw, pairs.as_mut_ptr(), pairs.len()))?;
    // SAFETY (every adoption below): live handles of the mock that the modules use.
    let mut adopted = unsafe { BufAttrList::from_foreign(&bm, list.raw, ListState::Unreconciled) }?;
    adopted.set(&[BufAttr::RawAlign(64)])?;
    let (mut raw, mut conflict) = (null_mut(), null_mut());
    raw!(bt, NvSciBufAttrListReconcile(&list.raw, 1, &mut raw, &mut conflict))?;
    let reconciled = Raw { raw, free: free_list };
    let mut raw = null_mut();
    raw!(bt, NvSciBufObjAlloc(reconciled.raw, &mut raw))?;
    let obj = Raw { raw, free: free_obj };
    let adopted_reconciled =
        unsafe { BufAttrList::from_foreign(&bm, reconciled.raw, ListState::Reconciled) }?;
    let buf = unsafe { BufObj::from_foreign(&bm, obj.raw) }?;
    let mut given = null_mut();
    raw!(bt, NvSciBufObjDupWithReducePerm(obj.raw, nvsci_sys::NvSciBufAccessPerm_Readonly, &mut given))?;
    let read_only = unsafe { BufObj::from_raw_owned(&bm, given) }?;
    drop((obj, reconciled, list));
    buf.cpu_write()?[0] = 7;
    if read_only.cpu_read()?[0] != 7 || read_only.perm() != Perm::ReadOnly {
        return Err(nvsci::Error::InvalidArgument {
            name: "test",
            reason: "not the same read-only memory".into(),
        });
    }
    let _again = BufObj::alloc(&BufAttrList::reconcile(&[&adopted])?)?;
    let _more = BufObj::alloc(&adopted_reconciled)?;

    let sm = SyncModule::open(lib)?;
    let mut lists = Vec::new();
    for perm in [nvsci_sys::NvSciSyncAccessPerm_SignalOnly, nvsci_sys::NvSciSyncAccessPerm_WaitOnly] {
        let mut raw = null_mut();
        raw!(st, NvSciSyncAttrListCreate(sm.as_raw(), &mut raw))?;
        lists.push(Raw { raw, free: free_slist });
        let (cpu, perm) = ([true], [perm]);
        let pairs = [
            nvsci_sys::NvSciSyncAttrKeyValuePair {
                attrKey: nvsci_sys::NvSciSyncAttrKey_NeedCpuAccess,
                value: cpu.as_ptr().cast(),
                len: 1,
            },
            nvsci_sys::NvSciSyncAttrKeyValuePair {
                attrKey: nvsci_sys::NvSciSyncAttrKey_RequiredPerm,
                value: perm.as_ptr().cast(),
                len: 8,
            },
        ];
        raw!(st, NvSciSyncAttrListSetAttrs(raw, pairs.as_ptr(), pairs.len()))?;
    }
    let raws = [lists[0].raw, lists[1].raw];
    let (mut raw, mut conflict) = (null_mut(), null_mut());
    raw!(st, NvSciSyncAttrListReconcile(raws.as_ptr(), 2, &mut raw, &mut conflict))?;
    let reconciled = Raw { raw, free: free_slist };
    let mut raw = null_mut();
    raw!(st, NvSciSyncObjAlloc(reconciled.raw, &mut raw))?;
    let sobj = Raw { raw, free: free_sobj };
    let mut fence = RawFence(nvsci_sys::NVSCI_SYNC_FENCE_INITIALIZER);
    raw!(st, NvSciSyncObjGenerateFence(sobj.raw, &mut fence.0))?;
    let mut copy = null_mut();
    raw!(st, NvSciSyncAttrListClone(lists[0].raw, &mut copy))?;
    let _owned_list = unsafe { SyncAttrList::from_raw_owned(&sm, copy, ListState::Unreconciled) }?;
    let _adopted_list = unsafe { SyncAttrList::from_foreign(&sm, reconciled.raw, ListState::Reconciled) }?;
    let adopted_obj = unsafe { SyncObj::from_foreign(&sm, sobj.raw) }?;
    let adopted_fence = unsafe { Fence::from_foreign(&adopted_obj, &fence.0) }?;
    drop((fence, sobj, reconciled, lists));
    adopted_obj.signal()?;
    adopted_fence.wait(&mut sm.cpu_wait_context()?, Some(Duration::from_secs(1)))?;
    Ok(())
}

fn ring_flow(lib: &NvSci) -> nvsci::Result<()> {
    let ring = Backend::with_library(lib.clone())
        .stream(FrameFormat::nv12(64, 32))
        .frames(2)
        .timeout(Duration::from_millis(200))
        .consumers(ConsumerDesc::cpu(), 2)
        .build()?;
    let (mut p, mut cs) = ring.split()?;
    for t in 0..3u8 {
        let f = p.acquire()?;
        p.cpu_write(&f)?[0] = t;
        p.present(f)?;
        for c in cs.iter_mut() {
            let g = c.acquire()?;
            let seen = c.cpu_read(&g)?[0];
            c.release(g)?;
            if seen != t {
                return Err(nvsci::Error::InvalidArgument { name: "test", reason: "stale frame".into() });
            }
        }
    }
    Ok(())
}

#[test]
fn every_injected_failure_surfaces_typed_and_leaks_nothing() {
    let flows: [(&str, Flow); 4] =
        [("buffer", buffer_flow), ("sync", sync_flow), ("foreign", foreign_flow), ("ring", ring_flow)];
    let (mut points, mut surfaced, mut teardown_leaks) = (0, 0, Vec::new());
    // Under Miri, which runs each flow some hundred times slower, every 23rd point is swept (a prime: the points sampled move through each flow).
    let stride = if cfg!(miri) { 23 } else { 1 };
    for (name, flow) in flows {
        // Only teardown absorbs a failure: when the ring, being dropped, cannot wait on the CPU
        // (no wait context, no duplicate of the fence to wait on, or a failing wait), it leaks
        // its buffers and sync objects instead of freeing memory an engine might still use.
        let s = sweep(
            name,
            stride,
            || flow(&NvSci::mock()),
            || {},
            &["NvSciSyncFenceWait", "NvSciSyncFenceDup", "NvSciSyncCpuWaitContextAlloc"],
            |function, before, after| {
                assert!(
                    after.total() > before.total(),
                    "{name}: an absorbed {function} failure must leak, not free"
                )
            },
        );
        points += s.points;
        surfaced += s.surfaced;
        teardown_leaks.extend(s.absorbed.iter().map(|a| format!("{name}: {a}")));
    }
    eprintln!(
        "{points} injection points: {surfaced} surfaced as typed errors naming the function, {} in ring \
         teardown leaked by design ({})",
        teardown_leaks.len(),
        teardown_leaks.join(", ")
    );
    assert!(points > 50 / stride, "the sweep covered only {points} injection points");
}
