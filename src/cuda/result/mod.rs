//! The CUDA result layer: one thin `unsafe fn` per driver entry point the crate calls that
//! cudarc's `driver::result` does not offer, taking typed raw arguments and returning
//! [`Result`](crate::Result), with a `# Safety` section stating the driver API's contract
//! (cudarc's `driver/result.rs` is the model, and its functions are used where they exist with
//! the same semantics: streams, events, `cuInit`, `cuDestroyExternalMemory`, mapped buffers and
//! their `cuMemFree`). The safe types of `src/cuda` build their handles, ownership, teardown and
//! error explanations on these functions and call the driver nowhere else.
//!
//! A status other than `CUDA_SUCCESS` is [`CudaError::Call`] naming the entry
//! point as `cuda.h` names it (without a `_v2` suffix) and the code as the driver names it;
//! [`cu`] names a cudarc error the same way.
//!
//! One room per area: [`driver`] (version, initialisation, entry-point lookup), [`memory`]
//! (external memory, CUDA arrays, copies, surfaces, page-locked host memory), [`semaphore`]
//! (external semaphores and stream memory operations) and [`vmm`] (the virtual-memory API).

pub(crate) mod driver;
pub(crate) mod memory;
pub(crate) mod semaphore;
pub(crate) mod vmm;

use crate::error::{CudaError, Error, Result};
use cudarc::driver::{sys, DriverError};
use std::ffi::{c_char, CStr};
use std::sync::OnceLock;

/// `CUDA_ERROR_NOT_SUPPORTED`: what desktop drivers answer for NvSciBuf/NvSciSync imports.
pub const CUDA_ERROR_NOT_SUPPORTED: u32 = 801;

/// What [`name`] says for a code the driver does not name (or without a driver).
pub(crate) const UNNAMED: &str = "unnamed CUresult";

/// `CUresult cuGetErrorName(CUresult error, const char **pStr)`, with the code read as `u32` so
/// that a code outside cudarc's enum stays representable.
type GetErrorName = unsafe extern "C" fn(u32, *mut *const c_char) -> u32;

/// `cuGetErrorName` from the driver library cudarc loaded (never another file), when there is one.
fn get_error_name() -> Option<GetErrorName> {
    static CELL: OnceLock<Option<GetErrorName>> = OnceLock::new();
    *CELL.get_or_init(|| {
        if !super::driver::driver_present() {
            return None;
        }
        // SAFETY: the driver library is present, so cudarc's loader does not panic; the symbol,
        // exported by every CUDA driver since 6.0, has the signature above (CUresult is a 32-bit
        // enum), and cudarc keeps the library loaded for the life of the process.
        unsafe { sys::culib().get::<GetErrorName>(b"cuGetErrorName\0") }.ok().map(|s| *s)
    })
}

/// The driver's name of a `CUresult` (`cuGetErrorName`), or [`UNNAMED`].
pub(crate) fn name(code: u32) -> &'static str {
    let Some(f) = get_error_name() else { return UNNAMED };
    let mut p: *const c_char = core::ptr::null();
    // SAFETY: a valid out-pointer; the driver answers CUDA_ERROR_INVALID_VALUE (and leaves or
    // sets NULL) for a code it does not know.
    if unsafe { f(code, &mut p) } != 0 || p.is_null() {
        return UNNAMED;
    }
    // SAFETY: the driver returns a NUL-terminated string in its own static storage, which stays
    // valid while the library is loaded: for the life of the process (above).
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or(UNNAMED)
}

/// Converts a raw `CUresult`.
pub(crate) fn check(function: &'static str, r: sys::CUresult) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        let code = r as u32;
        Err(Error::Cuda(CudaError::Call { function, code, name: name(code) }))
    }
}

/// Converts a cudarc error.
pub(crate) fn from_driver(function: &'static str, e: DriverError) -> Error {
    let code = e.0 as u32;
    Error::Cuda(CudaError::Call { function, code, name: name(code) })
}

/// The error of cudarc's call of `function`, for `map_err` after a `cudarc::driver::result`
/// function (the function named as `cuda.h` names it).
pub(crate) fn cu(function: &'static str) -> impl FnOnce(DriverError) -> Error {
    move |e| from_driver(function, e)
}

/// cudarc's errors become [`CudaError::Call`], so code mixing cudarc calls with the crate's keeps `?`
/// (the failing function is not known here: `function` reads "a CUDA driver call").
impl From<DriverError> for Error {
    fn from(e: DriverError) -> Self {
        from_driver("a CUDA driver call", e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names are the driver's: CUDA's documented codes under their `cuda.h` names, and an
    /// unknown code is not named.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn codes_are_named_by_the_driver() {
        if get_error_name().is_none() {
            use crate::test_require::{skip, Capability};
            return skip(&[Capability::Gpu], "no CUDA driver");
        }
        assert_eq!(name(0), "CUDA_SUCCESS");
        assert_eq!(name(1), "CUDA_ERROR_INVALID_VALUE");
        assert_eq!(name(400), "CUDA_ERROR_INVALID_HANDLE");
        assert_eq!(name(CUDA_ERROR_NOT_SUPPORTED), "CUDA_ERROR_NOT_SUPPORTED");
        assert_eq!(name(909), "CUDA_ERROR_TIMEOUT");
        assert_eq!(name(123_456), UNNAMED);
    }

    /// A cudarc error converts with `?`, keeping its code.
    #[test]
    fn cudarc_errors_convert() {
        fn fails() -> Result<()> {
            Err(DriverError(sys::CUresult::CUDA_ERROR_INVALID_VALUE))?;
            Ok(())
        }
        assert!(matches!(fails(), Err(Error::Cuda(CudaError::Call { code: 1, .. }))));
    }

    /// Without a driver nothing is named, and nothing panics.
    #[test]
    fn without_a_driver_codes_are_unnamed() {
        if super::super::driver::driver_present() {
            return;
        }
        assert_eq!(name(1), UNNAMED);
        assert_eq!(check("cuTest", sys::CUresult::CUDA_SUCCESS).ok(), Some(()));
        match check("cuTest", sys::CUresult::CUDA_ERROR_INVALID_VALUE) {
            Err(Error::Cuda(CudaError::Call { function: "cuTest", code: 1, name })) => {
                assert_eq!(name, UNNAMED)
            }
            other => panic!("{other:?}"),
        }
    }
}
