//! A moving NV12 stress pattern for the converters and the ring tests (examples and tests include
//! this file with `#[path]`; it is not part of the library).
//!
//! Luma covers the studio range and chroma every byte value, so clamping and both chroma bytes are
//! exercised; chroma depends only on the 2x2 block, as in real 4:2:0 data. (The camera example
//! shows colour bars instead, whose converted colours are known: `test_pattern.rs`.)
#![allow(dead_code)]

use nvsci::pipeline::FrameLayout;

/// The pixel oracle (BT.601 from the standard, not the crate's converter).
#[path = "bt601.rs"]
pub mod bt601;

/// `(y, u, v)` of pixel `(x, row)` in frame `t`.
pub fn test_pattern(x: u32, row: u32, t: u64) -> (u8, u8, u8) {
    let t = t as u32;
    let yv = ((x.wrapping_add(t.wrapping_mul(3))) ^ (row.wrapping_add(t))) as u8;
    let (bx, by) = (x / 2, row / 2);
    let u = (bx.wrapping_mul(2).wrapping_add(t)) as u8;
    let v = (by.wrapping_mul(3).wrapping_add(t.wrapping_mul(2))) as u8;
    (16u8.wrapping_add(yv % 220), u, v)
}

/// Writes frame `t` of the pattern into an NV12 buffer laid out as `layout`. A layout that is not
/// NV12 of even dimensions, or whose planes do not lie inside `dst` with pitches covering a row,
/// is refused before anything is written.
pub fn fill_test_pattern(layout: &FrameLayout, t: u64, dst: &mut [u8]) -> Result<(), String> {
    let (w, h) = layout.nv12_fits(dst.len(), "dst").map_err(|e| e.to_string())?;
    let (width, height) = (w as u32, h as u32);
    let (yp, uvp) = (&layout.planes[0], &layout.planes[1]);
    for row in 0..height {
        let y_row = &mut dst[yp.offset as usize + row as usize * yp.pitch as usize..][..w];
        for (x, b) in y_row.iter_mut().enumerate() {
            *b = test_pattern(x as u32, row, t).0;
        }
    }
    for brow in 0..height / 2 {
        let uv_row = &mut dst[uvp.offset as usize + brow as usize * uvp.pitch as usize..][..w];
        for bx in 0..width / 2 {
            let (_, u, v) = test_pattern(bx * 2, brow * 2, t);
            uv_row[2 * bx as usize] = u;
            uv_row[2 * bx as usize + 1] = v;
        }
    }
    Ok(())
}

/// Frame `t` as packed RGBA (`width * 4` bytes per row), converted from the pattern itself by
/// the oracle ([`bt601`]), independently of any buffer, layout or of the crate's converters.
pub fn test_pattern_rgba(width: u32, height: u32, t: u64) -> Vec<u8> {
    bt601::rgba(width, height, |x, row| {
        let (y, u, v) = test_pattern(x, row, t);
        [y, u, v]
    })
}

/// The RGBA statistic (sum of R + G + B over all pixels, as `nv12_to_rgba` and its CUDA kernel
/// return it) of frame `t`, from [`test_pattern_rgba`].
pub fn test_pattern_statistic(width: u32, height: u32, t: u64) -> u64 {
    bt601::statistic(&test_pattern_rgba(width, height, t))
}
