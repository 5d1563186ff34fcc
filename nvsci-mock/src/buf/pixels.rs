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

use super::image::{self, PlaneGeometry, GOB_HEIGHT, GOB_WIDTH};
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

/// Rows of one plane copied together: the rows of one GOB row of a field (block-linear), or
/// up to [`GOB_HEIGHT`] rows of a field (pitch-linear).
#[derive(Clone, Copy, Debug)]
struct Batch {
    /// Offset of the field from the plane's start.
    field_base: u64,
    /// The field rows `r0..r0 + rows`.
    r0: u64,
    rows: usize,
    /// Image row of field row `r0`, and image rows between consecutive field rows.
    y: u64,
    step: u64,
}

/// The batches of rows `y0..y1` of plane `p`, in memory order.
fn batches(p: &PlaneGeometry, y0: u64, y1: u64) -> Vec<Batch> {
    let mut out = Vec::new();
    for (field_base, rows, first_y, step) in p.field_rows(y0, y1) {
        let mut r = rows.start;
        while r < rows.end {
            // Up to the end of the GOB row (block-linear), or 8 rows (pitch-linear).
            let end = ((r / GOB_HEIGHT + 1) * GOB_HEIGHT).min(rows.end);
            out.push(Batch {
                field_base,
                r0: r,
                rows: (end - r) as usize,
                y: first_y + (r - rows.start) * step,
                step,
            });
            r = end;
        }
    }
    out
}

/// The object's memory, handed out in short slices that are bounds-checked against it.
#[derive(Clone, Copy, Debug)]
struct ObjMem {
    base: *mut u8,
    len: u64,
}

impl ObjMem {
    /// Bytes `at..at + len` of the object, `Err(Overflow)` past its end.
    ///
    /// # Safety
    /// The object's memory is readable for the duration of `'a`.
    unsafe fn bytes<'a>(&self, at: u64, len: usize) -> Res<&'a [u8]> {
        if at.checked_add(len as u64).is_none_or(|end| end > self.len) {
            return Err(NvSciError_Overflow);
        }
        // SAFETY: `at + len <= self.len` lies inside the object's memory (`host_memory`), which
        // is readable (contract).
        Ok(unsafe { std::slice::from_raw_parts(self.base.add(at as usize), len) })
    }

    /// Bytes `at..at + len` of the object, writable, `Err(Overflow)` past its end.
    ///
    /// # Safety
    /// The object's memory is writable for the duration of `'a`, nothing else reads or writes
    /// these bytes meanwhile, and no other slice of them is alive.
    #[allow(clippy::mut_from_ref)]
    unsafe fn bytes_mut<'a>(&self, at: u64, len: usize) -> Res<&'a mut [u8]> {
        if at.checked_add(len as u64).is_none_or(|end| end > self.len) {
            return Err(NvSciError_Overflow);
        }
        // SAFETY: inside the object's memory as above; exclusive (contract).
        Ok(unsafe { std::slice::from_raw_parts_mut(self.base.add(at as usize), len) })
    }
}

/// One direction of the copy between the object's memory and the rows of a batch on the
/// caller's side (each row starting at the rectangle's first byte).
trait Mover {
    /// Moves `len` bytes between object byte `at` and bytes `col..col + len` of batch row `row`.
    fn span(&mut self, at: u64, row: usize, col: usize, len: usize) -> Res;

    /// Moves one GOB column of batch rows `0..rows`: bytes `col..col + 64` of batch row `i`
    /// and, in the GOB at object byte `gob`, the four 16-byte pieces at `row_offsets[i] +
    /// pieces[q]`.
    fn gob(
        &mut self,
        gob: u64,
        rows: usize,
        col: usize,
        row_offsets: &[usize; 8],
        pieces: &[usize; 4],
    ) -> Res;
}

/// A put: caller rows into the object, with non-temporal stores when `stream` (see
/// [`STREAM_MIN_BYTES`]).
struct Put<'a> {
    mem: ObjMem,
    rows: [&'a [u8]; GOB_HEIGHT as usize],
    stream: bool,
}

/// A get: the object into caller rows.
struct Get<'a> {
    mem: ObjMem,
    rows: [&'a mut [u8]; GOB_HEIGHT as usize],
}

