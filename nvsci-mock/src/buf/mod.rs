//! NvSciBuf emulation.

pub(crate) mod image;
pub(crate) mod ipc;
pub(crate) mod keys;
pub(crate) mod list;
pub(crate) mod module;
pub(crate) mod obj;
pub(crate) mod pixels;
pub(crate) mod reconcile;

use nvsci_sys::NvSciBufFns;

/// The NvSciBuf function table of the mock.
pub(crate) fn fns() -> NvSciBufFns {
    let mut t = NvSciBufFns::EMPTY;
    t.NvSciBufModuleOpen = Some(module::module_open);
    t.NvSciBufModuleClose = Some(module::module_close);
    t.NvSciBufCheckVersionCompatibility = Some(module::check_version);
    t.NvSciBufAttrListCreate = Some(list::create);
    t.NvSciBufAttrListFree = Some(list::free);
    t.NvSciBufAttrListSetAttrs = Some(list::set_attrs);
    t.NvSciBufAttrListGetSlotCount = Some(list::get_slot_count);
    t.NvSciBufAttrListGetAttrs = Some(list::get_attrs);
    t.NvSciBufAttrListSlotGetAttrs = Some(list::slot_get_attrs);
    t.NvSciBufAttrListDebugDump = Some(list::debug_dump);
    t.NvSciBufAttrListReconcile = Some(list::reconcile);
    t.NvSciBufAttrListClone = Some(list::clone);
    t.NvSciBufAttrListAppendUnreconciled = Some(list::append_unreconciled);
    t.NvSciBufAttrListIsReconciled = Some(list::is_reconciled);
    t.NvSciBufAttrListValidateReconciled = Some(list::validate_reconciled);
    t.NvSciBufObjAlloc = Some(obj::alloc);
    t.NvSciBufAttrListReconcileAndObjAlloc = Some(obj::reconcile_and_alloc);
    t.NvSciBufObjFree = Some(obj::free);
    t.NvSciBufObjDup = Some(obj::dup);
    t.NvSciBufObjDupWithReducePerm = Some(obj::dup_with_reduce_perm);
    t.NvSciBufObjGetAttrList = Some(obj::get_attr_list);
    t.NvSciBufObjGetCpuPtr = Some(obj::get_cpu_ptr);
    t.NvSciBufObjGetConstCpuPtr = Some(obj::get_const_cpu_ptr);
    t.NvSciBufObjFlushCpuCacheRange = Some(obj::flush_cpu_cache_range);
    t.NvSciBufObjGetPixels = Some(pixels::get_pixels);
    t.NvSciBufObjPutPixels = Some(pixels::put_pixels);
    t.NvSciBufAttrListIpcExportUnreconciled = Some(ipc::attr_list_export_unreconciled);
    t.NvSciBufAttrListIpcExportReconciled = Some(ipc::attr_list_export_reconciled);
    t.NvSciBufAttrListIpcImportUnreconciled = Some(ipc::attr_list_import_unreconciled);
    t.NvSciBufAttrListIpcImportReconciled = Some(ipc::attr_list_import_reconciled);
    t.NvSciBufAttrListFreeDesc = Some(list::free_desc);
    t.NvSciBufObjIpcExport = Some(ipc::obj_export);
    t.NvSciBufObjIpcImport = Some(ipc::obj_import);
    t.NvSciBufIpcExportAttrListAndObj = Some(ipc::export_attr_list_and_obj);
    t.NvSciBufIpcImportAttrListAndObj = Some(ipc::import_attr_list_and_obj);
    t.NvSciBufAttrListAndObjFreeDesc = Some(ipc::attr_list_and_obj_free_desc);
    t.NvSciBufObjValidate = Some(obj::validate);
    t
}
