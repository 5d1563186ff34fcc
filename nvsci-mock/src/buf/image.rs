//! Plane-based image layout as computed by this mock: pitch-linear and block-linear planes,
//! paddings, progressive and interlaced scan, and the byte address of every pixel.
//!
//! Documented in nvscibuf.h (and followed here):
//! * `PlanePitch = PlaneWidth * bits per pixel / 8`, aligned to the pitch alignment of the
//!   engines that access the buffer (`NvSciBufImageAttrKey_PlanePitch`).
//! * `PlaneAlignedHeight = PlaneHeight` (progressive) or `PlaneHeight / 2` (interlaced),
//!   aligned to the height alignment of the engines (`NvSciBufImageAttrKey_PlaneAlignedHeight`).
//! * `PlaneAlignedSize = PlanePitch * PlaneAlignedHeight` (progressive), times 2 for
//!   interlaced (`NvSciBufImageAttrKey_PlaneAlignedSize`); `Size = sum of PlaneAlignedSize`
//!   (`NvSciBufImageAttrKey_Size`); `Alignment` = the first plane's reconciled
//!   `PlaneBaseAddrAlign` (`NvSciBufImageAttrKey_Alignment`).
//! * `PlaneSecondFieldOffset`: "the offset of the start of the second field, 0 for progressive".
//! * Paddings are given in pixels per plane (`NvSciBufImageAttrKey_TopPadding` ...: "Unit:
//!   pixel", default 0).
//!
//! Block-linear memory follows the public Tegra X1 layout: the "block linear" address
//! equations of the Tegra X1 TRM, as a public emulator (yuzu) transcribes them for the Tegra X1
//! (Maxwell): GOBs of 64 bytes x 8 rows (512 bytes); a block is one GOB wide and `2^n` GOBs high;
//! blocks follow each other left to right, then block rows top to bottom; GOBs follow each other
//! top to bottom inside a block; inside a GOB byte `x` of row `y` sits at the bit pattern
//! `x5 y2 y1 x4 y0 x3 x2 x1 x0` ([`gob_offset`]). Mesa's `src/nouveau/nil/copy.rs` implements
//! another order inside the GOB and is not a source for this one. NVIDIA publishes no GOB order
//! for Orin (Ampere): that Orin's NvSciBuf images follow this one is unverified.
//!
//! Planes in CUDA virtual memory for a desktop GPU (see `crate::vmm`) follow instead the layout
//! that GPU's CUDA arrays use there, measured on an H100: [`desktop_gob_offset`] inside a GOB and
//! [`desktop_block_linear_log2_gobs`] for the block height (docs/mock.md, "Block-linear planes on
//! a desktop GPU").
//!
//! The mock's choices (it has no engines whose constraints it could reconcile):
//! * Pitch alignment: [`MOCK_PITCH_ALIGN`] bytes for pitch-linear planes, the GOB width
//!   ([`GOB_WIDTH`] bytes) for block-linear planes.
//! * Block height: `2^n` GOBs, `n = min(ceil(log2(ceil(rows / 8))), MAX_LOG2_GOBS_PER_BLOCK)`
//!   where `rows` is the plane's rows per field ([`block_linear_log2_gobs`]; the smallest block
//!   covering the plane, at most 16 GOBs, the rule of Mesa's `nil` `Tiling::choose`);
//!   `PlaneAlignedHeight` is the rows per field rounded up to whole blocks.
//! * Paddings add columns and rows around the plane: the padded plane is `Left + PlaneWidth +
//!   Right` pixels wide and `Top + PlaneHeight + Bottom` rows high; pitch and rows are those of
//!   the padded plane; pixel (0, 0) of the image is pixel (`Left`, `Top`) of the padded plane;
//!   `PlaneOffset` points at the padded plane's first byte.
//! * Interlaced planes hold two fields one after the other: the first field holds the even
//!   rows of the padded plane, the second field (at `PlaneSecondFieldOffset`, counted from the
//!   plane's start) the odd rows; a field has `ceil(padded rows / 2)` rows before alignment.
//! * Per-plane base alignment `a[i] = max(MOCK_PLANE_ALIGN, PlaneBaseAddrAlign[i] of every
//!   slot)`; `PlaneOffset[0] = 0`, `PlaneOffset[i] = round_up(PlaneOffset[i-1] +
//!   PlaneAlignedSize[i-1], a[i])`; `PlaneAlignedSize[i]` is rounded up to `a[i]` and extended
//!   to reach the next plane's offset when `a[i+1]` leaves a gap, so that the sizes add up to
//!   `Size`.
//!
//! Example: NV12 1920x1080 pitch-linear = {Y8, V8U8}, widths {1920, 960}, heights {1080, 540}:
//! pitches {2048, 2048}, offsets {0, 2211840}, aligned sizes {2211840, 1105920}, Size 3317760,
//! Alignment 4096.

