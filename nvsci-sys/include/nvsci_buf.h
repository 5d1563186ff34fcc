/*
 * nvsci-sys clean-room ABI header: NvSciBuf 2.x types, attribute keys, value enums and functions.
 *
 * Written for the nvsci Rust crates from documented ABI facts. Keys are
 * (key type << 26) | (NvSciBufType << 16) | index; every value is spelled out.
 */
#ifndef NVSCI_SYS_BUF_H
#define NVSCI_SYS_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvsci_error.h"
#include "nvsci_ipc.h"

/* Header version this binding was written against (checked at load time). */
#define NVSCI_SYS_BUF_MAJOR_VERSION 2
#define NVSCI_SYS_BUF_MINOR_VERSION 0

#define NV_SCI_BUF_ATTRKEY_BIT_COUNT 16
#define NV_SCI_BUF_DATATYPE_BIT_COUNT 10
#define NV_SCI_BUF_KEYTYPE_BIT_START 26
#define NV_SCI_BUF_TENSOR_MAX_DIMS 8
#define NV_SCI_BUF_IMAGE_MAX_PLANES 3
#define NV_SCI_BUF_PYRAMID_MAX_LEVELS 10
#define NVSCIBUF_EXPORT_DESC_SIZE 32

/* Opaque handles. */
typedef struct NvSciBufModuleRec* NvSciBufModule;
typedef struct NvSciBufAttrListRec* NvSciBufAttrList;
typedef struct NvSciBufObjRefRec* NvSciBufObj;

typedef enum {
    NvSciBufType_General = 0,
    NvSciBufType_RawBuffer = 1,
    NvSciBufType_Image = 2,
    NvSciBufType_Tensor = 3,
    NvSciBufType_Array = 4,
    NvSciBufType_Pyramid = 5,
    NvSciBufType_MaxValid = 6
} NvSciBufType;

typedef enum {
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

    NvSciBufAttrKey_UpperBound = 0x3FFFFFF
} NvSciBufAttrKey;

typedef enum {
    NvSciBufAccessPerm_Readonly = 1,
    NvSciBufAccessPerm_ReadWrite = 3,
    NvSciBufAccessPerm_Auto = 4,
    NvSciBufAccessPerm_Invalid = 5
} NvSciBufAttrValAccessPerm;

typedef enum {
    NvSciBufImage_BlockLinearType = 0,
    NvSciBufImage_PitchLinearType = 1
} NvSciBufAttrValImageLayoutType;

typedef enum {
    NvSciBufScan_ProgressiveType = 0,
    NvSciBufScan_InterlaceType = 1
} NvSciBufAttrValImageScanType;

typedef enum {
    NvSciBufCompressionType_None = 0,
    NvSciBufCompressionType_GenericCompressible = 1
} NvSciBufCompressionType;

typedef enum {
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
    NvSciDataType_Bool = 11
} NvSciBufAttrValDataType;

typedef enum {
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
    NvSciColorStd_REQ2020PQ_ER = 11
} NvSciBufAttrValColorStd;

/* Color formats that this binding names; the numbering is append-only. */
typedef enum {
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
    NvSciColor_Float_A16 = 116
} NvSciBufAttrValColorFmt;

typedef enum {
    NvSciSurfType_YUV = 0,
    NvSciSurfType_RGBA = 1,
    NvSciSurfType_RAW = 2
} NvSciBufSurfType;

typedef enum {
    NvSciSurfMemLayout_Packed = 0,
    NvSciSurfMemLayout_SemiPlanar = 1,
    NvSciSurfMemLayout_Planar = 2
} NvSciBufSurfMemLayout;

typedef enum {
    NvSciSurfSampleType_420 = 0,
    NvSciSurfSampleType_422 = 1,
    NvSciSurfSampleType_444 = 2,
    NvSciSurfSampleType_422R = 3,
    NvSciSurfSampleType_400 = 4
} NvSciBufSurfSampleType;

typedef enum {
    NvSciSurfBPC_Layout_16_8_8 = 0,
    NvSciSurfBPC_Layout_10_8_8 = 1,
    NvSciSurfBPC_8 = 2,
    NvSciSurfBPC_10 = 3,
    NvSciSurfBPC_12 = 4,
    NvSciSurfBPC_14 = 5,
    NvSciSurfBPC_16 = 6
} NvSciBufSurfBPC;

