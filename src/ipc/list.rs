//! Attribute-list export and import through an [`IpcEndpoint`], the same for both families (the
//! modules' `import_unreconciled` / `import_reconciled` call the imports here).

use super::desc::AttrListDescriptor;
use super::IpcEndpoint;
use crate::attr_list::{AttrList, Family, MAX_LISTS};
use crate::error::Result;
use crate::result::list as nvlist;

impl<F: Family> AttrList<F> {
    /// Exports unreconciled lists (`NvSciBufAttrListIpcExportUnreconciled` or
    /// `NvSciSyncAttrListIpcExportUnreconciled`) for the peer of `ep`, which reconciles them with
    /// its own (for NvSciSync typically a waiter's list sent to the signaler, which reconciles and
    /// allocates).
    pub fn export_unreconciled(lists: &[&Self], ep: &IpcEndpoint) -> Result<AttrListDescriptor> {
        let (module, raw) = Self::gather(lists)?;
        let fns = F::fns(&module);
        // SAFETY: every list is alive and the endpoint open; the buffer is freed below.
        let exported = unsafe { nvlist::ipc_export_unreconciled(&fns, &raw, ep.as_raw()) };
        let free = |p| {
            // SAFETY: `p` is the buffer just exported, freed once (by `exported`).
            let _ = unsafe { nvlist::free_desc(&fns, p) };
        };
        // SAFETY: on success the buffer is the one just exported, freed once with its own function.
        unsafe { AttrListDescriptor::exported(ep, exported, free) }
    }

    /// Exports this reconciled list (`NvSciBufAttrListIpcExportReconciled` or
    /// `NvSciSyncAttrListIpcExportReconciled`).
    pub fn export_reconciled(&self, ep: &IpcEndpoint) -> Result<AttrListDescriptor> {
        let fns = F::fns(&self.module);
        // SAFETY: the list is alive and the endpoint open; the buffer is freed below.
        let exported = unsafe { nvlist::ipc_export_reconciled(&fns, self.raw, ep.as_raw()) };
        let free = |p| {
            // SAFETY: `p` is the buffer just exported, freed once (by `exported`).
            let _ = unsafe { nvlist::free_desc(&fns, p) };
        };
        // SAFETY: on success the buffer is the one just exported, freed once with its own function.
        unsafe { AttrListDescriptor::exported(ep, exported, free) }
    }
}

impl<F: Family> AttrList<F> {
    /// Imports unreconciled lists exported by the peer of `ep` as one read-only list under
    /// `module`.
    pub(crate) fn import_unreconciled(
        module: &F::Module,
        ep: &IpcEndpoint,
        desc: &AttrListDescriptor,
    ) -> Result<Self> {
        // SAFETY: the module is alive and the endpoint open; the new list is ours.
        let raw = unsafe {
            nvlist::ipc_import_unreconciled(&F::fns(module), F::raw_module(module), ep.as_raw(), &desc.0)
        }
        .map_err(|e| ep.import_failure("attribute list", "", None, e))?;
        Ok(Self::wrap(raw, module))
    }

    /// Imports a reconciled list exported by the peer of `ep`, checked against this process's
    /// unreconciled `inputs`.
    pub(crate) fn import_reconciled(
        module: &F::Module,
        ep: &IpcEndpoint,
        desc: &AttrListDescriptor,
        inputs: &[&Self],
    ) -> Result<Self> {
        let raw_in = input_lists(inputs)?;
        // SAFETY: the module and every input list are alive and the endpoint open; the new list
        // is ours.
        let raw = unsafe {
            nvlist::ipc_import_reconciled(
                &F::fns(module),
                F::raw_module(module),
                ep.as_raw(),
                &desc.0,
                &raw_in,
            )
        }
        .map_err(|e| ep.import_failure("reconciled attribute list", "", None, e))?;
        Ok(Self::wrap(raw, module))
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
