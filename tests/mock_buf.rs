//! NvSciBuf through the mock, via the same function tables the native libraries fill.
//! Image layouts are checked against what nvscibuf.h documents (rows fit their pitch, planes in
//! order and aligned, the object holds them), not against the mock's own numbers, so the same
//! assertions hold for NVIDIA's library; the mock's own rule is tested in its crate.
#![cfg(feature = "mock")]

use nvsci::buf::{
    key, BufAttr, BufAttrList, BufModule, BufObj, BufType, ColorFormat, GpuCache, GpuId, HwEngine,
    ImageLayout, PeerHwEngine, Perm, PixelPlaneKind, PixelRect, PlaneDst, PlaneSrc, Platform, ScanType,
};
use nvsci::{Error, NvSci};

#[path = "../examples/support/nv12_pattern.rs"]
mod nv12_pattern;
#[path = "../examples/support/nv12_put.rs"]
mod nv12_put;

fn module() -> BufModule {
    BufModule::open(&NvSci::mock()).unwrap()
}

fn raw_list(m: &BufModule, size: u64, align: u64, perm: Perm, cpu: bool) -> BufAttrList {
    let mut l = m.attr_list().unwrap();
    l.set(&[
        BufAttr::Types(&[BufType::RAW_BUFFER]),
        BufAttr::RawSize(size),
        BufAttr::RawAlign(align),
        BufAttr::RequiredPerm(perm),
        BufAttr::NeedCpuAccess(cpu),
    ])
    .unwrap();
    l
}

fn nv12(m: &BufModule, w: u32, h: u32) -> BufAttrList {
    let mut l = m.attr_list().unwrap();
    nvsci::pipeline::Nv12Image::pitch_linear(w, h).set_on(&mut l).unwrap();
    l.set(&[BufAttr::NeedCpuAccess(true), BufAttr::RequiredPerm(Perm::ReadWrite)]).unwrap();
    l
}

#[test]
fn raw_buffer_reconcile_alloc_write_read_back() {
    let m = module();
    let a = raw_list(&m, 4096, 64, Perm::ReadOnly, false);
    let b = raw_list(&m, 4096, 256, Perm::ReadWrite, true);
    let r = BufAttrList::reconcile(&[&a, &b]).unwrap();
    assert!(r.is_reconciled().unwrap());
    assert_eq!(r.get_one(key::RAW_SIZE).unwrap(), Some(4096));
    assert_eq!(r.get_one(key::RAW_ALIGN).unwrap(), Some(256), "alignment reconciles to the max");
    assert_eq!(r.get_one(key::NEED_CPU_ACCESS).unwrap(), Some(true), "any list needing CPU access");
    assert_eq!(r.get_one(key::ACTUAL_PERM).unwrap(), Some(Perm::ReadWrite), "max permission");

    let obj = BufObj::alloc(&r).unwrap();
    assert_eq!(obj.size(), 4096);
    assert_eq!(obj.perm(), Perm::ReadWrite);
    {
        let mut w = obj.cpu_write().unwrap();
        assert_eq!(w.len(), 4096);
        for (i, b) in w.iter_mut().enumerate() {
            *b = (i * 31 % 251) as u8;
        }
    }
    let rd = obj.cpu_read().unwrap();
    assert!(rd.iter().enumerate().all(|(i, &b)| b == (i * 31 % 251) as u8));
    assert_eq!(rd.as_ptr() as usize % 256, 0, "allocation honours the reconciled alignment");
}

/// Checks what nvscibuf.h documents about a reconciled pitch-linear image, whatever numbers
/// the implementation picks (they vary by library release and chip): every plane holds its rows
/// (`pitch` >= width x bytes per pixel, `aligned_height` >= height, `aligned_size` >= pitch x
/// height), planes come in order without overlapping, each starts on its `PlaneBaseAddrAlign`,
/// the object holds them all, and its memory (as the CPU mapping shows it) starts on
/// `ImageAlignment`.
fn assert_layout_invariants(r: &BufAttrList, obj: &BufObj, expected: &[(ColorFormat, u32, u32, u32, u8)]) {
    let p = obj.planes().unwrap();
    assert_eq!(p.len(), expected.len(), "plane count");
    let aligns = r.get(key::PLANE_BASE_ADDR_ALIGN).unwrap();
    let mut end = 0u64;
    for (i, (plane, &(format, width, height, bpp, channels))) in p.iter().zip(expected).enumerate() {
        assert_eq!((plane.format, plane.width, plane.height), (format, width, height), "plane {i}");
        assert_eq!((plane.bits_per_pixel, plane.channel_count), (bpp, channels), "plane {i} pixel size");
        assert!(
            u64::from(plane.pitch) * 8 >= u64::from(width) * u64::from(bpp),
            "plane {i} pitch holds a row"
        );
        assert!(plane.aligned_height >= height, "plane {i} aligned height");
        assert!(
            plane.aligned_size >= u64::from(plane.pitch) * u64::from(height),
            "plane {i} size holds its rows"
        );
        assert!(plane.offset >= end, "plane {i} starts after plane {}", i.wrapping_sub(1));
        let align = u64::from(aligns[i]);
        assert!(
            align.is_power_of_two() && plane.offset % align == 0,
            "plane {i} offset on its base alignment"
        );
        end = plane.offset + plane.aligned_size;
    }
    assert!(obj.size() >= end, "the object holds every plane");
    assert_eq!(r.get_one(key::IMAGE_SIZE).unwrap(), Some(obj.size()));
    let image_align = r.get_one(key::IMAGE_ALIGNMENT).unwrap().expect("ImageAlignment is an output");
    assert!(image_align.is_power_of_two());
    let mem = obj.cpu_read().unwrap();
    assert_eq!(mem.len() as u64, obj.size());
    assert_eq!(mem.as_ptr() as u64 % image_align, 0, "memory starts on ImageAlignment");
}

#[test]
fn nv12_1920x1080_plane_layout_keeps_the_documented_invariants() {
    let m = module();
    let r = BufAttrList::reconcile(&[&nv12(&m, 1920, 1080)]).unwrap();
    let obj = BufObj::alloc(&r).unwrap();
    // Y8: 8 bits, 1 channel, full resolution; V8U8: 16 bits, 2 channels, half in each direction.
    assert_layout_invariants(
        &r,
        &obj,
        &[(ColorFormat::Y8, 1920, 1080, 8, 1), (ColorFormat::V8U8, 960, 540, 16, 2)],
    );
}

/// Bytes written where the layout says a row starts are read back where the library itself puts
/// them: its pixel copy (`NvSciBufObjGetPixels`) into packed Y and UV planes finds each at its row
/// and column. Returns the luma pitch.
fn nv12_rows_read_back_at_their_offsets(w: u32, h: u32) -> u32 {
    let m = module();
    let r = BufAttrList::reconcile(&[&nv12(&m, w, h)]).unwrap();
    let obj = BufObj::alloc(&r).unwrap();
    let (y, uv) = {
        let p = obj.planes().unwrap();
        (p[0], p[1])
    };
    let (wu, hu) = (w as usize, h as usize);
    let (mid, last, cmid) = (hu / 2 - 1, hu - 1, hu / 4);
    {
        let mut wr = obj.cpu_write().unwrap();
        for row in [0usize, mid, last] {
            wr[(y.offset + row as u64 * u64::from(y.pitch)) as usize] = row as u8;
        }
        wr[(uv.offset + cmid as u64 * u64::from(uv.pitch)) as usize] = 0xee;
    }
    let mut packed = [(vec![0u8; wu * hu], w), (vec![0u8; wu * hu / 2], w)];
    {
        let [(y, yp), (uv, uvp)] = &mut packed;
        obj.get_nv12(PlaneDst { data: y, pitch: *yp }, PlaneDst { data: uv, pitch: *uvp }).unwrap();
    }
    for row in [0usize, mid, last] {
        assert_eq!(packed[0].0[row * wu], row as u8, "luma row {row}");
        assert_eq!(packed[0].0[row * wu + 1], 0, "luma row {row}, second byte");
    }
    assert_eq!(packed[1].0[cmid * wu], 0xee, "chroma row {cmid}");
    assert_eq!(
        packed[0].0.iter().filter(|&&b| b != 0).count(),
        2,
        "rows {mid} and {last} only (row 0 wrote 0)"
    );
    assert_eq!(packed[1].0.iter().filter(|&&b| b != 0).count(), 1, "chroma row {cmid} only");
    y.pitch
}

#[test]
#[cfg_attr(
    miri,
    ignore = "3 MB read back byte by byte; nv12_small_rows_read_back_at_their_offsets runs the same code"
)]
fn nv12_1920x1080_rows_read_back_at_their_offsets() {
    nv12_rows_read_back_at_their_offsets(1920, 1080);
}

