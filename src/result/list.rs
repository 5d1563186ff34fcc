//! The attribute-list entry points both libraries share (`NvSci{Buf,Sync}AttrList*`), called
//! through a family's table ([`ListFns`], built by [`Family::fns`]): one function per entry
//! point, generic over the family, named after the NvSciBuf and NvSciSync pair it calls.
//!
//! Contracts from nvscibuf.h and nvscisync.h (DRIVE OS 6.0), the same for both families: every
//! list and module handle passed is a live handle made by the library the table belongs to (it
//! aborts the process on one it did not make); a reconciled list is read-only; a list is not
//! modified by two threads at once.

use super::missing;
use crate::error::{check, Result};
use core::ffi::c_void;
use nvsci_sys as sys;

/// A C handle: a pointer that may be NULL.
pub trait Handle: Copy + PartialEq {
    /// The NULL handle.
    const NULL: Self;
    /// Whether this is the NULL handle.
    fn is_null(self) -> bool;
}

impl<T> Handle for *mut T {
    const NULL: Self = core::ptr::null_mut();
    fn is_null(self) -> bool {
        <*mut T>::is_null(self)
    }
}

/// The C types of an attribute-list family as its library's list functions take them: the part
/// of [`Family`](crate::attr_list::Family) this layer needs.
pub trait RawFamily: Sized + 'static {
    /// The C list handle ([`NvSciBufAttrList`](crate::sys::NvSciBufAttrList) or
    /// [`NvSciSyncAttrList`](crate::sys::NvSciSyncAttrList)).
    type RawList: Handle;
    /// The C module handle.
    type RawModule: Copy;
    /// The C key-value pair of the set and get functions.
    type Pair: Copy;
    /// The pair-array argument of the set function (`*mut` for NvSciBuf, `*const` for NvSciSync).
    type PairsIn: Copy;
    /// The pair-array argument of the set function for the pairs at `pairs`.
    fn pairs_in(pairs: *mut Self::Pair) -> Self::PairsIn;
}

/// One entry of a function table: the function, when the loaded library exports it, and its C
/// name.
#[derive(Clone, Copy)]
pub struct Entry<P> {
    pub(crate) f: Option<P>,
    pub(crate) name: &'static str,
}

impl<P: Copy> Entry<P> {
    /// The function, or [`Error::Unsupported`](crate::Error::Unsupported) naming it.
    fn get(self) -> Result<P> {
        self.f.ok_or_else(|| missing(self.name))
    }

    /// Calls the function through `call` and checks the status it returns: the error names the
    /// function ([`Error::Unsupported`](crate::Error::Unsupported) when the library lacks it).
    fn call(self, call: impl FnOnce(P) -> sys::NvSciError) -> Result<()> {
        check(self.name, call(self.get()?))
    }
}

/// An [`Entry`] of a function table's field, named after the field.
macro_rules! entry {
    ($table:ident . $f:ident) => {
        $crate::result::list::Entry { f: $table.$f, name: stringify!($f) }
    };
}
pub(crate) use entry;

/// The list functions of one family.
pub struct ListFns<F: RawFamily> {
    pub(crate) create: Entry<unsafe extern "C" fn(F::RawModule, *mut F::RawList) -> sys::NvSciError>,
    pub(crate) free: Entry<unsafe extern "C" fn(F::RawList)>,
    pub(crate) set_attrs: Entry<unsafe extern "C" fn(F::RawList, F::PairsIn, usize) -> sys::NvSciError>,
    pub(crate) slot_get_attrs:
        Entry<unsafe extern "C" fn(F::RawList, usize, *mut F::Pair, usize) -> sys::NvSciError>,
    pub(crate) slot_count: Entry<unsafe extern "C" fn(F::RawList) -> usize>,
    pub(crate) is_reconciled: Entry<unsafe extern "C" fn(F::RawList, *mut bool) -> sys::NvSciError>,
    pub(crate) clone: Entry<unsafe extern "C" fn(F::RawList, *mut F::RawList) -> sys::NvSciError>,
    pub(crate) append:
        Entry<unsafe extern "C" fn(*const F::RawList, usize, *mut F::RawList) -> sys::NvSciError>,
    pub(crate) reconcile: Entry<
        unsafe extern "C" fn(*const F::RawList, usize, *mut F::RawList, *mut F::RawList) -> sys::NvSciError,
    >,
    pub(crate) debug_dump:
        Entry<unsafe extern "C" fn(F::RawList, *mut *mut c_void, *mut usize) -> sys::NvSciError>,
    pub(crate) free_desc: Entry<unsafe extern "C" fn(*mut c_void)>,
    pub(crate) ipc_export_unreconciled: Entry<
        unsafe extern "C" fn(
            *const F::RawList,
            usize,
            sys::NvSciIpcEndpoint,
            *mut *mut c_void,
            *mut usize,
        ) -> sys::NvSciError,
    >,
    pub(crate) ipc_export_reconciled: Entry<
        unsafe extern "C" fn(
            F::RawList,
            sys::NvSciIpcEndpoint,
            *mut *mut c_void,
            *mut usize,
        ) -> sys::NvSciError,
    >,
    pub(crate) ipc_import_unreconciled: Entry<
        unsafe extern "C" fn(
            F::RawModule,
            sys::NvSciIpcEndpoint,
            *const c_void,
            usize,
            *mut F::RawList,
        ) -> sys::NvSciError,
    >,
    pub(crate) ipc_import_reconciled: Entry<ImportReconciled<F>>,
}

