//! Whole-page host allocations: the memory behind buffer objects and sync counters.
//!
//! A CUDA context page-locks host memory in place (`cuMemHostRegister`) a page at a time, so every
//! allocation that may be handed to a GPU starts on a page boundary and owns each page it touches:
//! its size is rounded up to a whole number of pages, and nothing else ever shares those pages.
//!
//! On Linux the pages are a memfd mapped shared, so that they can be handed to another process
//! (the file descriptor travels over the IPC endpoint's socket) and mapped there: the same
//! physical pages in both processes, as NvSciBuf memory is on Tegra. Elsewhere (and under Miri)
//! they are ordinary heap memory and cannot be exported.

use crate::ffi::Res;
use nvsci_sys::NvSciError_InsufficientMemory;
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
    // SAFETY: `sysconf` only reads system configuration.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
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
    len: usize,
    backing: Backing,
}

enum Backing {
    /// Heap memory from the global allocator (alignment above the page size, or no memfd).
    Heap(std::alloc::Layout),
    /// A shared mapping of a memfd, which is kept open so that it can be exported.
    #[cfg(all(target_os = "linux", not(miri)))]
    Memfd(std::os::fd::OwnedFd),
}

// SAFETY: `Pages` owns plain memory and never reads or writes it after zeroing it; the users of
// the address coordinate their accesses themselves, as with the real library's shared memory.
unsafe impl Send for Pages {}
// SAFETY: as above; `Pages` itself is never mutated after creation.
unsafe impl Sync for Pages {}

fn rounded(size: u64) -> Res<usize> {
    usize::try_from(size)
        .ok()
        .and_then(|s| s.max(1).checked_next_multiple_of(page_size()))
        .ok_or(NvSciError_InsufficientMemory)
}

impl Pages {
    /// Allocates at least `size` bytes (at least one page) aligned to the larger of `align` and
    /// the page size. A size or alignment that cannot be satisfied, or an `align` that is not a
    /// power of two, is `InsufficientMemory`.
    pub(crate) fn zeroed(size: u64, align: u64) -> Res<Pages> {
        let len = rounded(size)?;
        let align = usize::try_from(align).map_err(|_| NvSciError_InsufficientMemory)?;
        if !align.is_power_of_two() && align != 0 {
            return Err(NvSciError_InsufficientMemory);
        }
        #[cfg(all(target_os = "linux", not(miri)))]
        if align <= page_size() {
            return Self::memfd(len);
        }
        let layout = std::alloc::Layout::from_size_align(len, align.max(page_size()))
            .map_err(|_| NvSciError_InsufficientMemory)?;
        // SAFETY: `layout` has a non-zero size (at least one page).
        let ptr =
            NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }).ok_or(NvSciError_InsufficientMemory)?;
        Ok(Pages { ptr, len, backing: Backing::Heap(layout) })
    }

    #[cfg(all(target_os = "linux", not(miri)))]
    fn memfd(len: usize) -> Res<Pages> {
        use std::os::fd::{FromRawFd, OwnedFd};
        // SAFETY: the name is a NUL-terminated literal; the flags are valid.
        let fd = unsafe { libc::memfd_create(c"nvsci-mock".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(NvSciError_InsufficientMemory);
        }
        // SAFETY: `fd` was just returned by memfd_create and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let off = libc::off_t::try_from(len).map_err(|_| NvSciError_InsufficientMemory)?;
        // SAFETY: `fd` is a live memfd; a new memfd reads as zeros once sized.
        if unsafe { libc::ftruncate(std::os::fd::AsRawFd::as_raw_fd(&fd), off) } != 0 {
            return Err(NvSciError_InsufficientMemory);
        }
        Self::map(fd, len)
    }

    /// Maps `len` bytes (a whole number of pages) of the shared memory `fd`: memory exported by
    /// another process.
    #[cfg(all(target_os = "linux", not(miri)))]
    pub(crate) fn map(fd: std::os::fd::OwnedFd, len: usize) -> Res<Pages> {
        use std::os::fd::AsRawFd;
        if len == 0 || !len.is_multiple_of(page_size()) {
            return Err(nvsci_sys::NvSciError_BadParameter);
        }
        // The file must be at least as large as the mapping: touching pages past its end would
        // raise SIGBUS instead of failing here.
        // SAFETY: `st` is plain old data that fstat fills.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is a live descriptor and `st` a valid out-pointer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 || (st.st_size as u64) < len as u64 {
            return Err(nvsci_sys::NvSciError_BadParameter);
        }
        // SAFETY: a fresh shared mapping of a descriptor we hold; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(NvSciError_InsufficientMemory);
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(NvSciError_InsufficientMemory)?;
        Ok(Pages { ptr, len, backing: Backing::Memfd(fd) })
    }

    /// The file descriptor of shared pages, for export; `None` for heap memory.
    pub(crate) fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        match &self.backing {
            Backing::Heap(_) => None,
            #[cfg(all(target_os = "linux", not(miri)))]
            Backing::Memfd(fd) => Some(std::os::fd::AsFd::as_fd(fd)),
        }
    }

    /// The first byte.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The allocated size in bytes (a multiple of the page size).
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        match &self.backing {
            // SAFETY: `ptr` was returned by `alloc_zeroed(layout)` and is freed only here.
            Backing::Heap(layout) => unsafe { std::alloc::dealloc(self.ptr.as_ptr(), *layout) },
            #[cfg(all(target_os = "linux", not(miri)))]
            Backing::Memfd(_) => {
                // SAFETY: `ptr`/`len` are exactly the mapping made in `map`, unmapped only here;
                // the descriptor closes when the backing drops.
                unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
            }
        }
    }
}
