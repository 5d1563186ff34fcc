//! C exports (feature `export`): every entry point the tables fill, under its C name, so a
//! shared object linking this crate (the workspace's `nvsci-mock-so` builds `libnvsci_mock.so`)
//! can be loaded as `libnvscibuf.so.1` / `libnvscisync.so.1` / `libnvsciipc.so` (for example by
//! `nvsci_sys::loader::load_from`), plus [`NvSciMockLiveHandles`].
//!
//! Each export delegates to the same implementation as the tables of [`crate::buf_fns`] and
//! [`crate::sync_fns`]; a compile-time check ties its signature to the `PFN_*` type of the same
//! name. The exported library has its own copy of the mock's state (modules, ledgers).
#![allow(non_snake_case)]

use crate::{buf, ipc, sync};
use nvsci_sys::*;
use std::os::raw::c_void;

macro_rules! exports {
    ($( $name:ident : $pfn:ident = $imp:path ; ( $($arg:ident : $ty:ty),* ) $(-> $ret:ty)? ; )*) => {
        $(
            #[doc = concat!("C export of `", stringify!($name), "`.")]
            ///
            /// # Safety
            /// The contract of the NvSci C function of the same name.
            #[no_mangle]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
                // SAFETY: the caller upholds the C function's contract, which is exactly the
                // contract of the implementation.
                unsafe { $imp($($arg),*) }
            }
            const _: $pfn = Some($name);
        )*
    };
}

