//! The primitive of a sync object: a 64-bit counter alone in its own page of host memory.
//!
//! The counter's address is handed out (`SyncObjGetCounter`) so that a GPU stream can wait on it
//! and store into it directly, like a Tegra syncpoint; such stores take no lock and notify no one.
//! Every access, the mock's and the address holders', must therefore be a 64-bit atomic one. The
//! mock reads with `Acquire` and writes with `Release`.

use crate::ffi::Res;
use crate::pages::Pages;
use std::sync::atomic::{AtomicU64, Ordering};

/// A zero-initialised 64-bit counter at the start of a page-aligned allocation of its own.
pub(crate) struct Counter {
    pages: Pages,
}

impl Counter {
    /// A new counter holding 0.
    pub(crate) fn new() -> Res<Counter> {
        let size = std::mem::size_of::<AtomicU64>() as u64;
        let align = std::mem::align_of::<AtomicU64>() as u64;
        Ok(Counter { pages: Pages::zeroed(size, align)? })
    }

    /// A counter on pages mapped from another process (at least one page, so the atomic fits).
    pub(crate) fn from_pages(pages: Pages) -> Counter {
        Counter { pages }
    }

    /// The pages holding the counter (for export).
    pub(crate) fn pages(&self) -> &Pages {
        &self.pages
    }

    /// The counter as an atomic.
    pub(crate) fn atomic(&self) -> &AtomicU64 {
        // SAFETY: the allocation is at least `size_of::<AtomicU64>()` bytes, aligned for
        // `AtomicU64` (`Pages::zeroed` was asked for that alignment), zero-initialised (a valid
        // `AtomicU64`) and lives as long as `self`. Every access to it is atomic and 64 bits wide:
        // the mock's go through this reference, and holders of the address handed out by
        // `SyncObjGetCounter` are bound by that entry point's contract to do the same.
        unsafe { AtomicU64::from_ptr(self.pages.as_ptr().cast::<u64>()) }
    }

    /// The value reached by the primitive (`Acquire`).
    pub(crate) fn load(&self) -> u64 {
        self.atomic().load(Ordering::Acquire)
    }

    /// The counter's address, for the GPU entry points.
    pub(crate) fn as_ptr(&self) -> *mut u64 {
        self.atomic().as_ptr()
    }
}
