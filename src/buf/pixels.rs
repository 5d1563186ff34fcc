//! CPU pixel access to image objects: [`BufObj::put_pixels`] / [`BufObj::get_pixels`] over
//! `NvSciBufObjPutPixels` / `NvSciBufObjGetPixels`, which copy between caller memory laid out
//! pitch-linear and the object's planes in whatever layout they have (pitch-linear or
//! block-linear, progressive or interlaced, padded or not).
//!
//! The caller's memory is a list of *user planes*, which are not the image's NvSciBuf planes
//! (nvscibuf.h, `srcPtrs` / `dstPtrs`): "For RGBA, RAW and single plane YUV images, it is assumed
//! that the array will have single member representing single user plane. For YUV surfaces with
//! more than one plane, it is assumed that user provides separate plane pointers for Y, U and V
//! planes (where Y is the first plane, U is the second plane, and V is the third plane)". So an
//! NV12 image (planes Y8 and V8U8) takes three user planes, Y, U and V, which the library
//! interleaves; [`BufObj::put_nv12`] / [`BufObj::get_nv12`] and [`SplitChroma`] take and give
//! NV12's interleaved chroma rows instead. [`BufObj::pixel_planes`] describes the user planes of
//! an image. A rectangle is accepted for RGBA and RAW images only: "rect can only be non-NULL
//! for NvSciSurfType_RGBA or NvSciSurfType_RAW, it must be NULL for NvSciSurfType_YUV".

use super::{key, BufObj, ImageLayout, PlaneLayout, ScanType};
use crate::error::{invalid, Error, Result};
use crate::result::buf as nvbuf;
use core::ffi::c_void;
use nvsci_sys as sys;

/// Most planes an image has (`NV_SCI_BUF_IMAGE_MAX_PLANES`), and most user planes of a pixel
/// transfer (Y, U and V).
const MAX_PLANES: usize = 3;

/// One user plane of a pixel transfer ([`BufObj::put_pixels`] / [`BufObj::get_pixels`]): the
/// caller's buffer holds `height` rows of `width * bytes_per_pixel` bytes (for a whole image).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PixelPlane {
    /// What the plane holds.
    pub kind: PixelPlaneKind,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Bytes per pixel in the caller's buffer (a U or V plane split out of an interleaved chroma
    /// plane has half the chroma plane's).
    pub bytes_per_pixel: u32,
}

/// What a user plane holds ([`PixelPlane::kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PixelPlaneKind {
    /// The one plane of an RGBA, RAW or single-plane YUV image.
    Whole,
    /// Luma of a multi-plane YUV image.
    Y,
    /// Chroma U of a multi-plane YUV image.
    U,
    /// Chroma V of a multi-plane YUV image.
    V,
}

/// The NvSciBuf surface type (`NvSciSurfType_YUV` / `RGBA` / `RAW`) of a color format, grouped as
/// nvscibuf.h groups `NvSciBufAttrValColorFmt` ("RAW PACKED" Bayer formats; "Semiplanar
/// formats", "PLANAR formats", "Packed YUV formats"; the rest RGBA).
fn is_yuv(format: super::ColorFormat) -> bool {
    (sys::NvSciColor_U8V8..=sys::NvSciColor_A16Y16U16V16).contains(&format.0)
}

