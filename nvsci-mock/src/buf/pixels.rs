//! `NvSciBufObjPutPixels` / `NvSciBufObjGetPixels`: copies between the caller's *user planes*
//! (pitch-linear at the caller's pitch) and the planes of an image object, swizzling and
//! deswizzling block-linear planes (layout in [`super::image`]).
//!
//! User planes (nvscibuf.h, DRIVE OS 6.0.5 / 6.0.6 / 6.0.10, `srcPtrs` / `dstPtrs`): "For RGBA,
//! RAW and single plane YUV images, it is assumed that the array will have single member
//! representing single user plane. For YUV surfaces with more than one plane, it is assumed that
//! user provides separate plane pointers for Y, U and V planes (where Y is the first plane, U is
//! the second plane, and V is the third plane)". So a semi-planar image (Y8 + V8U8, two NvSciBuf
//! planes) takes three user planes, which the mock interleaves into (and splits out of) the
//! chroma plane in the order its color format gives (see [`chroma_order`]); a planar image
//! stored Y, V, U takes its user planes Y, U, V all the same. NVIDIA's sample
//! `nvmedia_6x/utils/scibuf_utils.c` (`ReadInput`, "Output surface is in semi-planar format")
//! passes three planar pointers this way.
//!
//! The surface type (`NvSciSurfType_YUV` / `RGBA` / `RAW`) comes from the planes' color formats,
//! grouped as the `NvSciBufAttrValColorFmt` enum groups them ("RAW PACKED", "Semiplanar
//! formats", "PLANAR formats", "Packed YUV formats", "RGBA PACKED").
//!
//! Checks, in this order (each failure leaves the object unchanged); every refusal is one the
//! header lists under `NvSciError_BadParameter` unless said otherwise:
//! * `bufObj` a live object; the pointer, size and pitch arrays non-NULL ("srcPtrs is NULL",
//!   "srcPtrSizes is NULL", "srcPitches is NULL").
//! * The object is an image ("NvSciBufType is not NvSciBufType_Image") whose planes have a whole
//!   number of bytes per pixel (`NotSupported` for packed sub-byte formats).
//! * CPU access: "CPU access is not requested in unreconciled NvSciBufAttrList of the peer calling
//!   this API via NvSciBufGeneralAttrKey_NeedCpuAccess" (the reconciled `NeedCpuAccess`); for a
//!   put, "NvSciBufAccessPerm_ReadWrite is not requested ... via
//!   NvSciBufGeneralAttrKey_RequiredPerm" (the handle's permission).
//! * An image of planes the mock cannot map onto user planes (more than one plane of an RGBA or
//!   RAW surface; a multi-plane YUV surface other than luma + interleaved chroma or luma + U + V):
//!   `NotSupported` ("bufObj represents an image that this API does not understand").
//! * The rectangle: "rect is non-NULL and NvSciBufSurfType is NvSciSurfType_YUV"; for RGBA and RAW
//!   "x0 or x1 is greater than plane width", "y0 or y1 is greater than plane height", "x0 > x1",
//!   "y0 > y1", and the mock's own refusal of an empty rectangle. NULL is the whole image.
//! * Per user plane: "An array member of srcPtrs is NULL", "An array member of srcPtrSizes is
//!   zero", "An array member of srcPitches is zero", a pitch shorter than the rectangle's row
//!   ("width in bytes represented by (x1 - x0) is greater than that specified in srcPitches"),
//!   "The size of the plane as specified in srcPtrSizes is smaller than the source surface to be
//!   copied" (the mock's reading of that size: `pitch * rows`, as the sample computes
//!   `pBuffSizes[i]`).
//! * "srcPtrs for any of the planes overlap" and "srcPtrs overlap with the memory represented by
//!   bufObj" (each user plane taken as its `size` bytes).
//!
//! Row `r` of user plane `i` is at `ptrs[i] + r * pitches[i]` in the caller's buffer. Paddings
//! are outside the image: the rectangle addresses the image's own pixels.

use super::image::{self, PlaneGeometry, GOB_WIDTH};
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

/// `NvSciBufSurfType` of an image, from its planes' color formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Surface {
    Yuv,
    Rgba,
    Raw,
}

