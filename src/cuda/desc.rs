//! Construction of the CUDA descriptors this crate hands to the driver.
//!
//! Pure functions, so the exact field placement (handle type, union member, size, flags, fence
//! pointer) is testable without a GPU.

use core::ffi::c_void;
use cudarc::driver::sys;

type MemHandle = sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st__bindgen_ty_1;
type SemHandle = sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_st__bindgen_ty_1;

/// External-memory descriptor for an NvSciBuf object of `size` bytes.
pub fn nvscibuf_memory(obj: *const c_void, size: u64) -> sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
    sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
        type_: sys::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_NVSCIBUF,
        handle: MemHandle { nvSciBufObject: obj },
        size,
        flags: 0,
        reserved: [0; 16],
    }
}

/// External-memory descriptor for an opaque POSIX fd of `size` bytes.
pub fn opaque_fd_memory(fd: i32, size: u64, dedicated: bool) -> sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
    sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
        type_: sys::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
        handle: MemHandle { fd },
        size,
        flags: if dedicated { sys::CUDA_EXTERNAL_MEMORY_DEDICATED } else { 0 },
        reserved: [0; 16],
    }
}

/// Mapped-buffer descriptor.
pub fn buffer(offset: u64, size: u64) -> sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC {
    sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC { offset, size, flags: 0, reserved: [0; 16] }
}

/// Mapped-mipmapped-array descriptor for a 2D array of `levels` mip levels (`numLevels`).
///
/// Memory imported from NvSciBuf must be mapped with exactly one level; memory imported from an
/// fd (e.g. a Vulkan image) takes the level count of the image it holds.
pub fn mipmapped_array(
    offset: u64,
    width: usize,
    height: usize,
    format: sys::CUarray_format,
    channels: u32,
    flags: u32,
    levels: u32,
) -> sys::CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC {
    sys::CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC {
        offset,
        arrayDesc: sys::CUDA_ARRAY3D_DESCRIPTOR {
            Width: width,
            Height: height,
            Depth: 0,
            Format: format,
            NumChannels: channels,
            Flags: flags,
        },
        numLevels: levels,
        reserved: [0; 16],
    }
}

/// External-semaphore descriptor for an NvSciSync object.
pub fn nvscisync_semaphore(obj: *const c_void) -> sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
    sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
        type_: sys::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_NVSCISYNC,
        handle: SemHandle { nvSciSyncObj: obj },
        flags: 0,
        reserved: [0; 16],
    }
}

/// External-semaphore descriptor for an opaque fd (binary or timeline).
pub fn fd_semaphore(fd: i32, timeline: bool) -> sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
    sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
        type_: if timeline {
            sys::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD
        } else {
            sys::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD
        },
        handle: SemHandle { fd },
        flags: 0,
        reserved: [0; 16],
    }
}

/// Signal parameters: `fence` is the NvSciSyncFence CUDA fills (NULL for fd semaphores),
/// `value` the timeline value.
pub fn signal(
    fence: *mut c_void,
    value: u64,
    skip_memsync: bool,
) -> sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS {
    use sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st__bindgen_ty_1 as P;
    sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS {
        params: P {
            fence: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st__bindgen_ty_1__bindgen_ty_1 { value },
            nvSciSync: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st__bindgen_ty_1__bindgen_ty_2 { fence },
            keyedMutex: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st__bindgen_ty_1__bindgen_ty_3 { key: 0 },
            reserved: [0; 12],
        },
        flags: if skip_memsync { sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_SKIP_NVSCIBUF_MEMSYNC } else { 0 },
        reserved: [0; 16],
    }
}

/// Wait parameters: `fence` is the NvSciSyncFence to wait for (NULL for fd semaphores), `value`
/// the timeline value.
pub fn wait(
    fence: *const c_void,
    value: u64,
    skip_memsync: bool,
) -> sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS {
    use sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st__bindgen_ty_1 as P;
    sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS {
        params: P {
            fence: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st__bindgen_ty_1__bindgen_ty_1 { value },
            nvSciSync: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st__bindgen_ty_1__bindgen_ty_2 {
                fence: fence as *mut c_void,
            },
            keyedMutex: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st__bindgen_ty_1__bindgen_ty_3 {
                key: 0,
                timeoutMs: 0,
            },
            reserved: [0; 10],
        },
        flags: if skip_memsync { sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_SKIP_NVSCIBUF_MEMSYNC } else { 0 },
        reserved: [0; 16],
    }
}
