//! A CUDA consumer's steady-state frame allocates nothing: a counting global allocator watches
//! 1000 `Consumer::process` calls on the consumer thread (the mock in its GPU mode: the same
//! safe-layer path as on Tegra) after warm-up. A CPU camera thread produces; only the consumer
//! thread is counted.
#![cfg(all(feature = "mock", feature = "cuda"))]

mod common;

use common::counting::{count, Counting};
use nvsci::cuda::MemSync;
use nvsci::pipeline::{Backend, ConsumerDesc, Engine, FrameFormat};
use nvsci::NvSci;
use std::time::Duration;

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_consumer_frames_allocate_nothing_after_warm_up() {
    let Some(dev) = common::gpu() else { return };
    let ring = Backend::with_library_on(NvSci::mock(), &dev)
        .stream(FrameFormat::nv12(320, 240))
        .frames(4)
        .timeout(Duration::from_secs(10))
        .consumer(ConsumerDesc::new(Engine::Cuda(dev.clone())))
        .build()
        .unwrap();
    let (mut p, cs) = ring.split().unwrap();
    let stream = dev.context().new_stream().unwrap();
    let mut c = cs.into_iter().next().unwrap();
    c.set_stream(stream.clone()).unwrap();
    c.set_mem_sync(MemSync::Auto).unwrap();
    const WARM: u64 = 16;
    const N: u64 = 1000;
    let camera = std::thread::spawn(move || {
        for t in 0..WARM + N {
            let f = p.acquire().unwrap();
            p.cpu_write(&f).unwrap()[0] = t as u8;
            p.present(f).unwrap();
        }
    });
    for _ in 0..WARM {
        c.process(|_| Ok(())).unwrap();
    }
    let allocations = count(|| {
        for _ in 0..N {
            c.process(|f| Ok(std::hint::black_box(f.sequence()))).unwrap();
        }
    });
    camera.join().unwrap();
    stream.synchronize().unwrap();
    assert_eq!(allocations, 0, "steady-state CUDA consumer frames allocated");
}