#[test]
fn nv12_small_rows_read_back_at_their_offsets() {
    // 100 pixels: rows padded to the pitch alignment, so a copy that ignored the pitch would
    // find the bytes of later rows in the wrong place; 27 chroma rows, an odd count.
    let pitch = nv12_rows_read_back_at_their_offsets(100, 54);
    assert!(pitch > 100, "rows are padded: pitch {pitch} for 100 pixels");
}

#[test]
fn rgba_720p_layout_keeps_the_documented_invariants() {
    let m = module();
    let mut l = m.attr_list().unwrap();
    l.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::Layout(ImageLayout::PitchLinear),
        BufAttr::ScanType(ScanType::Progressive),
        BufAttr::PlaneCount(1),
        BufAttr::PlaneColorFormat(&[ColorFormat::A8B8G8R8]),
        BufAttr::PlaneWidth(&[1000]),
        BufAttr::PlaneHeight(&[720]),
        BufAttr::NeedCpuAccess(true),
    ])
    .unwrap();
    let r = BufAttrList::reconcile(&[&l]).unwrap();
    let obj = BufObj::alloc(&r).unwrap();
    // A8B8G8R8: 32 bits, 4 channels.
    assert_layout_invariants(&r, &obj, &[(ColorFormat::A8B8G8R8, 1000, 720, 32, 4)]);
}

