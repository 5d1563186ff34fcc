//! CUDA arrays over imported memory: how many bytes an array really occupies, and which texels a
//! copy touches.
//!
//! A CUDA array is laid out by the driver (tiled, padded to its own granularity), so
//! `width * height * bytes_per_texel` is only a lower bound of what a mapping covers. The real
//! footprint is asked of the driver the way CUDA documents it for arrays that have no memory
//! yet: an array of the same description created with `CUDA_ARRAY3D_DEFERRED_MAPPING` reports
//! its size and alignment (`cuMipmappedArrayGetMemoryRequirements`, CUDA 11.6), and is
//! destroyed again. Where the build's CUDA version, the driver or the device cannot answer
//! (`CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED` is 0), the footprint is unknown.

use super::device::CudaGpu;
use crate::error::{invalid, Result};
use cudarc::driver::sys;

/// A 2D array description for [`ExternalMemory::map_array`](super::ExternalMemory::map_array).
#[derive(Clone, Copy, Debug)]
pub struct ArrayDesc {
    /// Byte offset of the first texel.
    pub offset: u64,
    /// Width in texels.
    pub width: usize,
    /// Height in rows.
    pub height: usize,
    /// Channel format.
    pub format: sys::CUarray_format,
    /// Channels per texel (1, 2 or 4).
    pub channels: u32,
    /// Bytes per texel (for the bounds check).
    pub bytes_per_texel: u32,
    /// `CUDA_ARRAY3D_*` flags (e.g. color attachment, surface load/store).
    pub flags: u32,
    /// Mip levels (`numLevels`): 1 up to `floor(log2(max(width, height))) + 1`, the level
    /// count of the image the memory holds. `width`, `height` and `bytes_per_texel` describe
    /// level 0; level `i` is `max(1, width >> i)` x `max(1, height >> i)`. Memory imported from
    /// NvSciBuf takes exactly 1.
    pub levels: u32,
}

/// What a CUDA array of some description occupies in the driver's own layout, on one device
/// ([`CudaGpu::array_footprint`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayFootprint {
    /// Bytes the array covers, all mip levels included.
    pub size: u64,
    /// Alignment the driver asks of the memory an array of this description is placed in.
    pub alignment: u64,
}

impl CudaGpu {
    /// The bytes a CUDA mipmapped array described by `a` (extent, format, channels, flags and
    /// level count; `a.offset` is ignored) occupies on this device, as the driver lays it out.
    /// [`ExternalMemory::map_array`](super::ExternalMemory::map_array) refuses a mapping whose
    /// footprint at its offset runs past the import; this tells beforehand how large the
    /// memory must be.
    ///
    /// `Ok(None)` where the footprint cannot be learnt: builds for CUDA 11.4 and 11.5 (no
    /// `cuMipmappedArrayGetMemoryRequirements` in their bindings), drivers older than 11.6,
    /// devices without deferred-mapping arrays (`CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED`
    /// is 0, e.g. before Ampere), and descriptions the driver does not accept for such an array
    /// (the reason is logged at debug level). An invalid description is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) as for `map_array`.
    pub fn array_footprint(&self, a: &ArrayDesc) -> Result<Option<ArrayFootprint>> {
        if a.width == 0 || a.height == 0 || a.levels == 0 {
            return Err(invalid("array", format!("{a:?} has an empty extent or no levels")));
        }
        probe::footprint(self, a)
    }
}

#[cfg(any(feature = "cuda-11040", feature = "cuda-11050"))]
mod probe {
    use super::*;

    pub(super) fn footprint(_gpu: &CudaGpu, _a: &ArrayDesc) -> Result<Option<ArrayFootprint>> {
        log::debug!(
            "CUDA array footprint unknown: the bindings of this CUDA version have no \
             cuMipmappedArrayGetMemoryRequirements (CUDA 11.6)"
        );
        Ok(None)
    }
}

#[cfg(not(any(feature = "cuda-11040", feature = "cuda-11050")))]
mod probe {
    use super::*;
    use crate::cuda::result::memory as mem;
    use cudarc::driver::sys;

    pub(super) fn footprint(gpu: &CudaGpu, a: &ArrayDesc) -> Result<Option<ArrayFootprint>> {
        match crate::cuda::driver::driver_version() {
            Some(v) if v < 11060 => {
                log::debug!("CUDA array footprint unknown: driver {v} predates CUDA 11.6");
                return Ok(None);
            }
            Some(_) => {}
            None => {
                log::debug!("CUDA array footprint unknown: the driver does not report its version");
                return Ok(None);
            }
        }
        let attr = sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED;
        match gpu.context().attribute(attr) {
            Ok(0) => {
                log::debug!("CUDA array footprint unknown: the device has no deferred-mapping arrays");
                return Ok(None);
            }
            Ok(_) => {}
            Err(e) => {
                log::debug!("CUDA array footprint unknown: cuDeviceGetAttribute failed: {e}");
                return Ok(None);
            }
        }
        gpu.bind()?;
        let d = sys::CUDA_ARRAY3D_DESCRIPTOR {
            Width: a.width,
            Height: a.height,
            Depth: 0,
            Format: a.format,
            NumChannels: a.channels,
            Flags: a.flags | sys::CUDA_ARRAY3D_DEFERRED_MAPPING,
        };
        // SAFETY: a complete descriptor; with DEFERRED_MAPPING the driver allocates no memory
        // for the array, only its handle (destroyed below).
        let raw = match unsafe { mem::mipmapped_array_create(&d, a.levels) } {
            Ok(raw) => raw,
            Err(e) => {
                log::debug!(
                    "CUDA array footprint unknown: a deferred-mapping array of {a:?} was refused: {e}"
                );
                return Ok(None);
            }
        };
        // SAFETY: `raw` is the deferred-mapping array created above, the device is the context's
        // and the driver is 11.6 or newer (checked above).
        let got = unsafe { mem::mipmapped_array_get_memory_requirements(raw, gpu.context().cu_device()) };
        // SAFETY: destroyed once; nothing else refers to the probe array.
        let destroyed = unsafe { mem::mipmapped_array_destroy(raw) };
        if let Err(e) = destroyed {
            log::warn!("destroying the probe array failed: {e}");
        }
        match got {
            Ok(req) => {
                let f = ArrayFootprint { size: req.size as u64, alignment: req.alignment as u64 };
                log::debug!("CUDA array {a:?}: {f:?}");
                Ok(Some(f))
            }
            Err(e) => {
                log::debug!("CUDA array footprint unknown: {e}");
                Ok(None)
            }
        }
    }
}

