//! ABI tests for nvsci-sys.
//!
//! Every expected number below is written out by hand from the NvSci ABI facts (sizes and offsets
//! measured against the vendor headers on LP64, enum values read from the vendor headers); none is
//! derived from the bindings. The bindings must agree with them on x86_64 and aarch64 alike.
//!
//! The `every_*` tests read the checked-in `src/bindings.rs` and fail when a constant, enum type or
//! struct is bound there but not checked here, so new bindings cannot slip in untested.

use core::mem::{align_of, offset_of, size_of};
use nvsci_sys::loader::{self, LoadError};
use nvsci_sys::*;
use std::path::PathBuf;

/// The checked-in bindings, read only for the names they bind (never for values).
const BINDINGS: &str = include_str!("../src/bindings.rs");

/// Asserts each `NAME = value` pair and evaluates to the list of names checked.
///
/// The literal takes the type of the constant, so a value that does not fit the bound type is a
/// compile error rather than a silent truncation.
macro_rules! expect_values {
    ($($name:ident = $value:expr),* $(,)?) => {{
        $(
            assert_eq!($name, $value, concat!(stringify!($name), " has the wrong value"));
        )*
        &[$(stringify!($name)),*]
    }};
}

/// Asserts `size_of == 4` for each listed C enum type and evaluates to the list of names checked.
macro_rules! expect_enum_types {
    ($($ty:ident),* $(,)?) => {{
        $(
            assert_eq!(size_of::<$ty>(), 4, concat!("size of enum type ", stringify!($ty)));
            assert_eq!(align_of::<$ty>(), 4, concat!("alignment of enum type ", stringify!($ty)));
        )*
        &[$(stringify!($ty)),*]
    }};
}

/// Asserts size, alignment and every field offset of one struct; evaluates to the struct's name.
macro_rules! expect_layout {
    ($ty:ident: size $size:literal, align $align:literal { $($field:ident @ $off:literal),* $(,)? }) => {{
        assert_eq!(size_of::<$ty>(), $size, concat!("size of ", stringify!($ty)));
        assert_eq!(align_of::<$ty>(), $align, concat!("alignment of ", stringify!($ty)));
        $(
            assert_eq!(
                offset_of!($ty, $field),
                $off,
                concat!("offset of ", stringify!($ty), "::", stringify!($field))
            );
        )*
        stringify!($ty)
    }};
}

// ---------------------------------------------------------------------------------------------
// Constant values
// ---------------------------------------------------------------------------------------------

fn error_codes() -> &'static [&'static str] {
    expect_values! {
        NvSciError_Success = 0x0000_0000,
        NvSciError_Unknown = 0x0000_0001,
        NvSciError_NotImplemented = 0x0000_0010,
        NvSciError_NotSupported = 0x0000_0011,
        NvSciError_AccessDenied = 0x0000_0020,
        NvSciError_NotPermitted = 0x0000_0021,
        NvSciError_InvalidState = 0x0000_0022,
        NvSciError_InvalidOperation = 0x0000_0023,
        NvSciError_NotInitialized = 0x0000_0024,
        NvSciError_AlreadyInUse = 0x0000_0025,
        NvSciError_AlreadyDone = 0x0000_0026,
        NvSciError_NotYetAvailable = 0x0000_0027,
        NvSciError_NoLongerAvailable = 0x0000_0028,
        NvSciError_InsufficientMemory = 0x0000_0030,
        NvSciError_InsufficientResource = 0x0000_0031,
        NvSciError_ResourceError = 0x0000_0032,
        NvSciError_BadParameter = 0x0000_0100,
        NvSciError_BadAddress = 0x0000_0101,
        NvSciError_TooBig = 0x0000_0102,
        NvSciError_Overflow = 0x0000_0103,
        NvSciError_InconsistentData = 0x0000_0104,
        NvSciError_InsufficientData = 0x0000_0105,
        NvSciError_IndexOutOfRange = 0x0000_0106,
        NvSciError_ValueOutOfRange = 0x0000_0107,
        NvSciError_Revalidation_Success = 0x0000_0108,
        NvSciError_Timeout = 0x0000_0200,
        NvSciError_TryItAgain = 0x0000_0201,
        NvSciError_Busy = 0x0000_0202,
        NvSciError_InterruptedCall = 0x0000_0203,
        NvSciError_NoSuchDevice = 0x0000_1000,
        NvSciError_NoSpace = 0x0000_1001,
        NvSciError_NoSuchDevAddr = 0x0000_1002,
        NvSciError_IO = 0x0000_1003,
        NvSciError_InvalidIoctlNum = 0x0000_1004,
        NvSciError_NoSuchEntry = 0x0000_1100,
        NvSciError_BadFileDesc = 0x0000_1101,
        NvSciError_CorruptedFileSys = 0x0000_1102,
        NvSciError_FileExists = 0x0000_1103,
        NvSciError_IsDirectory = 0x0000_1104,
        NvSciError_ReadOnlyFileSys = 0x0000_1105,
        NvSciError_TextFileBusy = 0x0000_1106,
        NvSciError_FileNameTooLong = 0x0000_1107,
        NvSciError_FileTooBig = 0x0000_1108,
        NvSciError_TooManySymbolLinks = 0x0000_1109,
        NvSciError_TooManyOpenFiles = 0x0000_110A,
        NvSciError_FileTableOverflow = 0x0000_110B,
        NvSciError_EndOfFile = 0x0000_110C,
        NvSciError_ConnectionReset = 0x0000_1200,
        NvSciError_AlreadyInProgress = 0x0000_1201,
        NvSciError_NoData = 0x0000_1202,
        NvSciError_NoDesiredMessage = 0x0000_1203,
        NvSciError_MessageSize = 0x0000_1204,
        NvSciError_NoRemote = 0x0000_1205,
        NvSciError_NoSuchProcess = 0x0000_2000,
        NvSciError_MutexNotRecoverable = 0x0000_2100,
        NvSciError_LockOwnerDead = 0x0000_2101,
        NvSciError_ResourceDeadlock = 0x0000_2102,
        NvSciError_ReconciliationFailed = 0x0001_0100,
        NvSciError_AttrListValidationFailed = 0x0001_0101,
        NvSciError_ObjValidationFailed = 0x0001_0102,
        NvSciError_CommonEnd = 0x00FF_FFFF,
        NvSciError_NvSciBufUnknown = 0x0100_0000,
        NvSciError_NvSciBufEnd = 0x01FF_FFFF,
        NvSciError_NvSciSyncUnknown = 0x0200_0000,
        NvSciError_UnsupportedConfig = 0x0200_0001,
        NvSciError_ClearedFence = 0x0200_0002,
        NvSciError_NvSciSyncEnd = 0x02FF_FFFF,
        NvSciError_NvSciStreamUnknown = 0x0300_0000,
        NvSciError_StreamInternalError = 0x0300_0001,
        NvSciError_NvSciStreamEnd = 0x03FF_FFFF,
        NvSciError_NvSciIpcUnknown = 0x0400_0000,
        NvSciError_NvSciIpcEnd = 0x04FF_FFFF,
        NvSciError_NvSciEventUnknown = 0x0500_0000,
        NvSciError_NvSciEventEnd = 0x05FF_FFFF,
    }
}