#[test]
fn conflicting_lists_name_the_keys() {
    let m = module();
    let a = nv12(&m, 1920, 1080);
    let b = nv12(&m, 1280, 720);
    match BufAttrList::reconcile(&[&a, &b]) {
        Err(Error::ReconcileConflict { keys, dump, .. }) => {
            assert!(keys.contains(&"NvSciBufImageAttrKey_PlaneWidth"), "{keys:?}");
            assert!(keys.contains(&"NvSciBufImageAttrKey_PlaneHeight"), "{keys:?}");
            assert!(dump.contains("PlaneWidth"), "{dump}");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // Raw sizes must agree across lists.
    match BufAttrList::reconcile(&[
        &raw_list(&m, 1000, 1, Perm::ReadOnly, false),
        &raw_list(&m, 4096, 1, Perm::ReadOnly, false),
    ]) {
        Err(Error::ReconcileConflict { keys, .. }) => {
            assert!(keys.contains(&"NvSciBufRawBufferAttrKey_Size"), "{keys:?}")
        }
        other => panic!("expected a Size conflict, got {other:?}"),
    }
    let raw = raw_list(&m, 64, 1, Perm::ReadOnly, false);
    match BufAttrList::reconcile(&[&a, &raw]) {
        Err(e @ Error::ReconcileConflict { .. }) => {
            let Error::ReconcileConflict { keys, .. } = &e else { unreachable!() };
            assert!(keys.contains(&"NvSciBufGeneralAttrKey_Types"), "{keys:?}");
            assert!(e.to_string().contains("NvSciBufGeneralAttrKey_Types"), "{e}");
        }
        other => panic!("expected a Types conflict, got {other:?}"),
    }
}

#[test]
fn reconcile_and_alloc_in_one_call() {
    let m = module();
    let ledger = m.mock_ledger().expect("mock module has a ledger");
    {
        let a = raw_list(&m, 8192, 64, Perm::ReadOnly, false);
        let b = raw_list(&m, 8192, 512, Perm::ReadWrite, true);
        let obj = BufObj::reconcile_and_alloc(&[&a, &b]).unwrap();
        assert_eq!(obj.size(), 8192);
        assert_eq!(obj.perm(), Perm::ReadWrite, "max permission, as reconcile gives");
        let r = obj.attr_list().unwrap();
        assert!(r.is_reconciled().unwrap());
        assert_eq!(r.get_one(key::RAW_ALIGN).unwrap(), Some(512));
        obj.cpu_write().unwrap()[..4].copy_from_slice(b"abcd");
        assert_eq!(&obj.cpu_read().unwrap()[..4], b"abcd");
        assert_eq!(obj.cpu_read().unwrap().as_ptr() as usize % 512, 0);

        // A conflict names the keys exactly as `reconcile` does, and the conflict list is freed.
        let before = ledger.counts();
        let c = nv12(&m, 1280, 720);
        let d = nv12(&m, 1920, 1080);
        let via_reconcile = BufAttrList::reconcile(&[&c, &d]).unwrap_err();
        match BufObj::reconcile_and_alloc(&[&c, &d]) {
            Err(e @ Error::ReconcileConflict { .. }) => {
                let keys = e.conflict_keys().unwrap();
                assert!(keys.contains(&"NvSciBufImageAttrKey_PlaneWidth"), "{keys:?}");
                assert!(keys.contains(&"NvSciBufImageAttrKey_PlaneHeight"), "{keys:?}");
                assert_eq!(keys, via_reconcile.conflict_keys().unwrap());
                let Error::ReconcileConflict { function, dump, .. } = &e else { unreachable!() };
                assert_eq!(*function, "NvSciBufAttrListReconcileAndObjAlloc");
                assert!(dump.contains("PlaneWidth"), "{dump}");
            }
            other => panic!("expected a conflict, got {other:?}"),
        }
        drop((c, d));
        assert_eq!(ledger.counts(), before, "nothing is left behind by the failed calls");

        // The inputs are checked as `reconcile` checks them.
        assert!(matches!(
            BufObj::reconcile_and_alloc(&[]),
            Err(Error::InvalidArgument { name: "lists", .. })
        ));
        let reconciled = BufAttrList::reconcile(&[&a]).unwrap();
        assert!(
            matches!(
                BufObj::reconcile_and_alloc(&[&reconciled]),
                Err(Error::Refused {
                    function: "NvSciBufAttrListReconcileAndObjAlloc",
                    culprit: nvsci::Culprit::AlreadyReconciled { index: 0 },
                    ..
                })
            ),
            "a reconciled input is refused"
        );
    }
    assert_eq!(ledger.counts().total(), 1, "only the module itself is left: {:?}", ledger.counts());
}

#[test]
fn heapless_is_reexported_for_the_returned_types() {
    let m = module();
    let obj = BufObj::reconcile_and_alloc(&[&nv12(&m, 64, 32)]).unwrap();
    let planes: nvsci::heapless::Vec<nvsci::buf::PlaneLayout, 3> = obj.planes().unwrap();
    assert_eq!(planes.len(), 2);
    let types: nvsci::heapless::Vec<BufType, 5> = obj.buf_types().unwrap();
    assert_eq!(types.as_slice(), &[BufType::IMAGE]);
}

#[test]
fn bad_input_is_rejected_with_the_key_named() {
    let m = module();
    let mut l = m.attr_list().unwrap();
    // Empty and oversized arrays never reach the library.
    match l.set(&[BufAttr::Types(&[])]) {
        Err(Error::InvalidArgument { name, .. }) => assert_eq!(name, "NvSciBufGeneralAttrKey_Types"),
        other => panic!("{other:?}"),
    }
    match l.set(&[BufAttr::PlaneWidth(&[1, 2, 3, 4])]) {
        Err(Error::InvalidArgument { name, .. }) => assert_eq!(name, "NvSciBufImageAttrKey_PlaneWidth"),
        other => panic!("{other:?}"),
    }
    l.set(&[BufAttr::Types(&[BufType::RAW_BUFFER]), BufAttr::RawSize(64)]).unwrap();
    // Setting a key twice is refused by the library; the error names the key.
    match l.set(&[BufAttr::RawSize(128)]) {
        Err(Error::AttrRefused { function, key, value, code }) => {
            assert_eq!(function, "NvSciBufAttrListSetAttrs");
            assert_eq!(key, "NvSciBufRawBufferAttrKey_Size");
            assert!(value.contains("128") && value.contains("already set"), "{value}");
            assert_eq!(code, nvsci::NvSciError::BAD_PARAMETER);
        }
        other => panic!("{other:?}"),
    }
    // A value the library refuses among good ones: the refused key is named, with its value.
    let mut img = m.attr_list().unwrap();
    match img.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::PlaneCount(2),
        BufAttr::PlaneColorFormat(&[ColorFormat::Y8, ColorFormat(0x7fff_ffff)]),
    ]) {
        Err(Error::AttrRefused { key, value, code, .. }) => {
            assert_eq!(key, "NvSciBufImageAttrKey_PlaneColorFormat");
            assert!(value.contains("PlaneColorFormat"), "{value}");
            assert_eq!(code, nvsci::NvSciError::BAD_PARAMETER);
        }
        other => panic!("{other:?}"),
    }
    // All-or-nothing: nothing of the refused call was set.
    assert!(img.get(key::PLANE_COUNT).unwrap().is_empty());
    // An unreconciled list cannot be allocated from.
    assert!(matches!(BufObj::alloc(&l), Err(Error::InvalidArgument { name: "list", .. })));
    // A reconciled list cannot be modified.
    let r = BufAttrList::reconcile(&[&l]).unwrap();
    let mut r2 = r.try_clone().unwrap();
    assert!(r2.is_reconciled().unwrap());
    match r2.set(&[BufAttr::NeedCpuAccess(true)]) {
        Err(Error::AttrRefused { key, value, .. }) => {
            assert_eq!(key, "NvSciBufGeneralAttrKey_NeedCpuAccess");
            assert!(value.contains("read-only"), "{value}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(BufAttrList::reconcile(&[]), Err(Error::InvalidArgument { name: "lists", .. })));
    // Key numbers overlap between the libraries, and an NvSciSync key given to a buffer list
    // does not compile: the `compile_fail` examples of `nvsci::Key`.
}

#[test]
fn read_only_duplicate_limits_cpu_access() {
    let m = module();
    let r = BufAttrList::reconcile(&[&raw_list(&m, 256, 1, Perm::ReadWrite, true)]).unwrap();
    let rw = BufObj::alloc(&r).unwrap();
    rw.cpu_write().unwrap()[..5].copy_from_slice(b"hello");
    let ro = rw.dup_with_reduced_perm(Perm::ReadOnly).unwrap();
    assert_eq!(ro.perm(), Perm::ReadOnly);
    assert_eq!(ro.attr_list().unwrap().get_one(key::ACTUAL_PERM).unwrap(), Some(Perm::ReadOnly));
    assert!(matches!(ro.cpu_write(), Err(Error::PermissionDenied(_))));
    assert_eq!(&ro.cpu_read().unwrap()[..5], b"hello", "same memory, read through the duplicate");
    assert!(matches!(ro.dup_with_reduced_perm(Perm::ReadWrite), Err(Error::PermissionDenied(_))));
    // The original keeps its permission; a plain dup shares memory and permission.
    let d = rw.dup().unwrap();
    assert_eq!(d.perm(), Perm::ReadWrite);
    // A dup of the read-only duplicate stays read-only (never more than its source holds).
    let ro2 = ro.dup().unwrap();
    assert_eq!(ro2.perm(), Perm::ReadOnly);
    assert!(matches!(ro2.cpu_write(), Err(Error::PermissionDenied(_))));
    drop(ro2);
    // CPU borrows are exclusive across duplicates: a writer excludes readers of any duplicate.
    let w = d.cpu_write().unwrap();
    assert!(matches!(ro.cpu_read(), Err(Error::InvalidArgument { name: "cpu access", .. })));
    assert!(matches!(rw.cpu_write(), Err(Error::InvalidArgument { name: "cpu access", .. })));
    drop(w);
    assert!(ro.cpu_read().is_ok());
}

#[test]
fn cpu_access_requires_need_cpu_access() {
    let m = module();
    let obj =
        BufObj::alloc(&BufAttrList::reconcile(&[&raw_list(&m, 256, 1, Perm::ReadWrite, false)]).unwrap())
            .unwrap();
    let refused = nvsci::Culprit::CpuAccessNotRequested;
    assert!(
        matches!(obj.cpu_read(), Err(Error::Refused { function: "NvSciBufObjGetConstCpuPtr", culprit, .. }) if culprit == refused)
    );
    assert!(
        matches!(obj.cpu_write(), Err(Error::Refused { function: "NvSciBufObjGetCpuPtr", culprit, .. }) if culprit == refused)
    );
    // The failed attempts released their borrow.
    assert!(matches!(obj.cpu_read(), Err(Error::Refused { .. })));
}

#[test]
fn gpu_cache_coherency_follows_cacheability() {
    let m = module();
    let (g1, g2) = (GpuId([0x11; 16]), GpuId([0x22; 16]));
    let mut l = raw_list(&m, 4096, 1, Perm::ReadWrite, false);
    l.set(&[
        BufAttr::GpuId(&[g1, g2]),
        BufAttr::EnableGpuCache(&[
            GpuCache { gpu_id: g1, cacheable: true },
            GpuCache { gpu_id: g2, cacheable: false },
        ]),
    ])
    .unwrap();
    let obj = BufObj::alloc(&BufAttrList::reconcile(&[&l]).unwrap()).unwrap();
    assert_eq!(obj.gpu_sw_need_cache_coherency(g1).unwrap(), Some(true));
    assert_eq!(obj.gpu_sw_need_cache_coherency(g2).unwrap(), Some(false));
    assert_eq!(obj.gpu_sw_need_cache_coherency(GpuId([0x33; 16])).unwrap(), None);
    assert!(!obj.cpu_need_sw_cache_coherency().unwrap());
    let ids = obj.attr_list().unwrap().get(key::GPU_ID).unwrap();
    assert_eq!(ids.as_slice(), &[g1, g2]);
}

#[test]
fn every_handle_is_freed() {
    let m = module();
    let ledger = m.mock_ledger().expect("mock module has a ledger");
    {
        let a = nv12(&m, 640, 480);
        let b = nv12(&m, 640, 480);
        let appended = BufAttrList::append(&[&a, &b]).unwrap();
        assert_eq!(appended.slot_count(), 2);
        let r = BufAttrList::reconcile(&[&a, &b]).unwrap();
        let _dump = r.debug_dump().unwrap();
        let o = BufObj::alloc(&r).unwrap();
        let _d = o.dup().unwrap();
        let _ro = o.dup_with_reduced_perm(Perm::ReadOnly).unwrap();
        let _ = BufAttrList::reconcile(&[&a, &nv12(&m, 320, 240)]).unwrap_err();
        assert!(ledger.counts().total() > 1);
    }
    assert_eq!(ledger.counts().total(), 1, "only the module itself is left: {:?}", ledger.counts());
    drop(m);
    assert_eq!(ledger.counts().total(), 0, "{:?}", ledger.counts());
}

#[test]
fn gpu_cache_coherency_follows_the_gpu_kind_and_enable_gpu_cache() {
    let lib = NvSci::mock();
    let m = BufModule::open(&lib).unwrap();
    // A GPU id no other test uses (the GPU kind is process-wide).
    let igpu = GpuId([0x51; 16]);
    let reconcile = |cache: Option<bool>| {
        let mut l = m.attr_list().unwrap();
        l.set(&[
            BufAttr::Types(&[BufType::RAW_BUFFER]),
            BufAttr::RawSize(4096),
            BufAttr::NeedCpuAccess(true),
            BufAttr::GpuId(&[igpu]),
        ])
        .unwrap();
        if let Some(c) = cache {
            l.set(&[BufAttr::EnableGpuCache(&[GpuCache { gpu_id: igpu, cacheable: c }])]).unwrap();
        }
        let obj = BufObj::alloc(&BufAttrList::reconcile(&[&l]).unwrap()).unwrap();
        obj.gpu_sw_need_cache_coherency(igpu).unwrap()
    };
    // Discrete GPU on sysmem: EnableGpuCache defaults to false, no coherency needed.
    assert_eq!(reconcile(None), Some(false));
    // Integrated GPU (Orin): defaults to true; with CPU access, coherency is needed.
    nvsci_mock::set_gpu_integrated(igpu.0, true);
    assert_eq!(reconcile(None), Some(true));
    // The documented way out: EnableGpuCache = false for that GPU.
    assert_eq!(reconcile(Some(false)), Some(false));
    nvsci_mock::set_gpu_integrated(igpu.0, false);
    assert_eq!(reconcile(None), Some(false));
}

#[test]
fn peer_hw_engine_array_round_trips_and_reconciles_to_the_union() {
    let m = module();
    // Engine and platform numbers as NvSciBuf 2.11 defines them (VI 12, GPU 107, Display 4; Orin 1).
    let engine = |e, p| PeerHwEngine { engine: e, platform: p };
    let camera = [engine(HwEngine::VI, Platform::ORIN), engine(HwEngine::GPU, Platform::ORIN)];
    // An engine and platform this crate does not name round-trip by number.
    let future = engine(HwEngine(200), Platform(9));
    let display = [engine(HwEngine::DISPLAY, Platform::ORIN), engine(HwEngine::GPU, Platform::ORIN), future];
    assert_eq!((HwEngine::VI.0, HwEngine::GPU.0, HwEngine::DISPLAY.0, Platform::ORIN.0), (12, 107, 4, 1));
    assert_eq!(format!("{future:?}"), "PeerHwEngine { engine: HwEngine(200), platform: Platform(9) }");

    let mut a = raw_list(&m, 4096, 1, Perm::ReadWrite, true);
    a.set(&[BufAttr::PeerHwEngineArray(&camera)]).unwrap();
    assert_eq!(a.get(key::PEER_HW_ENGINE_ARRAY).unwrap().as_slice(), &camera);
    let mut b = raw_list(&m, 4096, 1, Perm::ReadOnly, false);
    b.set(&[BufAttr::PeerHwEngineArray(&display)]).unwrap();
    assert_eq!(b.get(key::PEER_HW_ENGINE_ARRAY).unwrap().as_slice(), &display);

    // The mock reconciles the key to the union of the engines, in order of first appearance.
    let r = BufAttrList::reconcile(&[&a, &b]).unwrap();
    let union = [camera[0], camera[1], display[0], future];
    assert_eq!(r.get(key::PEER_HW_ENGINE_ARRAY).unwrap().as_slice(), &union);
    let obj = BufObj::alloc(&r).unwrap();
    assert_eq!(obj.attr_list().unwrap().get(key::PEER_HW_ENGINE_ARRAY).unwrap().as_slice(), &union);

    // At most NV_SCI_BUF_PEER_HW_ENGINE_MAX_NUMBER (128) engines, refused before the library.
    let many = [camera[0]; 129];
    match m.attr_list().unwrap().set(&[BufAttr::PeerHwEngineArray(&many)]) {
        Err(Error::InvalidArgument { name, .. }) => {
            assert_eq!(name, "NvSciBufGeneralAttrKey_PeerHwEngineArray")
        }
        other => panic!("{other:?}"),
    }
    let mut full = m.attr_list().unwrap();
    full.set(&[BufAttr::PeerHwEngineArray(&many[..128])]).unwrap();
    assert_eq!(full.get(key::PEER_HW_ENGINE_ARRAY).unwrap().len(), 128);
}

/// nvscibuf.h: an unset raw-buffer `Align` reconciles to "the default alignment with which the
/// buffer is allocated", and `ImageCount` has one valid input value, 1.
#[test]
fn unset_alignment_is_the_allocation_alignment_and_image_count_is_one() {
    let m = module();
    let mut l = m.attr_list().unwrap();
    l.set(&[BufAttr::Types(&[BufType::RAW_BUFFER]), BufAttr::RawSize(1000), BufAttr::NeedCpuAccess(true)])
        .unwrap();
    let r = BufAttrList::reconcile(&[&l]).unwrap();
    let align = r.get_one(key::RAW_ALIGN).unwrap().expect("Align is an output of reconciliation");
    assert!(align.is_power_of_two() && align >= 4096, "allocation alignment {align}");
    let obj = BufObj::alloc(&r).unwrap();
    let addr = obj.cpu_read().unwrap().as_ptr() as u64;
    assert_eq!(addr % align, 0, "the buffer is allocated with the reported alignment");

    let mut img = m.attr_list().unwrap();
    match img.set(&[BufAttr::Types(&[BufType::IMAGE]), BufAttr::ImageCount(2)]) {
        Err(Error::AttrRefused { key, .. }) => assert_eq!(key, "NvSciBufImageAttrKey_ImageCount"),
        other => panic!("ImageCount 2 must be refused naming the key, got {other:?}"),
    }
    img.set(&[BufAttr::Types(&[BufType::IMAGE]), BufAttr::ImageCount(1)]).unwrap();
}

/// Layouts the mock does not compute are refused with a reason, not a bare status code.
#[test]
fn what_the_mock_does_not_lay_out_says_so() {
    let m = module();
    // Tensors are not emulated: an Image + Tensor reconciliation is refused as unsupported.
    let mut image = m.attr_list().unwrap();
    image
        .set(&[
            BufAttr::Types(&[BufType::IMAGE]),
            BufAttr::Layout(ImageLayout::BlockLinear),
            BufAttr::ScanType(ScanType::Progressive),
            BufAttr::PlaneCount(1),
            BufAttr::PlaneColorFormat(&[ColorFormat::Y8]),
            BufAttr::PlaneWidth(&[64]),
            BufAttr::PlaneHeight(&[64]),
        ])
        .unwrap();
    let mut tensor = m.attr_list().unwrap();
    tensor.set(&[BufAttr::Types(&[BufType::IMAGE, BufType::TENSOR])]).unwrap();
    match BufAttrList::reconcile(&[&image, &tensor]) {
        Err(Error::AttrRefused { function, key, value, code }) => {
            assert_eq!(function, "NvSciBufAttrListReconcile");
            assert_eq!(key, "NvSciBufGeneralAttrKey_Types");
            assert_eq!(code, nvsci::NvSciError::NOT_SUPPORTED);
            assert!(value.contains("tensor") && value.contains("mock"), "{value}");
        }
        other => panic!("expected AttrRefused naming Types, got {other:?}"),
    }
    // A surface-based key, with its value.
    let mut surface = m.attr_list().unwrap();
    surface
        .set(&[BufAttr::Types(&[BufType::IMAGE]), BufAttr::SurfWidthBase(64), BufAttr::SurfHeightBase(64)])
        .unwrap();
    match BufObj::reconcile_and_alloc(&[&surface]) {
        Err(Error::AttrRefused { key, value, .. }) => {
            assert!(key.starts_with("NvSciBufImageAttrKey_Surf"), "{key}");
            assert!(value.contains("64") && value.contains("surface"), "{value}");
        }
        other => panic!("expected AttrRefused naming a Surf key, got {other:?}"),
    }
    // The block-linear image alone reconciles.
    assert!(BufAttrList::reconcile(&[&image]).is_ok());
}

/// A reconciliation refused because a documented mandatory key is set in no list names the key
/// (and keeps the library's code).
#[test]
fn missing_mandatory_keys_are_named() {
    let m = module();
    let mut raw = m.attr_list().unwrap();
    raw.set(&[BufAttr::Types(&[BufType::RAW_BUFFER]), BufAttr::NeedCpuAccess(true)]).unwrap();
    let mut other = m.attr_list().unwrap();
    other.set(&[BufAttr::Types(&[BufType::RAW_BUFFER])]).unwrap();
    for result in [
        BufAttrList::reconcile(&[&raw, &other]).map(drop),
        BufObj::reconcile_and_alloc(&[&raw, &other]).map(drop),
    ] {
        match result {
            Err(Error::AttrRefused { key, value, code, .. }) => {
                assert_eq!(key, "NvSciBufRawBufferAttrKey_Size");
                assert!(value.contains("none of the 2 lists"), "{value}");
                assert_eq!(code, nvsci::NvSciError::BAD_PARAMETER);
            }
            other => panic!("expected the missing Size named, got {other:?}"),
        }
    }
    let mut img = m.attr_list().unwrap();
    img.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::Layout(ImageLayout::PitchLinear),
        BufAttr::ScanType(ScanType::Progressive),
        BufAttr::PlaneCount(1),
        BufAttr::PlaneColorFormat(&[ColorFormat::Y8]),
        BufAttr::PlaneWidth(&[64]),
    ])
    .unwrap();
    match BufAttrList::reconcile(&[&img]) {
        Err(Error::AttrRefused { key, .. }) => assert_eq!(key, "NvSciBufImageAttrKey_PlaneHeight"),
        other => panic!("expected the missing PlaneHeight named, got {other:?}"),
    }
}

// ------------------------------------------------------------------ block-linear images, pixels

/// The image list of NVIDIA's cudaNvSci sample: block-linear B8G8R8A8 (sRGB), 100 rows of top
/// and bottom padding, interlaced scan, read-write, no CPU access.
fn cuda_nvsci_image(m: &BufModule, w: u32, h: u32, cpu: bool) -> BufAttrList {
    let mut l = m.attr_list().unwrap();
    l.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::PlaneCount(1),
        BufAttr::Layout(ImageLayout::BlockLinear),
        BufAttr::TopPadding(&[100]),
        BufAttr::BottomPadding(&[100]),
        BufAttr::LeftPadding(&[0]),
        BufAttr::RightPadding(&[0]),
        BufAttr::PlaneColorFormat(&[ColorFormat::B8G8R8A8]),
        BufAttr::PlaneColorStd(&[nvsci::buf::ColorStd::SRGB]),
        BufAttr::PlaneWidth(&[w]),
        BufAttr::PlaneHeight(&[h]),
        BufAttr::NeedCpuAccess(cpu),
        BufAttr::RequiredPerm(Perm::ReadWrite),
        BufAttr::ScanType(ScanType::Interlace),
    ])
    .unwrap();
    l
}

