//! The ring's fence semantics on the mock with CPU engines: presents and releases whose fences
//! expire later (signalled from another thread), dropped tokens, tokens of other rings, and
//! fences of unrelated sync objects.
#![cfg(feature = "mock")]

use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat, FrameRing};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::{Error, NvSci, Wait};
use std::time::{Duration, Instant};

fn ring(frames: usize, consumers: usize, timeout_ms: u64) -> FrameRing {
    raw_ring(&NvSci::mock(), 4096, frames, consumers, timeout_ms)
}

/// A stream of `frames` raw frames of `size` bytes on `lib`, with a CPU producer and
/// `consumers` CPU consumers.
fn raw_ring(lib: &NvSci, size: u64, frames: usize, consumers: usize, timeout_ms: u64) -> FrameRing {
    Backend::with_library(lib.clone())
        .stream(FrameFormat::Raw { size })
        .frames(frames)
        .timeout(Duration::from_millis(timeout_ms))
        .consumers(ConsumerDesc::cpu(), consumers)
        .build()
        .unwrap()
}

const DELAY: Duration = Duration::from_millis(60);

#[test]
fn a_consumer_waits_for_a_present_fence_that_expires_later() {
    let (mut p, mut cs) = ring(2, 1, 2000).split().unwrap();
    for round in 1..=3u8 {
        let f = p.acquire().unwrap();
        // The "engine" writes the frame after the present and only then signals: a consumer
        // that did not wait would read the previous contents (zeros, or the last round's).
        let buffer = p.buffer(&f).unwrap().dup().unwrap();
        let obj = p.present_sync().unwrap().clone();
        let fence = obj.generate_fence().unwrap();
        p.present_after(f, fence).unwrap();
        let engine = std::thread::spawn(move || {
            std::thread::sleep(DELAY);
            buffer.cpu_write().unwrap().fill(round);
            obj.signal().unwrap();
        });
        let t = Instant::now();
        let g = cs[0].acquire().unwrap();
        let waited = t.elapsed();
        let bytes = cs[0].cpu_read(&g).unwrap();
        assert!(
            bytes.iter().all(|&b| b == round),
            "round {round}: read {} before the fence expired",
            bytes[0]
        );
        assert!(waited >= DELAY / 2, "the consumer did not wait for the present fence ({waited:?})");
        drop(bytes);
        cs[0].release(g).unwrap();
        engine.join().unwrap();
    }
}

#[test]
fn the_producer_waits_for_a_release_fence_that_expires_later() {
    let (mut p, mut cs) = ring(2, 1, 2000).split().unwrap();
    for _ in 0..2 {
        let f = p.acquire().unwrap();
        p.present(f).unwrap();
    }
    // The consumer's "engine" still reads slot 0 after the release; it signals when done.
    let g = cs[0].acquire().unwrap();
    let obj = cs[0].release_sync().unwrap().clone();
    let fence = obj.generate_fence().unwrap();
    cs[0].release_after(g, fence).unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = done.clone();
    let engine = std::thread::spawn(move || {
        std::thread::sleep(DELAY);
        d.store(true, std::sync::atomic::Ordering::SeqCst);
        obj.signal().unwrap();
    });
    let f = p.acquire().unwrap();
    assert_eq!(f.index(), 0);
    assert!(done.load(std::sync::atomic::Ordering::SeqCst), "slot reused before the release fence expired");
    p.present(f).unwrap();
    engine.join().unwrap();
}

#[test]
fn a_release_fence_that_never_expires_times_out_naming_the_consumer() {
    let (mut p, mut cs) = ring(2, 2, 80).split().unwrap();
    for _ in 0..2 {
        let f = p.acquire().unwrap();
        p.present(f).unwrap();
    }
    let g = cs[0].acquire().unwrap();
    cs[0].release(g).unwrap();
    let g = cs[1].acquire().unwrap();
    let obj = cs[1].release_sync().unwrap().clone();
    cs[1].release_after(g, obj.generate_fence().unwrap()).unwrap();
    match p.acquire() {
        Err(Error::Timeout { waited_for, .. }) => {
            assert_eq!(waited_for, Wait::ReleaseFence { slot: 0, consumer: 1 })
        }
        other => panic!("expected a ring timeout, got {other:?}"),
    }
    // Once the fence expires the same slot is handed out.
    obj.signal().unwrap();
    assert_eq!(p.acquire().unwrap().index(), 0);
}