fn buf_constants() -> &'static [&'static str] {
    expect_values! {
        NVSCI_SYS_BUF_MAJOR_VERSION = 2,
        NVSCI_SYS_BUF_MINOR_VERSION = 0,
        NV_SCI_BUF_ATTRKEY_BIT_COUNT = 16,
        NV_SCI_BUF_DATATYPE_BIT_COUNT = 10,
        NV_SCI_BUF_KEYTYPE_BIT_START = 26,
        NV_SCI_BUF_TENSOR_MAX_DIMS = 8,
        NV_SCI_BUF_IMAGE_MAX_PLANES = 3,
        NV_SCI_BUF_PYRAMID_MAX_LEVELS = 10,
        NVSCIBUF_EXPORT_DESC_SIZE = 32,
        NV_SCI_BUF_PEER_HW_ENGINE_MAX_NUMBER = 128,
    }
}

fn buf_types() -> &'static [&'static str] {
    expect_values! {
        NvSciBufType_General = 0,
        NvSciBufType_RawBuffer = 1,
        NvSciBufType_Image = 2,
        NvSciBufType_Tensor = 3,
        NvSciBufType_Array = 4,
        NvSciBufType_Pyramid = 5,
        NvSciBufType_MaxValid = 6,
    }
}

fn buf_keys() -> &'static [&'static str] {
    expect_values! {
        NvSciBufAttrKey_LowerBound = 0x00000,
        NvSciBufGeneralAttrKey_Types = 0x00001,
        NvSciBufGeneralAttrKey_NeedCpuAccess = 0x00002,
        NvSciBufGeneralAttrKey_RequiredPerm = 0x00003,
        NvSciBufGeneralAttrKey_EnableCpuCache = 0x00004,
        NvSciBufGeneralAttrKey_GpuId = 0x00005,
        NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency = 0x00006,
        NvSciBufGeneralAttrKey_ActualPerm = 0x00007,
        NvSciBufGeneralAttrKey_VidMem_GpuId = 0x00008,
        NvSciBufGeneralAttrKey_EnableGpuCache = 0x00009,
        NvSciBufGeneralAttrKey_GpuSwNeedCacheCoherency = 0x0000A,
        NvSciBufGeneralAttrKey_EnableGpuCompression = 0x0000B,
        NvSciBufGeneralAttrKey_PeerLocationInfo = 0x0000C,
        NvSciBufGeneralAttrKey_PeerHwEngineArray = 0x0000D,
        NvSciBufRawBufferAttrKey_Size = 0x10000,
        NvSciBufRawBufferAttrKey_Align = 0x10001,
        NvSciBufImageAttrKey_Layout = 0x20000,
        NvSciBufImageAttrKey_TopPadding = 0x20001,
        NvSciBufImageAttrKey_BottomPadding = 0x20002,
        NvSciBufImageAttrKey_LeftPadding = 0x20003,
        NvSciBufImageAttrKey_RightPadding = 0x20004,
        NvSciBufImageAttrKey_VprFlag = 0x20005,
        NvSciBufImageAttrKey_Size = 0x20006,
        NvSciBufImageAttrKey_Alignment = 0x20007,
        NvSciBufImageAttrKey_PlaneCount = 0x20008,
        NvSciBufImageAttrKey_PlaneColorFormat = 0x20009,
        NvSciBufImageAttrKey_PlaneColorStd = 0x2000A,
        NvSciBufImageAttrKey_PlaneBaseAddrAlign = 0x2000B,
        NvSciBufImageAttrKey_PlaneWidth = 0x2000C,
        NvSciBufImageAttrKey_PlaneHeight = 0x2000D,
        NvSciBufImageAttrKey_ScanType = 0x2000E,
        NvSciBufImageAttrKey_PlaneBitsPerPixel = 0x2000F,
        NvSciBufImageAttrKey_PlaneOffset = 0x20010,
        NvSciBufImageAttrKey_PlaneDatatype = 0x20011,
        NvSciBufImageAttrKey_PlaneChannelCount = 0x20012,
        NvSciBufImageAttrKey_PlaneSecondFieldOffset = 0x20013,
        NvSciBufImageAttrKey_PlanePitch = 0x20014,
        NvSciBufImageAttrKey_PlaneAlignedHeight = 0x20015,
        NvSciBufImageAttrKey_PlaneAlignedSize = 0x20016,
        NvSciBufImageAttrKey_ImageCount = 0x20017,
        NvSciBufImageAttrKey_SurfType = 0x20018,
        NvSciBufImageAttrKey_SurfMemLayout = 0x20019,
        NvSciBufImageAttrKey_SurfSampleType = 0x2001A,
        NvSciBufImageAttrKey_SurfBPC = 0x2001B,
        NvSciBufImageAttrKey_SurfComponentOrder = 0x2001C,
        NvSciBufImageAttrKey_SurfWidthBase = 0x2001D,
        NvSciBufImageAttrKey_SurfHeightBase = 0x2001E,
        NvSciBufImageAttrKey_SurfColorStd = 0x2001F,
        NvSciBufTensorAttrKey_DataType = 0x30000,
        NvSciBufTensorAttrKey_NumDims = 0x30001,
        NvSciBufTensorAttrKey_SizePerDim = 0x30002,
        NvSciBufTensorAttrKey_AlignmentPerDim = 0x30003,
        NvSciBufTensorAttrKey_StridesPerDim = 0x30004,
        NvSciBufTensorAttrKey_PixelFormat = 0x30005,
        NvSciBufTensorAttrKey_BaseAddrAlign = 0x30006,
        NvSciBufTensorAttrKey_Size = 0x30007,
        NvSciBufArrayAttrKey_DataType = 0x40000,
        NvSciBufArrayAttrKey_Stride = 0x40001,
        NvSciBufArrayAttrKey_Capacity = 0x40002,
        NvSciBufArrayAttrKey_Size = 0x40003,
        NvSciBufArrayAttrKey_Alignment = 0x40004,
        NvSciBufPyramidAttrKey_NumLevels = 0x50000,
        NvSciBufPyramidAttrKey_Scale = 0x50001,
        NvSciBufPyramidAttrKey_LevelOffset = 0x50002,
        NvSciBufPyramidAttrKey_LevelSize = 0x50003,
        NvSciBufPyramidAttrKey_Alignment = 0x50004,
        NvSciBufAttrKey_UpperBound = 0x3FF_FFFF,
    }
}