use crate::ffi::Res;
use nvsci_sys::*;

/// Row pitch alignment in bytes used by the mock's pitch-linear layout.
pub const MOCK_PITCH_ALIGN: u64 = 256;
/// Minimum plane base-address alignment in bytes used by the mock's image layout.
pub const MOCK_PLANE_ALIGN: u64 = 4096;
/// Plane base alignment of block-linear planes of an image that names a GPU: the alignment an
/// NVIDIA H100 (driver 580.159.04) reports for CUDA arrays (`cuArrayGetMemoryRequirements`,
/// 65536 for every shape measured; docs/mock.md, "Block-linear planes on a desktop GPU").
pub const GPU_ARRAY_PLANE_ALIGN: u64 = 65536;
/// Width of a GOB in bytes (Tegra block-linear layout).
pub const GOB_WIDTH: u64 = 64;
/// Height of a GOB in rows (Tegra block-linear layout).
pub const GOB_HEIGHT: u64 = 8;
/// Size of a GOB in bytes.
pub const GOB_SIZE: u64 = GOB_WIDTH * GOB_HEIGHT;
/// The largest block height the mock chooses, as log2 of GOBs per block (16 GOBs, 128 rows).
pub const MAX_LOG2_GOBS_PER_BLOCK: u32 = 4;

/// log2 of the GOBs per block the mock chooses for a block-linear plane of `rows` rows per
/// field.
pub fn block_linear_log2_gobs(rows: u32) -> u32 {
    let gobs = u64::from(rows).div_ceil(GOB_HEIGHT).max(1);
    gobs.next_power_of_two().trailing_zeros().min(MAX_LOG2_GOBS_PER_BLOCK)
}

/// log2 of the GOBs per block of a block-linear CUDA array of `rows` rows on a desktop GPU, as
/// measured on an NVIDIA H100 (driver 580.159.04; docs/mock.md, "Block-linear planes on a
/// desktop GPU"): the smallest block covering the rows, at most 16 GOBs
/// ([`block_linear_log2_gobs`]), halved when the rows fill less than three quarters of it. The
/// measurement cannot tell a threshold of three quarters from one of two thirds (no height whose
/// share lies between the two was measured); only heights below 96 rows are affected.
pub fn desktop_block_linear_log2_gobs(rows: u32) -> u32 {
    let log2 = block_linear_log2_gobs(rows);
    if log2 > 0 && u64::from(rows) * 4 < 3 * (GOB_HEIGHT << log2) {
        log2 - 1
    } else {
        log2
    }
}

/// Offset of byte `x` of row `y` inside a GOB (only `x % 64` and `y % 8` count).
pub fn gob_offset(x: u64, y: u64) -> u64 {
    (x & 15) | ((y & 1) << 4) | ((x & 16) << 1) | ((y & 6) << 5) | ((x & 32) << 3)
}

/// Offset of byte `x` of row `y` inside a GOB of a block-linear CUDA array on a desktop GPU, as
/// measured on an NVIDIA H100 (driver 580.159.04; docs/mock.md, "Block-linear planes on a
/// desktop GPU"): the bit pattern `x5 y2 x4 y1 y0 x3 x2 x1 x0`, four rows of 16 bytes one after
/// the other where the Tegra layout (`gob_offset`) has two.
pub fn desktop_gob_offset(x: u64, y: u64) -> u64 {
    (x & 15) | ((y & 3) << 4) | ((x & 16) << 2) | ((y & 4) << 5) | ((x & 32) << 3)
}