#[test]
fn a_dropped_producer_frame_is_discarded_and_its_slot_handed_out_again() {
    let (mut p, mut cs) = ring(3, 1, 200).split().unwrap();
    let f = p.acquire().unwrap();
    assert_eq!((f.index(), f.sequence()), (0, 0));
    drop(f);
    let f = p.acquire().unwrap();
    assert_eq!((f.index(), f.sequence()), (0, 0));
    p.present(f).unwrap();
    let g = cs[0].acquire().unwrap();
    assert_eq!(g.sequence(), 0);
    cs[0].release(g).unwrap();
    // Dropped after an error path (`?` in a helper): still not jammed.
    fn fails(p: &mut nvsci::pipeline::Producer) -> nvsci::Result<()> {
        let _f = p.acquire()?;
        Err(Error::InvalidArgument { name: "test", reason: "early return".into() })
    }
    // The helper's own error: its acquire succeeded, and the frame it held was dropped.
    match fails(&mut p) {
        Err(Error::InvalidArgument { name: "test", .. }) => {}
        other => panic!("expected the helper's early return, got {other:?}"),
    }
    assert_eq!(p.acquire().unwrap().sequence(), 1);
}

#[test]
fn a_dropped_consumer_frame_is_released_after_its_present_fence() {
    let (mut p, mut cs) = ring(2, 1, 500).split().unwrap();
    for _ in 0..2 {
        let f = p.acquire().unwrap();
        p.present(f).unwrap();
    }
    drop(cs[0].acquire().unwrap());
    drop(cs[0].acquire().unwrap());
    // Both slots came back without an explicit release.
    for seq in 2..6 {
        let f = p.acquire().unwrap();
        assert_eq!(f.sequence(), seq);
        p.present(f).unwrap();
        let g = cs[0].acquire().unwrap();
        cs[0].release(g).unwrap();
    }
    // Dropped during a panic: the slot comes back too.
    let f = p.acquire().unwrap();
    let held = f.index();
    p.present(f).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let g = cs[0].acquire().unwrap();
        assert_eq!(g.sequence(), 6);
        panic!("consumer failed");
    }));
    // The closure's own panic, after it held the frame (not a failed acquire).
    let payload = r.expect_err("the consumer panicked");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"consumer failed"));
    // With two slots, the producer gets a second frame only once the dropped one's slot is back:
    // frame 7 fills the other slot and stays presented, frame 8 needs the slot of frame 6.
    let f = p.acquire().unwrap();
    assert_ne!(f.index(), held);
    p.present(f).unwrap();
    let f = p.acquire().expect("the slot of the frame dropped during the panic came back");
    assert_eq!((f.index(), f.sequence()), (held, 8));
    p.present(f).unwrap();
}

