//! NvSciBuf attribute lists: the NvSciBuf [`Family`] and its list types.

use super::keys::{key, BufAttr, ALL_KEYS};
use super::{BufModule, BufType};
use crate::attr::sealed_access::Sealed;
use crate::attr_list::{entry, AttrList, AttrListRef, Family, ListFns};
use crate::error::Culprit;
use crate::library::NvSci;
use core::ffi::c_void;
use nvsci_sys as sys;

/// The NvSciBuf attribute family: the `F` of [`Key`](crate::Key)s in [`key`] and of
/// [`BufAttrList`].
#[derive(Debug)]
pub enum BufFamily {}

/// An owned NvSciBuf attribute list (unreconciled, reconciled or appended): an [`AttrList`] of
/// [`BufFamily`], whose methods it has.
pub type BufAttrList = AttrList<BufFamily>;

/// An NvSciBuf list owned by an object: readable, never freed by us. It dereferences to
/// [`BufAttrList`].
pub type BufAttrListRef<'a> = AttrListRef<'a, BufFamily>;

impl Sealed for BufFamily {}

impl crate::attr_list::RawFamily for BufFamily {
    type RawList = sys::NvSciBufAttrList;
    type RawModule = sys::NvSciBufModule;
    type Pair = sys::NvSciBufAttrKeyValuePair;
    type PairsIn = *mut sys::NvSciBufAttrKeyValuePair;

    fn pairs_in(pairs: *mut Self::Pair) -> Self::PairsIn {
        pairs
    }
}

