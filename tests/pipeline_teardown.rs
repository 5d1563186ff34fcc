//! Dropping a ring with frames in flight: it waits for the outstanding fences and then frees
//! every handle (the mock's process-wide ledger is exact here: this binary has one test).
#![cfg(feature = "mock")]

use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat};
use nvsci::NvSci;

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
}
