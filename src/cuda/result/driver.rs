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
