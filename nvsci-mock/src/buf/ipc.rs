//! NvSciBuf IPC entry points over the emulated NvSciIpc (see [`crate::ipc`]).
//!
//! * Attribute-list descriptors carry every slot (see `ipc::lists`) and are freed with
//!   `NvSciBufAttrListFreeDesc`. An imported unreconciled list is read-only (like an appended
//!   list); an imported reconciled list is checked against the importer's unreconciled lists:
//!   every key they set must be satisfied (`RequiredPerm` by `ActualPerm`, `NeedCpuAccess` =
//!   true kept, sizes and alignments not smaller, every element of an array key present, any
//!   other key equal; input-only keys need not appear). A failed check is
//!   `AttrListValidationFailed`.
//! * Object descriptors name a memfd sent to the peer over the endpoint's socket, the granted
//!   permission (`Auto` grants the exporting handle's own; more than it is `BadParameter`), the
//!   object size and a digest of the reconciled attributes. Import requires the reconciled list
//!   imported from the same exporter (digest mismatch: `BadParameter`) and fails with
//!   `AccessDenied` when `minPermissions` exceeds what was granted. It waits up to `timeoutUs`
//!   for the memory to arrive (`Timeout`), or `ConnectionReset` once the peer is gone.
//! * Every descriptor is stamped with the endpoint's link id: importing through another
//!   endpoint, or a truncated or corrupted descriptor, is `BadParameter`. Exporting through an
//!   endpoint that is not connected is `InvalidState`; through one whose peer left,
//!   `ConnectionReset`. Buffers whose alignment exceeds the page size live in private memory
//!   and cannot be exported (`NotSupported`). Block-linear images in CUDA VMM memory (GPU mode)
//!   travel as the allocation's POSIX fd and are mapped by the importer for the same GPU; where
//!   it cannot (no such GPU or driver there), the import is `NotSupported`.

use super::keys::BUF_KEYS;
use super::list::{self, BufAttrListRec};
use super::module;
use super::obj;
use crate::attrs::{self, Access, Count, Flags, Slot};
use crate::desc;
use crate::ffi::{bad, guard, guard_void, non_null, write_out, Res};
use crate::ipc::codec::{self, Reader, Writer};
use crate::ipc::endpoint;
use crate::ipc::lists::{self, Lib};
use crate::list_common::{gather, ListRecord};
use crate::pages::Pages;
use nvsci_sys::*;
use std::os::raw::c_void;

const OBJ_MAGIC: u64 = 0x4e56_4d4b_424f_4a31; // "NVMKBOJ1"

/// Whether the reconciled slot `rec` satisfies the unreconciled slot `input`.
#[allow(non_upper_case_globals)]
fn satisfies(input: &Slot, rec: &Slot) -> bool {
    input.iter().all(|(key, v)| {
        let Some(spec) = attrs::find(BUF_KEYS, key) else { return false };
        let got = rec.get(key);
        match key {
            NvSciBufGeneralAttrKey_RequiredPerm => {
                rec.get(NvSciBufGeneralAttrKey_ActualPerm).is_none_or(|a| a.u32() >= v.u32())
            }
            NvSciBufGeneralAttrKey_NeedCpuAccess => !v.bool() || got.is_some_and(|g| g.bool()),
            NvSciBufRawBufferAttrKey_Size | NvSciBufRawBufferAttrKey_Align => {
                got.is_some_and(|g| g.u64() >= v.u64())
            }
            NvSciBufImageAttrKey_PlaneBaseAddrAlign => got.is_some_and(|g| {
                let (g, v) = (g.u32s(), v.u32s());
                g.len() == v.len() && g.iter().zip(&v).all(|(a, b)| a >= b)
            }),
            _ if got.is_none() => spec.access == Access::In,
            _ => match spec.count {
                Count::One => got == Some(v),
                Count::UpTo(_) => got.is_some_and(|g| {
                    let have: Vec<&[u8]> = g.bytes().chunks(spec.elem).collect();
                    v.bytes().chunks(spec.elem).all(|e| have.contains(&e))
                }),
            },
        }
    })
}

