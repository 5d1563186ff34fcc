//! CUDA descriptor layouts, the memory-sync decision table and the no-GPU error paths.
//! Expected offsets and values are the documented LP64 layouts of the CUDA driver API structs.
#![cfg(feature = "cuda")]

use nvsci::cuda::{self, MemSync};
use nvsci::{CudaError, Error};

fn bytes<T>(v: &T) -> &[u8] {
    // SAFETY: reading the bytes of a plain C struct for inspection; only bytes of initialised
    // fields are compared below.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
}
fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

#[test]
fn nvscibuf_memory_descriptor_layout() {
    let obj = 0x1234_5678_9abc_def0usize as *const core::ffi::c_void;
    let d = cuda::nvscibuf_memory_desc(obj, 3_317_760);
    let b = bytes(&d);
    assert_eq!(b.len(), 104);
    assert_eq!(u32_at(b, 0), 8, "CU_EXTERNAL_MEMORY_HANDLE_TYPE_NVSCIBUF");
    assert_eq!(u64_at(b, 8), 0x1234_5678_9abc_def0, "handle.nvSciBufObject at offset 8");
    assert_eq!(u64_at(b, 24), 3_317_760, "size at offset 24");
    assert_eq!(u32_at(b, 32), 0, "no dedicated flag for NvSciBuf");
    assert!(b[36..100].iter().all(|&x| x == 0), "reserved words zero");
}

#[test]
fn opaque_fd_memory_descriptor_layout() {
    let d = cuda::opaque_fd_memory_desc(42, 1 << 21, true);
    let b = bytes(&d);
    assert_eq!(u32_at(b, 0), 1, "CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD");
    assert_eq!(u32_at(b, 8), 42, "handle.fd at offset 8");
    assert_eq!(u64_at(b, 24), 1 << 21);
    assert_eq!(u32_at(b, 32), 1, "CUDA_EXTERNAL_MEMORY_DEDICATED");
    let d = cuda::opaque_fd_memory_desc(7, 4096, false);
    assert_eq!(u32_at(bytes(&d), 32), 0);
}

#[test]
fn semaphore_descriptor_layout() {
    let obj = 0xdead_beef_0000_1000usize as *const core::ffi::c_void;
    let d = cuda::nvscisync_semaphore_desc(obj);
    let b = bytes(&d);
    assert_eq!(b.len(), 96);
    assert_eq!(u32_at(b, 0), 6, "CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_NVSCISYNC");
    assert_eq!(u64_at(b, 8), 0xdead_beef_0000_1000, "handle.nvSciSyncObj at offset 8");
    assert_eq!(u32_at(b, 24), 0, "flags at offset 24");
    let t = cuda::fd_semaphore_desc(9, true);
    assert_eq!(u32_at(bytes(&t), 0), 9, "TIMELINE_SEMAPHORE_FD");
    assert_eq!(u32_at(bytes(&t), 8), 9, "fd at offset 8");
    let o = cuda::fd_semaphore_desc(5, false);
    assert_eq!(u32_at(bytes(&o), 0), 1, "OPAQUE_FD");
}

#[test]
fn signal_and_wait_params_place_the_fence_pointer_and_flags() {
    let mut fence = [0u64; 6];
    let p = fence.as_mut_ptr() as *mut core::ffi::c_void;
    let s = cuda::signal_params(p, 0, true);
    let b = bytes(&s);
    assert_eq!(b.len(), 144);
    assert_eq!(u64_at(b, 8), p as u64, "params.nvSciSync.fence at offset 8");
    assert_eq!(u32_at(b, 72), 1, "SIGNAL_SKIP_NVSCIBUF_MEMSYNC at offset 72");
    assert_eq!(u32_at(bytes(&cuda::signal_params(p, 0, false)), 72), 0);

    let w = cuda::wait_params(p, 0, true);
    let b = bytes(&w);
    assert_eq!(b.len(), 144);
    assert_eq!(u64_at(b, 8), p as u64, "params.nvSciSync.fence at offset 8");
    assert_eq!(u32_at(b, 72), 2, "WAIT_SKIP_NVSCIBUF_MEMSYNC at offset 72");

    let t = cuda::signal_params(std::ptr::null_mut(), 77, false);
    assert_eq!(u64_at(bytes(&t), 0), 77, "params.fence.value at offset 0");
    assert_eq!(u64_at(bytes(&t), 8), 0);
    let t = cuda::wait_params(std::ptr::null(), 78, false);
    assert_eq!(u64_at(bytes(&t), 0), 78);
}

