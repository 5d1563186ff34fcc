//! `NvSciBufObjPutPixels` / `NvSciBufObjGetPixels`: copies between caller buffers (one per
//! plane, pitch-linear at the caller's pitch) and the planes of an image object, swizzling and
//! deswizzling block-linear planes (layout in [`super::image`]).
//!
//! Checks, in this order (each failure leaves the object unchanged):
//! * `bufObj` a live object (`BadParameter`), `rect`, the pointer, size and pitch arrays
//!   non-NULL except `rect`, which may be NULL for the whole image (`BadParameter`).
//! * The object is a plane-based image whose planes have a whole number of bytes per pixel
//!   (`BadParameter` for other buffer types; `NotSupported` for packed sub-byte formats).
//! * CPU access: the reconciled `NeedCpuAccess` is true, else `NotPermitted`; for a put, the
//!   handle's permission is ReadWrite, else `NotPermitted` (the CPU writes the buffer, which
//!   `NvSciBufObjGetCpuPtr` also allows only for read-write handles).
//! * The rectangle: `x0 < x1 <= PlaneWidth[0]`, `y0 < y1 <= PlaneHeight[0]` in the first
//!   plane's pixels (`BadParameter`). The mock's choice for the other planes: the rectangle
//!   scaled by the plane's size relative to the first plane, rounded outwards
//!   (`[x0 * w / w0, ceil(x1 * w / w0))`), so that a chroma plane of half width covers the
//!   chroma of the luma rectangle.
//! * Per plane (`PlaneCount` entries in each array): a non-NULL pointer, a pitch of at least the
//!   rectangle's row in bytes, and a size of at least `pitch * rows` (the mock's choice: every
//!   row of the rectangle a whole pitch); else `BadParameter`.
//!
//! Row `r` of plane `i`'s rectangle is at `ptrs[i] + r * pitches[i]` in the caller's buffer.
//! Paddings are outside the image: the rectangle addresses the image's own pixels.

use super::image::{self, PlaneGeometry};
use super::obj::{self, BufObjRec};
use crate::attrs::Value;
use crate::ffi::{bad, guard, Res};
use nvsci_sys::*;
use std::os::raw::c_void;

/// The planes of `o` as addressable geometry; `Err` as documented in the module.
fn geometry(o: &BufObjRec) -> Res<Vec<PlaneGeometry>> {
    let a = o.attrs();
    let types = a.get(NvSciBufGeneralAttrKey_Types).map(Value::u32s).unwrap_or_default();
    if !types.contains(&NvSciBufType_Image) {
        return bad();
    }
    let u32s = |k| a.get(k).map(Value::u32s).unwrap_or_default();
    let u64s = |k| a.get(k).map(Value::u64s).unwrap_or_default();
    let n = a.get(NvSciBufImageAttrKey_PlaneCount).map_or(0, Value::u32) as usize;
    let widths = u32s(NvSciBufImageAttrKey_PlaneWidth);
    let heights = u32s(NvSciBufImageAttrKey_PlaneHeight);
    let bpp = u32s(NvSciBufImageAttrKey_PlaneBitsPerPixel);
    let pitches = u32s(NvSciBufImageAttrKey_PlanePitch);
    let aligned_heights = u32s(NvSciBufImageAttrKey_PlaneAlignedHeight);
    let offsets = u64s(NvSciBufImageAttrKey_PlaneOffset);
    let second = u64s(NvSciBufImageAttrKey_PlaneSecondFieldOffset);
    let top = u64s(NvSciBufImageAttrKey_TopPadding);
    let bottom = u64s(NvSciBufImageAttrKey_BottomPadding);
    let left = u64s(NvSciBufImageAttrKey_LeftPadding);
    let block_linear =
        a.get(NvSciBufImageAttrKey_Layout).map(Value::u32) == Some(NvSciBufImage_BlockLinearType);
    let interlaced = a.get(NvSciBufImageAttrKey_ScanType).map(Value::u32) == Some(NvSciBufScan_InterlaceType);
    let lens = [widths.len(), heights.len(), bpp.len(), pitches.len(), offsets.len(), aligned_heights.len()];
    if n == 0 || lens.iter().any(|l| *l < n) {
        return bad();
    }
    let gob = if o.vmm().is_some() { image::GobLayout::DesktopGpu } else { image::GobLayout::Tegra };
    (0..n)
        .map(|i| {
            if !bpp[i].is_multiple_of(8) {
                return Err(NvSciError_NotSupported);
            }
            Ok(PlaneGeometry {
                width: widths[i],
                height: heights[i],
                bytes_per_pixel: u64::from(bpp[i] / 8),
                offset: offsets[i],
                pitch: u64::from(pitches[i]),
                top: top.get(i).copied().unwrap_or(0),
                left: left.get(i).copied().unwrap_or(0),
                second_field: interlaced.then(|| second.get(i).copied().unwrap_or(0)),
                block_log2: block_linear.then(|| match gob {
                    // The block height a desktop GPU's array of the plane's rows uses (its
                    // PlaneAlignedHeight, rounded to the Tegra rule's blocks, covers it).
                    image::GobLayout::DesktopGpu => {
                        let padded =
                            u64::from(heights[i]) + top.get(i).unwrap_or(&0) + bottom.get(i).unwrap_or(&0);
                        let rows = if interlaced { padded.div_ceil(2) } else { padded };
                        image::desktop_block_linear_log2_gobs(u32::try_from(rows).unwrap_or(u32::MAX))
                    }
                    image::GobLayout::Tegra => image::block_linear_log2_gobs(aligned_heights[i]),
                }),
                gob,
            })
        })
        .collect()
}

