//! Steady-state frames allocate nothing: a counting global allocator watches 1000 frames
//! through the mock ring (producer and two consumers, CPU writes and reads) after warm-up.
#![cfg(feature = "mock")]

use nvsci::pipeline::{FrameFormat, FrameRing, RingConfig};
use nvsci::NvSci;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
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

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn thousand_frames_allocate_nothing_after_warm_up() {
    let ring = FrameRing::new(
        &NvSci::mock(),
        FrameFormat::Nv12 { width: 320, height: 240 },
        RingConfig { frames: 4, consumers: 2, ..Default::default() },
    )
    .unwrap();
    let (mut p, mut cs) = ring.split().unwrap();
    let mut frame = |seq: u64| {
        let f = p.acquire().unwrap();
        p.buffer(&f).unwrap().cpu_write().unwrap()[0] = seq as u8;
        p.present(f).unwrap();
        for c in cs.iter_mut() {
            let g = c.acquire().unwrap();
            assert_eq!(c.view(&g).unwrap().cpu_read().unwrap()[0], seq as u8);
            c.release(g).unwrap();
        }
    };
    for seq in 0..16 {
        frame(seq);
    }
    // Sanity check that the counter works at all.
    COUNTING.with(|c| c.set(true));
    drop(std::hint::black_box(vec![1u8; 8]));
    let probe = ALLOCATIONS.swap(0, Ordering::Relaxed);
    assert_eq!(probe, 1, "the counting allocator does not see allocations");
    for seq in 16..1016 {
        frame(seq);
    }
    COUNTING.with(|c| c.set(false));
    assert_eq!(ALLOCATIONS.load(Ordering::Relaxed), 0, "steady-state frames allocated");
}