/// The user planes of `planes` (the image's NvSciBuf planes), as nvscibuf.h describes them, and
/// whether the image is a YUV surface; `None` where the header describes none (several planes
/// of an RGBA or RAW image, YUV planes other than luma + interleaved chroma or luma + U + V).
fn user_planes(planes: &[PlaneLayout]) -> Option<(heapless::Vec<PixelPlane, MAX_PLANES>, bool)> {
    let yuv = planes.iter().any(|p| is_yuv(p.format));
    let plane = |kind, p: &PlaneLayout, bytes_per_pixel| PixelPlane {
        kind,
        width: p.width,
        height: p.height,
        bytes_per_pixel,
    };
    let bytes = |p: &PlaneLayout| p.bits_per_pixel / 8;
    let luma = |p: &PlaneLayout| (sys::NvSciColor_Y8..=sys::NvSciColor_Y16).contains(&p.format.0);
    let u = |p: &PlaneLayout| {
        [sys::NvSciColor_U8, sys::NvSciColor_U10, sys::NvSciColor_U12, sys::NvSciColor_U16]
            .contains(&p.format.0)
    };
    let v = |p: &PlaneLayout| {
        [sys::NvSciColor_V8, sys::NvSciColor_V10, sys::NvSciColor_V12, sys::NvSciColor_V16]
            .contains(&p.format.0)
    };
    let semi = |p: &PlaneLayout| (sys::NvSciColor_U8V8..=sys::NvSciColor_V16U16).contains(&p.format.0);
    let list: [Option<PixelPlane>; MAX_PLANES] = match planes {
        [one] => [Some(plane(PixelPlaneKind::Whole, one, bytes(one))), None, None],
        [y, c] if yuv && luma(y) && semi(c) => [
            Some(plane(PixelPlaneKind::Y, y, bytes(y))),
            Some(plane(PixelPlaneKind::U, c, bytes(c) / 2)),
            Some(plane(PixelPlaneKind::V, c, bytes(c) / 2)),
        ],
        [y, a, b] if yuv && luma(y) && ((u(a) && v(b)) || (v(a) && u(b))) => {
            let (pu, pv) = if u(a) { (a, b) } else { (b, a) };
            [
                Some(plane(PixelPlaneKind::Y, y, bytes(y))),
                Some(plane(PixelPlaneKind::U, pu, bytes(pu))),
                Some(plane(PixelPlaneKind::V, pv, bytes(pv))),
            ]
        }
        _ => return None,
    };
    Some((list.into_iter().flatten().collect(), yuv))
}

/// A rectangle of image pixels in the first plane's coordinates: columns `x0..x1`, rows
/// `y0..y1` (half-open), relative to the image's pixel (0, 0) (paddings are outside the image).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PixelRect {
    /// First column.
    pub x0: u32,
    /// First row.
    pub y0: u32,
    /// One past the last column.
    pub x1: u32,
    /// One past the last row.
    pub y1: u32,
}

impl PixelRect {
    /// The rectangle of columns `x0..x1` and rows `y0..y1`.
    pub const fn new(x0: u32, y0: u32, x1: u32, y1: u32) -> Self {
        Self { x0, y0, x1, y1 }
    }

    /// Columns in the rectangle.
    pub const fn width(&self) -> u32 {
        self.x1.saturating_sub(self.x0)
    }

    /// Rows in the rectangle.
    pub const fn height(&self) -> u32 {
        self.y1.saturating_sub(self.y0)
    }

    /// The part of `plane` that this rectangle of the first plane `first` covers: scaled by the
    /// plane's size relative to the first plane and rounded outwards (`x0 * w / w0` to
    /// `ceil(x1 * w / w0)`), so that a half-width chroma plane covers the chroma of the luma
    /// rectangle.
    pub fn in_plane(&self, first: &PlaneLayout, plane: &PlaneLayout) -> PixelRect {
        let scale = |v: u32, n: u32, d: u32, up: bool| -> u32 {
            let p = u64::from(v) * u64::from(n);
            let d = u64::from(d.max(1));
            (if up { p.div_ceil(d) } else { p / d }).min(u64::from(n)) as u32
        };
        let x0 = scale(self.x0, plane.width, first.width, false);
        let y0 = scale(self.y0, plane.height, first.height, false);
        let x1 = scale(self.x1, plane.width, first.width, true).max(x0);
        let y1 = scale(self.y1, plane.height, first.height, true).max(y0);
        PixelRect { x0, y0, x1, y1 }
    }
}

/// One plane's pixels in caller memory, the source of a put: row `r` of the plane's rectangle
/// starts at `data[r * pitch]`.
#[derive(Clone, Copy, Debug)]
pub struct PlaneSrc<'a> {
    /// The pixels; at least `pitch * rows` bytes.
    pub data: &'a [u8],
    /// Bytes from one row to the next; at least the rectangle's row in bytes.
    pub pitch: u32,
}

