//! NvSciSync export and import through an [`IpcEndpoint`]: lists, objects and fences.

use super::desc::{AttrListDescriptor, FenceDescriptor, SyncObjDescriptor};
use super::endpoint::timeout_micros;
use super::IpcEndpoint;
use crate::error::{invalid, Error, NvSciError, Result};
use crate::result::sync as nvsync;
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
        let raw_in = super::list::input_lists(inputs)?;
        // SAFETY: the module and every input list are alive and the endpoint open; the new
        // object is owned by the returned `SyncObj`.
        let raw = unsafe {
            nvsync::ipc_import_attr_list_and_obj(
                self.0.lib.sync(),
                self.0.raw,
                ep.as_raw(),
                &desc.0,
                &raw_in,
                perm as u64,
                timeout_micros(timeout),
            )
        }
        .map_err(|e| ep.import_failure("NvSciSync object", perm_name(perm), timeout, e))?;
        Ok(SyncObj::from_raw(raw, self))
    }
}

impl SyncObj {
    /// Exports this object to the peer of `ep` granting `perm`.
    pub fn export(&self, perm: SyncPerm, ep: &IpcEndpoint) -> Result<SyncObjDescriptor> {
        // SAFETY: the object is alive and the endpoint open.
        let d = unsafe {
            nvsync::obj_ipc_export(self.module().0.lib.sync(), self.as_raw(), perm as u64, ep.as_raw())
        }
        .map_err(|e| ep.export_failure(e))?;
        Ok(SyncObjDescriptor::from_words(&d.payload))
    }

    /// Exports this object and its reconciled list in one descriptor
    /// (`NvSciSyncIpcExportAttrListAndObj`).
    pub fn export_with_attr_list(&self, perm: SyncPerm, ep: &IpcEndpoint) -> Result<AttrListDescriptor> {
        let t = self.module().0.lib.sync();
        // SAFETY: the object is alive and the endpoint open; the buffer is freed below.
        let exported =
            unsafe { nvsync::ipc_export_attr_list_and_obj(t, self.as_raw(), perm as u64, ep.as_raw()) };
        let free = |p| {
            // SAFETY: `p` is the buffer just exported, freed once (by `exported`).
            let _ = unsafe { nvsync::attr_list_and_obj_free_desc(t, p) };
        };
        // SAFETY: on success the buffer is the one just exported, freed once with its own function.
        unsafe { AttrListDescriptor::exported(ep, exported, free) }
    }

    /// Imports an object the peer of `ep` exported, described by the reconciled list imported
    /// from the same peer, asking for `perm` (more than was granted is an
    /// [`Error::InvalidDescriptor`]: NvSciSync reports it as `BadParameter`, like a descriptor
    /// of another endpoint, truncated or corrupted, and the explanation names both).
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
        let d = sys::NvSciSyncObjIpcExportDescriptor { payload: desc.words::<128>() };
        // SAFETY: the list is alive and reconciled, the endpoint open; the new object is owned
        // by the returned `SyncObj`.
        let raw = unsafe {
            nvsync::obj_ipc_import(
                module.0.lib.sync(),
                ep.as_raw(),
                &d,
                reconciled.raw,
                perm as u64,
                timeout_micros(timeout),
            )
        }
        .map_err(|e| ep.import_failure("NvSciSync object", perm_name(perm), timeout, e))?;
        Ok(SyncObj::from_raw(raw, &module))
    }

    /// Imports a fence exported by the peer for this (imported) object. An all-zero descriptor
    /// (what [`Fence::export`] gives for a cleared fence) imports as a cleared fence.
    pub fn import_fence(&self, desc: &FenceDescriptor) -> Result<Fence> {
        if desc.0.iter().all(|b| *b == 0) {
            return Ok(Fence::cleared());
        }
        let d = sys::NvSciSyncFenceIpcExportDescriptor { payload: desc.words::<7>() };
        let mut fence = Fence::for_object(self);
        // SAFETY: the object is alive; `fence` is cleared storage bound to it.
        unsafe {
            nvsync::ipc_import_fence(self.module().0.lib.sync(), self.as_raw(), &d, fence.storage_mut())
        }
        .map_err(|e| match e {
            Error::NvSci { code, .. } if code == NvSciError::BAD_PARAMETER => Error::InvalidDescriptor {
                what: "NvSciSync fence",
                reason:
                    "NvSciSyncIpcImportFence refused it (a fence of another object, truncated or corrupted)"
                        .into(),
            },
            e => e,
        })?;
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
        // SAFETY: the fence is a fence of the object's library; the endpoint is open.
        let d = unsafe { nvsync::ipc_export_fence(obj.module().0.lib.sync(), self.raw_fence(), ep.as_raw()) }
            .map_err(|e| ep.export_failure(e))?;
        Ok(FenceDescriptor::from_words(&d.payload))
    }
}
