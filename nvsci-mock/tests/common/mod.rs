//! Helpers shared by the integration tests: everything goes through the function tables.
#![allow(dead_code)]

use nvsci_sys::*;
use std::ffi::c_void;
use std::ptr;

/// Calls a table entry: `call!(table.Name(args...))`. Tests pass raw pointers on purpose, so the
/// arguments are expanded inside the `unsafe` block.
#[macro_export]
macro_rules! call {
    ($t:ident . $f:ident ( $($a:expr),* $(,)? )) => {
        unsafe { ($t.$f.expect(stringify!($f)))($($a),*) }
    };
}

pub fn bytes_of<T: Copy>(v: &T) -> Vec<u8> {
    let p = (v as *const T).cast::<u8>();
    unsafe { std::slice::from_raw_parts(p, std::mem::size_of::<T>()) }.to_vec()
}

pub fn bytes_of_slice<T: Copy>(v: &[T]) -> Vec<u8> {
    let p = v.as_ptr().cast::<u8>();
    unsafe { std::slice::from_raw_parts(p, std::mem::size_of_val(v)) }.to_vec()
}

pub fn u32s(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4).map(|c| u32::from_ne_bytes(c.try_into().unwrap())).collect()
}

pub fn u64s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect()
}

pub fn gpu(n: u8) -> NvSciRmGpuId {
    NvSciRmGpuId { bytes: [n; 16] }
}

// ---------------------------------------------------------------- NvSciBuf

pub struct Buf {
    pub t: NvSciBufFns,
    pub m: NvSciBufModule,
}

impl Buf {
    pub fn new() -> Buf {
        let t = nvsci_mock::buf_fns();
        let mut m = ptr::null_mut();
        assert_eq!(call!(t.NvSciBufModuleOpen(&mut m)), NvSciError_Success);
        Buf { t, m }
    }

    pub fn ledger(&self) -> nvsci_mock::Ledger {
        unsafe { nvsci_mock::buf_module_ledger(self.m) }.unwrap()
    }

    /// Sets `pairs` (key, bytes) on `l`, returning the error code.
    pub fn set(&self, l: NvSciBufAttrList, pairs: &[(u32, Vec<u8>)]) -> NvSciError {
        let t = self.t;
        let mut raw: Vec<NvSciBufAttrKeyValuePair> = pairs
            .iter()
            .map(|(k, v)| NvSciBufAttrKeyValuePair { key: *k, value: v.as_ptr().cast(), len: v.len() })
            .collect();
        call!(t.NvSciBufAttrListSetAttrs(l, raw.as_mut_ptr(), raw.len()))
    }

    pub fn list(&self, pairs: &[(u32, Vec<u8>)]) -> NvSciBufAttrList {
        let t = self.t;
        let mut l = ptr::null_mut();
        assert_eq!(call!(t.NvSciBufAttrListCreate(self.m, &mut l)), NvSciError_Success);
        if !pairs.is_empty() {
            assert_eq!(self.set(l, pairs), NvSciError_Success);
        }
        l
    }

    /// Slot `slot` value of `key`: `Ok(None)` when unset.
    pub fn get_slot(
        &self,
        l: NvSciBufAttrList,
        slot: usize,
        key: u32,
    ) -> Result<Option<Vec<u8>>, NvSciError> {
        let t = self.t;
        let mut p = NvSciBufAttrKeyValuePair { key, value: ptr::null(), len: 99 };
        let e = call!(t.NvSciBufAttrListSlotGetAttrs(l, slot, &mut p, 1));
        if e != NvSciError_Success {
            return Err(e);
        }
        if p.value.is_null() {
            assert_eq!(p.len, 0);
            return Ok(None);
        }
        Ok(Some(unsafe { std::slice::from_raw_parts(p.value.cast::<u8>(), p.len) }.to_vec()))
    }

    pub fn get(&self, l: NvSciBufAttrList, key: u32) -> Option<Vec<u8>> {
        self.get_slot(l, 0, key).unwrap()
    }

    pub fn get_u32s(&self, l: NvSciBufAttrList, key: u32) -> Vec<u32> {
        u32s(&self.get(l, key).unwrap())
    }

