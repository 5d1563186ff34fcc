//! Handing file descriptors to the CUDA driver.
//!
//! The driver owns an fd once an import succeeds. When an import fails, drivers have been seen
//! closing the fd anyway, at a moment the caller cannot observe, so closing it again could close
//! an unrelated descriptor that reused the number. The driver is therefore always given a
//! duplicate that this crate never touches again, and the caller's `OwnedFd` is closed here in
//! every case: exactly once, by its owner. (If a driver neither imports nor closes the duplicate,
//! that one descriptor leaks; it is never closed twice.)

use std::os::fd::{IntoRawFd, OwnedFd, RawFd};

/// A duplicate of `fd` for the driver to consume; the original stays with the caller.
pub(crate) fn for_driver(fd: &OwnedFd) -> std::io::Result<RawFd> {
    Ok(fd.try_clone()?.into_raw_fd())
}
