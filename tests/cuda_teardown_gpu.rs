//! Teardown of CUDA imports and mappings: `Drop` only enqueues; the destroy runs on the teardown
//! thread after the streams that used the object (and no others) have finished with it.
//!
//! Ordering, not timing, is asserted: a 1-second kernel on an unrelated stream must still be
//! running after the drop and after the destroy; a stream blocked on a fence keeps what it uses
//! queued until the fence is signalled. Durations are printed for the record.
#![cfg(all(feature = "mock", feature = "cuda"))]

mod common;

use common::{gpu, open_fds, serial, settle};
use nvsci::cuda::cudarc::driver::sys;
use nvsci::cuda::cudarc::driver::{CudaStream, PushKernelArg};
use nvsci::cuda::cudarc::nvrtc::Ptx;
use nvsci::cuda::{
    fill_sync_attrs, CudaGpu, CudaSyncObj, ExportableAllocation, ExternalMemory, MemSync, ReadWrite,
};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use std::time::{Duration, Instant};

/// `spin(u64 ns)`: one thread busy for `ns` nanoseconds of the GPU's global timer.
const SPIN_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry spin(.param .u64 p_ns)
{
    .reg .pred %p<2>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p_ns];
    mov.u64 %rd2, %globaltimer;
LOOP:
    mov.u64 %rd3, %globaltimer;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p1, %rd4, %rd1;
    @%p1 bra LOOP;
    ret;
}
"#;

/// Launches a kernel that runs for `ns` on `stream` and returns an event recorded after it.
fn long_kernel(dev: &CudaGpu, stream: &CudaStream, ns: u64) -> sys::CUevent {
    let f = dev.context().load_module(Ptx::from_src(SPIN_PTX)).unwrap().load_function("spin").unwrap();
    let mut b = stream.launch_builder(&f);
    b.arg(&ns);
    let cfg = nvsci::cuda::cudarc::driver::LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: one u64 parameter, as declared.
    unsafe { b.launch(cfg) }.unwrap();
    let mut ev = std::ptr::null_mut();
    dev.context().bind_to_thread().unwrap();
    // SAFETY: valid out-pointer; the event is recorded on a live stream of the bound context.
    unsafe {
        assert_eq!(sys::cuEventCreate(&mut ev, 0), sys::CUresult::CUDA_SUCCESS);
        assert_eq!(sys::cuEventRecord(ev, stream.cu_stream()), sys::CUresult::CUDA_SUCCESS);
    }
    ev
}

fn query(ev: sys::CUevent) -> String {
    // SAFETY: a live event.
    format!("cuEventQuery: {:?}", unsafe { sys::cuEventQuery(ev) })
}

fn still_running(ev: sys::CUevent) -> bool {
    // SAFETY: a live event.
    unsafe { sys::cuEventQuery(ev) == sys::CUresult::CUDA_ERROR_NOT_READY }
}