/// The image list of NVIDIA's cudaNvSciBufMultiplanar sample: block-linear planar YUV 4:2:0
/// (Y8, V8, U8; chroma at half width and height), progressive, VPR off.
fn multiplanar_image(m: &BufModule, w: u32, h: u32, cpu: bool) -> BufAttrList {
    let mut l = m.attr_list().unwrap();
    l.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::NeedCpuAccess(cpu),
        BufAttr::RequiredPerm(Perm::ReadWrite),
        BufAttr::Layout(ImageLayout::BlockLinear),
        BufAttr::VprFlag(false),
        BufAttr::PlaneCount(3),
        BufAttr::PlaneColorFormat(&[ColorFormat::Y8, ColorFormat::V8, ColorFormat::U8]),
        BufAttr::PlaneWidth(&[w, w / 2, w / 2]),
        BufAttr::PlaneHeight(&[h, h / 2, h / 2]),
        BufAttr::ScanType(ScanType::Progressive),
    ])
    .unwrap();
    l
}

fn nv12_block_linear(m: &BufModule, w: u32, h: u32) -> BufAttrList {
    let mut l = m.attr_list().unwrap();
    l.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::Layout(ImageLayout::BlockLinear),
        BufAttr::ScanType(ScanType::Progressive),
        BufAttr::PlaneCount(2),
        BufAttr::PlaneColorFormat(&[ColorFormat::Y8, ColorFormat::V8U8]),
        BufAttr::PlaneWidth(&[w, w.div_ceil(2)]),
        BufAttr::PlaneHeight(&[h, h.div_ceil(2)]),
        BufAttr::NeedCpuAccess(true),
        BufAttr::RequiredPerm(Perm::ReadWrite),
    ])
    .unwrap();
    l
}