/// `NvSci{Buf,Sync}AttrListIpcImportReconciled`: module, endpoint, descriptor and its length,
/// the importer's unreconciled lists and their count, the imported list.
pub(crate) type ImportReconciled<F> = unsafe extern "C" fn(
    <F as RawFamily>::RawModule,
    sys::NvSciIpcEndpoint,
    *const c_void,
    usize,
    *const <F as RawFamily>::RawList,
    usize,
    *mut <F as RawFamily>::RawList,
) -> sys::NvSciError;

/// `NvSci{Buf,Sync}AttrListCreate`: a new, empty, unreconciled list of `module`.
///
/// # Safety
/// `module` is a live module of the library `t` belongs to. The list returned is the caller's
/// to free with [`free`].
pub(crate) unsafe fn create<F: RawFamily>(t: &ListFns<F>, module: F::RawModule) -> Result<F::RawList> {
    let mut raw = F::RawList::NULL;
    // SAFETY: `module` is live (caller contract); `raw` is a valid out-pointer.
    t.create.call(|f| unsafe { f(module, &mut raw) })?;
    Ok(raw)
}

/// `NvSci{Buf,Sync}AttrListFree`.
///
/// # Safety
/// `list` is a live list the caller owns (not one borrowed from an object), freed exactly once.
pub(crate) unsafe fn free<F: RawFamily>(t: &ListFns<F>, list: F::RawList) -> Result<()> {
    let f = t.free.get()?;
    // SAFETY: caller contract.
    unsafe { f(list) };
    Ok(())
}

/// `NvSci{Buf,Sync}AttrListSetAttrs`: sets every pair of `pairs`, all or nothing ("each key
/// may be set once per list"; a reconciled or appended list is read-only).
///
/// # Safety
/// `list` is a live list of the library; every pair's value points to `len` readable bytes of
/// the key's documented element type, alive during the call.
pub(crate) unsafe fn set_attrs<F: RawFamily>(
    t: &ListFns<F>,
    list: F::RawList,
    pairs: &mut [F::Pair],
) -> Result<()> {
    // SAFETY: caller contract; the pair array is readable for its length.
    t.set_attrs.call(|f| unsafe { f(list, F::pairs_in(pairs.as_mut_ptr()), pairs.len()) })
}

/// `NvSci{Buf,Sync}AttrListSlotGetAttrs`: fills the value pointer and length of every pair of
/// `pairs` (keys set) from slot `slot`; an unset key gives a length of 0. The values belong to
/// the list.
///
/// # Safety
/// `list` is a live list of the library; the values are read only while it lives unmodified.
pub(crate) unsafe fn slot_get_attrs<F: RawFamily>(
    t: &ListFns<F>,
    list: F::RawList,
    slot: usize,
    pairs: &mut [F::Pair],
) -> Result<()> {
    // SAFETY: caller contract; the pair array is writable for its length.
    t.slot_get_attrs.call(|f| unsafe { f(list, slot, pairs.as_mut_ptr(), pairs.len()) })
}