/// One plane's pixels in caller memory, the destination of a get: row `r` of the plane's
/// rectangle is written at `data[r * pitch]`; the bytes between rows are left as they are.
#[derive(Debug)]
pub struct PlaneDst<'a> {
    /// The pixels; at least `pitch * rows` bytes.
    pub data: &'a mut [u8],
    /// Bytes from one row to the next; at least the rectangle's row in bytes.
    pub pitch: u32,
}

impl BufObj {
    /// The user planes a pixel transfer of this image takes, in order
    /// ([`put_pixels`](Self::put_pixels) / [`get_pixels`](Self::get_pixels)): one for an RGBA, RAW or
    /// single-plane YUV image, Y, U and V for a YUV image of two or three planes (whatever the
    /// order of its NvSciBuf planes).
    ///
    /// Errors: not a plane-based image ([`Error::InvalidArgument`] naming `buffer`), planes
    /// nvscibuf.h gives no user planes for ([`Error::Unsupported`]).
    pub fn pixel_planes(&self) -> Result<heapless::Vec<PixelPlane, MAX_PLANES>> {
        Ok(self.pixel_layout()?.0)
    }

    /// [`pixel_planes`](Self::pixel_planes), whether the image is a YUV surface, and its
    /// NvSciBuf planes.
    fn pixel_layout(
        &self,
    ) -> Result<(heapless::Vec<PixelPlane, MAX_PLANES>, bool, heapless::Vec<PlaneLayout, 3>)> {
        let planes = self.planes()?;
        if planes.is_empty() {
            return Err(invalid("buffer", "pixel access needs a plane-based image"));
        }
        if planes.iter().any(|p| !p.bits_per_pixel.is_multiple_of(8)) {
            return Err(Error::Unsupported {
                what: "pixel access",
                reason: crate::error::UnsupportedReason::SubBytePixels,
            });
        }
        let Some((users, yuv)) = user_planes(&planes) else {
            return Err(Error::Unsupported {
                what: "pixel access",
                reason: crate::error::UnsupportedReason::NoUserPlanes,
            });
        };
        Ok((users, yuv, planes))
    }

    /// Checks a pixel transfer of `rect` (`None`: the whole image) with `count` caller buffers,
    /// buffer `i` of `plane(i) = (address, bytes, pitch)`, before the library sees it; returns the
    /// C rectangle (`None`: NULL, the whole image) and the rectangle to flush.
    fn check_pixels(
        &self,
        rect: Option<PixelRect>,
        count: usize,
        plane: impl Fn(usize) -> (usize, usize, u32),
        write: bool,
    ) -> Result<(Option<sys::NvSciBufRect>, PixelRect)> {
        let (users, yuv, planes) = self.pixel_layout()?;
        let first = planes[0];
        if count != users.len() {
            return Err(invalid(
                "planes",
                format!(
                    "{count} plane buffers given for an image that takes {} user planes ({})",
                    users.len(),
                    if users.len() == 1 { "one" } else { "Y, U and V" }
                ),
            ));
        }
        let list = self.attr_list()?;
        if !list.get_one(key::NEED_CPU_ACCESS)?.unwrap_or(false) {
            return Err(invalid(
                "NvSciBufGeneralAttrKey_NeedCpuAccess",
                "pixel access needs a buffer whose attribute lists asked for CPU access",
            ));
        }
        if write && self.perm() != super::Perm::ReadWrite {
            return Err(Error::PermissionDenied("put_pixels needs a read-write buffer reference"));
        }
        // "rect can only be non-NULL for NvSciSurfType_RGBA or NvSciSurfType_RAW, it must be NULL
        // for NvSciSurfType_YUV" (NvSciBufObjPutPixels / NvSciBufObjGetPixels, nvscibuf.h).
        if yuv && rect.is_some() {
            return Err(invalid(
                "rect",
                "a rectangle is accepted for RGBA and RAW images only: pass None (the whole image) for a YUV image",
            ));
        }
        let whole = PixelRect::new(0, 0, first.width, first.height);
        let r = rect.unwrap_or(whole);
        if r.x0 >= r.x1 || r.y0 >= r.y1 || r.x1 > first.width || r.y1 > first.height {
            return Err(invalid(
                "rect",
                format!(
                    "columns {}..{}, rows {}..{} is empty or outside the {}x{} image",
                    r.x0, r.x1, r.y0, r.y1, first.width, first.height
                ),
            ));
        }
        let mut spans: heapless::Vec<(usize, usize), MAX_PLANES> = heapless::Vec::new();
        for (i, p) in users.iter().enumerate() {
            let (at, len, pitch) = plane(i);
            // The rectangle is the first plane's (a rectangle is given for one-plane images
            // only); the other user planes are whole.
            let (w, h) = if i == 0 { (r.width(), r.height()) } else { (p.width, p.height) };
            let row = u64::from(w) * u64::from(p.bytes_per_pixel);
            if u64::from(pitch) < row {
                return Err(invalid("pitch", format!("plane {i}: pitch {pitch} < {row} bytes per row")));
            }
            let need = u64::from(pitch) * u64::from(h);
            if (len as u64) < need {
                return Err(invalid(
                    "planes",
                    format!("plane {i}: {len} bytes < {need} ({h} rows at pitch {pitch})"),
                ));
            }
            // "srcPtrs for any of the planes overlap" (BadParameter): shared slices may alias.
            if spans.iter().any(|&(a, l)| at < a + l && a < at + len) {
                return Err(invalid("planes", format!("plane {i} overlaps another plane's buffer")));
            }
            let _ = spans.push((at, len));
        }
        let c = rect.map(|r| sys::NvSciBufRect {
            x0: r.x0.into(),
            y0: r.y0.into(),
            x1: r.x1.into(),
            y1: r.y1.into(),
        });
        Ok((c, r))
    }