#[test]
fn nvidia_sample_image_lists_reconcile_and_allocate() {
    let m = module();
    // cudaNvSci: the padded, interlaced, block-linear RGBA image.
    let r = BufAttrList::reconcile(&[&cuda_nvsci_image(&m, 1024, 1024, true)]).unwrap();
    let obj = BufObj::alloc(&r).unwrap();
    // (PlaneAlignedHeight counts the rows of one field here, so the progressive invariants of
    // `assert_layout_invariants` do not apply as they stand.)
    assert_eq!(obj.size(), r.get_one(key::IMAGE_SIZE).unwrap().unwrap());
    assert_eq!(r.get_one(key::IMAGE_LAYOUT).unwrap(), Some(ImageLayout::BlockLinear));
    assert_eq!(r.get_one(key::SCAN_TYPE).unwrap(), Some(ScanType::Interlace));
    assert_eq!(&r.get(key::TOP_PADDING).unwrap()[..], [100]);
    let p = obj.planes().unwrap()[0];
    assert!(p.pitch >= 1024 * 4 && p.offset == 0 && p.aligned_size <= obj.size());
    // Documented for interlaced images: two fields of PlaneAlignedHeight rows (each holds half
    // of the 1224 padded rows), the second starting at PlaneSecondFieldOffset.
    assert!(p.aligned_height >= (1024 + 200) / 2);
    assert!(p.aligned_size >= 2 * u64::from(p.pitch) * u64::from(p.aligned_height));
    let second = r.get(key::PLANE_SECOND_FIELD_OFFSET).unwrap()[0];
    assert!(
        second >= u64::from(p.pitch) * 612
            && second + u64::from(p.pitch) * u64::from(p.aligned_height) <= p.aligned_size
    );
    assert_eq!(p.pitch % 64, 0, "block-linear rows are whole 64-byte GOBs");

    // cudaNvSciBufMultiplanar: planar 4:2:0, block-linear.
    let r = BufAttrList::reconcile(&[&multiplanar_image(&m, 720, 480, false)]).unwrap();
    let obj = BufObj::alloc(&r).unwrap();
    let p = obj.planes().unwrap();
    assert_eq!(p.len(), 3);
    for (i, (plane, (w, h))) in p.iter().zip([(720, 480), (360, 240), (360, 240)]).enumerate() {
        assert_eq!((plane.width, plane.height, plane.bits_per_pixel), (w, h, 8), "plane {i}");
        assert!(plane.pitch >= w && plane.pitch.is_multiple_of(64) && plane.aligned_height >= h, "plane {i}");
        assert!(plane.aligned_size >= u64::from(plane.pitch) * u64::from(plane.aligned_height));
        if i > 0 {
            assert!(
                plane.offset >= p[i - 1].offset + p[i - 1].aligned_size,
                "planes {} and {i} overlap",
                i - 1
            );
        }
    }
    assert_eq!(obj.size(), p.iter().map(|p| p.aligned_size).sum::<u64>(), "Size = sum of PlaneAlignedSize");
}

/// Bytes of user plane `i`, column byte `x`, row `y` of a test frame.
fn px(seed: u8, i: usize, x: u32, y: u32) -> u8 {
    (x as u8).wrapping_mul(29) ^ (y as u8).wrapping_mul(53) ^ (i as u8).wrapping_mul(101) ^ seed
}

/// A tightly packed copy (plus `slack` bytes per row) of each user plane
/// (`BufObj::pixel_planes`) for the rectangle `r` of the first plane (the other user planes
/// whole), filled by `px(seed, ..)`.
fn frame(obj: &BufObj, r: PixelRect, seed: u8, slack: u32) -> Vec<(Vec<u8>, u32)> {
    let planes = obj.pixel_planes().unwrap();
    planes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let pr = if i == 0 { r } else { PixelRect::new(0, 0, p.width, p.height) };
            let bpp = p.bytes_per_pixel;
            let row = pr.width() * bpp;
            let pitch = row + slack;
            let mut v = vec![0u8; (pitch * pr.height()) as usize];
            for y in 0..pr.height() {
                for x in 0..row {
                    v[(y * pitch + x) as usize] = px(seed, i, pr.x0 * bpp + x, pr.y0 + y);
                }
            }
            (v, pitch)
        })
        .collect()
}

fn put(obj: &BufObj, r: Option<PixelRect>, f: &[(Vec<u8>, u32)]) -> nvsci::Result<()> {
    let src: Vec<PlaneSrc<'_>> = f.iter().map(|(d, pitch)| PlaneSrc { data: d, pitch: *pitch }).collect();
    obj.put_pixels(r, &src)
}

fn get(obj: &BufObj, r: Option<PixelRect>, f: &mut [(Vec<u8>, u32)]) -> nvsci::Result<()> {
    let mut dst: Vec<PlaneDst<'_>> =
        f.iter_mut().map(|(d, pitch)| PlaneDst { data: d, pitch: *pitch }).collect();
    obj.get_pixels(r, &mut dst)
}

fn rgba(m: &BufModule, layout: ImageLayout, w: u32, h: u32) -> BufAttrList {
    let mut l = m.attr_list().unwrap();
    l.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::Layout(layout),
        BufAttr::ScanType(ScanType::Progressive),
        BufAttr::PlaneCount(1),
        BufAttr::PlaneColorFormat(&[ColorFormat::A8B8G8R8]),
        BufAttr::PlaneWidth(&[w]),
        BufAttr::PlaneHeight(&[h]),
        BufAttr::NeedCpuAccess(true),
        BufAttr::RequiredPerm(Perm::ReadWrite),
    ])
    .unwrap();
    l
}

