//! NvSciSync emulation.

pub(crate) mod counter;
pub(crate) mod fence;
pub(crate) mod ipc;
pub(crate) mod keys;
pub(crate) mod list;
pub(crate) mod module;
pub(crate) mod obj;
mod reconcile;
pub(crate) mod state;

use nvsci_sys::NvSciSyncFns;

/// The NvSciSync function table of the mock.
pub(crate) fn fns() -> NvSciSyncFns {
    let mut t = NvSciSyncFns::EMPTY;
    t.NvSciSyncModuleOpen = Some(module::module_open);
    t.NvSciSyncModuleClose = Some(module::module_close);
    t.NvSciSyncCheckVersionCompatibility = Some(module::check_version);
    t.NvSciSyncCpuWaitContextAlloc = Some(module::wait_context_alloc);
    t.NvSciSyncCpuWaitContextFree = Some(module::wait_context_free);
    t.NvSciSyncAttrListCreate = Some(list::create);
    t.NvSciSyncAttrListFree = Some(list::free);
    t.NvSciSyncAttrListIsReconciled = Some(list::is_reconciled);
    t.NvSciSyncAttrListValidateReconciled = Some(list::validate_reconciled);
    t.NvSciSyncAttrListSetAttrs = Some(list::set_attrs);
    t.NvSciSyncAttrListGetAttrs = Some(list::get_attrs);
    t.NvSciSyncAttrListGetAttr = Some(list::get_attr);
    t.NvSciSyncAttrListGetSlotCount = Some(list::get_slot_count);
    t.NvSciSyncAttrListSlotGetAttrs = Some(list::slot_get_attrs);
    t.NvSciSyncAttrListAppendUnreconciled = Some(list::append_unreconciled);
    t.NvSciSyncAttrListClone = Some(list::clone);
    t.NvSciSyncAttrListReconcile = Some(list::reconcile);
    t.NvSciSyncAttrListDebugDump = Some(list::debug_dump);
    t.NvSciSyncAttrListReconcileAndObjAlloc = Some(obj::reconcile_and_alloc);
    t.NvSciSyncObjAlloc = Some(obj::alloc);
    t.NvSciSyncObjDup = Some(obj::dup);
    t.NvSciSyncObjGetAttrList = Some(obj::get_attr_list);
    t.NvSciSyncObjFree = Some(obj::free);
    t.NvSciSyncObjGenerateFence = Some(obj::generate_fence);
    t.NvSciSyncObjSignal = Some(obj::signal);
    t.NvSciSyncFenceClear = Some(fence::clear);
    t.NvSciSyncFenceDup = Some(fence::dup);
    t.NvSciSyncFenceWait = Some(fence::wait);
    t.NvSciSyncFenceGetTimestamp = Some(fence::get_timestamp);
    t.NvSciSyncAttrListIpcExportUnreconciled = Some(ipc::attr_list_export_unreconciled);
    t.NvSciSyncAttrListIpcExportReconciled = Some(ipc::attr_list_export_reconciled);
    t.NvSciSyncAttrListIpcImportUnreconciled = Some(ipc::attr_list_import_unreconciled);
    t.NvSciSyncAttrListIpcImportReconciled = Some(ipc::attr_list_import_reconciled);
    t.NvSciSyncAttrListFreeDesc = Some(list::free_desc);
    t.NvSciSyncObjIpcExport = Some(ipc::obj_export);
    t.NvSciSyncObjIpcImport = Some(ipc::obj_import);
    t.NvSciSyncIpcExportFence = Some(ipc::export_fence);
    t.NvSciSyncIpcImportFence = Some(ipc::import_fence);
    t.NvSciSyncIpcExportAttrListAndObj = Some(ipc::export_attr_list_and_obj);
    t.NvSciSyncIpcImportAttrListAndObj = Some(ipc::import_attr_list_and_obj);
    t.NvSciSyncAttrListAndObjFreeDesc = Some(ipc::attr_list_and_obj_free_desc);
    t.NvSciSyncObjValidate = Some(obj::validate);
    t.NvSciSyncFenceExtractFence = Some(fence::extract);
    t
}