/// The surface type of a color format: the enum's "RAW PACKED" group (Bayer formats) is RAW,
/// "Semiplanar formats", "PLANAR formats" and "Packed YUV formats" are YUV, the rest RGBA.
fn surface_of(fmt: NvSciBufAttrValColorFmt) -> Surface {
    if (NvSciColor_U8V8..=NvSciColor_A16Y16U16V16).contains(&fmt) {
        Surface::Yuv
    } else if fmt > NvSciColor_LowerBound && fmt < NvSciColor_U8V8 {
        Surface::Raw
    } else {
        Surface::Rgba
    }
}

fn is_luma(fmt: NvSciBufAttrValColorFmt) -> bool {
    (NvSciColor_Y8..=NvSciColor_Y16).contains(&fmt)
}

fn is_u(fmt: NvSciBufAttrValColorFmt) -> bool {
    [NvSciColor_U8, NvSciColor_U10, NvSciColor_U12, NvSciColor_U16].contains(&fmt)
}

fn is_v(fmt: NvSciBufAttrValColorFmt) -> bool {
    [NvSciColor_V8, NvSciColor_V10, NvSciColor_V12, NvSciColor_V16].contains(&fmt)
}

/// Whether U comes first in memory in each pixel of an interleaved chroma format, `None` for
/// other formats. nvscibuf.h (NvSciBuf 2.11, `NvSciBufAttrValColorFmt`) documents the bit order
/// of three: "for NvSciColor_V8U8 pattern VVVVVVVV UUUUUUUU bit 15 8 7 0", the same for
/// `NvSciColor_U8_V8`, and for `NvSciColor_V10U10` V in bits 31..16, U in bits 15..0: U in the
/// low bits, so first in memory on a little-endian machine. The others follow by the same
/// reading of their names (the mock's reading: the name without `_` lists components from the
/// high bits down, the `_` form the other way, as the documented pair shows).
fn chroma_order(fmt: NvSciBufAttrValColorFmt) -> Option<bool> {
    #[allow(non_upper_case_globals)]
    match fmt {
        NvSciColor_V8U8 | NvSciColor_U8_V8 | NvSciColor_V10U10 | NvSciColor_V12U12 | NvSciColor_V16U16 => {
            Some(true)
        }
        NvSciColor_U8V8 | NvSciColor_V8_U8 | NvSciColor_U10V10 | NvSciColor_U12V12 | NvSciColor_U16V16 => {
            Some(false)
        }
        _ => None,
    }
}

/// Where the caller's side of one NvSciBuf plane is.
#[derive(Clone, Copy, Debug)]
enum Side {
    /// User plane `0` as it is.
    User(usize),
    /// User planes `first` and `second`, interleaved per pixel, `comp` bytes each.
    Interleaved { first: usize, second: usize, comp: u64 },
}

/// One user plane: the caller's buffer, its size and pitch in bytes.
#[derive(Clone, Copy, Debug)]
struct UserPlane {
    ptr: *mut u8,
    size: u64,
    pitch: u64,
}

/// A rectangle of pixels, half-open: `(x0, y0, x1, y1)`.
type Rect = (u64, u64, u64, u64);

/// How an image's planes map onto user planes: its surface type, per NvSciBuf plane its caller
/// side, per user plane `(NvSciBuf plane, bytes per pixel)`.
type UserPlanes = (Surface, Vec<Side>, Vec<(usize, u64)>);

/// One checked transfer: the object's planes with their rectangles and caller sides.
struct Transfer {
    planes: Vec<(PlaneGeometry, Rect, Side)>,
    users: Vec<UserPlane>,
    base: *mut u8,
    mem_len: u64,
}