/// Which GOB layout a block-linear plane's memory follows: the one of the engines that read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GobLayout {
    /// The Tegra layout ([`gob_offset`]): host memory, what NvSciBuf lays out on Tegra.
    Tegra,
    /// The layout a desktop GPU's CUDA arrays use ([`desktop_gob_offset`]): VMM memory that a
    /// desktop GPU maps as arrays.
    DesktopGpu,
}

/// What the mock knows about a color format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FormatInfo {
    pub bits_per_pixel: u32,
    pub channels: u8,
    pub datatype: NvSciBufAttrValDataType,
}

/// Bits per pixel, channel count and data type of the color formats the mock supports.
pub(crate) fn format_info(fmt: NvSciBufAttrValColorFmt) -> Option<FormatInfo> {
    let f = |bits_per_pixel, channels, datatype| Some(FormatInfo { bits_per_pixel, channels, datatype });
    #[allow(non_upper_case_globals)]
    match fmt {
        NvSciColor_Y8 | NvSciColor_U8 | NvSciColor_V8 | NvSciColor_A8 => f(8, 1, NvSciDataType_Uint8),
        NvSciColor_Y10 | NvSciColor_Y12 | NvSciColor_Y16 => f(16, 1, NvSciDataType_Uint16),
        NvSciColor_U8V8 | NvSciColor_V8U8 | NvSciColor_U8_V8 | NvSciColor_V8_U8 => {
            f(16, 2, NvSciDataType_Uint8)
        }
        NvSciColor_U16V16 | NvSciColor_V16U16 => f(32, 2, NvSciDataType_Uint16),
        NvSciColor_A8B8G8R8 | NvSciColor_A8R8G8B8 | NvSciColor_B8G8R8A8 => f(32, 4, NvSciDataType_Uint8),
        // Packed 10:10:10:2 in one 32-bit word.
        NvSciColor_A2R10G10B10 => f(32, 4, NvSciDataType_Uint32),
        NvSciColor_A16B16G16R16 => f(64, 4, NvSciDataType_Uint16),
        NvSciColor_Float_A16B16G16R16 => f(64, 4, NvSciDataType_Float16),
        _ => None,
    }
}

/// The color standard reported when no slot sets PlaneColorStd: REC601 extended range for
/// luma/chroma planes, sRGB for everything else.
pub(crate) fn default_color_std(fmt: NvSciBufAttrValColorFmt) -> NvSciBufAttrValColorStd {
    if (NvSciColor_U8V8..=NvSciColor_A16Y16U16V16).contains(&fmt) {
        NvSciColorStd_REC601_ER
    } else {
        NvSciColorStd_SRGB
    }
}

/// Input of the layout computation for one plane.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlaneIn {
    pub width: u32,
    pub height: u32,
    pub bits_per_pixel: u32,
    /// Reconciled base-address alignment (power of two, >= MOCK_PLANE_ALIGN).
    pub align: u64,
    /// Top, bottom, left, right padding in pixels.
    pub padding: [u64; 4],
    pub block_linear: bool,
    pub interlaced: bool,
}

/// Result of the layout computation for one plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlaneOut {
    pub pitch: u32,
    /// Rows per field, aligned.
    pub aligned_height: u32,
    pub offset: u64,
    pub aligned_size: u64,
    /// Offset of the second field from the plane's start (0 for progressive).
    pub second_field_offset: u64,
}

fn round_up(v: u64, align: u64) -> Res<u64> {
    let mask = align.checked_sub(1).ok_or(NvSciError_Overflow)?;
    v.checked_add(mask).map(|x| x & !mask).ok_or(NvSciError_Overflow)
}

fn add(a: u64, b: u64) -> Res<u64> {
    a.checked_add(b).ok_or(NvSciError_Overflow)
}