/// A rectangle of texels of one mip level, for the copies of
/// [`MappedArray`](super::MappedArray): `x`, `width` in texels, `y`, `height` in rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArrayRegion {
    /// First texel of each row.
    pub x: usize,
    /// First row.
    pub y: usize,
    /// Texels per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
}

impl ArrayRegion {
    /// The rectangle of `width` x `height` texels at (`x`, `y`).
    pub fn new(x: usize, y: usize, width: usize, height: usize) -> Self {
        Self { x, y, width, height }
    }
}

/// Extent of level `level` of an array whose level 0 is `width` x `height`:
/// `max(1, width >> level)` x `max(1, height >> level)`.
pub(crate) fn level_extent(width: usize, height: usize, level: u32) -> (usize, usize) {
    let shrink = |v: usize| v.checked_shr(level).unwrap_or(0).max(1);
    (shrink(width), shrink(height))
}

/// A region copy checked against the array: `(x in bytes, y, bytes per row, rows)`, or
/// `InvalidArgument` naming `level`, the `region` field that is out of range, or `host` (the
/// host buffer's argument name) when its length is not the region's packed size.
pub(crate) fn region_copy(
    a: &ArrayDesc,
    level: u32,
    r: &ArrayRegion,
    host_len: usize,
    host: &'static str,
) -> Result<(usize, usize, usize, usize)> {
    if level >= a.levels {
        return Err(invalid("level", format!("level {level} requested, the array has {} levels", a.levels)));
    }
    let (w, h) = level_extent(a.width, a.height, level);
    let out =
        |name: &'static str, what: String| Err(invalid(name, format!("{what}; level {level} is {w}x{h}")));
    if r.x >= w {
        return out("region.x", format!("x = {}", r.x));
    }
    if r.y >= h {
        return out("region.y", format!("y = {}", r.y));
    }
    if r.width == 0 || r.width > w - r.x {
        return out("region.width", format!("{} texels from x = {}", r.width, r.x));
    }
    if r.height == 0 || r.height > h - r.y {
        return out("region.height", format!("{} rows from y = {}", r.height, r.y));
    }
    let bpt = a.bytes_per_texel as usize;
    let row = r.width * bpt;
    let packed = row * r.height;
    if host_len != packed {
        return Err(invalid(
            host,
            format!("{host_len} bytes given; {}x{} texels of {bpt} bytes are {packed}", r.width, r.height),
        ));
    }
    Ok((r.x * bpt, r.y, row, r.height))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::CUarray_format;

    fn desc(width: usize, height: usize, levels: u32) -> ArrayDesc {
        ArrayDesc {
            offset: 0,
            width,
            height,
            format: CUarray_format::CU_AD_FORMAT_UNSIGNED_INT8,
            channels: 4,
            bytes_per_texel: 4,
            flags: 0,
            levels,
        }
    }

    #[test]
    fn levels_halve_down_to_one() {
        assert_eq!(level_extent(67, 45, 0), (67, 45));
        assert_eq!(level_extent(67, 45, 1), (33, 22));
        assert_eq!(level_extent(67, 45, 6), (1, 1));
        assert_eq!(level_extent(67, 45, 200), (1, 1));
    }

    #[test]
    fn region_copies_are_checked_field_by_field() {
        let a = desc(64, 32, 3);
        assert_eq!(
            region_copy(&a, 0, &ArrayRegion::new(0, 0, 64, 32), 64 * 32 * 4, "dst").unwrap(),
            (0, 0, 256, 32)
        );
        assert_eq!(
            region_copy(&a, 1, &ArrayRegion::new(8, 4, 24, 12), 24 * 12 * 4, "dst").unwrap(),
            (32, 4, 96, 12)
        );
        let name = |level, r: ArrayRegion, len| match region_copy(&a, level, &r, len, "src") {
            Err(crate::Error::InvalidArgument { name, .. }) => name,
            other => panic!("{r:?} on level {level}: {other:?}"),
        };
        assert_eq!(name(3, ArrayRegion::new(0, 0, 1, 1), 4), "level");
        assert_eq!(name(1, ArrayRegion::new(32, 0, 1, 1), 4), "region.x", "level 1 is 32 wide");
        assert_eq!(name(0, ArrayRegion::new(0, 32, 1, 1), 4), "region.y");
        assert_eq!(name(0, ArrayRegion::new(60, 0, 5, 1), 20), "region.width");
        assert_eq!(name(0, ArrayRegion::new(0, 0, 0, 1), 0), "region.width");
        assert_eq!(name(2, ArrayRegion::new(0, 7, 1, 2), 8), "region.height", "level 2 is 8 rows");
        assert_eq!(name(0, ArrayRegion::new(0, 0, 2, 2), 15), "src");
        assert_eq!(name(0, ArrayRegion::new(usize::MAX, 0, 1, 1), 4), "region.x");
        assert_eq!(name(0, ArrayRegion::new(1, 0, usize::MAX, 1), 4), "region.width");
    }
}
