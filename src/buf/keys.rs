//! NvSciBuf attribute keys: one typed constant per key and the [`BufAttr`] values to set.

use super::types::*;
use crate::attr::attr_keys;
use nvsci_sys as sys;

attr_keys! {
    /// One NvSciBuf attribute to set, with its typed value. Output-only keys have no variant.
    enum BufAttr;
    /// Typed NvSciBuf keys for the getters. `Key<BufFamily, T, N>`: element type `T`, at most `N`
    /// elements.
    mod key;
    family crate::buf::BufFamily;
    in_one {
        /// Whether the CPU accesses the buffer.
        NeedCpuAccess, NEED_CPU_ACCESS, NvSciBufGeneralAttrKey_NeedCpuAccess: bool;
        /// Permission this user needs (reconciled into `ACTUAL_PERM`).
        RequiredPerm, REQUIRED_PERM, NvSciBufGeneralAttrKey_RequiredPerm: Perm;
        /// Whether CPU caching is enabled.
        EnableCpuCache, ENABLE_CPU_CACHE, NvSciBufGeneralAttrKey_EnableCpuCache: bool;
        /// Allocate in this dGPU's video memory.
        VidMemGpuId, VIDMEM_GPU_ID, NvSciBufGeneralAttrKey_VidMem_GpuId: GpuId;
        /// Raw buffer size in bytes.
        RawSize, RAW_SIZE, NvSciBufRawBufferAttrKey_Size: u64;
        /// Raw buffer alignment in bytes (a power of two).
        RawAlign, RAW_ALIGN, NvSciBufRawBufferAttrKey_Align: u64;
        /// Image memory layout.
        Layout, IMAGE_LAYOUT, NvSciBufImageAttrKey_Layout: ImageLayout;
        /// Protected-memory flag.
        VprFlag, VPR_FLAG, NvSciBufImageAttrKey_VprFlag: bool;
        /// Number of planes (plane-based images).
        PlaneCount, PLANE_COUNT, NvSciBufImageAttrKey_PlaneCount: u32;
        /// Progressive or interlaced.
        ScanType, SCAN_TYPE, NvSciBufImageAttrKey_ScanType: ScanType;
        /// Number of images (image/tensor reconciliation).
        ImageCount, IMAGE_COUNT, NvSciBufImageAttrKey_ImageCount: u64;
        /// Surface type (surface-based images).
        SurfType, SURF_TYPE, NvSciBufImageAttrKey_SurfType: SurfType;
        /// Surface memory layout.
        SurfMemLayout, SURF_MEM_LAYOUT, NvSciBufImageAttrKey_SurfMemLayout: SurfMemLayout;
        /// Surface chroma subsampling.
        SurfSampleType, SURF_SAMPLE_TYPE, NvSciBufImageAttrKey_SurfSampleType: SurfSampleType;
        /// Surface bits per component.
        SurfBpc, SURF_BPC, NvSciBufImageAttrKey_SurfBPC: SurfBpc;
        /// Surface component order.
        SurfComponentOrder, SURF_COMPONENT_ORDER, NvSciBufImageAttrKey_SurfComponentOrder: SurfComponentOrder;
        /// Surface width in pixels.
        SurfWidthBase, SURF_WIDTH_BASE, NvSciBufImageAttrKey_SurfWidthBase: u32;
        /// Surface height in pixels.
        SurfHeightBase, SURF_HEIGHT_BASE, NvSciBufImageAttrKey_SurfHeightBase: u32;
        /// Surface color standard.
        SurfColorStd, SURF_COLOR_STD, NvSciBufImageAttrKey_SurfColorStd: ColorStd;
        /// Tensor element type.
        TensorDataType, TENSOR_DATA_TYPE, NvSciBufTensorAttrKey_DataType: DataType;
        /// Tensor dimension count.
        TensorNumDims, TENSOR_NUM_DIMS, NvSciBufTensorAttrKey_NumDims: u32;
        /// Tensor pixel format.
        TensorPixelFormat, TENSOR_PIXEL_FORMAT, NvSciBufTensorAttrKey_PixelFormat: ColorFormat;
        /// Tensor base address alignment.
        TensorBaseAddrAlign, TENSOR_BASE_ADDR_ALIGN, NvSciBufTensorAttrKey_BaseAddrAlign: u64;
        /// Array element type.
        ArrayDataType, ARRAY_DATA_TYPE, NvSciBufArrayAttrKey_DataType: DataType;
        /// Array stride in bytes.
        ArrayStride, ARRAY_STRIDE, NvSciBufArrayAttrKey_Stride: u64;
        /// Array capacity in elements.
        ArrayCapacity, ARRAY_CAPACITY, NvSciBufArrayAttrKey_Capacity: u64;
        /// Pyramid level count.
        PyramidNumLevels, PYRAMID_NUM_LEVELS, NvSciBufPyramidAttrKey_NumLevels: u32;
        /// Pyramid scale between levels.
        PyramidScale, PYRAMID_SCALE, NvSciBufPyramidAttrKey_Scale: f32;
    }
    in_many {
        /// Buffer types described by the list (set first).
        Types, TYPES, NvSciBufGeneralAttrKey_Types: [BufType; 5];
        /// GPUs that access the buffer.
        GpuId, GPU_ID, NvSciBufGeneralAttrKey_GpuId: [GpuId; 16];
        /// Per-GPU cacheability request.
        EnableGpuCache, ENABLE_GPU_CACHE, NvSciBufGeneralAttrKey_EnableGpuCache: [GpuCache; 16];
        /// Per-GPU compression request.
        EnableGpuCompression, ENABLE_GPU_COMPRESSION, NvSciBufGeneralAttrKey_EnableGpuCompression: [GpuCompression; 16];
        /// Hardware engines that access the buffer (e.g. VI, GPU and display of a camera
        /// pipeline), each with its platform.
        PeerHwEngineArray, PEER_HW_ENGINE_ARRAY, NvSciBufGeneralAttrKey_PeerHwEngineArray: [PeerHwEngine; sys::NV_SCI_BUF_PEER_HW_ENGINE_MAX_NUMBER as usize];
        /// Top padding per plane, in pixels.
        TopPadding, TOP_PADDING, NvSciBufImageAttrKey_TopPadding: [u64; 3];
        /// Bottom padding per plane, in pixels.
        BottomPadding, BOTTOM_PADDING, NvSciBufImageAttrKey_BottomPadding: [u64; 3];
        /// Left padding per plane, in pixels.
        LeftPadding, LEFT_PADDING, NvSciBufImageAttrKey_LeftPadding: [u64; 3];
        /// Right padding per plane, in pixels.
        RightPadding, RIGHT_PADDING, NvSciBufImageAttrKey_RightPadding: [u64; 3];
        /// Color format per plane.
        PlaneColorFormat, PLANE_COLOR_FORMAT, NvSciBufImageAttrKey_PlaneColorFormat: [ColorFormat; 3];
        /// Color standard per plane.
        PlaneColorStd, PLANE_COLOR_STD, NvSciBufImageAttrKey_PlaneColorStd: [ColorStd; 3];
        /// Base address alignment per plane, in bytes.
        PlaneBaseAddrAlign, PLANE_BASE_ADDR_ALIGN, NvSciBufImageAttrKey_PlaneBaseAddrAlign: [u32; 3];
        /// Width per plane, in pixels.
        PlaneWidth, PLANE_WIDTH, NvSciBufImageAttrKey_PlaneWidth: [u32; 3];
        /// Height per plane, in pixels.
        PlaneHeight, PLANE_HEIGHT, NvSciBufImageAttrKey_PlaneHeight: [u32; 3];
        /// Tensor size per dimension.
        TensorSizePerDim, TENSOR_SIZE_PER_DIM, NvSciBufTensorAttrKey_SizePerDim: [u64; 8];
        /// Tensor alignment per dimension.
        TensorAlignmentPerDim, TENSOR_ALIGNMENT_PER_DIM, NvSciBufTensorAttrKey_AlignmentPerDim: [u32; 8];
    }
    out_one {
        /// Whether the CPU must flush/invalidate caches around its accesses.
        CPU_NEED_SW_CACHE_COHERENCY, NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency: bool;
        /// Reconciled permission (of an object: that reference's permission).
        ACTUAL_PERM, NvSciBufGeneralAttrKey_ActualPerm: Perm;
        /// Total image size in bytes.
        IMAGE_SIZE, NvSciBufImageAttrKey_Size: u64;
        /// Image alignment in bytes.
        IMAGE_ALIGNMENT, NvSciBufImageAttrKey_Alignment: u64;
        /// Tensor size in bytes.
        TENSOR_SIZE, NvSciBufTensorAttrKey_Size: u64;
        /// Array size in bytes.
        ARRAY_SIZE, NvSciBufArrayAttrKey_Size: u64;
        /// Array alignment in bytes.
        ARRAY_ALIGNMENT, NvSciBufArrayAttrKey_Alignment: u64;
        /// Pyramid alignment in bytes.
        PYRAMID_ALIGNMENT, NvSciBufPyramidAttrKey_Alignment: u64;
    }
    out_many {
        /// Per-GPU: whether software cache-coherency operations are needed.
        GPU_SW_NEED_CACHE_COHERENCY, NvSciBufGeneralAttrKey_GpuSwNeedCacheCoherency: [GpuCache; 16];
        /// Bits per pixel per plane.
        PLANE_BITS_PER_PIXEL, NvSciBufImageAttrKey_PlaneBitsPerPixel: [u32; 3];
        /// Byte offset of each plane from the buffer start.
        PLANE_OFFSET, NvSciBufImageAttrKey_PlaneOffset: [u64; 3];
        /// Data type per plane.
        PLANE_DATATYPE, NvSciBufImageAttrKey_PlaneDatatype: [DataType; 3];
        /// Channel count per plane.
        PLANE_CHANNEL_COUNT, NvSciBufImageAttrKey_PlaneChannelCount: [u8; 3];
        /// Offset of the second field per plane (interlaced).
        PLANE_SECOND_FIELD_OFFSET, NvSciBufImageAttrKey_PlaneSecondFieldOffset: [u64; 3];
        /// Row pitch per plane, in bytes.
        PLANE_PITCH, NvSciBufImageAttrKey_PlanePitch: [u32; 3];
        /// Aligned height per plane, in rows.
        PLANE_ALIGNED_HEIGHT, NvSciBufImageAttrKey_PlaneAlignedHeight: [u32; 3];
        /// Aligned size per plane, in bytes.
        PLANE_ALIGNED_SIZE, NvSciBufImageAttrKey_PlaneAlignedSize: [u64; 3];
        /// Tensor stride per dimension.
        TENSOR_STRIDES_PER_DIM, NvSciBufTensorAttrKey_StridesPerDim: [u64; 8];
        /// Pyramid level offsets.
        PYRAMID_LEVEL_OFFSET, NvSciBufPyramidAttrKey_LevelOffset: [u64; 10];
        /// Pyramid level sizes.
        PYRAMID_LEVEL_SIZE, NvSciBufPyramidAttrKey_LevelSize: [u64; 10];
    }
}
