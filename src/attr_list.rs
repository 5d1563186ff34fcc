//! The attribute-list type shared by NvSciBuf and NvSciSync: one generic [`AttrList`] over the
//! sealed [`Family`] trait, which supplies each library's handle types and list functions.

use crate::attr::{sealed_access::Sealed, AttrElem, AttrValue, Key};
use crate::error::{check, invalid, Culprit, Error, NvSciError, Result};
use crate::library::{Implementation, NvSci};
use crate::list_state::ListState;
use crate::result::list as nvlist;
use core::ffi::c_void;
use core::marker::PhantomData;
use nvsci_sys as sys;

/// An attribute family: NvSciBuf ([`BufFamily`](crate::buf::BufFamily)) or NvSciSync
/// ([`SyncFamily`](crate::sync::SyncFamily)), the type parameter of every [`Key`] and
/// [`AttrList`]. Key numbers overlap between the two libraries; with the family in the types, a
/// key of one family given to a list of the other does not compile.
///
/// Sealed: the two families are its only implementations.
pub trait Family: Sealed + RawFamily {
    /// The library's name: `"NvSciBuf"` or `"NvSciSync"`.
    const NAME: &'static str;
    /// The module lists are created under ([`BufModule`](crate::buf::BufModule) or
    /// [`SyncModule`](crate::sync::SyncModule)).
    type Module: Clone;
    /// The attribute values a list is set with ([`BufAttr`](crate::buf::BufAttr) or
    /// [`SyncAttr`](crate::sync::SyncAttr)).
    type Attr<'a>: AttrValue;
    /// The Rust name of the owned list (for `Debug`).
    #[doc(hidden)]
    const LIST_NAME: &'static str;
    /// The C name of [`RawList`](Self::RawList) (for errors).
    #[doc(hidden)]
    const RAW_LIST_NAME: &'static str;
    /// Every key this crate binds, with its C name (used to name conflicting keys).
    #[doc(hidden)]
    const KEYS: &'static [(u32, &'static str)];
    /// The loaded implementation `module` belongs to.
    #[doc(hidden)]
    fn library(module: &Self::Module) -> &NvSci;
    /// The C handle of `module`.
    #[doc(hidden)]
    fn raw_module(module: &Self::Module) -> Self::RawModule;
    /// The list functions of the implementation `module` belongs to, with their C names.
    #[doc(hidden)]
    fn fns(module: &Self::Module) -> ListFns<Self>;
    /// A C key-value pair.
    #[doc(hidden)]
    fn pair(key: u32, value: *const c_void, len: usize) -> Self::Pair;
    /// The value pointer and byte length of a pair the library filled.
    #[doc(hidden)]
    fn pair_value(pair: &Self::Pair) -> (*const c_void, usize);
    /// The first key the library documents as mandatory for a reconciliation that no slot of
    /// `lists` sets: the likely reason of a reconciliation refused with `BadParameter` and no
    /// conflict list. `None` when the family documents no such key.
    #[doc(hidden)]
    fn missing_mandatory(_lists: &[&AttrList<Self>]) -> Option<&'static str> {
        None
    }
    /// Whether two modules are one (lists of different modules may not be combined).
    #[doc(hidden)]
    fn same_module(a: &Self::Module, b: &Self::Module) -> bool;
    /// Whether a slot of `list` lacks a key the family requires of every list it clones or
    /// appends (NvSciBuf: `Types`).
    #[doc(hidden)]
    fn lacks_types(_list: &AttrList<Self>) -> bool {
        false
    }
    /// A value of `lists` the family documents as unsupported for a reconciliation (NvSciBuf: a
    /// plane array whose length is not `PlaneCount`), the likely reason of a reconciliation
    /// refused with `BadParameter` once the lists themselves and the mandatory keys are in order.
    #[doc(hidden)]
    fn unsupported_value(_lists: &[&AttrList<Self>]) -> Option<Culprit> {
        None
    }
    /// Whether the family's get functions refuse keys of the other direction (NvSciBuf: "attrList
    /// is unreconciled and any of the NvSciBufAttrKey(s) specified in NvSciBufAttrKeyValuePair is
    /// output only", and the reverse for reconciled lists; nvscisync.h documents no such rule).
    #[doc(hidden)]
    const GET_CHECKS_DIRECTION: bool = false;
}