    pub fn get_u64s(&self, l: NvSciBufAttrList, key: u32) -> Vec<u64> {
        u64s(&self.get(l, key).unwrap())
    }

    /// Reconciles `lists`: Ok(reconciled) or Err((code, conflict list or NULL)).
    pub fn reconcile(
        &self,
        lists: &[NvSciBufAttrList],
    ) -> Result<NvSciBufAttrList, (NvSciError, NvSciBufAttrList)> {
        let t = self.t;
        let mut r = ptr::null_mut();
        let mut c = ptr::null_mut();
        let e = call!(t.NvSciBufAttrListReconcile(lists.as_ptr(), lists.len(), &mut r, &mut c));
        if e == NvSciError_Success {
            assert!(c.is_null());
            Ok(r)
        } else {
            assert!(r.is_null());
            Err((e, c))
        }
    }

    pub fn dump(&self, l: NvSciBufAttrList) -> String {
        let t = self.t;
        let mut buf: *mut c_void = ptr::null_mut();
        let mut len = 0usize;
        assert_eq!(call!(t.NvSciBufAttrListDebugDump(l, &mut buf, &mut len)), NvSciError_Success);
        let s =
            String::from_utf8(unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }.to_vec()).unwrap();
        call!(t.NvSciBufAttrListFreeDesc(buf));
        s
    }

    pub fn free(&self, l: NvSciBufAttrList) {
        let t = self.t;
        call!(t.NvSciBufAttrListFree(l));
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        let t = self.t;
        call!(t.NvSciBufModuleClose(self.m));
    }
}

pub fn types(t: &[u32]) -> (u32, Vec<u8>) {
    (NvSciBufGeneralAttrKey_Types, bytes_of_slice(t))
}

pub fn raw_size(n: u64) -> (u32, Vec<u8>) {
    (NvSciBufRawBufferAttrKey_Size, bytes_of(&n))
}

pub fn cpu(b: bool) -> (u32, Vec<u8>) {
    (NvSciBufGeneralAttrKey_NeedCpuAccess, bytes_of(&b))
}

pub fn perm(p: u32) -> (u32, Vec<u8>) {
    (NvSciBufGeneralAttrKey_RequiredPerm, bytes_of(&p))
}

/// Attributes of an NV12 pitch-linear image of `w` x `h`.
pub fn nv12(w: u32, h: u32) -> Vec<(u32, Vec<u8>)> {
    vec![
        types(&[NvSciBufType_Image]),
        (NvSciBufImageAttrKey_Layout, bytes_of(&NvSciBufImage_PitchLinearType)),
        (NvSciBufImageAttrKey_ScanType, bytes_of(&NvSciBufScan_ProgressiveType)),
        (NvSciBufImageAttrKey_PlaneCount, bytes_of(&2u32)),
        (NvSciBufImageAttrKey_PlaneColorFormat, bytes_of_slice(&[NvSciColor_Y8, NvSciColor_V8U8])),
        (NvSciBufImageAttrKey_PlaneWidth, bytes_of_slice(&[w, w / 2])),
        (NvSciBufImageAttrKey_PlaneHeight, bytes_of_slice(&[h, h / 2])),
    ]
}

// ---------------------------------------------------------------- NvSciSync

pub struct Sync {
    pub t: NvSciSyncFns,
    pub m: NvSciSyncModule,
}

impl Sync {
    pub fn new() -> Sync {
        let t = nvsci_mock::sync_fns();
        let mut m = ptr::null_mut();
        assert_eq!(call!(t.NvSciSyncModuleOpen(&mut m)), NvSciError_Success);
        Sync { t, m }
    }

    pub fn ledger(&self) -> nvsci_mock::Ledger {
        unsafe { nvsci_mock::sync_module_ledger(self.m) }.unwrap()
    }

    pub fn set(&self, l: NvSciSyncAttrList, pairs: &[(u32, Vec<u8>)]) -> NvSciError {
        let t = self.t;
        let raw: Vec<NvSciSyncAttrKeyValuePair> = pairs
            .iter()
            .map(|(k, v)| NvSciSyncAttrKeyValuePair { attrKey: *k, value: v.as_ptr().cast(), len: v.len() })
            .collect();
        call!(t.NvSciSyncAttrListSetAttrs(l, raw.as_ptr(), raw.len()))
    }

