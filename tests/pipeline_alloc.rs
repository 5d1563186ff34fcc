//! Steady-state frames allocate nothing: a counting global allocator watches 1000 frames
//! through the mock ring (producer and two consumers, CPU writes and reads) after warm-up.
#![cfg(feature = "mock")]

mod common;

use common::counting::{count, Counting};
use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat};
use nvsci::NvSci;

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn thousand_frames_allocate_nothing_after_warm_up() {
    let ring = Backend::with_library(NvSci::mock())
        .stream(FrameFormat::nv12(320, 240))
        .frames(4)
        .consumers(ConsumerDesc::cpu(), 2)
        .build()
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
    let allocations = count(|| {
        for seq in 16..1016 {
            frame(seq);
        }
    });
    assert_eq!(allocations, 0, "steady-state frames allocated");
}