fn buf_value_enums() -> &'static [&'static str] {
    expect_values! {
        NvSciBufAccessPerm_Readonly = 1,
        NvSciBufAccessPerm_ReadWrite = 3,
        NvSciBufAccessPerm_Auto = 4,
        NvSciBufAccessPerm_Invalid = 5,

        NvSciBufImage_BlockLinearType = 0,
        NvSciBufImage_PitchLinearType = 1,

        NvSciBufScan_ProgressiveType = 0,
        NvSciBufScan_InterlaceType = 1,

        NvSciBufCompressionType_None = 0,
        NvSciBufCompressionType_GenericCompressible = 1,

        NvSciDataType_Int4 = 0,
        NvSciDataType_Uint4 = 1,
        NvSciDataType_Int8 = 2,
        NvSciDataType_Uint8 = 3,
        NvSciDataType_Int16 = 4,
        NvSciDataType_Uint16 = 5,
        NvSciDataType_Int32 = 6,
        NvSciDataType_Uint32 = 7,
        NvSciDataType_Float16 = 8,
        NvSciDataType_Float32 = 9,
        NvSciDataType_FloatISP = 10,
        NvSciDataType_Bool = 11,

        NvSciColorStd_SRGB = 0,
        NvSciColorStd_REC601_SR = 1,
        NvSciColorStd_REC601_ER = 2,
        NvSciColorStd_REC709_SR = 3,
        NvSciColorStd_REC709_ER = 4,
        NvSciColorStd_REC2020_RGB = 5,
        NvSciColorStd_REC2020_SR = 6,
        NvSciColorStd_REC2020_ER = 7,
        NvSciColorStd_YcCbcCrc_SR = 8,
        NvSciColorStd_YcCbcCrc_ER = 9,
        NvSciColorStd_SENSOR_RGBA = 10,
        NvSciColorStd_REQ2020PQ_ER = 11,

        NvSciSurfType_YUV = 0,
        NvSciSurfType_RGBA = 1,
        NvSciSurfType_RAW = 2,

        NvSciSurfMemLayout_Packed = 0,
        NvSciSurfMemLayout_SemiPlanar = 1,
        NvSciSurfMemLayout_Planar = 2,

        NvSciSurfSampleType_420 = 0,
        NvSciSurfSampleType_422 = 1,
        NvSciSurfSampleType_444 = 2,
        NvSciSurfSampleType_422R = 3,
        NvSciSurfSampleType_400 = 4,

        NvSciSurfBPC_Layout_16_8_8 = 0,
        NvSciSurfBPC_Layout_10_8_8 = 1,
        NvSciSurfBPC_8 = 2,
        NvSciSurfBPC_10 = 3,
        NvSciSurfBPC_12 = 4,
        NvSciSurfBPC_14 = 5,
        NvSciSurfBPC_16 = 6,

        NvSciSurfComponentOrder_YUV = 0,
        NvSciSurfComponentOrder_YVU = 1,
        NvSciSurfComponentOrder_Luma = 2,
    }
}

