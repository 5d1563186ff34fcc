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

impl BufAttrList {
    /// The first key that `NvSciBufAttrListReconcile` documents as mandatory for the buffer
    /// types asked for (`Types`; RawBuffer `Size`; Image `Layout`, `ScanType`, `PlaneCount`,
    /// `PlaneColorFormat`, `PlaneWidth`, `PlaneHeight`) and that no slot of `lists` sets: the
    /// likely reason of a reconciliation refused with `BadParameter` and no conflict list.
    pub(crate) fn missing_mandatory(lists: &[&BufAttrList]) -> Option<&'static str> {
        use super::keys::key;
        use super::BufType;
        let slots = || lists.iter().flat_map(|l| (0..l.slot_count().max(1)).map(move |s| (*l, s)));
        let set =
            |k: u32| slots().any(|(l, s)| l.raw_get(s, k).is_ok_and(|(v, len)| !v.is_null() && len > 0));
        let mut types = Vec::new();
        for (l, s) in slots() {
            types.extend(l.slot_get(s, key::TYPES).ok().into_iter().flatten());
        }
        if types.is_empty() {
            return Some(key::TYPES.name());
        }
        let mut needed = Vec::new();
        if types.contains(&BufType::RAW_BUFFER) {
            needed.push((key::RAW_SIZE.raw(), key::RAW_SIZE.name()));
        }
        if types.contains(&BufType::IMAGE) {
            needed.extend([
                (key::IMAGE_LAYOUT.raw(), key::IMAGE_LAYOUT.name()),
                (key::SCAN_TYPE.raw(), key::SCAN_TYPE.name()),
                (key::PLANE_COUNT.raw(), key::PLANE_COUNT.name()),
                (key::PLANE_COLOR_FORMAT.raw(), key::PLANE_COLOR_FORMAT.name()),
                (key::PLANE_WIDTH.raw(), key::PLANE_WIDTH.name()),
                (key::PLANE_HEIGHT.raw(), key::PLANE_HEIGHT.name()),
            ]);
        }
        needed.into_iter().find(|(k, _)| !set(*k)).map(|(_, name)| name)
    }
}
