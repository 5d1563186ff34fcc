//! NvSciBuf export and import through an [`IpcEndpoint`].

use super::desc::{AttrListDescriptor, BufObjDescriptor};
use super::endpoint::timeout_micros;
use super::IpcEndpoint;
use crate::buf::{BufAttrList, BufModule, BufObj, Perm};
use crate::error::{invalid, Error, Result};
use crate::result::buf as nvbuf;
use nvsci_sys as sys;
use std::sync::Arc;
use std::time::Duration;

fn perm_name(p: Perm) -> &'static str {
    match p {
        Perm::ReadOnly => "read-only access",
        Perm::ReadWrite => "read-write access",
    }
}

impl BufModule {
    /// Imports unreconciled lists exported by the peer of `ep` (one read-only list holding all
    /// of their slots), to reconcile with this process's lists.
    pub fn import_unreconciled(&self, ep: &IpcEndpoint, desc: &AttrListDescriptor) -> Result<BufAttrList> {
        BufAttrList::import_unreconciled(self, ep, desc)
    }

    /// Imports a reconciled list exported by the peer, checked against this process's
    /// unreconciled `inputs` (a list that does not satisfy them is an
    /// [`Error::InvalidDescriptor`]).
    pub fn import_reconciled(
        &self,
        ep: &IpcEndpoint,
        desc: &AttrListDescriptor,
        inputs: &[&BufAttrList],
    ) -> Result<BufAttrList> {
        BufAttrList::import_reconciled(self, ep, desc, inputs)
    }

    /// Imports a buffer and its reconciled list exported together with
    /// [`BufObj::export_with_attr_list`], checking the list against `inputs`, with at least
    /// `min` permission.
    pub fn import_attr_list_and_obj(
        &self,
        ep: &IpcEndpoint,
        desc: &AttrListDescriptor,
        inputs: &[&BufAttrList],
        min: Perm,
        timeout: Option<Duration>,
    ) -> Result<BufObj> {
        let raw_in = super::list::input_lists(inputs)?;
        // SAFETY: the module and every input list are alive and the endpoint open; the new
        // object reference is owned by the returned object.
        let raw = unsafe {
            nvbuf::ipc_import_attr_list_and_obj(
                self.0.lib.buf(),
                self.0.raw,
                ep.as_raw(),
                &desc.0,
                &raw_in,
                min as u32,
                timeout_micros(timeout),
            )
        }
        .map_err(|e| ep.import_failure("NvSciBuf object", perm_name(min), timeout, e))?;
        BufObj::wrap(raw, self, Arc::default())
    }
}

/// A buffer imported with read-only permission: only reads are possible, whatever the memory's
/// other holders may do. [`as_buf_obj`](Self::as_buf_obj) gives the object for read-only uses
/// (CPU reads, `ExternalMemory::<ReadOnly>` imports); writes through it are refused at run time.
#[derive(Debug)]
pub struct ReadOnlyBufObj(BufObj);

impl ReadOnlyBufObj {
    /// The object (its [`perm`](BufObj::perm) is [`Perm::ReadOnly`]).
    pub fn as_buf_obj(&self) -> &BufObj {
        &self.0
    }

    /// Reads the memory on the CPU (see [`BufObj::cpu_read`]).
    pub fn cpu_read(&self) -> Result<crate::buf::CpuRead<'_>> {
        self.0.cpu_read()
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.0.size()
    }

    /// The object itself, its permission capped at read-only (writes are refused).
    pub(crate) fn into_buf_obj(self) -> BufObj {
        self.0
    }
}

impl BufObj {
    /// Exports this buffer to the peer of `ep` granting `perm` (at most this reference's own
    /// permission: more is an [`Error::PermissionDenied`]).
    pub fn export(&self, perm: Perm, ep: &IpcEndpoint) -> Result<BufObjDescriptor> {
        if perm > self.perm() {
            return Err(Error::PermissionDenied(
                "an export cannot grant more permission than the exporting reference has",
            ));
        }
        // SAFETY: the object is alive and the endpoint open.
        let d = unsafe {
            nvbuf::obj_ipc_export(self.module().0.lib.buf(), self.as_raw(), perm as u32, ep.as_raw())
        }
        .map_err(|e| ep.export_failure(e))?;
        let words = d.data;
        Ok(BufObjDescriptor::from_words(&words))
    }

    /// Exports this buffer and its reconciled list in one descriptor
    /// (`NvSciBufIpcExportAttrListAndObj`).
    pub fn export_with_attr_list(&self, perm: Perm, ep: &IpcEndpoint) -> Result<AttrListDescriptor> {
        if perm > self.perm() {
            return Err(Error::PermissionDenied(
                "an export cannot grant more permission than the exporting reference has",
            ));
        }
        let t = self.module().0.lib.buf();
        // SAFETY: the object is alive and the endpoint open; the buffer is freed below.
        let exported =
            unsafe { nvbuf::ipc_export_attr_list_and_obj(t, self.as_raw(), perm as u32, ep.as_raw()) };
        let free = |p| {
            // SAFETY: `p` is the buffer just exported, freed once (by `exported`).
            let _ = unsafe { nvbuf::attr_list_and_obj_free_desc(t, p) };
        };
        // SAFETY: on success the buffer is the one just exported, freed once with its own function.
        unsafe { AttrListDescriptor::exported(ep, exported, free) }
    }

    fn import_raw(
        ep: &IpcEndpoint,
        desc: &BufObjDescriptor,
        reconciled: &BufAttrList,
        min: Perm,
        timeout: Option<Duration>,
    ) -> Result<BufObj> {
        if !reconciled.is_reconciled()? {
            return Err(invalid(
                "reconciled",
                "an object is imported with the reconciled list imported from its exporter",
            ));
        }
        let module = reconciled.module().clone();
        let d = sys::NvSciBufObjIpcExportDescriptor { data: desc.words::<32>() };
        // SAFETY: the list is alive and reconciled, the endpoint open; the new reference is
        // owned by the returned object.
        let raw = unsafe {
            nvbuf::obj_ipc_import(
                module.0.lib.buf(),
                ep.as_raw(),
                &d,
                reconciled.raw,
                min as u32,
                timeout_micros(timeout),
            )
        }
        .map_err(|e| ep.import_failure("NvSciBuf object", perm_name(min), timeout, e))?;
        BufObj::wrap(raw, &module, Arc::default())
    }

    /// Imports a buffer the peer of `ep` exported with read-write permission, described by the
    /// reconciled list imported from the same peer. A read-only export is an
    /// [`Error::ImportPermission`].
    pub fn import(
        ep: &IpcEndpoint,
        desc: &BufObjDescriptor,
        reconciled: &BufAttrList,
        timeout: Option<Duration>,
    ) -> Result<BufObj> {
        Self::import_raw(ep, desc, reconciled, Perm::ReadWrite, timeout)
    }

    /// Imports a buffer with read-only access (whatever the export granted).
    pub fn import_read_only(
        ep: &IpcEndpoint,
        desc: &BufObjDescriptor,
        reconciled: &BufAttrList,
        timeout: Option<Duration>,
    ) -> Result<ReadOnlyBufObj> {
        let mut obj = Self::import_raw(ep, desc, reconciled, Perm::ReadOnly, timeout)?;
        obj.cap_perm(Perm::ReadOnly);
        Ok(ReadOnlyBufObj(obj))
    }
}
