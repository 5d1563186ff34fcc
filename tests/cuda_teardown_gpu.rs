//! Teardown of CUDA imports and mappings: `Drop` only enqueues; the destroy runs on the teardown
//! thread after the streams that used the object (and no others) have finished with it.
//!
//! Ordering, not timing, is asserted: work in flight on an unrelated stream (a stream blocked on
//! a host word until the test releases it) must still be in flight after the drop and after the
//! destroy; a stream blocked on a fence keeps what it uses queued until the fence is signalled.
//! Durations are printed for the record.
#![cfg(all(feature = "mock", feature = "cuda"))]

mod common;

use common::{gpu, open_fds, serial, settle};
use nvsci::cuda::cudarc::driver::sys;
use nvsci::cuda::cudarc::driver::CudaStream;
use nvsci::cuda::{
    fill_sync_attrs, CudaGpu, CudaSyncObj, ExportableAllocation, ExternalMemory, MemSync, ReadWrite,
};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use std::time::{Duration, Instant};

/// Unrelated work that stays in flight until released: `stream` waits (`cuStreamWaitValue32`)
/// on a page-locked host word that only [`Blocker::release`] sets.
struct Blocker {
    host: *mut u32,
    event: sys::CUevent,
}

impl Blocker {
    fn new(dev: &CudaGpu, stream: &CudaStream) -> Self {
        dev.context().bind_to_thread().unwrap();
        let mut host: *mut core::ffi::c_void = std::ptr::null_mut();
        let (mut dptr, mut event) = (0, std::ptr::null_mut());
        // SAFETY: valid out-pointers; the word is mapped for the device and zeroed before the
        // stream waits on it; the event is recorded after the wait on a live stream.
        unsafe {
            let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP;
            assert_eq!(sys::cuMemHostAlloc(&mut host, 4, flags), sys::CUresult::CUDA_SUCCESS);
            host.cast::<u32>().write_volatile(0);
            assert_eq!(sys::cuMemHostGetDevicePointer_v2(&mut dptr, host, 0), sys::CUresult::CUDA_SUCCESS);
            let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
            let r = sys::cuStreamWaitValue32_v2(stream.cu_stream(), dptr, 1, geq);
            assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
            assert_eq!(sys::cuEventCreate(&mut event, 0), sys::CUresult::CUDA_SUCCESS);
            assert_eq!(sys::cuEventRecord(event, stream.cu_stream()), sys::CUresult::CUDA_SUCCESS);
        }
        Self { host: host.cast(), event }
    }

    /// Whether the blocked stream is still blocked.
    fn in_flight(&self) -> bool {
        // SAFETY: a live event.
        unsafe { sys::cuEventQuery(self.event) == sys::CUresult::CUDA_ERROR_NOT_READY }
    }

    fn release(self, stream: &CudaStream) {
        // SAFETY: the word is page-locked and mapped; the stream is synchronised before it is
        // freed.
        unsafe {
            std::ptr::write_volatile(self.host, 1);
            stream.synchronize().unwrap();
            sys::cuEventDestroy_v2(self.event);
            sys::cuMemFreeHost(self.host.cast());
        }
    }
}

/// `spin(u64 cycles)`: one thread busy for `cycles` SM clock cycles (`%clock64`).
const SPIN_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry spin(.param .u64 p_cycles)
{
    .reg .pred %p<2>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p_cycles];
    mov.u64 %rd2, %clock64;
LOOP:
    mov.u64 %rd3, %clock64;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p1, %rd4, %rd1;
    @%p1 bra LOOP;
    ret;
}
"#;

/// Launches a kernel of about a second (2e9 SM cycles at up to 2 GHz) on `stream`; returns an
/// event recorded after it.
fn long_kernel(dev: &CudaGpu, stream: &CudaStream) -> sys::CUevent {
    use nvsci::cuda::cudarc::driver::PushKernelArg;
    let f = dev
        .context()
        .load_module(nvsci::cuda::cudarc::nvrtc::Ptx::from_src(SPIN_PTX))
        .unwrap()
        .load_function("spin")
        .unwrap();
    let cycles = 2_000_000_000u64;
    let mut b = stream.launch_builder(&f);
    b.arg(&cycles);
    let cfg = nvsci::cuda::cudarc::driver::LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: one u64 parameter, as declared.
    unsafe { b.launch(cfg) }.unwrap();
    dev.context().bind_to_thread().unwrap();
    let mut ev = std::ptr::null_mut();
    // SAFETY: valid out-pointer; recorded on a live stream of the bound context.
    unsafe {
        assert_eq!(sys::cuEventCreate(&mut ev, 0), sys::CUresult::CUDA_SUCCESS);
        assert_eq!(sys::cuEventRecord(ev, stream.cu_stream()), sys::CUresult::CUDA_SUCCESS);
    }
    ev
}

fn query(ev: sys::CUevent) -> sys::CUresult {
    // SAFETY: a live event.
    unsafe { sys::cuEventQuery(ev) }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn dropping_a_mapping_does_not_wait_for_a_one_second_kernel_on_another_stream() {
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
    let launched = Instant::now();
    let kernel = long_kernel(&dev, &busy);
    let running = query(kernel);
    let t = Instant::now();
    drop(m);
    drop(mem);
    let took = t.elapsed();
    let after_drop = query(kernel);
    let left = dev.flush_teardown(Duration::from_secs(30));
    let after_destroy = query(kernel);
    busy.synchronize().unwrap();
    let kernel_time = launched.elapsed();
    eprintln!(
        "kernel before the drop: {running:?}; drop {took:?}, kernel then: {after_drop:?}; after the destroys: \
         {after_destroy:?}; kernel done {kernel_time:?} after its launch"
    );
    assert_eq!(left, 0);
    let busy_state = sys::CUresult::CUDA_ERROR_NOT_READY;
    assert_eq!(running, busy_state, "the kernel was not running before the drop: no evidence either way");
    assert_eq!(after_drop, busy_state, "the drop waited for the kernel on another stream");
    assert_eq!(after_destroy, busy_state, "the destroy waited for the kernel on another stream");
    // SAFETY: created above, no longer used.
    unsafe { sys::cuEventDestroy_v2(kernel) };
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
fn dropping_a_mapping_does_not_wait_for_unrelated_work_on_another_stream() {
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
    // Another stream of the same context has work in flight that does not end by itself (a
    // context synchronisation would wait for it forever).
    let blocker = Blocker::new(&dev, &busy);
    assert!(blocker.in_flight());
    let t = Instant::now();
    drop(m);
    drop(mem);
    let took = t.elapsed();
    let t = Instant::now();
    let left = dev.flush_teardown(Duration::from_secs(30));
    let destroyed = t.elapsed();
    assert_eq!(left, 0, "the destroy waited for work on another stream");
    assert!(blocker.in_flight(), "the unrelated work ended early");
    eprintln!("drop of mapping + import: {took:?}; both destroyed {destroyed:?} later, the other stream still blocked");
    blocker.release(&busy);
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
