//! NvSciSync IPC entry points. There is no NvSciIpc in the emulation: every export/import returns
//! `NvSciError_NotSupported` without touching its arguments.

use nvsci_sys::*;
use std::os::raw::c_void;

pub(crate) unsafe extern "C" fn attr_list_export_unreconciled(
    _lists: *const NvSciSyncAttrList,
    _count: usize,
    _endpoint: NvSciIpcEndpoint,
    _desc: *mut *mut c_void,
    _len: *mut usize,
) -> NvSciError {
    NvSciError_NotSupported
}

pub(crate) unsafe extern "C" fn attr_list_export_reconciled(
    _list: NvSciSyncAttrList,
    _endpoint: NvSciIpcEndpoint,
    _desc: *mut *mut c_void,
    _len: *mut usize,
) -> NvSciError {
    NvSciError_NotSupported
}

pub(crate) unsafe extern "C" fn attr_list_import_unreconciled(
    _module: NvSciSyncModule,
    _endpoint: NvSciIpcEndpoint,
    _desc: *const c_void,
    _len: usize,
    _out: *mut NvSciSyncAttrList,
) -> NvSciError {
    NvSciError_NotSupported
}

pub(crate) unsafe extern "C" fn attr_list_import_reconciled(
    _module: NvSciSyncModule,
    _endpoint: NvSciIpcEndpoint,
    _desc: *const c_void,
    _len: usize,
    _inputs: *const NvSciSyncAttrList,
    _count: usize,
    _out: *mut NvSciSyncAttrList,
) -> NvSciError {
    NvSciError_NotSupported
}

pub(crate) unsafe extern "C" fn obj_export(
    _obj: NvSciSyncObj,
    _perm: NvSciSyncAccessPerm,
    _endpoint: NvSciIpcEndpoint,
    _desc: *mut NvSciSyncObjIpcExportDescriptor,
) -> NvSciError {
    NvSciError_NotSupported
}

pub(crate) unsafe extern "C" fn obj_import(
    _endpoint: NvSciIpcEndpoint,
    _desc: *const NvSciSyncObjIpcExportDescriptor,
    _list: NvSciSyncAttrList,
    _perm: NvSciSyncAccessPerm,
    _timeout_us: i64,
    _out: *mut NvSciSyncObj,
) -> NvSciError {
    NvSciError_NotSupported
}

pub(crate) unsafe extern "C" fn export_fence(
    _fence: *const NvSciSyncFence,
    _endpoint: NvSciIpcEndpoint,
    _desc: *mut NvSciSyncFenceIpcExportDescriptor,
) -> NvSciError {
    NvSciError_NotSupported
}

pub(crate) unsafe extern "C" fn import_fence(
    _obj: NvSciSyncObj,
    _desc: *const NvSciSyncFenceIpcExportDescriptor,
    _fence: *mut NvSciSyncFence,
) -> NvSciError {
    NvSciError_NotSupported
}
