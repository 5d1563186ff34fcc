//! The loaded NvSciIpc implementation: NVIDIA's `libnvsciipc.so` or the mock.

use crate::error::{check, Result};
use nvsci_sys::loader::NvSciIpcLibrary;
use nvsci_sys::NvSciIpcFns;
use std::sync::Arc;

pub(crate) struct IpcInner {
    pub(crate) fns: NvSciIpcFns,
    pub(crate) mock: bool,
    // Keeps the shared object mapped while any table copy may be called.
    _lib: Option<NvSciIpcLibrary>,
}

impl Drop for IpcInner {
    fn drop(&mut self) {
        if let Some(deinit) = self.fns.NvSciIpcDeinit {
            // SAFETY: balances the NvSciIpcInit made when this value was created; every endpoint
            // holds this value, so none is open any more.
            unsafe { deinit() };
        }
    }
}

/// An initialised NvSciIpc (`NvSciIpcInit` on creation, `NvSciIpcDeinit` when the last clone and
/// the last endpoint opened through it are gone). Cheap to clone.
#[derive(Clone)]
pub struct Ipc(pub(crate) Arc<IpcInner>);

impl std::fmt::Debug for Ipc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ipc").field("mock", &self.0.mock).field("library", &self.0._lib).finish()
    }
}

impl Ipc {
    /// Loads `libnvsciipc.so` from `NVSCI_LIB_DIR`, the JetPack directories and the default
    /// search path, and initialises it.
    pub fn load() -> Result<Self> {
        let lib = nvsci_sys::loader::load_ipc()?;
        Self::init(*lib.fns(), false, Some(lib))
    }

    /// Loads NvSciIpc from `dirs` only (no default search path).
    ///
    /// # Safety
    /// As for [`crate::NvSci::load_from_dirs`]: every `libnvsciipc.so` / `libnvsciipc.so.1` in
    /// `dirs` must be NVIDIA's NvSciIpc (or an implementation of the same C API) whose
    /// initialisers are sound to run in this process.
    pub unsafe fn load_from_dirs(dirs: &[std::path::PathBuf]) -> Result<Self> {
        // SAFETY: forwarded contract.
        let lib = unsafe { nvsci_sys::loader::load_ipc_from(dirs, false) }?;
        Self::init(*lib.fns(), false, Some(lib))
    }

    /// The mock's NvSciIpc (feature `mock`): endpoints configured in
    /// `$NVSCI_MOCK_IPC_DIR/nvsciipc.cfg` (see `nvsci_mock::ipc::config`), connected through Unix
    /// domain sockets in that directory.
    #[cfg(feature = "mock")]
    pub fn mock() -> Result<Self> {
        Self::init(nvsci_mock::ipc_fns(), true, None)
    }

    fn init(fns: NvSciIpcFns, mock: bool, lib: Option<NvSciIpcLibrary>) -> Result<Self> {
        let init = crate::library::nvfn!(fns, NvSciIpcInit);
        // SAFETY: NvSciIpcInit takes no arguments; it is balanced by Deinit in `IpcInner::drop`,
        // which only runs once the init succeeded (the value is built after the check).
        check("NvSciIpcInit", unsafe { init() })?;
        Ok(Self(Arc::new(IpcInner { fns, mock, _lib: lib })))
    }

    /// Whether this is the mock's emulation.
    pub fn is_mock(&self) -> bool {
        self.0.mock
    }

    /// The NvSciIpc matching an NvSci implementation: the mock's for [`crate::NvSci::mock`],
    /// NVIDIA's library otherwise (descriptors only import through the implementation that
    /// exported them).
    pub fn for_library(lib: &crate::NvSci) -> Result<Self> {
        match lib.implementation() {
            #[cfg(feature = "mock")]
            crate::Implementation::Mock => Self::mock(),
            _ => Self::load(),
        }
    }
}
