//! CPU-only emulation of NVIDIA NvSciBuf / NvSciSync behind the `nvsci-sys` function tables.
//!
//! The real libraries exist only on Jetson / DRIVE OS. This crate fills the same
//! [`NvSciBufFns`] / [`NvSciSyncFns`] tables with functions that follow the documented behaviour
//! of NvSciBuf 2.11 / NvSciSync 2.8, backed by host memory and an atomic 64-bit counter per sync
//! object, so that code written against the tables can be tested anywhere.
//!
//! * [`buf_fns`] / [`sync_fns`]: the tables. `NvSciSyncFenceWaitWithMode` and
//!   `NvSciSyncFenceUpdateFence` are left `None`.
//! * [`ipc_fns`]: NvSciIpc over Unix domain sockets and shared-memory rings, and with it the
//!   IPC export/import entry points of both libraries across processes (see [`ipc`] and
//!   [`ipc::config`]).
//! * [`Ledger`]: live-handle accounting per module ([`buf_module_ledger`],
//!   [`sync_module_ledger`]) and per process ([`global_ledger`]).
//! * [`set_cpu_need_sw_cache_coherency`]: test hook for the one output the mock cannot derive.
//! * [`faults`]: make the Nth call of an entry point fail with a chosen error (per thread), and
//!   trace which entry points a flow calls.
//! * [`rules`]: reproduce a rule that NVIDIA's headers state differently from one DRIVE OS
//!   release to another (per thread): [`rules::TimestampRule`] (6.0.10's reconciliation of
//!   `WaiterRequireTimestamps`).
//! * [`host_gpu_fns`]: the entry points through which the mock's objects reach a CUDA GPU (see
//!   "GPU mode" below).
//! * With the `export` feature every implemented entry point is also exported under its C name
//!   (module `export`), so that a shared object linking this crate (the workspace's
//!   `nvsci-mock-so`, `libnvsci_mock.so`) can be loaded as `libnvscibuf.so.1` /
//!   `libnvscisync.so.1` (and `libnvsciipc.so`).
//!
//! Where the documentation leaves a choice to the implementation, the module documentation of
//! the relevant part says what the mock does (reconciliation rules in the crate's `buf` and
//! `sync` modules, image layout in the `buf::image` module: [`MOCK_PITCH_ALIGN`], [`MOCK_PLANE_ALIGN`],
//! [`block_linear_log2_gobs`]).
//!
//! Handles are `Box`ed records tagged with a magic number: NULL, a handle of the wrong kind or
//! a foreign pointer yields `NvSciError_BadParameter` (or is ignored by `void` functions).
//! A freed handle is not detected. No panic crosses the C ABI.
//!
//! # Behaviour where callers need to know the mock's choice
//!
//! Attribute lists (both libraries):
//! * SetAttrs is all-or-nothing: every pair is checked (known key, not output-only, value
//!   non-NULL, `len` = element size × n within the documented count, valid value, not already
//!   set, not twice in the call, NvSciBuf type-specific key whose type is in `Types` as set
//!   before or in the same call) before anything is stored; any failure is `BadParameter`.
//! * Lists from Create and Clone are writable; Clone of an unreconciled list unlocks every key
//!   (documented: attributes may be set again). Appended, reconciled, conflict and object lists
//!   are read-only (`BadParameter`).
//! * NvSciBuf GetAttrs/SlotGetAttrs: an output-only key on an unreconciled list, or the
//!   input-only `RequiredPerm` on a reconciled list, is `BadParameter` (documented). NvSciSync
//!   getters have no direction rule. Unset keys give `NULL` / 0. Values are 8-byte aligned and
//!   stay valid while the list lives.
//! * NvSciBuf Clone and AppendUnreconciled require `Types` in every slot (documented).
//! * Reconcile / ReconcileAndObjAlloc: NULL out-pointers, duplicate inputs, reconciled or
//!   conflict lists as inputs and lists of different modules are `BadParameter`. Once the
//!   arguments are valid, `*reconciled` (or `*obj`) and `*conflict` are always written: the new
//!   handle or NULL. On `ReconciliationFailed` the conflict list is a new counted list (free it)
//!   holding every conflicting key (the first slot's value, or one zero byte when no slot set
//!   it) and whose DebugDump is one line per key: `Name: reason`, e.g.
//!   `NvSciBufRawBufferAttrKey_Size: slot 0 = 4096, slot 1 = 8192`. Conflict lists report
//!   `IsReconciled` = false and cannot be reconciled or appended.
//! * NvSciBuf: a mandatory key (`Types`, RawBuffer `Size`, Image `Layout`, `ScanType`,
//!   `PlaneCount`, `PlaneColorFormat`, `PlaneWidth`, `PlaneHeight`) missing from every slot is
//!   `BadParameter` without conflict list, as documented for NvSciBufAttrListReconcile.
//!   Conflicts are checked first. Full rules: the `buf::reconcile` module documentation.
//! * ValidateReconciled re-runs the reconciliation: NvSciBuf answers `Success` + true or
//!   `ReconciliationFailed` + false; NvSciSync answers `Success` + true or `BadParameter` +
//!   false (each as documented).
//! * DebugDump returns a text buffer (counted in `descs`, freed with `Nv*AttrListFreeDesc`);
//!   `len` excludes the NUL that follows the text.
//!
//! NvSciBuf objects: see `buf::obj`; GetCpuPtr needs NeedCpuAccess and ReadWrite, GetConstCpuPtr
//! needs NeedCpuAccess (`BadParameter` otherwise); FlushCpuCacheRange: `len` 0 or past the end
//! `BadParameter`, `offset + len` overflow `Overflow`, no CPU access `NotPermitted`.
//! PutPixels / GetPixels (`buf::pixels`): one user plane for RGBA, RAW and single-plane YUV
//! images, Y, U and V user planes for multi-plane YUV images; a rectangle only for RGBA and RAW;
//! no CPU access, or a put through a read-only handle, `BadParameter` (as nvscibuf.h lists them).
//!
//! NvSciSync: see `sync::reconcile` and `sync::obj`. GenerateFence and Signal need a CPU
//! signaler (`BadParameter`); Signal with no generated fence outstanding is `InvalidState`.
//! FenceWait needs a CPU waiter and a context of the same module (`BadParameter`); `-1` and
//! `NvSciSyncFenceMaxTimeout` wait forever. FenceGetTimestamp: `ClearedFence`, `BadParameter`
//! without timestamps, `NotYetAvailable` before the signal, `NoLongerAvailable` once the slot
//! has been reused.
//!
//! # GPU mode
//!
//! [`host_gpu_fns`] fills every entry of [`NvSciHostGpuFns`] (`is_complete()` is true), so that a
//! CUDA context can use the mock's objects on a desktop GPU. The mock calls CUDA for one thing
//! only, and only where it can (`libcuda.so.1` opened at run time; without it nothing changes):
//! the memory of block-linear images that name a GPU (below).
//!
//! * Block-linear images whose reconciled list names a GPU (`GpuId`, the first one): where
//!   CUDA finds that GPU (by UUID) and its driver offers VMM memory on the host NUMA node
//!   (`CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID >= 0`, `cuMemCreate` there with a POSIX-fd handle type
//!   succeeds), the allocation is such memory, mapped read-write for the GPU and the CPU (whole
//!   allocation granules, zeroed); `BufObjExportGpuMemory` exports it as a new fd that CUDA
//!   imports as `CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD` and maps as buffers or arrays;
//!   `BufObjGetHostMemory` reports the CPU mapping. Its planes follow the GOB layout and the
//!   block height that the GPU's arrays of the plane's size use ([`desktop_gob_offset`],
//!   [`desktop_block_linear_log2_gobs`], measured on an H100). [`gpu_memory_stats`] counts the
//!   live allocations of this kind (and their bytes) in the process. Such an object crosses
//!   processes as the allocation's POSIX fd, which the importing process maps for the same GPU
//!   (`cuMemImportFromShareableHandle`; `NotSupported` where it cannot: `buf::ipc`). Anywhere else (no driver, no such GPU, no host-NUMA
//!   VMM memory) the allocation is host pages as below, `BufObjExportGpuMemory` answers
//!   `NotSupported`, and the planes follow the Tegra layout. Either way, block-linear planes of
//!   a list that names a GPU start on [`GPU_ARRAY_PLANE_ALIGN`].
//!
//! * Memory: every buffer allocation starts on a page boundary and its size is rounded up to a
//!   whole number of pages (the page size is `sysconf(_SC_PAGESIZE)` on Linux; elsewhere, or if
//!   that fails, 64 KiB, the largest aarch64 page size). `BufObjGetHostMemory` writes that base
//!   and rounded size, the same for every duplicate; memory is zeroed on allocation. NULL
//!   arguments or a handle that is not a buffer object are `BadParameter`.
//! * Counter: each sync object's primitive is a 64-bit counter at the start of its own
//!   page-aligned page (followed by the words CPU waiters sleep on), freed with the last handle or
//!   fence of the object. `SyncObjGetCounter` writes its address. A GPU stream may wait on it
//!   (`cuStreamWaitValue64`, greater-or-equal) and store fence values into it
//!   (`cuStreamWriteValue64`); every access must be an aligned 64-bit atomic one. A store is
//!   followed by `SyncCounterNotify` (a CUDA host function) to wake sleeping waiters.
//!   `NvSciSyncFenceWait` spins on the counter for 30 µs, then sleeps on a futex in the page
//!   (shared with every process the object is exported to), which CPU signals and
//!   `SyncCounterNotify` wake; it also re-reads the counter at least every 2 ms, so a store
//!   nobody notifies is still seen; the timeout is respected.
//! * `SyncObjGenerateEngineFence`: for an object whose signaler is not the CPU, reserves the next
//!   value (`Overflow` past `MaxPrimitiveValue`) and writes its fence exactly as
//!   `NvSciSyncObjGenerateFence` does for a CPU signaler; a CPU-signaled object or NULL is
//!   `BadParameter`. `NvSciSyncObjGenerateFence` and `NvSciSyncObjSignal` stay CPU-only.
//!   Engine signals record no timestamps.
//! * `SyncAttrListFillGpu(list, gpu, flags)`: `flags` 1 (signal), 2 (wait) or 3 (both), else
//!   `BadParameter`; NULL `gpu` is `BadParameter`. Sets `RequiredPerm` (SignalOnly / WaitOnly /
//!   WaitSignal), `PrimitiveInfo` = `[SysmemSemaphorePayload64b]` and `GpuId` = `[*gpu]` with the
//!   rules of SetAttrs (all or nothing; a key already set is `BadParameter`); `NeedCpuAccess` is
//!   left unset. Such a list reconciles with CPU lists under the usual rules: a GPU signaler
//!   gives an object whose CPU may only wait.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod attrs;
mod buf;
mod desc;
pub mod faults;
mod ffi;
mod gpu;
mod handle;
pub mod ipc;
mod ledger;
mod list_common;
mod pages;
pub mod rules;
mod sync;
mod vmm;

