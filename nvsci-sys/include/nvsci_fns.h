/*
 * Function-pointer types of every NvSci entry point the loader resolves, one per prototype in
 * nvsci_buf.h / nvsci_sync.h / nvsci_ipc.h. nvsci_sys.h checks each against the prototype it mirrors.
 */
#ifndef NVSCI_SYS_FNS_H
#define NVSCI_SYS_FNS_H

typedef NvSciError (*PFN_NvSciBufModuleOpen)(NvSciBufModule* newModule);
typedef void (*PFN_NvSciBufModuleClose)(NvSciBufModule module);
typedef NvSciError (*PFN_NvSciBufCheckVersionCompatibility)(uint32_t majorVer, uint32_t minorVer, bool* isCompatible);
typedef NvSciError (*PFN_NvSciBufAttrListCreate)(NvSciBufModule module, NvSciBufAttrList* newAttrList);
typedef void (*PFN_NvSciBufAttrListFree)(NvSciBufAttrList attrList);
typedef NvSciError (*PFN_NvSciBufAttrListSetAttrs)(NvSciBufAttrList attrList, NvSciBufAttrKeyValuePair* pairArray, size_t pairCount);
typedef size_t (*PFN_NvSciBufAttrListGetSlotCount)(NvSciBufAttrList attrList);
typedef NvSciError (*PFN_NvSciBufAttrListGetAttrs)(NvSciBufAttrList attrList, NvSciBufAttrKeyValuePair* pairArray, size_t pairCount);
typedef NvSciError (*PFN_NvSciBufAttrListSlotGetAttrs)(NvSciBufAttrList attrList, size_t slotIndex, NvSciBufAttrKeyValuePair* pairArray, size_t pairCount);
typedef NvSciError (*PFN_NvSciBufAttrListDebugDump)(NvSciBufAttrList attrList, void** buf, size_t* len);
typedef NvSciError (*PFN_NvSciBufAttrListReconcile)(const NvSciBufAttrList inputArray[], size_t inputCount, NvSciBufAttrList* newReconciledAttrList, NvSciBufAttrList* newConflictList);
typedef NvSciError (*PFN_NvSciBufAttrListClone)(NvSciBufAttrList origAttrList, NvSciBufAttrList* newAttrList);
typedef NvSciError (*PFN_NvSciBufAttrListAppendUnreconciled)(const NvSciBufAttrList inputUnreconciledAttrListArray[], size_t count, NvSciBufAttrList* newUnreconciledAttrList);
typedef NvSciError (*PFN_NvSciBufAttrListIsReconciled)(NvSciBufAttrList attrList, bool* isReconciled);
typedef NvSciError (*PFN_NvSciBufAttrListValidateReconciled)(NvSciBufAttrList reconciledAttrList, const NvSciBufAttrList unreconciledAttrListArray[], size_t count, bool* isReconcileListValid);
typedef NvSciError (*PFN_NvSciBufObjAlloc)(NvSciBufAttrList reconciledAttrList, NvSciBufObj* bufObj);
typedef NvSciError (*PFN_NvSciBufAttrListReconcileAndObjAlloc)(const NvSciBufAttrList attrListArray[], size_t attrListCount, NvSciBufObj* bufObj, NvSciBufAttrList* newConflictList);
typedef void (*PFN_NvSciBufObjFree)(NvSciBufObj bufObj);
typedef NvSciError (*PFN_NvSciBufObjDup)(NvSciBufObj bufObj, NvSciBufObj* dupObj);
typedef NvSciError (*PFN_NvSciBufObjDupWithReducePerm)(NvSciBufObj bufObj, NvSciBufAttrValAccessPerm reducedPerm, NvSciBufObj* newBufObj);
typedef NvSciError (*PFN_NvSciBufObjGetAttrList)(NvSciBufObj bufObj, NvSciBufAttrList* bufAttrList);
typedef NvSciError (*PFN_NvSciBufObjGetCpuPtr)(NvSciBufObj bufObj, void** ptr);
typedef NvSciError (*PFN_NvSciBufObjGetConstCpuPtr)(NvSciBufObj bufObj, const void** ptr);
typedef NvSciError (*PFN_NvSciBufObjFlushCpuCacheRange)(NvSciBufObj bufObj, uint64_t offset, uint64_t len);
typedef NvSciError (*PFN_NvSciBufObjValidate)(NvSciBufObj bufObj);
typedef NvSciError (*PFN_NvSciBufObjGetPixels)(NvSciBufObj bufObj, const NvSciBufRect* rect, void** dstPtrs, const uint32_t* dstPtrSizes, const uint32_t* dstPitches);
typedef NvSciError (*PFN_NvSciBufObjPutPixels)(NvSciBufObj bufObj, const NvSciBufRect* rect, const void** srcPtrs, const uint32_t* srcPtrSizes, const uint32_t* srcPitches);
typedef NvSciError (*PFN_NvSciBufAttrListIpcExportUnreconciled)(const NvSciBufAttrList unreconciledAttrListArray[], size_t count, NvSciIpcEndpoint ipcEndpoint, void** descBuf, size_t* descLen);
typedef NvSciError (*PFN_NvSciBufAttrListIpcExportReconciled)(NvSciBufAttrList reconciledAttrList, NvSciIpcEndpoint ipcEndpoint, void** descBuf, size_t* descLen);
typedef NvSciError (*PFN_NvSciBufAttrListIpcImportUnreconciled)(NvSciBufModule module, NvSciIpcEndpoint ipcEndpoint, const void* descBuf, size_t descLen, NvSciBufAttrList* importedUnreconciledAttrList);
typedef NvSciError (*PFN_NvSciBufAttrListIpcImportReconciled)(NvSciBufModule module, NvSciIpcEndpoint ipcEndpoint, const void* descBuf, size_t descLen, const NvSciBufAttrList inputUnreconciledAttrListArray[], size_t count, NvSciBufAttrList* importedReconciledAttrList);
typedef void (*PFN_NvSciBufAttrListFreeDesc)(void* descBuf);
typedef NvSciError (*PFN_NvSciBufObjIpcExport)(NvSciBufObj bufObj, NvSciBufAttrValAccessPerm accPerm, NvSciIpcEndpoint ipcEndpoint, NvSciBufObjIpcExportDescriptor* exportData);
typedef NvSciError (*PFN_NvSciBufObjIpcImport)(NvSciIpcEndpoint ipcEndpoint, const NvSciBufObjIpcExportDescriptor* desc, NvSciBufAttrList reconciledAttrList, NvSciBufAttrValAccessPerm minPermissions, int64_t timeoutUs, NvSciBufObj* bufObj);
typedef NvSciError (*PFN_NvSciBufIpcExportAttrListAndObj)(NvSciBufObj bufObj, NvSciBufAttrValAccessPerm permissions, NvSciIpcEndpoint ipcEndpoint, void** attrListAndObjDesc, size_t* attrListAndObjDescSize);
typedef NvSciError (*PFN_NvSciBufIpcImportAttrListAndObj)(NvSciBufModule module, NvSciIpcEndpoint ipcEndpoint, const void* attrListAndObjDesc, size_t descSize, const NvSciBufAttrList attrList[], size_t count, NvSciBufAttrValAccessPerm minPermissions, int64_t timeoutUs, NvSciBufObj* bufObj);
typedef void (*PFN_NvSciBufAttrListAndObjFreeDesc)(void* attrListAndObjDescBuf);
typedef NvSciError (*PFN_NvSciSyncModuleOpen)(NvSciSyncModule* newModule);
typedef void (*PFN_NvSciSyncModuleClose)(NvSciSyncModule module);
typedef NvSciError (*PFN_NvSciSyncCheckVersionCompatibility)(uint32_t majorVer, uint32_t minorVer, bool* isCompatible);
typedef NvSciError (*PFN_NvSciSyncCpuWaitContextAlloc)(NvSciSyncModule module, NvSciSyncCpuWaitContext* newContext);
typedef void (*PFN_NvSciSyncCpuWaitContextFree)(NvSciSyncCpuWaitContext context);
typedef NvSciError (*PFN_NvSciSyncAttrListCreate)(NvSciSyncModule module, NvSciSyncAttrList* attrList);
typedef void (*PFN_NvSciSyncAttrListFree)(NvSciSyncAttrList attrList);
typedef NvSciError (*PFN_NvSciSyncAttrListIsReconciled)(NvSciSyncAttrList attrList, bool* isReconciled);
typedef NvSciError (*PFN_NvSciSyncAttrListValidateReconciled)(NvSciSyncAttrList reconciledAttrList, const NvSciSyncAttrList inputUnreconciledAttrListArray[], size_t count, bool* isReconciledListValid);
typedef NvSciError (*PFN_NvSciSyncAttrListSetAttrs)(NvSciSyncAttrList attrList, const NvSciSyncAttrKeyValuePair* pairArray, size_t pairCount);
typedef NvSciError (*PFN_NvSciSyncAttrListGetAttrs)(NvSciSyncAttrList attrList, NvSciSyncAttrKeyValuePair* pairArray, size_t pairCount);
typedef NvSciError (*PFN_NvSciSyncAttrListGetAttr)(NvSciSyncAttrList attrList, NvSciSyncAttrKey key, const void** value, size_t* len);
typedef size_t (*PFN_NvSciSyncAttrListGetSlotCount)(NvSciSyncAttrList attrList);
typedef NvSciError (*PFN_NvSciSyncAttrListSlotGetAttrs)(NvSciSyncAttrList attrList, size_t slotIndex, NvSciSyncAttrKeyValuePair* pairArray, size_t pairCount);
typedef NvSciError (*PFN_NvSciSyncAttrListAppendUnreconciled)(const NvSciSyncAttrList inputUnreconciledAttrListArray[], size_t count, NvSciSyncAttrList* newUnreconciledAttrList);
typedef NvSciError (*PFN_NvSciSyncAttrListClone)(NvSciSyncAttrList origAttrList, NvSciSyncAttrList* newAttrList);
typedef NvSciError (*PFN_NvSciSyncAttrListReconcile)(const NvSciSyncAttrList inputArray[], size_t inputCount, NvSciSyncAttrList* newReconciledList, NvSciSyncAttrList* newConflictList);
typedef NvSciError (*PFN_NvSciSyncAttrListDebugDump)(NvSciSyncAttrList attrList, void** buf, size_t* len);
typedef NvSciError (*PFN_NvSciSyncAttrListReconcileAndObjAlloc)(const NvSciSyncAttrList inputArray[], size_t inputCount, NvSciSyncObj* syncObj, NvSciSyncAttrList* newConflictList);
typedef NvSciError (*PFN_NvSciSyncObjAlloc)(NvSciSyncAttrList reconciledList, NvSciSyncObj* syncObj);
typedef NvSciError (*PFN_NvSciSyncObjDup)(NvSciSyncObj syncObj, NvSciSyncObj* dupObj);
typedef NvSciError (*PFN_NvSciSyncObjGetAttrList)(NvSciSyncObj syncObj, NvSciSyncAttrList* syncAttrList);
typedef void (*PFN_NvSciSyncObjFree)(NvSciSyncObj syncObj);
typedef NvSciError (*PFN_NvSciSyncObjValidate)(NvSciSyncObj syncObj);
typedef NvSciError (*PFN_NvSciSyncObjGenerateFence)(NvSciSyncObj syncObj, NvSciSyncFence* syncFence);
typedef NvSciError (*PFN_NvSciSyncObjSignal)(NvSciSyncObj syncObj);
typedef void (*PFN_NvSciSyncFenceClear)(NvSciSyncFence* syncFence);
typedef NvSciError (*PFN_NvSciSyncFenceDup)(const NvSciSyncFence* srcSyncFence, NvSciSyncFence* dstSyncFence);
typedef NvSciError (*PFN_NvSciSyncFenceWait)(const NvSciSyncFence* syncFence, NvSciSyncCpuWaitContext context, int64_t timeoutUs);
typedef NvSciError (*PFN_NvSciSyncFenceWaitWithMode)(const NvSciSyncFence* syncFence, NvSciSyncCpuWaitContext context, int64_t timeoutUs, NvSciSyncWaitMode waitMode);
typedef NvSciError (*PFN_NvSciSyncFenceGetTimestamp)(const NvSciSyncFence* syncFence, uint64_t* timestampUS);
typedef NvSciError (*PFN_NvSciSyncFenceExtractFence)(const NvSciSyncFence* syncFence, uint64_t* id, uint64_t* value);
typedef NvSciError (*PFN_NvSciSyncFenceUpdateFence)(NvSciSyncObj syncObj, uint64_t id, uint64_t value, NvSciSyncFence* syncFence);
typedef NvSciError (*PFN_NvSciSyncAttrListIpcExportUnreconciled)(const NvSciSyncAttrList unreconciledAttrListArray[], size_t count, NvSciIpcEndpoint ipcEndpoint, void** descBuf, size_t* descLen);
typedef NvSciError (*PFN_NvSciSyncAttrListIpcExportReconciled)(const NvSciSyncAttrList reconciledAttrList, NvSciIpcEndpoint ipcEndpoint, void** descBuf, size_t* descLen);
typedef NvSciError (*PFN_NvSciSyncAttrListIpcImportUnreconciled)(NvSciSyncModule module, NvSciIpcEndpoint ipcEndpoint, const void* descBuf, size_t descLen, NvSciSyncAttrList* importedUnreconciledAttrList);
typedef NvSciError (*PFN_NvSciSyncAttrListIpcImportReconciled)(NvSciSyncModule module, NvSciIpcEndpoint ipcEndpoint, const void* descBuf, size_t descLen, const NvSciSyncAttrList inputUnreconciledAttrListArray[], size_t count, NvSciSyncAttrList* importedReconciledAttrList);
typedef void (*PFN_NvSciSyncAttrListFreeDesc)(void* descBuf);
typedef NvSciError (*PFN_NvSciSyncObjIpcExport)(NvSciSyncObj syncObj, NvSciSyncAccessPerm permissions, NvSciIpcEndpoint ipcEndpoint, NvSciSyncObjIpcExportDescriptor* desc);
typedef NvSciError (*PFN_NvSciSyncObjIpcImport)(NvSciIpcEndpoint ipcEndpoint, const NvSciSyncObjIpcExportDescriptor* desc, NvSciSyncAttrList inputAttrList, NvSciSyncAccessPerm permissions, int64_t timeoutUs, NvSciSyncObj* syncObj);
typedef NvSciError (*PFN_NvSciSyncIpcExportFence)(const NvSciSyncFence* syncFence, NvSciIpcEndpoint ipcEndpoint, NvSciSyncFenceIpcExportDescriptor* desc);
typedef NvSciError (*PFN_NvSciSyncIpcImportFence)(NvSciSyncObj syncObj, const NvSciSyncFenceIpcExportDescriptor* desc, NvSciSyncFence* syncFence);
typedef NvSciError (*PFN_NvSciSyncIpcExportAttrListAndObj)(NvSciSyncObj syncObj, NvSciSyncAccessPerm permissions, NvSciIpcEndpoint ipcEndpoint, void** attrListAndObjDesc, size_t* attrListAndObjDescSize);
typedef NvSciError (*PFN_NvSciSyncIpcImportAttrListAndObj)(NvSciSyncModule module, NvSciIpcEndpoint ipcEndpoint, const void* attrListAndObjDesc, size_t attrListAndObjDescSize, const NvSciSyncAttrList attrList[], size_t attrListCount, NvSciSyncAccessPerm minPermissions, int64_t timeoutUs, NvSciSyncObj* syncObj);
typedef void (*PFN_NvSciSyncAttrListAndObjFreeDesc)(void* attrListAndObjDescBuf);
typedef NvSciError (*PFN_NvSciIpcInit)(void);
typedef void (*PFN_NvSciIpcDeinit)(void);
typedef NvSciError (*PFN_NvSciIpcOpenEndpoint)(const char* endpoint, NvSciIpcEndpoint* handle);
typedef void (*PFN_NvSciIpcCloseEndpoint)(NvSciIpcEndpoint handle);
typedef NvSciError (*PFN_NvSciIpcCloseEndpointSafe)(NvSciIpcEndpoint handle, bool clear);
typedef void (*PFN_NvSciIpcResetEndpoint)(NvSciIpcEndpoint handle);
typedef NvSciError (*PFN_NvSciIpcResetEndpointSafe)(NvSciIpcEndpoint handle);
typedef NvSciError (*PFN_NvSciIpcRead)(NvSciIpcEndpoint handle, void* buf, size_t size, int32_t* bytes);
typedef NvSciError (*PFN_NvSciIpcReadSafe)(NvSciIpcEndpoint handle, void* buf, uint32_t size, uint32_t* bytes);
typedef NvSciError (*PFN_NvSciIpcWrite)(NvSciIpcEndpoint handle, const void* buf, size_t size, int32_t* bytes);
typedef NvSciError (*PFN_NvSciIpcWriteSafe)(NvSciIpcEndpoint handle, const void* buf, uint32_t size, uint32_t* bytes);
typedef NvSciError (*PFN_NvSciIpcGetEndpointInfo)(NvSciIpcEndpoint handle, NvSciIpcEndpointInfo* info);
typedef NvSciError (*PFN_NvSciIpcGetLinuxEventFd)(NvSciIpcEndpoint handle, int32_t* fd);
typedef NvSciError (*PFN_NvSciIpcGetEvent)(NvSciIpcEndpoint handle, uint32_t* events);
typedef NvSciError (*PFN_NvSciIpcGetEventSafe)(NvSciIpcEndpoint handle, uint32_t* events);
typedef NvSciError (*PFN_NvSciIpcCheckVersionCompatibility)(uint32_t majorVer, uint32_t minorVer, bool* isCompatible);