#[test]
fn tokens_of_a_dropped_ring_are_refused_by_a_new_one() {
    let lib = NvSci::mock();
    let mut ids = std::collections::HashSet::new();
    let (old_token, old_id) = {
        let r = raw_ring(&lib, 64, 2, 1, 200);
        let id = r.id();
        let (mut p, _cs) = r.split().unwrap();
        (p.acquire().unwrap(), id)
    };
    ids.insert(old_id);
    // New rings never take an identity that was used before, even after the old ring's memory
    // is gone.
    for _ in 0..20 {
        let r = raw_ring(&lib, 64, 2, 1, 200);
        assert!(ids.insert(r.id()), "ring id {} reused", r.id());
    }
    let r = raw_ring(&lib, 64, 2, 1, 200);
    let (mut p, mut cs) = r.split().unwrap();
    assert_eq!(old_token.ring_id(), old_id);
    match p.present(old_token) {
        Err(Error::InvalidArgument { name: "frame", reason }) => {
            assert!(reason.contains("frame of ring"), "{reason}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let f = p.acquire().unwrap();
    p.present(f).unwrap();
    let g = cs[0].acquire().unwrap();
    cs[0].release(g).unwrap();
}

fn unrelated_object(lib: &NvSci) -> SyncObj {
    let m = SyncModule::open(lib).unwrap();
    let mut s = m.attr_list().unwrap();
    s.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::SignalOnly)]).unwrap();
    let mut w = m.attr_list().unwrap();
    w.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::WaitOnly)]).unwrap();
    SyncObj::alloc(&SyncAttrList::reconcile(&[&s, &w]).unwrap()).unwrap()
}

#[test]
fn fences_of_unrelated_sync_objects_are_refused_and_the_frame_kept() {
    let lib = NvSci::mock();
    let (mut p, mut cs) = raw_ring(&lib, 64, 2, 1, 200).split().unwrap();
    let other = unrelated_object(&lib);
    let f = p.acquire().unwrap();
    let index = f.index();
    match p.present_after(f, other.generate_fence().unwrap()) {
        Err(Error::InvalidArgument { name: "fence", .. }) => {}
        r => panic!("expected a refusal, got {r:?}"),
    }
    // The refused frame was discarded, not lost: the slot is handed out again.
    let f = p.acquire().unwrap();
    assert_eq!(f.index(), index);
    // The present fence of the ring itself is no release fence either.
    let present = p.present_sync().unwrap().generate_fence().unwrap();
    p.present_after(f, present.try_clone().unwrap()).unwrap();
    p.present_sync().unwrap().signal().unwrap();
    let g = cs[0].acquire().unwrap();
    assert!(matches!(cs[0].release_after(g, present), Err(Error::InvalidArgument { name: "fence", .. })));
    let g = cs[0].acquire().unwrap_err();
    assert!(
        matches!(g, Error::Timeout { waited_for: Wait::Frame, .. }),
        "the refused release dropped the frame: {g:?}"
    );
}

/// A party's engine is fixed when the ring is built: a CPU party's frames are waited on the CPU
/// and touched in place, and the calls of a CUDA party are refused naming the engine.
#[cfg(feature = "cuda")]
#[test]
fn cuda_calls_on_cpu_parties_are_refused() {
    let (mut p, mut cs) = ring(2, 1, 200).split().unwrap();
    assert!(p.engine().is_cpu() && cs[0].engine().is_cpu());
    assert!(p.stream().is_none() && cs[0].stream().is_none() && p.mem_sync().is_none());
    let engine_refused =
        |r: nvsci::Result<()>| matches!(r, Err(Error::InvalidArgument { name: "engine", .. }));
    assert!(engine_refused(p.produce(|_| Ok(()))));
    assert!(engine_refused(cs[0].process(|_| Ok(()))));
    assert!(engine_refused(p.set_mem_sync(nvsci::cuda::MemSync::Skip)));
    let f = p.acquire().unwrap();
    assert!(matches!(p.cuda_buffer(&f), Err(Error::InvalidArgument { name: "engine", .. })));
    p.cpu_write(&f).unwrap().fill(3);
    p.present(f).unwrap();
    let g = cs[0].acquire().unwrap();
    assert!(matches!(cs[0].cuda_buffer(&g), Err(Error::InvalidArgument { name: "engine", .. })));
    assert!(cs[0].cpu_read(&g).unwrap().iter().all(|&b| b == 3));
    cs[0].release(g).unwrap();
    // No frame was lost to the refusals: the next one is frame 1.
    let f = p.acquire().unwrap();
    assert_eq!(f.sequence(), 1);
    p.present(f).unwrap();
}
