/*
 * nvsci-sys clean-room ABI header: NvSciSync 2.x types, attribute keys and functions.
 *
 * Written for the nvsci Rust crates from documented ABI facts. Note that NvSciSyncAccessPerm is an
 * 8-byte integer type, unlike every NvSciBuf enum.
 */
#ifndef NVSCI_SYS_SYNC_H
#define NVSCI_SYS_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvsci_error.h"
#include "nvsci_buf.h"

#define NVSCI_SYS_SYNC_MAJOR_VERSION 2
#define NVSCI_SYS_SYNC_MINOR_VERSION 0

typedef struct NvSciSyncModuleRec* NvSciSyncModule;
typedef struct NvSciSyncAttrListRec* NvSciSyncAttrList;
typedef struct NvSciSyncObjRec* NvSciSyncObj;
typedef struct NvSciSyncCpuWaitContextRec* NvSciSyncCpuWaitContext;

typedef enum {
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
    NvSciSyncAttrKey_PeerHwEngineArray = 13
} NvSciSyncAttrKey;

/* 8-byte permission bit set. */
typedef uint64_t NvSciSyncAccessPerm;
#define NvSciSyncAccessPerm_WaitOnly 0x1ULL
#define NvSciSyncAccessPerm_SignalOnly 0x2ULL
#define NvSciSyncAccessPerm_WaitSignal 0x3ULL
#define NvSciSyncAccessPerm_Auto 0x8000000000000000ULL

typedef enum {
    NvSciSyncAttrValPrimitiveType_LowerBound = 0,
    NvSciSyncAttrValPrimitiveType_Syncpoint = 1,
    NvSciSyncAttrValPrimitiveType_SysmemSemaphore = 2,
    NvSciSyncAttrValPrimitiveType_VidmemSemaphore = 3,
    NvSciSyncAttrValPrimitiveType_SysmemSemaphorePayload64b = 4,
    NvSciSyncAttrValPrimitiveType_VidmemSemaphorePayload64b = 5
} NvSciSyncAttrValPrimitiveType;

typedef enum {
    NvSciSyncWaitMode_Default = 0,
    NvSciSyncWaitMode_BusyWithYield = 1,
    NvSciSyncWaitMode_BusyNoYield = 2,
    NvSciSyncWaitMode_Blocking = 3
} NvSciSyncWaitMode;

/* Largest accepted CPU wait timeout in microseconds (INT64_MAX / 1000). */
#define NVSCI_SYS_SYNC_FENCE_MAX_TIMEOUT_US 9223372036854775LL

/* Opaque fence storage; all-zero means cleared. */
typedef struct {
    uint64_t payload[6];
} NvSciSyncFence;

typedef struct {
    uint64_t payload[7];
} NvSciSyncFenceIpcExportDescriptor;

typedef struct {
    uint64_t payload[128];
} NvSciSyncObjIpcExportDescriptor;

typedef struct {
    NvSciSyncAttrKey attrKey;
    const void* value;
    size_t len;
} NvSciSyncAttrKeyValuePair;

typedef struct __attribute__((packed)) {
    uint64_t timestamp;
    uint32_t statusEngine;
    uint16_t subframe;
    uint16_t status;
} NvSciSyncTaskStatus;

NvSciError NvSciSyncModuleOpen(NvSciSyncModule* newModule);
void NvSciSyncModuleClose(NvSciSyncModule module);
NvSciError NvSciSyncCheckVersionCompatibility(uint32_t majorVer, uint32_t minorVer, bool* isCompatible);
NvSciError NvSciSyncCpuWaitContextAlloc(NvSciSyncModule module, NvSciSyncCpuWaitContext* newContext);
void NvSciSyncCpuWaitContextFree(NvSciSyncCpuWaitContext context);

NvSciError NvSciSyncAttrListCreate(NvSciSyncModule module, NvSciSyncAttrList* attrList);
void NvSciSyncAttrListFree(NvSciSyncAttrList attrList);
NvSciError NvSciSyncAttrListIsReconciled(NvSciSyncAttrList attrList, bool* isReconciled);
NvSciError NvSciSyncAttrListValidateReconciled(NvSciSyncAttrList reconciledAttrList, const NvSciSyncAttrList inputUnreconciledAttrListArray[], size_t count, bool* isReconciledListValid);
NvSciError NvSciSyncAttrListSetAttrs(NvSciSyncAttrList attrList, const NvSciSyncAttrKeyValuePair* pairArray, size_t pairCount);
NvSciError NvSciSyncAttrListGetAttrs(NvSciSyncAttrList attrList, NvSciSyncAttrKeyValuePair* pairArray, size_t pairCount);
NvSciError NvSciSyncAttrListGetAttr(NvSciSyncAttrList attrList, NvSciSyncAttrKey key, const void** value, size_t* len);
size_t NvSciSyncAttrListGetSlotCount(NvSciSyncAttrList attrList);
NvSciError NvSciSyncAttrListSlotGetAttrs(NvSciSyncAttrList attrList, size_t slotIndex, NvSciSyncAttrKeyValuePair* pairArray, size_t pairCount);
NvSciError NvSciSyncAttrListAppendUnreconciled(const NvSciSyncAttrList inputUnreconciledAttrListArray[], size_t count, NvSciSyncAttrList* newUnreconciledAttrList);
NvSciError NvSciSyncAttrListClone(NvSciSyncAttrList origAttrList, NvSciSyncAttrList* newAttrList);
NvSciError NvSciSyncAttrListReconcile(const NvSciSyncAttrList inputArray[], size_t inputCount, NvSciSyncAttrList* newReconciledList, NvSciSyncAttrList* newConflictList);
NvSciError NvSciSyncAttrListDebugDump(NvSciSyncAttrList attrList, void** buf, size_t* len);
NvSciError NvSciSyncAttrListReconcileAndObjAlloc(const NvSciSyncAttrList inputArray[], size_t inputCount, NvSciSyncObj* syncObj, NvSciSyncAttrList* newConflictList);

