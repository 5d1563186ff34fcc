//! Writing and reading whole NV12 frames of any NvSciBuf image layout (pitch-linear or
//! block-linear) through `BufObj::put_pixels` / `get_pixels` (examples and tests include this
//! file with `#[path]`; it is not part of the library).
//!
//! The frame on the CPU side is tightly packed, as `nv12::tight_layout` describes it (and as the
//! Y4M reader and the test patterns render it): `width` luma bytes per row, then the chroma
//! plane of `width` bytes (U, V pairs) per row of 2x2 blocks. The pixel calls take Y, U and V
//! user planes (nvscibuf.h); `BufObj::put_nv12` / `get_nv12` split and interleave the chroma.

#![allow(dead_code)]

use nvsci::buf::{BufObj, PlaneDst, PlaneSrc};

/// Writes the tightly packed NV12 frame `frame` of `width` x `height` into the two planes of
/// `obj`, in the object's layout.
pub fn put_nv12(obj: &BufObj, frame: &[u8], width: u32, height: u32) -> nvsci::Result<()> {
    let luma = width as usize * height as usize;
    let (y, uv) = frame.split_at(luma.min(frame.len()));
    obj.put_nv12(PlaneSrc { data: y, pitch: width }, PlaneSrc { data: uv, pitch: width })
}

/// Reads the two planes of `obj` into the tightly packed NV12 frame `frame` of `width` x
/// `height`.
pub fn get_nv12(obj: &BufObj, frame: &mut [u8], width: u32, height: u32) -> nvsci::Result<()> {
    let luma = width as usize * height as usize;
    let at = luma.min(frame.len());
    let (y, uv) = frame.split_at_mut(at);
    obj.get_nv12(PlaneDst { data: y, pitch: width }, PlaneDst { data: uv, pitch: width })
}
