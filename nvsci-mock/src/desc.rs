//! Caller-owned descriptor buffers (the text of `Nv*AttrListDebugDump`, IPC export descriptors),
//! freed with `Nv*AttrListFreeDesc` / `Nv*AttrListAndObjFreeDesc`.
//!
//! The buffer handed out is preceded by a hidden header recording its allocation size and the
//! ledger entry that counts it. The text is followed by a NUL byte that the returned length does
//! not include.

use crate::ffi::Res;
use crate::ledger::{Counted, Kind, Ledger};
use nvsci_sys::NvSciError_InsufficientMemory;
use std::alloc::{alloc, dealloc, Layout};
use std::os::raw::c_void;

const DESC_MAGIC: u64 = 0x4e56_5343_4445_5343; // "NVSCDESC"
const ALIGN: usize = 16;

#[repr(C)]
struct Header {
    magic: u64,
    total: usize,
    counted: *mut Counted,
    _reserved: u64,
}

const HEADER: usize = std::mem::size_of::<Header>();

/// Allocates a descriptor buffer holding `text`, counted in `ledger`; returns the pointer handed
/// to the caller and the text length.
pub(crate) fn alloc_text(ledger: &Ledger, text: &str) -> Res<(*mut c_void, usize)> {
    alloc_bytes(ledger, text.as_bytes())
}

/// Allocates a descriptor buffer holding `text` (any bytes; a NUL follows them), counted in
/// `ledger`; returns the pointer handed to the caller and the byte length.
pub(crate) fn alloc_bytes(ledger: &Ledger, text: &[u8]) -> Res<(*mut c_void, usize)> {
    let total =
        HEADER.checked_add(text.len()).and_then(|n| n.checked_add(1)).ok_or(NvSciError_InsufficientMemory)?;
    let layout = Layout::from_size_align(total, ALIGN).map_err(|_| NvSciError_InsufficientMemory)?;
    // SAFETY: `layout` has a non-zero size.
    let base = unsafe { alloc(layout) };
    if base.is_null() {
        return Err(NvSciError_InsufficientMemory);
    }
    let counted = Box::into_raw(Box::new(ledger.track(Kind::Desc)));
    let header = Header { magic: DESC_MAGIC, total, counted, _reserved: 0 };
    // SAFETY: `base` is a fresh allocation of `total` = HEADER + len + 1 bytes aligned to 16
    // (enough for `Header`); the writes stay inside it.
    unsafe {
        base.cast::<Header>().write(header);
        let body = base.add(HEADER);
        std::ptr::copy_nonoverlapping(text.as_ptr(), body, text.len());
        body.add(text.len()).write(0);
        Ok((body.cast(), text.len()))
    }
}

/// Frees a buffer returned by [`alloc_text`] or [`alloc_bytes`]; NULL is ignored, and so is a pointer whose hidden
/// header does not carry the descriptor magic.
///
/// # Safety
/// `p` must be NULL or a pointer returned by [`alloc_text`] that has not been freed.
pub(crate) unsafe fn free(p: *mut c_void) {
    if p.is_null() || !(p as usize).is_multiple_of(ALIGN) {
        return;
    }
    // SAFETY: buffers from `alloc_text` are preceded by their `Header` inside one allocation.
    let base = unsafe { p.cast::<u8>().sub(HEADER) };
    // SAFETY: as above; the header is initialised and aligned.
    let header = unsafe { base.cast::<Header>().read() };
    if header.magic != DESC_MAGIC {
        return;
    }
    // SAFETY: `counted` came from `Box::into_raw` in `alloc_text` and is released exactly once.
    drop(unsafe { Box::from_raw(header.counted) });
    if let Ok(layout) = Layout::from_size_align(header.total, ALIGN) {
        // SAFETY: `base` was allocated by `alloc_text` with exactly this layout.
        unsafe { dealloc(base, layout) };
    }
}
