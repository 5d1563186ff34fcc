//! NvSciSync attribute lists.

use super::keys::{SyncAttr, ALL_KEYS};
use super::SyncModule;
use crate::attr_list::attr_list_type;

attr_list_type! {
    family: "NvSciSync",
    family_tag: Sync,
    list: SyncAttrList,
    list_ref: SyncAttrListRef,
    module: SyncModule,
    attr: SyncAttr,
    table: sync,
    raw_list: NvSciSyncAttrList,
    pair: NvSciSyncAttrKeyValuePair { attrKey },
    fns: {
        create: NvSciSyncAttrListCreate,
        free: NvSciSyncAttrListFree,
        set_attrs: NvSciSyncAttrListSetAttrs,
        slot_get_attrs: NvSciSyncAttrListSlotGetAttrs,
        slot_count: NvSciSyncAttrListGetSlotCount,
        is_reconciled: NvSciSyncAttrListIsReconciled,
        clone: NvSciSyncAttrListClone,
        append: NvSciSyncAttrListAppendUnreconciled,
        reconcile: NvSciSyncAttrListReconcile,
        debug_dump: NvSciSyncAttrListDebugDump,
        free_desc: NvSciSyncAttrListFreeDesc,
    },
}

impl SyncAttrList {
    /// NvSciSync documents no key as mandatory in every list (a missing signaler or waiter is a
    /// conflict the library reports itself): always `None`.
    pub(crate) fn missing_mandatory(_lists: &[&SyncAttrList]) -> Option<&'static str> {
        None
    }
}
