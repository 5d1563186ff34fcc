//! The NV12 -> RGBA kernel against the CPU converter, byte for byte and checksum for checksum,
//! with the luma plane first and with the chroma plane first (each plane at its own offset), at
//! a size that is not a multiple of the block.
#![cfg(feature = "cuda")]

mod common;

use nvsci::convert::{nv12_to_rgba, Nv12ToRgba};
use nvsci::cuda::cudarc::driver::DevicePtr;
use nvsci::pipeline::{FrameFormat, FrameLayout};

/// Deterministic bytes (a 64-bit LCG).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect()
}

fn compare(layout: &FrameLayout, seed: u64) {
    let Some(dev) = common::gpu() else { return };
    let FrameFormat::Nv12 { width, height, .. } = layout.format else { unreachable!() };
    let src = noise(layout.size as usize, seed);
    let mut want = vec![0u8; (width * height * 4) as usize];
    let want_sum = nv12_to_rgba(layout, &src, &mut want).unwrap();
    let stream = dev.context().new_stream().unwrap();
    let frame = stream.clone_htod(&src).unwrap();
    let rgba = stream.alloc_zeros::<u8>(want.len()).unwrap();
    let sum = stream.alloc_zeros::<u64>(1).unwrap();
    let conv = Nv12ToRgba::load(&dev).unwrap();
    {
        let (f, _a) = frame.device_ptr(&stream);
        let (d, _b) = rgba.device_ptr(&stream);
        let (s, _c) = sum.device_ptr(&stream);
        // SAFETY: `frame` holds a whole frame of `layout`, `rgba` w*h*4 bytes, `sum` one u64,
        // all alive until the stream is synchronised below.
        unsafe { conv.enqueue(&stream, layout, f, d, s) }.unwrap();
    }
    let got = stream.clone_dtoh(&rgba).unwrap();
    let got_sum = stream.clone_dtoh(&sum).unwrap()[0];
    assert!(got == want, "RGBA differs from the CPU converter");
    assert_eq!(got_sum, want_sum, "checksum differs from the CPU converter");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn kernel_matches_the_cpu_converter_luma_first() {
    let layout = FrameLayout::packed(FrameFormat::nv12(1000, 562), 256, 4096).unwrap();
    assert!(layout.planes[0].offset < layout.planes[1].offset);
    compare(&layout, 1);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn kernel_matches_the_cpu_converter_chroma_first() {
    let mut layout = FrameLayout::packed(FrameFormat::nv12(1000, 562), 256, 4096).unwrap();
    // The same planes, chroma at the start of the buffer and luma after it.
    let uv_bytes = (layout.planes[1].pitch as u64 * 281).next_multiple_of(4096);
    layout.planes[1].offset = 0;
    layout.planes[0].offset = uv_bytes;
    layout.size = uv_bytes + layout.planes[0].pitch as u64 * 562;
    compare(&layout, 2);
}