fn mul(a: u64, b: u64) -> Res<u64> {
    a.checked_mul(b).ok_or(NvSciError_Overflow)
}

/// Padded width and height of a plane, and its rows per field.
fn padded(p: &PlaneIn) -> Res<(u64, u64, u64)> {
    let [top, bottom, left, right] = p.padding;
    let w = add(add(u64::from(p.width), left)?, right)?;
    let h = add(add(u64::from(p.height), top)?, bottom)?;
    let rows = if p.interlaced { h.div_ceil(2) } else { h };
    Ok((w, h, rows))
}

/// Computes the layout of `planes`; returns the planes and the total size.
pub(crate) fn layout(planes: &[PlaneIn]) -> Res<(Vec<PlaneOut>, u64)> {
    let mut out: Vec<PlaneOut> = Vec::with_capacity(planes.len());
    let mut end = 0u64;
    for p in planes {
        let (w, _, rows) = padded(p)?;
        let row_bytes = mul(w, u64::from(p.bits_per_pixel))?.div_ceil(8);
        let (pitch, aligned_rows) = if p.block_linear {
            let rows32 = u32::try_from(rows).map_err(|_| NvSciError_Overflow)?;
            let block_rows = GOB_HEIGHT << block_linear_log2_gobs(rows32);
            (round_up(row_bytes, GOB_WIDTH)?, round_up(rows, block_rows)?)
        } else {
            (round_up(row_bytes, MOCK_PITCH_ALIGN)?, rows)
        };
        let pitch32 = u32::try_from(pitch).map_err(|_| NvSciError_Overflow)?;
        let aligned_height = u32::try_from(aligned_rows).map_err(|_| NvSciError_Overflow)?;
        let field = mul(pitch, aligned_rows)?;
        let fields = if p.interlaced { 2 } else { 1 };
        let aligned_size = round_up(mul(field, fields)?, p.align)?;
        let offset = round_up(end, p.align)?;
        if let Some(prev) = out.last_mut() {
            // Absorb any alignment gap into the previous plane so sizes add up to the total.
            prev.aligned_size = offset - prev.offset;
        }
        end = add(offset, aligned_size)?;
        let second_field_offset = if p.interlaced { field } else { 0 };
        out.push(PlaneOut { pitch: pitch32, aligned_height, offset, aligned_size, second_field_offset });
    }
    Ok((out, end))
}

/// Where the pixels of one plane of an allocated image live: enough to address any pixel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlaneGeometry {
    /// Width and height of the image plane in pixels (without padding).
    pub width: u32,
    pub height: u32,
    /// Bytes per pixel (whole bytes only).
    pub bytes_per_pixel: u64,
    pub offset: u64,
    pub pitch: u64,
    /// Top and left padding in pixels.
    pub top: u64,
    pub left: u64,
    /// `Some(offset of the second field)` for interlaced planes.
    pub second_field: Option<u64>,
    /// `Some(log2 GOBs per block)` for block-linear planes.
    pub block_log2: Option<u32>,
    /// The GOB layout of block-linear planes.
    pub gob: GobLayout,
}

impl PlaneGeometry {
    /// Byte offset (from the buffer's start) of byte `x_byte` of image row `y` (both relative to
    /// pixel (0, 0) of the image, without padding). Inside a block-linear plane the 16 bytes of
    /// an aligned 16-byte run of a row are contiguous; nothing longer is.
    pub fn byte_offset(&self, x_byte: u64, y: u64) -> u64 {
        let x = x_byte + self.left * self.bytes_per_pixel;
        let py = y + self.top;
        let (field_base, row) = match self.second_field {
            Some(second) if py % 2 == 1 => (second, py / 2),
            Some(_) => (0, py / 2),
            None => (0, py),
        };
        let within = match self.block_log2 {
            None => row * self.pitch + x,
            Some(log2) => {
                let gobs = 1u64 << log2;
                let block_rows = GOB_HEIGHT * gobs;
                let block_bytes = GOB_SIZE * gobs;
                let blocks_per_row = self.pitch / GOB_WIDTH;
                (row / block_rows) * blocks_per_row * block_bytes
                    + (x / GOB_WIDTH) * block_bytes
                    + ((row % block_rows) / GOB_HEIGHT) * GOB_SIZE
                    + match self.gob {
                        GobLayout::Tegra => gob_offset(x, row),
                        GobLayout::DesktopGpu => desktop_gob_offset(x, row),
                    }
            }
        };
        self.offset + field_base + within
    }