/// nvscibuf.h, NvSciBufObjPutPixels / GetPixels `srcPtrs`: "For YUV surfaces with more than one
/// plane, it is assumed that user provides separate plane pointers for Y, U and V planes (where
/// Y is the first plane, U is the second plane, and V is the third plane)": an NV12 image (Y8
/// and V8U8 planes) takes three user planes, and V8U8 holds U in the low byte ("pattern VVVVVVVV
/// UUUUUUUU", NvSciBuf 2.11), so the chroma plane's bytes are U, V, U, V, ...
#[test]
fn nv12_images_take_y_u_and_v_user_planes() {
    let m = module();
    let obj = BufObj::alloc(&BufAttrList::reconcile(&[&nv12(&m, 16, 4)]).unwrap()).unwrap();
    let users = obj.pixel_planes().unwrap();
    let kinds: Vec<_> = users.iter().map(|p| (p.kind, p.width, p.height, p.bytes_per_pixel)).collect();
    assert_eq!(
        kinds,
        [(PixelPlaneKind::Y, 16, 4, 1), (PixelPlaneKind::U, 8, 2, 1), (PixelPlaneKind::V, 8, 2, 1)]
    );
    let (y, u, v) = (vec![7u8; 64], (0..16).collect::<Vec<u8>>(), (100..116).collect::<Vec<u8>>());
    obj.put_pixels(
        None,
        &[PlaneSrc { data: &y, pitch: 16 }, PlaneSrc { data: &u, pitch: 8 }, PlaneSrc { data: &v, pitch: 8 }],
    )
    .unwrap();
    let c = obj.planes().unwrap()[1];
    let mem = obj.cpu_read().unwrap();
    let row0 = &mem[c.offset as usize..][..16];
    assert_eq!(row0, [0, 100, 1, 101, 2, 102, 3, 103, 4, 104, 5, 105, 6, 106, 7, 107]);
    drop(mem);
    // The NvSciBuf planes' two buffers (Y, interleaved UV) are refused before the call.
    let uv = vec![0u8; 32];
    let e = obj.put_pixels(None, &[PlaneSrc { data: &y, pitch: 16 }, PlaneSrc { data: &uv, pitch: 16 }]);
    assert!(matches!(e, Err(Error::InvalidArgument { name: "planes", .. })), "{e:?}");
    // Interleaved chroma through put_nv12 / get_nv12 lands the same.
    let uv: Vec<u8> = (0..8).flat_map(|x| [x, 100 + x]).chain((8..16).flat_map(|x| [x, 100 + x])).collect();
    obj.put_nv12(PlaneSrc { data: &y, pitch: 16 }, PlaneSrc { data: &uv, pitch: 16 }).unwrap();
    assert_eq!(&obj.cpu_read().unwrap()[c.offset as usize..][..16], &uv[..16]);
    let (mut y2, mut uv2) = (vec![0u8; 64], vec![0u8; 32]);
    obj.get_nv12(PlaneDst { data: &mut y2, pitch: 16 }, PlaneDst { data: &mut uv2, pitch: 16 }).unwrap();
    assert_eq!((y2, uv2), (y, uv));
}

/// nvscibuf.h, NvSciBufObjPutPixels / GetPixels: "rect can only be non-NULL for
/// NvSciSurfType_RGBA or NvSciSurfType_RAW, it must be NULL for NvSciSurfType_YUV". The crate
/// refuses a rectangle on a YUV image before the call (even the whole image), and passes NULL for
/// `None`.
#[test]
fn a_rectangle_on_a_yuv_image_is_refused() {
    let m = module();
    for l in [nv12_block_linear(&m, 32, 16), multiplanar_image(&m, 32, 16, true)] {
        let obj = BufObj::alloc(&BufAttrList::reconcile(&[&l]).unwrap()).unwrap();
        let whole = PixelRect::new(0, 0, 32, 16);
        let f = frame(&obj, whole, 1, 0);
        for r in [whole, PixelRect::new(2, 2, 8, 8)] {
            assert!(matches!(put(&obj, Some(r), &f), Err(Error::InvalidArgument { name: "rect", .. })));
            let mut back = f.clone();
            assert!(matches!(
                get(&obj, Some(r), &mut back),
                Err(Error::InvalidArgument { name: "rect", .. })
            ));
        }
        put(&obj, None, &f).unwrap();
    }
}

#[test]
fn block_linear_nv12_pixels_round_trip() {
    let m = module();
    for (w, h) in [(37, 23), (64, 16), (130, 67)] {
        let r = BufAttrList::reconcile(&[&nv12_block_linear(&m, w, h)]).unwrap();
        let obj = BufObj::alloc(&r).unwrap();
        let whole = PixelRect::new(0, 0, w, h);
        put(&obj, None, &frame(&obj, whole, 3, 7)).unwrap();
        let mut back = frame(&obj, whole, 0, 0);
        get(&obj, None, &mut back).unwrap();
        assert_eq!(back, frame(&obj, whole, 3, 0), "{w}x{h} whole frame");
    }
}

#[test]
fn block_linear_rgba_pixels_round_trip_whole_and_partial() {
    let m = module();
    // Several blocks wide and high natively; under Miri the two sizes that cover partial and whole
    // GOBs.
    let sizes: &[(u32, u32)] =
        if cfg!(miri) { &[(37, 23), (64, 16)] } else { &[(37, 23), (64, 16), (130, 67)] };
    for &(w, h) in sizes {
        rgba_round_trip_whole_and_partial(&m, ImageLayout::BlockLinear, w, h);
    }
}

/// Puts of 4 MiB or more write the object with non-temporal stores (x86_64): whole GOBs laid
/// out first and streamed, partial GOB rows and rectangle edges stored as usual, pitch-linear
/// rows streamed from their first 16-byte boundary. Every byte read back, in both layouts.
#[test]
#[cfg_attr(miri, ignore = "an 8 MB frame byte by byte is hours under Miri")]
fn large_rgba_puts_round_trip_in_both_layouts() {
    let m = module();
    for layout in [ImageLayout::BlockLinear, ImageLayout::PitchLinear] {
        rgba_round_trip_whole_and_partial(&m, layout, 1920, 1080);
    }
}

/// A whole RGBA frame put and read back, then an odd rectangle put over it: only the rectangle
/// changes, and reading the rectangle alone gives what was put.
fn rgba_round_trip_whole_and_partial(m: &BufModule, layout: ImageLayout, w: u32, h: u32) {
    let obj = BufObj::alloc(&BufAttrList::reconcile(&[&rgba(m, layout, w, h)]).unwrap()).unwrap();
    let whole = PixelRect::new(0, 0, w, h);
    put(&obj, None, &frame(&obj, whole, 3, 7)).unwrap();
    let mut back = frame(&obj, whole, 0, 0);
    get(&obj, None, &mut back).unwrap();
    assert!(back == frame(&obj, whole, 3, 0), "{layout:?} {w}x{h} whole frame");
    // An odd rectangle: only it changes.
    let part = PixelRect::new(5, 3, w - 4, h - 2);
    put(&obj, Some(part), &frame(&obj, part, 200, 1)).unwrap();
    get(&obj, None, &mut back).unwrap();
    let (data, pitch) = &back[0];
    for y in 0..h {
        for x in 0..w * 4 {
            let inside = (part.y0..part.y1).contains(&y) && (part.x0 * 4..part.x1 * 4).contains(&x);
            let want = px(if inside { 200 } else { 3 }, 0, x, y);
            assert_eq!(data[(y * pitch + x) as usize], want, "{layout:?} {w}x{h} byte {x} row {y}");
        }
    }
    let mut only = frame(&obj, part, 0, 0);
    get(&obj, Some(part), &mut only).unwrap();
    assert!(only == frame(&obj, part, 200, 0), "{layout:?} {w}x{h} rectangle");
}

#[test]
fn sample_images_take_pixels_through_the_library() {
    let m = module();
    let r = BufAttrList::reconcile(&[&cuda_nvsci_image(&m, 96, 40, true)]).unwrap();
    let obj = BufObj::alloc(&r).unwrap();
    let whole = PixelRect::new(0, 0, 96, 40);
    put(&obj, None, &frame(&obj, whole, 9, 0)).unwrap();
    let mut back = frame(&obj, whole, 0, 0);
    get(&obj, None, &mut back).unwrap();
    assert_eq!(back, frame(&obj, whole, 9, 0));
    // Planar Y8, V8, U8: user planes Y, U, V; the U user plane lands in the third NvSciBuf plane.
    let r = BufAttrList::reconcile(&[&multiplanar_image(&m, 64, 48, true)]).unwrap();
    let obj = BufObj::alloc(&r).unwrap();
    let whole = PixelRect::new(0, 0, 64, 48);
    let kinds: Vec<_> = obj.pixel_planes().unwrap().iter().map(|p| p.kind).collect();
    assert_eq!(kinds, [PixelPlaneKind::Y, PixelPlaneKind::U, PixelPlaneKind::V]);
    put(&obj, None, &frame(&obj, whole, 4, 3)).unwrap();
    let mut back = frame(&obj, whole, 0, 0);
    get(&obj, None, &mut back).unwrap();
    assert_eq!(back, frame(&obj, whole, 4, 0));
}

