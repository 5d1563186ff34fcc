//! CUDA's NvSciSync attributes (`cuDeviceGetNvSciSyncAttributes`), resolved at run time through
//! `cuGetProcAddress` because cudarc does not bind it.

use super::device::CudaGpu;
use super::driver::driver_present;
use super::result::driver::{device_get_nvsci_sync_attributes, GetNvSciSyncAttributes};
use crate::error::{CudaError, Error, Result, UnsupportedReason};
use crate::sync::SyncAttrList;
use std::sync::OnceLock;

/// CUDA will signal the sync object.
pub const CUDA_NVSCISYNC_ATTR_SIGNAL: i32 = 0x1;
/// CUDA will wait on the sync object.
pub const CUDA_NVSCISYNC_ATTR_WAIT: i32 = 0x2;

struct Resolved {
    f: GetNvSciSyncAttributes,
}

/// The CUDA version whose ABI of the function is asked for (`cuDeviceGetNvSciSyncAttributes`
/// exists unchanged since CUDA 10.2; 11.4 is JetPack 5's CUDA).
const PROC_ADDRESS_VERSION: i32 = 11040;

/// `cuGetProcAddress` as CUDA 11.3 to 11.8 define it (no symbol status; cudarc binds the
/// `_v2` form, new in CUDA 12.0, only from its 12.0 bindings on).
#[cfg(any(
    feature = "cuda-11040",
    feature = "cuda-11050",
    feature = "cuda-11060",
    feature = "cuda-11070",
    feature = "cuda-11080"
))]
fn proc_address(symbol: &core::ffi::CStr) -> std::result::Result<*mut core::ffi::c_void, UnsupportedReason> {
    // SAFETY: the driver library is present and initialised (see `resolve`); the address is
    // called only with the documented signature (see `resolve`).
    match unsafe { super::result::driver::get_proc_address(symbol, PROC_ADDRESS_VERSION) } {
        Ok(pfn) if !pfn.is_null() => Ok(pfn),
        _ => Err(UnsupportedReason::CudaEntryPointMissing),
    }
}

/// `cuGetProcAddress_v2` (CUDA 12.0 and newer), refused with a reason on an older driver, which
/// lacks it.
#[cfg(not(any(
    feature = "cuda-11040",
    feature = "cuda-11050",
    feature = "cuda-11060",
    feature = "cuda-11070",
    feature = "cuda-11080"
)))]
fn proc_address(symbol: &core::ffi::CStr) -> std::result::Result<*mut core::ffi::c_void, UnsupportedReason> {
    const SYMBOL_FOUND: cudarc::driver::sys::CUdriverProcAddressQueryResult =
        cudarc::driver::sys::CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS;
    match super::driver::driver_version() {
        Some(v) if v < 12000 => return Err(UnsupportedReason::CudaDriverTooOld { since: 12000 }),
        Some(_) => {}
        None => return Err(UnsupportedReason::CudaDriverVersionUnknown),
    }
    // SAFETY: the driver library is present and initialised (see `resolve`) and exports the
    // `_v2` entry point (CUDA 12.0 or newer, checked above); the address is called only with the
    // documented signature (see `resolve`).
    match unsafe { super::result::driver::get_proc_address(symbol, PROC_ADDRESS_VERSION) } {
        Ok((pfn, status)) if status == SYMBOL_FOUND && !pfn.is_null() => Ok(pfn),
        _ => Err(UnsupportedReason::CudaEntryPointMissing),
    }
}

