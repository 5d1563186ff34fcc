//! Teardown of CUDA imports and mappings: `Drop` only enqueues; the destroy runs on the teardown
//! thread after the streams that used the object (and no others) have finished with it.
//!
//! Ordering, not timing, is asserted: work in flight on an unrelated stream (a stream blocked on
//! a host word, or a kernel that runs for a second, until the test releases it) is still in
//! flight after the drop returns; a stream
//! blocked on a fence keeps what it uses queued until the fence is signalled. The driver's own
//! free waits for the device's work in flight, so a destroy completes only after unrelated work
//! too, off the dropping thread. Durations are printed for the record.
#![cfg(all(feature = "mock", feature = "cuda"))]

mod common;

use common::kernels::SPIN_UNTIL_RELEASED_PTX;
use common::{gpu, open_fds, serial, settle};
use nvsci::cuda::cudarc::driver::sys;
use nvsci::cuda::cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use nvsci::cuda::cudarc::nvrtc::Ptx;
use nvsci::cuda::{
    fill_sync_attrs, CudaGpu, CudaSyncObj, ExportableAllocation, ExternalMemory, MemSync, ReadWrite,
};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use std::time::{Duration, Instant};

// cudarc binds `cuStreamWaitValue32_v2` from its CUDA 11.7 bindings on, the original entry point
// before (as src/cuda/semaphore.rs picks its 64-bit twins).
#[cfg(any(feature = "cuda-11040", feature = "cuda-11050", feature = "cuda-11060"))]
use sys::cuStreamWaitValue32 as stream_wait_value32;
#[cfg(not(any(feature = "cuda-11040", feature = "cuda-11050", feature = "cuda-11060")))]
use sys::cuStreamWaitValue32_v2 as stream_wait_value32;

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
            let r = stream_wait_value32(stream.cu_stream(), dptr, 1, geq);
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

