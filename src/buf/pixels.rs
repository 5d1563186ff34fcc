//! CPU pixel access to image objects: [`BufObj::put_pixels`] / [`BufObj::get_pixels`] over
//! `NvSciBufObjPutPixels` / `NvSciBufObjGetPixels`, which copy between caller memory laid out
//! pitch-linear and the object's planes in whatever layout they have (pitch-linear or
//! block-linear, progressive or interlaced, padded or not).

use super::{key, BufObj, ImageLayout, PlaneLayout, ScanType};
use crate::error::{invalid, Error, Result};
use crate::result::buf as nvbuf;
use core::ffi::c_void;
use nvsci_sys as sys;

/// Most planes an image has (`NV_SCI_BUF_IMAGE_MAX_PLANES`).
const MAX_PLANES: usize = 3;

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
    /// Checks a pixel transfer of `rect` (`None`: the whole image) with `count` caller buffers,
    /// buffer `i` of `plane(i) = (bytes, pitch)`, before the library sees it; returns the C
    /// rectangle.
    fn check_pixels(
        &self,
        rect: Option<PixelRect>,
        count: usize,
        plane: impl Fn(usize) -> (usize, u32),
        write: bool,
    ) -> Result<sys::NvSciBufRect> {
        let planes = self.planes()?;
        let Some(first) = planes.first() else {
            return Err(invalid("buffer", "pixel access needs a plane-based image"));
        };
        if count != planes.len() {
            return Err(invalid(
                "planes",
                format!("{count} plane buffers given for an image of {} planes", planes.len()),
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
        let rect = rect.unwrap_or(PixelRect::new(0, 0, first.width, first.height));
        if rect.x0 >= rect.x1 || rect.y0 >= rect.y1 || rect.x1 > first.width || rect.y1 > first.height {
            return Err(invalid(
                "rect",
                format!(
                    "columns {}..{}, rows {}..{} is empty or outside the {}x{} image",
                    rect.x0, rect.x1, rect.y0, rect.y1, first.width, first.height
                ),
            ));
        }
        for (i, p) in planes.iter().enumerate() {
            let (len, pitch) = plane(i);
            if !p.bits_per_pixel.is_multiple_of(8) {
                return Err(Error::Unsupported {
                    what: "pixel access",
                    reason: crate::error::UnsupportedReason::SubBytePixels,
                });
            }
            let r = rect.in_plane(first, p);
            let row = u64::from(r.width()) * u64::from(p.bits_per_pixel / 8);
            if u64::from(pitch) < row {
                return Err(invalid("pitch", format!("plane {i}: pitch {pitch} < {row} bytes per row")));
            }
            let need = u64::from(pitch) * u64::from(r.height());
            if (len as u64) < need {
                return Err(invalid(
                    "planes",
                    format!("plane {i}: {len} bytes < {need} ({} rows at pitch {pitch})", r.height()),
                ));
            }
        }
        Ok(sys::NvSciBufRect {
            x0: rect.x0.into(),
            y0: rect.y0.into(),
            x1: rect.x1.into(),
            y1: rect.y1.into(),
        })
    }

    /// Writes `planes` (one per image plane) into the rectangle `rect` of the image (`None`:
    /// the whole image), whatever the image's layout: the library swizzles block-linear planes.
    ///
    /// Checked here first, each with a typed error: the buffer asked for CPU access
    /// ([`Error::InvalidArgument`] naming `NvSciBufGeneralAttrKey_NeedCpuAccess`), this reference
    /// is read-write ([`Error::PermissionDenied`]), one buffer per plane (`planes`), the
    /// rectangle non-empty and inside the image (`rect`), each pitch at least the rectangle's
    /// row (`pitch`) and each buffer at least `pitch * rows` (`planes`). The call holds the
    /// allocation's CPU borrow exclusively, like [`cpu_write`](Self::cpu_write).
    pub fn put_pixels(&self, rect: Option<PixelRect>, planes: &[PlaneSrc<'_>]) -> Result<()> {
        let rect =
            self.check_pixels(rect, planes.len(), |i| (planes[i].data.len(), planes[i].pitch), true)?;
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
            // SAFETY: the object is alive; one entry of `ptrs`, `sizes`, `pitches` per plane (the
            // count was checked against PlaneCount) describes a caller buffer of at least
            // `sizes[i]` readable bytes (`sizes[i] <= len`) covering the plane's rectangle at its
            // pitch (checked above); no CPU borrow of the allocation exists while the library
            // writes it.
            unsafe {
                nvbuf::obj_put_pixels(
                    self.module().0.lib.buf(),
                    self.as_raw(),
                    &rect,
                    &mut ptrs[..n],
                    &sizes[..n],
                    &pitches[..n],
                )
            }?;
            // The CPU wrote the rectangle: flush it where the buffer needs it ("after writes").
            self.flush_rect(&rect)
        })
    }

    /// Flushes the bytes of `rect` in every plane when the reconciled list sets
    /// `CpuNeedSwCacheCoherency` (nothing otherwise): the rows it covers of a progressive,
    /// unpadded pitch-linear plane, the whole plane otherwise (block-linear tiles interleave rows,
    /// interlaced fields alternate them, top padding moves them).
    fn flush_rect(&self, rect: &sys::NvSciBufRect) -> Result<()> {
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
        // The rectangle's corners came from `u32`s (`check_pixels`).
        let c = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        let r = PixelRect::new(c(rect.x0), c(rect.y0), c(rect.x1), c(rect.y1));
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

    /// Reads the rectangle `rect` of the image (`None`: the whole image) into `planes` (one per
    /// image plane), whatever the image's layout. Checked as [`put_pixels`](Self::put_pixels),
    /// except that a read-only reference may read; holds a shared CPU borrow.
    pub fn get_pixels(&self, rect: Option<PixelRect>, planes: &mut [PlaneDst<'_>]) -> Result<()> {
        let rect =
            self.check_pixels(rect, planes.len(), |i| (planes[i].data.len(), planes[i].pitch), false)?;
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
            self.flush_rect(&rect)?;
            // SAFETY: the object is alive; one entry of `ptrs`, `sizes`, `pitches` per plane
            // describes a caller buffer, exclusively borrowed through `planes`, of at least
            // `sizes[i]` writable bytes covering the plane's rectangle at its pitch (checked above).
            unsafe {
                nvbuf::obj_get_pixels(
                    self.module().0.lib.buf(),
                    self.as_raw(),
                    &rect,
                    &mut ptrs[..n],
                    &sizes[..n],
                    &pitches[..n],
                )
            }
        })
    }
}
