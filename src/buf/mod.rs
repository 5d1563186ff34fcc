//! NvSciBuf: modules, attribute lists, reconciliation and buffer objects.

mod attr_list;
pub mod keys;
mod obj;
mod pixels;
mod types;

pub use crate::attr_list::{MAX_LISTS, MAX_PAIRS};
pub use attr_list::{BufAttrList, BufAttrListRef, BufFamily};
pub use keys::{key, key_name, BufAttr};
pub use obj::{BufObj, CpuRead, CpuWrite, PlaneLayout};
pub use pixels::{PixelPlane, PixelPlaneKind, PixelRect, PlaneDst, PlaneSrc, SplitChroma};
pub use types::*;

use crate::error::Result;
use crate::library::{Implementation, NvSci};
use crate::result::buf as nvbuf;
use std::sync::Arc;

pub(crate) struct ModuleInner {
    pub(crate) raw: nvsci_sys::NvSciBufModule,
    pub(crate) lib: NvSci,
}

// SAFETY: an NvSciBufModule is a process-wide handle that the library documents as usable from
// any thread (module functions are thread-safe); the Rust side never mutates it after creation.
unsafe impl Send for ModuleInner {}
// SAFETY: as above; shared references only pass the handle to thread-safe library calls.
unsafe impl Sync for ModuleInner {}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        // SAFETY: `raw` came from NvSciBufModuleOpen and is closed exactly once; every list and
        // object created under it holds this `Arc`, so none outlives the module. A library
        // without the entry point leaves it open (nothing else can be done in a drop).
        let _ = unsafe { nvbuf::module_close(self.lib.buf(), self.raw) };
    }
}

/// An open NvSciBuf module: the root of every attribute list and buffer object.
///
/// Cheap to clone (reference counted); lists and objects keep it open.
#[derive(Clone)]
pub struct BufModule(pub(crate) Arc<ModuleInner>);

impl std::fmt::Debug for BufModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufModule")
            .field("implementation", &self.0.lib.implementation())
            .finish_non_exhaustive()
    }
}

impl BufModule {
    /// Opens a module on a loaded implementation.
    pub fn open(lib: &NvSci) -> Result<Self> {
        // SAFETY: the table is the loaded library's; the module is closed once, by
        // `ModuleInner::drop`, after everything bound to it (each holds the `Arc`).
        let raw = unsafe { nvbuf::module_open(lib.buf()) }?;
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
    pub fn attr_list(&self) -> Result<BufAttrList> {
        BufAttrList::new(self)
    }

    /// The raw handle (valid while this module or anything created from it lives).
    pub fn as_raw(&self) -> nvsci_sys::NvSciBufModule {
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
        unsafe { nvsci_mock::buf_module_ledger(self.0.raw) }
    }
}
