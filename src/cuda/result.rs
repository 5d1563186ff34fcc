//! CUDA status codes to [`Error`](crate::Error).

use crate::error::{Error, Result};
use cudarc::driver::{sys, DriverError};

/// `CUDA_ERROR_NOT_SUPPORTED`: what desktop drivers answer for NvSciBuf/NvSciSync imports.
pub const CUDA_ERROR_NOT_SUPPORTED: u32 = 801;

/// Name of a `CUresult` this crate cares about.
pub(crate) fn name(code: u32) -> &'static str {
    match code {
        0 => "CUDA_SUCCESS",
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        4 => "CUDA_ERROR_DEINITIALIZED",
        100 => "CUDA_ERROR_NO_DEVICE",
        101 => "CUDA_ERROR_INVALID_DEVICE",
        201 => "CUDA_ERROR_INVALID_CONTEXT",
        304 => "CUDA_ERROR_OPERATING_SYSTEM",
        400 => "CUDA_ERROR_INVALID_HANDLE",
        500 => "CUDA_ERROR_NOT_FOUND",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        801 => "CUDA_ERROR_NOT_SUPPORTED",
        909 => "CUDA_ERROR_TIMEOUT",
        _ => "unnamed CUresult",
    }
}

/// Converts a raw `CUresult`.
pub(crate) fn check(function: &'static str, r: sys::CUresult) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        let code = r as u32;
        Err(Error::Cuda { function, code, name: name(code) })
    }
}

/// Converts a cudarc error.
pub(crate) fn from_driver(function: &'static str, e: DriverError) -> Error {
    let code = e.0 as u32;
    Error::Cuda { function, code, name: name(code) }
}
