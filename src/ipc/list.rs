//! Attribute-list export through an [`IpcEndpoint`], the same for both families (the imports
//! are methods of the modules).

use super::desc::AttrListDescriptor;
use super::IpcEndpoint;
use crate::attr_list::{AttrList, Family, MAX_LISTS};
use crate::error::Result;

impl<F: Family> AttrList<F> {
    /// Exports unreconciled lists (`NvSciBufAttrListIpcExportUnreconciled` or
    /// `NvSciSyncAttrListIpcExportUnreconciled`) for the peer of `ep`, which reconciles them with
    /// its own (for NvSciSync typically a waiter's list sent to the signaler, which reconciles and
    /// allocates).
    pub fn export_unreconciled(lists: &[&Self], ep: &IpcEndpoint) -> Result<AttrListDescriptor> {
        let (module, raw) = Self::gather(lists)?;
        let fns = F::fns(&module);
        let export = fns.ipc_export_unreconciled;
        let f = export.get()?;
        let (mut p, mut n) = (core::ptr::null_mut(), 0usize);
        // SAFETY: every list is alive; `p`/`n` receive a library-owned buffer.
        let code = unsafe { f(raw.as_ptr(), raw.len(), ep.as_raw(), &mut p, &mut n) };
        // SAFETY: on success `p` is the buffer just exported, freed once with its own function.
        unsafe { AttrListDescriptor::exported(ep, export.name, code, p, n, fns.free_desc.f) }
    }

    /// Exports this reconciled list (`NvSciBufAttrListIpcExportReconciled` or
    /// `NvSciSyncAttrListIpcExportReconciled`).
    pub fn export_reconciled(&self, ep: &IpcEndpoint) -> Result<AttrListDescriptor> {
        let fns = F::fns(&self.module);
        let export = fns.ipc_export_reconciled;
        let f = export.get()?;
        let (mut p, mut n) = (core::ptr::null_mut(), 0usize);
        // SAFETY: the list is alive; `p`/`n` receive a library-owned buffer.
        let code = unsafe { f(self.raw, ep.as_raw(), &mut p, &mut n) };
        // SAFETY: on success `p` is the buffer just exported, freed once with its own function.
        unsafe { AttrListDescriptor::exported(ep, export.name, code, p, n, fns.free_desc.f) }
    }
}

/// The raw handles of the importer's own lists (none is allowed: nothing is checked then).
pub(super) fn input_lists<F: Family>(
    inputs: &[&AttrList<F>],
) -> Result<heapless::Vec<F::RawList, { MAX_LISTS }>> {
    if inputs.is_empty() {
        return Ok(heapless::Vec::new());
    }
    Ok(AttrList::gather(inputs)?.1)
}
