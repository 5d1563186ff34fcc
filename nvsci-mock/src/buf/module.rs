//! NvSciBuf modules and version check.

use crate::ffi::{guard, guard_void, write_out};
use crate::handle::{self, Record};
use crate::ledger::{Counted, Kind, Ledger};
use nvsci_sys::*;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The NvSciBuf minor version this mock implements (major 2).
pub(crate) const MINOR_VERSION: u32 = 11;

/// State shared by a module and everything created under it; it outlives the module handle
/// while any list or object still refers to it.
#[derive(Debug)]
pub(crate) struct BufModuleShared {
    pub ledger: Ledger,
    /// Value of CpuNeedSwCacheCoherency for lists reconciled from now on.
    pub cpu_sw_coherency: AtomicBool,
}

impl BufModuleShared {
    /// What reconciliation needs from the module's settings now.
    pub(crate) fn env(&self) -> super::reconcile::Env {
        super::reconcile::Env {
            cpu_sw_coherency: self.cpu_sw_coherency.load(std::sync::atomic::Ordering::SeqCst),
            integrated_gpus: super::reconcile::INTEGRATED_GPUS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

/// The record behind an `NvSciBufModule`.
#[repr(C)]
pub(crate) struct BufModuleRec {
    magic: u64,
    pub shared: Arc<BufModuleShared>,
    _count: Counted,
}

// SAFETY: repr(C) with the magic first.
unsafe impl Record for BufModuleRec {
    const MAGIC: u64 = 0x4e56_4255_464d_4f44; // "NVBUFMOD"
}

pub(crate) unsafe extern "C" fn module_open(out: *mut NvSciBufModule) -> NvSciError {
    guard("NvSciBufModuleOpen", || {
        if out.is_null() {
            return Err(NvSciError_BadParameter);
        }
        let ledger = Ledger::new_module();
        let rec = Box::new(BufModuleRec {
            magic: BufModuleRec::MAGIC,
            _count: ledger.track(Kind::Module),
            shared: Arc::new(BufModuleShared { ledger, cpu_sw_coherency: AtomicBool::new(false) }),
        });
        // SAFETY: `out` is non-NULL and points to caller storage for a handle.
        unsafe { write_out(out, handle::into_handle(rec)) }
    })
}

pub(crate) unsafe extern "C" fn module_close(module: NvSciBufModule) {
    // SAFETY: `module` is NULL or a module handle of this mock; closing consumes it.
    guard_void(|| drop(unsafe { handle::take::<BufModuleRec, _>(module) }));
}

pub(crate) unsafe extern "C" fn check_version(major: u32, minor: u32, compatible: *mut bool) -> NvSciError {
    guard("NvSciBufCheckVersionCompatibility", || {
        let ok = major == NVSCI_SYS_BUF_MAJOR_VERSION && minor <= MINOR_VERSION;
        // SAFETY: `compatible` is NULL (rejected) or points to a caller bool.
        unsafe { write_out(compatible, ok) }
    })
}

/// Borrows a module record.
///
/// # Safety
/// `m` must be NULL or a live handle of this mock.
pub(crate) unsafe fn get<'a>(m: NvSciBufModule) -> crate::ffi::Res<&'a BufModuleRec> {
    // SAFETY: forwarded contract.
    unsafe { handle::get::<BufModuleRec, _>(m) }
}