#[cfg(feature = "export")]
#[cfg_attr(docsrs, doc(cfg(feature = "export")))]
pub mod export;

pub use buf::image::{
    block_linear_log2_gobs, desktop_block_linear_log2_gobs, desktop_gob_offset, GOB_HEIGHT, GOB_SIZE,
    GOB_WIDTH, GPU_ARRAY_PLANE_ALIGN, MAX_LOG2_GOBS_PER_BLOCK, MOCK_PITCH_ALIGN, MOCK_PLANE_ALIGN,
};
pub use ipc::config::{set_ipc_dir, IPC_DIR_ENV};
pub use ledger::{global_ledger, Flush, HandleCounts, Ledger};
pub use sync::counter::{cpu_wait_stats, CpuWaitStats};
pub use vmm::{gpu_memory_stats, GpuMemoryStats};

use nvsci_sys::{NvSciBufFns, NvSciBufModule, NvSciHostGpuFns, NvSciSyncFns, NvSciSyncModule};
use std::sync::atomic::Ordering;

/// The NvSciBuf function table backed by the emulation.
pub fn buf_fns() -> NvSciBufFns {
    buf::fns()
}

/// The NvSciSync function table backed by the emulation.
pub fn sync_fns() -> NvSciSyncFns {
    sync::fns()
}

