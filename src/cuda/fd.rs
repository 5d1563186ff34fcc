//! Handing file descriptors to the CUDA driver.
//!
//! The driver owns an fd once an import succeeds. The driver is always given a duplicate, and the
//! caller's `OwnedFd` is closed here in every case, exactly once, by its owner. What the driver
//! does with the duplicate when an import fails differs by call (measured on an H100, driver 580,
//! 1000 failures each): a failed memory import closes it, a failed semaphore import leaves it
//! open. So after a failure, [`reclaim_if_unconsumed`] closes the duplicate only if that number
//! still refers to the very open file description of the caller's descriptor.
//!
//! Identity is the open file description (`kcmp(KCMP_FILE)`), not the path: a number the driver
//! closed and another thread reused for a file it opened itself (even the same path) is a
//! different description and is left alone. What remains is a number the driver closed that
//! another thread refilled, in between, with a duplicate of the *same* description (a clone of
//! the caller's descriptor made before the import and duplicated concurrently): the crate never
//! does that with a descriptor it was given, and a caller that does should not import clones of
//! one descriptor from several threads at once. Where `kcmp` is unavailable (a kernel without
//! `CONFIG_KCMP`, or a sandbox refusing it), nothing is reclaimed: one descriptor may leak per
//! failed semaphore import, and no descriptor of anyone else is ever closed.

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};

/// `KCMP_FILE` of `enum kcmp_type` (linux/kcmp.h): compare two descriptors' open file
/// descriptions.
const KCMP_FILE: libc::c_int = 0;

/// A duplicate of `fd` for the driver to consume; the original stays with the caller.
pub(crate) fn for_driver(fd: &OwnedFd) -> std::io::Result<RawFd> {
    Ok(fd.try_clone()?.into_raw_fd())
}

/// Whether descriptors `a` and `b` of this process refer to one open file description
/// (`None`: the kernel could not tell, e.g. `a` is not open or `kcmp` is unavailable).
fn same_description(a: RawFd, b: RawFd) -> Option<bool> {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    // SAFETY: kcmp(2) only compares kernel objects of the given process; on a closed number it
    // fails with EBADF and touches nothing.
    let r = unsafe { libc::syscall(libc::SYS_kcmp, pid, pid, KCMP_FILE, a, b) };
    match r {
        0 => Some(true),
        1..=3 => Some(false),
        _ => None,
    }
}

/// After a failed import: closes `dup` (handed to the driver) if the driver left it open, that
/// is if that number still refers to the open file description of `original`. Returns whether it
/// was closed.
pub(crate) fn reclaim_if_unconsumed(dup: RawFd, original: &OwnedFd) -> bool {
    if same_description(dup, original.as_raw_fd()) != Some(true) {
        return false; // the driver closed it (or the kernel cannot tell): leave the number alone
    }
    // SAFETY: `dup` is open and refers to the caller's open file description: it is the duplicate
    // this crate made for the failed import, which the driver did not consume; nothing else owns
    // it, so it is closed exactly once, here.
    unsafe { libc::close(dup) };
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    #[test]
    fn a_duplicate_is_reclaimed_once_and_a_reused_number_is_left_alone() {
        let original: OwnedFd = File::open("/proc/self/status").unwrap().into();
        let dup = for_driver(&original).unwrap();
        if same_description(dup, original.as_raw_fd()).is_none() {
            // No kcmp here (some emulators and sandboxes): nothing is reclaimed, nothing closed.
            assert!(!reclaim_if_unconsumed(dup, &original));
            // SAFETY: F_GETFD only reads flags; the duplicate stays open, and is ours to close.
            assert_ne!(unsafe { libc::fcntl(dup, libc::F_GETFD) }, -1);
            // SAFETY: `dup` is ours, open, and closed once here.
            unsafe { libc::close(dup) };
            return;
        }
        assert_eq!(same_description(dup, original.as_raw_fd()), Some(true));
        assert!(reclaim_if_unconsumed(dup, &original));
        // The number is closed now; reclaiming again finds nothing.
        assert!(!reclaim_if_unconsumed(dup, &original));
        // Another file (the same path, another open file description) that lands on a number
        // of a duplicate the driver closed is not the caller's and stays open.
        let dup = for_driver(&original).unwrap();
        // SAFETY: `dup` is ours and open; closing it stands in for the driver consuming it.
        unsafe { libc::close(dup) };
        let other = File::open("/proc/self/status").unwrap();
        let other_fd = other.as_raw_fd();
        assert!(!reclaim_if_unconsumed(other_fd, &original));
        // SAFETY: F_GETFD only reads flags; the descriptor must still be open.
        assert_ne!(unsafe { libc::fcntl(other_fd, libc::F_GETFD) }, -1);
    }
}