fn export_list(
    module: &BufAttrListRec,
    ep: NvSciIpcEndpoint,
    reconciled: bool,
    slots: &[Slot],
    out: *mut *mut c_void,
    len: *mut usize,
) -> Res {
    non_null(out)?;
    non_null(len)?;
    let link = endpoint::link(ep)?;
    let bytes = lists::encode(Lib::Buf, link, reconciled, &[], slots);
    let (p, n) = desc::alloc_bytes(&module.module.ledger, &bytes)?;
    // SAFETY: both out-pointers are non-NULL caller storage.
    unsafe {
        out.write(p);
        len.write(n);
    }
    Ok(())
}

pub(crate) unsafe extern "C" fn attr_list_export_unreconciled(
    lists: *const NvSciBufAttrList,
    count: usize,
    ep: NvSciIpcEndpoint,
    out: *mut *mut c_void,
    len: *mut usize,
) -> NvSciError {
    guard("NvSciBufAttrListIpcExportUnreconciled", || {
        // SAFETY: `lists` is NULL or `count` list handles of this mock.
        let inputs = unsafe { list::unreconciled_inputs(lists, count) }?;
        export_list(inputs[0], ep, false, &gather(&inputs), out, len)
    })
}

pub(crate) unsafe extern "C" fn attr_list_export_reconciled(
    l: NvSciBufAttrList,
    ep: NvSciIpcEndpoint,
    out: *mut *mut c_void,
    len: *mut usize,
) -> NvSciError {
    guard("NvSciBufAttrListIpcExportReconciled", || {
        // SAFETY: `l` is NULL or a live list handle of this mock.
        let r = unsafe { list::get(l) }?;
        if !r.flags.reconciled {
            return bad();
        }
        export_list(r, ep, true, &[r.slot0()], out, len)
    })
}

/// Decodes a list descriptor received through `ep`.
fn import_list(ep: NvSciIpcEndpoint, bytes: &[u8], reconciled: bool) -> Res<Vec<Slot>> {
    let link = endpoint::link(ep)?;
    let d = lists::decode(bytes, Lib::Buf, link, BUF_KEYS).ok_or(NvSciError_BadParameter)?;
    if d.reconciled != reconciled {
        return bad();
    }
    Ok(d.slots)
}

pub(crate) unsafe extern "C" fn attr_list_import_unreconciled(
    m: NvSciBufModule,
    ep: NvSciIpcEndpoint,
    desc: *const c_void,
    len: usize,
    out: *mut NvSciBufAttrList,
) -> NvSciError {
    guard("NvSciBufAttrListIpcImportUnreconciled", || {
        // SAFETY: `m` is NULL or a live module handle of this mock.
        let m = unsafe { module::get(m) }?;
        non_null(out)?;
        // SAFETY: `desc` is NULL or readable for `len` bytes.
        let slots = import_list(ep, unsafe { codec::caller_bytes(desc, len) }?, false)?;
        let rec = BufAttrListRec::new(m.shared.clone(), Flags::APPENDED, slots, None);
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, rec.into_handle()) }
    })
}

/// Imports a reconciled list and checks it against `inputs`; returns the new list record.
///
/// # Safety
/// `inputs` must be NULL or `count` list handles of this mock.
unsafe fn import_reconciled(
    m: &module::BufModuleRec,
    ep: NvSciIpcEndpoint,
    bytes: &[u8],
    inputs: *const NvSciBufAttrList,
    count: usize,
) -> Res<Box<BufAttrListRec>> {
    let slots = import_list(ep, bytes, true)?;
    if count > 0 {
        // SAFETY: forwarded contract.
        let lists = unsafe { list::unreconciled_inputs(inputs, count) }?;
        if !gather(&lists).iter().all(|s| satisfies(s, &slots[0])) {
            return Err(NvSciError_AttrListValidationFailed);
        }
    }
    Ok(BufAttrListRec::new(m.shared.clone(), Flags::RECONCILED, slots, None))
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn attr_list_import_reconciled(
    m: NvSciBufModule,
    ep: NvSciIpcEndpoint,
    desc: *const c_void,
    len: usize,
    inputs: *const NvSciBufAttrList,
    count: usize,
    out: *mut NvSciBufAttrList,
) -> NvSciError {
    guard("NvSciBufAttrListIpcImportReconciled", || {
        // SAFETY: `m` is NULL or a live module handle of this mock.
        let m = unsafe { module::get(m) }?;
        non_null(out)?;
        // SAFETY: `desc` is readable for `len` bytes; `inputs` holds `count` handles.
        let rec = unsafe { import_reconciled(m, ep, codec::caller_bytes(desc, len)?, inputs, count) }?;
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, rec.into_handle()) }
    })
}

