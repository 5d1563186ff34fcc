//! NvSciBuf IPC entry points. There is no NvSciIpc in the emulation: every export/import returns
//! `NvSciError_NotSupported` without touching its arguments.

use nvsci_sys::*;
use std::os::raw::c_void;

pub(crate) unsafe extern "C" fn attr_list_export_unreconciled(
    _lists: *const NvSciBufAttrList,
    _count: usize,
    _endpoint: NvSciIpcEndpoint,
    _desc: *mut *mut c_void,
    _len: *mut usize,
) -> NvSciError {
    NvSciError_NotSupported
}

pub(crate) unsafe extern "C" fn attr_list_export_reconciled(
    _list: NvSciBufAttrList,
    _endpoint: NvSciIpcEndpoint,
    _desc: *mut *mut c_void,
    _len: *mut usize,
) -> NvSciError {
    NvSciError_NotSupported
}

pub(crate) unsafe extern "C" fn attr_list_import_unreconciled(
    _module: NvSciBufModule,
    _endpoint: NvSciIpcEndpoint,
    _desc: *const c_void,
    _len: usize,
    _out: *mut NvSciBufAttrList,
) -> NvSciError {
    NvSciError_NotSupported
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn attr_list_import_reconciled(
    _module: NvSciBufModule,
    _endpoint: NvSciIpcEndpoint,
    _desc: *const c_void,
    _len: usize,
    _inputs: *const NvSciBufAttrList,
    _count: usize,
    _out: *mut NvSciBufAttrList,
) -> NvSciError {
    NvSciError_NotSupported
}

pub(crate) unsafe extern "C" fn obj_export(
    _obj: NvSciBufObj,
    _perm: NvSciBufAttrValAccessPerm,
    _endpoint: NvSciIpcEndpoint,
    _desc: *mut NvSciBufObjIpcExportDescriptor,
) -> NvSciError {
    NvSciError_NotSupported
}

pub(crate) unsafe extern "C" fn obj_import(
    _endpoint: NvSciIpcEndpoint,
    _desc: *const NvSciBufObjIpcExportDescriptor,
    _list: NvSciBufAttrList,
    _perm: NvSciBufAttrValAccessPerm,
    _timeout_us: i64,
    _out: *mut NvSciBufObj,
) -> NvSciError {
    NvSciError_NotSupported
}

pub(crate) unsafe extern "C" fn export_attr_list_and_obj(
    _obj: NvSciBufObj,
    _perm: NvSciBufAttrValAccessPerm,
    _endpoint: NvSciIpcEndpoint,
    _desc: *mut *mut c_void,
    _len: *mut usize,
) -> NvSciError {
    NvSciError_NotSupported
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn import_attr_list_and_obj(
    _module: NvSciBufModule,
    _endpoint: NvSciIpcEndpoint,
    _desc: *const c_void,
    _len: usize,
    _lists: *const NvSciBufAttrList,
    _count: usize,
    _perm: NvSciBufAttrValAccessPerm,
    _timeout_us: i64,
    _out: *mut NvSciBufObj,
) -> NvSciError {
    NvSciError_NotSupported
}

/// Frees an attribute-list-and-object descriptor. The mock never creates one; NULL and any
/// descriptor buffer of the mock are accepted.
pub(crate) unsafe extern "C" fn attr_list_and_obj_free_desc(desc: *mut c_void) {
    // SAFETY: `desc` is NULL or a descriptor buffer returned by this mock.
    crate::ffi::guard_void(|| unsafe { crate::desc::free(desc) });
}
