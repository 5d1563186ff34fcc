//! Frame descriptions and the attribute lists they turn into.

use crate::buf::{
    BufAttr, BufAttrList, BufModule, BufType, ColorFormat, GpuCache, GpuId, ImageLayout, Perm, PlaneLayout,
    ScanType,
};
use crate::error::{invalid, Result};

/// What one frame of a ring holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameFormat {
    /// An unstructured buffer of `size` bytes.
    Raw {
        /// Bytes per frame.
        size: u64,
    },
    /// NV12: a full-resolution 8-bit luma plane and a half-resolution interleaved U/V plane
    /// (U in the low byte). Width and height must be even.
    ///
    /// `layout` is how the planes lie in memory. [`ImageLayout::PitchLinear`] (the default of
    /// [`FrameFormat::nv12`]): rows one after another, `pitch` bytes apart, so the frame's bytes
    /// ([`Producer::cpu_write`](super::Producer::cpu_write), a CUDA party's device address) are
    /// the pixels. [`ImageLayout::BlockLinear`] ([`FrameFormat::nv12_block_linear`]): the
    /// tiled layout Tegra's camera, ISP, VIC and CUDA arrays use, where a plane's raw bytes are
    /// swizzled; the CPU writes and reads its pixels with
    /// [`Producer::put_pixels`](super::Producer::put_pixels) /
    /// [`Consumer::get_pixels`](super::Consumer::get_pixels), and CUDA reads the planes as
    /// arrays (`CudaFrame::planes`). Block-linear frames need an NvSci backend (NVIDIA's
    /// library or the mock); the Vulkan backend refuses them.
    Nv12 {
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
        /// Pitch-linear or block-linear planes.
        layout: ImageLayout,
    },
    /// 8-bit RGBA, bytes R, G, B, A in memory, one plane.
    Rgba {
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
    },
}

impl FrameFormat {
    /// A pitch-linear NV12 format.
    pub const fn nv12(width: u32, height: u32) -> Self {
        FrameFormat::Nv12 { width, height, layout: ImageLayout::PitchLinear }
    }

    /// A block-linear NV12 format (NvSci backends only).
    pub const fn nv12_block_linear(width: u32, height: u32) -> Self {
        FrameFormat::Nv12 { width, height, layout: ImageLayout::BlockLinear }
    }

    /// How the image planes lie in memory (`None` for raw frames; RGBA frames are
    /// pitch-linear).
    pub fn image_layout(&self) -> Option<ImageLayout> {
        match *self {
            FrameFormat::Raw { .. } => None,
            FrameFormat::Nv12 { layout, .. } => Some(layout),
            FrameFormat::Rgba { .. } => Some(ImageLayout::PitchLinear),
        }
    }

    /// The same frames laid out pitch-linear (what [`BufObj::get_pixels`](crate::buf::BufObj::get_pixels)
    /// hands out of a block-linear frame, and what the CPU converter reads).
    pub fn pitch_linear(&self) -> Self {
        match *self {
            FrameFormat::Nv12 { width, height, .. } => FrameFormat::nv12(width, height),
            other => other,
        }
    }

    /// Checks the description; every problem is an `InvalidArgument` naming the field.
    pub fn validate(&self) -> Result<()> {
        match *self {
            FrameFormat::Raw { size: 0 } => Err(invalid("format.size", "a frame of 0 bytes")),
            FrameFormat::Nv12 { width, height, .. } | FrameFormat::Rgba { width, height }
                if width == 0 || height == 0 =>
            {
                Err(invalid("format", format!("{width}x{height} has a zero dimension")))
            }
            FrameFormat::Nv12 { width, height, .. } if width % 2 != 0 || height % 2 != 0 => Err(invalid(
                "format",
                format!("NV12 needs even dimensions (4:2:0 chroma), got {width}x{height}"),
            )),
            _ => Ok(()),
        }
    }