/// The engine and platform names of `NvSciBufPeerHwEngine` (NvSciBuf 2.11, DRIVE OS 6.0.10).
fn peer_hw_engine_enums() -> &'static [&'static str] {
    expect_values! {
        NvSciBufHwEngName_Invalid = 0,
        NvSciBufHwEngName_Display = 4,
        NvSciBufHwEngName_Isp = 11,
        NvSciBufHwEngName_Vi = 12,
        NvSciBufHwEngName_Csi = 30,
        NvSciBufHwEngName_Vic = 106,
        NvSciBufHwEngName_Gpu = 107,
        NvSciBufHwEngName_MSENC = 109,
        NvSciBufHwEngName_NVDEC = 117,
        NvSciBufHwEngName_NVJPG = 118,
        NvSciBufHwEngName_PVA = 121,
        NvSciBufHwEngName_DLA = 122,
        NvSciBufHwEngName_PCIe = 123,
        NvSciBufHwEngName_OFA = 124,
        NvSciBufHwEngName_NPM = 125,
        NvSciBufHwEngName_Num = 126,

        NvSciBufPlatformName_LowerBound = 0,
        NvSciBufPlatformName_Orin = 1,
        NvSciBufPlatformName_PG189 = 2,
        NvSciBufPlatformName_PG199 = 3,
        NvSciBufPlatformName_UpperBound = 4,
    }
}

fn color_formats() -> &'static [&'static str] {
    expect_values! {
        NvSciColor_LowerBound = 0,
        NvSciColor_Bayer8RGGB = 1,
        NvSciColor_U8V8 = 74,
        NvSciColor_U8_V8 = 75,
        NvSciColor_V8U8 = 76,
        NvSciColor_V8_U8 = 77,
        NvSciColor_U10V10 = 78,
        NvSciColor_V10U10 = 79,
        NvSciColor_U12V12 = 80,
        NvSciColor_V12U12 = 81,
        NvSciColor_U16V16 = 82,
        NvSciColor_V16U16 = 83,
        NvSciColor_Y8 = 84,
        NvSciColor_Y10 = 85,
        NvSciColor_Y12 = 86,
        NvSciColor_Y16 = 87,
        NvSciColor_U8 = 88,
        NvSciColor_V8 = 89,
        NvSciColor_U10 = 90,
        NvSciColor_V10 = 91,
        NvSciColor_U12 = 92,
        NvSciColor_V12 = 93,
        NvSciColor_U16 = 94,
        NvSciColor_V16 = 95,
        NvSciColor_A8Y8U8V8 = 96,
        NvSciColor_Y8U8Y8V8 = 97,
        NvSciColor_Y8V8Y8U8 = 98,
        NvSciColor_U8Y8V8Y8 = 99,
        NvSciColor_V8Y8U8Y8 = 100,
        NvSciColor_A16Y16U16V16 = 101,
        NvSciColor_A8 = 102,
        NvSciColor_Signed_A8 = 103,
        NvSciColor_B8G8R8A8 = 104,
        NvSciColor_A8R8G8B8 = 105,
        NvSciColor_A8B8G8R8 = 106,
        NvSciColor_A2R10G10B10 = 107,
        NvSciColor_A16 = 108,
        NvSciColor_Signed_A16 = 109,
        NvSciColor_Signed_R16G16 = 110,
        NvSciColor_A16B16G16R16 = 111,
        NvSciColor_Signed_A16B16G16R16 = 112,
        NvSciColor_Float_A16B16G16R16 = 113,
        NvSciColor_A32 = 114,
        NvSciColor_Signed_A32 = 115,
        NvSciColor_Float_A16 = 116,
    }
}

fn sync_constants() -> &'static [&'static str] {
    expect_values! {
        NVSCI_SYS_SYNC_MAJOR_VERSION = 2,
        NVSCI_SYS_SYNC_MINOR_VERSION = 0,
        NvSciSyncAccessPerm_WaitOnly = 0x1,
        NvSciSyncAccessPerm_SignalOnly = 0x2,
        NvSciSyncAccessPerm_WaitSignal = 0x3,
        NvSciSyncAccessPerm_Auto = 0x8000_0000_0000_0000,
        NVSCI_SYS_SYNC_FENCE_MAX_TIMEOUT_US = 9_223_372_036_854_775,
    }
}

fn sync_keys() -> &'static [&'static str] {
    expect_values! {
        NvSciSyncAttrKey_LowerBound = 0,
        NvSciSyncAttrKey_NeedCpuAccess = 1,
        NvSciSyncAttrKey_RequiredPerm = 2,
        NvSciSyncAttrKey_ActualPerm = 3,
        NvSciSyncAttrKey_WaiterContextInsensitiveFenceExports = 4,
        NvSciSyncAttrKey_WaiterRequireTimestamps = 5,
        NvSciSyncAttrKey_RequireDeterministicFences = 6,
        NvSciSyncAttrKey_NumTimestampSlots = 7,
        NvSciSyncAttrKey_NumTaskStatusSlots = 8,
        NvSciSyncAttrKey_MaxPrimitiveValue = 9,
        NvSciSyncAttrKey_PrimitiveInfo = 10,
        NvSciSyncAttrKey_PeerLocationInfo = 11,
        NvSciSyncAttrKey_GpuId = 12,
        NvSciSyncAttrKey_PeerHwEngineArray = 13,
    }
}

