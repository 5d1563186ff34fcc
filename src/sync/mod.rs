//! NvSciSync: modules, attribute lists, sync objects, fences and CPU waits.

mod attr_list;
mod fence;
pub mod keys;
mod obj;

pub use attr_list::{SyncAttrList, SyncAttrListRef, SyncFamily};
pub use fence::{wait_all, CpuWaitContext, Fence, FenceList};
pub use keys::{key, PrimitiveType, SyncAttr, SyncPerm};
pub use obj::SyncObj;

use crate::error::Result;
use crate::library::{Implementation, NvSci};
use crate::result::sync as nvsync;
use std::sync::Arc;

pub(crate) struct ModuleInner {
    pub(crate) raw: nvsci_sys::NvSciSyncModule,
    pub(crate) lib: NvSci,
}

// SAFETY: an NvSciSyncModule is a process-wide handle; the library documents its module-level
// functions as thread-safe and the Rust side never mutates the handle.
unsafe impl Send for ModuleInner {}
// SAFETY: as above.
unsafe impl Sync for ModuleInner {}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        // SAFETY: `raw` came from NvSciSyncModuleOpen and is closed once, after every list,
        // object and wait context (each holds this `Arc`).
        let _ = unsafe { nvsync::module_close(self.lib.sync(), self.raw) };
    }
}

/// An open NvSciSync module. Cheap to clone; lists, objects and wait contexts keep it open.
#[derive(Clone)]
pub struct SyncModule(pub(crate) Arc<ModuleInner>);

impl std::fmt::Debug for SyncModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncModule")
            .field("implementation", &self.0.lib.implementation())
            .finish_non_exhaustive()
    }
}

impl SyncModule {
    /// Opens a module on a loaded implementation.
    pub fn open(lib: &NvSci) -> Result<Self> {
        // SAFETY: the table is the loaded library's; the module is closed once, by
        // `ModuleInner::drop`, after everything bound to it (each holds the `Arc`).
        let raw = unsafe { nvsync::module_open(lib.sync()) }?;
        Ok(Self(Arc::new(ModuleInner { raw, lib: lib.clone() })))
    }

    /// The implementation this module belongs to.
    pub fn implementation(&self) -> Implementation {
        self.0.lib.implementation()
    }

    /// The loaded implementation.
    pub fn library(&self) -> &NvSci {
        &self.0.lib
    }

    /// Creates an empty, unreconciled attribute list.
    pub fn attr_list(&self) -> Result<SyncAttrList> {
        SyncAttrList::new(self)
    }

    /// Allocates a CPU wait context (one per waiting thread).
    pub fn cpu_wait_context(&self) -> Result<CpuWaitContext> {
        CpuWaitContext::new(self)
    }

    /// The raw handle (valid while this module or anything created from it lives).
    pub fn as_raw(&self) -> nvsci_sys::NvSciSyncModule {
        self.0.raw
    }

    /// Live-handle accounting of a mock module (`None` for a native module).
    #[cfg(feature = "mock")]
    #[cfg_attr(docsrs, doc(cfg(feature = "mock")))]
    pub fn mock_ledger(&self) -> Option<nvsci_mock::Ledger> {
        if self.implementation() != Implementation::Mock {
            return None;
        }
        // SAFETY: the module was opened by the mock (checked above) and is alive (we hold it).
        unsafe { nvsci_mock::sync_module_ledger(self.0.raw) }
    }
}
