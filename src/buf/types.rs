//! Value types of NvSciBuf attributes.

use crate::attr::{closed_elem, open_enum, pod_elem};
use nvsci_sys as sys;

open_enum! {
    /// `NvSciBufType`: what kind of buffer a list describes.
    pub struct BufType(u32) {
        /// `NvSciBufType_RawBuffer`.
        RAW_BUFFER = sys::NvSciBufType_RawBuffer,
        /// `NvSciBufType_Image`.
        IMAGE = sys::NvSciBufType_Image,
        /// `NvSciBufType_Tensor`.
        TENSOR = sys::NvSciBufType_Tensor,
        /// `NvSciBufType_Array`.
        ARRAY = sys::NvSciBufType_Array,
        /// `NvSciBufType_Pyramid`.
        PYRAMID = sys::NvSciBufType_Pyramid,
    }
}

open_enum! {
    /// `NvSciBufAttrValColorFmt`: the pixel format of one image plane (append-only numbering).
    pub struct ColorFormat(u32) {
        /// Luma, 8 bits.
        Y8 = sys::NvSciColor_Y8,
        /// Luma, 16 bits.
        Y16 = sys::NvSciColor_Y16,
        /// Interleaved chroma with U in the low byte (the NV12 chroma plane).
        V8U8 = sys::NvSciColor_V8U8,
        /// Interleaved chroma with V in the low byte (the NV21 chroma plane).
        U8V8 = sys::NvSciColor_U8V8,
        /// Chroma U only, 8 bits (planar YUV).
        U8 = sys::NvSciColor_U8,
        /// Chroma V only, 8 bits (planar YUV).
        V8 = sys::NvSciColor_V8,
        /// Alpha only, 8 bits.
        A8 = sys::NvSciColor_A8,
        /// 32-bit RGBA with bytes R, G, B, A in memory.
        A8B8G8R8 = sys::NvSciColor_A8B8G8R8,
        /// 32-bit with bytes B, G, R, A in memory.
        A8R8G8B8 = sys::NvSciColor_A8R8G8B8,
        /// 32-bit with bytes A, R, G, B in memory.
        B8G8R8A8 = sys::NvSciColor_B8G8R8A8,
        /// 64-bit RGBA, 16 bits per channel.
        A16B16G16R16 = sys::NvSciColor_A16B16G16R16,
        /// 64-bit RGBA, half-float channels.
        FLOAT_A16B16G16R16 = sys::NvSciColor_Float_A16B16G16R16,
    }
}

open_enum! {
    /// `NvSciBufAttrValColorStd`.
    pub struct ColorStd(u32) {
        /// sRGB.
        SRGB = sys::NvSciColorStd_SRGB,
        /// BT.601 studio range.
        REC601_SR = sys::NvSciColorStd_REC601_SR,
        /// BT.601 full range.
        REC601_ER = sys::NvSciColorStd_REC601_ER,
        /// BT.709 studio range.
        REC709_SR = sys::NvSciColorStd_REC709_SR,
        /// BT.709 full range.
        REC709_ER = sys::NvSciColorStd_REC709_ER,
    }
}

open_enum! {
    /// `NvSciBufAttrValDataType`.
    pub struct DataType(u32) {
        /// 8-bit unsigned.
        UINT8 = sys::NvSciDataType_Uint8,
        /// 16-bit unsigned.
        UINT16 = sys::NvSciDataType_Uint16,
        /// 32-bit unsigned.
        UINT32 = sys::NvSciDataType_Uint32,
        /// Half float.
        FLOAT16 = sys::NvSciDataType_Float16,
        /// Float.
        FLOAT32 = sys::NvSciDataType_Float32,
    }
}

open_enum! {
    /// `NvSciBufSurfType` (surface-based image description).
    pub struct SurfType(u32) {
        /// YUV.
        YUV = sys::NvSciSurfType_YUV,
        /// RGBA.
        RGBA = sys::NvSciSurfType_RGBA,
        /// Raw sensor data.
        RAW = sys::NvSciSurfType_RAW,
    }
}

