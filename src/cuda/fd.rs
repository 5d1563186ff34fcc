//! Handing file descriptors to the CUDA driver.
//!
//! The driver owns an fd once an import succeeds. The driver is always given a duplicate, and the
//! caller's `OwnedFd` is closed here in every case, exactly once, by its owner. What the driver
//! does with the duplicate when an import fails differs by call (measured on an H100, driver 580,
//! 1000 failures each): a failed memory import closes it, a failed semaphore import leaves it
//! open. So after a failure, [`reclaim_if_unconsumed`] closes the duplicate only if it is still
//! open and still refers to the caller's file; a number the driver closed is left alone.

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};

extern "C" {
    fn fcntl(fd: i32, cmd: i32, ...) -> i32;
    fn close(fd: i32) -> i32;
}

/// `F_GETFD` (Linux, every architecture).
const F_GETFD: i32 = 1;

/// A duplicate of `fd` for the driver to consume; the original stays with the caller.
pub(crate) fn for_driver(fd: &OwnedFd) -> std::io::Result<RawFd> {
    Ok(fd.try_clone()?.into_raw_fd())
}

/// What `/proc/self/fd/N` names for an open descriptor (`None` if it is not open).
fn target(fd: RawFd) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()
}

/// After a failed import: closes `dup` (handed to the driver) if the driver left it open, that
/// is if it is still open and names the same file as `original`. Returns whether it was closed.
pub(crate) fn reclaim_if_unconsumed(dup: RawFd, original: &OwnedFd) -> bool {
    // SAFETY: F_GETFD only reads the descriptor flags; on a closed number it fails with EBADF.
    if unsafe { fcntl(dup, F_GETFD) } == -1 {
        return false; // the driver closed it
    }
    match (target(dup), target(original.as_raw_fd())) {
        (Some(a), Some(b)) if a == b => {
            // SAFETY: `dup` is open and refers to the caller's file: it is the duplicate this
            // crate made for the failed import, which the driver did not consume; nothing else
            // owns it, so it is closed exactly once, here.
            unsafe { close(dup) };
            true
        }
        _ => false,
    }
}
