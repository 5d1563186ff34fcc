//! Reconciliation over random lists of random attributes, then allocation, plane layouts, CPU
//! access and pixel puts and gets (random rectangles, pitches and buffer sizes) of whatever
//! reconciles. Errors only; nothing leaks; an allocated object's planes lie inside it without
//! overlapping, and its CPU mapping is the whole object.
#![no_main]

mod common;

use common::{attr, pick, Input, Store};
use libfuzzer_sys::fuzz_target;
use nvsci::buf::{BufAttrList, BufModule, BufObj, PixelRect, PlaneDst, PlaneSrc};
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
                if let Ok(planes) = obj.planes() {
                    // The library's layout lies inside the object, planes in order, apart.
                    let mut end = 0u64;
                    for (i, p) in planes.iter().enumerate() {
                        assert!(p.offset >= end, "plane {i} overlaps the plane before: {planes:?}");
                        assert!(
                            u64::from(p.pitch) * 8 >= u64::from(p.width) * u64::from(p.bits_per_pixel),
                            "plane {i} pitch does not hold a row: {planes:?}"
                        );
                        end = p.offset + p.aligned_size;
                    }
                    assert!(end <= obj.size(), "planes end at {end}, past the object of {}", obj.size());
                    pixels(&obj, &planes, &mut input);
                }
                if let Ok(mut w) = obj.cpu_write() {
                    assert_eq!(w.len() as u64, obj.size(), "the CPU mapping is the whole object");
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

/// A put and a get of a random rectangle with random pitches and buffer sizes, one buffer per
/// user plane (`BufObj::pixel_planes`), sometimes one too few.
fn pixels(obj: &BufObj, planes: &[nvsci::buf::PlaneLayout], input: &mut Input<'_>) {
    let Some(first) = planes.first() else { return };
    let Ok(users) = obj.pixel_planes() else { return };
    let rect = PixelRect::new(
        input.u32() % (first.width + 2),
        input.u32() % (first.height + 2),
        input.u32() % (first.width + 2),
        input.u32() % (first.height + 2),
    );
    let rect = (input.u8() % 4 != 0).then_some(rect);
    let mut bufs: Vec<(Vec<u8>, u32)> = users
        .iter()
        .map(|p| {
            let row = p.width.saturating_mul(p.bytes_per_pixel);
            let pitch = row.saturating_add(u32::from(input.u8() % 8)).saturating_sub(u32::from(input.u8() % 2));
            let len = (pitch as usize).saturating_mul(p.height as usize).saturating_sub((input.u8() % 3) as usize);
            (vec![0x5a; len.min(64 << 20)], pitch)
        })
        .collect();
    if input.u8() % 8 == 0 {
        bufs.pop();
    }
    let src: Vec<PlaneSrc<'_>> = bufs.iter().map(|(d, p)| PlaneSrc { data: d, pitch: *p }).collect();
    let _ = obj.put_pixels(rect, &src);
    let mut dst: Vec<PlaneDst<'_>> = bufs.iter_mut().map(|(d, p)| PlaneDst { data: d, pitch: *p }).collect();
    let _ = obj.get_pixels(rect, &mut dst);
}