/// The rectangle of plane `p` (pixels, half-open), from the first plane's rectangle `r`.
fn plane_rect(r: &NvSciBufRect, first: &PlaneGeometry, p: &PlaneGeometry) -> (u64, u64, u64, u64) {
    let (w0, h0) = (u64::from(first.width), u64::from(first.height));
    let (w, h) = (u64::from(p.width), u64::from(p.height));
    let x0 = r.x0 * w / w0;
    let y0 = r.y0 * h / h0;
    let x1 = (r.x1 * w).div_ceil(w0).min(w);
    let y1 = (r.y1 * h).div_ceil(h0).min(h);
    (x0, y0, x1.max(x0), y1.max(y0))
}

/// One checked transfer: the object's planes, each plane's rectangle, the caller's pitches.
struct Transfer {
    planes: Vec<(PlaneGeometry, (u64, u64, u64, u64))>,
    base: *mut u8,
    mem_len: u64,
}

/// Runs the documented checks; `ptrs` are the caller's per-plane buffers.
///
/// # Safety
/// `obj` is NULL or a live object handle of this mock; `rect` is NULL or readable; `ptrs`,
/// `sizes`, `pitches` are NULL or hold `PlaneCount` readable entries.
unsafe fn prepare(
    obj: NvSciBufObj,
    rect: *const NvSciBufRect,
    ptrs: *const *const c_void,
    sizes: *const u32,
    pitches: *const u32,
    write: bool,
) -> Res<Transfer> {
    // SAFETY: forwarded contract.
    let o = unsafe { obj::get(obj) }?;
    if ptrs.is_null() || sizes.is_null() || pitches.is_null() {
        return bad();
    }
    let planes = geometry(o)?;
    if !o.attrs().get(NvSciBufGeneralAttrKey_NeedCpuAccess).is_some_and(Value::bool) {
        return Err(NvSciError_NotPermitted);
    }
    if write && o.perm() != NvSciBufAccessPerm_ReadWrite {
        return Err(NvSciError_NotPermitted);
    }
    let first = planes[0];
    let whole = NvSciBufRect { x0: 0, y0: 0, x1: u64::from(first.width), y1: u64::from(first.height) };
    let r = if rect.is_null() {
        whole
    } else {
        // SAFETY: `rect` is non-NULL and readable (contract).
        unsafe { rect.read_unaligned() }
    };
    if r.x0 >= r.x1 || r.y0 >= r.y1 || r.x1 > whole.x1 || r.y1 > whole.y1 {
        return bad();
    }
    let mut out = Vec::with_capacity(planes.len());
    for (i, p) in planes.iter().enumerate() {
        // SAFETY: the arrays hold PlaneCount entries (contract).
        let (ptr, size, pitch) = unsafe { (ptrs.add(i).read(), sizes.add(i).read(), pitches.add(i).read()) };
        let pr = plane_rect(&r, &first, p);
        let row = (pr.2 - pr.0) * p.bytes_per_pixel;
        let rows = pr.3 - pr.1;
        let pitch = u64::from(pitch);
        if ptr.is_null() || pitch < row || pitch.checked_mul(rows).is_none_or(|need| u64::from(size) < need) {
            return bad();
        }
        out.push((*p, pr));
    }
    let (base, mem_len) = o.host_memory();
    Ok(Transfer { planes: out, base, mem_len })
}