pub(crate) use crate::result::list::entry;
pub use crate::result::list::{Handle, ListFns, RawFamily};

/// An owned attribute list (unreconciled, reconciled or appended) of family `F`:
/// [`BufAttrList`](crate::buf::BufAttrList) or [`SyncAttrList`](crate::sync::SyncAttrList).
pub struct AttrList<F: Family> {
    pub(crate) raw: F::RawList,
    pub(crate) module: F::Module,
    // False for lists borrowed from an object: those are never freed by us.
    owned: bool,
    // True for copies of lists another library made (`from_foreign`, `from_raw_owned`): their
    // module in the library is the maker's, which `module` need not be.
    adopted: bool,
}

// SAFETY: an attribute list is a heap object of the library with no thread affinity, so the
// handle may move between threads (with its module, which is `Send` for both families). It is
// not `Sync` (the raw handle is a pointer): setting needs `&mut`, and the library does not
// document concurrent reads and writes of one list.
unsafe impl<F: Family> Send for AttrList<F> where F::Module: Send {}

impl<F: Family> Drop for AttrList<F> {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // SAFETY: `raw` is a list we own (borrowed lists have `owned == false`), freed exactly
        // once.
        let _ = unsafe { nvlist::free(&F::fns(&self.module), self.raw) };
    }
}

impl<F: Family> std::fmt::Debug for AttrList<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(F::LIST_NAME)
            .field("reconciled", &self.is_reconciled().ok())
            .field("slots", &self.slot_count())
            .finish()
    }
}

impl<F: Family> AttrList<F> {
    pub(crate) fn new(module: &F::Module) -> Result<Self> {
        // SAFETY: the module is alive (we hold it); the new list is freed once, by `drop`.
        let raw = unsafe { nvlist::create(&F::fns(module), F::raw_module(module)) }?;
        Ok(Self::wrap(raw, module))
    }

    /// Takes ownership of `raw`, a list created under `module`.
    pub(crate) fn wrap(raw: F::RawList, module: &F::Module) -> Self {
        Self { raw, module: module.clone(), owned: true, adopted: false }
    }

    /// Marks the list as a copy of a list another library made (or not).
    fn adopted(mut self, adopted: bool) -> Self {
        self.adopted = adopted;
        self
    }

