//! CUDA's NvSciSync attributes (`cuDeviceGetNvSciSyncAttributes`), resolved at run time because
//! cudarc does not bind it.

use super::device::{driver_present, CudaDevice};
use super::result::name;
use crate::error::{Error, Result};
use crate::sync::SyncAttrList;
use std::sync::OnceLock;

type GetNvSciSyncAttributes = unsafe extern "C" fn(*mut core::ffi::c_void, i32, i32) -> u32;

/// CUDA will signal the sync object.
pub const CUDA_NVSCISYNC_ATTR_SIGNAL: i32 = 0x1;
/// CUDA will wait on the sync object.
pub const CUDA_NVSCISYNC_ATTR_WAIT: i32 = 0x2;

struct Resolved {
    _lib: libloading::Library,
    f: GetNvSciSyncAttributes,
}

fn resolve() -> Option<&'static Resolved> {
    static CELL: OnceLock<Option<Resolved>> = OnceLock::new();
    CELL.get_or_init(|| {
        if !driver_present() {
            return None;
        }
        // SAFETY: opening the driver library runs no code beyond its initialisers.
        let lib = unsafe { libloading::Library::new("libcuda.so.1") }
            .or_else(|_| unsafe { libloading::Library::new("libcuda.so") })
            .ok()?;
        // SAFETY: the documented signature is
        // CUresult cuDeviceGetNvSciSyncAttributes(void*, CUdevice, int); CUresult is a 32-bit
        // enum read here as u32 so unknown codes stay representable.
        let f = unsafe { lib.get::<GetNvSciSyncAttributes>(b"cuDeviceGetNvSciSyncAttributes\0") }
            .ok()
            .map(|s| *s)?;
        Some(Resolved { _lib: lib, f })
    })
    .as_ref()
}

/// Whether the driver exports `cuDeviceGetNvSciSyncAttributes`.
pub fn nvsci_sync_attrs_available() -> bool {
    resolve().is_some()
}

/// Fills an unreconciled NvSciSync list with what CUDA needs to signal and/or wait
/// (RequiredPerm, primitive info, GPU id). The list must not have RequiredPerm set yet.
pub fn fill_sync_attrs(dev: &CudaDevice, list: &mut SyncAttrList, signal: bool, wait: bool) -> Result<()> {
    if !signal && !wait {
        return Err(crate::error::invalid("signal/wait", "at least one must be true"));
    }
    let flags =
        if signal { CUDA_NVSCISYNC_ATTR_SIGNAL } else { 0 } | if wait { CUDA_NVSCISYNC_ATTR_WAIT } else { 0 };
    if let Some(fill) = list.module().library().host_gpu().SyncAttrListFillGpu {
        // An emulation whose sync objects are host counters fills its own lists the way the
        // Tegra driver does.
        let gpu = nvsci_sys::NvSciRmGpuId { bytes: dev.gpu_id().0 };
        // SAFETY: the list is a live, unreconciled list of that implementation; `gpu` is a
        // valid GPU id for the call.
        let code = unsafe { fill(list.as_raw(), &gpu, flags) };
        return crate::error::check("SyncAttrListFillGpu", code);
    }
    let r = resolve().ok_or(Error::Unsupported {
        what: "cuDeviceGetNvSciSyncAttributes",
        reason: "the CUDA driver does not export it (NvSci interop needs a Jetson/DRIVE driver)",
    })?;
    dev.bind()?;
    // SAFETY: the list is a live, unreconciled NvSciSyncAttrList of NVIDIA's library (emulated
    // lists were filled above) and the device is the context's device.
    let code = unsafe { (r.f)(list.as_raw() as *mut _, dev.context().cu_device(), flags) };
    if code != 0 {
        return Err(Error::Cuda { function: "cuDeviceGetNvSciSyncAttributes", code, name: name(code) });
    }
    Ok(())
}

/// Calls `cuDeviceGetNvSciSyncAttributes` with a NULL list: a present, working entry point
/// answers `CUDA_ERROR_INVALID_HANDLE` (400). Used to prove the symbol resolves and is callable.
pub fn probe_sync_attrs_entry(dev: &CudaDevice) -> Result<u32> {
    let r = resolve().ok_or(Error::Unsupported {
        what: "cuDeviceGetNvSciSyncAttributes",
        reason: "the CUDA driver does not export it",
    })?;
    dev.bind()?;
    // SAFETY: a NULL list is explicitly rejected by the driver with INVALID_HANDLE.
    Ok(unsafe { (r.f)(core::ptr::null_mut(), dev.context().cu_device(), CUDA_NVSCISYNC_ATTR_SIGNAL) })
}