impl Transfer {
    /// Copies every plane, in runs contiguous on both sides:
    /// `copy(plane, object byte offset, caller byte offset, len)`, the caller's offset being
    /// `row * pitches[plane] + byte in the row`.
    fn each_run(&self, pitches: *const u32, mut copy: impl FnMut(usize, u64, u64, u64)) -> Res {
        for (i, (p, (x0, y0, x1, y1))) in self.planes.iter().enumerate() {
            // SAFETY: `prepare` read the same PlaneCount entries.
            let pitch = u64::from(unsafe { pitches.add(i).read() });
            let bpp = p.bytes_per_pixel;
            let row_len = (x1 - x0) * bpp;
            for y in *y0..*y1 {
                let mut done = 0;
                while done < row_len {
                    let xb = x0 * bpp + done;
                    let len = p.run(xb, row_len - done);
                    let at = p.byte_offset(xb, y);
                    if at.checked_add(len).is_none_or(|end| end > self.mem_len) {
                        return Err(NvSciError_Overflow);
                    }
                    copy(i, at, (y - y0) * pitch + done, len);
                    done += len;
                }
            }
        }
        Ok(())
    }
}

pub(crate) unsafe extern "C" fn put_pixels(
    obj: NvSciBufObj,
    rect: *const NvSciBufRect,
    src_ptrs: *mut *const c_void,
    src_sizes: *const u32,
    src_pitches: *const u32,
) -> NvSciError {
    guard("NvSciBufObjPutPixels", || {
        // SAFETY: the caller's contract of NvSciBufObjPutPixels.
        let t = unsafe { prepare(obj, rect, src_ptrs.cast_const(), src_sizes, src_pitches, true) }?;
        t.each_run(src_pitches, |i, at, from, len| {
            // SAFETY: `prepare` checked plane `i`'s pointer non-NULL and its size at least
            // `pitch * rows`, so `from + len` (within row `< rows`, `done + len <= row <= pitch`)
            // lies inside it; `at + len` lies inside the object's memory (`each_run`). `copy`
            // allows the caller's buffer to overlap the object's memory.
            unsafe {
                let src = src_ptrs.add(i).read().cast::<u8>().add(from as usize);
                std::ptr::copy(src, t.base.add(at as usize), len as usize);
            }
        })
    })
}

pub(crate) unsafe extern "C" fn get_pixels(
    obj: NvSciBufObj,
    rect: *const NvSciBufRect,
    dst_ptrs: *mut *mut c_void,
    dst_sizes: *const u32,
    dst_pitches: *const u32,
) -> NvSciError {
    guard("NvSciBufObjGetPixels", || {
        // SAFETY: the caller's contract of NvSciBufObjGetPixels.
        let t = unsafe { prepare(obj, rect, dst_ptrs.cast_const().cast(), dst_sizes, dst_pitches, false) }?;
        t.each_run(dst_pitches, |i, at, to, len| {
            // SAFETY: as in `put_pixels`, with the caller's buffer as the destination.
            unsafe {
                let dst = dst_ptrs.add(i).read().cast::<u8>().add(to as usize);
                std::ptr::copy(t.base.add(at as usize).cast_const(), dst, len as usize);
            }
        })
    })
}