/// `NvSci{Buf,Sync}AttrListGetSlotCount`.
///
/// # Safety
/// `list` is a live list of the library.
pub(crate) unsafe fn slot_count<F: RawFamily>(t: &ListFns<F>, list: F::RawList) -> Result<usize> {
    let f = t.slot_count.get()?;
    // SAFETY: caller contract.
    Ok(unsafe { f(list) })
}

/// `NvSci{Buf,Sync}AttrListIsReconciled`.
///
/// # Safety
/// `list` is a live list of the library.
pub(crate) unsafe fn is_reconciled<F: RawFamily>(t: &ListFns<F>, list: F::RawList) -> Result<bool> {
    let mut out = false;
    // SAFETY: caller contract; `out` is a valid out-pointer.
    t.is_reconciled.call(|f| unsafe { f(list, &mut out) })?;
    Ok(out)
}

/// `NvSci{Buf,Sync}AttrListClone`: a deep copy ("BadParameter if the NvSciBufGeneralAttrKey_Types
/// key is not set on origAttrList", nvscibuf.h).
///
/// # Safety
/// `list` is a live list of the library, not freed during the call. The copy is the caller's to
/// free with [`free`].
pub(crate) unsafe fn clone<F: RawFamily>(t: &ListFns<F>, list: F::RawList) -> Result<F::RawList> {
    let mut raw = F::RawList::NULL;
    // SAFETY: caller contract; `raw` is a valid out-pointer.
    t.clone.call(|f| unsafe { f(list, &mut raw) })?;
    Ok(raw)
}

/// `NvSci{Buf,Sync}AttrListAppendUnreconciled`: one multi-slot list of `lists` ("BadParameter if
/// any list is reconciled, appears twice or is bound to another module").
///
/// # Safety
/// Every handle in `lists` is a live list of the library, none freed during the call. The list
/// returned is the caller's to free with [`free`].
pub(crate) unsafe fn append_unreconciled<F: RawFamily>(
    t: &ListFns<F>,
    lists: &[F::RawList],
) -> Result<F::RawList> {
    let mut raw = F::RawList::NULL;
    // SAFETY: caller contract; `lists` is readable for its length and `raw` a valid out-pointer.
    t.append.call(|f| unsafe { f(lists.as_ptr(), lists.len(), &mut raw) })?;
    Ok(raw)
}

/// `NvSci{Buf,Sync}AttrListReconcile`: the reconciled list of `lists`. On a failed
/// reconciliation the library may write a conflict list to `*conflict` (on any outcome the
/// caller takes over and frees a non-NULL `*conflict`).
///
/// # Safety
/// Every handle in `lists` is a live unreconciled list of the library, none freed during the
/// call; `conflict` holds NULL. The list returned is the caller's to free with [`free`].
pub(crate) unsafe fn reconcile<F: RawFamily>(
    t: &ListFns<F>,
    lists: &[F::RawList],
    conflict: &mut F::RawList,
) -> Result<F::RawList> {
    let mut raw = F::RawList::NULL;
    // SAFETY: caller contract; `lists` is readable for its length, both out-pointers valid.
    t.reconcile.call(|f| unsafe { f(lists.as_ptr(), lists.len(), &mut raw, conflict) })?;
    Ok(raw)
}

/// `NvSci{Buf,Sync}AttrListDebugDump`: the library's textual dump of `list`, in a buffer it
/// allocates: `(pointer, length)`.
///
/// # Safety
/// `list` is a live list of the library. The buffer returned is the caller's to free once with
/// [`free_desc`].
pub(crate) unsafe fn debug_dump<F: RawFamily>(
    t: &ListFns<F>,
    list: F::RawList,
) -> Result<(*mut c_void, usize)> {
    let (mut p, mut n) = (core::ptr::null_mut(), 0usize);
    // SAFETY: caller contract; `p` and `n` are valid out-pointers.
    t.debug_dump.call(|f| unsafe { f(list, &mut p, &mut n) })?;
    Ok((p, n))
}

/// `NvSci{Buf,Sync}AttrListFreeDesc`: frees a buffer a dump or list export returned.
///
/// # Safety
/// `desc` was returned by [`debug_dump`], [`ipc_export_unreconciled`] or
/// [`ipc_export_reconciled`] of the library and is freed once.
pub(crate) unsafe fn free_desc<F: RawFamily>(t: &ListFns<F>, desc: *mut c_void) -> Result<()> {
    let f = t.free_desc.get()?;
    // SAFETY: caller contract.
    unsafe { f(desc) };
    Ok(())
}