fn sync_value_enums() -> &'static [&'static str] {
    expect_values! {
        NvSciSyncAttrValPrimitiveType_LowerBound = 0,
        NvSciSyncAttrValPrimitiveType_Syncpoint = 1,
        NvSciSyncAttrValPrimitiveType_SysmemSemaphore = 2,
        NvSciSyncAttrValPrimitiveType_VidmemSemaphore = 3,
        NvSciSyncAttrValPrimitiveType_SysmemSemaphorePayload64b = 4,
        NvSciSyncAttrValPrimitiveType_VidmemSemaphorePayload64b = 5,

        NvSciSyncWaitMode_Default = 0,
        NvSciSyncWaitMode_BusyWithYield = 1,
        NvSciSyncWaitMode_BusyNoYield = 2,
        NvSciSyncWaitMode_Blocking = 3,
    }
}

/// NvSciIpc constants, from NVIDIA's published `nvsciipc.h` (DRIVE OS 6.0.10, NvSciIpc 1.4:
/// `NVSCIIPC_MAX_ENDPOINT_NAME 64U`, `NV_SCI_IPC_EVENT_READ 0x01U` ... `ASYNC_ERROR 0x20U`,
/// `NV_SCI_IPC_EVENT_CONN_EST_ALL` = `CONN_EST | WRITE | WRITE_EMPTY | READ`,
/// `NVSCIIPC_INFINITE_WAIT -1LL`). The same event values appear in DRIVE OS 5.2.6 and 6.0.5.
fn ipc_constants() -> &'static [&'static str] {
    expect_values! {
        NVSCI_SYS_IPC_MAJOR_VERSION = 1,
        NVSCI_SYS_IPC_MINOR_VERSION = 0,
        NVSCIIPC_MAX_ENDPOINT_NAME = 64,
        NV_SCI_IPC_EVENT_READ = 0x01,
        NV_SCI_IPC_EVENT_WRITE = 0x02,
        NV_SCI_IPC_EVENT_CONN_EST = 0x04,
        NV_SCI_IPC_EVENT_CONN_RESET = 0x08,
        NV_SCI_IPC_EVENT_WRITE_EMPTY = 0x10,
        NV_SCI_IPC_EVENT_ASYNC_ERROR = 0x20,
        NV_SCI_IPC_EVENT_CONN_EST_ALL = 0x01 | 0x02 | 0x04 | 0x10,
        NVSCIIPC_INFINITE_WAIT = -1,
    }
}

/// Every constant group above, in one list.
fn all_checked_constants() -> Vec<&'static str> {
    [
        error_codes(),
        buf_constants(),
        buf_types(),
        buf_keys(),
        buf_value_enums(),
        peer_hw_engine_enums(),
        color_formats(),
        sync_constants(),
        sync_keys(),
        sync_value_enums(),
        ipc_constants(),
    ]
    .concat()
}

#[test]
fn error_code_values() {
    error_codes();
}

#[test]
fn buf_constant_values() {
    buf_constants();
    buf_types();
}

#[test]
fn buf_key_values() {
    buf_keys();
}

#[test]
fn buf_value_enum_values() {
    buf_value_enums();
    peer_hw_engine_enums();
    color_formats();
}

#[test]
fn sync_constant_values() {
    sync_constants();
    sync_keys();
    sync_value_enums();
}

#[test]
fn crate_level_constants() {
    assert_eq!(NVSCI_SYNC_ACCESS_PERM_SIZE, 8);
    // INT64_MAX / 1000, the documented upper bound of a CPU fence wait in microseconds.
    assert_eq!(NVSCI_SYS_SYNC_FENCE_MAX_TIMEOUT_US, 9_223_372_036_854_775_807 / 1000);
    assert_eq!(loader::NVSCIBUF_SONAME, "libnvscibuf.so.1");
    assert_eq!(loader::NVSCISYNC_SONAME, "libnvscisync.so.1");
    assert_eq!(loader::LIB_DIR_ENV, "NVSCI_LIB_DIR");
    assert_eq!(loader::JETPACK6_LIB_DIR, "/usr/lib/aarch64-linux-gnu/nvidia");
    assert_eq!(loader::JETPACK5_LIB_DIR, "/usr/lib/aarch64-linux-gnu/tegra");
    assert_eq!(loader::REQUIRED_MAJOR, 2);
}

