//! The NvSci -> CUDA rules a desk check against NVIDIA's documentation and samples found, run
//! through the mock on a CUDA GPU (the same safe-layer code the Tegra path runs): cleared-fence
//! waits that must synchronise memory, timestamp fences, plane mappings, streams of another
//! context.
#![cfg(all(feature = "mock", feature = "cuda"))]

mod common;

use nvsci::buf::{BufAttr, BufAttrList, BufModule, BufObj, ImageLayout, Perm};
use nvsci::cuda::{self, CudaSyncObj, ExternalMemory, MemSync, ReadOnly};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::{Error, NvSci};
use std::time::Duration;

fn cpu_waiter(m: &SyncModule, timestamps: bool) -> SyncAttrList {
    let mut l = m.attr_list().unwrap();
    l.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::WaitOnly)]).unwrap();
    if timestamps {
        l.set(&[SyncAttr::WaiterRequireTimestamps(true)]).unwrap();
    }
    l
}

/// A CPU-signalled gate that holds a stream: its object, its CUDA import and the fence.
fn gate(dev: &cuda::CudaGpu, m: &SyncModule) -> (SyncObj, CudaSyncObj) {
    let mut gs = m.attr_list().unwrap();
    gs.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::SignalOnly)]).unwrap();
    let mut gw = m.attr_list().unwrap();
    cuda::fill_sync_attrs(dev, &mut gw, false, true).unwrap();
    let gate = SyncObj::alloc(&SyncAttrList::reconcile(&[&gs, &gw, &cpu_waiter(m, false)]).unwrap()).unwrap();
    let in_cuda = CudaSyncObj::import(dev, &gate).unwrap();
    (gate, in_cuda)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn timestamp_fences_are_for_cpu_waiters_and_signalled_one_after_another() {
    let _s = common::serial_alone();
    let Some(dev) = common::gpu() else { return };
    // No destroy of an earlier test may be pending while a stream is held behind a fence this
    // thread signals later: the teardown thread's destroy would wait for the held stream, and
    // this thread's next driver call for the destroy.
    common::settle(&dev);
    let lib = NvSci::mock();
    let m = SyncModule::open(&lib).unwrap();
    // A CUDA waiter may not ask for timestamps (NvSciSync defines them for CPU waiters).
    let mut l = m.attr_list().unwrap();
    l.set(&[SyncAttr::WaiterRequireTimestamps(true)]).unwrap();
    match cuda::fill_sync_attrs(&dev, &mut l, false, true) {
        Err(Error::InvalidArgument { name: "list", reason }) => {
            assert!(reason.contains("CPU waiters"), "{reason}")
        }
        r => panic!("expected a refusal, got {r:?}"),
    }
    // CUDA signals, the CPU waits with timestamps.
    let mut s = m.attr_list().unwrap();
    cuda::fill_sync_attrs(&dev, &mut s, true, false).unwrap();
    let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&s, &cpu_waiter(&m, true)]).unwrap()).unwrap();
    let imported = CudaSyncObj::import(&dev, &obj).unwrap();
    // Hold one stream behind a fence of another object that the CPU signals later, so the first
    // timestamp fence stays outstanding.
    let (gate, gate_in_cuda) = gate(&dev, &m);
    let stream = dev.context().new_stream().unwrap();
    gate_in_cuda.wait(&stream, &gate.generate_fence().unwrap(), MemSync::Perform).unwrap();
    let first = imported.signal(&stream, MemSync::Perform).unwrap();
    // A second signal, from a stream that nothing holds, is accepted and runs after the first:
    // its fence does not expire while the first cannot (unordered, the idle stream's store
    // would expire it at once, and the first's later store would move the counter back).
    let idle = dev.context().new_stream().unwrap();
    let second = imported.signal(&idle, MemSync::Perform).unwrap();
    assert!(first.id_value().unwrap().1 < second.id_value().unwrap().1);
    let mut ctx = m.cpu_wait_context().unwrap();
    match second.wait(&mut ctx, Some(Duration::from_millis(100))) {
        Err(Error::Timeout { waited_for: nvsci::Wait::Fence { .. }, .. }) => {}
        r => panic!("the second timestamp fence expired before the first was signalled: {r:?}"),
    }
    gate.signal().unwrap();
    first.wait(&mut ctx, Some(Duration::from_secs(5))).unwrap();
    second.wait(&mut ctx, Some(Duration::from_secs(5))).unwrap();
    // Both streams passed their signals: the next signal needs no wait.
    idle.synchronize().unwrap();
    let third = imported.signal(&stream, MemSync::Perform).unwrap();
    third.wait(&mut ctx, Some(Duration::from_secs(5))).unwrap();
    stream.synchronize().unwrap();
}

