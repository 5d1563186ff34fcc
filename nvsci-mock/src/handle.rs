//! Opaque handles: every handle the mock hands out is a `Box` of a `#[repr(C)]` record whose first
//! field is a `u64` magic number naming the record kind.
//!
//! The magic is checked before a non-NULL handle is used, which catches handles of the wrong kind
//! (say, an attribute list passed as an object) and foreign pointers to readable memory. It cannot
//! detect use after free: a freed record's memory belongs to the allocator.

use crate::ffi::{bad, Res};

/// A record type that can be handed out as an opaque handle.
///
/// # Safety
/// Implementors must be `#[repr(C)]` with a `magic: u64` first field that always holds
/// [`Record::MAGIC`].
pub(crate) unsafe trait Record: Sized {
    /// The value of the record's first field.
    const MAGIC: u64;
}

/// Hands a record out as an opaque handle of type `*mut H`.
pub(crate) fn into_handle<T: Record, H>(rec: Box<T>) -> *mut H {
    Box::into_raw(rec).cast()
}

/// Borrows the record behind handle `h` after checking it is non-NULL, aligned, and carries the
/// record's magic.
///
/// # Safety
/// `h` must be NULL, or point to at least 8 readable bytes (in practice: a live handle created by
/// this mock). The returned borrow must not outlive the handle.
pub(crate) unsafe fn get<'a, T: Record, H>(h: *mut H) -> Res<&'a T> {
    let p = h.cast::<T>();
    if p.is_null() || !p.is_aligned() {
        return bad();
    }
    // SAFETY: `p` is non-NULL, aligned for `T` (hence for u64) and readable per the caller's
    // contract; every record starts with its u64 magic (`Record` contract).
    let magic = unsafe { p.cast::<u64>().read() };
    if magic != T::MAGIC {
        return bad();
    }
    // SAFETY: the magic identifies a live `T` created by `into_handle`; records are only mutated
    // through interior mutability.
    Ok(unsafe { &*p })
}

/// Takes back ownership of the record behind `h` (validated as in [`get`]).
///
/// # Safety
/// As for [`get`]; additionally no other borrow of the record may be in use, and the handle must
/// not be used again.
pub(crate) unsafe fn take<T: Record, H>(h: *mut H) -> Res<Box<T>> {
    // SAFETY: forwarded contract.
    unsafe { get::<T, H>(h) }?;
    // SAFETY: the record was created by `Box::into_raw` in `into_handle` and is not borrowed.
    Ok(unsafe { Box::from_raw(h.cast::<T>()) })
}
