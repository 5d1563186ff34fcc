//! NvSciSync export and import through an [`IpcEndpoint`]: lists, objects and fences.

use super::desc::{AttrListDescriptor, FenceDescriptor, SyncObjDescriptor};
use super::endpoint::timeout_micros;
use super::IpcEndpoint;
use crate::error::{check, invalid, Error, Result};
use crate::library::nvfn;
use crate::sync::{Fence, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci_sys as sys;
use std::time::Duration;

fn perm_name(p: SyncPerm) -> &'static str {
    match p {
        SyncPerm::WaitOnly => "wait permission",
        SyncPerm::SignalOnly => "signal permission",
        SyncPerm::WaitSignal => "wait and signal permission",
    }
}

impl SyncModule {
    /// Imports unreconciled lists exported by the peer of `ep` (one read-only list holding all
    /// of their slots).
    pub fn import_unreconciled(&self, ep: &IpcEndpoint, desc: &AttrListDescriptor) -> Result<SyncAttrList> {
        SyncAttrList::import_unreconciled(self, ep, desc)
    }

    /// Imports a reconciled list exported by the peer, checked against this process's
    /// unreconciled `inputs`.
    pub fn import_reconciled(
        &self,
        ep: &IpcEndpoint,
        desc: &AttrListDescriptor,
        inputs: &[&SyncAttrList],
    ) -> Result<SyncAttrList> {
        SyncAttrList::import_reconciled(self, ep, desc, inputs)
    }

    /// Imports a sync object and its reconciled list exported together with
    /// [`SyncObj::export_with_attr_list`], checking the list against `inputs`.
    pub fn import_attr_list_and_obj(
        &self,
        ep: &IpcEndpoint,
        desc: &AttrListDescriptor,
        inputs: &[&SyncAttrList],
        perm: SyncPerm,
        timeout: Option<Duration>,
    ) -> Result<SyncObj> {
        let f = nvfn!(self.0.lib.sync(), NvSciSyncIpcImportAttrListAndObj);
        let raw_in = super::list::input_lists(inputs)?;
        let ptr = if raw_in.is_empty() { core::ptr::null() } else { raw_in.as_ptr() };
        let mut raw = core::ptr::null_mut();
        // SAFETY: as for `import_reconciled`; `raw` receives a new object.
        let code = unsafe {
            f(
                self.0.raw,
                ep.as_raw(),
                desc.0.as_ptr().cast(),
                desc.0.len(),
                ptr,
                raw_in.len(),
                perm as u64,
                timeout_micros(timeout),
                &mut raw,
            )
        };
        if code != sys::NvSciError_Success {
            return Err(ep.import_error(
                "NvSciSyncIpcImportAttrListAndObj",
                "NvSciSync object",
                perm_name(perm),
                timeout,
                code,
            ));
        }
        Ok(SyncObj::from_raw(raw, self))
    }
}

impl SyncObj {
    /// Exports this object to the peer of `ep` granting `perm`.
    pub fn export(&self, perm: SyncPerm, ep: &IpcEndpoint) -> Result<SyncObjDescriptor> {
        let f = nvfn!(self.module().0.lib.sync(), NvSciSyncObjIpcExport);
        let mut d = sys::NvSciSyncObjIpcExportDescriptor { payload: [0; 128] };
        // SAFETY: the object is alive; `d` is a valid out-pointer.
        let code = unsafe { f(self.as_raw(), perm as u64, ep.as_raw(), &mut d) };
        if code != sys::NvSciError_Success {
            return Err(ep.export_error("NvSciSyncObjIpcExport", code));
        }
        Ok(SyncObjDescriptor::from_words(&d.payload))
    }

