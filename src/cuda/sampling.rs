//! Sampling objects over level 0 of a mapped CUDA array: surfaces (`suld` / `sust`) and
//! textures (`tex`), the way kernels read and write NvSciBuf image planes mapped as arrays.
//! Each holds its array and is destroyed, after the context's queued work, before it.

use super::memory::{Access, MappedArray, ReadWrite};
use super::result::memory as mem;
use super::teardown::succeeded;
use crate::error::{invalid, Result};
use cudarc::driver::sys;

/// The resource description of level 0 of `array`, for surface and texture objects.
fn level0_resource<A: Access>(array: &MappedArray<A>) -> sys::CUDA_RESOURCE_DESC {
    sys::CUDA_RESOURCE_DESC {
        resType: sys::CUresourcetype::CU_RESOURCE_TYPE_ARRAY,
        res: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1 {
            array: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_1 { hArray: array.level0() },
        },
        flags: 0,
    }
}

/// A CUDA surface object (`cuSurfObjectCreate`) over level 0 of a mapped array, for kernels
/// that read (and, over a [`ReadWrite`] mapping, write) the texels with `suld` / `sust`. The
/// array must be mapped with `CUDA_ARRAY3D_SURFACE_LDST`. Holds the array; destroyed, after the
/// context's queued work, before it.
pub struct ArraySurface<A: Access = ReadWrite> {
    obj: sys::CUsurfObject,
    /// Taken by `drop` into the surface's destroy, so the array outlives the surface.
    array: core::mem::ManuallyDrop<MappedArray<A>>,
}

impl<A: Access> ArraySurface<A> {
    /// A surface object over level 0 of `array`. The driver refuses an array mapped without
    /// `CUDA_ARRAY3D_SURFACE_LDST` (a CUDA error).
    pub fn new(array: MappedArray<A>) -> Result<Self> {
        array.gpu().bind()?;
        let desc = level0_resource(&array);
        // SAFETY: the array is level 0 of a live mipmapped array, held by the result and
        // destroyed after the surface; the descriptor is complete.
        let obj = unsafe { mem::surf_object_create(&desc) }?;
        Ok(Self { obj, array: core::mem::ManuallyDrop::new(array) })
    }

    /// The surface object, a kernel parameter (`.u64`), valid while `self` lives.
    pub fn handle(&self) -> sys::CUsurfObject {
        self.obj
    }

    /// The array the surface reads.
    pub fn array(&self) -> &MappedArray<A> {
        &self.array
    }
}

impl<A: Access> Drop for ArraySurface<A> {
    fn drop(&mut self) {
        let obj = self.obj;
        let dev = self.array.gpu().clone();
        // SAFETY: `array` is taken once, here, and never used again.
        let array = unsafe { core::mem::ManuallyDrop::take(&mut self.array) };
        dev.destroy_after_work("cuSurfObjectDestroy", move || {
            // SAFETY: destroyed once, after the work that used it finished, before the array it
            // reads (dropped next).
            succeeded("cuSurfObjectDestroy", unsafe { mem::surf_object_destroy(obj) });
            drop(array);
        });
    }
}

impl<A: Access> std::fmt::Debug for ArraySurface<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArraySurface").field("array", &self.array).finish()
    }
}

// SAFETY: as for MappedArray: a handle usable from any thread that binds the context.
unsafe impl<A: Access> Send for ArraySurface<A> {}
// SAFETY: shared access only reads the handle.
unsafe impl<A: Access> Sync for ArraySurface<A> {}

/// How a texture fetch between texel centres is filtered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TextureFilter {
    /// The nearest texel (`CU_TR_FILTER_MODE_POINT`): exact texel values.
    Point,
    /// Bilinear interpolation (`CU_TR_FILTER_MODE_LINEAR`); only for fetches that return
    /// floating-point values.
    Linear,
}

/// What a fetch outside `[0, size)` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TextureAddress {
    /// The nearest edge texel (`CU_TR_ADDRESS_MODE_CLAMP`).
    Clamp,
    /// The coordinate modulo the size (`CU_TR_ADDRESS_MODE_WRAP`); normalised coordinates only.
    Wrap,
    /// The coordinate mirrored at each edge (`CU_TR_ADDRESS_MODE_MIRROR`); normalised
    /// coordinates only.
    Mirror,
    /// Zero (`CU_TR_ADDRESS_MODE_BORDER`, border colour 0).
    Border,
}

/// What a fetch of an integer channel format returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TextureRead {
    /// The stored integers (`CU_TRSF_READ_AS_INTEGER`): byte-exact reads.
    Integer,
    /// Floats in [0, 1] (unsigned) or [-1, 1] (signed), as most image kernels sample.
    NormalizedFloat,
}