typedef enum {
    NvSciSurfComponentOrder_YUV = 0,
    NvSciSurfComponentOrder_YVU = 1,
    NvSciSurfComponentOrder_Luma = 2
} NvSciBufSurfComponentOrder;

/* One attribute: key, pointer to the value array and its length in bytes. */
typedef struct {
    NvSciBufAttrKey key;
    const void* value;
    size_t len;
} NvSciBufAttrKeyValuePair;

/* A GPU identity: the 16 UUID bytes of the device. */
typedef struct {
    uint8_t bytes[16];
} NvSciRmGpuId;

/* Per-GPU cacheability: 17 bytes, alignment 1, array stride 17. */
typedef struct {
    NvSciRmGpuId gpuId;
    bool cacheability;
} NvSciBufAttrValGpuCache;

typedef struct {
    NvSciRmGpuId gpuId;
    NvSciBufCompressionType compressionType;
} NvSciBufAttrValGpuCompression;

typedef struct __attribute__((packed)) {
    uint64_t data[NVSCIBUF_EXPORT_DESC_SIZE];
} NvSciBufObjIpcExportDescriptor;

typedef struct __attribute__((packed)) {
    uint32_t socID;
    uint32_t vmID;
    uint64_t reserved;
} NvSciBufPeerLocationInfo;

/* Engines and platforms of NvSciBufGeneralAttrKey_PeerHwEngineArray (NvSciBuf 2.11). */
#define NV_SCI_BUF_PEER_HW_ENGINE_MAX_NUMBER 128

typedef enum {
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
    NvSciBufHwEngName_Num = 126
} NvSciBufHwEngName;

typedef enum {
    NvSciBufPlatformName_LowerBound = 0,
    NvSciBufPlatformName_Orin = 1,
    NvSciBufPlatformName_PG189 = 2,
    NvSciBufPlatformName_PG199 = 3,
    NvSciBufPlatformName_UpperBound = 4
} NvSciBufPlatformName;

/* One element of the PeerHwEngineArray value: 8 bytes, packed. */
typedef struct __attribute__((packed)) {
    NvSciBufHwEngName engName;
    NvSciBufPlatformName platName;
} NvSciBufPeerHwEngine;

typedef struct {
    uint64_t x0;
    uint64_t y0;
    uint64_t x1;
    uint64_t y1;
} NvSciBufRect;

NvSciError NvSciBufModuleOpen(NvSciBufModule* newModule);
void NvSciBufModuleClose(NvSciBufModule module);
NvSciError NvSciBufCheckVersionCompatibility(uint32_t majorVer, uint32_t minorVer, bool* isCompatible);

NvSciError NvSciBufAttrListCreate(NvSciBufModule module, NvSciBufAttrList* newAttrList);
void NvSciBufAttrListFree(NvSciBufAttrList attrList);
NvSciError NvSciBufAttrListSetAttrs(NvSciBufAttrList attrList, NvSciBufAttrKeyValuePair* pairArray, size_t pairCount);
size_t NvSciBufAttrListGetSlotCount(NvSciBufAttrList attrList);
NvSciError NvSciBufAttrListGetAttrs(NvSciBufAttrList attrList, NvSciBufAttrKeyValuePair* pairArray, size_t pairCount);
NvSciError NvSciBufAttrListSlotGetAttrs(NvSciBufAttrList attrList, size_t slotIndex, NvSciBufAttrKeyValuePair* pairArray, size_t pairCount);
NvSciError NvSciBufAttrListDebugDump(NvSciBufAttrList attrList, void** buf, size_t* len);
NvSciError NvSciBufAttrListReconcile(const NvSciBufAttrList inputArray[], size_t inputCount, NvSciBufAttrList* newReconciledAttrList, NvSciBufAttrList* newConflictList);
NvSciError NvSciBufAttrListClone(NvSciBufAttrList origAttrList, NvSciBufAttrList* newAttrList);
NvSciError NvSciBufAttrListAppendUnreconciled(const NvSciBufAttrList inputUnreconciledAttrListArray[], size_t count, NvSciBufAttrList* newUnreconciledAttrList);
NvSciError NvSciBufAttrListIsReconciled(NvSciBufAttrList attrList, bool* isReconciled);
NvSciError NvSciBufAttrListValidateReconciled(NvSciBufAttrList reconciledAttrList, const NvSciBufAttrList unreconciledAttrListArray[], size_t count, bool* isReconcileListValid);