/// Maps the planes onto user planes: per NvSciBuf plane its caller side, and per user plane
/// `(NvSciBuf plane, bytes per pixel)`. `Err(NotSupported)` for images the mock cannot map.
fn user_planes(formats: &[NvSciBufAttrValColorFmt], planes: &[PlaneGeometry]) -> Res<UserPlanes> {
    let surface = if formats.iter().any(|f| surface_of(*f) == Surface::Yuv) {
        Surface::Yuv
    } else {
        surface_of(formats[0])
    };
    match (surface, planes.len()) {
        (_, 1) => Ok((surface, vec![Side::User(0)], vec![(0, planes[0].bytes_per_pixel)])),
        (Surface::Yuv, 2) if is_luma(formats[0]) => {
            let u_first = chroma_order(formats[1]).ok_or(NvSciError_NotSupported)?;
            let comp = planes[1].bytes_per_pixel / 2;
            let (first, second) = if u_first { (1, 2) } else { (2, 1) };
            Ok((
                surface,
                vec![Side::User(0), Side::Interleaved { first, second, comp }],
                vec![(0, planes[0].bytes_per_pixel), (1, comp), (1, comp)],
            ))
        }
        (Surface::Yuv, 3) if is_luma(formats[0]) => {
            let (u, v) = match (formats[1], formats[2]) {
                (a, b) if is_u(a) && is_v(b) => (1, 2),
                (a, b) if is_v(a) && is_u(b) => (2, 1),
                _ => return Err(NvSciError_NotSupported),
            };
            let mut sides = vec![Side::User(0); 3];
            sides[u] = Side::User(1);
            sides[v] = Side::User(2);
            Ok((
                surface,
                sides,
                vec![
                    (0, planes[0].bytes_per_pixel),
                    (u, planes[u].bytes_per_pixel),
                    (v, planes[v].bytes_per_pixel),
                ],
            ))
        }
        _ => Err(NvSciError_NotSupported),
    }
}

/// Runs the documented checks; `ptrs` are the caller's user planes.
///
/// # Safety
/// `obj` is NULL or a live object handle of this mock; `rect` is NULL or readable; `ptrs`,
/// `sizes`, `pitches` are NULL or hold one readable entry per user plane of the image.
unsafe fn prepare(
    obj: NvSciBufObj,
    rect: *const NvSciBufRect,
    ptrs: *const *mut u8,
    sizes: *const u32,
    pitches: *const u32,
    write: bool,
) -> Res<Transfer> {
    // SAFETY: forwarded contract.
    let o = unsafe { obj::get(obj) }?;
    // "srcPtrs is NULL", "srcPtrSizes is NULL", "srcPitches is NULL" (BadParameter).
    if ptrs.is_null() || sizes.is_null() || pitches.is_null() {
        return bad();
    }
    let planes = geometry(o)?;
    // "CPU access is not requested in unreconciled NvSciBufAttrList of the peer calling this API
    // via NvSciBufGeneralAttrKey_NeedCpuAccess" (BadParameter, NvSciBufObjPutPixels /
    // NvSciBufObjGetPixels, nvscibuf.h).
    if !o.attrs().get(NvSciBufGeneralAttrKey_NeedCpuAccess).is_some_and(Value::bool) {
        return bad();
    }
    // "NvSciBufAccessPerm_ReadWrite is not requested in unreconciled NvSciBufAttrList of the
    // peer calling this API via NvSciBufGeneralAttrKey_RequiredPerm" (BadParameter,
    // NvSciBufObjPutPixels): the handle's permission is what this process was granted.
    if write && o.perm() != NvSciBufAccessPerm_ReadWrite {
        return bad();
    }
    let formats = o.attrs().get(NvSciBufImageAttrKey_PlaneColorFormat).map(Value::u32s).unwrap_or_default();
    if formats.len() < planes.len() {
        return bad();
    }
    let (surface, sides, users) = user_planes(&formats, &planes)?;
    let first = planes[0];
    let whole = (0, 0, u64::from(first.width), u64::from(first.height));
    let r = if rect.is_null() {
        whole
    } else {
        // "rect is non-NULL and NvSciBufSurfType is NvSciSurfType_YUV" (BadParameter); "rect can
        // only be non-NULL for NvSciSurfType_RGBA or NvSciSurfType_RAW, it must be NULL for
        // NvSciSurfType_YUV".
        if surface == Surface::Yuv {
            return bad();
        }
        // SAFETY: `rect` is non-NULL and readable (contract).
        let r = unsafe { rect.read_unaligned() };
        // "x0 or x1 is greater than plane width", "y0 or y1 is greater than plane height",
        // "x0 > x1", "y0 > y1"; an empty rectangle is the mock's own refusal.
        if r.x0 >= r.x1 || r.y0 >= r.y1 || r.x1 > whole.2 || r.y1 > whole.3 {
            return bad();
        }
        (r.x0, r.y0, r.x1, r.y1)
    };
    let mut user = Vec::with_capacity(users.len());
    for (i, &(plane, bytes_per_pixel)) in users.iter().enumerate() {
        // SAFETY: the arrays hold one entry per user plane (contract).
        let (ptr, size, pitch) = unsafe { (ptrs.add(i).read(), sizes.add(i).read(), pitches.add(i).read()) };
        let pr = if plane == 0 {
            r
        } else {
            (0, 0, u64::from(planes[plane].width), u64::from(planes[plane].height))
        };
        let row = (pr.2 - pr.0) * bytes_per_pixel;
        let rows = pr.3 - pr.1;
        let (size, pitch) = (u64::from(size), u64::from(pitch));
        // "An array member of srcPtrs is NULL", "An array member of srcPtrSizes is zero", "An
        // array member of srcPitches is zero", "width in bytes represented by (x1 - x0) is
        // greater than that specified in srcPitches", "The size of the plane as specified in
        // srcPtrSizes is smaller than the source surface to be copied" (BadParameter).
        if ptr.is_null()
            || size == 0
            || pitch == 0
            || pitch < row
            || pitch.checked_mul(rows).is_none_or(|need| size < need)
        {
            return bad();
        }
        user.push(UserPlane { ptr, size, pitch });
    }
    let (base, mem_len) = o.host_memory();
    // "srcPtrs for any of the planes overlap", "srcPtrs overlap with the memory represented by
    // bufObj" (BadParameter).
    let span = |p: *const u8, len: u64| (p as usize as u64, (p as usize as u64).saturating_add(len));
    let overlap = |a: (u64, u64), b: (u64, u64)| a.0 < b.1 && b.0 < a.1;
    let mem = span(base, mem_len);
    for (i, a) in user.iter().enumerate() {
        let sa = span(a.ptr, a.size);
        if overlap(sa, mem) || user[..i].iter().any(|b| overlap(sa, span(b.ptr, b.size))) {
            return bad();
        }
    }
    let planes = planes
        .iter()
        .zip(sides)
        .enumerate()
        .map(|(i, (p, side))| {
            (*p, if i == 0 { r } else { (0, 0, u64::from(p.width), u64::from(p.height)) }, side)
        })
        .collect();
    Ok(Transfer { planes, users: user, base, mem_len })
}