/// Enqueues a byte fill of the mapping on `stream`.
fn fill(m: &nvsci::cuda::MappedBuffer<ReadWrite>, stream: &CudaStream, byte: u8, len: usize) {
    // SAFETY: the range lies inside the mapping, which stays alive until the stream finishes
    // with it (its destroy waits for the work queued before the drop).
    let r = unsafe { sys::cuMemsetD8Async(m.device_address(), byte, len, stream.cu_stream()) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
}

/// A 2 MiB import and its mapping, filled by a stream of their context that has finished
/// (with the allocation it imports, which outlives them).
fn used_mapping(
    dev: &CudaGpu,
) -> (ExportableAllocation, ExternalMemory<ReadWrite>, nvsci::cuda::MappedBuffer<ReadWrite>) {
    let alloc = ExportableAllocation::new(dev, 2 << 20).unwrap();
    let size = alloc.size();
    let user = dev.context().new_stream().unwrap();
    let mem =
        ExternalMemory::<ReadWrite>::from_opaque_fd(dev, alloc.export_fd().unwrap(), size as u64, false)
            .unwrap();
    let m = mem.map_all().unwrap();
    fill(&m, &user, 3, size);
    user.synchronize().unwrap();
    (alloc, mem, m)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn dropping_a_mapping_returns_while_another_stream_is_blocked() {
    let _s = serial();
    let Some(dev) = gpu() else { return };
    let (_alloc, mem, m) = used_mapping(&dev);
    let busy = dev.context().new_stream().unwrap();
    settle(&dev);
    // Another stream of the same context has work in flight that does not end by itself.
    let blocker = Blocker::new(&dev, &busy);
    let t = Instant::now();
    drop(m);
    drop(mem);
    let took = t.elapsed();
    assert!(blocker.in_flight(), "the drop waited for the blocked stream");
    // The driver's free waits for the device's work in flight, so the destroy is still queued
    // (bounded by DESTROY_TIMEOUT), not running inside the driver.
    assert!(dev.pending_teardown() > 0, "destroyed while the device had work in flight");
    let released = Instant::now();
    blocker.release(&busy);
    assert_eq!(dev.flush_teardown(Duration::from_secs(30)), 0);
    eprintln!(
        "drop of mapping + import with another stream blocked: {took:?}; destroyed {:?} after that stream was \
         released",
        released.elapsed()
    );
}

/// Two page-locked host words mapped for the device: the spinning kernel's "started" flag and
/// the host's "release" flag.
struct HostWords {
    host: *mut u32,
    dev: u64,
}

impl HostWords {
    fn new(dev: &CudaGpu) -> Self {
        dev.context().bind_to_thread().unwrap();
        let mut host: *mut core::ffi::c_void = std::ptr::null_mut();
        let mut dptr = 0;
        // SAFETY: valid out-pointers; both words are zeroed before any kernel sees them.
        unsafe {
            let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP;
            assert_eq!(sys::cuMemHostAlloc(&mut host, 8, flags), sys::CUresult::CUDA_SUCCESS);
            host.cast::<u64>().write_volatile(0);
            assert_eq!(sys::cuMemHostGetDevicePointer_v2(&mut dptr, host, 0), sys::CUresult::CUDA_SUCCESS);
        }
        Self { host: host.cast(), dev: dptr }
    }

    fn read(&self, i: usize) -> u32 {
        // SAFETY: `i` < 2 words of the live allocation.
        unsafe { self.host.add(i).read_volatile() }
    }

    fn write(&self, i: usize, v: u32) {
        // SAFETY: `i` < 2 words of the live allocation.
        unsafe { self.host.add(i).write_volatile(v) }
    }

    /// Frees the words; the caller has synchronised every stream that used them.
    fn free(self) {
        // SAFETY: allocated by cuMemHostAlloc, no work in flight uses it any more.
        unsafe { sys::cuMemFreeHost(self.host.cast()) };
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn dropping_a_mapping_returns_while_a_one_second_kernel_runs_on_another_stream() {
    let _s = serial();
    let Some(dev) = gpu() else { return };
    let (_alloc, mem, m) = used_mapping(&dev);
    let busy = dev.context().new_stream().unwrap();
    let module = dev.context().load_module(Ptx::from_src(SPIN_UNTIL_RELEASED_PTX)).unwrap();
    let spin = module.load_function("spin_until_released").unwrap();
    settle(&dev);
    // A kernel of another stream of the same context runs for one second unless released.
    let words = HostWords::new(&dev);
    let (started, release, max_ns) = (words.dev, words.dev + 4, 1_000_000_000u64);
    let mut launch = busy.launch_builder(&spin);
    launch.arg(&started).arg(&release).arg(&max_ns);
    let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: the kernel reads and writes only the two mapped host words, which outlive it.
    unsafe { launch.launch(cfg) }.unwrap();
    let launched = Instant::now();
    let mut event = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; recorded after the kernel on a live stream.
    unsafe {
        assert_eq!(sys::cuEventCreate(&mut event, 0), sys::CUresult::CUDA_SUCCESS);
        assert_eq!(sys::cuEventRecord(event, busy.cu_stream()), sys::CUresult::CUDA_SUCCESS);
    }
    while words.read(0) == 0 {
        assert!(launched.elapsed() < Duration::from_secs(10), "the kernel did not start");
        std::hint::spin_loop();
    }
    let t = Instant::now();
    drop(m);
    drop(mem);
    let took = t.elapsed();
    // The kernel ends only when released below (or after a second): had the drop waited for it,
    // the event after it would have completed.
    // SAFETY: a live event.
    let running = unsafe { sys::cuEventQuery(event) };
    words.write(1, 1);
    busy.synchronize().unwrap();
    assert_eq!(running, sys::CUresult::CUDA_ERROR_NOT_READY, "the drop waited for the kernel");
    assert_eq!(dev.flush_teardown(Duration::from_secs(30)), 0);
    // SAFETY: the event is not used again.
    unsafe { sys::cuEventDestroy_v2(event) };
    words.free();
    eprintln!(
        "drop of mapping + import while a one-second kernel ran on another stream: {took:?} (the kernel had \
         run {:?})",
        t.duration_since(launched)
    );
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
