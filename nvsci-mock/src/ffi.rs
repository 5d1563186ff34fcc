//! Helpers shared by every `extern "C"` entry point: panic containment, pointer checks and
//! poison-tolerant locking.

use nvsci_sys::{NvSciError, NvSciError_BadParameter, NvSciError_ResourceError, NvSciError_Success};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

/// Result type of the internal implementation functions.
pub(crate) type Res<T = ()> = Result<T, NvSciError>;

/// Shorthand for `Err(NvSciError_BadParameter)`.
pub(crate) fn bad<T>() -> Res<T> {
    Err(NvSciError_BadParameter)
}

/// Runs entry point `function`'s body `f`, converting its result into an `NvSciError` and any
/// panic into `NvSciError_ResourceError`, so that no panic ever crosses the C ABI. A failure
/// injected for this call on this thread ([`crate::faults`]) is returned instead of running `f`.
pub(crate) fn guard(function: &'static str, f: impl FnOnce() -> Res) -> NvSciError {
    if let Some(code) = crate::faults::take(function) {
        return code;
    }
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => NvSciError_Success,
        Ok(Err(e)) => e,
        Err(_) => NvSciError_ResourceError,
    }
}

/// Runs `f` for a `void` entry point, swallowing any panic.
pub(crate) fn guard_void(f: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(f));
}

/// Runs `f`, returning `fallback` if it panics.
pub(crate) fn guard_val<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// Locks `m`, ignoring poisoning (the protected data stays consistent: every critical section
/// either completes or leaves the data untouched).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Fails with `BadParameter` when `p` is NULL.
pub(crate) fn non_null<T>(p: *const T) -> Res {
    if p.is_null() {
        bad()
    } else {
        Ok(())
    }
}

/// Writes `v` through the caller's out-pointer `p`.
///
/// # Safety
/// `p` must be NULL or valid for a write of `T`.
pub(crate) unsafe fn write_out<T>(p: *mut T, v: T) -> Res {
    non_null(p)?;
    // SAFETY: `p` is non-NULL and, by the caller's contract, valid for writes.
    unsafe { p.write(v) };
    Ok(())
}

fn checked_len<T>(p: *const T, n: usize) -> Res<usize> {
    non_null(p)?;
    let max = isize::MAX as usize / std::mem::size_of::<T>().max(1);
    if n == 0 || n > max {
        return bad();
    }
    Ok(n)
}

/// Borrows a caller array of `n` elements; NULL or `n == 0` is `BadParameter`.
///
/// # Safety
/// `p` must be NULL or point to `n` initialised elements that stay valid and unmodified for `'a`.
pub(crate) unsafe fn slice_in<'a, T>(p: *const T, n: usize) -> Res<&'a [T]> {
    let n = checked_len(p, n)?;
    // SAFETY: non-NULL, `n` elements readable per the caller's contract, size fits isize.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Mutably borrows a caller array of `n` elements; NULL or `n == 0` is `BadParameter`.
///
/// # Safety
/// `p` must be NULL or point to `n` initialised elements, exclusively borrowed for `'a`.
pub(crate) unsafe fn slice_mut<'a, T>(p: *mut T, n: usize) -> Res<&'a mut [T]> {
    let n = checked_len(p, n)?;
    // SAFETY: non-NULL, `n` elements writable and unaliased per the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}
