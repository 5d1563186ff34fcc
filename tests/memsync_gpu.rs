//! GPU cache maintenance on the NvSci path, run through the mock on a CUDA GPU declared
//! integrated (Orin-like: `EnableGpuCache` defaults to true on sysmem, so frames with CPU access
//! need GPU software cache coherency). A CUDA consumer must never read such a frame without a
//! wait that performs NvSciBuf memory synchronisation; with `gpu_cache: false` the frames need
//! none and the waits may skip it. The decisions are read from the crate's debug log.
#![cfg(all(feature = "mock", feature = "cuda"))]

mod common;

use nvsci::cuda::{memsync, CudaGpu, MemSync};
use nvsci::pipeline::{Engine, FrameFormat, FrameRing, RingConfig};
use nvsci::NvSci;
use std::sync::Mutex;
use std::time::Duration;

/// Debug records of the crate, kept for inspection.
struct Capture;
static RECORDS: Mutex<Vec<String>> = Mutex::new(Vec::new());

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target().starts_with("nvsci")
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            RECORDS.lock().unwrap().push(r.args().to_string());
        }
    }
    fn flush(&self) {}
}
static CAPTURE: Capture = Capture;

/// Memory-sync decisions of waits logged since the last call: (performed, skipped).
fn take_wait_decisions() -> (usize, usize) {
    let mut r = RECORDS.lock().unwrap();
    let waits: Vec<&String> = r.iter().filter(|m| m.starts_with("NvSciSync wait:")).collect();
    let performed = waits.iter().filter(|m| m.contains("performing NvSciBuf memsync")).count();
    let skipped = waits.iter().filter(|m| m.contains("skipping NvSciBuf memsync")).count();
    r.clear();
    (performed, skipped)
}

fn consume(dev: &CudaGpu, gpu_cache: bool, frames: usize) -> (usize, usize, Option<bool>) {
    let lib = NvSci::mock();
    let config = RingConfig::default()
        .with_frames(3)
        .with_consumers(1)
        .with_timeout(Duration::from_secs(10))
        .with_gpu_cache(gpu_cache);
    let ring = FrameRing::with_engines(
        &lib,
        FrameFormat::Raw { size: 65536 },
        config,
        &Engine::Cpu,
        &[Engine::Cuda(dev.clone())],
    )
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
    take_wait_decisions();
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
    let (performed, skipped) = take_wait_decisions();
    (performed, skipped, needs)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cuda_consumer_never_reads_frames_needing_coherency_without_memory_synchronisation() {
    let Some(dev) = common::gpu() else { return };
    log::set_logger(&CAPTURE).unwrap();
    log::set_max_level(log::LevelFilter::Debug);
    nvsci_mock::set_gpu_integrated(dev.gpu_id().0, true);
    // The program vouches that every NvSciBuf import in this process goes through the crate, so
    // `Auto` would skip wherever it is allowed to: what remains performed is what coherency
    // requires.
    // SAFETY: this test binary imports NvSciBuf buffers only through the crate.
    unsafe { memsync::vouch_all_imports_are_tracked() };

    // Orin-like default: cached by the iGPU, CPU access -> coherency needed -> every wait syncs.
    let (performed, skipped, needs) = consume(&dev, true, 20);
    assert_eq!(needs, Some(true), "an integrated GPU with CPU access must need coherency");
    assert_eq!(
        (performed, skipped),
        (20, 0),
        "a wait skipped memory synchronisation on frames needing coherency"
    );
    common::settle(&dev); // destroys of dropped imports run on the teardown thread
    assert_eq!(memsync::imports_needing_coherency(), 0, "dropped imports still counted");

    // EnableGpuCache = false for the GPU: no coherency needed, the waits skip it.
    let (performed, skipped, needs) = consume(&dev, false, 20);
    assert_eq!(needs, Some(false));
    assert_eq!((performed, skipped), (0, 20));
    nvsci_mock::set_gpu_integrated(dev.gpu_id().0, false);
}