    /// Width and height in pixels (`None` for raw frames).
    pub fn dimensions(&self) -> Option<(u32, u32)> {
        match *self {
            FrameFormat::Raw { .. } => None,
            FrameFormat::Nv12 { width, height, .. } | FrameFormat::Rgba { width, height } => {
                Some((width, height))
            }
        }
    }

    /// An unreconciled attribute list describing this format for one user of the ring.
    pub(crate) fn attr_list(
        &self,
        module: &BufModule,
        perm: Perm,
        cpu: bool,
        gpu: Option<GpuId>,
        gpu_cache: bool,
    ) -> Result<BufAttrList> {
        self.validate()?;
        let mut l = module.attr_list()?;
        let ids = gpu.map(|g| [g]);
        let common = [BufAttr::NeedCpuAccess(cpu), BufAttr::RequiredPerm(perm)];
        match *self {
            FrameFormat::Raw { size } => {
                l.set(&[
                    BufAttr::Types(&[BufType::RAW_BUFFER]),
                    BufAttr::RawSize(size),
                    BufAttr::RawAlign(4096),
                ])?;
            }
            FrameFormat::Nv12 { width, height, layout } => {
                Nv12Image { width, height, layout }.set_on(&mut l)?
            }
            FrameFormat::Rgba { width, height } => {
                l.set(&[
                    BufAttr::Types(&[BufType::IMAGE]),
                    BufAttr::Layout(ImageLayout::PitchLinear),
                    BufAttr::ScanType(ScanType::Progressive),
                    BufAttr::PlaneCount(1),
                    BufAttr::PlaneColorFormat(&[ColorFormat::A8B8G8R8]),
                    BufAttr::PlaneWidth(&[width]),
                    BufAttr::PlaneHeight(&[height]),
                ])?;
            }
        }
        l.set(&common)?;
        if let Some(ids) = &ids {
            l.set(&[BufAttr::GpuId(ids)])?;
            if !gpu_cache {
                let off = [GpuCache { gpu_id: ids[0], cacheable: false }];
                l.set(&[BufAttr::EnableGpuCache(&off)])?;
            }
        }
        Ok(l)
    }
}

/// The NV12 image attributes, written once: a progressive-scan image of two planes, Y8 at full
/// resolution and interleaved V8U8 at half resolution in each direction (NvSciBuf's
/// `NvSciColor_Y8` / `NvSciColor_V8U8`), in the given layout. The ring's NV12 frames and the
/// tests build their lists from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nv12Image {
    /// Luma width in pixels (even).
    pub width: u32,
    /// Luma height in pixels (even).
    pub height: u32,
    /// Pitch-linear or block-linear.
    pub layout: ImageLayout,
}

impl Nv12Image {
    /// A pitch-linear NV12 image.
    pub fn pitch_linear(width: u32, height: u32) -> Self {
        Self { width, height, layout: ImageLayout::PitchLinear }
    }

    /// Sets the image's keys on `list` (type, layout, scan type, plane count, colour formats,
    /// plane widths and heights); permissions, CPU access and GPUs are the party's own.
    pub fn set_on(&self, list: &mut BufAttrList) -> Result<()> {
        let (w, h) = (self.width, self.height);
        list.set(&[
            BufAttr::Types(&[BufType::IMAGE]),
            BufAttr::Layout(self.layout),
            BufAttr::ScanType(ScanType::Progressive),
            BufAttr::PlaneCount(2),
            BufAttr::PlaneColorFormat(&[ColorFormat::Y8, ColorFormat::V8U8]),
            BufAttr::PlaneWidth(&[w, w / 2]),
            BufAttr::PlaneHeight(&[h, h / 2]),
        ])?;
        Ok(())
    }
}

/// Where a frame's bytes are, read from the reconciled attributes (never recomputed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameLayout {
    /// The format the ring was built for.
    pub format: FrameFormat,
    /// Bytes per frame buffer.
    pub size: u64,
    /// Plane layouts (empty for raw frames).
    pub planes: heapless::Vec<PlaneLayout, 3>,
}

