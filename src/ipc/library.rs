//! The loaded NvSciIpc implementation: NVIDIA's `libnvsciipc.so` or the mock.

use crate::error::Result;
use crate::result::ipc as nvipc;
use nvsci_sys::loader::NvSciIpcLibrary;
use nvsci_sys::NvSciIpcFns;
use std::sync::{Arc, Mutex};

/// Users of each NvSciIpc implementation in this process, keyed by the address of its
/// `NvSciIpcInit`: `(key, users, kept)`. nvsciipc.h documents no reference counting: one
/// `NvSciIpcDeinit` ends the library for the whole process, and it requires every endpoint closed
/// first. So the first user initialises, the last one de-initialises unless the application asked
/// to keep the library initialised ([`Ipc::keep_initialised`]; `kept`), and any number of [`Ipc`]
/// values (each holding its endpoints' users) share one initialisation.
static USERS: Mutex<Vec<(usize, usize, bool)>> = Mutex::new(Vec::new());

fn users() -> std::sync::MutexGuard<'static, Vec<(usize, usize, bool)>> {
    USERS.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) struct IpcInner {
    pub(crate) fns: NvSciIpcFns,
    pub(crate) mock: bool,
    // Keeps the shared object mapped while any table copy may be called.
    _lib: Option<NvSciIpcLibrary>,
}

impl Drop for IpcInner {
    fn drop(&mut self) {
        let Some(init) = self.fns.NvSciIpcInit else { return };
        let mut users = users();
        let Some(i) = users.iter().position(|(k, _, _)| *k == init as usize) else { return };
        users[i].1 -= 1;
        // Kept: the application de-initialises (or the process exit does); the entry stays, so
        // a later `Ipc` does not initialise again.
        if users[i].1 > 0 || users[i].2 {
            return;
        }
        users.swap_remove(i);
        // SAFETY: this was the last user of this implementation in the process: every
        // endpoint holds its `Ipc`, so none is open, and the initialisation it balances
        // succeeded (a user is counted only after a successful NvSciIpcInit). The lock is
        // held, so no other thread initialises meanwhile.
        let _ = unsafe { nvipc::deinit(&self.fns) };
    }
}

/// An initialised NvSciIpc. Cheap to clone. `NvSciIpcInit` runs when the process's first `Ipc` of
/// an implementation is created and `NvSciIpcDeinit` once the last one of them, with every
/// endpoint opened through it, is gone: the library counts nothing itself and requires every
/// endpoint of the process closed before `NvSciIpcDeinit` (nvsciipc.h), so values made
/// independently (two libraries of one program, parallel tests) share one initialisation.
///
/// `NvSciIpcDeinit` acts on the whole process: a user of NvSciIpc in the same process that does
/// not go through this crate (a C library, a camera stack) would lose its endpoints when the
/// crate's last `Ipc` goes. Such a program calls [`keep_initialised`](Self::keep_initialised):
/// the crate then never de-initialises that implementation, and de-initialisation is left to the
/// application (or to the process exit).
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
        // The implementation's identity: the address of its NvSciIpcInit.
        let Some(init) = fns.NvSciIpcInit else { return Err(crate::result::missing("NvSciIpcInit")) };
        let mut users = users();
        match users.iter_mut().find(|(k, _, _)| *k == init as usize) {
            Some((_, n, _)) => *n += 1,
            None => {
                // SAFETY: NvSciIpcInit takes no arguments. It runs for the first user of this
                // implementation only (under the lock); `IpcInner::drop` of the last user
                // balances it, and a user is counted only once it succeeded.
                unsafe { nvipc::init(&fns) }?;
                users.push((init as usize, 1, false));
            }
        }
        Ok(Self(Arc::new(IpcInner { fns, mock, _lib: lib })))
    }

    /// Keeps this NvSciIpc implementation initialised for the rest of the process: the crate
    /// will not call `NvSciIpcDeinit` for it when its last `Ipc` goes (nor `NvSciIpcInit` again
    /// for a later one). For programs in which something besides this crate uses NvSciIpc:
    /// `NvSciIpcDeinit` is process-wide and "Before calling this API, the user shall ensure all
    /// existing opened endpoints are closed by NvSciIpcCloseEndpointSafe()" (nvsciipc.h), so the
    /// crate's de-initialisation would end the other user's endpoints. Irreversible; the
    /// application may call `NvSciIpcDeinit` itself at the end, or leave it to the process exit.
    /// Returns `self` for chaining (`Ipc::load()?.keep_initialised()`).
    pub fn keep_initialised(self) -> Self {
        if let Some(init) = self.0.fns.NvSciIpcInit {
            if let Some(entry) = users().iter_mut().find(|(k, _, _)| *k == init as usize) {
                entry.2 = true;
            }
        }
        self
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
