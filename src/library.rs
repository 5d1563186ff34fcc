//! The loaded NvSci implementation: real libraries or the mock, behind the same function tables.

use crate::error::Result;
use nvsci_sys::loader::NvSciLibraries;
use nvsci_sys::{NvSciBufFns, NvSciHostGpuFns, NvSciSyncFns};
use std::path::PathBuf;
use std::sync::Arc;

/// Which implementation a [`NvSci`] handle talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Implementation {
    /// NVIDIA's `libnvscibuf.so.1` / `libnvscisync.so.1` (Jetson, DRIVE OS).
    Native,
    /// The in-process emulation (CPU-only tests, desktops); on a desktop CUDA GPU its objects
    /// reach the GPU through host memory (see [`GpuInterop::HostMemory`]).
    Mock,
}

/// How an implementation's buffers and sync objects reach a CUDA GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuInterop {
    /// CUDA imports the NvSci handles themselves (`cuImportExternalMemory` with the NvSciBuf
    /// handle type, `cuImportExternalSemaphore` with NvSciSync): NVIDIA's libraries on Tegra.
    /// Desktop drivers refuse these imports.
    NvSciImport,
    /// Buffers are page-aligned host memory that CUDA page-locks and maps in place
    /// (`cuMemHostRegister`), and every sync object is a 64-bit counter that CUDA streams wait
    /// on and write (`cuStreamWaitValue64` / `cuStreamWriteValue64`), like a Tegra syncpoint:
    /// an emulation (the mock) on any CUDA GPU.
    HostMemory,
}

pub(crate) struct Inner {
    pub(crate) buf: NvSciBufFns,
    pub(crate) sync: NvSciSyncFns,
    pub(crate) implementation: Implementation,
    pub(crate) host_gpu: NvSciHostGpuFns,
    // Keeps the shared objects mapped while any table copy may be called.
    libs: Option<NvSciLibraries>,
}

/// A loaded NvSci implementation. Cheap to clone; every module, list and object keeps one, so the
/// libraries stay loaded until the last of them is dropped.
#[derive(Clone)]
pub struct NvSci(pub(crate) Arc<Inner>);

impl std::fmt::Debug for NvSci {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvSci")
            .field("implementation", &self.0.implementation)
            .field("libraries", &self.0.libs)
            .finish()
    }
}

impl NvSci {
    /// Loads the NvSci libraries from `NVSCI_LIB_DIR`, the JetPack 6/7 and JetPack 5 library
    /// directories, then the default search path.
    ///
    /// Never panics: a missing library gives [`Error::Load`](crate::Error::Load) listing every path tried.
    pub fn load() -> Result<Self> {
        Ok(Self::from_libraries(nvsci_sys::loader::load()?))
    }

    /// Loads the NvSci libraries from `dirs` only (no default search path).
    ///
    /// # Safety
    /// Loading runs the libraries' initialisers, and their functions are trusted to be NvSci's:
    /// every `libnvscibuf.so.1` / `libnvscisync.so.1` in `dirs` must be NVIDIA's NvSci library (or
    /// an implementation of the same C API) whose initialisers are sound to run in this process,
    /// as for `ash::Entry::load_from`. [`load`](Self::load), which searches only the documented
    /// locations, is safe.
    pub unsafe fn load_from_dirs(dirs: &[PathBuf]) -> Result<Self> {
        // SAFETY: forwarded contract.
        Ok(Self::from_libraries(unsafe { nvsci_sys::loader::load_from(dirs, false) }?))
    }

    /// Wraps libraries opened by `nvsci_sys::loader`.
    pub fn from_libraries(libs: NvSciLibraries) -> Self {
        Self(Arc::new(Inner {
            buf: *libs.buf(),
            sync: *libs.sync(),
            implementation: Implementation::Native,
            host_gpu: NvSciHostGpuFns::EMPTY,
            libs: Some(libs),
        }))
    }

    /// The in-process NvSci emulation (feature `mock`).
    #[cfg(feature = "mock")]
    pub fn mock() -> Self {
        Self(Arc::new(Inner {
            buf: nvsci_mock::buf_fns(),
            sync: nvsci_mock::sync_fns(),
            implementation: Implementation::Mock,
            host_gpu: nvsci_mock::host_gpu_fns(),
            libs: None,
        }))
    }

    /// Which implementation this is.
    pub fn implementation(&self) -> Implementation {
        self.0.implementation
    }

    /// How this implementation's objects reach a CUDA GPU, asked of the implementation (an
    /// emulation that offers every host-memory entry point answers [`GpuInterop::HostMemory`]).
    pub fn gpu_interop(&self) -> GpuInterop {
        if self.0.host_gpu.is_complete() {
            GpuInterop::HostMemory
        } else {
            GpuInterop::NvSciImport
        }
    }

    pub(crate) fn host_gpu(&self) -> &NvSciHostGpuFns {
        &self.0.host_gpu
    }

    /// Paths the native libraries were loaded from (`None` for the mock).
    pub fn library_paths(&self) -> Option<(&str, &str)> {
        self.0.libs.as_ref().map(|l| (l.buf_path.as_str(), l.sync_path.as_str()))
    }

    pub(crate) fn buf(&self) -> &NvSciBufFns {
        &self.0.buf
    }

    pub(crate) fn sync(&self) -> &NvSciSyncFns {
        &self.0.sync
    }
}
