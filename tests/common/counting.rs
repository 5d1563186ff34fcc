//! A global allocator that counts the allocations of threads that ask for it.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Forwards to the system allocator; counts allocations made by threads inside [`count`].
pub struct Counting;
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` on this thread with counting on and returns its allocations. First checks that the
/// counter sees an allocation at all (the test binary must install [`Counting`] as its global
/// allocator).
pub fn count(f: impl FnOnce()) -> usize {
    COUNTING.with(|c| c.set(true));
    drop(std::hint::black_box(vec![1u8; 8]));
    let probe = ALLOCATIONS.swap(0, Ordering::Relaxed);
    assert_eq!(probe, 1, "the counting allocator does not see allocations (is it the global allocator?)");
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.swap(0, Ordering::Relaxed)
}