#define NVSCI_SYS_FOR_EACH_FN(X) \
    X(NvSciBufModuleOpen) \
    X(NvSciBufModuleClose) \
    X(NvSciBufCheckVersionCompatibility) \
    X(NvSciBufAttrListCreate) \
    X(NvSciBufAttrListFree) \
    X(NvSciBufAttrListSetAttrs) \
    X(NvSciBufAttrListGetSlotCount) \
    X(NvSciBufAttrListGetAttrs) \
    X(NvSciBufAttrListSlotGetAttrs) \
    X(NvSciBufAttrListDebugDump) \
    X(NvSciBufAttrListReconcile) \
    X(NvSciBufAttrListClone) \
    X(NvSciBufAttrListAppendUnreconciled) \
    X(NvSciBufAttrListIsReconciled) \
    X(NvSciBufAttrListValidateReconciled) \
    X(NvSciBufObjAlloc) \
    X(NvSciBufAttrListReconcileAndObjAlloc) \
    X(NvSciBufObjFree) \
    X(NvSciBufObjDup) \
    X(NvSciBufObjDupWithReducePerm) \
    X(NvSciBufObjGetAttrList) \
    X(NvSciBufObjGetCpuPtr) \
    X(NvSciBufObjGetConstCpuPtr) \
    X(NvSciBufObjFlushCpuCacheRange) \
    X(NvSciBufObjValidate) \
    X(NvSciBufObjGetPixels) \
    X(NvSciBufObjPutPixels) \
    X(NvSciBufAttrListIpcExportUnreconciled) \
    X(NvSciBufAttrListIpcExportReconciled) \
    X(NvSciBufAttrListIpcImportUnreconciled) \
    X(NvSciBufAttrListIpcImportReconciled) \
    X(NvSciBufAttrListFreeDesc) \
    X(NvSciBufObjIpcExport) \
    X(NvSciBufObjIpcImport) \
    X(NvSciBufIpcExportAttrListAndObj) \
    X(NvSciBufIpcImportAttrListAndObj) \
    X(NvSciBufAttrListAndObjFreeDesc) \
    X(NvSciSyncModuleOpen) \
    X(NvSciSyncModuleClose) \
    X(NvSciSyncCheckVersionCompatibility) \
    X(NvSciSyncCpuWaitContextAlloc) \
    X(NvSciSyncCpuWaitContextFree) \
    X(NvSciSyncAttrListCreate) \
    X(NvSciSyncAttrListFree) \
    X(NvSciSyncAttrListIsReconciled) \
    X(NvSciSyncAttrListValidateReconciled) \
    X(NvSciSyncAttrListSetAttrs) \
    X(NvSciSyncAttrListGetAttrs) \
    X(NvSciSyncAttrListGetAttr) \
    X(NvSciSyncAttrListGetSlotCount) \
    X(NvSciSyncAttrListSlotGetAttrs) \
    X(NvSciSyncAttrListAppendUnreconciled) \
    X(NvSciSyncAttrListClone) \
    X(NvSciSyncAttrListReconcile) \
    X(NvSciSyncAttrListDebugDump) \
    X(NvSciSyncAttrListReconcileAndObjAlloc) \
    X(NvSciSyncObjAlloc) \
    X(NvSciSyncObjDup) \
    X(NvSciSyncObjGetAttrList) \
    X(NvSciSyncObjFree) \
    X(NvSciSyncObjValidate) \
    X(NvSciSyncObjGenerateFence) \
    X(NvSciSyncObjSignal) \
    X(NvSciSyncFenceClear) \
    X(NvSciSyncFenceDup) \
    X(NvSciSyncFenceWait) \
    X(NvSciSyncFenceWaitWithMode) \
    X(NvSciSyncFenceGetTimestamp) \
    X(NvSciSyncFenceExtractFence) \
    X(NvSciSyncFenceUpdateFence) \
    X(NvSciSyncAttrListIpcExportUnreconciled) \
    X(NvSciSyncAttrListIpcExportReconciled) \
    X(NvSciSyncAttrListIpcImportUnreconciled) \
    X(NvSciSyncAttrListIpcImportReconciled) \
    X(NvSciSyncAttrListFreeDesc) \
    X(NvSciSyncObjIpcExport) \
    X(NvSciSyncObjIpcImport) \
    X(NvSciSyncIpcExportFence) \
    X(NvSciSyncIpcImportFence) \
    X(NvSciSyncIpcExportAttrListAndObj) \
    X(NvSciSyncIpcImportAttrListAndObj) \
    X(NvSciSyncAttrListAndObjFreeDesc) \
    X(NvSciIpcInit) \
    X(NvSciIpcDeinit) \
    X(NvSciIpcOpenEndpoint) \
    X(NvSciIpcCloseEndpoint) \
    X(NvSciIpcCloseEndpointSafe) \
    X(NvSciIpcResetEndpoint) \
    X(NvSciIpcResetEndpointSafe) \
    X(NvSciIpcRead) \
    X(NvSciIpcReadSafe) \
    X(NvSciIpcWrite) \
    X(NvSciIpcWriteSafe) \
    X(NvSciIpcGetEndpointInfo) \
    X(NvSciIpcGetLinuxEventFd) \
    X(NvSciIpcGetEvent) \
    X(NvSciIpcGetEventSafe) \
    X(NvSciIpcCheckVersionCompatibility) \

#endif