#[test]
fn bad_pixel_requests_are_named() {
    let m = module();
    let r = BufAttrList::reconcile(&[&nv12_block_linear(&m, 32, 16)]).unwrap();
    let obj = BufObj::alloc(&r).unwrap();
    let whole = PixelRect::new(0, 0, 32, 16);
    let good = frame(&obj, whole, 1, 0);
    let name_of = |e: nvsci::Error| match e {
        Error::InvalidArgument { name, .. } => name,
        other => panic!("expected InvalidArgument, got {other:?}"),
    };
    // The rectangle of an RGBA image: outside, empty, reversed.
    let img = BufObj::alloc(&BufAttrList::reconcile(&[&rgba(&m, ImageLayout::BlockLinear, 32, 16)]).unwrap())
        .unwrap();
    let rgba_frame = frame(&img, whole, 1, 0);
    for rect in [
        PixelRect::new(0, 0, 33, 16),
        PixelRect::new(0, 0, 32, 17),
        PixelRect::new(4, 0, 4, 16),
        PixelRect::new(9, 2, 3, 8),
    ] {
        assert_eq!(name_of(put(&img, Some(rect), &rgba_frame).unwrap_err()), "rect", "{rect:?}");
    }
    // One buffer per user plane (Y, U, V).
    assert_eq!(name_of(put(&obj, None, &good[..2]).unwrap_err()), "planes");
    let mut four = good.clone();
    four.push(good[1].clone());
    assert_eq!(name_of(put(&obj, None, &four).unwrap_err()), "planes");
    // A buffer too small for its rows at its pitch, and a pitch shorter than a row.
    let mut short = good.clone();
    short[1].0.pop();
    assert_eq!(name_of(put(&obj, None, &short).unwrap_err()), "planes");
    let mut narrow = good.clone();
    narrow[0].1 = 31;
    assert_eq!(name_of(put(&obj, None, &narrow).unwrap_err()), "pitch");
    let mut small_out = frame(&obj, whole, 0, 0);
    small_out[0].0.truncate(32 * 15);
    assert_eq!(name_of(get(&obj, None, &mut small_out).unwrap_err()), "planes");
    // The same buffer as U and V ("srcPtrs for any of the planes overlap").
    let same = [
        PlaneSrc { data: &good[0].0, pitch: good[0].1 },
        PlaneSrc { data: &good[1].0, pitch: good[1].1 },
        PlaneSrc { data: &good[1].0, pitch: good[1].1 },
    ];
    assert_eq!(name_of(obj.put_pixels(None, &same).unwrap_err()), "planes");

    // A read-only reference reads but cannot put.
    put(&obj, None, &good).unwrap();
    let ro = obj.dup_with_reduced_perm(Perm::ReadOnly).unwrap();
    assert!(matches!(put(&ro, None, &good), Err(Error::PermissionDenied(_))));
    let mut back = frame(&obj, whole, 0, 0);
    get(&ro, None, &mut back).unwrap();
    assert_eq!(back, good);

    // Pixel access while a CPU mapping is out would alias it: refused.
    {
        let _view = obj.cpu_read().unwrap();
        assert_eq!(name_of(put(&obj, None, &good).unwrap_err()), "cpu access");
        get(&obj, None, &mut back).unwrap();
    }

    // No CPU access asked for: the key is named.
    let r = BufAttrList::reconcile(&[&multiplanar_image(&m, 64, 48, false)]).unwrap();
    let blind = BufObj::alloc(&r).unwrap();
    let f = frame(&blind, PixelRect::new(0, 0, 64, 48), 0, 0);
    assert_eq!(name_of(put(&blind, None, &f).unwrap_err()), "NvSciBufGeneralAttrKey_NeedCpuAccess");

    // Not an image.
    let raw =
        BufObj::alloc(&BufAttrList::reconcile(&[&raw_list(&m, 4096, 64, Perm::ReadWrite, true)]).unwrap())
            .unwrap();
    assert_eq!(name_of(put(&raw, None, &good).unwrap_err()), "buffer");
}

/// Bytes sit where the Tegra block-linear layout puts them (TRM address equations, written here
/// independently of the mock): a CUDA array over the same memory reads what the CPU put.
#[test]
fn block_linear_bytes_follow_the_gob_layout() {
    let m = module();
    // 1920x1080: a put of 4 MiB or more, whose whole GOBs are streamed (not under Miri).
    let sizes: &[(u32, u32)] = if cfg!(miri) { &[(100, 70)] } else { &[(100, 70), (1920, 1080)] };
    for &(w, h) in sizes {
        gob_layout_of_a_put(&m, w, h);
    }
}

fn gob_layout_of_a_put(m: &BufModule, w: u32, h: u32) {
    let mut l = m.attr_list().unwrap();
    l.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::Layout(ImageLayout::BlockLinear),
        BufAttr::ScanType(ScanType::Progressive),
        BufAttr::PlaneCount(1),
        BufAttr::PlaneColorFormat(&[ColorFormat::A8B8G8R8]),
        BufAttr::PlaneWidth(&[w]),
        BufAttr::PlaneHeight(&[h]),
        BufAttr::NeedCpuAccess(true),
        BufAttr::RequiredPerm(Perm::ReadWrite),
    ])
    .unwrap();
    let obj = BufObj::alloc(&BufAttrList::reconcile(&[&l]).unwrap()).unwrap();
    let whole = PixelRect::new(0, 0, w, h);
    put(&obj, None, &frame(&obj, whole, 11, 0)).unwrap();
    let p = obj.planes().unwrap()[0];
    let pitch = u64::from(p.pitch);
    // The block height is not an NvSciBuf output: the mock's documented rule (docs/mock.md),
    // 2^ceil(log2(GOB rows)) GOBs, at most 16: 70 rows = 9 GOB rows -> 16 GOBs (1080 rows too).
    let gobs = 16u64;
    let mem = obj.cpu_read().unwrap();
    let (xe, ye) = (u64::from(w) - 1, u64::from(h) - 1);
    for (x, y) in
        [(0u64, 0u64), (15, 0), (16, 0), (3, 7), (4, 8), (xe, ye), (50, 33), (17, 64), (xe, 0), (0, ye)]
    {
        for c in 0..4 {
            let xb = x * 4 + c;
            let block_rows = 8 * gobs;
            let addr = (y / block_rows) * (pitch / 64) * 512 * gobs
                + (xb / 64) * 512 * gobs
                + (y % block_rows / 8) * 512
                + (xb % 64 / 32) * 256
                + (y % 8 / 2) * 64
                + (xb % 32 / 16) * 32
                + (y % 2) * 16
                + xb % 16;
            assert_eq!(
                mem[(p.offset + addr) as usize],
                px(11, 0, xb as u32, y as u32),
                "pixel ({x}, {y}) byte {c}"
            );
        }
    }
}

/// The examples' NV12 test pattern, rendered tightly packed (as the Y4M reader and the camera
/// source render frames), written into a block-linear NV12 image and read back unchanged.
#[test]
fn block_linear_nv12_frames_from_the_examples_support() {
    let m = module();
    let (w, h) = (64u32, 36u32);
    let obj = BufObj::alloc(&BufAttrList::reconcile(&[&nv12_block_linear(&m, w, h)]).unwrap()).unwrap();
    let layout =
        nvsci::pipeline::FrameLayout::packed(nvsci::pipeline::FrameFormat::nv12(w, h), 1, 1).unwrap();
    let mut frame = vec![0u8; layout.size as usize];
    nv12_pattern::fill_test_pattern(&layout, 7, &mut frame).unwrap();
    nv12_put::put_nv12(&obj, &frame, w, h).unwrap();
    let mut back = vec![0u8; frame.len()];
    nv12_put::get_nv12(&obj, &mut back, w, h).unwrap();
    assert_eq!(back, frame);
    // The planes really are block-linear in memory: luma row 1 does not follow row 0.
    let mem = obj.cpu_read().unwrap();
    let y = obj.planes().unwrap()[0];
    assert_ne!(
        &mem[y.offset as usize + y.pitch as usize..][..w as usize],
        &frame[w as usize..][..w as usize]
    );
    assert_eq!(
        &mem[y.offset as usize..][..16],
        &frame[..16],
        "the first 16 bytes of row 0 lead the first GOB"
    );
}