/// key = (keytype << 26) | (NvSciBufType << 16) | index, checked on the first key of each group.
#[test]
#[allow(clippy::identity_op, clippy::erasing_op)]
fn buf_key_formula() {
    assert_eq!(NvSciBufAttrKey_LowerBound, (0 << 26) | (0 << 16) | 0);
    assert_eq!(NvSciBufGeneralAttrKey_Types, (0 << 26) | (0 << 16) | 1);
    assert_eq!(NvSciBufRawBufferAttrKey_Size, (0 << 26) | (1 << 16) | 0);
    assert_eq!(NvSciBufImageAttrKey_Layout, (0 << 26) | (2 << 16) | 0);
    assert_eq!(NvSciBufTensorAttrKey_DataType, (0 << 26) | (3 << 16) | 0);
    assert_eq!(NvSciBufArrayAttrKey_DataType, (0 << 26) | (4 << 16) | 0);
    assert_eq!(NvSciBufPyramidAttrKey_NumLevels, (0 << 26) | (5 << 16) | 0);
    // The upper bound fills every bit below the key-type field.
    assert_eq!(NvSciBufAttrKey_UpperBound, (1 << 26) - 1);

    // Every public key decodes to key type 0 and the NvSciBufType its name says.
    let groups: &[(&[NvSciBufAttrKey], NvSciBufType)] = &[
        (
            &[
                NvSciBufGeneralAttrKey_Types,
                NvSciBufGeneralAttrKey_GpuId,
                NvSciBufGeneralAttrKey_PeerHwEngineArray,
            ],
            0,
        ),
        (&[NvSciBufRawBufferAttrKey_Size, NvSciBufRawBufferAttrKey_Align], 1),
        (&[NvSciBufImageAttrKey_PlaneWidth, NvSciBufImageAttrKey_SurfColorStd], 2),
        (&[NvSciBufTensorAttrKey_NumDims, NvSciBufTensorAttrKey_Size], 3),
        (&[NvSciBufArrayAttrKey_Stride, NvSciBufArrayAttrKey_Alignment], 4),
        (&[NvSciBufPyramidAttrKey_Scale, NvSciBufPyramidAttrKey_Alignment], 5),
    ];
    for &(keys, ty) in groups {
        for &key in keys {
            assert_eq!(key >> 26, 0, "key type of {key:#x}");
            assert_eq!((key >> 16) & 0x3FF, ty, "NvSciBufType of {key:#x}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Type sizes and struct layouts
// ---------------------------------------------------------------------------------------------

fn enum_types() -> &'static [&'static str] {
    expect_enum_types![
        NvSciError,
        NvSciBufType,
        NvSciBufAttrKey,
        NvSciBufAttrValAccessPerm,
        NvSciBufAttrValImageLayoutType,
        NvSciBufAttrValImageScanType,
        NvSciBufCompressionType,
        NvSciBufAttrValDataType,
        NvSciBufAttrValColorStd,
        NvSciBufAttrValColorFmt,
        NvSciBufSurfType,
        NvSciBufSurfMemLayout,
        NvSciBufSurfSampleType,
        NvSciBufSurfBPC,
        NvSciBufSurfComponentOrder,
        NvSciBufHwEngName,
        NvSciBufPlatformName,
        NvSciSyncAttrKey,
        NvSciSyncAttrValPrimitiveType,
        NvSciSyncWaitMode,
    ]
}

#[test]
fn enum_types_are_four_bytes() {
    enum_types();
}

#[test]
fn integer_typedefs() {
    // NvSciSync permissions are a 64-bit bit set (1 << 63 is Auto), unlike every NvSciBuf enum.
    assert_eq!(size_of::<NvSciSyncAccessPerm>(), 8);
    assert_eq!(size_of::<NvSciIpcEndpoint>(), 8);
}

#[test]
fn handles_are_pointer_sized() {
    let ptr = size_of::<*mut core::ffi::c_void>();
    assert_eq!(ptr, 8, "NvSci exists only on LP64 targets");
    for (name, size, align) in [
        ("NvSciBufModule", size_of::<NvSciBufModule>(), align_of::<NvSciBufModule>()),
        ("NvSciBufAttrList", size_of::<NvSciBufAttrList>(), align_of::<NvSciBufAttrList>()),
        ("NvSciBufObj", size_of::<NvSciBufObj>(), align_of::<NvSciBufObj>()),
        ("NvSciSyncModule", size_of::<NvSciSyncModule>(), align_of::<NvSciSyncModule>()),
        ("NvSciSyncAttrList", size_of::<NvSciSyncAttrList>(), align_of::<NvSciSyncAttrList>()),
        ("NvSciSyncObj", size_of::<NvSciSyncObj>(), align_of::<NvSciSyncObj>()),
        (
            "NvSciSyncCpuWaitContext",
            size_of::<NvSciSyncCpuWaitContext>(),
            align_of::<NvSciSyncCpuWaitContext>(),
        ),
    ] {
        assert_eq!(size, ptr, "size of {name}");
        assert_eq!(align, ptr, "alignment of {name}");
    }
    // The records behind the handles are incomplete C types: zero-sized in Rust.
    assert_eq!(size_of::<NvSciBufModuleRec>(), 0);
    assert_eq!(size_of::<NvSciBufAttrListRec>(), 0);
    assert_eq!(size_of::<NvSciBufObjRefRec>(), 0);
    assert_eq!(size_of::<NvSciSyncModuleRec>(), 0);
    assert_eq!(size_of::<NvSciSyncAttrListRec>(), 0);
    assert_eq!(size_of::<NvSciSyncObjRec>(), 0);
    assert_eq!(size_of::<NvSciSyncCpuWaitContextRec>(), 0);
}

fn struct_layouts() -> Vec<&'static str> {
    vec![
        expect_layout!(NvSciBufAttrKeyValuePair: size 24, align 8 { key @ 0, value @ 8, len @ 16 }),
        expect_layout!(NvSciRmGpuId: size 16, align 1 { bytes @ 0 }),
        // nvsciipc.h: `struct NvSciIpcEndpointInfo { uint32_t nframes; uint32_t frame_size; }`.
        expect_layout!(NvSciIpcEndpointInfo: size 8, align 4 { nframes @ 0, frame_size @ 4 }),
        expect_layout!(NvSciBufAttrValGpuCache: size 17, align 1 { gpuId @ 0, cacheability @ 16 }),
        expect_layout!(NvSciBufAttrValGpuCompression: size 20, align 4 {
            gpuId @ 0,
            compressionType @ 16,
        }),
        expect_layout!(NvSciBufObjIpcExportDescriptor: size 256, align 1 { data @ 0 }),
        expect_layout!(NvSciBufPeerLocationInfo: size 16, align 1 {
            socID @ 0,
            vmID @ 4,
            reserved @ 8,
        }),
        expect_layout!(NvSciBufPeerHwEngine: size 8, align 1 { engName @ 0, platName @ 4 }),
        expect_layout!(NvSciBufRect: size 32, align 8 { x0 @ 0, y0 @ 8, x1 @ 16, y1 @ 24 }),
        expect_layout!(NvSciSyncFence: size 48, align 8 { payload @ 0 }),
        expect_layout!(NvSciSyncFenceIpcExportDescriptor: size 56, align 8 { payload @ 0 }),
        expect_layout!(NvSciSyncObjIpcExportDescriptor: size 1024, align 8 { payload @ 0 }),
        expect_layout!(NvSciSyncAttrKeyValuePair: size 24, align 8 {
            attrKey @ 0,
            value @ 8,
            len @ 16,
        }),
        expect_layout!(NvSciSyncTaskStatus: size 16, align 1 {
            timestamp @ 0,
            statusEngine @ 8,
            subframe @ 12,
            status @ 14,
        }),
    ]
}

#[test]
fn struct_sizes_alignments_and_offsets() {
    struct_layouts();
}

#[test]
fn gpu_cache_array_has_no_padding() {
    // An attribute value is an array of these; the C stride is 17, so two entries take 34 bytes.
    assert_eq!(size_of::<[NvSciBufAttrValGpuCache; 2]>(), 34);
    let pair = [NvSciBufAttrValGpuCache::default(); 2];
    let stride = (&pair[1] as *const _ as usize) - (&pair[0] as *const _ as usize);
    assert_eq!(stride, 17);
    // The other value structs keep their C strides too.
    assert_eq!(size_of::<[NvSciRmGpuId; 2]>(), 32);
    assert_eq!(size_of::<[NvSciBufPeerLocationInfo; 2]>(), 32);
    assert_eq!(size_of::<[NvSciBufPeerHwEngine; 2]>(), 16);
    assert_eq!(size_of::<[NvSciBufAttrValGpuCompression; 2]>(), 40);
}

#[test]
fn field_types_have_c_sizes() {
    let kv = NvSciBufAttrKeyValuePair::default();
    assert_eq!(size_of_val(&kv.key), 4);
    assert_eq!(size_of_val(&kv.len), 8);
    let skv = NvSciSyncAttrKeyValuePair::default();
    assert_eq!(size_of_val(&skv.attrKey), 4);
    assert_eq!(size_of_val(&skv.len), 8);
    let cache = NvSciBufAttrValGpuCache::default();
    assert_eq!(size_of_val(&cache.cacheability), 1);
    let desc = NvSciBufObjIpcExportDescriptor::default();
    let data = desc.data; // copy out of the packed struct before taking a reference
    assert_eq!(data.len(), 32);
    let peer = NvSciBufPeerHwEngine::default();
    let (eng, plat) = (peer.engName, peer.platName); // copies out of the packed struct
    assert_eq!((size_of_val(&eng), size_of_val(&plat)), (4, 4));
    assert_eq!(NvSciSyncFence::default().payload.len(), 6);
    assert_eq!(NvSciSyncFenceIpcExportDescriptor::default().payload.len(), 7);
    assert_eq!(NvSciSyncObjIpcExportDescriptor::default().payload.len(), 128);
}

#[test]
fn fence_initializer_is_all_zero() {
    let fence = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(fence.payload, [0u64; 6]);
    // SAFETY: NvSciSyncFence is 48 bytes of plain u64s with no padding, so every byte is initialised.
    let bytes: [u8; 48] = unsafe { core::mem::transmute(fence) };
    assert_eq!(bytes, [0u8; 48]);
    assert_eq!(NvSciSyncFence::default().payload, [0u64; 6]);
}

// ---------------------------------------------------------------------------------------------
// Function tables
// ---------------------------------------------------------------------------------------------

fn is_c_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_names(table: &str, prefix: &str, required: &[&str], optional: &[&str]) {
    assert!(!required.is_empty(), "{table}::REQUIRED is empty");
    let all: Vec<&str> = required.iter().chain(optional).copied().collect();
    let mut seen = std::collections::HashSet::new();
    for name in &all {
        assert!(seen.insert(*name), "{table}: {name} is listed twice");
        assert!(is_c_identifier(name), "{table}: {name:?} is not a C identifier");
        assert!(name.starts_with(prefix), "{table}: {name} does not start with {prefix}");
        // The loader builds the NUL-terminated symbol name in a 64-byte buffer.
        assert!(name.len() < 63, "{table}: {name} is too long to resolve");
    }
}

#[test]
fn function_table_names() {
    check_names("NvSciBufFns", "NvSciBuf", NvSciBufFns::REQUIRED, NvSciBufFns::OPTIONAL);
    check_names("NvSciSyncFns", "NvSciSync", NvSciSyncFns::REQUIRED, NvSciSyncFns::OPTIONAL);
    check_names("NvSciIpcFns", "NvSciIpc", NvSciIpcFns::REQUIRED, NvSciIpcFns::OPTIONAL);
    // Present in every NvSciIpc 1.x header (DRIVE OS 5.2.6 onwards): required.
    for name in [
        "NvSciIpcInit",
        "NvSciIpcDeinit",
        "NvSciIpcOpenEndpoint",
        "NvSciIpcCloseEndpoint",
        "NvSciIpcResetEndpoint",
        "NvSciIpcRead",
        "NvSciIpcWrite",
        "NvSciIpcGetEndpointInfo",
        "NvSciIpcGetLinuxEventFd",
        "NvSciIpcGetEvent",
    ] {
        assert!(NvSciIpcFns::REQUIRED.contains(&name), "{name} must be required");
    }
    // Added in DRIVE OS 6.0 (absent from the 5.2.6 header): optional.
    for name in
        ["NvSciIpcReadSafe", "NvSciIpcWriteSafe", "NvSciIpcGetEventSafe", "NvSciIpcCheckVersionCompatibility"]
    {
        assert!(NvSciIpcFns::OPTIONAL.contains(&name), "{name} must be optional");
    }
    for name in ["NvSciBufModuleOpen", "NvSciBufCheckVersionCompatibility", "NvSciBufObjAlloc"] {
        assert!(NvSciBufFns::REQUIRED.contains(&name), "{name} must be required");
    }
    for name in ["NvSciSyncModuleOpen", "NvSciSyncCheckVersionCompatibility", "NvSciSyncFenceWait"] {
        assert!(NvSciSyncFns::REQUIRED.contains(&name), "{name} must be required");
    }
    assert!(!NvSciBufFns::EMPTY.has_required());
    assert!(!NvSciSyncFns::EMPTY.has_required());
}

// ---------------------------------------------------------------------------------------------
// Loader
// ---------------------------------------------------------------------------------------------

#[test]
fn loader_reports_every_path_tried() {
    let dir = PathBuf::from("/nonexistent/nvsci");
    // SAFETY: the directory holds no NvSci library; nothing is loaded.
    let err = unsafe { loader::load_from(&[dir], false) }.unwrap_err();
    let expected_path = "/nonexistent/nvsci/libnvscibuf.so.1";
    match &err {
        LoadError::NotFound { library, tried } => {
            assert_eq!(*library, "libnvscibuf.so.1");
            let paths: Vec<&str> = tried.iter().map(|a| a.path.as_str()).collect();
            assert_eq!(paths, [expected_path]);
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    let shown = err.to_string();
    assert!(shown.contains("NVSCI_LIB_DIR"), "{shown}");
    assert!(shown.contains(expected_path), "{shown}");
}

#[test]
fn search_dirs_end_with_the_jetpack_directories() {
    let dirs = loader::search_dirs();
    assert!(dirs.len() >= 2);
    assert_eq!(
        dirs[dirs.len() - 2..],
        [
            PathBuf::from("/usr/lib/aarch64-linux-gnu/nvidia"),
            PathBuf::from("/usr/lib/aarch64-linux-gnu/tegra"),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Coverage of the bindings
// ---------------------------------------------------------------------------------------------

/// Names of the items of one kind in the checked-in bindings (`pub const NAME:` and the like).
fn bound_names(prefix: &str, suffix: &str) -> Vec<&'static str> {
    BINDINGS
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .filter_map(|rest| {
            let name = rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next()?;
            rest[name.len()..].trim_start().starts_with(suffix).then_some(name)
        })
        .collect()
}

fn assert_covers(what: &str, bound: &[&str], checked: &[&str]) {
    assert!(!bound.is_empty(), "no {what} found in src/bindings.rs");
    let mut seen = std::collections::HashSet::new();
    for name in checked {
        assert!(seen.insert(*name), "{name} is checked twice");
    }
    let missing: Vec<&&str> = bound.iter().filter(|n| !seen.contains(*n)).collect();
    assert!(missing.is_empty(), "{what} bound but not checked in tests/abi.rs: {missing:?}");
}

#[test]
fn every_bound_constant_is_checked() {
    assert_covers("constants", &bound_names("pub const ", ":"), &all_checked_constants());
}

#[test]
fn every_bound_enum_type_is_checked() {
    assert_covers("C enum types", &bound_names("pub type ", "= ::std::os::raw::c_uint;"), enum_types());
}

#[test]
fn every_bound_struct_is_checked() {
    let bound: Vec<&str> = bound_names("pub struct ", "{")
        .into_iter()
        .filter(|n| !n.ends_with("Rec")) // opaque records: checked in handles_are_pointer_sized
        .collect();
    assert_covers("structs", &bound, &struct_layouts());
}

#[test]
fn ipc_loader_tries_every_name_in_every_directory() {
    let dir = PathBuf::from("/nonexistent/nvsciipc");
    // SAFETY: the directory holds no library; nothing is loaded.
    let err = unsafe { loader::load_ipc_from(&[dir], false) }.unwrap_err();
    match &err {
        LoadError::NotFound { library, tried } => {
            assert_eq!(*library, "libnvsciipc.so");
            let paths: Vec<&str> = tried.iter().map(|a| a.path.as_str()).collect();
            assert_eq!(
                paths,
                ["/nonexistent/nvsciipc/libnvsciipc.so", "/nonexistent/nvsciipc/libnvsciipc.so.1"]
            );
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
}
