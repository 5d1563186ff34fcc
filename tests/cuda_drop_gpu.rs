//! Dropping CUDA imports while a stream waits on a fence that does not expire: the drop returns
//! after `DESTROY_TIMEOUT` and leaks rather than hanging or freeing what the stream may touch.
//! (Its own binary: the stream stays blocked until the test releases it at the end.)
#![cfg(all(feature = "mock", feature = "cuda"))]

mod common;

use nvsci::cuda::{CudaSyncObj, MemSync, DESTROY_TIMEOUT};
use nvsci::pipeline::{Engine, FrameFormat, FrameRing, RingConfig};
use std::time::{Duration, Instant};

#[test]
#[ignore = "needs a CUDA GPU"]
fn dropping_an_import_behind_a_stuck_wait_returns_and_leaks() {
    let Some(dev) = common::gpu() else { return };
    let lib = nvsci::NvSci::mock();
    let ring = FrameRing::with_engines(
        &lib,
        FrameFormat::Raw { size: 4096 },
        RingConfig { frames: 2, consumers: 1, timeout: Duration::from_secs(1), ..Default::default() },
        &Engine::Cpu,
        &[Engine::Cuda(dev.clone())],
    )
    .unwrap();
    let (p, cs) = ring.split().unwrap();
    let obj = p.present_sync().unwrap().clone();
    let present = CudaSyncObj::import(&dev, cs[0].present_sync().unwrap()).unwrap();
    let never = obj.generate_fence().unwrap();
    let stream = dev.context().new_stream().unwrap();
    present.wait(&stream, &never, MemSync::Skip).unwrap();
    let t = Instant::now();
    drop(present);
    let took = t.elapsed();
    assert!(took >= DESTROY_TIMEOUT - Duration::from_millis(100), "returned after {took:?}: did not wait");
    assert!(took < DESTROY_TIMEOUT + Duration::from_secs(5), "hung for {took:?}");
    // A second destroy while the stream is still stuck leaks at once.
    let again = CudaSyncObj::import(&dev, cs[0].present_sync().unwrap()).unwrap();
    let t = Instant::now();
    drop(again);
    assert!(t.elapsed() < Duration::from_secs(1), "waited again: {:?}", t.elapsed());
    // Release the stream; the context drains and later destroys work again.
    obj.signal().unwrap();
    stream.synchronize().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let third = CudaSyncObj::import(&dev, cs[0].present_sync().unwrap()).unwrap();
    let t = Instant::now();
    drop(third);
    assert!(t.elapsed() < Duration::from_secs(1));
}