exports! {
    NvSciBufModuleOpen: PFN_NvSciBufModuleOpen = buf::module::module_open;
        (m: *mut NvSciBufModule) -> NvSciError;
    NvSciBufModuleClose: PFN_NvSciBufModuleClose = buf::module::module_close;
        (m: NvSciBufModule);
    NvSciBufCheckVersionCompatibility: PFN_NvSciBufCheckVersionCompatibility = buf::module::check_version;
        (major: u32, minor: u32, ok: *mut bool) -> NvSciError;
    NvSciBufAttrListCreate: PFN_NvSciBufAttrListCreate = buf::list::create;
        (m: NvSciBufModule, out: *mut NvSciBufAttrList) -> NvSciError;
    NvSciBufAttrListFree: PFN_NvSciBufAttrListFree = buf::list::free;
        (l: NvSciBufAttrList);
    NvSciBufAttrListSetAttrs: PFN_NvSciBufAttrListSetAttrs = buf::list::set_attrs;
        (l: NvSciBufAttrList, pairs: *mut NvSciBufAttrKeyValuePair, n: usize) -> NvSciError;
    NvSciBufAttrListGetSlotCount: PFN_NvSciBufAttrListGetSlotCount = buf::list::get_slot_count;
        (l: NvSciBufAttrList) -> usize;
    NvSciBufAttrListGetAttrs: PFN_NvSciBufAttrListGetAttrs = buf::list::get_attrs;
        (l: NvSciBufAttrList, pairs: *mut NvSciBufAttrKeyValuePair, n: usize) -> NvSciError;
    NvSciBufAttrListSlotGetAttrs: PFN_NvSciBufAttrListSlotGetAttrs = buf::list::slot_get_attrs;
        (l: NvSciBufAttrList, slot: usize, pairs: *mut NvSciBufAttrKeyValuePair, n: usize) -> NvSciError;
    NvSciBufAttrListDebugDump: PFN_NvSciBufAttrListDebugDump = buf::list::debug_dump;
        (l: NvSciBufAttrList, buf: *mut *mut c_void, len: *mut usize) -> NvSciError;
    NvSciBufAttrListReconcile: PFN_NvSciBufAttrListReconcile = buf::list::reconcile;
        (inputs: *const NvSciBufAttrList, n: usize, rec: *mut NvSciBufAttrList, conflict: *mut NvSciBufAttrList) -> NvSciError;
    NvSciBufAttrListClone: PFN_NvSciBufAttrListClone = buf::list::clone;
        (l: NvSciBufAttrList, out: *mut NvSciBufAttrList) -> NvSciError;
    NvSciBufAttrListAppendUnreconciled: PFN_NvSciBufAttrListAppendUnreconciled = buf::list::append_unreconciled;
        (inputs: *const NvSciBufAttrList, n: usize, out: *mut NvSciBufAttrList) -> NvSciError;
    NvSciBufAttrListIsReconciled: PFN_NvSciBufAttrListIsReconciled = buf::list::is_reconciled;
        (l: NvSciBufAttrList, out: *mut bool) -> NvSciError;
    NvSciBufAttrListValidateReconciled: PFN_NvSciBufAttrListValidateReconciled = buf::list::validate_reconciled;
        (r: NvSciBufAttrList, inputs: *const NvSciBufAttrList, n: usize, out: *mut bool) -> NvSciError;
    NvSciBufObjAlloc: PFN_NvSciBufObjAlloc = buf::obj::alloc;
        (l: NvSciBufAttrList, out: *mut NvSciBufObj) -> NvSciError;
    NvSciBufAttrListReconcileAndObjAlloc: PFN_NvSciBufAttrListReconcileAndObjAlloc = buf::obj::reconcile_and_alloc;
        (inputs: *const NvSciBufAttrList, n: usize, out: *mut NvSciBufObj, conflict: *mut NvSciBufAttrList) -> NvSciError;
    NvSciBufObjFree: PFN_NvSciBufObjFree = buf::obj::free;
        (o: NvSciBufObj);
    NvSciBufObjDup: PFN_NvSciBufObjDup = buf::obj::dup;
        (o: NvSciBufObj, out: *mut NvSciBufObj) -> NvSciError;
    NvSciBufObjDupWithReducePerm: PFN_NvSciBufObjDupWithReducePerm = buf::obj::dup_with_reduce_perm;
        (o: NvSciBufObj, perm: NvSciBufAttrValAccessPerm, out: *mut NvSciBufObj) -> NvSciError;
    NvSciBufObjGetAttrList: PFN_NvSciBufObjGetAttrList = buf::obj::get_attr_list;
        (o: NvSciBufObj, out: *mut NvSciBufAttrList) -> NvSciError;
    NvSciBufObjGetCpuPtr: PFN_NvSciBufObjGetCpuPtr = buf::obj::get_cpu_ptr;
        (o: NvSciBufObj, out: *mut *mut c_void) -> NvSciError;
    NvSciBufObjGetConstCpuPtr: PFN_NvSciBufObjGetConstCpuPtr = buf::obj::get_const_cpu_ptr;
        (o: NvSciBufObj, out: *mut *const c_void) -> NvSciError;
    NvSciBufObjFlushCpuCacheRange: PFN_NvSciBufObjFlushCpuCacheRange = buf::obj::flush_cpu_cache_range;
        (o: NvSciBufObj, offset: u64, len: u64) -> NvSciError;
    NvSciBufObjGetPixels: PFN_NvSciBufObjGetPixels = buf::pixels::get_pixels;
        (o: NvSciBufObj, rect: *const NvSciBufRect, ptrs: *mut *mut c_void, sizes: *const u32, pitches: *const u32) -> NvSciError;
    NvSciBufObjPutPixels: PFN_NvSciBufObjPutPixels = buf::pixels::put_pixels;
        (o: NvSciBufObj, rect: *const NvSciBufRect, ptrs: *mut *const c_void, sizes: *const u32, pitches: *const u32) -> NvSciError;
    NvSciBufAttrListIpcExportUnreconciled: PFN_NvSciBufAttrListIpcExportUnreconciled = buf::ipc::attr_list_export_unreconciled;
        (lists: *const NvSciBufAttrList, n: usize, ep: NvSciIpcEndpoint, desc: *mut *mut c_void, len: *mut usize) -> NvSciError;
    NvSciBufAttrListIpcExportReconciled: PFN_NvSciBufAttrListIpcExportReconciled = buf::ipc::attr_list_export_reconciled;
        (l: NvSciBufAttrList, ep: NvSciIpcEndpoint, desc: *mut *mut c_void, len: *mut usize) -> NvSciError;
    NvSciBufAttrListIpcImportUnreconciled: PFN_NvSciBufAttrListIpcImportUnreconciled = buf::ipc::attr_list_import_unreconciled;
        (m: NvSciBufModule, ep: NvSciIpcEndpoint, desc: *const c_void, len: usize, out: *mut NvSciBufAttrList) -> NvSciError;
    NvSciBufAttrListIpcImportReconciled: PFN_NvSciBufAttrListIpcImportReconciled = buf::ipc::attr_list_import_reconciled;
        (m: NvSciBufModule, ep: NvSciIpcEndpoint, desc: *const c_void, len: usize, inputs: *const NvSciBufAttrList, n: usize, out: *mut NvSciBufAttrList) -> NvSciError;
    NvSciBufAttrListFreeDesc: PFN_NvSciBufAttrListFreeDesc = buf::list::free_desc;
        (desc: *mut c_void);
    NvSciBufObjIpcExport: PFN_NvSciBufObjIpcExport = buf::ipc::obj_export;
        (o: NvSciBufObj, perm: NvSciBufAttrValAccessPerm, ep: NvSciIpcEndpoint, desc: *mut NvSciBufObjIpcExportDescriptor) -> NvSciError;
    NvSciBufObjIpcImport: PFN_NvSciBufObjIpcImport = buf::ipc::obj_import;
        (ep: NvSciIpcEndpoint, desc: *const NvSciBufObjIpcExportDescriptor, l: NvSciBufAttrList, perm: NvSciBufAttrValAccessPerm, timeout: i64, out: *mut NvSciBufObj) -> NvSciError;
    NvSciBufIpcExportAttrListAndObj: PFN_NvSciBufIpcExportAttrListAndObj = buf::ipc::export_attr_list_and_obj;
        (o: NvSciBufObj, perm: NvSciBufAttrValAccessPerm, ep: NvSciIpcEndpoint, desc: *mut *mut c_void, len: *mut usize) -> NvSciError;
    NvSciBufIpcImportAttrListAndObj: PFN_NvSciBufIpcImportAttrListAndObj = buf::ipc::import_attr_list_and_obj;
        (m: NvSciBufModule, ep: NvSciIpcEndpoint, desc: *const c_void, len: usize, lists: *const NvSciBufAttrList, n: usize, perm: NvSciBufAttrValAccessPerm, timeout: i64, out: *mut NvSciBufObj) -> NvSciError;
    NvSciBufAttrListAndObjFreeDesc: PFN_NvSciBufAttrListAndObjFreeDesc = buf::ipc::attr_list_and_obj_free_desc;
        (desc: *mut c_void);
    NvSciBufObjValidate: PFN_NvSciBufObjValidate = buf::obj::validate;
        (o: NvSciBufObj) -> NvSciError;

    NvSciSyncModuleOpen: PFN_NvSciSyncModuleOpen = sync::module::module_open;
        (m: *mut NvSciSyncModule) -> NvSciError;
    NvSciSyncModuleClose: PFN_NvSciSyncModuleClose = sync::module::module_close;
        (m: NvSciSyncModule);
    NvSciSyncCheckVersionCompatibility: PFN_NvSciSyncCheckVersionCompatibility = sync::module::check_version;
        (major: u32, minor: u32, ok: *mut bool) -> NvSciError;
    NvSciSyncCpuWaitContextAlloc: PFN_NvSciSyncCpuWaitContextAlloc = sync::module::wait_context_alloc;
        (m: NvSciSyncModule, out: *mut NvSciSyncCpuWaitContext) -> NvSciError;
    NvSciSyncCpuWaitContextFree: PFN_NvSciSyncCpuWaitContextFree = sync::module::wait_context_free;
        (c: NvSciSyncCpuWaitContext);
    NvSciSyncAttrListCreate: PFN_NvSciSyncAttrListCreate = sync::list::create;
        (m: NvSciSyncModule, out: *mut NvSciSyncAttrList) -> NvSciError;
    NvSciSyncAttrListFree: PFN_NvSciSyncAttrListFree = sync::list::free;
        (l: NvSciSyncAttrList);
    NvSciSyncAttrListIsReconciled: PFN_NvSciSyncAttrListIsReconciled = sync::list::is_reconciled;
        (l: NvSciSyncAttrList, out: *mut bool) -> NvSciError;
    NvSciSyncAttrListValidateReconciled: PFN_NvSciSyncAttrListValidateReconciled = sync::list::validate_reconciled;
        (r: NvSciSyncAttrList, inputs: *const NvSciSyncAttrList, n: usize, out: *mut bool) -> NvSciError;
    NvSciSyncAttrListSetAttrs: PFN_NvSciSyncAttrListSetAttrs = sync::list::set_attrs;
        (l: NvSciSyncAttrList, pairs: *const NvSciSyncAttrKeyValuePair, n: usize) -> NvSciError;
    NvSciSyncAttrListGetAttrs: PFN_NvSciSyncAttrListGetAttrs = sync::list::get_attrs;
        (l: NvSciSyncAttrList, pairs: *mut NvSciSyncAttrKeyValuePair, n: usize) -> NvSciError;
    NvSciSyncAttrListGetAttr: PFN_NvSciSyncAttrListGetAttr = sync::list::get_attr;
        (l: NvSciSyncAttrList, key: NvSciSyncAttrKey, value: *mut *const c_void, len: *mut usize) -> NvSciError;
    NvSciSyncAttrListGetSlotCount: PFN_NvSciSyncAttrListGetSlotCount = sync::list::get_slot_count;
        (l: NvSciSyncAttrList) -> usize;
    NvSciSyncAttrListSlotGetAttrs: PFN_NvSciSyncAttrListSlotGetAttrs = sync::list::slot_get_attrs;
        (l: NvSciSyncAttrList, slot: usize, pairs: *mut NvSciSyncAttrKeyValuePair, n: usize) -> NvSciError;
    NvSciSyncAttrListAppendUnreconciled: PFN_NvSciSyncAttrListAppendUnreconciled = sync::list::append_unreconciled;
        (inputs: *const NvSciSyncAttrList, n: usize, out: *mut NvSciSyncAttrList) -> NvSciError;
    NvSciSyncAttrListClone: PFN_NvSciSyncAttrListClone = sync::list::clone;
        (l: NvSciSyncAttrList, out: *mut NvSciSyncAttrList) -> NvSciError;
    NvSciSyncAttrListReconcile: PFN_NvSciSyncAttrListReconcile = sync::list::reconcile;
        (inputs: *const NvSciSyncAttrList, n: usize, rec: *mut NvSciSyncAttrList, conflict: *mut NvSciSyncAttrList) -> NvSciError;
    NvSciSyncAttrListDebugDump: PFN_NvSciSyncAttrListDebugDump = sync::list::debug_dump;
        (l: NvSciSyncAttrList, buf: *mut *mut c_void, len: *mut usize) -> NvSciError;
    NvSciSyncAttrListReconcileAndObjAlloc: PFN_NvSciSyncAttrListReconcileAndObjAlloc = sync::obj::reconcile_and_alloc;
        (inputs: *const NvSciSyncAttrList, n: usize, out: *mut NvSciSyncObj, conflict: *mut NvSciSyncAttrList) -> NvSciError;
    NvSciSyncObjAlloc: PFN_NvSciSyncObjAlloc = sync::obj::alloc;
        (l: NvSciSyncAttrList, out: *mut NvSciSyncObj) -> NvSciError;
    NvSciSyncObjDup: PFN_NvSciSyncObjDup = sync::obj::dup;
        (o: NvSciSyncObj, out: *mut NvSciSyncObj) -> NvSciError;
    NvSciSyncObjGetAttrList: PFN_NvSciSyncObjGetAttrList = sync::obj::get_attr_list;
        (o: NvSciSyncObj, out: *mut NvSciSyncAttrList) -> NvSciError;
    NvSciSyncObjFree: PFN_NvSciSyncObjFree = sync::obj::free;
        (o: NvSciSyncObj);
    NvSciSyncObjGenerateFence: PFN_NvSciSyncObjGenerateFence = sync::obj::generate_fence;
        (o: NvSciSyncObj, fence: *mut NvSciSyncFence) -> NvSciError;
    NvSciSyncObjSignal: PFN_NvSciSyncObjSignal = sync::obj::signal;
        (o: NvSciSyncObj) -> NvSciError;
    NvSciSyncFenceClear: PFN_NvSciSyncFenceClear = sync::fence::clear;
        (fence: *mut NvSciSyncFence);
    NvSciSyncFenceDup: PFN_NvSciSyncFenceDup = sync::fence::dup;
        (src: *const NvSciSyncFence, dst: *mut NvSciSyncFence) -> NvSciError;
    NvSciSyncFenceWait: PFN_NvSciSyncFenceWait = sync::fence::wait;
        (fence: *const NvSciSyncFence, c: NvSciSyncCpuWaitContext, timeout: i64) -> NvSciError;
    NvSciSyncFenceGetTimestamp: PFN_NvSciSyncFenceGetTimestamp = sync::fence::get_timestamp;
        (fence: *const NvSciSyncFence, out: *mut u64) -> NvSciError;
    NvSciSyncAttrListIpcExportUnreconciled: PFN_NvSciSyncAttrListIpcExportUnreconciled = sync::ipc::attr_list_export_unreconciled;
        (lists: *const NvSciSyncAttrList, n: usize, ep: NvSciIpcEndpoint, desc: *mut *mut c_void, len: *mut usize) -> NvSciError;
    NvSciSyncAttrListIpcExportReconciled: PFN_NvSciSyncAttrListIpcExportReconciled = sync::ipc::attr_list_export_reconciled;
        (l: NvSciSyncAttrList, ep: NvSciIpcEndpoint, desc: *mut *mut c_void, len: *mut usize) -> NvSciError;
    NvSciSyncAttrListIpcImportUnreconciled: PFN_NvSciSyncAttrListIpcImportUnreconciled = sync::ipc::attr_list_import_unreconciled;
        (m: NvSciSyncModule, ep: NvSciIpcEndpoint, desc: *const c_void, len: usize, out: *mut NvSciSyncAttrList) -> NvSciError;
    NvSciSyncAttrListIpcImportReconciled: PFN_NvSciSyncAttrListIpcImportReconciled = sync::ipc::attr_list_import_reconciled;
        (m: NvSciSyncModule, ep: NvSciIpcEndpoint, desc: *const c_void, len: usize, inputs: *const NvSciSyncAttrList, n: usize, out: *mut NvSciSyncAttrList) -> NvSciError;
    NvSciSyncAttrListFreeDesc: PFN_NvSciSyncAttrListFreeDesc = sync::list::free_desc;
        (desc: *mut c_void);
    NvSciSyncObjIpcExport: PFN_NvSciSyncObjIpcExport = sync::ipc::obj_export;
        (o: NvSciSyncObj, perm: NvSciSyncAccessPerm, ep: NvSciIpcEndpoint, desc: *mut NvSciSyncObjIpcExportDescriptor) -> NvSciError;
    NvSciSyncObjIpcImport: PFN_NvSciSyncObjIpcImport = sync::ipc::obj_import;
        (ep: NvSciIpcEndpoint, desc: *const NvSciSyncObjIpcExportDescriptor, l: NvSciSyncAttrList, perm: NvSciSyncAccessPerm, timeout: i64, out: *mut NvSciSyncObj) -> NvSciError;
    NvSciSyncIpcExportFence: PFN_NvSciSyncIpcExportFence = sync::ipc::export_fence;
        (fence: *const NvSciSyncFence, ep: NvSciIpcEndpoint, desc: *mut NvSciSyncFenceIpcExportDescriptor) -> NvSciError;
    NvSciSyncIpcImportFence: PFN_NvSciSyncIpcImportFence = sync::ipc::import_fence;
        (o: NvSciSyncObj, desc: *const NvSciSyncFenceIpcExportDescriptor, fence: *mut NvSciSyncFence) -> NvSciError;
    NvSciSyncObjValidate: PFN_NvSciSyncObjValidate = sync::obj::validate;
        (o: NvSciSyncObj) -> NvSciError;
    NvSciSyncFenceExtractFence: PFN_NvSciSyncFenceExtractFence = sync::fence::extract;
        (fence: *const NvSciSyncFence, id: *mut u64, value: *mut u64) -> NvSciError;
    NvSciSyncIpcExportAttrListAndObj: PFN_NvSciSyncIpcExportAttrListAndObj = sync::ipc::export_attr_list_and_obj;
        (o: NvSciSyncObj, perm: NvSciSyncAccessPerm, ep: NvSciIpcEndpoint, desc: *mut *mut c_void, len: *mut usize) -> NvSciError;
    NvSciSyncIpcImportAttrListAndObj: PFN_NvSciSyncIpcImportAttrListAndObj = sync::ipc::import_attr_list_and_obj;
        (m: NvSciSyncModule, ep: NvSciIpcEndpoint, desc: *const c_void, len: usize, lists: *const NvSciSyncAttrList, n: usize, perm: NvSciSyncAccessPerm, timeout: i64, out: *mut NvSciSyncObj) -> NvSciError;
    NvSciSyncAttrListAndObjFreeDesc: PFN_NvSciSyncAttrListAndObjFreeDesc = sync::ipc::attr_list_and_obj_free_desc;
        (desc: *mut c_void);
    NvSciIpcInit: PFN_NvSciIpcInit = ipc::endpoint::init;
        () -> NvSciError;
    NvSciIpcDeinit: PFN_NvSciIpcDeinit = ipc::endpoint::deinit;
        ();
    NvSciIpcOpenEndpoint: PFN_NvSciIpcOpenEndpoint = ipc::endpoint::open_endpoint;
        (name: *const std::os::raw::c_char, out: *mut NvSciIpcEndpoint) -> NvSciError;
    NvSciIpcCloseEndpoint: PFN_NvSciIpcCloseEndpoint = ipc::endpoint::close_endpoint;
        (h: NvSciIpcEndpoint);
    NvSciIpcCloseEndpointSafe: PFN_NvSciIpcCloseEndpointSafe = ipc::endpoint::close_endpoint_safe;
        (h: NvSciIpcEndpoint, clear: bool) -> NvSciError;
    NvSciIpcResetEndpoint: PFN_NvSciIpcResetEndpoint = ipc::endpoint::reset_endpoint;
        (h: NvSciIpcEndpoint);
    NvSciIpcResetEndpointSafe: PFN_NvSciIpcResetEndpointSafe = ipc::endpoint::reset_endpoint_safe;
        (h: NvSciIpcEndpoint) -> NvSciError;
    NvSciIpcRead: PFN_NvSciIpcRead = ipc::endpoint::read;
        (h: NvSciIpcEndpoint, buf: *mut c_void, size: usize, bytes: *mut i32) -> NvSciError;
    NvSciIpcReadSafe: PFN_NvSciIpcReadSafe = ipc::endpoint::read_safe;
        (h: NvSciIpcEndpoint, buf: *mut c_void, size: u32, bytes: *mut u32) -> NvSciError;
    NvSciIpcWrite: PFN_NvSciIpcWrite = ipc::endpoint::write;
        (h: NvSciIpcEndpoint, buf: *const c_void, size: usize, bytes: *mut i32) -> NvSciError;
    NvSciIpcWriteSafe: PFN_NvSciIpcWriteSafe = ipc::endpoint::write_safe;
        (h: NvSciIpcEndpoint, buf: *const c_void, size: u32, bytes: *mut u32) -> NvSciError;
    NvSciIpcGetEndpointInfo: PFN_NvSciIpcGetEndpointInfo = ipc::endpoint::get_endpoint_info;
        (h: NvSciIpcEndpoint, info: *mut NvSciIpcEndpointInfo) -> NvSciError;
    NvSciIpcGetLinuxEventFd: PFN_NvSciIpcGetLinuxEventFd = ipc::endpoint::get_linux_event_fd;
        (h: NvSciIpcEndpoint, fd: *mut i32) -> NvSciError;
    NvSciIpcGetEvent: PFN_NvSciIpcGetEvent = ipc::endpoint::get_event;
        (h: NvSciIpcEndpoint, events: *mut u32) -> NvSciError;
    NvSciIpcGetEventSafe: PFN_NvSciIpcGetEventSafe = ipc::endpoint::get_event_safe;
        (h: NvSciIpcEndpoint, events: *mut u32) -> NvSciError;
    NvSciIpcCheckVersionCompatibility: PFN_NvSciIpcCheckVersionCompatibility = ipc::endpoint::check_version;
        (major: u32, minor: u32, ok: *mut bool) -> NvSciError;
}

/// Total of the process-wide ledger of this copy of the mock (see [`crate::global_ledger`]):
/// every module, list, object, descriptor, wait context and fence still alive.
#[no_mangle]
pub extern "C" fn NvSciMockLiveHandles() -> u64 {
    crate::ffi::guard_val(u64::MAX, || crate::global_ledger().counts().total() as u64)
}
