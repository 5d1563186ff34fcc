//! `VkFormat` -> CUDA array format mapping for images imported as CUDA mipmapped arrays.
//!
//! CUDA arrays know integer, half and float channels of 1, 2 or 4 components. Normalised Vulkan
//! formats (`UNORM`/`SNORM`) map to the integer format of the same width; whether a texture
//! fetch returns them normalised is a texture-object setting, reported here as
//! [`CudaFormat::normalized`]. Three-component and packed formats have no CUDA array format.

use ash::vk;
use cudarc::driver::sys::{self, CUarray_format};

/// How CUDA sees one texel of a Vulkan format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaFormat {
    /// The CUDA channel format.
    pub format: CUarray_format,
    /// Channels per texel (1, 2 or 4).
    pub channels: u32,
    /// Bytes per texel.
    pub bytes_per_texel: u32,
    /// Whether the Vulkan format is normalised (`UNORM`/`SNORM`): texture objects should read it
    /// as normalised floats (no `CU_TRSF_READ_AS_INTEGER`).
    pub normalized: bool,
}

/// Every `VkFormat` [`cuda_array_format`] maps, in table order.
pub const SUPPORTED_FORMATS: &[vk::Format] = &[
    vk::Format::R8_UINT,
    vk::Format::R8_UNORM,
    vk::Format::R8_SINT,
    vk::Format::R8_SNORM,
    vk::Format::R8G8_UINT,
    vk::Format::R8G8_UNORM,
    vk::Format::R8G8_SINT,
    vk::Format::R8G8_SNORM,
    vk::Format::R8G8B8A8_UINT,
    vk::Format::R8G8B8A8_UNORM,
    vk::Format::R8G8B8A8_SINT,
    vk::Format::R8G8B8A8_SNORM,
    vk::Format::B8G8R8A8_UNORM,
    vk::Format::R16_UINT,
    vk::Format::R16_UNORM,
    vk::Format::R16_SINT,
    vk::Format::R16_SNORM,
    vk::Format::R16_SFLOAT,
    vk::Format::R16G16_UINT,
    vk::Format::R16G16_UNORM,
    vk::Format::R16G16_SINT,
    vk::Format::R16G16_SNORM,
    vk::Format::R16G16_SFLOAT,
    vk::Format::R16G16B16A16_UINT,
    vk::Format::R16G16B16A16_UNORM,
    vk::Format::R16G16B16A16_SINT,
    vk::Format::R16G16B16A16_SNORM,
    vk::Format::R16G16B16A16_SFLOAT,
    vk::Format::R32_UINT,
    vk::Format::R32_SINT,
    vk::Format::R32_SFLOAT,
    vk::Format::R32G32_UINT,
    vk::Format::R32G32_SINT,
    vk::Format::R32G32_SFLOAT,
    vk::Format::R32G32B32A32_UINT,
    vk::Format::R32G32B32A32_SINT,
    vk::Format::R32G32B32A32_SFLOAT,
];