#[test]
fn buffer_and_array_descriptor_layout() {
    let d = cuda::buffer_desc(4096, 8192);
    let b = bytes(&d);
    assert_eq!(b.len(), 88);
    assert_eq!(u64_at(b, 0), 4096);
    assert_eq!(u64_at(b, 8), 8192);
    assert_eq!(u32_at(b, 16), 0);

    let fmt = cuda::cudarc::driver::sys::CUarray_format::CU_AD_FORMAT_UNSIGNED_INT8;
    let a = cuda::mipmapped_array_desc(2_211_840, 1024, 540, fmt, 2, 0x20, 1);
    let b = bytes(&a);
    assert_eq!(b.len(), 120);
    assert_eq!(u64_at(b, 0), 2_211_840, "offset");
    assert_eq!(u64_at(b, 8), 1024, "Width");
    assert_eq!(u64_at(b, 16), 540, "Height");
    assert_eq!(u64_at(b, 24), 0, "Depth (2D)");
    assert_eq!(u32_at(b, 32), 1, "CU_AD_FORMAT_UNSIGNED_INT8");
    assert_eq!(u32_at(b, 36), 2, "NumChannels");
    assert_eq!(u32_at(b, 40), 0x20, "Flags (COLOR_ATTACHMENT)");
    assert_eq!(u32_at(b, 48), 1, "numLevels at offset 48 (1, as NvSciBuf imports require)");
    assert!(b[52..116].iter().all(|&x| x == 0), "reserved words zero");

    // A mip chain (e.g. a Vulkan image of 5 levels): only numLevels changes.
    let m = cuda::mipmapped_array_desc(0, 64, 32, fmt, 4, 0x02, 5);
    let b = bytes(&m);
    assert_eq!(u64_at(b, 0), 0, "offset");
    assert_eq!(u64_at(b, 8), 64, "Width");
    assert_eq!(u64_at(b, 16), 32, "Height");
    assert_eq!(u64_at(b, 24), 0, "Depth (2D)");
    assert_eq!(u32_at(b, 36), 4, "NumChannels");
    assert_eq!(u32_at(b, 40), 0x02, "Flags (SURFACE_LDST)");
    assert_eq!(u32_at(b, 48), 5, "numLevels at offset 48");
    assert!(b[52..116].iter().all(|&x| x == 0), "reserved words zero");
}

#[test]
fn array_format_mapping() {
    use cuda::cudarc::driver::sys::CUarray_format::*;
    use nvsci::buf::ColorFormat;
    assert_eq!(cuda::array_format(ColorFormat::Y8), Some((CU_AD_FORMAT_UNSIGNED_INT8, 1)));
    assert_eq!(cuda::array_format(ColorFormat::V8U8), Some((CU_AD_FORMAT_UNSIGNED_INT8, 2)));
    assert_eq!(cuda::array_format(ColorFormat::A8B8G8R8), Some((CU_AD_FORMAT_UNSIGNED_INT8, 4)));
    assert_eq!(cuda::array_format(ColorFormat::Y16), Some((CU_AD_FORMAT_UNSIGNED_INT16, 1)));
    assert_eq!(cuda::array_format(ColorFormat::FLOAT_A16B16G16R16), Some((CU_AD_FORMAT_HALF, 4)));
    assert_eq!(cuda::array_format(ColorFormat(1)), None, "Bayer has no array format");
}

#[test]
fn memsync_decision_table() {
    use nvsci::cuda::memsync::decide;
    for n in [0usize, 1, 5] {
        for tracked in [false, true] {
            assert!(decide(MemSync::Skip, tracked, n));
            assert!(!decide(MemSync::Perform, tracked, n));
            // Auto skips only when every import in the process is known and none needs coherency.
            assert_eq!(
                decide(MemSync::Auto, tracked, n),
                tracked && n == 0,
                "tracked {tracked}, {n} needing"
            );
        }
    }
    // Without the promise, Auto performs memory synchronisation even with no import at all.
    assert!(!nvsci::cuda::memsync::all_imports_tracked());
    assert!(!decide(MemSync::Auto, false, 0));
}

#[test]
fn no_gpu_paths_return_typed_errors() {
    // A device ordinal that cannot exist is an error on every machine, never a panic.
    match cuda::CudaGpu::open(4096) {
        Err(Error::Cuda(CudaError::Unavailable { reason })) => assert!(reason.contains("mock"), "{reason}"),
        other => panic!("expected CudaError::Unavailable, got {other:?}"),
    }
    if !cuda::driver_present() {
        match cuda::CudaGpu::open(0) {
            Err(Error::Cuda(CudaError::Unavailable { reason })) => {
                assert!(reason.contains("libcuda"), "{reason}");
            }
            other => panic!("expected CudaError::Unavailable without a driver, got {other:?}"),
        }
        assert!(!cuda::nvsci_sync_attrs_available());
    }
}