fn valid_perm(p: NvSciBufAttrValAccessPerm) -> bool {
    p == NvSciBufAccessPerm_Readonly || p == NvSciBufAccessPerm_ReadWrite
}

/// What backs an exported object: host pages (a memfd) or CUDA VMM memory (its POSIX fd).
const MEM_PAGES: u32 = 0;
const MEM_VMM: u32 = 1;

/// Sends the object's memory to the peer and encodes its descriptor.
fn export_obj(o: &obj::BufObjRec, perm: NvSciBufAttrValAccessPerm, ep: NvSciIpcEndpoint) -> Res<Vec<u8>> {
    let granted = if perm == NvSciBufAccessPerm_Auto { o.perm() } else { perm };
    if !valid_perm(granted) || granted > o.perm() {
        return bad();
    }
    let (link, id, len, kind) = match (o.pages(), o.vmm()) {
        (Some(pages), _) => {
            let fd = pages.fd().ok_or(NvSciError_NotSupported)?;
            let (link, id) = endpoint::send_fd(ep, fd)?;
            (link, id, pages.len(), MEM_PAGES)
        }
        (None, Some(vmm)) => {
            use std::os::fd::AsFd;
            let fd = vmm.export_fd().ok_or(NvSciError_NotSupported)?;
            let (link, id) = endpoint::send_fd(ep, fd.as_fd())?;
            (link, id, vmm.len(), MEM_VMM)
        }
        (None, None) => return Err(NvSciError_NotSupported),
    };
    o.bind_to(ep);
    let mut w = Writer::default();
    w.u64(OBJ_MAGIC)
        .u64(link)
        .u64(id)
        .u64(o.size())
        .u64(len as u64)
        .u32(kind)
        .u32(granted)
        .u64(lists::digest(o.attrs(), NvSciBufGeneralAttrKey_ActualPerm));
    Ok(w.seal())
}

/// Imports an object descriptor with the reconciled list `l`.
fn import_obj(
    ep: NvSciIpcEndpoint,
    sealed: &[u8],
    l: &BufAttrListRec,
    min: NvSciBufAttrValAccessPerm,
    timeout_us: i64,
) -> Res<NvSciBufObj> {
    if !l.flags.reconciled || !valid_perm(min) {
        return bad();
    }
    let link = endpoint::link(ep)?;
    let mut r = Reader::open(sealed).ok_or(NvSciError_BadParameter)?;
    let mut field = || r.u64().ok_or(NvSciError_BadParameter);
    if field()? != OBJ_MAGIC || field()? != link {
        return bad();
    }
    let (id, size, mem_len) = (field()?, field()?, field()?);
    let kind = r.u32().ok_or(NvSciError_BadParameter)?;
    let granted = r.u32().ok_or(NvSciError_BadParameter)?;
    let digest = r.u64().ok_or(NvSciError_BadParameter)?;
    if !r.is_done() || !valid_perm(granted) || size == 0 || size > mem_len || kind > MEM_VMM {
        return bad();
    }
    if digest != lists::digest(&l.slot0(), NvSciBufGeneralAttrKey_ActualPerm) {
        return bad();
    }
    if min > granted {
        return Err(NvSciError_AccessDenied);
    }
    let fd = endpoint::take_fd(ep, id, timeout_us)?;
    let len = usize::try_from(mem_len).map_err(|_| NvSciError_BadParameter)?;
    let memory = if kind == MEM_VMM {
        let gpu = obj::first_gpu(&l.slot0()).ok_or(NvSciError_BadParameter)?;
        obj::Memory::Vmm(crate::vmm::VmmMemory::import(&gpu, fd, len).ok_or(NvSciError_NotSupported)?)
    } else {
        obj::Memory::Pages(map_pages(fd, len)?)
    };
    Ok(obj::from_import(memory, size, l, granted, ep))
}