impl Transfer {
    /// Copies every plane between the object and the caller's user planes (`write`: into the
    /// object), in runs contiguous on both sides; an interleaved chroma plane goes through a
    /// scratch row buffer that is interleaved from (or split into) its two user planes.
    fn copy(&self, write: bool) -> Res {
        for (p, (x0, y0, x1, y1), side) in &self.planes {
            let bpp = p.bytes_per_pixel;
            let row_len = (x1 - x0) * bpp;
            let rows = y1 - y0;
            let mut scratch = Vec::new();
            let (caller, pitch) = match *side {
                Side::User(u) => (self.users[u].ptr, self.users[u].pitch),
                Side::Interleaved { first, second, comp } => {
                    scratch = vec![0u8; (row_len * rows) as usize];
                    if write {
                        self.interleave(&mut scratch, row_len, rows, first, second, comp, true);
                    }
                    (scratch.as_mut_ptr(), row_len)
                }
            };
            for y in *y0..*y1 {
                let mut done = 0;
                // Block-linear rows: whole GOB columns (four 16-byte pieces at fixed offsets) and
                // aligned 16-byte pieces are addressed from the row's base; the rest, and every
                // pitch-linear run, through `byte_offset`.
                let block = p.block_row(y);
                let lead = p.left * bpp;
                let pieces = [0, 16, 32, 48].map(|x| p.piece_offset(x));
                while done < row_len {
                    let xb = x0 * bpp + done;
                    let x = xb + lead;
                    let left = row_len - done;
                    if let Some((base, block_bytes)) = block.filter(|_| x % 16 == 0 && left >= 16) {
                        let column = base + (x / GOB_WIDTH) * block_bytes;
                        let whole = x % GOB_WIDTH == 0 && left >= GOB_WIDTH;
                        let (first, count) =
                            if whole { (0, 4) } else { (((x % GOB_WIDTH) / 16) as usize, 1) };
                        let end = column + pieces[first + count - 1] + 16;
                        if end > self.mem_len {
                            return Err(NvSciError_Overflow);
                        }
                        for (k, &piece) in pieces[first..first + count].iter().enumerate() {
                            // SAFETY: as below: the user side lies inside the user plane (or
                            // `scratch`): `done + 16 * (k + 1) <= row_len <= pitch`; the object
                            // side ends at or before `end <= mem_len` (the pieces' offsets
                            // increase with `k`).
                            unsafe {
                                let c = caller.add(((y - y0) * pitch + done) as usize + 16 * k);
                                let m = self.base.add((column + piece) as usize);
                                if write {
                                    std::ptr::copy_nonoverlapping(c.cast_const(), m, 16);
                                } else {
                                    std::ptr::copy_nonoverlapping(m.cast_const(), c, 16);
                                }
                            }
                        }
                        done += 16 * count as u64;
                        continue;
                    }
                    let len = p.run(xb, left);
                    let at = p.byte_offset(xb, y);
                    if at.checked_add(len).is_none_or(|end| end > self.mem_len) {
                        return Err(NvSciError_Overflow);
                    }
                    // SAFETY: `prepare` checked the user plane's pointer non-NULL and its size at
                    // least `pitch * rows`, so `(y - y0) * pitch + done + len` (`done + len <=
                    // row <= pitch`) lies inside it (or inside `scratch`, `row_len * rows`
                    // bytes); `at + len` lies inside the object's memory (checked above); the
                    // caller's buffers do not overlap the object's memory (`prepare`).
                    unsafe {
                        let c = caller.add(((y - y0) * pitch + done) as usize);
                        let m = self.base.add(at as usize);
                        if write {
                            std::ptr::copy_nonoverlapping(c.cast_const(), m, len as usize);
                        } else {
                            std::ptr::copy_nonoverlapping(m.cast_const(), c, len as usize);
                        }
                    }
                    done += len;
                }
            }
            if let (false, Side::Interleaved { first, second, comp }) = (write, *side) {
                self.interleave(&mut scratch, row_len, rows, first, second, comp, false);
            }
        }
        Ok(())
    }

