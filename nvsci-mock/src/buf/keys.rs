//! The public NvSciBuf attribute keys: element size, element count, direction and value checks.

use crate::attrs::{Access, Check, Count, Fmt, KeySpec};

/// Maximum number of GPUs in a GpuId-style array.
const MAX_GPUS: usize = 16;
/// NV_SCI_BUF_IMAGE_MAX_PLANES.
const PLANES: usize = nvsci_sys::NV_SCI_BUF_IMAGE_MAX_PLANES as usize;
/// NV_SCI_BUF_TENSOR_MAX_DIMS.
const DIMS: usize = nvsci_sys::NV_SCI_BUF_TENSOR_MAX_DIMS as usize;
/// NV_SCI_BUF_PYRAMID_MAX_LEVELS.
const LEVELS: usize = nvsci_sys::NV_SCI_BUF_PYRAMID_MAX_LEVELS as usize;
/// NV_SCI_BUF_PEER_INFO_MAX_NUMBER / NV_SCI_BUF_PEER_HW_ENGINE_MAX_NUMBER.
const PEERS: usize = 128;
/// One past the last color format of NvSciBuf 2.11 (NvSciColor_UpperBound).
const COLOR_UPPER_BOUND: u64 = 153;

macro_rules! key {
    ($k:ident, $elem:expr, $count:expr, $acc:ident, $check:expr, $fmt:ident) => {
        KeySpec {
            key: nvsci_sys::$k,
            name: stringify!($k),
            elem: $elem,
            count: $count,
            access: Access::$acc,
            check: $check,
            fmt: Fmt::$fmt,
        }
    };
}

use Check::{Any, Bool, GpuCache, GpuCompression, NonZero, OneOf, PowerOfTwo, Range};
use Count::{One, UpTo};

const PERMS: &[u64] =
    &[nvsci_sys::NvSciBufAccessPerm_Readonly as u64, nvsci_sys::NvSciBufAccessPerm_ReadWrite as u64];
const LAYOUTS: &[u64] =
    &[nvsci_sys::NvSciBufImage_BlockLinearType as u64, nvsci_sys::NvSciBufImage_PitchLinearType as u64];
const SCANS: &[u64] =
    &[nvsci_sys::NvSciBufScan_ProgressiveType as u64, nvsci_sys::NvSciBufScan_InterlaceType as u64];

