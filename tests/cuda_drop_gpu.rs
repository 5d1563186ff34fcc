//! Dropping CUDA imports while a stream waits on a fence that does not expire: the drop returns
//! at once; the destroy waits at most `DESTROY_TIMEOUT` on the teardown thread and then leaks
//! rather than freeing what the stream may touch. (Its own binary: the stream stays blocked until
//! the test releases it at the end.)
#![cfg(all(feature = "mock", feature = "cuda"))]

mod common;

use nvsci::cuda::{CudaSyncObj, MemSync, DESTROY_TIMEOUT};
use nvsci::pipeline::{Backend, ConsumerDesc, Engine, FrameFormat};
use std::time::{Duration, Instant};

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_destroy_behind_a_stuck_wait_is_bounded_and_leaks() {
    let Some(dev) = common::gpu() else { return };
    let lib = nvsci::NvSci::mock();
    let ring = Backend::with_library_on(lib.clone(), &dev)
        .stream(FrameFormat::Raw { size: 4096 })
        .frames(2)
        .timeout(Duration::from_secs(1))
        .consumer(ConsumerDesc::new(Engine::Cuda(dev.clone())))
        .build()
        .unwrap();
    let (p, cs) = ring.split().unwrap();
    let obj = p.present_sync().unwrap().clone();
    let present = CudaSyncObj::import(&dev, cs[0].present_sync().unwrap()).unwrap();
    common::settle(&dev);
    let never = obj.generate_fence().unwrap();
    let stream = dev.context().new_stream().unwrap();
    present.wait(&stream, &never, MemSync::Skip).unwrap();
    let t = Instant::now();
    drop(present);
    eprintln!("drop behind a stuck wait returned after {:?}", t.elapsed());
    assert!(dev.pending_teardown() > 0, "destroyed while the stream waits on it");
    // The queue gives up after the bound: flushing returns with nothing left (leaked, logged).
    let t = Instant::now();
    let left = dev.flush_teardown(DESTROY_TIMEOUT + Duration::from_secs(10));
    eprintln!("flush returned after {:?} with {left} left", t.elapsed());
    assert_eq!(left, 0, "the destroy was not bounded");
    // Release the stream; later destroys run normally.
    obj.signal().unwrap();
    stream.synchronize().unwrap();
    let again = CudaSyncObj::import(&dev, cs[0].present_sync().unwrap()).unwrap();
    again.wait(&stream, &obj.generate_fence().unwrap(), MemSync::Skip).unwrap();
    obj.signal().unwrap();
    drop(again);
    assert_eq!(dev.flush_teardown(Duration::from_secs(30)), 0);
}