    /// The fields of the plane that hold image rows `y0..y1`, each as `(offset of the field
    /// from the plane's start, field rows r0..r1 holding those rows, image row of field row
    /// r0, image rows between consecutive field rows)`: one field for a progressive plane, two
    /// (even and odd padded rows) for an interlaced one. Field row `r` of a progressive plane is
    /// padded row `r`; of field `f` of an interlaced plane, padded row `2r + f`.
    pub fn field_rows(
        &self,
        y0: u64,
        y1: u64,
    ) -> impl Iterator<Item = (u64, std::ops::Range<u64>, u64, u64)> {
        let (a, b) = (y0 + self.top, y1 + self.top);
        let fields = match self.second_field {
            None => [Some((0, 0, a..b, 1)), None],
            // Padded row `py` is field row `py / 2` of field `py % 2`: the field rows of field
            // `f` holding padded rows `a..b` start at ceil((a - f) / 2) and end before
            // ceil((b - f) / 2).
            Some(second) => {
                let rows = |f: u64| (a + 1 - f) / 2..(b + 1 - f) / 2;
                [Some((0, 0, rows(0), 2)), Some((second, 1, rows(1), 2))]
            }
        };
        let top = self.top;
        fields.into_iter().flatten().filter(|(_, _, r, _)| !r.is_empty()).map(move |(base, f, r, step)| {
            let first_padded = if step == 2 { 2 * r.start + f } else { r.start };
            (base, r, first_padded - top, step)
        })
    }

    /// For a block-linear plane, where field row `r` of the field at `field_base` starts:
    /// `(base, block_bytes)` such that the 16-byte piece at byte `x` of the padded row (a
    /// multiple of 16) lies at `base + (x / 64) * block_bytes + row_offset(r) +
    /// piece_offset(x % 64)`, the address [`byte_offset`](Self::byte_offset) gives. `base` is
    /// the GOB row's first GOB: the rows `r` of one GOB row (`r / 8` equal) share it. `None`
    /// for a pitch-linear plane.
    pub fn gob_row(&self, field_base: u64, r: u64) -> Option<(u64, u64)> {
        let log2 = self.block_log2?;
        let gobs = 1u64 << log2;
        let (block_rows, block_bytes) = (GOB_HEIGHT * gobs, GOB_SIZE * gobs);
        let blocks_per_row = self.pitch / GOB_WIDTH;
        let base = self.offset
            + field_base
            + (r / block_rows) * blocks_per_row * block_bytes
            + ((r % block_rows) / GOB_HEIGHT) * GOB_SIZE;
        Some((base, block_bytes))
    }

    /// Offset inside a GOB of the start of row `r % 8` (its byte 0): the `y` bits of
    /// [`gob_offset`] or [`desktop_gob_offset`].
    pub fn row_offset(&self, r: u64) -> u64 {
        match self.gob {
            GobLayout::Tegra => gob_offset(0, r),
            GobLayout::DesktopGpu => desktop_gob_offset(0, r),
        }
    }