/// DRIVE OS 6.0.10's reconciler gives every object with a CPU waiter timestamps (its
/// nvscisync.h), and the ring always adds a CPU waiter: a CUDA producer's present object then
/// requires timestamps, and a second present before the GPU ran the first signal must still
/// go through.
#[test]
#[ignore = "needs a CUDA GPU"]
fn drive_os_6_0_10_timestamps_let_a_cuda_producer_present_before_the_gpu_ran_the_last_signal() {
    use nvsci::pipeline::{Backend, ConsumerDesc, Engine, FrameFormat};
    use nvsci_mock::rules::{set_timestamp_rule, TimestampRule};
    let _s = common::serial_alone();
    let Some(dev) = common::gpu() else { return };
    // As above: nothing of an earlier test left to destroy while a stream is held.
    common::settle(&dev);
    let lib = NvSci::mock();
    set_timestamp_rule(TimestampRule::AnyCpuWaiter);
    let ring = Backend::with_library_on(lib.clone(), &dev)
        .stream(FrameFormat::Raw { size: 4096 })
        .frames(4)
        .timeout(Duration::from_secs(5))
        .producer(Engine::Cuda(dev.clone()))
        .consumer(ConsumerDesc::cpu())
        .build();
    set_timestamp_rule(TimestampRule::CpuWaiterRequest);
    let (mut p, cs) = ring.unwrap().split().unwrap();
    let mut c = cs.into_iter().next().unwrap();
    let present = p.present_sync().unwrap().attr_list().unwrap();
    assert_eq!(present.get_one(nvsci::sync::key::WAITER_REQUIRE_TIMESTAMPS).unwrap(), Some(true));
    let m = SyncModule::open(&lib).unwrap();
    let (gate, gate_in_cuda) = gate(&dev, &m);
    let stream = dev.context().new_stream().unwrap();
    gate_in_cuda.wait(&stream, &gate.generate_fence().unwrap(), MemSync::Perform).unwrap();
    p.set_stream(stream.clone()).unwrap();
    // The frames' bytes, copied to the device on a stream nothing holds.
    let own = dev.default_stream();
    let sources: Vec<_> = [7u8, 9]
        .iter()
        .map(|&v| {
            let mut host = vec![0u8; 4096];
            host[..16].fill(v);
            own.clone_htod(&host).unwrap()
        })
        .collect();
    own.synchronize().unwrap();
    for src in &sources {
        p.produce(|f| f.stream().clone().memcpy_dtod(src, f.buffer()).map_err(Error::from)).unwrap();
    }
    gate.signal().unwrap();
    for value in [7u8, 9] {
        let f = c.acquire().unwrap();
        let bytes = c.cpu_read(&f).unwrap();
        assert_eq!(&bytes[..16], &[value; 16]);
        assert!(bytes[16..].iter().all(|&b| b == 0));
        drop(bytes);
        c.release(f).unwrap();
    }
    stream.synchronize().unwrap();
    drop(sources);
}

