//! NvSciSync attribute lists: the NvSciSync [`Family`] and its list types.

use super::keys::{SyncAttr, ALL_KEYS};
use super::SyncModule;
use crate::attr::sealed_access::Sealed;
use crate::attr_list::{entry, AttrList, AttrListRef, Family, ListFns};
use crate::library::NvSci;
use core::ffi::c_void;
use nvsci_sys as sys;

/// The NvSciSync attribute family: the `F` of [`Key`](crate::Key)s in
/// [`key`](crate::sync::key) and of [`SyncAttrList`].
#[derive(Debug)]
pub enum SyncFamily {}

/// An owned NvSciSync attribute list (unreconciled, reconciled or appended): an [`AttrList`] of
/// [`SyncFamily`], whose methods it has.
pub type SyncAttrList = AttrList<SyncFamily>;

/// An NvSciSync list owned by an object: readable, never freed by us. It dereferences to
/// [`SyncAttrList`].
pub type SyncAttrListRef<'a> = AttrListRef<'a, SyncFamily>;

impl Sealed for SyncFamily {}

impl crate::attr_list::RawFamily for SyncFamily {
    type RawList = sys::NvSciSyncAttrList;
    type RawModule = sys::NvSciSyncModule;
    type Pair = sys::NvSciSyncAttrKeyValuePair;
    type PairsIn = *const sys::NvSciSyncAttrKeyValuePair;

    fn pairs_in(pairs: *mut Self::Pair) -> Self::PairsIn {
        pairs.cast_const()
    }
}

/// NvSciSync documents no key as mandatory for a reconciliation (a missing signaler or waiter is
/// a conflict the library reports itself), so a refused reconciliation of NvSciSync lists names
/// no missing key.
impl Family for SyncFamily {
    const NAME: &'static str = "NvSciSync";
    type Module = SyncModule;
    type Attr<'a> = SyncAttr<'a>;
    const LIST_NAME: &'static str = "SyncAttrList";
    const RAW_LIST_NAME: &'static str = "NvSciSyncAttrList";
    const KEYS: &'static [(u32, &'static str)] = ALL_KEYS;

    fn library(module: &SyncModule) -> &NvSci {
        module.library()
    }

    fn raw_module(module: &SyncModule) -> sys::NvSciSyncModule {
        module.as_raw()
    }

    fn same_module(a: &SyncModule, b: &SyncModule) -> bool {
        std::sync::Arc::ptr_eq(&a.0, &b.0)
    }

    fn fns(module: &SyncModule) -> ListFns<Self> {
        let t = module.library().sync();
        ListFns {
            create: entry!(t.NvSciSyncAttrListCreate),
            free: entry!(t.NvSciSyncAttrListFree),
            set_attrs: entry!(t.NvSciSyncAttrListSetAttrs),
            slot_get_attrs: entry!(t.NvSciSyncAttrListSlotGetAttrs),
            slot_count: entry!(t.NvSciSyncAttrListGetSlotCount),
            is_reconciled: entry!(t.NvSciSyncAttrListIsReconciled),
            clone: entry!(t.NvSciSyncAttrListClone),
            append: entry!(t.NvSciSyncAttrListAppendUnreconciled),
            reconcile: entry!(t.NvSciSyncAttrListReconcile),
            debug_dump: entry!(t.NvSciSyncAttrListDebugDump),
            free_desc: entry!(t.NvSciSyncAttrListFreeDesc),
            ipc_export_unreconciled: entry!(t.NvSciSyncAttrListIpcExportUnreconciled),
            ipc_export_reconciled: entry!(t.NvSciSyncAttrListIpcExportReconciled),
            ipc_import_unreconciled: entry!(t.NvSciSyncAttrListIpcImportUnreconciled),
            ipc_import_reconciled: entry!(t.NvSciSyncAttrListIpcImportReconciled),
        }
    }

    fn pair(key: u32, value: *const c_void, len: usize) -> Self::Pair {
        sys::NvSciSyncAttrKeyValuePair { attrKey: key, value, len }
    }

    fn pair_value(pair: &Self::Pair) -> (*const c_void, usize) {
        (pair.value, pair.len)
    }
}