    /// Fills `scratch` (`rows` rows of `row_len` bytes) from user planes `first` and `second`
    /// (`to_scratch`), or splits it into them: each pixel is `comp` bytes of `first`, then `comp`
    /// of `second`.
    #[allow(clippy::too_many_arguments)]
    fn interleave(
        &self,
        scratch: &mut [u8],
        row_len: u64,
        rows: u64,
        first: usize,
        second: usize,
        comp: u64,
        to_scratch: bool,
    ) {
        let (a, b) = (self.users[first], self.users[second]);
        let (comp_us, pixels) = (comp as usize, (row_len / (2 * comp)) as usize);
        for y in 0..rows {
            let row = &mut scratch[(y * row_len) as usize..][..row_len as usize];
            for (plane, offset) in [(a, 0usize), (b, comp_us)] {
                let at = (y * plane.pitch) as usize;
                for x in 0..pixels {
                    let s = x * 2 * comp_us + offset;
                    // SAFETY: `prepare` checked the user plane holds `rows` rows of at least
                    // `pixels * comp` bytes at its pitch.
                    unsafe {
                        let u = plane.ptr.add(at + x * comp_us);
                        if to_scratch {
                            std::ptr::copy_nonoverlapping(u.cast_const(), row[s..].as_mut_ptr(), comp_us);
                        } else {
                            std::ptr::copy_nonoverlapping(row[s..].as_ptr(), u, comp_us);
                        }
                    }
                }
            }
        }
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
        // SAFETY: the caller's contract of NvSciBufObjPutPixels; the mock only reads through
        // the source pointers.
        let t = unsafe { prepare(obj, rect, src_ptrs.cast_const().cast(), src_sizes, src_pitches, true) }?;
        t.copy(true)
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
        t.copy(false)
    })
}
