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

use nvsci::buf::{
    BufAttr, BufAttrList, BufModule, BufObj, BufType, ColorFormat, ImageLayout, Perm, ScanType,
};
use nvsci::pipeline::{FrameFormat, FrameRing, RingConfig};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::NvSci;
use nvsci_mock::faults;
use std::time::Duration;

type Flow = fn(&NvSci) -> nvsci::Result<()>;

fn buffer_flow(lib: &NvSci) -> nvsci::Result<()> {
    let m = BufModule::open(lib)?;
    let mut producer = m.attr_list()?;
    producer.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::Layout(ImageLayout::PitchLinear),
        BufAttr::ScanType(ScanType::Progressive),
        BufAttr::PlaneCount(2),
        BufAttr::PlaneColorFormat(&[ColorFormat::Y8, ColorFormat::V8U8]),
        BufAttr::PlaneWidth(&[64, 32]),
        BufAttr::PlaneHeight(&[32, 16]),
        BufAttr::NeedCpuAccess(true),
        BufAttr::RequiredPerm(Perm::ReadWrite),
    ])?;
    let mut consumer = producer.try_clone()?;
    consumer.set(&[BufAttr::RequiredPerm(Perm::ReadOnly)])?; // a clone's keys may be set again
    let reconciled = BufAttrList::reconcile(&[&producer, &consumer])?;
    let obj = BufObj::alloc(&reconciled)?;
    let planes = obj.planes()?;
    obj.cpu_write()?[planes[1].offset as usize] = 7;
    let dup = obj.dup()?;
    let ro = dup.dup_with_reduced_perm(Perm::ReadOnly)?;
    if ro.cpu_read()?[planes[1].offset as usize] != 7 {
        return Err(nvsci::Error::Unsupported { what: "test", reason: "bytes differ" });
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

fn ring_flow(lib: &NvSci) -> nvsci::Result<()> {
    let config =
        RingConfig { frames: 2, consumers: 2, timeout: Duration::from_millis(200), ..Default::default() };
    let ring = FrameRing::new(lib, FrameFormat::Nv12 { width: 64, height: 32 }, config)?;
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
                return Err(nvsci::Error::Unsupported { what: "test", reason: "stale frame" });
            }
        }
    }
    Ok(())
}

#[test]
fn every_injected_failure_surfaces_typed_and_leaks_nothing() {
    let ledger = nvsci_mock::global_ledger();
    let flows: [(&str, Flow); 3] = [("buffer", buffer_flow), ("sync", sync_flow), ("ring", ring_flow)];
    let (mut points, mut surfaced, mut teardown_leaks) = (0, 0, Vec::new());
    for (name, flow) in flows {
        faults::trace_start();
        flow(&NvSci::mock()).unwrap_or_else(|e| panic!("{name} flow fails without injection: {e}"));
        let calls = faults::trace_take();
        assert_eq!(ledger.counts().total(), 0, "{name} flow leaks without injection");
        assert!(!calls.is_empty());
        for (i, &function) in calls.iter().enumerate() {
            let nth = calls[..i].iter().filter(|&&f| f == function).count();
            let before = ledger.counts();
            faults::inject(function, nth, nvsci_sys::NvSciError_InsufficientMemory);
            let r = flow(&NvSci::mock());
            let fired = !faults::clear();
            let after = ledger.counts();
            assert!(fired, "{name}: call {nth} of {function} was not reached again");
            points += 1;
            match r {
                Err(e) => {
                    let text = e.to_string();
                    assert!(text.contains(function), "{name}: call {nth} of {function} surfaced as `{text}`");
                    assert_eq!(after, before, "{name}: failing call {nth} of {function} leaked: {after:?}");
                    surfaced += 1;
                }
                Ok(()) => {
                    // Only teardown absorbs a failure: when the ring, being dropped, cannot wait on
                    // the CPU (no wait context, or a failing wait), it leaks its buffers and sync
                    // objects instead of freeing memory an engine might still use.
                    assert!(
                        ["NvSciSyncFenceWait", "NvSciSyncCpuWaitContextAlloc"].contains(&function),
                        "{name}: failing call {nth} of {function} went unnoticed"
                    );
                    assert!(
                        after.total() > before.total(),
                        "{name}: an absorbed wait failure must leak, not free"
                    );
                    teardown_leaks.push(format!("{name}: {function} #{nth}"));
                }
            }
        }
    }
    eprintln!(
        "{points} injection points: {surfaced} surfaced as typed errors naming the function, {} in ring \
         teardown leaked by design ({})",
        teardown_leaks.len(),
        teardown_leaks.join(", ")
    );
    assert!(points > 50, "the sweep covered only {points} injection points");
}