/// `dst.copy_from_slice(src)` in 64-byte pieces the compiler turns into vector moves: a row is
/// a few KiB, where the C library's `memmove` takes `rep movsb`, which some CPUs (AMD EPYC
/// measured) run at a fraction of the speed when the destination is not 64-byte aligned, as a
/// caller's buffer need not be.
fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    let mut d = dst.chunks_exact_mut(64);
    let mut s = src.chunks_exact(64);
    for (d, s) in d.by_ref().zip(s.by_ref()) {
        d.copy_from_slice(s);
    }
    d.into_remainder().copy_from_slice(s.remainder());
}

/// Writes bytes `col..col + 64` of each of `rows` into GOB `dst`, row `i`'s four 16-byte pieces
/// at `row_offsets[i] + pieces[q]`.
fn lay_out_gob(dst: &mut [u8], rows: &[&[u8]], col: usize, row_offsets: &[usize; 8], pieces: &[usize; 4]) {
    for (row, &ro) in rows.iter().zip(row_offsets) {
        let src = &row[col..col + GOB_WIDTH as usize];
        for (piece, &po) in src.chunks_exact(16).zip(pieces) {
            dst[ro + po..ro + po + 16].copy_from_slice(piece);
        }
    }
}

/// Puts of at least this many bytes write the object with non-temporal stores (x86_64): a
/// frame that large does not stay in the caches anyway, and a cached store first reads each
/// line it fills (a block-linear put of a 4K RGBA frame ran at a sixth of `memcpy`'s speed,
/// which streams).
const STREAM_MIN_BYTES: usize = 4 << 20;

/// `dst.copy_from_slice(src)` with non-temporal 16-byte stores from `dst`'s first 16-byte
/// boundary on (the bytes before it and after the last whole 16 stored as usual). The caller
/// orders the stores with [`store_fence`] before anyone else may read `dst`.
#[cfg(all(target_arch = "x86_64", not(miri)))]
fn copy_streaming(dst: &mut [u8], src: &[u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    let head = dst.as_ptr().align_offset(16).min(dst.len());
    let (dh, db) = dst.split_at_mut(head);
    let (sh, sb) = src.split_at(head);
    dh.copy_from_slice(sh);
    let mut d = db.chunks_exact_mut(16);
    let mut s = sb.chunks_exact(16);
    for (d, s) in d.by_ref().zip(s.by_ref()) {
        // SAFETY: SSE2 is part of every x86_64 CPU; `s` is 16 readable bytes (an unaligned
        // load), `d` 16 writable bytes starting on a 16-byte boundary (after the head).
        unsafe { _mm_stream_si128(d.as_mut_ptr().cast::<__m128i>(), _mm_loadu_si128(s.as_ptr().cast())) };
    }
    d.into_remainder().copy_from_slice(s.remainder());
}

/// [`copy_bytes`] where non-temporal stores are not available.
#[cfg(not(all(target_arch = "x86_64", not(miri))))]
fn copy_streaming(dst: &mut [u8], src: &[u8]) {
    copy_bytes(dst, src);
}

/// Orders the non-temporal stores of [`copy_streaming`] before the stores that follow (the
/// call's return, a fence's signal).
fn store_fence() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: SSE2 is part of every x86_64 CPU; `sfence` touches no memory.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

const GOB_BYTES: usize = super::image::GOB_SIZE as usize;

impl Mover for Put<'_> {
    fn span(&mut self, at: u64, row: usize, col: usize, len: usize) -> Res {
        // SAFETY: a put writes the object's memory, which the caller's buffers do not overlap
        // (`prepare`); the slice lives for this copy only.
        let dst = unsafe { self.mem.bytes_mut(at, len) }?;
        let src = &self.rows[row][col..col + len];
        if self.stream {
            copy_streaming(dst, src);
        } else {
            copy_bytes(dst, src);
        }
        Ok(())
    }

    fn gob(
        &mut self,
        gob: u64,
        rows: usize,
        col: usize,
        row_offsets: &[usize; 8],
        pieces: &[usize; 4],
    ) -> Res {
        // SAFETY: as in `span`.
        let dst = unsafe { self.mem.bytes_mut(gob, GOB_BYTES) }?;
        if self.stream && rows == GOB_HEIGHT as usize {
            // The whole GOB: laid out in a scratch GOB first, then streamed in whole lines (a
            // line filled by non-temporal stores from different rows at different times would
            // be written out in parts).
            let mut whole = [0u8; GOB_BYTES];
            lay_out_gob(&mut whole, &self.rows[..rows], col, row_offsets, pieces);
            copy_streaming(dst, &whole);
        } else {
            lay_out_gob(dst, &self.rows[..rows], col, row_offsets, pieces);
        }
        Ok(())
    }
}

