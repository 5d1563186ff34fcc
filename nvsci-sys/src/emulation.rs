//! Entry points that an NvSci implementation other than NVIDIA's may offer so that its objects
//! can reach a CUDA GPU on machines whose driver cannot import NvSci handles (every desktop
//! driver answers an NvSciBuf/NvSciSync import with `CUDA_ERROR_NOT_SUPPORTED`).
//!
//! NVIDIA's libraries offer none of them: a table loaded by [`crate::loader`] is always
//! [`NvSciHostGpuFns::EMPTY`]. An emulation that fills them promises:
//!
//! * buffer memory is page-aligned host memory, so a CUDA context can page-lock and map it in
//!   place (`cuMemHostRegister`), standing in for Tegra's shared DRAM; or, where
//!   `BufObjExportGpuMemory` answers for an object, CUDA virtual-memory allocations the CPU
//!   maps too, which CUDA imports as an opaque fd (`cuImportExternalMemory`, the import Tegra
//!   makes with the NvSciBuf handle type) and can map as arrays;
//! * every sync object's primitive is a 64-bit counter alone in a page of host memory, so a CUDA
//!   stream can wait on it (`cuStreamWaitValue64`, greater-or-equal) and signal it
//!   (`cuStreamWriteValue64`) like a syncpoint; a fence is (object, value) and expires once the
//!   counter reaches its value;
//! * lists can be filled for a GPU engine the way `cuDeviceGetNvSciSyncAttributes` fills them on
//!   Tegra.
#![deny(clippy::undocumented_unsafe_blocks)]

use crate::{NvSciBufObj, NvSciError, NvSciRmGpuId, NvSciSyncAttrList, NvSciSyncFence, NvSciSyncObj};
use core::ffi::c_void;

/// Writes the host memory backing a buffer object: `*base` (page aligned) and `*size` (a
/// multiple of the page size, at least the object's size). The memory is shared by every
/// duplicate of the object and lives as long as any of them.
pub type BufObjGetHostMemoryFn =
    unsafe extern "C" fn(obj: NvSciBufObj, base: *mut *mut c_void, size: *mut u64) -> NvSciError;

/// Writes a new POSIX fd of the memory backing a buffer object when that memory is a CUDA
/// virtual-memory allocation (`cuMemExportToShareableHandle`, `POSIX_FILE_DESCRIPTOR`), and in
/// `*size` the size to import it with (`CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD`): the size
/// `BufObjGetHostMemory` reports, whose range shows the CPU the same bytes. The caller owns the
/// fd. `NotSupported` when the object's memory is host memory (page-lock it instead); NULL
/// arguments or a handle that is not a buffer object are `BadParameter`.
pub type BufObjExportGpuMemoryFn =
    unsafe extern "C" fn(obj: NvSciBufObj, fd: *mut i32, size: *mut u64) -> NvSciError;

/// Writes the host address of the object's 64-bit primitive counter (8-byte aligned, alone in a
/// page-aligned page, updated atomically). It lives as long as any handle or fence of the object.
pub type SyncObjGetCounterFn = unsafe extern "C" fn(obj: NvSciSyncObj, counter: *mut *mut u64) -> NvSciError;

/// Generates the fence of the next signal by the object's engine signaler (a GPU stream that
/// will store the fence's value into the counter). Fails with `BadParameter` when the signaler
/// is the CPU (use `NvSciSyncObjGenerateFence` then). `fence` must be cleared or valid; its old
/// contents are released.
pub type SyncObjGenerateEngineFenceFn =
    unsafe extern "C" fn(obj: NvSciSyncObj, fence: *mut NvSciSyncFence) -> NvSciError;

/// Tells CPU waiters that a GPU stream stored into the counter at `counter` (an address
/// `SyncObjGetCounter` handed out, of an object still alive), so that a sleeping wait wakes at
/// once instead of at its next look. The signature is CUDA's `CUhostFn`: a binding enqueues it
/// with `cuLaunchHostFunc` (user data: the counter's address) after the stream's store. Never
/// fails; it must not call CUDA (host functions may not).
pub type SyncCounterNotifyFn = unsafe extern "C" fn(counter: *mut c_void);

/// Fills an unreconciled sync attribute list for the GPU `gpu`, as
/// `cuDeviceGetNvSciSyncAttributes` does on Tegra: `flags` is `1` (signal), `2` (wait) or `3`
/// (both), the values of `CUDA_NVSCISYNC_ATTR_SIGNAL` / `CUDA_NVSCISYNC_ATTR_WAIT`.
pub type SyncAttrListFillGpuFn =
    unsafe extern "C" fn(list: NvSciSyncAttrList, gpu: *const NvSciRmGpuId, flags: i32) -> NvSciError;

/// The GPU entry points of an emulated implementation (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct NvSciHostGpuFns {
    /// See [`BufObjGetHostMemoryFn`].
    pub BufObjGetHostMemory: Option<BufObjGetHostMemoryFn>,
    /// See [`SyncObjGetCounterFn`].
    pub SyncObjGetCounter: Option<SyncObjGetCounterFn>,
    /// See [`SyncObjGenerateEngineFenceFn`].
    pub SyncObjGenerateEngineFence: Option<SyncObjGenerateEngineFenceFn>,
    /// See [`SyncAttrListFillGpuFn`].
    pub SyncAttrListFillGpu: Option<SyncAttrListFillGpuFn>,
    /// See [`SyncCounterNotifyFn`]. Optional: without it, CPU waits see a stream's store at their
    /// next look at the counter (the emulation's own latency bound).
    pub SyncCounterNotify: Option<SyncCounterNotifyFn>,
    /// See [`BufObjExportGpuMemoryFn`]. Optional: without it every buffer is host memory.
    pub BufObjExportGpuMemory: Option<BufObjExportGpuMemoryFn>,
}

impl NvSciHostGpuFns {
    /// No entry points: what NVIDIA's libraries offer.
    pub const EMPTY: Self = Self {
        BufObjGetHostMemory: None,
        SyncObjGetCounter: None,
        SyncObjGenerateEngineFence: None,
        SyncAttrListFillGpu: None,
        SyncCounterNotify: None,
        BufObjExportGpuMemory: None,
    };

    /// Whether every entry point is present (the implementation's objects can reach a GPU).
    pub fn is_complete(&self) -> bool {
        self.BufObjGetHostMemory.is_some()
            && self.SyncObjGetCounter.is_some()
            && self.SyncObjGenerateEngineFence.is_some()
            && self.SyncAttrListFillGpu.is_some()
    }
}

impl Default for NvSciHostGpuFns {
    fn default() -> Self {
        Self::EMPTY
    }
}
