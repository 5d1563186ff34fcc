//! Dropping a ring with frames in flight: it waits for the outstanding fences and then frees
//! every handle; a stream the builder refuses leaves no handle behind (the mock's process-wide
//! ledger is exact here: this binary has one test).
#![cfg(feature = "mock")]

use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat, MAX_CONSUMERS, MAX_FRAMES};
use nvsci::{Error, NvSci};

#[test]
fn ring_teardown_frees_every_handle() {
    let ledger = nvsci_mock::global_ledger();
    assert_eq!(ledger.counts().total(), 0);
    {
        let lib = NvSci::mock();
        let ring = Backend::with_library(lib.clone())
            .stream(FrameFormat::nv12(64, 48))
            .frames(3)
            .consumers(ConsumerDesc::cpu(), 2)
            .build()
            .unwrap();
        let (mut p, mut cs) = ring.split().unwrap();
        for _ in 0..3 {
            let f = p.acquire().unwrap();
            p.present(f).unwrap();
        }
        let a = cs[0].acquire().unwrap();
        let b = cs[1].acquire().unwrap();
        assert!(ledger.counts().total() > 0);
        drop(p); // consumers keep the ring alive while they hold frames
        cs[0].release(a).unwrap();
        cs[1].release(b).unwrap();
        let live = ledger.counts();
        assert!(live.objects > 0 && live.fences > 0, "{live:?}");
    }
    assert_eq!(ledger.counts(), nvsci_mock::HandleCounts::default());

    // Each refusal of the builder names its field and leaves no handle behind, also when the
    // bad field comes after good ones.
    let backend = Backend::with_library(NvSci::mock());
    let raw = FrameFormat::Raw { size: 4096 };
    let refused = [
        ("frames", backend.stream(raw).frames(1).consumer(ConsumerDesc::cpu()).build()),
        ("frames", backend.stream(raw).frames(MAX_FRAMES + 1).consumer(ConsumerDesc::cpu()).build()),
        ("consumers", backend.stream(raw).build()),
        ("consumers", backend.stream(raw).consumers(ConsumerDesc::cpu(), MAX_CONSUMERS + 1).build()),
        ("format.size", backend.stream(FrameFormat::Raw { size: 0 }).consumer(ConsumerDesc::cpu()).build()),
        ("format", backend.stream(FrameFormat::nv12(641, 480)).consumer(ConsumerDesc::cpu()).build()),
        (
            "limit",
            backend
                .stream(raw)
                .consumer(ConsumerDesc::cpu())
                .consumer(ConsumerDesc::cpu().mailbox().with_limit(0))
                .build(),
        ),
    ];
    for (field, r) in refused {
        match r {
            Err(Error::InvalidArgument { name, .. }) => assert_eq!(name, field),
            other => panic!("expected InvalidArgument naming {field}, got {other:?}"),
        }
        assert_eq!(
            ledger.counts(),
            nvsci_mock::HandleCounts::default(),
            "a refused stream ({field}) left handles"
        );
    }
}