fn nv12(m: &BufModule, layout: ImageLayout, gpu: nvsci::buf::GpuId) -> BufObj {
    let mut l = m.attr_list().unwrap();
    nvsci::pipeline::Nv12Image { width: 64, height: 32, layout }.set_on(&mut l).unwrap();
    l.set(&[BufAttr::NeedCpuAccess(true), BufAttr::RequiredPerm(Perm::ReadWrite), BufAttr::GpuId(&[gpu])])
        .unwrap();
    BufObj::alloc(&BufAttrList::reconcile(&[&l]).unwrap()).unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pitch_linear_planes_are_mapped_as_buffers_not_arrays() {
    // Alone, as the other tests: importing mock memory (`cuMemHostRegister`) waits for the
    // context's work in flight, and the timestamp test holds a stream behind a fence that its
    // own thread signals only after its next driver calls, which then wait for this import.
    let _s = common::serial_alone();
    let Some(dev) = common::gpu() else { return };
    let lib = NvSci::mock();
    let m = BufModule::open(&lib).unwrap();
    let obj = nv12(&m, ImageLayout::PitchLinear, dev.gpu_id());
    let planes = obj.planes().unwrap();
    let mem = ExternalMemory::<ReadOnly>::from_buf_obj(&dev, &obj).unwrap();
    match mem.map_plane(&planes[0], 0) {
        Err(Error::Unsupported { reason, .. }) => {
            assert_eq!(reason, nvsci::UnsupportedReason::ArrayOfPitchLinearPlane)
        }
        r => panic!("expected a refusal, got {r:?}"),
    }
    // The documented alternative works and covers the plane: luma rows at its pitch.
    let p = planes[1];
    let chroma = mem.map_buffer(p.offset, p.pitch as u64 * p.height as u64).unwrap();
    obj.cpu_write().unwrap()[p.offset as usize..][..4].copy_from_slice(&[1, 2, 3, 4]);
    let back = dev.default_stream().clone_dtoh(&chroma).unwrap();
    assert_eq!(&back[..4], &[1, 2, 3, 4]);
}

// cudarc binds `CudaContext::new_non_primary` for CUDA 11.4 to 13.1 only.
#[cfg(not(any(feature = "cuda-13020", feature = "cuda-13030", feature = "cuda-13040")))]
#[test]
#[ignore = "needs a CUDA GPU"]
fn streams_of_another_context_are_refused() {
    let _s = common::serial_alone();
    let Some(dev) = common::gpu() else { return };
    let lib = NvSci::mock();
    let m = SyncModule::open(&lib).unwrap();
    let mut s = m.attr_list().unwrap();
    cuda::fill_sync_attrs(&dev, &mut s, true, false).unwrap();
    let mut w = m.attr_list().unwrap();
    cuda::fill_sync_attrs(&dev, &mut w, false, true).unwrap();
    let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&s, &w, &cpu_waiter(&m, false)]).unwrap()).unwrap();
    let imported = CudaSyncObj::import(&dev, &obj).unwrap();
    // A second context: on this GPU (a non-primary context, as a two-GPU machine has one per
    // device), so one GPU suffices to prove the check.
    let other = nvsci::cuda::cudarc::driver::CudaContext::new_non_primary(0, 0).unwrap();
    let foreign = other.new_stream().unwrap();
    match imported.signal(&foreign, MemSync::Perform) {
        Err(Error::InvalidArgument { name: "stream", .. }) => {}
        r => panic!("expected a refusal of the signal, got {r:?}"),
    }
    let fence = imported.signal(&dev.default_stream(), MemSync::Perform).unwrap();
    match imported.wait(&foreign, &fence, MemSync::Perform) {
        Err(Error::InvalidArgument { name: "stream", .. }) => {}
        r => panic!("expected a refusal of the wait, got {r:?}"),
    }
    // The pipeline's CUDA parties refuse such a stream.
    let ring = nvsci::pipeline::Backend::with_library_on(lib.clone(), &dev)
        .stream(nvsci::pipeline::FrameFormat::Raw { size: 4096 })
        .frames(2)
        .consumer(nvsci::pipeline::ConsumerDesc::new(nvsci::pipeline::Engine::Cuda(dev.clone())))
        .build()
        .unwrap();
    let (_p, cs) = ring.split().unwrap();
    let mut c = cs.into_iter().next().unwrap();
    match c.set_stream(foreign.clone()) {
        Err(Error::InvalidArgument { name: "stream", .. }) => {}
        r => panic!("expected a refusal, got {r:?}"),
    }
    // A mapped buffer hands cudarc its address for streams of its own context only: for the
    // other context's stream it answers 0 (a copy there then fails with a CUDA error instead of
    // touching an address that means nothing in that context).
    use nvsci::cuda::cudarc::driver::DevicePtr;
    let m = BufModule::open(&lib).unwrap();
    let obj = nv12(&m, ImageLayout::PitchLinear, dev.gpu_id());
    let mem = ExternalMemory::<ReadOnly>::from_buf_obj(&dev, &obj).unwrap();
    let mapped = mem.map_buffer(0, 4096).unwrap();
    let own = dev.default_stream();
    assert_eq!(mapped.device_ptr(&own).0, mapped.device_address());
    assert_eq!(mapped.device_ptr(&foreign).0, 0);
    dev.default_stream().synchronize().unwrap();
}
