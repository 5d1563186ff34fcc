//! GPU cache maintenance on the NvSci path, run through the mock on a CUDA GPU declared
//! integrated (Orin-like: `EnableGpuCache` defaults to true on sysmem, so frames with CPU access
//! need GPU software cache coherency). A CUDA consumer must never read such a frame without a
//! wait that performs NvSciBuf memory synchronisation; with `gpu_cache: false` the frames need
//! none and the waits may skip it. The decisions are read from the memory-sync flag of the CUDA
//! parameter block of each wait (`memsync::counts`), not from the log.
#![cfg(all(feature = "mock", feature = "cuda"))]

mod common;

use nvsci::cuda::memsync::{self, MemSyncCounts};
use nvsci::cuda::{CudaGpu, MemSync};
use nvsci::pipeline::{Backend, ConsumerDesc, Engine, FrameFormat};
use nvsci::NvSci;
use std::time::Duration;

/// The waits (on the camera's present fences) and signals (of the consumer's release fences)
/// counted since `before`: memory synchronisation (performed, skipped) for each.
fn since(before: MemSyncCounts) -> [(u64, u64); 2] {
    let now = memsync::counts();
    [
        (now.waits_performed - before.waits_performed, now.waits_skipped - before.waits_skipped),
        (now.signals_performed - before.signals_performed, now.signals_skipped - before.signals_skipped),
    ]
}

fn consume(dev: &CudaGpu, gpu_cache: bool, frames: usize) -> ([(u64, u64); 2], Option<bool>) {
    let lib = NvSci::mock();
    let ring = Backend::with_library_on(lib.clone(), dev)
        .stream(FrameFormat::Raw { size: 65536 })
        .frames(3)
        .timeout(Duration::from_secs(10))
        .gpu_cache(gpu_cache)
        .consumer(ConsumerDesc::new(Engine::Cuda(dev.clone())))
        .build()
        .unwrap();
    let (mut p, cs) = ring.split().unwrap();
    let c = cs.into_iter().next().unwrap();
    let needs = c.slot_view(0).unwrap().gpu_sw_need_cache_coherency(dev.gpu_id()).unwrap();
    let stream = dev.context().new_stream().unwrap();
    let mut cuda = c;
    cuda.set_stream(stream.clone()).unwrap();
    cuda.set_mem_sync(MemSync::Auto).unwrap();
    if needs == Some(true) {
        assert!(memsync::imports_needing_coherency() >= 3, "imports needing coherency were not counted");
    }
    let before = memsync::counts();
    let camera = std::thread::spawn(move || {
        for t in 0..frames {
            let f = p.acquire().unwrap();
            p.cpu_write(&f).unwrap().fill(t as u8);
            p.present(f).unwrap();
        }
    });
    for _ in 0..frames {
        cuda.process(|_| Ok(())).unwrap();
    }
    camera.join().unwrap();
    stream.synchronize().unwrap();
    (since(before), needs)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cuda_consumer_never_reads_frames_needing_coherency_without_memory_synchronisation() {
    let Some(dev) = common::gpu() else { return };
    nvsci_mock::set_gpu_integrated(dev.gpu_id().0, true);
    // The program vouches that every NvSciBuf import in this process goes through the crate, so
    // `Auto` would skip wherever it is allowed to: what remains performed is what coherency
    // requires.
    // SAFETY: this test binary imports NvSciBuf buffers only through the crate.
    unsafe { memsync::vouch_all_imports_are_tracked() };

    // Orin-like default: cached by the iGPU, CPU access -> coherency needed -> every wait and
    // signal synchronises.
    let ([waits, signals], needs) = consume(&dev, true, 20);
    assert_eq!(needs, Some(true), "an integrated GPU with CPU access must need coherency");
    assert_eq!(waits, (20, 0), "a wait skipped memory synchronisation on frames needing coherency");
    assert_eq!(signals, (20, 0), "a signal skipped memory synchronisation on frames needing coherency");
    common::settle(&dev); // destroys of dropped imports run on the teardown thread
    assert_eq!(memsync::imports_needing_coherency(), 0, "dropped imports still counted");

    // EnableGpuCache = false for the GPU: no coherency needed, the waits and signals skip it.
    let ([waits, signals], needs) = consume(&dev, false, 20);
    assert_eq!(needs, Some(false));
    assert_eq!((waits, signals), ((0, 20), (0, 20)));
    nvsci_mock::set_gpu_integrated(dev.gpu_id().0, false);
}