impl Mover for Get<'_> {
    fn span(&mut self, at: u64, row: usize, col: usize, len: usize) -> Res {
        // SAFETY: a get reads the object's memory; the slice lives for this copy only.
        let src = unsafe { self.mem.bytes(at, len) }?;
        copy_bytes(&mut self.rows[row][col..col + len], src);
        Ok(())
    }

    fn gob(
        &mut self,
        gob: u64,
        rows: usize,
        col: usize,
        row_offsets: &[usize; 8],
        pieces: &[usize; 4],
    ) -> Res {
        // SAFETY: as in `span`.
        let src = unsafe { self.mem.bytes(gob, GOB_BYTES) }?;
        for (row, &ro) in self.rows[..rows].iter_mut().zip(row_offsets) {
            let dst = &mut row[col..col + GOB_WIDTH as usize];
            for (piece, &po) in dst.chunks_exact_mut(16).zip(pieces) {
                piece.copy_from_slice(&src[ro + po..ro + po + 16]);
            }
        }
        Ok(())
    }
}

/// Copies the rows of `batch` of plane `p` (rectangle bytes `x_byte..x_byte + row_len` of each
/// row, relative to the image's pixel (0, 0)) through `m`: whole GOB columns a GOB at a time,
/// the bytes before the first and after the last whole column a row and a 16-byte piece at a
/// time; a pitch-linear row in one run.
fn copy_batch(p: &PlaneGeometry, batch: &Batch, x_byte: u64, row_len: u64, m: &mut impl Mover) -> Res {
    let image_y = |i: usize| batch.y + i as u64 * batch.step;
    let Some((base, block_bytes)) = p.gob_row(batch.field_base, batch.r0) else {
        for i in 0..batch.rows {
            m.span(p.byte_offset(x_byte, image_y(i)), i, 0, row_len as usize)?;
        }
        return Ok(());
    };
    let lead = p.left * p.bytes_per_pixel;
    // Bytes `xa..xb` of the padded rows; whole GOB columns `ca..cb`.
    let (xa, xb) = (x_byte + lead, x_byte + lead + row_len);
    let (ca, cb) = (xa.div_ceil(GOB_WIDTH), xb / GOB_WIDTH);
    // Bytes `from..to` of each row (padded), 16-byte piece by piece.
    let pieces_of = |m: &mut dyn FnMut(u64, usize, usize, usize) -> Res, from: u64, to: u64| -> Res {
        for i in 0..batch.rows {
            let mut x = from;
            while x < to {
                let len = (16 - x % 16).min(to - x);
                m(p.byte_offset(x - lead, image_y(i)), i, (x - xa) as usize, len as usize)?;
                x += len;
            }
        }
        Ok(())
    };
    if ca >= cb {
        return pieces_of(&mut |at, i, c, l| m.span(at, i, c, l), xa, xb);
    }
    pieces_of(&mut |at, i, c, l| m.span(at, i, c, l), xa, ca * GOB_WIDTH)?;
    let mut row_offsets = [0usize; 8];
    for (i, o) in row_offsets.iter_mut().enumerate().take(batch.rows) {
        *o = p.row_offset(batch.r0 + i as u64) as usize;
    }
    let pieces = [0, 16, 32, 48].map(|x| p.piece_offset(x) as usize);
    for c in ca..cb {
        m.gob(base + c * block_bytes, batch.rows, (c * GOB_WIDTH - xa) as usize, &row_offsets, &pieces)?;
    }
    pieces_of(&mut |at, i, c, l| m.span(at, i, c, l), cb * GOB_WIDTH, xb)
}

/// Interleaves one row: per pixel `C` bytes of `a`, then `C` bytes of `b`.
fn interleave_row<const C: usize>(dst: &mut [u8], a: &[u8], b: &[u8]) {
    for ((d, a), b) in dst.chunks_exact_mut(2 * C).zip(a.chunks_exact(C)).zip(b.chunks_exact(C)) {
        d[..C].copy_from_slice(a);
        d[C..].copy_from_slice(b);
    }
}