#[cfg(all(target_os = "linux", not(miri)))]
fn map_pages(fd: std::os::fd::OwnedFd, len: usize) -> Res<Pages> {
    Pages::map(fd, len)
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn map_pages(_fd: std::os::fd::OwnedFd, _len: usize) -> Res<Pages> {
    Err(NvSciError_NotSupported)
}

pub(crate) unsafe extern "C" fn obj_export(
    o: NvSciBufObj,
    perm: NvSciBufAttrValAccessPerm,
    ep: NvSciIpcEndpoint,
    desc: *mut NvSciBufObjIpcExportDescriptor,
) -> NvSciError {
    guard("NvSciBufObjIpcExport", || {
        // SAFETY: `o` is NULL or a live object handle of this mock.
        let o = unsafe { obj::get(o) }?;
        non_null(desc)?;
        let sealed = export_obj(o, perm, ep)?;
        let d = NvSciBufObjIpcExportDescriptor { data: codec::to_words(&sealed)? };
        // SAFETY: `desc` is non-NULL caller storage (align 1: written unaligned).
        unsafe { desc.write_unaligned(d) };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn obj_import(
    ep: NvSciIpcEndpoint,
    desc: *const NvSciBufObjIpcExportDescriptor,
    l: NvSciBufAttrList,
    min: NvSciBufAttrValAccessPerm,
    timeout_us: i64,
    out: *mut NvSciBufObj,
) -> NvSciError {
    guard("NvSciBufObjIpcImport", || {
        non_null(desc)?;
        non_null(out)?;
        // SAFETY: `l` is NULL or a live list handle of this mock.
        let l = unsafe { list::get(l) }?;
        // SAFETY: `desc` is non-NULL and points to a descriptor (align 1: read unaligned).
        let words = unsafe { desc.read_unaligned() }.data;
        let bytes: [u8; 256] = codec::words_to_bytes(&words);
        let sealed = codec::sealed_in(&bytes)?;
        let h = import_obj(ep, sealed, l, min, timeout_us)?;
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, h) }
    })
}

pub(crate) unsafe extern "C" fn export_attr_list_and_obj(
    o: NvSciBufObj,
    perm: NvSciBufAttrValAccessPerm,
    ep: NvSciIpcEndpoint,
    out: *mut *mut c_void,
    len: *mut usize,
) -> NvSciError {
    guard("NvSciBufIpcExportAttrListAndObj", || {
        // SAFETY: `o` is NULL or a live object handle of this mock.
        let o = unsafe { obj::get(o) }?;
        non_null(out)?;
        non_null(len)?;
        let link = endpoint::link(ep)?;
        let list = lists::encode(Lib::Buf, link, true, &[], std::slice::from_ref(o.attrs()));
        let object = export_obj(o, perm, ep)?;
        let (p, n) = desc::alloc_bytes(&o.view_module().ledger, &codec::join_pair(&list, &object))?;
        // SAFETY: both out-pointers are non-NULL caller storage.
        unsafe {
            out.write(p);
            len.write(n);
        }
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn import_attr_list_and_obj(
    m: NvSciBufModule,
    ep: NvSciIpcEndpoint,
    desc: *const c_void,
    len: usize,
    lists_in: *const NvSciBufAttrList,
    count: usize,
    min: NvSciBufAttrValAccessPerm,
    timeout_us: i64,
    out: *mut NvSciBufObj,
) -> NvSciError {
    guard("NvSciBufIpcImportAttrListAndObj", || {
        // SAFETY: `m` is NULL or a live module handle of this mock.
        let m = unsafe { module::get(m) }?;
        non_null(out)?;
        // SAFETY: `desc` is NULL or readable for `len` bytes.
        let bytes = unsafe { codec::caller_bytes(desc, len) }?;
        let (list_desc, obj_desc) = codec::split_pair(bytes)?;
        // SAFETY: `lists_in` holds `count` handles of this mock (or is NULL with count 0).
        let list = unsafe { import_reconciled(m, ep, list_desc, lists_in, count) }?;
        let h = import_obj(ep, obj_desc, &list, min, timeout_us)?;
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, h) }
    })
}

pub(crate) unsafe extern "C" fn attr_list_and_obj_free_desc(desc: *mut c_void) {
    // SAFETY: `desc` is NULL or a buffer from `export_attr_list_and_obj`.
    guard_void(|| unsafe { desc::free(desc) });
}