open_enum! {
    /// `NvSciBufSurfMemLayout`.
    pub struct SurfMemLayout(u32) {
        /// Packed.
        PACKED = sys::NvSciSurfMemLayout_Packed,
        /// Semi-planar (e.g. NV12).
        SEMI_PLANAR = sys::NvSciSurfMemLayout_SemiPlanar,
        /// Planar.
        PLANAR = sys::NvSciSurfMemLayout_Planar,
    }
}

open_enum! {
    /// `NvSciBufSurfSampleType`.
    pub struct SurfSampleType(u32) {
        /// 4:2:0.
        S420 = sys::NvSciSurfSampleType_420,
        /// 4:2:2.
        S422 = sys::NvSciSurfSampleType_422,
        /// 4:4:4.
        S444 = sys::NvSciSurfSampleType_444,
    }
}

open_enum! {
    /// `NvSciBufSurfBPC`.
    pub struct SurfBpc(u32) {
        /// 8 bits per component.
        BPC8 = sys::NvSciSurfBPC_8,
        /// 10 bits per component.
        BPC10 = sys::NvSciSurfBPC_10,
        /// 16 bits per component.
        BPC16 = sys::NvSciSurfBPC_16,
    }
}

open_enum! {
    /// `NvSciBufSurfComponentOrder`.
    pub struct SurfComponentOrder(u32) {
        /// Y, U, V.
        YUV = sys::NvSciSurfComponentOrder_YUV,
        /// Y, V, U.
        YVU = sys::NvSciSurfComponentOrder_YVU,
        /// Luma only.
        LUMA = sys::NvSciSurfComponentOrder_Luma,
    }
}

open_enum! {
    /// `NvSciBufCompressionType`.
    pub struct CompressionType(u32) {
        /// No compression.
        NONE = sys::NvSciBufCompressionType_None,
        /// Generic compressible memory.
        GENERIC_COMPRESSIBLE = sys::NvSciBufCompressionType_GenericCompressible,
    }
}

/// Access permission of a buffer (`NvSciBufAttrValAccessPerm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u32)]
pub enum Perm {
    /// Read only.
    ReadOnly = sys::NvSciBufAccessPerm_Readonly,
    /// Read and write.
    ReadWrite = sys::NvSciBufAccessPerm_ReadWrite,
}
closed_elem!(Perm, u32, {
    sys::NvSciBufAccessPerm_Readonly => Perm::ReadOnly,
    sys::NvSciBufAccessPerm_ReadWrite => Perm::ReadWrite,
});

/// Image memory layout (`NvSciBufAttrValImageLayoutType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ImageLayout {
    /// GPU block-linear tiling.
    BlockLinear = sys::NvSciBufImage_BlockLinearType,
    /// Rows one after another, `pitch` bytes apart.
    PitchLinear = sys::NvSciBufImage_PitchLinearType,
}
closed_elem!(ImageLayout, u32, {
    sys::NvSciBufImage_BlockLinearType => ImageLayout::BlockLinear,
    sys::NvSciBufImage_PitchLinearType => ImageLayout::PitchLinear,
});

/// Image scan type (`NvSciBufAttrValImageScanType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ScanType {
    /// Progressive.
    Progressive = sys::NvSciBufScan_ProgressiveType,
    /// Interlaced.
    Interlace = sys::NvSciBufScan_InterlaceType,
}
closed_elem!(ScanType, u32, {
    sys::NvSciBufScan_ProgressiveType => ScanType::Progressive,
    sys::NvSciBufScan_InterlaceType => ScanType::Interlace,
});

pub use crate::gpu_id::GpuId;

/// Per-GPU cacheability (`NvSciBufAttrValGpuCache`: 17 bytes, alignment 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct GpuCache {
    /// The GPU.
    pub gpu_id: GpuId,
    /// Whether the GPU caches this buffer (for `GpuSwNeedCacheCoherency`: whether software
    /// coherency operations are needed).
    pub cacheable: bool,
}

impl crate::attr::sealed_access::Sealed for GpuCache {}
impl crate::attr::AttrElem for GpuCache {
    type Raw = [u8; 17];
    fn from_raw(raw: [u8; 17]) -> Option<Self> {
        let mut id = [0u8; 16];
        id.copy_from_slice(&raw[..16]);
        let cacheable = bool::from_raw_byte(raw[16])?;
        Some(GpuCache { gpu_id: GpuId(id), cacheable })
    }
}