    pub fn list(&self, pairs: &[(u32, Vec<u8>)]) -> NvSciSyncAttrList {
        let t = self.t;
        let mut l = ptr::null_mut();
        assert_eq!(call!(t.NvSciSyncAttrListCreate(self.m, &mut l)), NvSciError_Success);
        if !pairs.is_empty() {
            assert_eq!(self.set(l, pairs), NvSciError_Success);
        }
        l
    }

    /// A list for a party with `perm` and CPU access `cpu`.
    pub fn party(&self, perm: u64, cpu: bool) -> NvSciSyncAttrList {
        self.list(&[
            (NvSciSyncAttrKey_RequiredPerm, bytes_of(&perm)),
            (NvSciSyncAttrKey_NeedCpuAccess, bytes_of(&cpu)),
        ])
    }

    pub fn get(&self, l: NvSciSyncAttrList, key: u32) -> Option<Vec<u8>> {
        let t = self.t;
        let mut v: *const c_void = ptr::null();
        let mut len = 99usize;
        assert_eq!(call!(t.NvSciSyncAttrListGetAttr(l, key, &mut v, &mut len)), NvSciError_Success);
        if v.is_null() {
            assert_eq!(len, 0);
            return None;
        }
        Some(unsafe { std::slice::from_raw_parts(v.cast::<u8>(), len) }.to_vec())
    }

    pub fn reconcile(
        &self,
        lists: &[NvSciSyncAttrList],
    ) -> Result<NvSciSyncAttrList, (NvSciError, NvSciSyncAttrList)> {
        let t = self.t;
        let mut r = ptr::null_mut();
        let mut c = ptr::null_mut();
        let e = call!(t.NvSciSyncAttrListReconcile(lists.as_ptr(), lists.len(), &mut r, &mut c));
        if e == NvSciError_Success {
            Ok(r)
        } else {
            Err((e, c))
        }
    }

    pub fn dump(&self, l: NvSciSyncAttrList) -> String {
        let t = self.t;
        let mut buf: *mut c_void = ptr::null_mut();
        let mut len = 0usize;
        assert_eq!(call!(t.NvSciSyncAttrListDebugDump(l, &mut buf, &mut len)), NvSciError_Success);
        let s =
            String::from_utf8(unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }.to_vec()).unwrap();
        call!(t.NvSciSyncAttrListFreeDesc(buf));
        s
    }

    pub fn free(&self, l: NvSciSyncAttrList) {
        let t = self.t;
        call!(t.NvSciSyncAttrListFree(l));
    }

    /// Allocates an object for a CPU signaler + CPU waiter pair (lists freed).
    pub fn cpu_object(&self) -> NvSciSyncObj {
        self.object(true, true, false)
    }

    pub fn object(&self, cpu_signaler: bool, cpu_waiter: bool, timestamps: bool) -> NvSciSyncObj {
        let t = self.t;
        let s = self.party(NvSciSyncAccessPerm_SignalOnly, cpu_signaler);
        let w = self.party(NvSciSyncAccessPerm_WaitOnly, cpu_waiter);
        if timestamps {
            assert_eq!(
                self.set(w, &[(NvSciSyncAttrKey_WaiterRequireTimestamps, bytes_of(&true))]),
                NvSciError_Success
            );
        }
        let lists = [s, w];
        let mut o = ptr::null_mut();
        let mut c = ptr::null_mut();
        assert_eq!(
            call!(t.NvSciSyncAttrListReconcileAndObjAlloc(lists.as_ptr(), 2, &mut o, &mut c)),
            NvSciError_Success
        );
        assert!(c.is_null());
        self.free(s);
        self.free(w);
        o
    }

    pub fn context(&self) -> NvSciSyncCpuWaitContext {
        let t = self.t;
        let mut c = ptr::null_mut();
        assert_eq!(call!(t.NvSciSyncCpuWaitContextAlloc(self.m, &mut c)), NvSciError_Success);
        c
    }
}

impl Drop for Sync {
    fn drop(&mut self) {
        let t = self.t;
        call!(t.NvSciSyncModuleClose(self.m));
    }
}
