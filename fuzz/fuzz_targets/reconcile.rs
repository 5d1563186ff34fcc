//! Reconciliation over random lists of random attributes, then allocation, plane layouts and CPU
//! access of whatever reconciles. Errors only; nothing leaks.
#![no_main]

mod common;

use common::{attr, pick, Input, Store};
use libfuzzer_sys::fuzz_target;
use nvsci::buf::{BufAttrList, BufModule, BufObj};
use nvsci::NvSci;

fuzz_target!(|data: &[u8]| {
    common::abort_on_panic();
    let mut input = Input(data);
    {
        let lib = NvSci::mock();
        let Ok(m) = BufModule::open(&lib) else { return };
        let n = 1 + (input.u8() % 3) as usize;
        let mut lists = Vec::new();
        for _ in 0..n {
            let Ok(mut l) = m.attr_list() else { return };
            for _ in 0..(input.u8() % 8) {
                let mut store = Store::default();
                let p = pick(&mut input, &mut store);
                let _ = l.set(&[attr(&p, &store)]);
            }
            lists.push(l);
        }
        let refs: Vec<&BufAttrList> = lists.iter().collect();
        if let Ok(r) = BufAttrList::reconcile(&refs) {
            if let Ok(obj) = BufObj::alloc(&r) {
                let _ = obj.planes();
                if let Ok(mut w) = obj.cpu_write() {
                    if let Some(b) = w.first_mut() {
                        *b = 1;
                    }
                }
                let _ = obj.dup().and_then(|d| d.dup_with_reduced_perm(nvsci::buf::Perm::ReadOnly));
            }
        }
    }
    assert_eq!(nvsci_mock::global_ledger().counts().total(), 0, "handles leaked");
});
