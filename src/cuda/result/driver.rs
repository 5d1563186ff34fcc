//! The driver itself: its version and the lookup of entry points cudarc does not bind
//! (`cuInit` is cudarc's `result::init`).

use super::check;
use crate::error::Result;
use core::ffi::{c_void, CStr};
use cudarc::driver::sys;

/// `cuDriverGetVersion`: the CUDA version of the installed driver (e.g. 12060).
///
/// # Safety
/// The driver library is present (`driver_present`), so cudarc's loader does not panic. The
/// call needs no `cuInit` ("this function ... does not require the driver to be initialised",
/// cuda.h) and only writes its out-pointer.
// Builds for CUDA 11.4 and 11.5 check no driver version.
#[cfg(not(any(feature = "cuda-11040", feature = "cuda-11050")))]
pub(crate) unsafe fn driver_get_version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: caller contract; `v` is a valid out-pointer.
    check("cuDriverGetVersion", unsafe { sys::cuDriverGetVersion(&mut v) })?;
    Ok(v)
}

/// `cuGetProcAddress` as CUDA 11.3 to 11.8 define it (no symbol status; cudarc binds the `_v2`
/// form, new in CUDA 12.0, only from its 12.0 bindings on), with flags 0
/// (`CU_GET_PROC_ADDRESS_DEFAULT`): the address of `symbol` in the ABI of CUDA `version`, which
/// may be NULL where the driver has none.
///
/// # Safety
/// The driver library is present and initialised (`cuInit`). The address returned must be
/// called only with the signature `cuda.h` documents for `symbol` at `version`.
#[cfg(any(
    feature = "cuda-11040",
    feature = "cuda-11050",
    feature = "cuda-11060",
    feature = "cuda-11070",
    feature = "cuda-11080"
))]
pub(crate) unsafe fn get_proc_address(symbol: &CStr, version: i32) -> Result<*mut c_void> {
    let mut pfn = core::ptr::null_mut();
    // SAFETY: a NUL-terminated symbol name and a valid out-pointer; caller contract otherwise.
    check("cuGetProcAddress", unsafe { sys::cuGetProcAddress(symbol.as_ptr(), &mut pfn, version, 0) })?;
    Ok(pfn)
}

/// `cuGetProcAddress_v2` (CUDA 12.0 and newer), with flags 0 (`CU_GET_PROC_ADDRESS_DEFAULT`):
/// the address of `symbol` in the ABI of CUDA `version` and the driver's status of the symbol
/// (the address is only meaningful with `CU_GET_PROC_ADDRESS_SUCCESS`).
///
/// # Safety
/// The driver library is present, initialised (`cuInit`) and exports the `_v2` entry point (a
/// 12.0 driver or newer: cudarc panics on a missing symbol). The address returned must be called
/// only with the signature `cuda.h` documents for `symbol` at `version`.
#[cfg(not(any(
    feature = "cuda-11040",
    feature = "cuda-11050",
    feature = "cuda-11060",
    feature = "cuda-11070",
    feature = "cuda-11080"
)))]
pub(crate) unsafe fn get_proc_address(
    symbol: &CStr,
    version: i32,
) -> Result<(*mut c_void, sys::CUdriverProcAddressQueryResult)> {
    let mut pfn = core::ptr::null_mut();
    let mut status = sys::CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    // SAFETY: a NUL-terminated symbol name and valid out-pointers; caller contract otherwise.
    check("cuGetProcAddress", unsafe {
        sys::cuGetProcAddress_v2(symbol.as_ptr(), &mut pfn, version, 0, &mut status)
    })?;
    Ok((pfn, status))
}

/// `CUresult cuDeviceGetNvSciSyncAttributes(void *nvSciSyncAttrList, CUdevice dev, int flags)`
/// as resolved through [`get_proc_address`] (cudarc does not bind it), with the `CUresult` read
/// as `u32` so that a code outside cudarc's enum stays representable.
pub(crate) type GetNvSciSyncAttributes = unsafe extern "C" fn(*mut c_void, sys::CUdevice, i32) -> u32;

/// `cuDeviceGetNvSciSyncAttributes` through `f`: fills `list` with what `device` needs to signal
/// (`flags` 1) and/or wait (`flags` 2) on an NvSciSync object.
///
/// # Safety
/// `f` is the driver's `cuDeviceGetNvSciSyncAttributes`; `list` is a live, unreconciled
/// NvSciSyncAttrList of NVIDIA's library, not used elsewhere during the call (one whose
/// `NvSciSyncAttrKey_RequiredPerm` is set already is refused with an error) (NULL is allowed: the driver refuses it with
/// `CUDA_ERROR_INVALID_HANDLE`); `device` is the current context's device.
pub(crate) unsafe fn device_get_nvsci_sync_attributes(
    f: GetNvSciSyncAttributes,
    list: *mut c_void,
    device: sys::CUdevice,
    flags: i32,
) -> Result<()> {
    // SAFETY: caller contract.
    let code = unsafe { f(list, device, flags) };
    if code != 0 {
        return Err(crate::Error::Cuda(crate::error::CudaError::Call {
            function: "cuDeviceGetNvSciSyncAttributes",
            code,
            name: super::name(code),
        }));
    }
    Ok(())
}