    /// Writes the user planes `planes` into the rectangle `rect` of the image (`None`: the whole
    /// image), whatever the image's layout: the library swizzles block-linear planes and
    /// interleaves chroma.
    ///
    /// Debug software only: "The usage of this API must be restricted for use in debug software
    /// only and must not be used in production software" (`NvSciBufObjPutPixels`, nvscibuf.h,
    /// DRIVE OS 6.0.10). A production CPU producer of block-linear frames writes pitch-linear
    /// host memory and lets the GPU lay it out: `Producer::upload_planes` of a ring's CUDA
    /// producer (feature `cuda`), one `cuMemcpy2DAsync` per plane into its mapped array.
    ///
    /// `planes` are the user planes of nvscibuf.h ([`pixel_planes`](Self::pixel_planes)): one
    /// for an RGBA, RAW or single-plane YUV image; Y, U and V for a YUV image of more planes (an
    /// NV12 image takes three buffers, not its two NvSciBuf planes: see
    /// [`put_nv12`](Self::put_nv12) for interleaved chroma). `rect` must be `None` for a YUV
    /// image ("it must be NULL for NvSciSurfType_YUV").
    ///
    /// Checked here first, each with a typed error: the buffer asked for CPU access
    /// ([`Error::InvalidArgument`] naming `NvSciBufGeneralAttrKey_NeedCpuAccess`), this reference
    /// is read-write ([`Error::PermissionDenied`]), one buffer per user plane (`planes`), no
    /// rectangle on a YUV image, the rectangle non-empty and inside the image (`rect`), each
    /// pitch at least the rectangle's row (`pitch`), each buffer at least `pitch * rows` and no
    /// two buffers overlapping (`planes`). The call holds the allocation's CPU borrow
    /// exclusively, like [`cpu_write`](Self::cpu_write).
    pub fn put_pixels(&self, rect: Option<PixelRect>, planes: &[PlaneSrc<'_>]) -> Result<()> {
        let (c_rect, flush) = self.check_pixels(
            rect,
            planes.len(),
            |i| (planes[i].data.as_ptr() as usize, planes[i].data.len(), planes[i].pitch),
            true,
        )?;
        let mut ptrs = [core::ptr::null::<c_void>(); MAX_PLANES];
        let mut sizes = [0u32; MAX_PLANES];
        let mut pitches = [0u32; MAX_PLANES];
        for (i, p) in planes.iter().enumerate().take(MAX_PLANES) {
            ptrs[i] = p.data.as_ptr().cast();
            sizes[i] = u32::try_from(p.data.len()).unwrap_or(u32::MAX);
            pitches[i] = p.pitch;
        }
        let n = planes.len().min(MAX_PLANES);
        self.with_cpu_borrow(true, || {
            // SAFETY: the object is alive; one entry of `ptrs`, `sizes`, `pitches` per user plane
            // (the count was checked against the image's user planes) describes a caller buffer
            // of at least `sizes[i]` readable bytes (`sizes[i] <= len`) covering the plane's
            // rectangle at its pitch (checked above), none overlapping another; no CPU borrow of
            // the allocation exists while the library writes it.
            unsafe {
                nvbuf::obj_put_pixels(
                    self.module().0.lib.buf(),
                    self.as_raw(),
                    c_rect.as_ref(),
                    &mut ptrs[..n],
                    &sizes[..n],
                    &pitches[..n],
                )
            }?;
            // The CPU wrote the rectangle: flush it where the buffer needs it ("after writes").
            self.flush_rect(&flush)
        })
    }

    /// Writes a whole NV12-style frame: luma `y` and the interleaved chroma rows `uv` (per chroma
    /// pixel the U component, then the V component, each as wide as the image's chroma
    /// components), split here into the U and V user planes [`put_pixels`](Self::put_pixels)
    /// takes (scratch buffers allocated per call). For a YUV image of two or three planes.
    pub fn put_nv12(&self, y: PlaneSrc<'_>, uv: PlaneSrc<'_>) -> Result<()> {
        let mut split = SplitChroma::for_image(self)?;
        split.split_from(uv)?;
        let [u, v] = split.planes();
        self.put_pixels(None, &[y, u, v])
    }

    /// Reads a whole NV12-style frame into luma `y` and interleaved chroma rows `uv` (the layout
    /// [`put_nv12`](Self::put_nv12) takes), through U and V scratch buffers.
    pub fn get_nv12(&self, y: PlaneDst<'_>, uv: PlaneDst<'_>) -> Result<()> {
        let mut split = SplitChroma::for_image(self)?;
        {
            let [u, v] = split.planes_mut();
            self.get_pixels(None, &mut [y, u, v])?;
        }
        split.interleave_into(uv)
    }

    /// Flushes the bytes of `rect` (in the first plane's coordinates; the other planes' part
    /// scaled, [`PixelRect::in_plane`]) in every plane when the reconciled list sets
    /// `CpuNeedSwCacheCoherency` (nothing otherwise): the rows it covers of a progressive,
    /// unpadded pitch-linear plane, the whole plane otherwise (block-linear tiles interleave rows,
    /// interlaced fields alternate them, top padding moves them).
    fn flush_rect(&self, r: &PixelRect) -> Result<()> {
        if !self.needs_cpu_flush() {
            return Ok(());
        }
        let planes = self.planes()?;
        let Some(first) = planes.first() else { return Ok(()) };
        let list = self.attr_list()?;
        // Rows map to `offset + row * pitch` only in a progressive pitch-linear plane without
        // top padding (`PlaneOffset` is the padded plane's first byte; an interlaced plane's
        // rows alternate between two fields): anything else is flushed whole.
        let pitch_linear = list.get_one(key::IMAGE_LAYOUT)? == Some(ImageLayout::PitchLinear)
            && list.get_one(key::SCAN_TYPE)? != Some(ScanType::Interlace)
            && list.get(key::TOP_PADDING)?.iter().all(|&t| t == 0);
        for p in &planes {
            let (start, len) = if pitch_linear {
                let pr = r.in_plane(first, p);
                (
                    p.offset + u64::from(pr.y0) * u64::from(p.pitch),
                    u64::from(pr.height()) * u64::from(p.pitch),
                )
            } else {
                (p.offset, p.aligned_size)
            };
            if len > 0 {
                self.flush_cpu_cache(start, len)?;
            }
        }
        Ok(())
    }

    /// Reads the rectangle `rect` of the image (`None`: the whole image) into the user planes
    /// `planes` ([`pixel_planes`](Self::pixel_planes): Y, U and V for a multi-plane YUV image),
    /// whatever the image's layout. Checked as [`put_pixels`](Self::put_pixels), except that a
    /// read-only reference may read; holds a shared CPU borrow.
    ///
    /// Debug software only, as `NvSciBufObjGetPixels` is (nvscibuf.h, DRIVE OS 6.0.10: "must not
    /// be used in production software"); a production reader of block-linear frames reads the
    /// planes as CUDA arrays (textures of a ring's CUDA consumer).
    pub fn get_pixels(&self, rect: Option<PixelRect>, planes: &mut [PlaneDst<'_>]) -> Result<()> {
        let (c_rect, flush) = self.check_pixels(
            rect,
            planes.len(),
            |i| (planes[i].data.as_ptr() as usize, planes[i].data.len(), planes[i].pitch),
            false,
        )?;
        let mut ptrs = [core::ptr::null_mut::<c_void>(); MAX_PLANES];
        let mut sizes = [0u32; MAX_PLANES];
        let mut pitches = [0u32; MAX_PLANES];
        for (i, p) in planes.iter_mut().enumerate().take(MAX_PLANES) {
            ptrs[i] = p.data.as_mut_ptr().cast();
            sizes[i] = u32::try_from(p.data.len()).unwrap_or(u32::MAX);
            pitches[i] = p.pitch;
        }
        let n = planes.len().min(MAX_PLANES);
        self.with_cpu_borrow(false, || {
            // The CPU is about to read the rectangle: flush it where the buffer needs it
            // ("before reads").
            self.flush_rect(&flush)?;
            // SAFETY: the object is alive; one entry of `ptrs`, `sizes`, `pitches` per user plane
            // describes a caller buffer, exclusively borrowed through `planes`, of at least
            // `sizes[i]` writable bytes covering the plane's rectangle at its pitch (checked above).
            unsafe {
                nvbuf::obj_get_pixels(
                    self.module().0.lib.buf(),
                    self.as_raw(),
                    c_rect.as_ref(),
                    &mut ptrs[..n],
                    &sizes[..n],
                    &pitches[..n],
                )
            }
        })
    }
}

/// The U and V user planes of a YUV image's chroma, tightly packed, converted from and to
/// NV12-style interleaved chroma rows (per chroma pixel the U component, then the V component).
/// [`BufObj::put_nv12`] / [`BufObj::get_nv12`] use it; callers of
/// [`Producer::put_pixels`](crate::pipeline::Producer::put_pixels)-style calls that take user
/// planes use it to pass NV12 frames.
#[derive(Clone, Debug)]
pub struct SplitChroma {
    u: Vec<u8>,
    v: Vec<u8>,
    width: u32,
    height: u32,
    component: u32,
}

/// Splits one row of interleaved 8-bit chroma into `u` and `v`: each pixel read as one
/// little-endian `u16` (U in the low byte), 16 pixels at a time through fixed-size arrays, which
/// the compiler turns into vector shifts and packs (a byte-by-byte loop stays scalar).
fn split_row8(src: &[u8], u: &mut [u8], v: &mut [u8]) {
    let (blocks, rest) = src.as_chunks::<32>();
    let (ub, ur) = u.as_chunks_mut::<16>();
    let (vb, vr) = v.as_chunks_mut::<16>();
    for ((s, u), v) in blocks.iter().zip(ub.iter_mut()).zip(vb.iter_mut()) {
        let w: [u16; 16] = core::array::from_fn(|i| u16::from_le_bytes([s[2 * i], s[2 * i + 1]]));
        *u = core::array::from_fn(|i| w[i] as u8);
        *v = core::array::from_fn(|i| (w[i] >> 8) as u8);
    }
    for ((s, u), v) in rest.chunks_exact(2).zip(ur).zip(vr) {
        (*u, *v) = (s[0], s[1]);
    }
}

impl SplitChroma {
    /// Zeroed U and V planes of `width` x `height` chroma pixels, `component` bytes per
    /// component (1 for 8-bit chroma).
    pub fn new(width: u32, height: u32, component: u32) -> Self {
        let len = width as usize * height as usize * component as usize;
        Self { u: vec![0; len], v: vec![0; len], width, height, component }
    }

    /// Zeroed U and V planes shaped as the image's U and V user planes
    /// ([`BufObj::pixel_planes`]).
    pub fn for_image(obj: &BufObj) -> Result<Self> {
        let planes = obj.pixel_planes()?;
        match planes.iter().find(|p| p.kind == PixelPlaneKind::U) {
            Some(u) => Ok(Self::new(u.width, u.height, u.bytes_per_pixel)),
            None => Err(invalid("buffer", "NV12 access needs a YUV image of two or three planes")),
        }
    }

    /// Bytes in one row of interleaved chroma.
    fn row(&self) -> usize {
        self.width as usize * 2 * self.component as usize
    }

    /// Fills the U and V planes from interleaved chroma rows `uv` (row `r` at `uv.data[r *
    /// uv.pitch]`).
    pub fn split_from(&mut self, uv: PlaneSrc<'_>) -> Result<()> {
        self.check(uv.data.len(), uv.pitch)?;
        let (c, row_len) = (self.component as usize, self.row());
        let rows = uv.data.chunks(uv.pitch as usize).map(|r| &r[..row_len]);
        for ((row, u), v) in
            rows.zip(self.u.chunks_exact_mut(row_len / 2)).zip(self.v.chunks_exact_mut(row_len / 2))
        {
            if c == 1 {
                split_row8(row, u, v);
            } else {
                for ((s, u), v) in
                    row.chunks_exact(2 * c).zip(u.chunks_exact_mut(c)).zip(v.chunks_exact_mut(c))
                {
                    u.copy_from_slice(&s[..c]);
                    v.copy_from_slice(&s[c..]);
                }
            }
        }
        Ok(())
    }

    /// Writes the U and V planes into interleaved chroma rows `uv`; the bytes between rows are
    /// left as they are.
    pub fn interleave_into(&self, uv: PlaneDst<'_>) -> Result<()> {
        self.check(uv.data.len(), uv.pitch)?;
        let (c, row_len) = (self.component as usize, self.row());
        let rows = uv.data.chunks_mut(uv.pitch as usize).map(|r| &mut r[..row_len]);
        for ((row, u), v) in rows.zip(self.u.chunks_exact(row_len / 2)).zip(self.v.chunks_exact(row_len / 2))
        {
            // With the component size known to the compiler, the loop becomes vector unpacks.
            if c == 1 {
                for ((d, u), v) in row.chunks_exact_mut(2).zip(u).zip(v) {
                    (d[0], d[1]) = (*u, *v);
                }
            } else {
                for ((d, u), v) in row.chunks_exact_mut(2 * c).zip(u.chunks_exact(c)).zip(v.chunks_exact(c)) {
                    d[..c].copy_from_slice(u);
                    d[c..].copy_from_slice(v);
                }
            }
        }
        Ok(())
    }

    fn check(&self, len: usize, pitch: u32) -> Result<()> {
        let row = self.row();
        if (pitch as usize) < row {
            return Err(invalid("pitch", format!("interleaved chroma: pitch {pitch} < {row} bytes per row")));
        }
        let need = pitch as usize * self.height as usize;
        if len < need {
            return Err(invalid("planes", format!("interleaved chroma: {len} bytes < {need}")));
        }
        Ok(())
    }

    /// The U and V user planes, as sources of a put.
    pub fn planes(&self) -> [PlaneSrc<'_>; 2] {
        let pitch = self.width * self.component;
        [PlaneSrc { data: &self.u, pitch }, PlaneSrc { data: &self.v, pitch }]
    }

    /// The U and V user planes, as destinations of a get.
    pub fn planes_mut(&mut self) -> [PlaneDst<'_>; 2] {
        let pitch = self.width * self.component;
        [PlaneDst { data: &mut self.u, pitch }, PlaneDst { data: &mut self.v, pitch }]
    }
}