/// Splits one interleaved row of 8-bit components into `a` and `b` (the inverse of
/// [`interleave_row`]): each pixel read as one little-endian `u16` whose low byte is the first
/// component, 16 pixels at a time through fixed-size arrays, which the compiler turns into
/// vector shifts and packs (a byte-by-byte loop stays scalar).
fn split_row8(src: &[u8], a: &mut [u8], b: &mut [u8]) {
    let (blocks, rest) = src.as_chunks::<32>();
    let (ab, ar) = a.as_chunks_mut::<16>();
    let (bb, br) = b.as_chunks_mut::<16>();
    for ((s, a), b) in blocks.iter().zip(ab.iter_mut()).zip(bb.iter_mut()) {
        let w: [u16; 16] = std::array::from_fn(|i| u16::from_le_bytes([s[2 * i], s[2 * i + 1]]));
        *a = std::array::from_fn(|i| w[i] as u8);
        *b = std::array::from_fn(|i| (w[i] >> 8) as u8);
    }
    let tail = ar.len().min(br.len());
    for ((s, a), b) in rest.chunks_exact(2).zip(&mut ar[..tail]).zip(&mut br[..tail]) {
        (*a, *b) = (s[0], s[1]);
    }
}

/// [`split_row8`] for 16-bit components: each pixel one little-endian `u32`.
fn split_row16(src: &[u8], a: &mut [u8], b: &mut [u8]) {
    let (blocks, rest) = src.as_chunks::<32>();
    let (ab, ar) = a.as_chunks_mut::<16>();
    let (bb, br) = b.as_chunks_mut::<16>();
    for ((s, a), b) in blocks.iter().zip(ab.iter_mut()).zip(bb.iter_mut()) {
        let w: [u32; 8] =
            std::array::from_fn(|i| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]));
        *a = std::array::from_fn(|i| (w[i / 2] >> (8 * (i % 2))) as u8);
        *b = std::array::from_fn(|i| (w[i / 2] >> (16 + 8 * (i % 2))) as u8);
    }
    for ((s, a), b) in rest.chunks_exact(4).zip(ar.chunks_exact_mut(2)).zip(br.chunks_exact_mut(2)) {
        a.copy_from_slice(&s[..2]);
        b.copy_from_slice(&s[2..]);
    }
}

/// [`interleave_row`] for components of `comp` bytes (1 and 2 with the component size known
/// to the compiler).
fn interleave(comp: usize, dst: &mut [u8], a: &[u8], b: &[u8]) {
    match comp {
        1 => interleave_row::<1>(dst, a, b),
        2 => interleave_row::<2>(dst, a, b),
        c => {
            for ((d, a), b) in dst.chunks_exact_mut(2 * c).zip(a.chunks_exact(c)).zip(b.chunks_exact(c)) {
                d[..c].copy_from_slice(a);
                d[c..].copy_from_slice(b);
            }
        }
    }
}

/// Splits one interleaved row into `a` and `b`, components of `comp` bytes (the inverse of
/// [`interleave`]).
fn split(comp: usize, src: &[u8], a: &mut [u8], b: &mut [u8]) {
    match comp {
        1 => split_row8(src, a, b),
        2 => split_row16(src, a, b),
        c => {
            for ((s, a), b) in src.chunks_exact(2 * c).zip(a.chunks_exact_mut(c)).zip(b.chunks_exact_mut(c)) {
                a.copy_from_slice(&s[..c]);
                b.copy_from_slice(&s[c..]);
            }
        }
    }
}

impl Transfer {
    /// User plane `u`'s pointer and size in bytes.
    fn user(&self, u: usize) -> (*mut u8, usize) {
        (self.users[u].ptr, self.users[u].size as usize)
    }

    /// Copies every plane between the object and the caller's user planes (`write`: into the
    /// object), a batch of rows at a time ([`copy_batch`]); an interleaved chroma plane's rows
    /// go through a scratch batch interleaved from (or split into) its two user planes.
    fn copy(&self, write: bool) -> Res {
        let bytes: u64 = self
            .planes
            .iter()
            .map(|(p, (x0, y0, x1, y1), _)| (x1 - x0) * p.bytes_per_pixel * (y1 - y0))
            .sum();
        let stream = write && bytes >= STREAM_MIN_BYTES as u64;
        let r = self.copy_planes(write, stream);
        if stream {
            store_fence();
        }
        r
    }

