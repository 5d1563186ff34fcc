//! The attribute-list type shared by NvSciBuf and NvSciSync, generated once per family.

/// Defines an owned attribute-list type, its borrowed twin and their methods for one family.
/// Why the mock answers `NotSupported` to a reconciliation: what it lays out.
pub(crate) const MOCK_LAYOUTS: &str =
    "the mock lays out raw buffers and pitch-linear, progressive images without \
    padding only; block-linear, interlaced and padded images and tensors are laid out by NVIDIA's \
    library alone (see docs/mock.md)";

macro_rules! attr_list_type {
    (
        family: $family:literal,
        family_tag: $family_tag:ident,
        list: $List:ident,
        list_ref: $ListRef:ident,
        module: $Module:ident,
        attr: $Attr:ident,
        table: $table:ident,
        raw_list: $RawList:ident,
        pair: $Pair:ident { $keyfield:ident },
        fns: {
            create: $Create:ident,
            free: $Free:ident,
            set_attrs: $SetAttrs:ident,
            slot_get_attrs: $SlotGetAttrs:ident,
            slot_count: $GetSlotCount:ident,
            is_reconciled: $IsReconciled:ident,
            clone: $Clone:ident,
            append: $Append:ident,
            reconcile: $Reconcile:ident,
            debug_dump: $DebugDump:ident,
            free_desc: $FreeDesc:ident $(,)?
        } $(,)?
    ) => {
        #[doc = concat!("An owned ", $family, " attribute list (unreconciled, reconciled or appended).")]
        pub struct $List {
            pub(crate) raw: nvsci_sys::$RawList,
            pub(crate) module: $Module,
            // False for lists borrowed from an object: those are never freed by us.
            owned: bool,
        }

        // SAFETY: an attribute list is a heap object of the library with no thread affinity, so
        // the handle may move between threads. It is not `Sync`: setting needs `&mut`, and the
        // library does not document concurrent reads and writes of one list.
        unsafe impl Send for $List {}

        impl Drop for $List {
            fn drop(&mut self) {
                if !self.owned {
                    return;
                }
                if let Some(free) = self.module.0.lib.$table().$Free {
                    // SAFETY: `raw` is a list we own (borrowed lists have `owned == false`),
                    // freed exactly once.
                    unsafe { free(self.raw) };
                }
            }
        }

        impl std::fmt::Debug for $List {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($List))
                    .field("reconciled", &self.is_reconciled().ok())
                    .field("slots", &self.slot_count())
                    .finish()
            }
        }

        impl $List {
            pub(crate) fn new(module: &$Module) -> $crate::Result<Self> {
                let create = $crate::library::nvfn!(module.0.lib.$table(), $Create);
                let mut raw = core::ptr::null_mut();
                // SAFETY: the module is alive (we hold it) and `raw` is a valid out-pointer.
                $crate::error::check(stringify!($Create), unsafe { create(module.0.raw, &mut raw) })?;
                Ok(Self { raw, module: module.clone(), owned: true })
            }

            /// Takes ownership of `raw`, a list created under `module`.
            pub(crate) fn wrap(raw: nvsci_sys::$RawList, module: &$Module) -> Self {
                Self { raw, module: module.clone(), owned: true }
            }

            /// Sets attributes. Each key may be set once per list; the whole call fails if any
            /// value is rejected. Allocates nothing: the C pair array lives on the stack.
            pub fn set(&mut self, attrs: &[$Attr<'_>]) -> $crate::Result<&mut Self> {
                let set = $crate::library::nvfn!(self.module.0.lib.$table(), $SetAttrs);
                let mut pairs: heapless::Vec<nvsci_sys::$Pair, { $crate::attr_list::MAX_PAIRS }> =
                    heapless::Vec::new();
                for a in attrs {
                    let (key, value, len) = a.as_pair()?;
                    pairs.push(nvsci_sys::$Pair { $keyfield: key, value, len }).map_err(|_| {
                        $crate::Error::Capacity {
                            what: "attributes per set() call",
                            max: $crate::attr_list::MAX_PAIRS,
                        }
                    })?;
                }
                if pairs.is_empty() {
                    return Ok(self);
                }
                // SAFETY: every pair points into `attrs`, which outlives the call; the lengths
                // were computed from the element types; the list is owned and alive.
                let code = unsafe { set(self.raw, pairs.as_mut_ptr(), pairs.len()) };
                if code != nvsci_sys::NvSciError_Success {
                    return Err(self.culprit(attrs, code));
                }
                Ok(self)
            }

            /// Names the attribute a failed `set` refused: the same pairs are set one at a time, in
            /// order, on a copy of this list, and the first one refused is reported with its
            /// value and the library's code. Only on the error path; the list itself is unchanged
            /// (the library's set is all-or-nothing).
            fn culprit(&self, attrs: &[$Attr<'_>], code: nvsci_sys::NvSciError) -> $crate::Error {
                let whole = $crate::Error::NvSci { function: stringify!($SetAttrs), code: $crate::NvSciError(code) };
                // Reconciled (and appended) lists are read-only.
                if self.is_reconciled().unwrap_or(false) || self.slot_count() > 1 {
                    return $crate::Error::AttrRefused {
                        function: stringify!($SetAttrs),
                        key: attrs.first().map_or("(none)", |a| a.key_name()),
                        value: "the list is reconciled or appended, and so read-only".into(),
                        code: $crate::NvSciError(code),
                    };
                }
                // A key already set in this list (a copy would accept it again: cloning unlocks).
                for a in attrs {
                    let Ok((key, _, _)) = a.as_pair() else { continue };
                    if matches!(self.raw_get(0, key), Ok((_, len)) if len > 0) {
                        return $crate::Error::AttrRefused {
                            function: stringify!($SetAttrs),
                            key: a.key_name(),
                            value: format!("{a:?}: the key is already set in this list"),
                            code: $crate::NvSciError(code),
                        };
                    }
                }
                // A copy of the list to replay the call on (a list without Types cannot be cloned:
                // then it holds nothing type-specific, and an empty list stands in for it).
                let Ok(probe) = self.try_clone().or_else(|_| Self::new(&self.module)) else { return whole };
                let Some(set) = self.module.0.lib.$table().$SetAttrs else { return whole };
                for a in attrs {
                    let Ok((key, value, len)) = a.as_pair() else { continue };
                    let mut pair = [nvsci_sys::$Pair { $keyfield: key, value, len }];
                    // SAFETY: the pair points into `attrs`, alive for the call; `probe` is an
                    // owned, live list.
                    let one = unsafe { set(probe.raw, pair.as_mut_ptr(), 1) };
                    if one != nvsci_sys::NvSciError_Success {
                        return $crate::Error::AttrRefused {
                            function: stringify!($SetAttrs),
                            key: a.key_name(),
                            value: format!("{a:?}"),
                            code: $crate::NvSciError(one),
                        };
                    }
                }
                // Each pair alone is accepted: the combination was refused (e.g. a key twice).
                $crate::Error::AttrRefused {
                    function: stringify!($SetAttrs),
                    key: "(the combination of the keys set together)",
                    value: format!("{} attributes, each accepted alone", attrs.len()),
                    code: $crate::NvSciError(code),
                }
            }

            /// Reads a key from slot 0. An unset key gives an empty vector.
            pub fn get<T: $crate::AttrElem, const N: usize>(
                &self,
                key: $crate::Key<T, N>,
            ) -> $crate::Result<heapless::Vec<T, N>> {
                self.slot_get(0, key)
            }

            /// Reads a single-valued key from slot 0; `None` when unset.
            pub fn get_one<T: $crate::AttrElem>(&self, key: $crate::Key<T, 1>) -> $crate::Result<Option<T>> {
                Ok(self.get(key)?.first().copied())
            }

            /// Reads a key from one slot of an appended (multi-slot) list.
            pub fn slot_get<T: $crate::AttrElem, const N: usize>(
                &self,
                slot: usize,
                key: $crate::Key<T, N>,
            ) -> $crate::Result<heapless::Vec<T, N>> {
                if key.family() != $crate::attr::Family::$family_tag {
                    return Err($crate::error::invalid(
                        "key",
                        format!("{} is not a {} key", key.name(), $family),
                    ));
                }
                let (value, len) = self.raw_get(slot, key.raw())?;
                // SAFETY: the library returned (value, len) for this key; the value points into
                // this list, which lives for the duration of the copy.
                unsafe { $crate::attr::decode(key, value, len) }
            }

            fn raw_get(&self, slot: usize, key: u32) -> $crate::Result<(*const core::ffi::c_void, usize)> {
                let get = $crate::library::nvfn!(self.module.0.lib.$table(), $SlotGetAttrs);
                let mut pair = nvsci_sys::$Pair { $keyfield: key, value: core::ptr::null(), len: 0 };
                // SAFETY: one valid pair with its key set; the library fills value and len.
                $crate::error::check(stringify!($SlotGetAttrs), unsafe {
                    get(self.raw, slot, &mut pair, 1)
                })?;
                Ok((pair.value, pair.len))
            }

            /// Number of slots (1 for a created list; the sum for an appended one).
            pub fn slot_count(&self) -> usize {
                match self.module.0.lib.$table().$GetSlotCount {
                    // SAFETY: the list is alive.
                    Some(f) => unsafe { f(self.raw) },
                    None => 0,
                }
            }

            /// Whether the list is the output of a reconciliation.
            pub fn is_reconciled(&self) -> $crate::Result<bool> {
                // SAFETY: the list is alive (we hold it) and belongs to our module's library.
                Ok(unsafe { Self::state_of(&self.module, self.raw) }? == $crate::ListState::Reconciled)
            }

            /// The state of `raw`, asked of the library.
            ///
            /// # Safety
            /// `raw` must be a live list of the implementation `module` uses.
            unsafe fn state_of(module: &$Module, raw: nvsci_sys::$RawList) -> $crate::Result<$crate::ListState> {
                let f = $crate::library::nvfn!(module.0.lib.$table(), $IsReconciled);
                let mut out = false;
                // SAFETY: `raw` is live (caller contract) and `out` is a valid out-pointer.
                $crate::error::check(stringify!($IsReconciled), unsafe { f(raw, &mut out) })?;
                Ok(if out { $crate::ListState::Reconciled } else { $crate::ListState::Unreconciled })
            }

            #[doc = concat!(
                "Adopts an attribute list that another library in this process made (a list a \
                camera or accelerator library created and filled with its requirements, say): \
                the returned list is the crate's own copy (`", stringify!($Clone), "`), and the \
                caller keeps `raw` and frees it (`", stringify!($Free), "`) whenever it likes, \
                before or after the copy is dropped.\n\n\
                A list the crate created and lent to the other library to fill \
                ([`as_raw`](Self::as_raw)) needs no adoption: read it after the library returns.\n\n\
                `expected` is the state the caller relies on. It is checked against the \
                library's answer (`", stringify!($IsReconciled), "`) before anything is \
                created: a mismatch is [`Error::ListStateMismatch`](crate::Error::ListStateMismatch). \
                A copy of a reconciled list is reconciled (read-only; objects are allocated from \
                it); a copy of an unreconciled list is unreconciled and writable, as with \
                [`try_clone`](Self::try_clone). A NULL `raw` is \
                [`Error::NullHandle`](crate::Error::NullHandle). The library may refuse to copy \
                a list (NvSciBuf copies only lists whose every slot has `Types`): its error names \
                `", stringify!($Clone), "`.\n\n\
                `module` is the module the copy is used with on the crate's side (it keeps the \
                loaded library open): preferably the module `raw` was created under, because \
                lists of different modules may not be reconciled together (the mock refuses it).\n\n\
                # Safety\n\n\
                * `raw` is NULL or a live ", $family, " attribute list made by the same loaded \
                  implementation `module` uses (the same instance of NVIDIA's library, or the mock \
                  when `module` is the mock's): NvSci aborts the process on a handle it did not \
                  make.\n\
                * Nothing frees or modifies `raw` while this call runs.\n\
                * The module `raw` was created under stays open while the returned list lives, \
                  unless it is `module` (which the list keeps open): NvSci does not document that \
                  lists outlive their module.\n\n\
                After the call the two lists are independent: each side frees its own."
            )]
            pub unsafe fn from_foreign(
                module: &$Module,
                raw: nvsci_sys::$RawList,
                expected: $crate::ListState,
            ) -> $crate::Result<Self> {
                if raw.is_null() {
                    return Err($crate::Error::NullHandle { what: stringify!($RawList) });
                }
                // SAFETY: `raw` is a live list of `module`'s implementation (caller contract).
                let found = unsafe { Self::state_of(module, raw) }?;
                if found != expected {
                    return Err($crate::Error::ListStateMismatch { list: stringify!($RawList), expected, found });
                }
                let f = $crate::library::nvfn!(module.0.lib.$table(), $Clone);
                let mut copy = core::ptr::null_mut();
                // SAFETY: `raw` is live and not freed during the call (caller contract); `copy`
                // receives a new list that we own.
                $crate::error::check(stringify!($Clone), unsafe { f(raw, &mut copy) })?;
                Ok(Self::wrap(copy, module))
            }

            #[doc = concat!(
                "Takes ownership of an attribute list handle given away by its maker (one another \
                library returned for the caller to free, say), without copying it: the returned \
                list frees it (`", stringify!($Free), "`) when dropped.\n\n\
                Ownership passes in every case: when the list is not in the `expected` state \
                ([`Error::ListStateMismatch`](crate::Error::ListStateMismatch)) or the library \
                cannot tell, the list is freed before the error is returned. A NULL `raw` is \
                [`Error::NullHandle`](crate::Error::NullHandle) and frees nothing. Use \
                [`from_foreign`](Self::from_foreign) for a list its maker keeps.\n\n\
                # Safety\n\n\
                * `raw` is NULL or a live ", $family, " attribute list made by the same loaded \
                  implementation `module` uses, which nobody else frees, modifies or uses after \
                  this call (it is freed exactly once, by the crate).\n\
                * The module `raw` was created under stays open while the returned list lives, \
                  unless it is `module`."
            )]
            pub unsafe fn from_raw_owned(
                module: &$Module,
                raw: nvsci_sys::$RawList,
                expected: $crate::ListState,
            ) -> $crate::Result<Self> {
                if raw.is_null() {
                    return Err($crate::Error::NullHandle { what: stringify!($RawList) });
                }
                // Owned from here: freed on every path below.
                let list = Self::wrap(raw, module);
                // SAFETY: `raw` is a live list of `module`'s implementation (caller contract).
                let found = unsafe { Self::state_of(module, list.raw) }?;
                if found != expected {
                    return Err($crate::Error::ListStateMismatch { list: stringify!($RawList), expected, found });
                }
                Ok(list)
            }

            /// A deep copy of this list.
            pub fn try_clone(&self) -> $crate::Result<Self> {
                let f = $crate::library::nvfn!(self.module.0.lib.$table(), $Clone);
                let mut raw = core::ptr::null_mut();
                // SAFETY: the list is alive; `raw` receives a new owned list.
                $crate::error::check(stringify!($Clone), unsafe { f(self.raw, &mut raw) })?;
                Ok(Self::wrap(raw, &self.module))
            }

            /// Concatenates unreconciled lists into one multi-slot list.
            pub fn append(lists: &[&$List]) -> $crate::Result<Self> {
                let (module, raws) = Self::gather(lists)?;
                let f = $crate::library::nvfn!(module.0.lib.$table(), $Append);
                let mut raw = core::ptr::null_mut();
                // SAFETY: every handle in `raws` is alive (borrowed from `lists`).
                $crate::error::check(stringify!($Append), unsafe {
                    f(raws.as_ptr(), raws.len(), &mut raw)
                })?;
                Ok(Self::wrap(raw, &module))
            }

            /// Reconciles unreconciled lists into one reconciled list.
            ///
            /// On a conflict the error is [`Error::ReconcileConflict`](crate::Error::ReconcileConflict),
            /// naming the keys the library reported and carrying its dump of the conflict list.
            /// The outcome is logged at debug level.
            pub fn reconcile(lists: &[&$List]) -> $crate::Result<Self> {
                let (module, raws) = Self::gather(lists)?;
                let f = $crate::library::nvfn!(module.0.lib.$table(), $Reconcile);
                let mut out = core::ptr::null_mut();
                let mut conflict = core::ptr::null_mut();
                // SAFETY: every input handle is alive; both out-pointers are valid.
                let code = unsafe { f(raws.as_ptr(), raws.len(), &mut out, &mut conflict) };
                Self::reconcile_status(stringify!($Reconcile), code, conflict, &module, lists.len())
                    .map_err(|e| Self::name_missing_key(e, lists))?;
                let list = Self::wrap(out, &module);
                if log::log_enabled!(log::Level::Debug) {
                    log::debug!(
                        "{} reconciled {} lists: {}",
                        $family,
                        lists.len(),
                        list.debug_dump().unwrap_or_else(|e| e.to_string())
                    );
                }
                Ok(list)
            }

            /// The outcome of a reconciling call (`function`: the list reconcile, or the
            /// reconcile-and-allocate of the object type) from its status `code` and the
            /// conflict list it returned, which is taken over and freed here on every path. A
            /// failed reconciliation is [`Error::ReconcileConflict`](crate::Error::ReconcileConflict)
            /// naming the keys set in the conflict list, with the library's dump of it.
            /// A `BadParameter` refusal of a reconciliation, turned into
            /// [`Error::AttrRefused`](crate::Error::AttrRefused) naming the mandatory key none of
            /// `lists` sets (other errors unchanged).
            pub(crate) fn name_missing_key(e: $crate::Error, lists: &[&$List]) -> $crate::Error {
                match e {
                    $crate::Error::NvSci { function, code } if code.0 == nvsci_sys::NvSciError_BadParameter => {
                        match Self::missing_mandatory(lists) {
                            Some(key) => $crate::Error::AttrRefused {
                                function,
                                key,
                                value: format!(
                                    "mandatory for reconciliation and set in none of the {} lists",
                                    lists.len()
                                ),
                                code,
                            },
                            None => $crate::Error::NvSci { function, code },
                        }
                    }
                    other => other,
                }
            }

            pub(crate) fn reconcile_status(
                function: &'static str,
                code: nvsci_sys::NvSciError,
                conflict: nvsci_sys::$RawList,
                module: &$Module,
                lists: usize,
            ) -> $crate::Result<()> {
                // Owned from here, so it is freed on every path.
                let conflict = (!conflict.is_null()).then(|| Self::wrap(conflict, module));
                if code == nvsci_sys::NvSciError_ReconciliationFailed {
                    let (keys, dump) = match &conflict {
                        Some(c) => (c.set_keys(), c.debug_dump().unwrap_or_default()),
                        None => (Vec::new(), String::new()),
                    };
                    log::debug!("{function} of {lists} {} lists failed, conflicting keys {keys:?}", $family);
                    return Err($crate::Error::ReconcileConflict { function, keys, dump });
                }
                if code == nvsci_sys::NvSciError_NotSupported
                    && module.0.lib.implementation() == $crate::Implementation::Mock
                {
                    return Err($crate::Error::Unsupported { what: function, reason: $crate::attr_list::MOCK_LAYOUTS });
                }
                $crate::error::check(function, code)
            }

            /// Names of the bound keys that are set in any slot of this list (at most
            /// [`MAX_CONFLICT_KEYS`](crate::MAX_CONFLICT_KEYS)).
            pub fn set_keys(&self) -> Vec<&'static str> {
                let mut keys = Vec::new();
                for slot in 0..self.slot_count().max(1) {
                    for &(k, name) in ALL_KEYS {
                        if keys.len() >= $crate::MAX_CONFLICT_KEYS {
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
            pub fn debug_dump(&self) -> $crate::Result<String> {
                let dump = $crate::library::nvfn!(self.module.0.lib.$table(), $DebugDump);
                let free = $crate::library::nvfn!(self.module.0.lib.$table(), $FreeDesc);
                let mut buf = core::ptr::null_mut();
                let mut len = 0usize;
                // SAFETY: the list is alive; buf and len are valid out-pointers.
                $crate::error::check(stringify!($DebugDump), unsafe { dump(self.raw, &mut buf, &mut len) })?;
                if buf.is_null() {
                    return Ok(String::new());
                }
                // SAFETY: the library returned `len` readable bytes at `buf`; they are copied and
                // then released with the documented deallocator.
                let text = unsafe {
                    let bytes = core::slice::from_raw_parts(buf as *const u8, len);
                    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                    let s = String::from_utf8_lossy(&bytes[..end]).into_owned();
                    free(buf);
                    s
                };
                Ok(text)
            }

            /// The module this list belongs to.
            pub fn module(&self) -> &$Module {
                &self.module
            }

            /// The raw handle (valid while `self` lives; do not free it).
            pub fn as_raw(&self) -> nvsci_sys::$RawList {
                self.raw
            }

            /// The module of `lists` and their raw handles, checked: at least one list, all of
            /// one implementation, at most `MAX_LISTS`.
            pub(crate) fn gather(
                lists: &[&$List],
            ) -> $crate::Result<($Module, heapless::Vec<nvsci_sys::$RawList, { $crate::attr_list::MAX_LISTS }>)> {
                let first = lists
                    .first()
                    .ok_or_else(|| $crate::error::invalid("lists", "at least one attribute list is required"))?;
                let mut raws = heapless::Vec::new();
                for l in lists {
                    if !std::sync::Arc::ptr_eq(&l.module.0.lib.0, &first.module.0.lib.0) {
                        return Err($crate::error::invalid("lists", "lists come from different NvSci implementations"));
                    }
                    raws.push(l.raw).map_err(|_| $crate::Error::Capacity {
                        what: "lists per call",
                        max: $crate::attr_list::MAX_LISTS,
                    })?;
                }
                Ok((first.module.clone(), raws))
            }
        }

        #[doc = concat!("A ", $family, " list owned by an object: readable, never freed by us.")]
        pub struct $ListRef<'a> {
            list: $List,
            _owner: core::marker::PhantomData<&'a ()>,
        }

        impl $ListRef<'_> {
            /// # Safety
            /// `raw` must stay valid for the returned lifetime and must not be freed by the caller.
            pub(crate) unsafe fn new(raw: nvsci_sys::$RawList, module: &$Module) -> Self {
                Self {
                    list: $List { raw, module: module.clone(), owned: false },
                    _owner: core::marker::PhantomData,
                }
            }
        }

        impl core::ops::Deref for $ListRef<'_> {
            type Target = $List;
            fn deref(&self) -> &$List {
                &self.list
            }
        }
    };
}
pub(crate) use attr_list_type;

/// Whether an attribute list is the output of a reconciliation: the state a caller relies on
/// when it adopts a list made by another library (`BufAttrList::from_foreign`,
/// `SyncAttrList::from_foreign` and their `from_raw_owned` twins).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ListState {
    /// Not reconciled: one user's requirements (or several, appended), to be reconciled.
    Unreconciled,
    /// The output of a reconciliation: read-only, the list objects are allocated from.
    Reconciled,
}

impl core::fmt::Display for ListState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ListState::Unreconciled => "unreconciled",
            ListState::Reconciled => "reconciled",
        })
    }
}

/// Most attributes one `set` call accepts.
pub const MAX_PAIRS: usize = 32;
/// Most lists one reconcile or append call accepts.
pub const MAX_LISTS: usize = 16;