/// The NvSciIpc function table backed by the emulation (see [`ipc`]).
pub fn ipc_fns() -> nvsci_sys::NvSciIpcFns {
    ipc::fns()
}

/// The GPU entry points of the emulation, all present (see "GPU mode" in the crate
/// documentation).
pub fn host_gpu_fns() -> NvSciHostGpuFns {
    gpu::fns()
}

/// The ledger of an NvSciBuf module; `None` for NULL or a handle that is not a mock module.
///
/// # Safety
/// `m` must be NULL or a live module created by this mock.
pub unsafe fn buf_module_ledger(m: NvSciBufModule) -> Option<Ledger> {
    // SAFETY: forwarded contract.
    unsafe { buf::module::get(m) }.ok().map(|r| r.shared.ledger.clone())
}

/// The ledger of an NvSciSync module; `None` for NULL or a handle that is not a mock module.
///
/// # Safety
/// `m` must be NULL or a live module created by this mock.
pub unsafe fn sync_module_ledger(m: NvSciSyncModule) -> Option<Ledger> {
    // SAFETY: forwarded contract.
    unsafe { sync::module::get(m) }.ok().map(|r| r.shared.ledger.clone())
}

/// Declares the GPU `gpu` (16 UUID bytes) integrated or not, for every list reconciled from now
/// on in this process: an integrated GPU (a Tegra iGPU on shared sysmem, as on Orin) gets the
/// documented `EnableGpuCache` default `true`, so with CPU access its `GpuSwNeedCacheCoherency`
/// is `true` as on the target; a discrete GPU (every GPU unless declared) gets `false`. The GPU
/// kind is a property of the machine, hence process-wide.
pub fn set_gpu_integrated(gpu: [u8; 16], integrated: bool) {
    let mut v = buf::reconcile::INTEGRATED_GPUS.lock().unwrap_or_else(|e| e.into_inner());
    v.retain(|g| *g != gpu);
    if integrated {
        v.push(gpu);
    }
}

/// Sets the value of `NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency` in lists reconciled from
/// now on under module `m` (default `false`: host memory is coherent). Ignored for NULL or a
/// handle that is not a mock module.
///
/// # Safety
/// `m` must be NULL or a live module created by this mock.
pub unsafe fn set_cpu_need_sw_cache_coherency(m: NvSciBufModule, value: bool) {
    // SAFETY: forwarded contract.
    if let Ok(r) = unsafe { buf::module::get(m) } {
        r.shared.cpu_sw_coherency.store(value, Ordering::SeqCst);
    }
}