/// Per-GPU compression (`NvSciBufAttrValGpuCompression`: 20 bytes, alignment 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct GpuCompression {
    /// The GPU.
    pub gpu_id: GpuId,
    /// Requested or granted compression.
    pub compression: CompressionType,
}
pod_elem!(GpuCompression);

open_enum! {
    /// `NvSciBufHwEngName`: a hardware engine that accesses a buffer or sync object (an element
    /// of [`PeerHwEngine`]). Open: engines of newer libraries round-trip as `HwEngine(n)`.
    pub struct HwEngine(u32) {
        /// Display controller.
        DISPLAY = sys::NvSciBufHwEngName_Display,
        /// Image signal processor.
        ISP = sys::NvSciBufHwEngName_Isp,
        /// Video input (camera capture).
        VI = sys::NvSciBufHwEngName_Vi,
        /// Camera serial interface.
        CSI = sys::NvSciBufHwEngName_Csi,
        /// Video image compositor.
        VIC = sys::NvSciBufHwEngName_Vic,
        /// GPU.
        GPU = sys::NvSciBufHwEngName_Gpu,
        /// Video encoder.
        MSENC = sys::NvSciBufHwEngName_MSENC,
        /// Video decoder.
        NVDEC = sys::NvSciBufHwEngName_NVDEC,
        /// JPEG engine.
        NVJPG = sys::NvSciBufHwEngName_NVJPG,
        /// Programmable vision accelerator.
        PVA = sys::NvSciBufHwEngName_PVA,
        /// Deep learning accelerator.
        DLA = sys::NvSciBufHwEngName_DLA,
        /// PCIe.
        PCIE = sys::NvSciBufHwEngName_PCIe,
        /// Optical flow accelerator.
        OFA = sys::NvSciBufHwEngName_OFA,
        /// `NvSciBufHwEngName_NPM`.
        NPM = sys::NvSciBufHwEngName_NPM,
    }
}

open_enum! {
    /// `NvSciBufPlatformName`: the platform an engine of a [`PeerHwEngine`] belongs to. Open:
    /// platforms of newer libraries (named by their headers only) round-trip as `Platform(n)`.
    pub struct Platform(u32) {
        /// Orin.
        ORIN = sys::NvSciBufPlatformName_Orin,
        /// PG189 (an x86 DRIVE host platform).
        PG189 = sys::NvSciBufPlatformName_PG189,
        /// PG199 (an x86 DRIVE host platform).
        PG199 = sys::NvSciBufPlatformName_PG199,
    }
}

/// One engine of the `PeerHwEngineArray` keys (`NvSciBufPeerHwEngine`: 8 bytes, the engine at
/// offset 0, the platform at offset 4).
///
/// The C struct is packed (alignment 1); this one has alignment 4, which changes nothing for a
/// value array: the size and the stride are 8 either way, and values are read unaligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct PeerHwEngine {
    /// The engine.
    pub engine: HwEngine,
    /// The platform the engine belongs to.
    pub platform: Platform,
}
pod_elem!(PeerHwEngine);

trait FromRawByte: Sized {
    fn from_raw_byte(b: u8) -> Option<Self>;
}
impl FromRawByte for bool {
    fn from_raw_byte(b: u8) -> Option<Self> {
        <bool as crate::attr::AttrElem>::from_raw(b)
    }
}

// Layouts must match the C structs exactly (checked against the documented values).
const _: () = {
    assert!(core::mem::size_of::<GpuCache>() == 17 && core::mem::align_of::<GpuCache>() == 1);
    assert!(core::mem::size_of::<GpuCompression>() == 20);
    assert!(core::mem::align_of::<GpuCompression>() == 4);
    assert!(core::mem::size_of::<Perm>() == 4 && core::mem::size_of::<ImageLayout>() == 4);
    assert!(core::mem::size_of::<PeerHwEngine>() == core::mem::size_of::<sys::NvSciBufPeerHwEngine>());
    assert!(
        core::mem::offset_of!(PeerHwEngine, engine)
            == core::mem::offset_of!(sys::NvSciBufPeerHwEngine, engName)
    );
    assert!(
        core::mem::offset_of!(PeerHwEngine, platform)
            == core::mem::offset_of!(sys::NvSciBufPeerHwEngine, platName)
    );
};