    /// Exports this object and its reconciled list in one descriptor
    /// (`NvSciSyncIpcExportAttrListAndObj`).
    pub fn export_with_attr_list(&self, perm: SyncPerm, ep: &IpcEndpoint) -> Result<AttrListDescriptor> {
        let lib = self.module().0.lib.clone();
        let f = nvfn!(lib.sync(), NvSciSyncIpcExportAttrListAndObj);
        let (mut p, mut n) = (core::ptr::null_mut(), 0usize);
        // SAFETY: the object is alive; `p`/`n` receive a library-owned buffer.
        let code = unsafe { f(self.as_raw(), perm as u64, ep.as_raw(), &mut p, &mut n) };
        // SAFETY: on success `p` is the buffer just exported, freed once with its own function.
        unsafe {
            AttrListDescriptor::exported(
                ep,
                "NvSciSyncIpcExportAttrListAndObj",
                code,
                p,
                n,
                lib.sync().NvSciSyncAttrListAndObjFreeDesc,
            )
        }
    }

    /// Imports an object the peer of `ep` exported, described by the reconciled list imported
    /// from the same peer, asking for `perm` (more than was granted is an
    /// [`Error::ImportPermission`]).
    pub fn import(
        ep: &IpcEndpoint,
        desc: &SyncObjDescriptor,
        reconciled: &SyncAttrList,
        perm: SyncPerm,
        timeout: Option<Duration>,
    ) -> Result<SyncObj> {
        if !reconciled.is_reconciled()? {
            return Err(invalid(
                "reconciled",
                "an object is imported with the reconciled list imported from its exporter",
            ));
        }
        let module = reconciled.module().clone();
        let f = nvfn!(module.0.lib.sync(), NvSciSyncObjIpcImport);
        let d = sys::NvSciSyncObjIpcExportDescriptor { payload: desc.words::<128>() };
        let mut raw = core::ptr::null_mut();
        // SAFETY: the list is alive; `d` is a descriptor value; `raw` receives a new object.
        let code =
            unsafe { f(ep.as_raw(), &d, reconciled.raw, perm as u64, timeout_micros(timeout), &mut raw) };
        if code != sys::NvSciError_Success {
            return Err(ep.import_error(
                "NvSciSyncObjIpcImport",
                "NvSciSync object",
                perm_name(perm),
                timeout,
                code,
            ));
        }
        Ok(SyncObj::from_raw(raw, &module))
    }

    /// Imports a fence exported by the peer for this (imported) object. An all-zero descriptor
    /// (what [`Fence::export`] gives for a cleared fence) imports as a cleared fence.
    pub fn import_fence(&self, desc: &FenceDescriptor) -> Result<Fence> {
        if desc.0.iter().all(|b| *b == 0) {
            return Ok(Fence::cleared());
        }
        let f = nvfn!(self.module().0.lib.sync(), NvSciSyncIpcImportFence);
        let d = sys::NvSciSyncFenceIpcExportDescriptor { payload: desc.words::<7>() };
        let mut fence = Fence::for_object(self);
        // SAFETY: the object is alive; `fence` is cleared storage bound to it.
        let code = unsafe { f(self.as_raw(), &d, fence.as_raw_mut()) };
        if code == sys::NvSciError_BadParameter {
            return Err(Error::InvalidDescriptor {
                what: "NvSciSync fence",
                reason:
                    "NvSciSyncIpcImportFence refused it (a fence of another object, truncated or corrupted)"
                        .into(),
            });
        }
        check("NvSciSyncIpcImportFence", code)?;
        Ok(fence)
    }
}

impl Fence {
    /// Exports this fence for the peer of `ep`, which imports it on its copy of the object
    /// ([`SyncObj::import_fence`]). A cleared fence exports as an all-zero descriptor, which
    /// imports as cleared.
    pub fn export(&self, ep: &IpcEndpoint) -> Result<FenceDescriptor> {
        let Some(obj) = self.object() else {
            return Ok(FenceDescriptor([0; 56]));
        };
        let f = nvfn!(obj.module().0.lib.sync(), NvSciSyncIpcExportFence);
        let mut d = sys::NvSciSyncFenceIpcExportDescriptor { payload: [0; 7] };
        // SAFETY: the fence is valid storage; `d` is a valid out-pointer.
        let code = unsafe { f(self.as_raw(), ep.as_raw(), &mut d) };
        if code != sys::NvSciError_Success {
            return Err(ep.export_error("NvSciSyncIpcExportFence", code));
        }
        Ok(FenceDescriptor::from_words(&d.payload))
    }
}
