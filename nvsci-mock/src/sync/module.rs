//! NvSciSync modules, version check and CPU wait contexts.

use crate::ffi::{guard, guard_void, non_null, write_out, Res};
use crate::handle::{self, Record};
use crate::ledger::{Counted, Kind, Ledger};
use nvsci_sys::*;
use std::sync::Arc;

/// The NvSciSync minor version this mock implements (major 2).
pub(crate) const MINOR_VERSION: u32 = 8;

/// State shared by a module and everything created under it.
#[derive(Debug)]
pub(crate) struct SyncModuleShared {
    pub ledger: Ledger,
}

/// The record behind an `NvSciSyncModule`.
#[repr(C)]
pub(crate) struct SyncModuleRec {
    magic: u64,
    pub shared: Arc<SyncModuleShared>,
    _count: Counted,
}

// SAFETY: repr(C) with the magic first.
unsafe impl Record for SyncModuleRec {
    const MAGIC: u64 = 0x4e56_5359_4e4d_4f44; // "NVSYNMOD"
}

/// The record behind an `NvSciSyncCpuWaitContext`.
#[repr(C)]
pub(crate) struct WaitContextRec {
    magic: u64,
    pub module: Arc<SyncModuleShared>,
    _count: Counted,
}

// SAFETY: repr(C) with the magic first.
unsafe impl Record for WaitContextRec {
    const MAGIC: u64 = 0x4e56_5359_4e57_4354; // "NVSYNWCT"
}

/// Borrows a module record.
///
/// # Safety
/// `m` must be NULL or a live handle of this mock.
pub(crate) unsafe fn get<'a>(m: NvSciSyncModule) -> Res<&'a SyncModuleRec> {
    // SAFETY: forwarded contract.
    unsafe { handle::get::<SyncModuleRec, _>(m) }
}

/// Borrows a wait-context record.
///
/// # Safety
/// `c` must be NULL or a live handle of this mock.
pub(crate) unsafe fn get_context<'a>(c: NvSciSyncCpuWaitContext) -> Res<&'a WaitContextRec> {
    // SAFETY: forwarded contract.
    unsafe { handle::get::<WaitContextRec, _>(c) }
}

pub(crate) unsafe extern "C" fn module_open(out: *mut NvSciSyncModule) -> NvSciError {
    guard("NvSciSyncModuleOpen", || {
        non_null(out)?;
        let ledger = Ledger::new_module();
        let rec = Box::new(SyncModuleRec {
            magic: SyncModuleRec::MAGIC,
            _count: ledger.track(Kind::Module),
            shared: Arc::new(SyncModuleShared { ledger }),
        });
        // SAFETY: `out` is non-NULL caller storage for a handle.
        unsafe { write_out(out, handle::into_handle(rec)) }
    })
}

pub(crate) unsafe extern "C" fn module_close(module: NvSciSyncModule) {
    // SAFETY: `module` is NULL or a module handle of this mock; closing consumes it.
    guard_void(|| drop(unsafe { handle::take::<SyncModuleRec, _>(module) }));
}

pub(crate) unsafe extern "C" fn check_version(major: u32, minor: u32, compatible: *mut bool) -> NvSciError {
    guard("NvSciSyncCheckVersionCompatibility", || {
        let ok = major == NVSCI_SYS_SYNC_MAJOR_VERSION && minor <= MINOR_VERSION;
        // SAFETY: `compatible` is NULL (rejected) or points to a caller bool.
        unsafe { write_out(compatible, ok) }
    })
}

pub(crate) unsafe extern "C" fn wait_context_alloc(
    module: NvSciSyncModule,
    out: *mut NvSciSyncCpuWaitContext,
) -> NvSciError {
    guard("NvSciSyncCpuWaitContextAlloc", || {
        // SAFETY: `module` is NULL or a live module handle of this mock.
        let m = unsafe { get(module) }?;
        non_null(out)?;
        let rec = Box::new(WaitContextRec {
            magic: WaitContextRec::MAGIC,
            module: m.shared.clone(),
            _count: m.shared.ledger.track(Kind::WaitContext),
        });
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, handle::into_handle(rec)) }
    })
}

pub(crate) unsafe extern "C" fn wait_context_free(context: NvSciSyncCpuWaitContext) {
    // SAFETY: `context` is NULL or a wait-context handle of this mock; freeing consumes it.
    guard_void(|| drop(unsafe { handle::take::<WaitContextRec, _>(context) }));
}
