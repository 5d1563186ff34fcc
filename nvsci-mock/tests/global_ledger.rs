//! The process-wide ledger sums every module's handles. A binary of its own with one test: no
//! other test opens a module in this process, so the global counts are exact (in the `buf` tests,
//! which run in parallel, they could only be bounded from below).
// `call!` passes raw pointers to the C entry points, so its arguments expand inside `unsafe`.
#![allow(clippy::macro_metavars_in_unsafe)]

mod common;

use common::*;
use nvsci_mock::HandleCounts;
use nvsci_sys::*;
use std::ptr;

#[test]
fn the_global_ledger_counts_every_modules_handles_and_their_release() {
    let global = nvsci_mock::global_ledger();
    assert_eq!(global.counts(), HandleCounts::default(), "nothing open before the first module");
    let a = Buf::new();
    assert_eq!(global.counts(), HandleCounts { modules: 1, ..Default::default() });
    let b = Buf::new();
    assert_eq!(global.counts(), HandleCounts { modules: 2, ..Default::default() });

    let t = a.t;
    let l = a.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(64)]);
    let r = a.reconcile(&[l]).unwrap();
    let mut obj = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjAlloc(r, &mut obj)), NvSciError_Success);
    let m = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(128)]);
    assert_eq!(
        a.ledger().counts(),
        HandleCounts { modules: 1, attr_lists: 2, objects: 1, ..Default::default() }
    );
    assert_eq!(b.ledger().counts(), HandleCounts { modules: 1, attr_lists: 1, ..Default::default() });
    assert_eq!(
        global.counts(),
        HandleCounts { modules: 2, attr_lists: 3, objects: 1, ..Default::default() },
        "the sum of both modules"
    );

    call!(t.NvSciBufObjFree(obj));
    a.free(l);
    a.free(r);
    b.free(m);
    assert_eq!(global.counts(), HandleCounts { modules: 2, ..Default::default() });
    drop(a);
    assert_eq!(global.counts(), HandleCounts { modules: 1, ..Default::default() });
    drop(b);
    assert_eq!(global.counts(), HandleCounts::default(), "everything released");
}
