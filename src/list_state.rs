//! The state of an attribute list (unreconciled or reconciled), shared by the lists and the
//! errors that name a mismatch.

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