/// `NvSci{Buf,Sync}AttrListIpcExportUnreconciled`: a descriptor of unreconciled `lists` for the
/// peer of `ep`, in a buffer the library allocates: `(pointer, length)`.
///
/// # Safety
/// Every handle in `lists` is a live unreconciled list of the library; `ep` is an open endpoint.
/// The buffer returned is the caller's to free once with [`free_desc`].
pub(crate) unsafe fn ipc_export_unreconciled<F: RawFamily>(
    t: &ListFns<F>,
    lists: &[F::RawList],
    ep: sys::NvSciIpcEndpoint,
) -> Result<(*mut c_void, usize)> {
    let (mut p, mut n) = (core::ptr::null_mut(), 0usize);
    // SAFETY: caller contract; `lists` is readable for its length, `p` and `n` valid out-pointers.
    t.ipc_export_unreconciled.call(|f| unsafe { f(lists.as_ptr(), lists.len(), ep, &mut p, &mut n) })?;
    Ok((p, n))
}

/// `NvSci{Buf,Sync}AttrListIpcExportReconciled`: a descriptor of reconciled `list` for the peer
/// of `ep`, in a buffer the library allocates: `(pointer, length)`.
///
/// # Safety
/// `list` is a live reconciled list of the library; `ep` is an open endpoint. The buffer
/// returned is the caller's to free once with [`free_desc`].
pub(crate) unsafe fn ipc_export_reconciled<F: RawFamily>(
    t: &ListFns<F>,
    list: F::RawList,
    ep: sys::NvSciIpcEndpoint,
) -> Result<(*mut c_void, usize)> {
    let (mut p, mut n) = (core::ptr::null_mut(), 0usize);
    // SAFETY: caller contract; `p` and `n` are valid out-pointers.
    t.ipc_export_reconciled.call(|f| unsafe { f(list, ep, &mut p, &mut n) })?;
    Ok((p, n))
}

/// `NvSci{Buf,Sync}AttrListIpcImportUnreconciled`: the lists the peer of `ep` exported in
/// `desc`, as one read-only list of `module`.
///
/// # Safety
/// `module` is a live module of the library; `ep` is an open endpoint. The list returned is the
/// caller's to free with [`free`].
pub(crate) unsafe fn ipc_import_unreconciled<F: RawFamily>(
    t: &ListFns<F>,
    module: F::RawModule,
    ep: sys::NvSciIpcEndpoint,
    desc: &[u8],
) -> Result<F::RawList> {
    let (d, n) = (desc.as_ptr().cast(), desc.len());
    let mut raw = F::RawList::NULL;
    // SAFETY: caller contract; `desc` is readable for its length and `raw` a valid out-pointer.
    t.ipc_import_unreconciled.call(|f| unsafe { f(module, ep, d, n, &mut raw) })?;
    Ok(raw)
}

/// `NvSci{Buf,Sync}AttrListIpcImportReconciled`: the reconciled list the peer of `ep` exported
/// in `desc`, checked against this process's unreconciled `inputs` (none: nothing checked).
///
/// # Safety
/// `module` is a live module and every handle in `inputs` a live unreconciled list of the
/// library; `ep` is an open endpoint. The list returned is the caller's to free with [`free`].
pub(crate) unsafe fn ipc_import_reconciled<F: RawFamily>(
    t: &ListFns<F>,
    module: F::RawModule,
    ep: sys::NvSciIpcEndpoint,
    desc: &[u8],
    inputs: &[F::RawList],
) -> Result<F::RawList> {
    let ptr = if inputs.is_empty() { core::ptr::null() } else { inputs.as_ptr() };
    let (d, n) = (desc.as_ptr().cast(), desc.len());
    let mut raw = F::RawList::NULL;
    // SAFETY: caller contract; `desc` is readable for its length, `ptr` NULL or readable for
    // `inputs.len()` handles, `raw` a valid out-pointer.
    t.ipc_import_reconciled.call(|f| unsafe { f(module, ep, d, n, ptr, inputs.len(), &mut raw) })?;
    Ok(raw)
}
