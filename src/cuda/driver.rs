//! The installed CUDA driver: whether there is one, and the CUDA version the crate is built for
//! (a `cuda-*` feature) against the driver it runs on.
//!
//! cudarc resolves each driver entry point when it is first called and panics when the driver
//! lacks it. The few entry points this crate calls that are newer than the oldest supported
//! driver are therefore checked here first, so that an old driver gives a typed error that names
//! the feature to build with instead of a panic.

#[cfg(not(any(feature = "cuda-11040", feature = "cuda-11050")))]
use crate::error::{Error, Result};
use cudarc::driver::sys;
#[cfg(not(any(feature = "cuda-11040", feature = "cuda-11050")))]
use std::sync::OnceLock;

/// Whether the CUDA driver library can be opened, checked without touching cudarc's loader
/// (which panics when the library is missing).
pub fn driver_present() -> bool {
    // SAFETY: cudarc's presence check only tries to open and immediately closes the candidate
    // library names; it runs no CUDA code and cannot panic.
    unsafe { sys::is_culib_present() }
}

// Checks before entry points newer than CUDA 11.4; builds for CUDA 11.4 and 11.5 call none.
#[cfg(not(any(feature = "cuda-11040", feature = "cuda-11050")))]
/// The CUDA version of the installed driver (`cuDriverGetVersion`, e.g. 12060), or `None` when
/// no driver library is found or it does not answer.
pub(crate) fn driver_version() -> Option<i32> {
    static CELL: OnceLock<Option<i32>> = OnceLock::new();
    *CELL.get_or_init(|| {
        if !driver_present() {
            return None;
        }
        // SAFETY: the driver library is present (checked above).
        unsafe { super::result::driver::driver_get_version() }.ok()
    })
}

// Checks before entry points newer than CUDA 11.4; builds for CUDA 11.4 and 11.5 call none.
#[cfg(not(any(feature = "cuda-11040", feature = "cuda-11050")))]
/// `Ok` when the driver provides `what`, an entry point introduced in CUDA `since` (e.g. 11070);
/// otherwise [`Error::Unsupported`] with
/// [`CudaDriverTooOld`](crate::UnsupportedReason::CudaDriverTooOld), whose text names the `cuda-*`
/// feature that avoids the entry point, or
/// [`CudaDriverVersionUnknown`](crate::UnsupportedReason::CudaDriverVersionUnknown) when the
/// driver does not report its version (cudarc ends the process on a missing entry point, so an
/// unknown driver is not called).
// Builds for CUDA 11.6 check only the driver version itself (array footprints).
#[cfg_attr(feature = "cuda-11060", allow(dead_code))]
pub(crate) fn require_driver(what: &'static str, since: i32) -> Result<()> {
    match driver_version() {
        Some(v) if v < since => Err(Error::Unsupported {
            what,
            reason: crate::error::UnsupportedReason::CudaDriverTooOld { since },
        }),
        Some(_) => Ok(()),
        None => Err(Error::Unsupported {
            what,
            reason: crate::error::UnsupportedReason::CudaDriverVersionUnknown,
        }),
    }
}