/// How an [`ArrayTexture`] samples its array. The default reads exact texels: point filtering,
/// clamped, texel-index coordinates, integers as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TextureOptions {
    /// Filtering between texels.
    pub filter: TextureFilter,
    /// Addressing outside the array, in both dimensions.
    pub address: TextureAddress,
    /// Coordinates in [0, 1) across the array (`CU_TRSF_NORMALIZED_COORDINATES`) instead of
    /// texel indices.
    pub normalized_coords: bool,
    /// What fetches of integer formats return.
    pub read: TextureRead,
}

impl Default for TextureOptions {
    fn default() -> Self {
        Self {
            filter: TextureFilter::Point,
            address: TextureAddress::Clamp,
            normalized_coords: false,
            read: TextureRead::Integer,
        }
    }
}

impl TextureOptions {
    /// With `filter`.
    pub fn with_filter(mut self, filter: TextureFilter) -> Self {
        self.filter = filter;
        self
    }

    /// With `address`.
    pub fn with_address(mut self, address: TextureAddress) -> Self {
        self.address = address;
        self
    }

    /// With normalised coordinates or texel indices.
    pub fn with_normalized_coords(mut self, normalized: bool) -> Self {
        self.normalized_coords = normalized;
        self
    }

    /// With `read`.
    pub fn with_read(mut self, read: TextureRead) -> Self {
        self.read = read;
        self
    }

    /// Refuses what the CUDA driver API documents as invalid for an array of `format`
    /// (`CUDA_TEXTURE_DESC`): linear filtering of fetches that return integers, and wrap or
    /// mirror addressing with texel-index coordinates.
    fn check(&self, format: sys::CUarray_format) -> Result<()> {
        use sys::CUarray_format::*;
        let integer_format = matches!(
            format,
            CU_AD_FORMAT_UNSIGNED_INT8
                | CU_AD_FORMAT_UNSIGNED_INT16
                | CU_AD_FORMAT_UNSIGNED_INT32
                | CU_AD_FORMAT_SIGNED_INT8
                | CU_AD_FORMAT_SIGNED_INT16
                | CU_AD_FORMAT_SIGNED_INT32
        );
        if self.filter == TextureFilter::Linear && integer_format && self.read == TextureRead::Integer {
            return Err(invalid(
                "options",
                format!(
                    "linear filtering needs floating-point fetches; the array's format {format:?} is read as \
                     integers (TextureRead::Integer): use TextureRead::NormalizedFloat or TextureFilter::Point"
                ),
            ));
        }
        if matches!(self.address, TextureAddress::Wrap | TextureAddress::Mirror) && !self.normalized_coords {
            return Err(invalid(
                "options",
                format!(
                    "{:?} addressing needs normalised coordinates (with_normalized_coords(true))",
                    self.address
                ),
            ));
        }
        Ok(())
    }

    fn desc(&self) -> sys::CUDA_TEXTURE_DESC {
        let address = match self.address {
            TextureAddress::Clamp => sys::CUaddress_mode::CU_TR_ADDRESS_MODE_CLAMP,
            TextureAddress::Wrap => sys::CUaddress_mode::CU_TR_ADDRESS_MODE_WRAP,
            TextureAddress::Mirror => sys::CUaddress_mode::CU_TR_ADDRESS_MODE_MIRROR,
            TextureAddress::Border => sys::CUaddress_mode::CU_TR_ADDRESS_MODE_BORDER,
        };
        let filter = match self.filter {
            TextureFilter::Point => sys::CUfilter_mode::CU_TR_FILTER_MODE_POINT,
            TextureFilter::Linear => sys::CUfilter_mode::CU_TR_FILTER_MODE_LINEAR,
        };
        let mut flags = 0;
        if self.read == TextureRead::Integer {
            flags |= sys::CU_TRSF_READ_AS_INTEGER;
        }
        if self.normalized_coords {
            flags |= sys::CU_TRSF_NORMALIZED_COORDINATES;
        }
        sys::CUDA_TEXTURE_DESC {
            addressMode: [address; 3],
            filterMode: filter,
            flags,
            maxAnisotropy: 0,
            mipmapFilterMode: sys::CUfilter_mode::CU_TR_FILTER_MODE_POINT,
            mipmapLevelBias: 0.0,
            minMipmapLevelClamp: 0.0,
            maxMipmapLevelClamp: 0.0,
            borderColor: [0.0; 4],
            reserved: [0; 12],
        }
    }
}

/// A CUDA texture object (`cuTexObjectCreate`) over level 0 of a mapped array, for kernels that
/// sample the texels with `tex` (a texture of an NvSciBuf image plane, as on Tegra). Holds the
/// array; destroyed, after the context's queued work, before it.
pub struct ArrayTexture<A: Access = ReadWrite> {
    obj: sys::CUtexObject,
    options: TextureOptions,
    /// Taken by `drop` into the texture's destroy, so the array outlives the texture.
    array: core::mem::ManuallyDrop<MappedArray<A>>,
}

