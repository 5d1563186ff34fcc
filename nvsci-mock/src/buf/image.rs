//! Pitch-linear, plane-based image layout as computed by this mock.
//!
//! The real library derives pitch and alignment from the constraints of every hardware engine
//! that will access the buffer. The mock has no engines, so it uses fixed constraints:
//!
//! * `PlanePitch[i] = round_up(PlaneWidth[i] * PlaneBitsPerPixel[i] / 8, MOCK_PITCH_ALIGN)`
//! * `PlaneAlignedHeight[i] = PlaneHeight[i]` (pitch-linear: no height padding)
//! * per-plane alignment `a[i] = max(MOCK_PLANE_ALIGN, PlaneBaseAddrAlign[i] of every slot)`,
//!   reported back as the reconciled `PlaneBaseAddrAlign`
//! * `PlaneOffset[0] = 0`, `PlaneOffset[i] = round_up(PlaneOffset[i-1] + PlaneAlignedSize[i-1], a[i])`
//! * `PlaneAlignedSize[i] = round_up(PlanePitch[i] * PlaneAlignedHeight[i], a[i])`, extended to
//!   reach the next plane's offset when `a[i+1]` leaves a gap, so that
//!   `Size = PlaneOffset[last] + PlaneAlignedSize[last] = sum of PlaneAlignedSize`
//! * `Alignment = a[0]` (the documented rule: the first plane's reconciled base alignment); the
//!   allocation itself is aligned to `max a[i]` so every plane start honours its alignment.
//!
//! Example: NV12 1920x1080 = {Y8, V8U8}, widths {1920, 960}, heights {1080, 540}: pitches
//! {2048, 2048}, offsets {0, 2211840}, aligned sizes {2211840, 1105920}, Size 3317760,
//! Alignment 4096.

use crate::ffi::Res;
use nvsci_sys::*;

/// Row pitch alignment in bytes used by the mock's pitch-linear layout.
pub const MOCK_PITCH_ALIGN: u64 = 256;
/// Minimum plane base-address alignment in bytes used by the mock's image layout.
pub const MOCK_PLANE_ALIGN: u64 = 4096;

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
}

/// Result of the layout computation for one plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlaneOut {
    pub pitch: u32,
    pub aligned_height: u32,
    pub offset: u64,
    pub aligned_size: u64,
}

fn round_up(v: u64, align: u64) -> Res<u64> {
    let mask = align.checked_sub(1).ok_or(NvSciError_Overflow)?;
    v.checked_add(mask).map(|x| x & !mask).ok_or(NvSciError_Overflow)
}

/// Computes the layout of `planes`; returns the planes and the total size.
pub(crate) fn layout(planes: &[PlaneIn]) -> Res<(Vec<PlaneOut>, u64)> {
    let mut out: Vec<PlaneOut> = Vec::with_capacity(planes.len());
    let mut end = 0u64;
    for p in planes {
        let row_bits =
            u64::from(p.width).checked_mul(u64::from(p.bits_per_pixel)).ok_or(NvSciError_Overflow)?;
        let pitch = round_up(row_bits.div_ceil(8), MOCK_PITCH_ALIGN)?;
        let pitch32 = u32::try_from(pitch).map_err(|_| NvSciError_Overflow)?;
        let raw = pitch.checked_mul(u64::from(p.height)).ok_or(NvSciError_Overflow)?;
        let aligned_size = round_up(raw, p.align)?;
        let offset = round_up(end, p.align)?;
        if let Some(prev) = out.last_mut() {
            // Absorb any alignment gap into the previous plane so sizes add up to the total.
            prev.aligned_size = offset - prev.offset;
        }
        end = offset.checked_add(aligned_size).ok_or(NvSciError_Overflow)?;
        out.push(PlaneOut { pitch: pitch32, aligned_height: p.height, offset, aligned_size });
    }
    Ok((out, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nv12_1080p() {
        let y = PlaneIn { width: 1920, height: 1080, bits_per_pixel: 8, align: 4096 };
        let uv = PlaneIn { width: 960, height: 540, bits_per_pixel: 16, align: 4096 };
        let (planes, size) = layout(&[y, uv]).unwrap();
        assert_eq!(
            planes[0],
            PlaneOut { pitch: 2048, aligned_height: 1080, offset: 0, aligned_size: 2211840 }
        );
        assert_eq!(
            planes[1],
            PlaneOut { pitch: 2048, aligned_height: 540, offset: 2211840, aligned_size: 1105920 }
        );
        assert_eq!(size, 3317760);
    }

    #[test]
    fn alignment_gap_is_absorbed() {
        let a = PlaneIn { width: 64, height: 1, bits_per_pixel: 8, align: 4096 };
        let b = PlaneIn { width: 64, height: 1, bits_per_pixel: 8, align: 65536 };
        let (planes, size) = layout(&[a, b]).unwrap();
        assert_eq!(planes[1].offset, 65536);
        assert_eq!(planes[0].aligned_size, 65536);
        assert_eq!(size, planes.iter().map(|p| p.aligned_size).sum::<u64>());
    }

    #[test]
    fn overflow_is_reported() {
        let p = PlaneIn { width: u32::MAX, height: u32::MAX, bits_per_pixel: 64, align: 4096 };
        assert_eq!(layout(&[p]), Err(NvSciError_Overflow));
    }
}