impl Family for BufFamily {
    const NAME: &'static str = "NvSciBuf";
    const GET_CHECKS_DIRECTION: bool = true;
    type Module = BufModule;
    type Attr<'a> = BufAttr<'a>;
    const LIST_NAME: &'static str = "BufAttrList";
    const RAW_LIST_NAME: &'static str = "NvSciBufAttrList";
    const KEYS: &'static [(u32, &'static str)] = ALL_KEYS;

    fn library(module: &BufModule) -> &NvSci {
        module.library()
    }

    fn raw_module(module: &BufModule) -> sys::NvSciBufModule {
        module.as_raw()
    }

    fn same_module(a: &BufModule, b: &BufModule) -> bool {
        std::sync::Arc::ptr_eq(&a.0, &b.0)
    }

    /// A slot without `Types`: "the NvSciBufGeneralAttrKey_Types key is not set on
    /// origAttrList" (NvSciBufAttrListClone, nvscibuf.h), and the same rule of
    /// NvSciBufAttrListAppendUnreconciled.
    fn lacks_types(list: &BufAttrList) -> bool {
        (0..list.slot_count().max(1)).any(|s| list.slot_get(s, key::TYPES).is_ok_and(|t| t.is_empty()))
    }

    /// A per-plane image key (`PlaneColorFormat`, `PlaneColorStd`, `PlaneBaseAddrAlign`,
    /// `PlaneWidth`, `PlaneHeight`, the paddings) whose element count in some slot is not the
    /// `PlaneCount` of that slot (or of the first slot that sets it): each holds one element per
    /// plane, and NvSciBufAttrListReconcile refuses "an attribute key ... set to an unsupported
    /// value considering the data type(s)" with `BadParameter` (nvscibuf.h).
    fn unsupported_value(lists: &[&BufAttrList]) -> Option<Culprit> {
        let slots = || lists.iter().flat_map(|l| (0..l.slot_count().max(1)).map(move |s| (*l, s)));
        let count =
            |l: &BufAttrList, s| l.slot_get(s, key::PLANE_COUNT).ok().and_then(|v| v.first().copied());
        let plane_count = slots().find_map(|(l, s)| count(l, s))?;
        for (l, s) in slots() {
            let plane_count = count(l, s).unwrap_or(plane_count);
            let lens = [
                (key::PLANE_COLOR_FORMAT.name(), l.slot_get(s, key::PLANE_COLOR_FORMAT).map(|v| v.len())),
                (key::PLANE_COLOR_STD.name(), l.slot_get(s, key::PLANE_COLOR_STD).map(|v| v.len())),
                (
                    key::PLANE_BASE_ADDR_ALIGN.name(),
                    l.slot_get(s, key::PLANE_BASE_ADDR_ALIGN).map(|v| v.len()),
                ),
                (key::PLANE_WIDTH.name(), l.slot_get(s, key::PLANE_WIDTH).map(|v| v.len())),
                (key::PLANE_HEIGHT.name(), l.slot_get(s, key::PLANE_HEIGHT).map(|v| v.len())),
                (key::TOP_PADDING.name(), l.slot_get(s, key::TOP_PADDING).map(|v| v.len())),
                (key::BOTTOM_PADDING.name(), l.slot_get(s, key::BOTTOM_PADDING).map(|v| v.len())),
                (key::LEFT_PADDING.name(), l.slot_get(s, key::LEFT_PADDING).map(|v| v.len())),
                (key::RIGHT_PADDING.name(), l.slot_get(s, key::RIGHT_PADDING).map(|v| v.len())),
            ];
            for (key, len) in lens {
                match len {
                    Ok(len) if len > 0 && len != plane_count as usize => {
                        return Some(Culprit::PlaneArrayLength { key, len, plane_count })
                    }
                    _ => {}
                }
            }
        }
        None
    }

    fn fns(module: &BufModule) -> ListFns<Self> {
        let t = module.library().buf();
        ListFns {
            create: entry!(t.NvSciBufAttrListCreate),
            free: entry!(t.NvSciBufAttrListFree),
            set_attrs: entry!(t.NvSciBufAttrListSetAttrs),
            slot_get_attrs: entry!(t.NvSciBufAttrListSlotGetAttrs),
            slot_count: entry!(t.NvSciBufAttrListGetSlotCount),
            is_reconciled: entry!(t.NvSciBufAttrListIsReconciled),
            clone: entry!(t.NvSciBufAttrListClone),
            append: entry!(t.NvSciBufAttrListAppendUnreconciled),
            reconcile: entry!(t.NvSciBufAttrListReconcile),
            debug_dump: entry!(t.NvSciBufAttrListDebugDump),
            free_desc: entry!(t.NvSciBufAttrListFreeDesc),
            ipc_export_unreconciled: entry!(t.NvSciBufAttrListIpcExportUnreconciled),
            ipc_export_reconciled: entry!(t.NvSciBufAttrListIpcExportReconciled),
            ipc_import_unreconciled: entry!(t.NvSciBufAttrListIpcImportUnreconciled),
            ipc_import_reconciled: entry!(t.NvSciBufAttrListIpcImportReconciled),
        }
    }

    fn pair(key: u32, value: *const c_void, len: usize) -> Self::Pair {
        sys::NvSciBufAttrKeyValuePair { key, value, len }
    }

    fn pair_value(pair: &Self::Pair) -> (*const c_void, usize) {
        (pair.value, pair.len)
    }

    /// The first key that `NvSciBufAttrListReconcile` documents as mandatory for the buffer
    /// types asked for (`Types`; RawBuffer `Size`; Image `Layout`, `ScanType`, `PlaneCount`,
    /// `PlaneColorFormat`, `PlaneWidth`, `PlaneHeight`) and that no slot of `lists` sets.
    fn missing_mandatory(lists: &[&BufAttrList]) -> Option<&'static str> {
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
            needed.push(key::RAW_SIZE.id());
        }
        if types.contains(&BufType::IMAGE) {
            needed.extend([
                key::IMAGE_LAYOUT.id(),
                key::SCAN_TYPE.id(),
                key::PLANE_COUNT.id(),
                key::PLANE_COLOR_FORMAT.id(),
                key::PLANE_WIDTH.id(),
                key::PLANE_HEIGHT.id(),
            ]);
        }
        needed.into_iter().find(|(k, _)| !set(*k)).map(|(_, name)| name)
    }
}
