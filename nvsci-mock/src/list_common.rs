//! What NvSciBuf and NvSciSync attribute-list records share: their slots, their flags and the
//! validation of reconcile/append inputs.

use crate::attrs::{Flags, Slot};
use crate::ffi::{bad, lock, slice_in, Res};
use crate::handle::{self, Record};
use std::sync::{Arc, Mutex};

/// An attribute-list record of either library.
pub(crate) trait ListRecord: Record {
    /// The module type the list belongs to.
    type Module;
    /// What kind of list this is.
    fn flags(&self) -> Flags;
    /// The owning module.
    fn module(&self) -> &Arc<Self::Module>;
    /// The slots.
    fn slots(&self) -> &Mutex<Vec<Slot>>;

    /// A copy of every slot.
    fn snapshot(&self) -> Vec<Slot> {
        lock(self.slots()).clone()
    }

    /// A copy of slot 0 (reconciled lists have exactly one slot).
    fn slot0(&self) -> Slot {
        lock(self.slots()).first().cloned().unwrap_or_default()
    }
}

/// Validates an input array of unreconciled lists: non-empty, no duplicates, same module, none
/// reconciled or a conflict list.
///
/// # Safety
/// `inputs` must be NULL or point to `count` handles, each NULL or a live list of this mock of
/// record type `R`.
pub(crate) unsafe fn unreconciled_inputs<'a, R: ListRecord + 'a, H>(
    inputs: *const *mut H,
    count: usize,
) -> Res<Vec<&'a R>> {
    // SAFETY: forwarded contract.
    let handles = unsafe { slice_in(inputs, count) }?;
    let mut lists: Vec<&R> = Vec::with_capacity(handles.len());
    // NvSciBufAttrListReconcile / NvSciBufAttrListAppendUnreconciled (nvscibuf.h) and their
    // NvSciSync twins (nvscisync.h) answer BadParameter when "an NvSciBufAttrList appears
    // multiple times in inputArray[]", "any of the NvSciBufAttrList in inputArray is
    // reconciled" and "not all the NvSciBufAttrLists in inputArray are bound to the same
    // NvSciBufModule".
    for (i, h) in handles.iter().enumerate() {
        if handles[..i].contains(h) {
            return bad();
        }
        // SAFETY: each element is NULL or a live list handle per the caller's contract.
        let l: &R = unsafe { handle::get::<R, H>(*h) }?;
        if l.flags().reconciled || l.flags().conflict {
            return bad();
        }
        if let Some(first) = lists.first() {
            if !Arc::ptr_eq(first.module(), l.module()) {
                return bad();
            }
        }
        lists.push(l);
    }
    Ok(lists)
}

/// Every slot of `lists`, in order.
pub(crate) fn gather<R: ListRecord>(lists: &[&R]) -> Vec<Slot> {
    lists.iter().flat_map(|l| l.snapshot()).collect()
}