    /// Offset inside a GOB row of the 16-byte piece at byte `x` of the GOB (`x` a multiple of
    /// 16, below 64): the `x` bits of [`gob_offset`] or [`desktop_gob_offset`].
    pub fn piece_offset(&self, x: u64) -> u64 {
        match self.gob {
            GobLayout::Tegra => gob_offset(x, 0),
            GobLayout::DesktopGpu => desktop_gob_offset(x, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: PlaneIn = PlaneIn {
        width: 1,
        height: 1,
        bits_per_pixel: 8,
        align: 4096,
        padding: [0; 4],
        block_linear: false,
        interlaced: false,
    };

    #[test]
    fn nv12_1080p() {
        let y = PlaneIn { width: 1920, height: 1080, bits_per_pixel: 8, align: 4096, ..PLAIN };
        let uv = PlaneIn { width: 960, height: 540, bits_per_pixel: 16, align: 4096, ..PLAIN };
        let (planes, size) = layout(&[y, uv]).unwrap();
        assert_eq!(
            planes[0],
            PlaneOut {
                pitch: 2048,
                aligned_height: 1080,
                offset: 0,
                aligned_size: 2211840,
                second_field_offset: 0
            }
        );
        assert_eq!(
            planes[1],
            PlaneOut {
                pitch: 2048,
                aligned_height: 540,
                offset: 2211840,
                aligned_size: 1105920,
                second_field_offset: 0
            }
        );
        assert_eq!(size, 3317760);
    }

    #[test]
    fn alignment_gap_is_absorbed() {
        let a = PlaneIn { width: 64, height: 1, bits_per_pixel: 8, align: 4096, ..PLAIN };
        let b = PlaneIn { width: 64, height: 1, bits_per_pixel: 8, align: 65536, ..PLAIN };
        let (planes, size) = layout(&[a, b]).unwrap();
        assert_eq!(planes[1].offset, 65536);
        assert_eq!(planes[0].aligned_size, 65536);
        assert_eq!(size, planes.iter().map(|p| p.aligned_size).sum::<u64>());
    }

    #[test]
    fn desktop_gob_is_a_permutation_with_the_measured_points() {
        let mut seen = [false; 512];
        for y in 0..8 {
            for x in 0..64 {
                let o = desktop_gob_offset(x, y) as usize;
                assert!(!seen[o], "offset {o} twice");
                seen[o] = true;
            }
        }
        // Read back on the H100: rows 0..3 of bytes 0..15 at 0, 16, 32, 48; byte 63 of row 0 at
        // 335; byte 63 of row 6 at 495.
        assert_eq!([0, 1, 2, 3].map(|y| desktop_gob_offset(0, y)), [0, 16, 32, 48]);
        assert_eq!(desktop_gob_offset(63, 0), 335);
        assert_eq!(desktop_gob_offset(63, 6), 495);
    }

    #[test]
    fn desktop_block_heights_are_the_measured_ones() {
        // (rows, GOBs per block) read back on the H100 (benches/blocklinear_array_probe.cu):
        // R8 1920 wide, RGBA8 256 wide, and the other shapes the probe mapped.
        let measured = [
            (1, 1),
            (2, 1),
            (3, 1),
            (4, 1),
            (5, 1),
            (7, 1),
            (8, 1),
            (9, 1),
            (12, 2),
            (16, 2),
            (17, 2),
            (20, 2),
            (24, 4),
            (32, 4),
            (33, 4),
            (40, 4),
            (48, 8),
            (50, 8),
            (64, 8),
            (65, 8),
            (77, 8),
            (96, 16),
            (100, 16),
            (128, 16),
            (129, 16),
            (130, 16),
            (192, 16),
            (200, 16),
            (256, 16),
            (257, 16),
            (270, 16),
            (300, 16),
            (512, 16),
            (540, 16),
            (1000, 16),
            (1080, 16),
            (2160, 16),
        ];
        for (rows, gobs) in measured {
            assert_eq!(1u32 << desktop_block_linear_log2_gobs(rows), gobs, "{rows} rows");
        }
    }

    #[test]
    fn desktop_layout_ends_where_the_gpu_wrote_last() {
        // (width in bytes, rows, bytes from the array's start to one past the last byte written)
        // as read back on the H100 after filling whole arrays: the last byte is the image's
        // bottom-right byte, at the highest address of the layout. This checks the GOB order
        // and the blocks per row (the Tegra GOB order misses by 32 bytes); the last byte's
        // address is the same for every block height, which the full comparisons behind
        // `desktop_block_heights_are_the_measured_ones` told apart.
        let measured: [(u64, u32, u64); 17] = [
            (1920, 1, 15184),
            (1920, 7, 15344),
            (1920, 9, 30544),
            (1920, 17, 60752),
            (1920, 33, 121168),
            (1920, 65, 242000),
            (1920, 257, 729424),
            (1332, 77, 168900),
            (100, 65, 12548),
            (100, 130, 24852),
            (100, 50, 7444),
            (256, 1, 1872),
            (1024, 5, 8144),
            (1024, 12, 16256),
            (1024, 20, 32128),
            (1024, 40, 64000),
            (1024, 100, 129408),
        ];
        for (row_bytes, rows, span) in measured {
            let g = PlaneGeometry {
                width: row_bytes as u32,
                height: rows,
                bytes_per_pixel: 1,
                offset: 0,
                pitch: row_bytes.div_ceil(GOB_WIDTH) * GOB_WIDTH,
                top: 0,
                left: 0,
                second_field: None,
                block_log2: Some(desktop_block_linear_log2_gobs(rows)),
                gob: GobLayout::DesktopGpu,
            };
            assert_eq!(g.byte_offset(row_bytes - 1, u64::from(rows) - 1) + 1, span, "{row_bytes} x {rows}");
        }
    }

    /// The GOB-row bases, row and piece offsets the pixel copy uses address every aligned
    /// 16-byte piece where `byte_offset` does, through the field rows `field_rows` gives: both
    /// GOB layouts, block heights, paddings, interlacing, sub-rectangles of rows.
    #[test]
    #[cfg_attr(miri, ignore = "address arithmetic only (about 660,000 checks, no unsafe code): run natively")]
    fn gob_rows_address_pieces_as_byte_offset_does() {
        for gob in [GobLayout::Tegra, GobLayout::DesktopGpu] {
            for (log2, top, left, second_field) in [
                (0, 0, 0, None),
                (4, 0, 0, None),
                (2, 3, 16, None),
                (3, 1, 8, Some(1 << 20)),
                (1, 0, 0, Some(65536)),
            ] {
                let g = PlaneGeometry {
                    width: 300,
                    height: 70,
                    bytes_per_pixel: 2,
                    offset: 4096,
                    pitch: 640,
                    top,
                    left,
                    second_field,
                    block_log2: Some(log2),
                    gob,
                };
                for (y0, y1) in [(0u64, 70u64), (5, 6), (3, 41), (1, 2)] {
                    let mut seen = Vec::new();
                    for (field_base, rows, first_y, step) in g.field_rows(y0, y1) {
                        for (i, r) in rows.enumerate() {
                            let y = first_y + i as u64 * step;
                            seen.push(y);
                            let (base, block_bytes) = g.gob_row(field_base, r).unwrap();
                            let lead = left * 2;
                            for x in (0..600u64).map(|b| b + lead).filter(|x| x % 16 == 0) {
                                let at = base
                                    + (x / GOB_WIDTH) * block_bytes
                                    + g.row_offset(r)
                                    + g.piece_offset(x % GOB_WIDTH);
                                assert_eq!(
                                    at,
                                    g.byte_offset(x - lead, y),
                                    "{gob:?} log2 {log2} top {top} left {left} ({x}, {y})"
                                );
                            }
                        }
                    }
                    // Every row of the range once.
                    seen.sort_unstable();
                    assert_eq!(
                        seen,
                        (y0..y1).collect::<Vec<_>>(),
                        "rows {y0}..{y1}, top {top}, {second_field:?}"
                    );
                }
            }
        }
        let pitch = PlaneGeometry {
            width: 1,
            height: 1,
            bytes_per_pixel: 1,
            offset: 0,
            pitch: 64,
            top: 0,
            left: 0,
            second_field: None,
            block_log2: None,
            gob: GobLayout::Tegra,
        };
        assert_eq!(pitch.gob_row(0, 0), None);
    }

    #[test]
    fn overflow_is_reported() {
        let p = PlaneIn { width: u32::MAX, height: u32::MAX, bits_per_pixel: 64, align: 4096, ..PLAIN };
        assert_eq!(layout(&[p]), Err(NvSciError_Overflow));
    }
}
