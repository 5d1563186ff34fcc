//! Where the rows of an NV12 frame lie in a buffer laid out as a ring's [`FrameLayout`], checked
//! once so that writing them cannot index out of bounds.

use nvsci::pipeline::{FrameFormat, FrameLayout};

/// The two planes of a `width` x `height` NV12 frame inside a buffer: the luma plane (one byte per
/// pixel) and the interleaved chroma plane (U, V per 2x2 block; `width` bytes per row, `height / 2`
/// rows).
#[derive(Clone, Copy, Debug)]
pub struct Nv12Planes {
    pub width: usize,
    pub height: usize,
    pub y_offset: usize,
    pub y_pitch: usize,
    pub uv_offset: usize,
    pub uv_pitch: usize,
}

impl Nv12Planes {
    /// The planes of `layout`, checked against a `width` x `height` NV12 frame in a buffer of
    /// `len` bytes.
    pub fn of(layout: &FrameLayout, width: u32, height: u32, len: usize) -> Result<Self, String> {
        if layout.format != (FrameFormat::nv12(width, height)) || layout.planes.len() != 2 {
            return Err(format!("the ring holds {:?}, not NV12 {width}x{height}", layout.format));
        }
        let (w, h) = (width as usize, height as usize);
        let planes = Self {
            width: w,
            height: h,
            y_offset: usize::try_from(layout.planes[0].offset).map_err(|e| e.to_string())?,
            y_pitch: layout.planes[0].pitch as usize,
            uv_offset: usize::try_from(layout.planes[1].offset).map_err(|e| e.to_string())?,
            uv_pitch: layout.planes[1].pitch as usize,
        };
        for (offset, pitch, rows) in
            [(planes.y_offset, planes.y_pitch, h), (planes.uv_offset, planes.uv_pitch, h / 2)]
        {
            let end = pitch
                .checked_mul(rows.saturating_sub(1))
                .and_then(|v| v.checked_add(offset))
                .and_then(|v| v.checked_add(w));
            if pitch < w || end.is_none_or(|e| e > len) {
                return Err(format!("a buffer of {len} bytes does not hold the planes of {layout:?}"));
            }
        }
        Ok(planes)
    }

    /// Luma row `row` (`width` bytes).
    pub fn y_row<'a>(&self, buf: &'a mut [u8], row: usize) -> &'a mut [u8] {
        &mut buf[self.y_offset + row * self.y_pitch..][..self.width]
    }

    /// Chroma row `row` (of `height / 2`; `width` bytes, U and V interleaved).
    pub fn uv_row<'a>(&self, buf: &'a mut [u8], row: usize) -> &'a mut [u8] {
        &mut buf[self.uv_offset + row * self.uv_pitch..][..self.width]
    }

    /// Luma row `row`, read-only.
    pub fn y_row_of<'a>(&self, buf: &'a [u8], row: usize) -> &'a [u8] {
        &buf[self.y_offset + row * self.y_pitch..][..self.width]
    }

    /// Chroma row `row`, read-only.
    pub fn uv_row_of<'a>(&self, buf: &'a [u8], row: usize) -> &'a [u8] {
        &buf[self.uv_offset + row * self.uv_pitch..][..self.width]
    }
}

/// The layout without padding: rows of exactly `width` bytes, the chroma plane right after the
/// luma plane (what a source renders into before it is compared or checksummed).
pub fn tight_layout(width: u32, height: u32) -> Result<FrameLayout, String> {
    FrameLayout::packed(FrameFormat::nv12(width, height), 1, 1).map_err(|e| e.to_string())
}