/// Enqueues a byte fill of the mapping on `stream` and records the stream as its user.
fn fill(m: &nvsci::cuda::MappedBuffer<ReadWrite>, stream: &CudaStream, byte: u8, len: usize) {
    // SAFETY: the range lies inside the mapping, which stays alive until the stream finishes
    // with it (recorded by `used_on` below).
    let r = unsafe { sys::cuMemsetD8Async(m.address(), byte, len, stream.cu_stream()) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
    m.used_on(stream);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn dropping_a_mapping_does_not_wait_for_an_unrelated_kernel() {
    let _s = serial();
    let Some(dev) = gpu() else { return };
    let alloc = ExportableAllocation::new(&dev, 2 << 20).unwrap();
    let size = alloc.size();
    let (busy, user) = (dev.context().new_stream().unwrap(), dev.context().new_stream().unwrap());
    let mem =
        ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, alloc.export_fd().unwrap(), size as u64, false)
            .unwrap();
    let m = mem.map_all().unwrap();
    fill(&m, &user, 3, size);
    user.synchronize().unwrap();
    let kernel = long_kernel(&dev, &busy, 1_000_000_000);
    let launched = Instant::now();
    assert!(still_running(kernel), "the 1 s kernel is not running ({})", query(kernel));
    let t = Instant::now();
    drop(m);
    drop(mem);
    let took = t.elapsed();
    assert!(
        still_running(kernel),
        "the drop waited for a kernel on another stream (drop {took:?}, {:?} after the launch, {})",
        launched.elapsed(),
        query(kernel)
    );
    let t = Instant::now();
    let left = dev.flush_teardown(Duration::from_secs(30));
    let destroyed = t.elapsed();
    assert_eq!(left, 0);
    assert!(still_running(kernel), "the destroy waited for a kernel on another stream");
    eprintln!(
        "drop of mapping + import: {took:?}; destroyed {destroyed:?} later, the 1 s kernel still running"
    );
    busy.synchronize().unwrap();
    // SAFETY: created above, no longer used.
    unsafe { sys::cuEventDestroy_v2(kernel) };
}

/// A CPU-signalled sync object imported into CUDA for waits.
fn cpu_to_cuda(dev: &CudaGpu, module: &SyncModule) -> (SyncObj, CudaSyncObj) {
    let mut cpu = module.attr_list().unwrap();
    cpu.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::SignalOnly)]).unwrap();
    let mut waits = module.attr_list().unwrap();
    fill_sync_attrs(dev, &mut waits, false, true).unwrap();
    let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&cpu, &waits]).unwrap()).unwrap();
    let cuda = CudaSyncObj::import(dev, &obj).unwrap();
    (obj, cuda)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn nothing_is_freed_while_a_stream_that_used_it_waits_on_a_fence() {
    let _s = serial();
    let Some(dev) = gpu() else { return };
    let lib = nvsci::NvSci::mock();
    let module = SyncModule::open(&lib).unwrap();
    let (ready, ready_cuda) = cpu_to_cuda(&dev, &module);
    let alloc = ExportableAllocation::new(&dev, 2 << 20).unwrap();
    let size = alloc.size();
    let stream = dev.context().new_stream().unwrap();
    let mem =
        ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, alloc.export_fd().unwrap(), size as u64, false)
            .unwrap();
    let m = mem.map_all().unwrap();
    settle(&dev);
    // The stream waits for a CPU signal, then fills the mapping.
    let fence = ready.generate_fence().unwrap();
    ready_cuda.wait(&stream, &fence, MemSync::Skip).unwrap();
    fill(&m, &stream, 0x5a, size);
    let t = Instant::now();
    drop(m);
    drop(mem);
    drop(ready_cuda);
    eprintln!("drops behind a blocked stream took {:?}", t.elapsed());
    // Nothing can have run on the stream yet: the fence is signalled only below.
    // The mapping and the counter's host registration wait for the stream.
    assert!(dev.pending_teardown() >= 2, "{} destroys queued", dev.pending_teardown());
    ready.signal().unwrap();
    stream.synchronize().unwrap(); // the fill ran on the still-mapped memory (a fault otherwise)
    settle(&dev);
    let back = stream.clone_dtoh(&alloc).unwrap();
    assert!(back.iter().all(|&b| b == 0x5a), "the fill did not land in the memory");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fds_and_device_memory_stay_flat_over_10000_import_map_use_drop_cycles() {
    let _s = serial();
    let Some(dev) = gpu() else { return };
    let alloc = ExportableAllocation::new(&dev, 2 << 20).unwrap();
    let size = alloc.size();
    let stream = dev.context().new_stream().unwrap();
    let cycle = || {
        let mem =
            ExternalMemory::<ReadWrite>::from_opaque_fd(&dev, alloc.export_fd().unwrap(), size as u64, false)
                .unwrap();
        let m = mem.map_all().unwrap();
        fill(&m, &stream, 1, 4096);
    };
    for _ in 0..10 {
        cycle();
    }
    stream.synchronize().unwrap();
    settle(&dev);
    let (fds, free) = (open_fds(), dev.context().mem_get_info().unwrap().0);
    let t = Instant::now();
    for _ in 0..10_000 {
        cycle();
    }
    let took = t.elapsed();
    stream.synchronize().unwrap();
    settle(&dev);
    let (fds1, free1) = (open_fds(), dev.context().mem_get_info().unwrap().0);
    eprintln!("10 000 cycles in {took:?}; fds {fds} -> {fds1}, free device memory {free} -> {free1}");
    assert_eq!(fds1, fds, "open fds changed over 10 000 cycles");
    assert_eq!(free1, free, "free device memory changed over 10 000 cycles");
    assert_eq!(dev.pending_teardown(), 0);
}