/// nvscibuf.h (NvSciBuf 2.10), `NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency`: "Indicates
/// whether the CPU is required to flush before reads and after writes. [...] It is set to true
/// in reconciled NvSciBufAttrList if both NvSciBufGeneralAttrKey_EnableCpuCache and
/// NvSciBufGeneralAttrKey_NeedCpuAccess are requested [...] and any of the ISO engines would
/// operate on the buffer." With an ISO engine (VI) named, the CPU views flush the whole buffer
/// (before a read, after a write); with only a non-ISO engine, or without CPU caching, the
/// attribute is false and nothing is flushed. The mock records each
/// `NvSciBufObjFlushCpuCacheRange` in the module's ledger.
#[test]
fn cpu_views_flush_where_an_iso_engine_needs_it() {
    let m = module();
    // SAFETY: `m` is a live module of the mock.
    let ledger = unsafe { nvsci_mock::buf_module_ledger(m.as_raw()) }.unwrap();
    let engine = |engine| PeerHwEngine { engine, platform: Platform::ORIN };
    let make = |engines: &[PeerHwEngine], cache: bool| {
        let mut l = raw_list(&m, 4096, 64, Perm::ReadWrite, true);
        l.set(&[BufAttr::EnableCpuCache(cache), BufAttr::PeerHwEngineArray(engines)]).unwrap();
        BufObj::reconcile_and_alloc(&[&l]).unwrap()
    };
    let whole = nvsci_mock::Flush { offset: 0, len: 4096 };

    let iso = make(&[engine(HwEngine::VI), engine(HwEngine::GPU)], true);
    assert!(iso.cpu_need_sw_cache_coherency().unwrap());
    ledger.take_flushes();
    {
        let mut w = iso.cpu_write().unwrap();
        w[..4].copy_from_slice(b"nvsc");
        assert_eq!(ledger.take_flushes(), [whole], "before the CPU may read through the write view");
    }
    assert_eq!(ledger.take_flushes(), [whole], "after the CPU wrote");
    assert_eq!(&iso.cpu_read().unwrap()[..4], b"nvsc");
    assert_eq!(ledger.take_flushes(), [whole], "before the CPU read");
    iso.cpu_write().unwrap().finish().unwrap();
    assert_eq!(ledger.take_flushes(), [whole, whole]);

    for obj in [make(&[engine(HwEngine::GPU)], true), make(&[engine(HwEngine::VI)], false)] {
        assert!(!obj.cpu_need_sw_cache_coherency().unwrap());
        obj.cpu_write().unwrap()[0] = 1;
        assert_eq!(obj.cpu_read().unwrap()[0], 1);
        assert_eq!(ledger.take_flushes(), [], "no flush where the list does not ask for one");
    }
}

/// The same for the pixel calls: `put_pixels` flushes the rows it wrote after writing them and
/// `get_pixels` the rows it reads before reading them: every plane of a pitch-linear NV12 image a
/// display engine reads (whole images: no rectangle on YUV), and the rectangle's rows of an RGBA
/// image.
#[test]
fn pixel_transfers_flush_the_rows_they_touch_where_an_iso_engine_needs_it() {
    let m = module();
    // SAFETY: `m` is a live module of the mock.
    let ledger = unsafe { nvsci_mock::buf_module_ledger(m.as_raw()) }.unwrap();
    let display = [PeerHwEngine { engine: HwEngine::DISPLAY, platform: Platform::ORIN }];
    let mut l = nv12(&m, 64, 16);
    l.set(&[BufAttr::EnableCpuCache(true), BufAttr::PeerHwEngineArray(&display)]).unwrap();
    let obj = BufObj::reconcile_and_alloc(&[&l]).unwrap();
    assert!(obj.cpu_need_sw_cache_coherency().unwrap());
    let p = obj.planes().unwrap();
    let expected = [
        nvsci_mock::Flush { offset: p[0].offset, len: 16 * u64::from(p[0].pitch) },
        nvsci_mock::Flush { offset: p[1].offset, len: 8 * u64::from(p[1].pitch) },
    ];
    let whole = PixelRect::new(0, 0, 64, 16);
    ledger.take_flushes();
    put(&obj, None, &frame(&obj, whole, 7, 0)).unwrap();
    assert_eq!(ledger.take_flushes(), expected, "after put_pixels");
    let mut back = frame(&obj, whole, 0, 0);
    get(&obj, None, &mut back).unwrap();
    assert_eq!(back, frame(&obj, whole, 7, 0));
    assert_eq!(ledger.take_flushes(), expected, "before get_pixels");

    // Rows 4..10 of an RGBA image.
    let mut l = rgba(&m, ImageLayout::PitchLinear, 64, 16);
    l.set(&[BufAttr::EnableCpuCache(true), BufAttr::PeerHwEngineArray(&display)]).unwrap();
    let obj = BufObj::reconcile_and_alloc(&[&l]).unwrap();
    let p = obj.planes().unwrap()[0];
    let r = PixelRect::new(8, 4, 40, 10);
    let expected =
        [nvsci_mock::Flush { offset: p.offset + 4 * u64::from(p.pitch), len: 6 * u64::from(p.pitch) }];
    ledger.take_flushes();
    put(&obj, Some(r), &frame(&obj, r, 7, 0)).unwrap();
    assert_eq!(ledger.take_flushes(), expected, "after put_pixels");
    let mut back = frame(&obj, r, 0, 0);
    get(&obj, Some(r), &mut back).unwrap();
    assert_eq!(back, frame(&obj, r, 7, 0));
    assert_eq!(ledger.take_flushes(), expected, "before get_pixels");
}

/// Where rows do not sit at `offset + row * pitch` (an interlaced plane's rows alternate between
/// two fields; top padding moves them), the pixel calls flush whole planes rather than miss the
/// rows they touched.
#[test]
fn interlaced_and_padded_planes_are_flushed_whole() {
    let m = module();
    // SAFETY: `m` is a live module of the mock.
    let ledger = unsafe { nvsci_mock::buf_module_ledger(m.as_raw()) }.unwrap();
    let display = [PeerHwEngine { engine: HwEngine::DISPLAY, platform: Platform::ORIN }];
    for (scan, top) in [(ScanType::Interlace, 0u64), (ScanType::Progressive, 4)] {
        let mut l = m.attr_list().unwrap();
        l.set(&[
            BufAttr::Types(&[BufType::IMAGE]),
            BufAttr::Layout(ImageLayout::PitchLinear),
            BufAttr::ScanType(scan),
            BufAttr::PlaneCount(2),
            BufAttr::PlaneColorFormat(&[ColorFormat::Y8, ColorFormat::V8U8]),
            BufAttr::PlaneWidth(&[64, 32]),
            BufAttr::PlaneHeight(&[16, 8]),
            BufAttr::TopPadding(&[top, top / 2]),
            BufAttr::NeedCpuAccess(true),
            BufAttr::RequiredPerm(Perm::ReadWrite),
            BufAttr::EnableCpuCache(true),
            BufAttr::PeerHwEngineArray(&display),
        ])
        .unwrap();
        let obj = BufObj::reconcile_and_alloc(&[&l]).unwrap();
        assert!(obj.cpu_need_sw_cache_coherency().unwrap());
        let p = obj.planes().unwrap();
        let whole: Vec<_> =
            p.iter().map(|p| nvsci_mock::Flush { offset: p.offset, len: p.aligned_size }).collect();
        let r = PixelRect::new(0, 0, 64, 16);
        ledger.take_flushes();
        put(&obj, None, &frame(&obj, r, 3, 0)).unwrap();
        assert_eq!(ledger.take_flushes(), whole, "{scan:?}, top padding {top}");
    }
}

#[test]
fn block_linear_planes_for_a_gpu_start_where_its_arrays_may() {
    // The mock's choice for a GPU's plane alignment (docs/mock.md, PlaneBaseAddrAlign): 64 KiB,
    // what an H100 reports for CUDA arrays; the documented invariant: every PlaneOffset is a
    // multiple of the plane's reconciled PlaneBaseAddrAlign, which is at least that.
    let lib = NvSci::mock();
    let m = BufModule::open(&lib).unwrap();
    for (gpu, layout, want) in [
        (true, ImageLayout::BlockLinear, 65536),
        (false, ImageLayout::BlockLinear, 4096),
        (true, ImageLayout::PitchLinear, 4096),
    ] {
        let mut l = m.attr_list().unwrap();
        l.set(&[
            BufAttr::Types(&[BufType::IMAGE]),
            BufAttr::Layout(layout),
            BufAttr::ScanType(ScanType::Progressive),
            BufAttr::PlaneCount(2),
            BufAttr::PlaneColorFormat(&[ColorFormat::Y8, ColorFormat::V8U8]),
            BufAttr::PlaneWidth(&[100, 50]),
            BufAttr::PlaneHeight(&[20, 10]),
            BufAttr::NeedCpuAccess(true),
            BufAttr::RequiredPerm(Perm::ReadWrite),
        ])
        .unwrap();
        if gpu {
            // A GPU no machine has: the allocation stays host memory everywhere.
            l.set(&[BufAttr::GpuId(&[GpuId([0x7e; 16])])]).unwrap();
        }
        let r = BufAttrList::reconcile(&[&l]).unwrap();
        let aligns = r.get(key::PLANE_BASE_ADDR_ALIGN).unwrap();
        assert_eq!(aligns.as_slice(), &[want, want], "GPU {gpu}, {layout:?}");
        let obj = BufObj::alloc(&r).unwrap();
        for p in obj.planes().unwrap() {
            assert_eq!(p.offset % u64::from(want), 0, "GPU {gpu}, {layout:?}: {p:?}");
        }
        assert!(obj.planes().unwrap()[1].offset >= u64::from(want), "second plane after the first");
    }
}