NvSciError NvSciSyncObjAlloc(NvSciSyncAttrList reconciledList, NvSciSyncObj* syncObj);
NvSciError NvSciSyncObjDup(NvSciSyncObj syncObj, NvSciSyncObj* dupObj);
NvSciError NvSciSyncObjGetAttrList(NvSciSyncObj syncObj, NvSciSyncAttrList* syncAttrList);
void NvSciSyncObjFree(NvSciSyncObj syncObj);
NvSciError NvSciSyncObjValidate(NvSciSyncObj syncObj);
NvSciError NvSciSyncObjGenerateFence(NvSciSyncObj syncObj, NvSciSyncFence* syncFence);
NvSciError NvSciSyncObjSignal(NvSciSyncObj syncObj);

void NvSciSyncFenceClear(NvSciSyncFence* syncFence);
NvSciError NvSciSyncFenceDup(const NvSciSyncFence* srcSyncFence, NvSciSyncFence* dstSyncFence);
NvSciError NvSciSyncFenceWait(const NvSciSyncFence* syncFence, NvSciSyncCpuWaitContext context, int64_t timeoutUs);
NvSciError NvSciSyncFenceWaitWithMode(const NvSciSyncFence* syncFence, NvSciSyncCpuWaitContext context, int64_t timeoutUs, NvSciSyncWaitMode waitMode);
NvSciError NvSciSyncFenceGetTimestamp(const NvSciSyncFence* syncFence, uint64_t* timestampUS);
NvSciError NvSciSyncFenceExtractFence(const NvSciSyncFence* syncFence, uint64_t* id, uint64_t* value);
NvSciError NvSciSyncFenceUpdateFence(NvSciSyncObj syncObj, uint64_t id, uint64_t value, NvSciSyncFence* syncFence);

NvSciError NvSciSyncAttrListIpcExportUnreconciled(const NvSciSyncAttrList unreconciledAttrListArray[], size_t count, NvSciIpcEndpoint ipcEndpoint, void** descBuf, size_t* descLen);
NvSciError NvSciSyncAttrListIpcExportReconciled(const NvSciSyncAttrList reconciledAttrList, NvSciIpcEndpoint ipcEndpoint, void** descBuf, size_t* descLen);
NvSciError NvSciSyncAttrListIpcImportUnreconciled(NvSciSyncModule module, NvSciIpcEndpoint ipcEndpoint, const void* descBuf, size_t descLen, NvSciSyncAttrList* importedUnreconciledAttrList);
NvSciError NvSciSyncAttrListIpcImportReconciled(NvSciSyncModule module, NvSciIpcEndpoint ipcEndpoint, const void* descBuf, size_t descLen, const NvSciSyncAttrList inputUnreconciledAttrListArray[], size_t count, NvSciSyncAttrList* importedReconciledAttrList);
void NvSciSyncAttrListFreeDesc(void* descBuf);
NvSciError NvSciSyncObjIpcExport(NvSciSyncObj syncObj, NvSciSyncAccessPerm permissions, NvSciIpcEndpoint ipcEndpoint, NvSciSyncObjIpcExportDescriptor* desc);
NvSciError NvSciSyncObjIpcImport(NvSciIpcEndpoint ipcEndpoint, const NvSciSyncObjIpcExportDescriptor* desc, NvSciSyncAttrList inputAttrList, NvSciSyncAccessPerm permissions, int64_t timeoutUs, NvSciSyncObj* syncObj);
NvSciError NvSciSyncIpcExportFence(const NvSciSyncFence* syncFence, NvSciIpcEndpoint ipcEndpoint, NvSciSyncFenceIpcExportDescriptor* desc);
NvSciError NvSciSyncIpcImportFence(NvSciSyncObj syncObj, const NvSciSyncFenceIpcExportDescriptor* desc, NvSciSyncFence* syncFence);
NvSciError NvSciSyncIpcExportAttrListAndObj(NvSciSyncObj syncObj, NvSciSyncAccessPerm permissions, NvSciIpcEndpoint ipcEndpoint, void** attrListAndObjDesc, size_t* attrListAndObjDescSize);
NvSciError NvSciSyncIpcImportAttrListAndObj(NvSciSyncModule module, NvSciIpcEndpoint ipcEndpoint, const void* attrListAndObjDesc, size_t attrListAndObjDescSize, const NvSciSyncAttrList attrList[], size_t attrListCount, NvSciSyncAccessPerm minPermissions, int64_t timeoutUs, NvSciSyncObj* syncObj);
void NvSciSyncAttrListAndObjFreeDesc(void* attrListAndObjDescBuf);

#endif