impl<A: Access> ArrayTexture<A> {
    /// A texture object over level 0 of `array`, sampled as `options` say.
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `options` for a
    /// combination the driver API documents as invalid for the array's format.
    pub fn new(array: MappedArray<A>, options: TextureOptions) -> Result<Self> {
        options.check(array.desc().format)?;
        array.gpu().bind()?;
        let res = level0_resource(&array);
        // SAFETY: the array is level 0 of a live mipmapped array, held by the result and
        // destroyed after the texture; both descriptors are complete.
        let obj = unsafe { mem::tex_object_create(&res, &options.desc()) }?;
        Ok(Self { obj, options, array: core::mem::ManuallyDrop::new(array) })
    }

    /// How the texture samples its array.
    pub fn options(&self) -> TextureOptions {
        self.options
    }

    /// The texture object, a kernel parameter (`.u64`), valid while `self` lives.
    pub fn handle(&self) -> sys::CUtexObject {
        self.obj
    }

    /// The array the texture samples.
    pub fn array(&self) -> &MappedArray<A> {
        &self.array
    }
}

impl<A: Access> Drop for ArrayTexture<A> {
    fn drop(&mut self) {
        let obj = self.obj;
        let dev = self.array.gpu().clone();
        // SAFETY: `array` is taken once, here, and never used again.
        let array = unsafe { core::mem::ManuallyDrop::take(&mut self.array) };
        dev.destroy_after_work("cuTexObjectDestroy", move || {
            // SAFETY: destroyed once, after the work that used it finished, before the array it
            // samples (dropped next).
            succeeded("cuTexObjectDestroy", unsafe { mem::tex_object_destroy(obj) });
            drop(array);
        });
    }
}

impl<A: Access> std::fmt::Debug for ArrayTexture<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArrayTexture").field("array", &self.array).finish()
    }
}

// SAFETY: as for MappedArray: a handle usable from any thread that binds the context.
unsafe impl<A: Access> Send for ArrayTexture<A> {}
// SAFETY: shared access only reads the handle.
unsafe impl<A: Access> Sync for ArrayTexture<A> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use sys::CUarray_format::*;

    #[test]
    fn the_default_reads_exact_texels_of_any_format() {
        for f in [CU_AD_FORMAT_UNSIGNED_INT8, CU_AD_FORMAT_SIGNED_INT16, CU_AD_FORMAT_FLOAT] {
            TextureOptions::default().check(f).unwrap();
        }
        let d = TextureOptions::default().desc();
        assert_eq!(d.filterMode, sys::CUfilter_mode::CU_TR_FILTER_MODE_POINT);
        assert_eq!(d.addressMode, [sys::CUaddress_mode::CU_TR_ADDRESS_MODE_CLAMP; 3]);
        assert_eq!(d.flags, sys::CU_TRSF_READ_AS_INTEGER);
    }

    #[test]
    fn linear_filtering_of_integer_fetches_is_refused() {
        let linear = TextureOptions::default().with_filter(TextureFilter::Linear);
        let e = linear.check(CU_AD_FORMAT_UNSIGNED_INT8).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { name: "options", .. }), "{e:?}");
        // Normalised floats, or a float format, may be filtered.
        linear.with_read(TextureRead::NormalizedFloat).check(CU_AD_FORMAT_UNSIGNED_INT8).unwrap();
        linear.check(CU_AD_FORMAT_FLOAT).unwrap();
        let d = linear.with_read(TextureRead::NormalizedFloat).desc();
        assert_eq!((d.filterMode, d.flags), (sys::CUfilter_mode::CU_TR_FILTER_MODE_LINEAR, 0));
    }

    #[test]
    fn wrap_and_mirror_need_normalised_coordinates() {
        for a in [TextureAddress::Wrap, TextureAddress::Mirror] {
            let o = TextureOptions::default().with_address(a);
            let e = o.check(CU_AD_FORMAT_FLOAT).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument { name: "options", .. }), "{e:?}");
            let o = o.with_normalized_coords(true);
            o.check(CU_AD_FORMAT_FLOAT).unwrap();
            assert_eq!(o.desc().flags, sys::CU_TRSF_READ_AS_INTEGER | sys::CU_TRSF_NORMALIZED_COORDINATES);
        }
        let d = TextureOptions::default().with_address(TextureAddress::Border).desc();
        assert_eq!(d.addressMode, [sys::CUaddress_mode::CU_TR_ADDRESS_MODE_BORDER; 3]);
    }
}
