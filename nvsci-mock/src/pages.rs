//! Whole-page host allocations: the memory behind buffer objects and sync counters.
//!
//! A CUDA context page-locks host memory in place (`cuMemHostRegister`) a page at a time, so every
//! allocation that may be handed to a GPU starts on a page boundary and owns each page it touches:
//! its size is rounded up to a whole number of pages, and nothing else ever shares those pages.

use crate::ffi::Res;
use nvsci_sys::NvSciError_InsufficientMemory;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::OnceLock;

/// Page size assumed when the system's cannot be read: 64 KiB is the largest page size of aarch64
/// (and larger than x86-64's 4 KiB), so an allocation aligned and sized to it is page-aligned and
/// page-sized whatever the actual page size is.
const FALLBACK_PAGE_SIZE: usize = 65536;

/// The host page size: `sysconf(_SC_PAGESIZE)` on Linux, else (or if that answer is not a power
/// of two of at least 8 bytes) [`FALLBACK_PAGE_SIZE`]. Read once per process.
pub(crate) fn page_size() -> usize {
    static PAGE_SIZE: OnceLock<usize> = OnceLock::new();
    *PAGE_SIZE.get_or_init(|| {
        system_page_size()
            .filter(|p| p.is_power_of_two() && *p >= std::mem::size_of::<u64>())
            .unwrap_or(FALLBACK_PAGE_SIZE)
    })
}

#[cfg(target_os = "linux")]
fn system_page_size() -> Option<usize> {
    use std::os::raw::{c_int, c_long};
    extern "C" {
        fn sysconf(name: c_int) -> c_long;
    }
    /// `_SC_PAGESIZE` in the Linux C libraries (glibc and musl alike).
    const SC_PAGESIZE: c_int = 30;
    // SAFETY: `sysconf` only reads system configuration; any `name` is allowed (an unknown one
    // answers -1, which is rejected below).
    let v = unsafe { sysconf(SC_PAGESIZE) };
    usize::try_from(v).ok()
}

#[cfg(not(target_os = "linux"))]
fn system_page_size() -> Option<usize> {
    None
}

/// Zeroed host memory that starts on a page boundary and spans a whole number of pages; freed on
/// drop.
pub(crate) struct Pages {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: `Pages` owns plain memory and never reads or writes it after zeroing it; the users of
// the address coordinate their accesses themselves, as with the real library's shared memory.
unsafe impl Send for Pages {}
// SAFETY: as above; `Pages` itself is never mutated after creation.
unsafe impl Sync for Pages {}

impl Pages {
    /// Allocates at least `size` bytes (at least one page) aligned to the larger of `align` and
    /// the page size. A size or alignment the allocator cannot satisfy, or an `align` that is not
    /// a power of two, is `InsufficientMemory`.
    pub(crate) fn zeroed(size: u64, align: u64) -> Res<Pages> {
        let page = page_size();
        let layout = usize::try_from(size)
            .ok()
            .and_then(|s| s.max(1).checked_next_multiple_of(page))
            .zip(usize::try_from(align).ok().map(|a| a.max(page)))
            .and_then(|(s, a)| Layout::from_size_align(s, a).ok())
            .ok_or(NvSciError_InsufficientMemory)?;
        // SAFETY: `layout` has a non-zero size (at least one page).
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) }).ok_or(NvSciError_InsufficientMemory)?;
        Ok(Pages { ptr, layout })
    }

    /// The first byte.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The allocated size in bytes (a multiple of the page size).
    pub(crate) fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: `ptr` was returned by `alloc_zeroed(self.layout)` and is freed only here.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) };
    }
}