/// Resolves the function through `cuGetProcAddress` of the driver library cudarc loaded, so it
/// always comes from the same libcuda as every other call (a second `dlopen` could find another
/// file, e.g. a stub earlier on the library path). `Err` says why it is not available.
fn resolve() -> std::result::Result<&'static Resolved, UnsupportedReason> {
    static CELL: OnceLock<std::result::Result<Resolved, UnsupportedReason>> = OnceLock::new();
    CELL.get_or_init(|| {
        if !driver_present() {
            return Err(UnsupportedReason::CudaDriverMissing);
        }
        // cudarc's driver library is present (checked above, so its lazy loader does not panic);
        // cuInit(0) is idempotent and documented as callable at any time.
        if cudarc::driver::result::init().is_err() {
            return Err(UnsupportedReason::CudaInitFailed);
        }
        let pfn = proc_address(c"cuDeviceGetNvSciSyncAttributes")?;
        // SAFETY: the documented signature is
        // CUresult cuDeviceGetNvSciSyncAttributes(void*, CUdevice, int); CUresult is a 32-bit
        // enum read here as u32 so unknown codes stay representable.
        let f = unsafe { core::mem::transmute::<*mut core::ffi::c_void, GetNvSciSyncAttributes>(pfn) };
        Ok(Resolved { f })
    })
    .as_ref()
    .map_err(|reason| *reason)
}

/// Whether the driver exports `cuDeviceGetNvSciSyncAttributes`.
pub fn nvsci_sync_attrs_available() -> bool {
    resolve().is_ok()
}

/// Fills an unreconciled NvSciSync list with what CUDA needs to signal and/or wait
/// (RequiredPerm, primitive info, GPU id). The list must not have RequiredPerm set yet.
pub fn fill_sync_attrs(dev: &CudaGpu, list: &mut SyncAttrList, signal: bool, wait: bool) -> Result<()> {
    if !signal && !wait {
        return Err(crate::error::invalid("signal/wait", "at least one must be true"));
    }
    if wait && list.get_one(crate::sync::key::WAITER_REQUIRE_TIMESTAMPS)? == Some(true) {
        return Err(crate::error::invalid(
            "list",
            "sets WaiterRequireTimestamps, which NvSciSync defines for CPU waiters only; a CUDA waiter's list \
             must not set it",
        ));
    }
    let flags =
        if signal { CUDA_NVSCISYNC_ATTR_SIGNAL } else { 0 } | if wait { CUDA_NVSCISYNC_ATTR_WAIT } else { 0 };
    // An emulation whose sync objects are host counters fills its own lists the way the Tegra
    // driver does.
    let gpu = nvsci_sys::NvSciRmGpuId { bytes: dev.gpu_id().0 };
    let t = list.module().library().host_gpu();
    use crate::result::host_gpu::sync_attr_list_fill_gpu as fill;
    // SAFETY: the list is a live, unreconciled list of that implementation, borrowed mutably;
    // `gpu` is a valid GPU id for the call.
    let filled = unsafe { fill(t, list.as_raw(), &gpu, flags) }?;
    if filled.is_some() {
        return Ok(());
    }
    let r =
        resolve().map_err(|reason| Error::Unsupported { what: "cuDeviceGetNvSciSyncAttributes", reason })?;
    dev.bind()?;
    // SAFETY: the list is a live, unreconciled NvSciSyncAttrList of NVIDIA's library (emulated
    // lists were filled above), `r.f` the driver's entry point (resolved above) and the device
    // the bound context's device.
    unsafe {
        device_get_nvsci_sync_attributes(r.f, list.as_raw() as *mut _, dev.context().cu_device(), flags)
    }
}

/// Calls `cuDeviceGetNvSciSyncAttributes` with a NULL list: a present, working entry point
/// answers `CUDA_ERROR_INVALID_HANDLE` (400). Used to prove the symbol resolves and is callable.
pub fn probe_sync_attrs_entry(dev: &CudaGpu) -> Result<u32> {
    let r =
        resolve().map_err(|reason| Error::Unsupported { what: "cuDeviceGetNvSciSyncAttributes", reason })?;
    dev.bind()?;
    // SAFETY: a NULL list is explicitly rejected by the driver with INVALID_HANDLE; `r.f` is the
    // driver's entry point (resolved above) and the device the bound context's device.
    let r = unsafe {
        device_get_nvsci_sync_attributes(
            r.f,
            core::ptr::null_mut(),
            dev.context().cu_device(),
            CUDA_NVSCISYNC_ATTR_SIGNAL,
        )
    };
    match r {
        Ok(()) => Ok(0),
        Err(Error::Cuda(CudaError::Call { code, .. })) => Ok(code),
        Err(e) => Err(e),
    }
}