/// Every public key this mock accepts.
pub(crate) static BUF_KEYS: &[KeySpec] = &[
    // General
    key!(NvSciBufGeneralAttrKey_Types, 4, UpTo(usize::MAX), InOut, Range(1, 5), Uint),
    key!(NvSciBufGeneralAttrKey_NeedCpuAccess, 1, One, InOut, Bool, Bool),
    key!(NvSciBufGeneralAttrKey_RequiredPerm, 4, One, In, OneOf(PERMS), Uint),
    key!(NvSciBufGeneralAttrKey_EnableCpuCache, 1, One, InOut, Bool, Bool),
    key!(NvSciBufGeneralAttrKey_GpuId, 16, UpTo(MAX_GPUS), InOut, Any, Hex),
    key!(NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency, 1, One, Out, Bool, Bool),
    key!(NvSciBufGeneralAttrKey_ActualPerm, 4, One, Out, Any, Uint),
    key!(NvSciBufGeneralAttrKey_VidMem_GpuId, 16, One, InOut, Any, Hex),
    key!(NvSciBufGeneralAttrKey_EnableGpuCache, 17, UpTo(MAX_GPUS), InOut, GpuCache, GpuCache),
    key!(NvSciBufGeneralAttrKey_GpuSwNeedCacheCoherency, 17, UpTo(MAX_GPUS), Out, Any, GpuCache),
    key!(
        NvSciBufGeneralAttrKey_EnableGpuCompression,
        20,
        UpTo(MAX_GPUS),
        InOut,
        GpuCompression,
        GpuCompression
    ),
    key!(NvSciBufGeneralAttrKey_PeerLocationInfo, 16, UpTo(PEERS), InOut, Any, Hex),
    key!(NvSciBufGeneralAttrKey_PeerHwEngineArray, 8, UpTo(PEERS), InOut, Any, Hex),
    // RawBuffer
    key!(NvSciBufRawBufferAttrKey_Size, 8, One, InOut, NonZero, Uint),
    key!(NvSciBufRawBufferAttrKey_Align, 8, One, InOut, PowerOfTwo, Uint),
    // Image
    key!(NvSciBufImageAttrKey_Layout, 4, One, InOut, OneOf(LAYOUTS), Uint),
    key!(NvSciBufImageAttrKey_TopPadding, 8, UpTo(PLANES), InOut, Any, Uint),
    key!(NvSciBufImageAttrKey_BottomPadding, 8, UpTo(PLANES), InOut, Any, Uint),
    key!(NvSciBufImageAttrKey_LeftPadding, 8, UpTo(PLANES), InOut, Any, Uint),
    key!(NvSciBufImageAttrKey_RightPadding, 8, UpTo(PLANES), InOut, Any, Uint),
    key!(NvSciBufImageAttrKey_VprFlag, 1, One, InOut, Bool, Bool),
    key!(NvSciBufImageAttrKey_Size, 8, One, Out, Any, Uint),
    key!(NvSciBufImageAttrKey_Alignment, 8, One, Out, Any, Uint),
    key!(NvSciBufImageAttrKey_PlaneCount, 4, One, InOut, Range(1, PLANES as u64), Uint),
    key!(
        NvSciBufImageAttrKey_PlaneColorFormat,
        4,
        UpTo(PLANES),
        InOut,
        Range(1, COLOR_UPPER_BOUND - 1),
        Uint
    ),
    key!(NvSciBufImageAttrKey_PlaneColorStd, 4, UpTo(PLANES), InOut, Range(0, 11), Uint),
    key!(NvSciBufImageAttrKey_PlaneBaseAddrAlign, 4, UpTo(PLANES), InOut, PowerOfTwo, Uint),
    key!(NvSciBufImageAttrKey_PlaneWidth, 4, UpTo(PLANES), InOut, Any, Uint),
    key!(NvSciBufImageAttrKey_PlaneHeight, 4, UpTo(PLANES), InOut, Any, Uint),
    key!(NvSciBufImageAttrKey_ScanType, 4, One, InOut, OneOf(SCANS), Uint),
    key!(NvSciBufImageAttrKey_PlaneBitsPerPixel, 4, UpTo(PLANES), Out, Any, Uint),
    key!(NvSciBufImageAttrKey_PlaneOffset, 8, UpTo(PLANES), Out, Any, Uint),
    key!(NvSciBufImageAttrKey_PlaneDatatype, 4, UpTo(PLANES), Out, Any, Uint),
    key!(NvSciBufImageAttrKey_PlaneChannelCount, 1, UpTo(PLANES), Out, Any, Uint),
    key!(NvSciBufImageAttrKey_PlaneSecondFieldOffset, 8, UpTo(PLANES), Out, Any, Uint),
    key!(NvSciBufImageAttrKey_PlanePitch, 4, UpTo(PLANES), Out, Any, Uint),
    key!(NvSciBufImageAttrKey_PlaneAlignedHeight, 4, UpTo(PLANES), Out, Any, Uint),
    key!(NvSciBufImageAttrKey_PlaneAlignedSize, 8, UpTo(PLANES), Out, Any, Uint),
    key!(NvSciBufImageAttrKey_ImageCount, 8, One, InOut, Range(1, 1), Uint),
    key!(NvSciBufImageAttrKey_SurfType, 4, One, InOut, Any, Uint),
    key!(NvSciBufImageAttrKey_SurfMemLayout, 4, One, InOut, Any, Uint),
    key!(NvSciBufImageAttrKey_SurfSampleType, 4, One, InOut, Any, Uint),
    key!(NvSciBufImageAttrKey_SurfBPC, 4, One, InOut, Any, Uint),
    key!(NvSciBufImageAttrKey_SurfComponentOrder, 4, One, InOut, Any, Uint),
    key!(NvSciBufImageAttrKey_SurfWidthBase, 4, One, InOut, Any, Uint),
    key!(NvSciBufImageAttrKey_SurfHeightBase, 4, One, InOut, Any, Uint),
    key!(NvSciBufImageAttrKey_SurfColorStd, 4, One, InOut, Any, Uint),
    // Tensor (accepted for set/get; reconciliation is not supported)
    key!(NvSciBufTensorAttrKey_DataType, 4, One, InOut, Any, Uint),
    key!(NvSciBufTensorAttrKey_NumDims, 4, One, InOut, Range(1, DIMS as u64), Uint),
    key!(NvSciBufTensorAttrKey_SizePerDim, 8, UpTo(DIMS), InOut, Any, Uint),
    key!(NvSciBufTensorAttrKey_AlignmentPerDim, 4, UpTo(DIMS), InOut, Any, Uint),
    key!(NvSciBufTensorAttrKey_StridesPerDim, 8, UpTo(DIMS), Out, Any, Uint),
    key!(NvSciBufTensorAttrKey_PixelFormat, 4, One, InOut, Any, Uint),
    key!(NvSciBufTensorAttrKey_BaseAddrAlign, 8, One, InOut, Any, Uint),
    key!(NvSciBufTensorAttrKey_Size, 8, One, Out, Any, Uint),
    // Array
    key!(NvSciBufArrayAttrKey_DataType, 4, One, InOut, Any, Uint),
    key!(NvSciBufArrayAttrKey_Stride, 8, One, InOut, Any, Uint),
    key!(NvSciBufArrayAttrKey_Capacity, 8, One, InOut, Any, Uint),
    key!(NvSciBufArrayAttrKey_Size, 8, One, Out, Any, Uint),
    key!(NvSciBufArrayAttrKey_Alignment, 8, One, Out, Any, Uint),
    // Pyramid
    key!(NvSciBufPyramidAttrKey_NumLevels, 4, One, InOut, Range(1, LEVELS as u64), Uint),
    key!(NvSciBufPyramidAttrKey_Scale, 4, One, InOut, Any, Float),
    key!(NvSciBufPyramidAttrKey_LevelOffset, 8, UpTo(LEVELS), Out, Any, Uint),
    key!(NvSciBufPyramidAttrKey_LevelSize, 8, UpTo(LEVELS), Out, Any, Uint),
    key!(NvSciBufPyramidAttrKey_Alignment, 8, One, Out, Any, Uint),
];

/// The NvSciBufType a key belongs to (0 = General).
pub(crate) fn key_type(key: u32) -> u32 {
    (key >> nvsci_sys::NV_SCI_BUF_ATTRKEY_BIT_COUNT) & ((1 << nvsci_sys::NV_SCI_BUF_DATATYPE_BIT_COUNT) - 1)
}