NvSciError NvSciBufObjAlloc(NvSciBufAttrList reconciledAttrList, NvSciBufObj* bufObj);
NvSciError NvSciBufAttrListReconcileAndObjAlloc(const NvSciBufAttrList attrListArray[], size_t attrListCount, NvSciBufObj* bufObj, NvSciBufAttrList* newConflictList);
void NvSciBufObjFree(NvSciBufObj bufObj);
NvSciError NvSciBufObjDup(NvSciBufObj bufObj, NvSciBufObj* dupObj);
NvSciError NvSciBufObjDupWithReducePerm(NvSciBufObj bufObj, NvSciBufAttrValAccessPerm reducedPerm, NvSciBufObj* newBufObj);
NvSciError NvSciBufObjGetAttrList(NvSciBufObj bufObj, NvSciBufAttrList* bufAttrList);
NvSciError NvSciBufObjGetCpuPtr(NvSciBufObj bufObj, void** ptr);
NvSciError NvSciBufObjGetConstCpuPtr(NvSciBufObj bufObj, const void** ptr);
NvSciError NvSciBufObjFlushCpuCacheRange(NvSciBufObj bufObj, uint64_t offset, uint64_t len);
NvSciError NvSciBufObjValidate(NvSciBufObj bufObj);
NvSciError NvSciBufObjGetPixels(NvSciBufObj bufObj, const NvSciBufRect* rect, void** dstPtrs, const uint32_t* dstPtrSizes, const uint32_t* dstPitches);
NvSciError NvSciBufObjPutPixels(NvSciBufObj bufObj, const NvSciBufRect* rect, const void** srcPtrs, const uint32_t* srcPtrSizes, const uint32_t* srcPitches);

NvSciError NvSciBufAttrListIpcExportUnreconciled(const NvSciBufAttrList unreconciledAttrListArray[], size_t count, NvSciIpcEndpoint ipcEndpoint, void** descBuf, size_t* descLen);
NvSciError NvSciBufAttrListIpcExportReconciled(NvSciBufAttrList reconciledAttrList, NvSciIpcEndpoint ipcEndpoint, void** descBuf, size_t* descLen);
NvSciError NvSciBufAttrListIpcImportUnreconciled(NvSciBufModule module, NvSciIpcEndpoint ipcEndpoint, const void* descBuf, size_t descLen, NvSciBufAttrList* importedUnreconciledAttrList);
NvSciError NvSciBufAttrListIpcImportReconciled(NvSciBufModule module, NvSciIpcEndpoint ipcEndpoint, const void* descBuf, size_t descLen, const NvSciBufAttrList inputUnreconciledAttrListArray[], size_t count, NvSciBufAttrList* importedReconciledAttrList);
void NvSciBufAttrListFreeDesc(void* descBuf);
NvSciError NvSciBufObjIpcExport(NvSciBufObj bufObj, NvSciBufAttrValAccessPerm accPerm, NvSciIpcEndpoint ipcEndpoint, NvSciBufObjIpcExportDescriptor* exportData);
NvSciError NvSciBufObjIpcImport(NvSciIpcEndpoint ipcEndpoint, const NvSciBufObjIpcExportDescriptor* desc, NvSciBufAttrList reconciledAttrList, NvSciBufAttrValAccessPerm minPermissions, int64_t timeoutUs, NvSciBufObj* bufObj);
NvSciError NvSciBufIpcExportAttrListAndObj(NvSciBufObj bufObj, NvSciBufAttrValAccessPerm permissions, NvSciIpcEndpoint ipcEndpoint, void** attrListAndObjDesc, size_t* attrListAndObjDescSize);
NvSciError NvSciBufIpcImportAttrListAndObj(NvSciBufModule module, NvSciIpcEndpoint ipcEndpoint, const void* attrListAndObjDesc, size_t descSize, const NvSciBufAttrList attrList[], size_t count, NvSciBufAttrValAccessPerm minPermissions, int64_t timeoutUs, NvSciBufObj* bufObj);
void NvSciBufAttrListAndObjFreeDesc(void* attrListAndObjDescBuf);

#endif