    /// [`copy`](Self::copy)'s planes, a put with non-temporal stores when `stream`.
    fn copy_planes(&self, write: bool, stream: bool) -> Res {
        let mem = ObjMem { base: self.base, len: self.mem_len };
        for (p, (x0, y0, x1, y1), side) in &self.planes {
            let bpp = p.bytes_per_pixel;
            let row_len = ((x1 - x0) * bpp) as usize;
            let batches = batches(p, *y0, *y1);
            // Rect row `y - y0` of user plane `u`, `len` bytes.
            let pitch = |u: usize| self.users[u].pitch as usize;
            match (*side, write) {
                (Side::User(u), true) => {
                    let (ptr, size) = self.user(u);
                    // SAFETY: `prepare` checked the user plane non-NULL, `size` bytes long and
                    // clear of the object's memory and of the other user planes; a put only
                    // reads it.
                    let user = unsafe { std::slice::from_raw_parts(ptr.cast_const(), size) };
                    for b in &batches {
                        let mut m = Put { mem, rows: [&[][..]; 8], stream };
                        for (i, row) in m.rows[..b.rows].iter_mut().enumerate() {
                            *row = &user[(b.y + i as u64 * b.step - y0) as usize * pitch(u)..][..row_len];
                        }
                        copy_batch(p, b, x0 * bpp, row_len as u64, &mut m)?;
                    }
                }
                (Side::User(u), false) => {
                    let (ptr, size) = self.user(u);
                    // SAFETY: as above; a get writes it, and nothing else refers to it here.
                    let user = unsafe { std::slice::from_raw_parts_mut(ptr, size) };
                    let mut rows: Vec<&mut [u8]> = user
                        .chunks_mut(pitch(u))
                        .take((y1 - y0) as usize)
                        .map(|r| &mut r[..row_len])
                        .collect();
                    for b in &batches {
                        let mut m = Get { mem, rows: Default::default() };
                        for (i, row) in m.rows[..b.rows].iter_mut().enumerate() {
                            *row = std::mem::take(&mut rows[(b.y + i as u64 * b.step - y0) as usize]);
                        }
                        copy_batch(p, b, x0 * bpp, row_len as u64, &mut m)?;
                    }
                }
                (Side::Interleaved { first, second, comp }, true) => {
                    let (a, b) = (self.user(first), self.user(second));
                    // SAFETY: `prepare` checked both user planes non-NULL, `size` bytes long and
                    // clear of the object's memory; a put only reads them.
                    let (a, b) = unsafe {
                        (
                            std::slice::from_raw_parts(a.0.cast_const(), a.1),
                            std::slice::from_raw_parts(b.0.cast_const(), b.1),
                        )
                    };
                    let half = row_len / 2;
                    let mut scratch = vec![0u8; row_len * GOB_HEIGHT as usize];
                    for bt in &batches {
                        let user_row = |i: usize| (bt.y + i as u64 * bt.step - y0) as usize;
                        for (i, row) in scratch.chunks_exact_mut(row_len).take(bt.rows).enumerate() {
                            let (ra, rb) = (user_row(i) * pitch(first), user_row(i) * pitch(second));
                            interleave(comp as usize, row, &a[ra..ra + half], &b[rb..rb + half]);
                        }
                        let mut m = Put { mem, rows: [&[][..]; 8], stream };
                        for (row, s) in m.rows.iter_mut().zip(scratch.chunks_exact(row_len)).take(bt.rows) {
                            *row = s;
                        }
                        copy_batch(p, bt, x0 * bpp, row_len as u64, &mut m)?;
                    }
                }
                (Side::Interleaved { first, second, comp }, false) => {
                    let (a, b) = (self.user(first), self.user(second));
                    // SAFETY: as above; a get writes them, the two are distinct and do not
                    // overlap (`prepare`), and nothing else refers to them here.
                    let (a, b) = unsafe {
                        (std::slice::from_raw_parts_mut(a.0, a.1), std::slice::from_raw_parts_mut(b.0, b.1))
                    };
                    let half = row_len / 2;
                    let mut scratch = vec![0u8; row_len * GOB_HEIGHT as usize];
                    for bt in &batches {
                        let user_row = |i: usize| (bt.y + i as u64 * bt.step - y0) as usize;
                        let mut m = Get { mem, rows: Default::default() };
                        for (row, s) in m.rows.iter_mut().zip(scratch.chunks_exact_mut(row_len)).take(bt.rows)
                        {
                            *row = s;
                        }
                        copy_batch(p, bt, x0 * bpp, row_len as u64, &mut m)?;
                        for (i, row) in scratch.chunks_exact(row_len).take(bt.rows).enumerate() {
                            let (ra, rb) = (user_row(i) * pitch(first), user_row(i) * pitch(second));
                            split(comp as usize, row, &mut a[ra..ra + half], &mut b[rb..rb + half]);
                        }
                    }
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