impl FrameLayout {
    /// Checks that this is an NV12 layout whose two planes lie inside a buffer of `len` bytes, with
    /// pitches covering a row; returns (width, height) in pixels. `buffer` names the buffer in the
    /// error. A block-linear layout is refused (`InvalidArgument` naming `self.format`): its
    /// bytes are tiled, not rows; read its pixels with `get_pixels` into a pitch-linear buffer.
    pub fn nv12_fits(&self, len: usize, buffer: &'static str) -> Result<(usize, usize)> {
        let FrameFormat::Nv12 { width, height, layout } = self.format else {
            return Err(invalid("self.format", "not NV12"));
        };
        if layout != ImageLayout::PitchLinear {
            return Err(invalid(
                "self.format",
                "block-linear NV12: the bytes are tiled, not rows (read the pixels with get_pixels)",
            ));
        }
        self.format.validate()?;
        if self.planes.len() != 2 {
            return Err(invalid("self.planes", format!("{} planes, NV12 has 2", self.planes.len())));
        }
        let (w, h) = (width as usize, height as usize);
        for (p, rows) in [(&self.planes[0], h), (&self.planes[1], h / 2)] {
            let end = (p.pitch as usize)
                .checked_mul(rows - 1)
                .and_then(|v| v.checked_add(w))
                .and_then(|v| v.checked_add(usize::try_from(p.offset).ok()?));
            if (p.pitch as usize) < w || end.is_none_or(|e| e > len) {
                return Err(invalid(buffer, format!("{len} bytes do not hold the plane {p:?}")));
            }
        }
        Ok((w, h))
    }

    /// The layout a backend without NvSci reconciliation uses: rows padded to `pitch_align`
    /// bytes, planes starting on `plane_align` bytes (both powers of two). Pitch-linear
    /// formats only (a block-linear format is `InvalidArgument` naming `format.layout`).
    pub fn packed(format: FrameFormat, pitch_align: u32, plane_align: u64) -> Result<Self> {
        format.validate()?;
        if format.image_layout().is_some_and(|l| l != ImageLayout::PitchLinear) {
            return Err(invalid("format.layout", "a packed layout is pitch-linear"));
        }
        if !pitch_align.is_power_of_two() || !plane_align.is_power_of_two() {
            return Err(invalid("alignment", "pitch and plane alignments must be powers of two"));
        }
        let too_big = || invalid("format", format!("{format:?} does not fit the layout's integer types"));
        let up = |v: u64, a: u64| v.div_ceil(a).checked_mul(a).ok_or_else(too_big);
        let plane =
            |fmt: ColorFormat, w: u32, h: u32, bpp: u32, ch: u8, offset: u64| -> Result<PlaneLayout> {
                let pitch = u32::try_from(up(w as u64 * bpp as u64 / 8, pitch_align as u64)?)
                    .map_err(|_| too_big())?;
                Ok(PlaneLayout {
                    format: fmt,
                    width: w,
                    height: h,
                    pitch,
                    offset,
                    aligned_height: h,
                    aligned_size: up(pitch as u64 * h as u64, plane_align)?,
                    bits_per_pixel: bpp,
                    channel_count: ch,
                })
            };
        let mut planes = heapless::Vec::new();
        let size = match format {
            FrameFormat::Raw { size } => size,
            FrameFormat::Nv12 { width, height, .. } => {
                let y = plane(ColorFormat::Y8, width, height, 8, 1, 0)?;
                let uv = plane(ColorFormat::V8U8, width / 2, height / 2, 16, 2, y.aligned_size)?;
                let size = uv.offset.checked_add(uv.aligned_size).ok_or_else(too_big)?;
                let _ = planes.push(y);
                let _ = planes.push(uv);
                size
            }
            FrameFormat::Rgba { width, height } => {
                let p = plane(ColorFormat::A8B8G8R8, width, height, 32, 4, 0)?;
                let size = p.aligned_size;
                let _ = planes.push(p);
                size
            }
        };
        Ok(Self { format, size, planes })
    }
}
