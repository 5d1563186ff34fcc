//! Attribute-list export and import through an [`IpcEndpoint`], the same for both families (the
//! modules' `import_unreconciled` / `import_reconciled` call the imports here).

use super::desc::AttrListDescriptor;
use super::IpcEndpoint;
use crate::attr_list::{AttrList, Family, Handle, MAX_LISTS};
use crate::error::Result;
use nvsci_sys as sys;

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

impl<F: Family> AttrList<F> {
    /// Imports unreconciled lists exported by the peer of `ep` as one read-only list under
    /// `module`.
    pub(crate) fn import_unreconciled(
        module: &F::Module,
        ep: &IpcEndpoint,
        desc: &AttrListDescriptor,
    ) -> Result<Self> {
        let import = F::fns(module).ipc_import_unreconciled;
        let f = import.get()?;
        let mut raw = F::RawList::NULL;
        // SAFETY: the module is alive; `desc` is readable for its length; `raw` receives a list.
        let code =
            unsafe { f(F::raw_module(module), ep.as_raw(), desc.0.as_ptr().cast(), desc.0.len(), &mut raw) };
        if code != sys::NvSciError_Success {
            return Err(ep.import_error(import.name, "attribute list", "", None, code));
        }
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
        let import = F::fns(module).ipc_import_reconciled;
        let f = import.get()?;
        let raw_in = input_lists(inputs)?;
        let ptr = if raw_in.is_empty() { core::ptr::null() } else { raw_in.as_ptr() };
        let mut raw = F::RawList::NULL;
        // SAFETY: the module and every input list are alive; `desc` is readable for its length;
        // `raw` receives a list.
        let code = unsafe {
            f(
                F::raw_module(module),
                ep.as_raw(),
                desc.0.as_ptr().cast(),
                desc.0.len(),
                ptr,
                raw_in.len(),
                &mut raw,
            )
        };
        if code != sys::NvSciError_Success {
            return Err(ep.import_error(import.name, "reconciled attribute list", "", None, code));
        }
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
