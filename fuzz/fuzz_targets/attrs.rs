//! Attribute set/get with arbitrary keys, lengths and bytes: through the raw function table of
//! the mock and through the typed API. Errors only; no panic, no undefined behaviour.
#![no_main]

mod common;

use common::{attr, pick, Input, Store};
use libfuzzer_sys::fuzz_target;
use nvsci::buf::BufModule;
use nvsci::NvSci;
use nvsci_sys::{NvSciBufAttrKeyValuePair, NvSciBufAttrList, NvSciBufModule};

fuzz_target!(|data: &[u8]| {
    common::abort_on_panic();
    let mut input = Input(data);
    // Raw path: arbitrary (key, length, bytes) pairs straight into the mock's table.
    let t = nvsci_mock::buf_fns();
    let (open, create, set, get, free, close) = (
        t.NvSciBufModuleOpen.unwrap(),
        t.NvSciBufAttrListCreate.unwrap(),
        t.NvSciBufAttrListSetAttrs.unwrap(),
        t.NvSciBufAttrListGetAttrs.unwrap(),
        t.NvSciBufAttrListFree.unwrap(),
        t.NvSciBufModuleClose.unwrap(),
    );
    let mut m: NvSciBufModule = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    if unsafe { open(&mut m) } != 0 {
        return;
    }
    let mut l: NvSciBufAttrList = std::ptr::null_mut();
    // SAFETY: live module, valid out-pointer.
    unsafe { create(m, &mut l) };
    let count = (input.u8() % 6) as usize;
    let mut values: Vec<Vec<u8>> = Vec::new();
    let mut keys = Vec::new();
    for _ in 0..count {
        let key = match input.u8() % 3 {
            0 => input.u32(),
            1 => 0x0_0001 + (input.u8() as u32 % 20),
            _ => 0x2_0001 + (input.u8() as u32 % 30),
        };
        let len = (input.u8() % 64) as usize;
        keys.push(key);
        values.push(input.bytes(len).to_vec());
    }
    let mut pairs: Vec<NvSciBufAttrKeyValuePair> = keys
        .iter()
        .zip(&values)
        .map(|(&key, v)| NvSciBufAttrKeyValuePair { key, value: v.as_ptr().cast(), len: v.len() })
        .collect();
    if !pairs.is_empty() {
        // SAFETY: every pair points to `len` readable bytes that outlive the call.
        unsafe { set(l, pairs.as_mut_ptr(), pairs.len()) };
        // SAFETY: the library fills value/len of each pair; the values stay valid while `l` does.
        unsafe { get(l, pairs.as_mut_ptr(), pairs.len()) };
    }
    // SAFETY: `l` and `m` are ours, freed once.
    unsafe {
        free(l);
        close(m);
    }

    // Typed path.
    {
        let lib = NvSci::mock();
        let Ok(module) = BufModule::open(&lib) else { return };
        let Ok(mut list) = module.attr_list() else { return };
        while !input.is_empty() {
            let mut store = Store::default();
            let p = pick(&mut input, &mut store);
            let a = attr(&p, &store);
            let _ = list.set(&[a]);
            let _ = list.get(nvsci::buf::key::PLANE_WIDTH);
            let _ = list.get(nvsci::buf::key::TYPES);
        }
    }
    assert_eq!(nvsci_mock::global_ledger().counts().total(), 0, "handles leaked");
});