/// The `VK_FORMAT_*` name of a supported format, or `VkFormat(<number>)` for any other.
pub fn format_name(format: vk::Format) -> std::borrow::Cow<'static, str> {
    use vk::Format as F;
    std::borrow::Cow::Borrowed(match format {
        F::R8_UINT => "VK_FORMAT_R8_UINT",
        F::R8_UNORM => "VK_FORMAT_R8_UNORM",
        F::R8_SINT => "VK_FORMAT_R8_SINT",
        F::R8_SNORM => "VK_FORMAT_R8_SNORM",
        F::R8G8_UINT => "VK_FORMAT_R8G8_UINT",
        F::R8G8_UNORM => "VK_FORMAT_R8G8_UNORM",
        F::R8G8_SINT => "VK_FORMAT_R8G8_SINT",
        F::R8G8_SNORM => "VK_FORMAT_R8G8_SNORM",
        F::R8G8B8A8_UINT => "VK_FORMAT_R8G8B8A8_UINT",
        F::R8G8B8A8_UNORM => "VK_FORMAT_R8G8B8A8_UNORM",
        F::R8G8B8A8_SINT => "VK_FORMAT_R8G8B8A8_SINT",
        F::R8G8B8A8_SNORM => "VK_FORMAT_R8G8B8A8_SNORM",
        F::B8G8R8A8_UNORM => "VK_FORMAT_B8G8R8A8_UNORM",
        F::R16_UINT => "VK_FORMAT_R16_UINT",
        F::R16_UNORM => "VK_FORMAT_R16_UNORM",
        F::R16_SINT => "VK_FORMAT_R16_SINT",
        F::R16_SNORM => "VK_FORMAT_R16_SNORM",
        F::R16_SFLOAT => "VK_FORMAT_R16_SFLOAT",
        F::R16G16_UINT => "VK_FORMAT_R16G16_UINT",
        F::R16G16_UNORM => "VK_FORMAT_R16G16_UNORM",
        F::R16G16_SINT => "VK_FORMAT_R16G16_SINT",
        F::R16G16_SNORM => "VK_FORMAT_R16G16_SNORM",
        F::R16G16_SFLOAT => "VK_FORMAT_R16G16_SFLOAT",
        F::R16G16B16A16_UINT => "VK_FORMAT_R16G16B16A16_UINT",
        F::R16G16B16A16_UNORM => "VK_FORMAT_R16G16B16A16_UNORM",
        F::R16G16B16A16_SINT => "VK_FORMAT_R16G16B16A16_SINT",
        F::R16G16B16A16_SNORM => "VK_FORMAT_R16G16B16A16_SNORM",
        F::R16G16B16A16_SFLOAT => "VK_FORMAT_R16G16B16A16_SFLOAT",
        F::R32_UINT => "VK_FORMAT_R32_UINT",
        F::R32_SINT => "VK_FORMAT_R32_SINT",
        F::R32_SFLOAT => "VK_FORMAT_R32_SFLOAT",
        F::R32G32_UINT => "VK_FORMAT_R32G32_UINT",
        F::R32G32_SINT => "VK_FORMAT_R32G32_SINT",
        F::R32G32_SFLOAT => "VK_FORMAT_R32G32_SFLOAT",
        F::R32G32B32A32_UINT => "VK_FORMAT_R32G32B32A32_UINT",
        F::R32G32B32A32_SINT => "VK_FORMAT_R32G32B32A32_SINT",
        F::R32G32B32A32_SFLOAT => "VK_FORMAT_R32G32B32A32_SFLOAT",
        other => return std::borrow::Cow::Owned(format!("VkFormat({})", other.as_raw())),
    })
}

