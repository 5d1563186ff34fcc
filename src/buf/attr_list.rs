//! NvSciBuf attribute lists.

use super::keys::{BufAttr, ALL_KEYS};
use super::BufModule;
use crate::attr_list::attr_list_type;

attr_list_type! {
    family: "NvSciBuf",
    family_tag: Buf,
    list: BufAttrList,
    list_ref: BufAttrListRef,
    module: BufModule,
    attr: BufAttr,
    table: buf,
    raw_list: NvSciBufAttrList,
    pair: NvSciBufAttrKeyValuePair { key },
    fns: {
        create: NvSciBufAttrListCreate,
        free: NvSciBufAttrListFree,
        set_attrs: NvSciBufAttrListSetAttrs,
        slot_get_attrs: NvSciBufAttrListSlotGetAttrs,
        slot_count: NvSciBufAttrListGetSlotCount,
        is_reconciled: NvSciBufAttrListIsReconciled,
        clone: NvSciBufAttrListClone,
        append: NvSciBufAttrListAppendUnreconciled,
        reconcile: NvSciBufAttrListReconcile,
        debug_dump: NvSciBufAttrListDebugDump,
        free_desc: NvSciBufAttrListFreeDesc,
    },
}