    /// Sets attributes. Each key may be set once per list; the whole call fails if any value is
    /// rejected. Allocates nothing: the C pair array lives on the stack.
    pub fn set(&mut self, attrs: &[F::Attr<'_>]) -> Result<&mut Self> {
        let mut pairs: heapless::Vec<F::Pair, MAX_PAIRS> = heapless::Vec::new();
        for a in attrs {
            let (key, value, len) = a.as_pair()?;
            pairs
                .push(F::pair(key, value, len))
                .map_err(|_| Error::Capacity { what: "attributes per set() call", max: MAX_PAIRS })?;
        }
        if pairs.is_empty() {
            return Ok(self);
        }
        // SAFETY: every pair points into `attrs`, which outlives the call; the lengths were
        // computed from the element types; the list is owned and alive.
        match unsafe { nvlist::set_attrs(&F::fns(&self.module), self.raw, &mut pairs) } {
            Ok(()) => Ok(self),
            Err(Error::NvSci { code, .. }) => Err(self.culprit(attrs, code.0)),
            Err(e) => Err(e),
        }
    }

    /// Names the attribute a failed `set` refused: the same pairs are set one at a time, in
    /// order, on a copy of this list, and the first one refused is reported with its value and
    /// the library's code. Only on the error path; the list itself is unchanged (the library's
    /// set is all-or-nothing).
    fn culprit(&self, attrs: &[F::Attr<'_>], code: sys::NvSciError) -> Error {
        let fns = F::fns(&self.module);
        let function = fns.set_attrs.name;
        let whole = Error::NvSci { function, code: NvSciError(code) };
        // Reconciled (and appended) lists are read-only.
        if self.is_reconciled().unwrap_or(false) || self.slot_count() > 1 {
            return Error::AttrRefused {
                function,
                key: attrs.first().map_or("(none)", |a| a.key_name()),
                value: "the list is reconciled or appended, and so read-only".into(),
                code: NvSciError(code),
            };
        }
        // A key already set in this list (a copy would accept it again: cloning unlocks).
        for a in attrs {
            let Ok((key, _, _)) = a.as_pair() else { continue };
            if matches!(self.raw_get(0, key), Ok((_, len)) if len > 0) {
                return Error::AttrRefused {
                    function,
                    key: a.key_name(),
                    value: format!("{a:?}: the key is already set in this list"),
                    code: NvSciError(code),
                };
            }
        }
        // A copy of the list to replay the call on (a list without Types cannot be cloned: then
        // it holds nothing type-specific, and an empty list stands in for it).
        let Ok(probe) = self.try_clone().or_else(|_| Self::new(&self.module)) else { return whole };
        for a in attrs {
            let Ok((key, value, len)) = a.as_pair() else { continue };
            let mut pair = [F::pair(key, value, len)];
            // SAFETY: the pair points into `attrs`, alive for the call; `probe` is an owned, live
            // list.
            match unsafe { nvlist::set_attrs(&fns, probe.raw, &mut pair) } {
                Ok(()) => {}
                Err(Error::NvSci { code, .. }) => {
                    return Error::AttrRefused { function, key: a.key_name(), value: format!("{a:?}"), code }
                }
                Err(_) => return whole,
            }
        }
        // Each pair alone is accepted: the combination was refused (e.g. a key twice).
        Error::AttrRefused {
            function,
            key: "(the combination of the keys set together)",
            value: format!("{} attributes, each accepted alone", attrs.len()),
            code: NvSciError(code),
        }
    }

    /// Reads a key from slot 0. An unset key gives an empty vector.
    pub fn get<T: AttrElem, const N: usize>(&self, key: Key<F, T, N>) -> Result<heapless::Vec<T, N>> {
        self.slot_get(0, key)
    }

    /// Reads a single-valued key from slot 0; `None` when unset.
    pub fn get_one<T: AttrElem>(&self, key: Key<F, T, 1>) -> Result<Option<T>> {
        Ok(self.get(key)?.first().copied())
    }

    /// Reads a key from one slot of an appended (multi-slot) list.
    pub fn slot_get<T: AttrElem, const N: usize>(
        &self,
        slot: usize,
        key: Key<F, T, N>,
    ) -> Result<heapless::Vec<T, N>> {
        let (value, len) = self.raw_get(slot, key.raw()).map_err(|e| match e {
            // With a slot in range and a key this crate binds, the documented reason left is the
            // key's direction: "attrList is reconciled and any of the NvSciBufAttrKey(s) specified
            // in NvSciBufAttrKeyValuePair is input only" / "attrList is unreconciled and any of the
            // NvSciBufAttrKey(s) specified in NvSciBufAttrKeyValuePair is output only"
            // (NvSciBufAttrListGetAttrs / NvSciBufAttrListSlotGetAttrs, nvscibuf.h).
            Error::NvSci { function, code }
                if code == NvSciError::BAD_PARAMETER && F::GET_CHECKS_DIRECTION =>
            {
                match self.is_reconciled() {
                    Ok(false) => {
                        Error::Refused { function, code, culprit: Culprit::OutputOnlyKey { key: key.name() } }
                    }
                    Ok(true) => {
                        Error::Refused { function, code, culprit: Culprit::InputOnlyKey { key: key.name() } }
                    }
                    Err(_) => Error::NvSci { function, code },
                }
            }
            other => other,
        })?;
        // SAFETY: the library returned (value, len) for this key; the value points into this
        // list, which lives for the duration of the copy.
        unsafe { crate::attr::decode(key, value, len) }
    }

    /// The value pointer and byte length the library returns for `key` in `slot`.
    pub(crate) fn raw_get(&self, slot: usize, key: u32) -> Result<(*const c_void, usize)> {
        let mut pair = F::pair(key, core::ptr::null(), 0);
        // SAFETY: one valid pair with its key set; the library fills value and len, which point
        // into this list and are read while it lives.
        unsafe {
            nvlist::slot_get_attrs(&F::fns(&self.module), self.raw, slot, core::slice::from_mut(&mut pair))
        }
        .map_err(|e| {
            // With one valid pair of a key this crate binds, the documented reason left is the
            // slot: "slotIndex >= slot count of NvSciBufAttrList" (NvSciBufAttrListSlotGetAttrs,
            // nvscibuf.h); "slotIndex is not a valid slot in attrList"
            // (NvSciSyncAttrListSlotGetAttrs, nvscisync.h).
            let slot_count = self.slot_count();
            match e {
                Error::NvSci { function, code }
                    if code == NvSciError::BAD_PARAMETER && slot >= slot_count =>
                {
                    Error::Refused { function, code, culprit: Culprit::SlotOutOfRange { slot, slot_count } }
                }
                other => other,
            }
        })?;
        Ok(F::pair_value(&pair))
    }

    /// Number of slots (1 for a created list; the sum for an appended one).
    pub fn slot_count(&self) -> usize {
        // SAFETY: the list is alive.
        unsafe { nvlist::slot_count(&F::fns(&self.module), self.raw) }.unwrap_or(0)
    }

    /// Whether the list is the output of a reconciliation.
    pub fn is_reconciled(&self) -> Result<bool> {
        // SAFETY: the list is alive (we hold it) and belongs to our module's library.
        Ok(unsafe { Self::state_of(&self.module, self.raw) }? == ListState::Reconciled)
    }

    /// The state of `raw`, asked of the library.
    ///
    /// # Safety
    /// `raw` must be a live list of the implementation `module` uses.
    unsafe fn state_of(module: &F::Module, raw: F::RawList) -> Result<ListState> {
        // SAFETY: `raw` is live (caller contract).
        let out = unsafe { nvlist::is_reconciled(&F::fns(module), raw) }?;
        Ok(if out { ListState::Reconciled } else { ListState::Unreconciled })
    }

    /// Adopts an attribute list that another library in this process made (a list a camera or
    /// accelerator library created and filled with its requirements, say): the returned list is
    /// the crate's own copy (`NvSciBufAttrListClone` or `NvSciSyncAttrListClone`), and the
    /// caller keeps `raw` and frees it (`NvSciBufAttrListFree` or `NvSciSyncAttrListFree`)
    /// whenever it likes, before or after the copy is dropped.
    ///
    /// A list the crate created and lent to the other library to fill ([`as_raw`](Self::as_raw))
    /// needs no adoption: read it after the library returns.
    ///
    /// `expected` is the state the caller relies on. It is checked against the library's answer
    /// (`NvSciBufAttrListIsReconciled` or `NvSciSyncAttrListIsReconciled`) before anything is
    /// created: a mismatch is [`Error::ListStateMismatch`]. A copy of a reconciled list is
    /// reconciled (read-only; objects are allocated from it); a copy of an unreconciled list is
    /// unreconciled and writable, as with [`try_clone`](Self::try_clone). A NULL `raw` is
    /// [`Error::NullHandle`]. The library may refuse to copy a list (NvSciBuf copies only lists
    /// whose every slot has `Types`): its error names the clone function.
    ///
    /// `module` is the module the copy is used with on the crate's side (it keeps the loaded
    /// library open): preferably the module `raw` was created under, because lists of different
    /// modules may not be reconciled together (the mock refuses it).
    ///
    /// # Safety
    ///
    /// * `raw` is NULL or a live attribute list of family `F` made by the same loaded
    ///   implementation `module` uses (the same instance of NVIDIA's library, or the mock when
    ///   `module` is the mock's): NvSci aborts the process on a handle it did not make.
    /// * Nothing frees or modifies `raw` while this call runs.
    /// * The module `raw` was created under stays open while the returned list lives, unless it
    ///   is `module` (which the list keeps open): NvSci does not document that lists outlive
    ///   their module.
    ///
    /// After the call the two lists are independent: each side frees its own.
    pub unsafe fn from_foreign(module: &F::Module, raw: F::RawList, expected: ListState) -> Result<Self> {
        if raw.is_null() {
            return Err(Error::NullHandle { what: F::RAW_LIST_NAME });
        }
        // SAFETY: `raw` is a live list of `module`'s implementation (caller contract).
        let found = unsafe { Self::state_of(module, raw) }?;
        if found != expected {
            return Err(Error::ListStateMismatch { list: F::RAW_LIST_NAME, expected, found });
        }
        // SAFETY: `raw` is live and not freed during the call (caller contract); the copy is a
        // new list that we own.
        let copy = unsafe { nvlist::clone(&F::fns(module), raw) }?;
        Ok(Self::wrap(copy, module).adopted(true))
    }

    /// Takes ownership of an attribute list handle given away by its maker (one another library
    /// returned for the caller to free, say), without copying it: the returned list frees it
    /// (`NvSciBufAttrListFree` or `NvSciSyncAttrListFree`) when dropped.
    ///
    /// Ownership passes in every case: when the list is not in the `expected` state
    /// ([`Error::ListStateMismatch`]) or the library cannot tell, the list is freed before the
    /// error is returned. A NULL `raw` is [`Error::NullHandle`] and frees nothing. Use
    /// [`from_foreign`](Self::from_foreign) for a list its maker keeps.
    ///
    /// # Safety
    ///
    /// * `raw` is NULL or a live attribute list of family `F` made by the same loaded
    ///   implementation `module` uses, which nobody else frees, modifies or uses after this call
    ///   (it is freed exactly once, by the crate).
    /// * The module `raw` was created under stays open while the returned list lives, unless it
    ///   is `module`.
    pub unsafe fn from_raw_owned(module: &F::Module, raw: F::RawList, expected: ListState) -> Result<Self> {
        if raw.is_null() {
            return Err(Error::NullHandle { what: F::RAW_LIST_NAME });
        }
        // Owned from here: freed on every path below.
        let list = Self::wrap(raw, module).adopted(true);
        // SAFETY: `raw` is a live list of `module`'s implementation (caller contract).
        let found = unsafe { Self::state_of(module, list.raw) }?;
        if found != expected {
            return Err(Error::ListStateMismatch { list: F::RAW_LIST_NAME, expected, found });
        }
        Ok(list)
    }

    /// A deep copy of this list.
    ///
    /// NvSciBuf copies only lists whose every slot sets `Types`: another list is refused with
    /// [`Error::Refused`] and [`Culprit::ListWithoutTypes`].
    pub fn try_clone(&self) -> Result<Self> {
        // SAFETY: the list is alive; the copy is a new list that we own.
        let raw = unsafe { nvlist::clone(&F::fns(&self.module), self.raw) }.map_err(|e| match e {
            // "the NvSciBufGeneralAttrKey_Types key is not set on origAttrList"
            // (NvSciBufAttrListClone, nvscibuf.h).
            Error::NvSci { function, code } if code == NvSciError::BAD_PARAMETER && F::lacks_types(self) => {
                Error::Refused { function, code, culprit: Culprit::ListWithoutTypes { index: 0 } }
            }
            other => other,
        })?;
        Ok(Self::wrap(raw, &self.module).adopted(self.adopted))
    }

    /// Concatenates unreconciled lists into one multi-slot list. A list that is reconciled,
    /// given twice, of another module or (NvSciBuf) without `Types` is refused with
    /// [`Error::Refused`] naming it ([`Culprit`]).
    pub fn append(lists: &[&Self]) -> Result<Self> {
        let (module, raws) = Self::gather(lists)?;
        // SAFETY: every handle in `raws` is alive (borrowed from `lists`); the new list is ours.
        let raw = unsafe { nvlist::append_unreconciled(&F::fns(&module), &raws) }.map_err(|e| {
            Self::explain_refusal(e, lists, |lists| {
                lists.iter().position(|l| F::lacks_types(l)).map(|index| Culprit::ListWithoutTypes { index })
            })
        })?;
        Ok(Self::wrap(raw, &module).adopted(lists.iter().any(|l| l.adopted)))
    }

    /// Reconciles unreconciled lists into one reconciled list.
    ///
    /// On a conflict the error is [`Error::ReconcileConflict`], naming the keys the library
    /// reported and carrying its dump of the conflict list. A list that is reconciled, given twice
    /// or of another module, or (NvSciBuf) a plane array whose length is not `PlaneCount`, is
    /// refused by the library with `BadParameter`, reported as [`Error::Refused`] naming it
    /// ([`Culprit`]). The outcome is logged at debug level.
    pub fn reconcile(lists: &[&Self]) -> Result<Self> {
        let (module, raws) = Self::gather(lists)?;
        let fns = F::fns(&module);
        let mut conflict = F::RawList::NULL;
        // SAFETY: every input handle is alive (borrowed from `lists`) and `conflict` is NULL; the
        // reconciled list and the conflict list, if any, are ours (`reconcile_status` frees the
        // latter).
        let status = unsafe { nvlist::reconcile(&fns, &raws, &mut conflict) };
        let out = *status.as_ref().unwrap_or(&F::RawList::NULL);
        Self::reconcile_status(fns.reconcile.name, status.map(drop), conflict, &module, lists.len())
            .map_err(|e| Self::explain_reconcile(e, lists))?;
        let list = Self::wrap(out, &module).adopted(lists.iter().any(|l| l.adopted));
        if log::log_enabled!(log::Level::Debug) {
            log::debug!(
                "{} reconciled {} lists: {}",
                F::NAME,
                lists.len(),
                list.debug_dump().unwrap_or_else(|e| e.to_string())
            );
        }
        Ok(list)
    }

    /// A `BadParameter` refusal of a reconciliation, explained: [`Error::Refused`] naming the
    /// list that is reconciled, given twice or of another module, or [`Error::AttrRefused`]
    /// naming the mandatory key none of `lists` sets, or [`Error::Refused`] naming a value the
    /// family documents as unsupported (other errors, and refusals none of these explain,
    /// unchanged).
    pub(crate) fn explain_reconcile(e: Error, lists: &[&Self]) -> Error {
        let e = Self::explain_refusal(e, lists, |_| None);
        match e {
            Error::NvSci { function, code } if code == NvSciError::BAD_PARAMETER => {
                if let Some(key) = F::missing_mandatory(lists) {
                    return Error::AttrRefused {
                        function,
                        key,
                        value: format!(
                            "mandatory for reconciliation and set in none of the {} lists",
                            lists.len()
                        ),
                        code,
                    };
                }
                match F::unsupported_value(lists) {
                    Some(culprit) => Error::Refused { function, code, culprit },
                    None => Error::NvSci { function, code },
                }
            }
            other => other,
        }
    }

    /// A `BadParameter` refusal of a call taking several lists (reconcile, append), explained
    /// by the first documented rule of those calls that `lists` break: "any of the lists in
    /// inputArray is reconciled", "an attribute list appears multiple times in inputArray",
    /// "not all the lists in inputArray are bound to the same module"
    /// (NvSciBufAttrListReconcile / NvSciBufAttrListAppendUnreconciled in nvscibuf.h,
    /// NvSciSyncAttrListReconcile / NvSciSyncAttrListAppendUnreconciled in nvscisync.h), then
    /// by `more`. Reads the lists only after the library has refused them. Module identity is
    /// judged only between lists this crate created: an adopted list's module is its maker's.
    pub(crate) fn explain_refusal(
        e: Error,
        lists: &[&Self],
        more: impl FnOnce(&[&Self]) -> Option<Culprit>,
    ) -> Error {
        let Error::NvSci { function, code } = e else { return e };
        if code != NvSciError::BAD_PARAMETER {
            return e;
        }
        let reconciled = lists.iter().position(|l| l.is_reconciled().unwrap_or(false));
        let twice = lists.iter().enumerate().find_map(|(second, l)| {
            lists[..second].iter().position(|k| k.raw == l.raw).map(|first| (first, second))
        });
        let other_module = lists.first().filter(|first| !first.adopted).and_then(|first| {
            lists.iter().position(|l| !l.adopted && !F::same_module(&l.module, &first.module))
        });
        let culprit = if let Some(index) = reconciled {
            Some(Culprit::AlreadyReconciled { index })
        } else if let Some((first, second)) = twice {
            Some(Culprit::SameListTwice { first, second })
        } else if let Some(index) = other_module {
            Some(Culprit::ListsOfTwoModules { index })
        } else {
            more(lists)
        };
        match culprit {
            Some(culprit) => Error::Refused { function, code, culprit },
            None => e,
        }
    }

    /// The outcome of a reconciling call (`function`: the list reconcile, or the
    /// reconcile-and-allocate of the object type) from its `status` and the conflict list it
    /// returned, which is taken over and freed here on every path. A failed reconciliation is
    /// [`Error::ReconcileConflict`] naming the keys set in the conflict list, with the library's
    /// dump of it.
    pub(crate) fn reconcile_status(
        function: &'static str,
        status: Result<()>,
        conflict: F::RawList,
        module: &F::Module,
        lists: usize,
    ) -> Result<()> {
        // Owned from here, so it is freed on every path.
        let conflict = (!conflict.is_null()).then(|| Self::wrap(conflict, module));
        let code = match status {
            Ok(()) => sys::NvSciError_Success,
            Err(Error::NvSci { code, .. }) => code.0,
            Err(e) => return Err(e),
        };
        if code == sys::NvSciError_ReconciliationFailed {
            let (keys, dump) = match &conflict {
                Some(c) => (c.set_keys(), c.debug_dump().unwrap_or_default()),
                None => (Vec::new(), String::new()),
            };
            log::debug!("{function} of {lists} {} lists failed, conflicting keys {keys:?}", F::NAME);
            return Err(Error::ReconcileConflict { function, keys, dump });
        }
        if code == sys::NvSciError_NotSupported {
            // A conflict list handed back with `NotSupported` names the refused key and value.
            if let Some(c) = &conflict {
                if let Some(&key) = c.set_keys().first() {
                    let value = c.debug_dump().unwrap_or_default().trim_end().to_owned();
                    return Err(Error::AttrRefused { function, key, value, code: NvSciError(code) });
                }
            }
            if F::library(module).implementation() == Implementation::Mock {
                return Err(Error::Unsupported {
                    what: function,
                    reason: crate::error::UnsupportedReason::MockLayout,
                });
            }
        }
        check(function, code)
    }

    /// Names of the bound keys that are set in any slot of this list (at most
    /// [`MAX_CONFLICT_KEYS`](crate::error::MAX_CONFLICT_KEYS)).
    pub fn set_keys(&self) -> Vec<&'static str> {
        let mut keys = Vec::new();
        for slot in 0..self.slot_count().max(1) {
            for &(k, name) in F::KEYS {
                if keys.len() >= crate::error::MAX_CONFLICT_KEYS {
                    return keys;
                }
                if let Ok((v, len)) = self.raw_get(slot, k) {
                    if !v.is_null() && len > 0 && !keys.contains(&name) {
                        keys.push(name);
                    }
                }
            }
        }
        keys
    }

    /// The library's textual dump of this list.
    pub fn debug_dump(&self) -> Result<String> {
        let fns = F::fns(&self.module);
        if fns.free_desc.f.is_none() {
            return Err(crate::result::missing(fns.free_desc.name));
        }
        // SAFETY: the list is alive; the buffer is freed below.
        let (buf, len) = unsafe { nvlist::debug_dump(&fns, self.raw) }?;
        if buf.is_null() {
            return Ok(String::new());
        }
        // SAFETY: the library returned `len` readable bytes at `buf`; they are copied and then
        // released with the documented deallocator.
        let text = unsafe {
            let bytes = core::slice::from_raw_parts(buf as *const u8, len);
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            let s = String::from_utf8_lossy(&bytes[..end]).into_owned();
            let _ = nvlist::free_desc(&fns, buf);
            s
        };
        Ok(text)
    }

    /// The module this list belongs to.
    pub fn module(&self) -> &F::Module {
        &self.module
    }

    /// The raw handle (valid while `self` lives; do not free it).
    pub fn as_raw(&self) -> F::RawList {
        self.raw
    }

    /// The module of `lists` and their raw handles, checked: at least one list, all of one
    /// implementation, at most `MAX_LISTS`.
    pub(crate) fn gather(lists: &[&Self]) -> Result<(F::Module, heapless::Vec<F::RawList, MAX_LISTS>)> {
        let first =
            lists.first().ok_or_else(|| invalid("lists", "at least one attribute list is required"))?;
        let lib = &F::library(&first.module).0;
        let mut raws = heapless::Vec::new();
        for l in lists {
            if !std::sync::Arc::ptr_eq(&F::library(&l.module).0, lib) {
                return Err(invalid("lists", "lists come from different NvSci implementations"));
            }
            raws.push(l.raw).map_err(|_| Error::Capacity { what: "lists per call", max: MAX_LISTS })?;
        }
        Ok((first.module.clone(), raws))
    }
}

/// A list of family `F` owned by an object: readable, never freed by us.
/// [`BufAttrListRef`](crate::buf::BufAttrListRef) or
/// [`SyncAttrListRef`](crate::sync::SyncAttrListRef).
pub struct AttrListRef<'a, F: Family> {
    list: AttrList<F>,
    _owner: PhantomData<&'a ()>,
}

impl<F: Family> AttrListRef<'_, F> {
    /// # Safety
    /// `raw` must stay valid for the returned lifetime and must not be freed by the caller.
    pub(crate) unsafe fn new(raw: F::RawList, module: &F::Module) -> Self {
        Self {
            list: AttrList { raw, module: module.clone(), owned: false, adopted: false },
            _owner: PhantomData,
        }
    }
}

impl<F: Family> core::ops::Deref for AttrListRef<'_, F> {
    type Target = AttrList<F>;
    fn deref(&self) -> &AttrList<F> {
        &self.list
    }
}

/// Most attributes one `set` call accepts.
pub const MAX_PAIRS: usize = 32;
/// Most lists one reconcile or append call accepts: enough for a stream of
/// [`MAX_CONSUMERS`](crate::pipeline::MAX_CONSUMERS) consumers, whose sync objects reconcile the
/// producer's list, one list per consumer and the ring's own CPU waiter's.
pub const MAX_LISTS: usize = 32;
const _: () = assert!(MAX_LISTS >= crate::pipeline::MAX_CONSUMERS + 2);