/// The CUDA array format of a Vulkan format, or `None` when CUDA has none (3-component,
/// packed, compressed, depth/stencil and sRGB formats).
///
/// `B8G8R8A8_UNORM` maps to four 8-bit channels in memory order: CUDA's `x` is Vulkan's B.
pub fn cuda_array_format(format: vk::Format) -> Option<CudaFormat> {
    use vk::Format as F;
    use CUarray_format::*;
    let (format_, channels, bytes, normalized) = match format {
        F::R8_UINT => (CU_AD_FORMAT_UNSIGNED_INT8, 1, 1, false),
        F::R8_UNORM => (CU_AD_FORMAT_UNSIGNED_INT8, 1, 1, true),
        F::R8_SINT => (CU_AD_FORMAT_SIGNED_INT8, 1, 1, false),
        F::R8_SNORM => (CU_AD_FORMAT_SIGNED_INT8, 1, 1, true),
        F::R8G8_UINT => (CU_AD_FORMAT_UNSIGNED_INT8, 2, 2, false),
        F::R8G8_UNORM => (CU_AD_FORMAT_UNSIGNED_INT8, 2, 2, true),
        F::R8G8_SINT => (CU_AD_FORMAT_SIGNED_INT8, 2, 2, false),
        F::R8G8_SNORM => (CU_AD_FORMAT_SIGNED_INT8, 2, 2, true),
        F::R8G8B8A8_UINT => (CU_AD_FORMAT_UNSIGNED_INT8, 4, 4, false),
        F::R8G8B8A8_UNORM | F::B8G8R8A8_UNORM => (CU_AD_FORMAT_UNSIGNED_INT8, 4, 4, true),
        F::R8G8B8A8_SINT => (CU_AD_FORMAT_SIGNED_INT8, 4, 4, false),
        F::R8G8B8A8_SNORM => (CU_AD_FORMAT_SIGNED_INT8, 4, 4, true),
        F::R16_UINT => (CU_AD_FORMAT_UNSIGNED_INT16, 1, 2, false),
        F::R16_UNORM => (CU_AD_FORMAT_UNSIGNED_INT16, 1, 2, true),
        F::R16_SINT => (CU_AD_FORMAT_SIGNED_INT16, 1, 2, false),
        F::R16_SNORM => (CU_AD_FORMAT_SIGNED_INT16, 1, 2, true),
        F::R16_SFLOAT => (CU_AD_FORMAT_HALF, 1, 2, false),
        F::R16G16_UINT => (CU_AD_FORMAT_UNSIGNED_INT16, 2, 4, false),
        F::R16G16_UNORM => (CU_AD_FORMAT_UNSIGNED_INT16, 2, 4, true),
        F::R16G16_SINT => (CU_AD_FORMAT_SIGNED_INT16, 2, 4, false),
        F::R16G16_SNORM => (CU_AD_FORMAT_SIGNED_INT16, 2, 4, true),
        F::R16G16_SFLOAT => (CU_AD_FORMAT_HALF, 2, 4, false),
        F::R16G16B16A16_UINT => (CU_AD_FORMAT_UNSIGNED_INT16, 4, 8, false),
        F::R16G16B16A16_UNORM => (CU_AD_FORMAT_UNSIGNED_INT16, 4, 8, true),
        F::R16G16B16A16_SINT => (CU_AD_FORMAT_SIGNED_INT16, 4, 8, false),
        F::R16G16B16A16_SNORM => (CU_AD_FORMAT_SIGNED_INT16, 4, 8, true),
        F::R16G16B16A16_SFLOAT => (CU_AD_FORMAT_HALF, 4, 8, false),
        F::R32_UINT => (CU_AD_FORMAT_UNSIGNED_INT32, 1, 4, false),
        F::R32_SINT => (CU_AD_FORMAT_SIGNED_INT32, 1, 4, false),
        F::R32_SFLOAT => (CU_AD_FORMAT_FLOAT, 1, 4, false),
        F::R32G32_UINT => (CU_AD_FORMAT_UNSIGNED_INT32, 2, 8, false),
        F::R32G32_SINT => (CU_AD_FORMAT_SIGNED_INT32, 2, 8, false),
        F::R32G32_SFLOAT => (CU_AD_FORMAT_FLOAT, 2, 8, false),
        F::R32G32B32A32_UINT => (CU_AD_FORMAT_UNSIGNED_INT32, 4, 16, false),
        F::R32G32B32A32_SINT => (CU_AD_FORMAT_SIGNED_INT32, 4, 16, false),
        F::R32G32B32A32_SFLOAT => (CU_AD_FORMAT_FLOAT, 4, 16, false),
        _ => return None,
    };
    Some(CudaFormat { format: format_, channels, bytes_per_texel: bytes, normalized })
}

/// `CUDA_ARRAY3D_*` flags for an image with `usage`: surface load/store always (so kernels can
/// read and write it through surface objects), plus `CUDA_ARRAY3D_COLOR_ATTACHMENT` when the
/// image is a color attachment, as CUDA requires for such images.
pub fn cuda_array_flags(usage: vk::ImageUsageFlags) -> u32 {
    let mut flags = sys::CUDA_ARRAY3D_SURFACE_LDST;
    if usage.contains(vk::ImageUsageFlags::COLOR_ATTACHMENT) {
        flags |= sys::CUDA_ARRAY3D_COLOR_ATTACHMENT;
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_format_maps_and_sizes_agree() {
        for &f in SUPPORTED_FORMATS {
            let c = cuda_array_format(f).unwrap_or_else(|| panic!("{} listed but unmapped", format_name(f)));
            let channel_bytes = match c.format {
                CUarray_format::CU_AD_FORMAT_UNSIGNED_INT8 | CUarray_format::CU_AD_FORMAT_SIGNED_INT8 => 1,
                CUarray_format::CU_AD_FORMAT_UNSIGNED_INT16
                | CUarray_format::CU_AD_FORMAT_SIGNED_INT16
                | CUarray_format::CU_AD_FORMAT_HALF => 2,
                _ => 4,
            };
            assert_eq!(c.bytes_per_texel, c.channels * channel_bytes, "{}", format_name(f));
            assert!(format_name(f).starts_with("VK_FORMAT_"));
        }
    }
}
