//! NvSciBuf emulation, exercised through the function table only.
// `call!` passes raw pointers to the C entry points, so its arguments expand inside `unsafe`.
#![allow(clippy::macro_metavars_in_unsafe)]

mod common;

use common::*;
use nvsci_mock::{HandleCounts, MOCK_PITCH_ALIGN, MOCK_PLANE_ALIGN};
use nvsci_sys::*;
use std::ffi::c_void;
use std::ptr;

#[test]
fn version_check() {
    let t = nvsci_mock::buf_fns();
    let mut ok = false;
    assert_eq!(call!(t.NvSciBufCheckVersionCompatibility(2, 11, &mut ok)), NvSciError_Success);
    assert!(ok);
    assert_eq!(call!(t.NvSciBufCheckVersionCompatibility(2, 0, &mut ok)), NvSciError_Success);
    assert!(ok);
    assert_eq!(call!(t.NvSciBufCheckVersionCompatibility(2, 12, &mut ok)), NvSciError_Success);
    assert!(!ok);
    assert_eq!(call!(t.NvSciBufCheckVersionCompatibility(1, 0, &mut ok)), NvSciError_Success);
    assert!(!ok);
    assert_eq!(call!(t.NvSciBufCheckVersionCompatibility(2, 0, ptr::null_mut())), NvSciError_BadParameter);
}

#[test]
fn table_entries() {
    let t = nvsci_mock::buf_fns();
    assert!(t.has_required());
    assert!(t.NvSciBufObjValidate.is_some());
    assert!(t.NvSciBufObjGetPixels.is_none());
    assert!(t.NvSciBufObjPutPixels.is_none());
}

#[test]
fn set_get_round_trip() {
    let b = Buf::new();
    let ids = [gpu(1), gpu(2)];
    let l = b.list(&[
        types(&[NvSciBufType_RawBuffer]),
        raw_size(1024),
        cpu(true),
        (NvSciBufGeneralAttrKey_GpuId, bytes_of_slice(&ids)),
    ]);
    assert_eq!(b.get(l, NvSciBufGeneralAttrKey_Types).unwrap(), bytes_of(&NvSciBufType_RawBuffer));
    assert_eq!(b.get(l, NvSciBufRawBufferAttrKey_Size).unwrap().len(), 8);
    assert_eq!(b.get_u64s(l, NvSciBufRawBufferAttrKey_Size), [1024]);
    assert_eq!(b.get(l, NvSciBufGeneralAttrKey_NeedCpuAccess).unwrap(), [1]);
    let got = b.get(l, NvSciBufGeneralAttrKey_GpuId).unwrap();
    assert_eq!(got.len(), 32);
    assert_eq!(got, bytes_of_slice(&ids));
    // Unset key: NULL / 0.
    assert_eq!(b.get(l, NvSciBufRawBufferAttrKey_Align), None);
    // Several pairs in one call, and value pointers stay valid while the list lives.
    let t = b.t;
    let mut pairs = [
        NvSciBufAttrKeyValuePair { key: NvSciBufRawBufferAttrKey_Size, value: ptr::null(), len: 0 },
        NvSciBufAttrKeyValuePair { key: NvSciBufGeneralAttrKey_EnableCpuCache, value: ptr::null(), len: 7 },
    ];
    assert_eq!(call!(t.NvSciBufAttrListGetAttrs(l, pairs.as_mut_ptr(), 2)), NvSciError_Success);
    assert_eq!(pairs[0].len, 8);
    assert!(pairs[1].value.is_null() && pairs[1].len == 0);
    let before = pairs[0].value;
    assert_eq!(b.set(l, &[(NvSciBufRawBufferAttrKey_Align, bytes_of(&64u64))]), NvSciError_Success);
    assert_eq!(call!(t.NvSciBufAttrListGetAttrs(l, pairs.as_mut_ptr(), 1)), NvSciError_Success);
    assert_eq!(pairs[0].value, before);
    assert_eq!(unsafe { *(before as *const u64) }, 1024);
    assert_eq!(call!(t.NvSciBufAttrListGetSlotCount(l)), 1);
    b.free(l);
}

#[test]
fn set_attrs_rejections() {
    let b = Buf::new();
    let t = b.t;
    let l = b.list(&[types(&[NvSciBufType_RawBuffer])]);
    let bad = |pairs: &[(u32, Vec<u8>)]| assert_eq!(b.set(l, pairs), NvSciError_BadParameter, "{pairs:?}");
    // Wrong length.
    bad(&[(NvSciBufRawBufferAttrKey_Size, bytes_of(&7u32))]);
    bad(&[(NvSciBufGeneralAttrKey_NeedCpuAccess, bytes_of(&1u32))]);
    bad(&[(NvSciBufGeneralAttrKey_GpuId, vec![0u8; 15])]);
    bad(&[(NvSciBufGeneralAttrKey_GpuId, vec![0u8; 16 * 17])]);
    // Unknown keys.
    bad(&[(0x1234, bytes_of(&1u32))]);
    bad(&[(NvSciBufAttrKey_LowerBound, bytes_of(&1u32))]);
    // Output-only keys.
    bad(&[(NvSciBufGeneralAttrKey_ActualPerm, bytes_of(&NvSciBufAccessPerm_ReadWrite))]);
    bad(&[(NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency, bytes_of(&true))]);
    // Invalid values.
    bad(&[(NvSciBufRawBufferAttrKey_Align, bytes_of(&48u64))]);
    bad(&[(NvSciBufRawBufferAttrKey_Size, bytes_of(&0u64))]);
    bad(&[perm(NvSciBufAccessPerm_Auto)]);
    bad(&[(NvSciBufGeneralAttrKey_NeedCpuAccess, vec![2u8])]);
    // Key of a type that is not in Types.
    bad(&[(NvSciBufImageAttrKey_PlaneCount, bytes_of(&1u32))]);
    // Same key twice in one call; Types again.
    bad(&[cpu(true), cpu(true)]);
    bad(&[types(&[NvSciBufType_RawBuffer])]);
    // A failing call stores nothing.
    bad(&[cpu(true), (0x1234, bytes_of(&1u32))]);
    assert_eq!(b.get(l, NvSciBufGeneralAttrKey_NeedCpuAccess), None);
    // NULL value, NULL array, zero count.
    let mut p =
        NvSciBufAttrKeyValuePair { key: NvSciBufGeneralAttrKey_NeedCpuAccess, value: ptr::null(), len: 1 };
    assert_eq!(call!(t.NvSciBufAttrListSetAttrs(l, &mut p, 1)), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciBufAttrListSetAttrs(l, ptr::null_mut(), 1)), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciBufAttrListSetAttrs(l, &mut p, 0)), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciBufAttrListSetAttrs(ptr::null_mut(), &mut p, 1)), NvSciError_BadParameter);
    // Setting a key twice.
    assert_eq!(b.set(l, &[cpu(true)]), NvSciError_Success);
    bad(&[cpu(false)]);
    b.free(l);

    // Types must come first (or in the same call).
    let l2 = b.list(&[]);
    assert_eq!(b.set(l2, &[raw_size(16)]), NvSciError_BadParameter);
    assert_eq!(b.set(l2, &[raw_size(16), types(&[NvSciBufType_RawBuffer])]), NvSciError_Success);
    b.free(l2);

    // Per-plane arrays hold at most three planes.
    let l3 = b.list(&[types(&[NvSciBufType_Image])]);
    assert_eq!(
        b.set(l3, &[(NvSciBufImageAttrKey_PlaneWidth, bytes_of_slice(&[1u32, 2, 3, 4]))]),
        NvSciError_BadParameter
    );
    assert_eq!(
        b.set(l3, &[(NvSciBufImageAttrKey_PlaneSecondFieldOffset, bytes_of_slice(&[0u64]))]),
        NvSciError_BadParameter
    );
    b.free(l3);
}

#[test]
fn get_attrs_direction_rules() {
    let b = Buf::new();
    let l = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(64), perm(NvSciBufAccessPerm_ReadWrite)]);
    // Output-only key on an unreconciled list.
    assert_eq!(b.get_slot(l, 0, NvSciBufGeneralAttrKey_ActualPerm), Err(NvSciError_BadParameter));
    assert_eq!(b.get_slot(l, 0, 0x1234), Err(NvSciError_BadParameter));
    assert_eq!(b.get_slot(l, 1, NvSciBufRawBufferAttrKey_Size), Err(NvSciError_BadParameter));
    let r = b.reconcile(&[l]).unwrap();
    // Input-only key on a reconciled list.
    assert_eq!(b.get_slot(r, 0, NvSciBufGeneralAttrKey_RequiredPerm), Err(NvSciError_BadParameter));
    assert_eq!(b.get_u32s(r, NvSciBufGeneralAttrKey_ActualPerm), [NvSciBufAccessPerm_ReadWrite]);
    b.free(r);
    b.free(l);
}

#[test]
fn raw_buffer_reconcile() {
    let b = Buf::new();
    let t = b.t;
    let a = b.list(&[
        types(&[NvSciBufType_RawBuffer]),
        raw_size(4096),
        (NvSciBufRawBufferAttrKey_Align, bytes_of(&64u64)),
        perm(NvSciBufAccessPerm_Readonly),
        (NvSciBufGeneralAttrKey_GpuId, bytes_of_slice(&[gpu(0xa)])),
    ]);
    let c = b.list(&[
        types(&[NvSciBufType_RawBuffer]),
        raw_size(4096),
        (NvSciBufRawBufferAttrKey_Align, bytes_of(&256u64)),
        perm(NvSciBufAccessPerm_ReadWrite),
        cpu(true),
        (NvSciBufGeneralAttrKey_GpuId, bytes_of_slice(&[gpu(0xb), gpu(0xa)])),
    ]);
    let r = b.reconcile(&[a, c]).unwrap();
    let mut rec = false;
    assert_eq!(call!(t.NvSciBufAttrListIsReconciled(r, &mut rec)), NvSciError_Success);
    assert!(rec);
    assert_eq!(call!(t.NvSciBufAttrListIsReconciled(a, &mut rec)), NvSciError_Success);
    assert!(!rec);
    assert_eq!(b.get_u32s(r, NvSciBufGeneralAttrKey_Types), [NvSciBufType_RawBuffer]);
    assert_eq!(b.get_u64s(r, NvSciBufRawBufferAttrKey_Size), [4096]);
    assert_eq!(b.get_u64s(r, NvSciBufRawBufferAttrKey_Align), [256]);
    assert_eq!(b.get_u32s(r, NvSciBufGeneralAttrKey_ActualPerm), [NvSciBufAccessPerm_ReadWrite]);
    assert_eq!(b.get(r, NvSciBufGeneralAttrKey_NeedCpuAccess).unwrap(), [1]);
    assert_eq!(b.get(r, NvSciBufGeneralAttrKey_EnableCpuCache).unwrap(), [0]);
    assert_eq!(b.get(r, NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency).unwrap(), [0]);
    assert_eq!(b.get(r, NvSciBufGeneralAttrKey_GpuId).unwrap(), bytes_of_slice(&[gpu(0xa), gpu(0xb)]));
    // One entry per GPU; nobody asked for caching: dGPU/sysmem default false.
    let cache = b.get(r, NvSciBufGeneralAttrKey_EnableGpuCache).unwrap();
    assert_eq!(cache.len(), 2 * 17);
    assert_eq!(&cache[..16], &[0xa; 16]);
    assert_eq!((cache[16], cache[33]), (0, 0));
    let sw = b.get(r, NvSciBufGeneralAttrKey_GpuSwNeedCacheCoherency).unwrap();
    assert_eq!(sw.len(), 2 * 17);
    assert_eq!((sw[16], sw[33]), (0, 0));
    let comp = b.get(r, NvSciBufGeneralAttrKey_EnableGpuCompression).unwrap();
    assert_eq!(comp.len(), 2 * 20);
    // Reconciled lists are read-only.
    assert_eq!(b.set(r, &[cpu(true)]), NvSciError_BadParameter);
    // A reconciled list cannot be reconciled again.
    assert_eq!(b.reconcile(&[r]).unwrap_err().0, NvSciError_BadParameter);
    // Duplicate input.
    assert_eq!(b.reconcile(&[a, a]).unwrap_err().0, NvSciError_BadParameter);
    // Validation against the inputs.
    let mut valid = false;
    let inputs = [a, c];
    assert_eq!(
        call!(t.NvSciBufAttrListValidateReconciled(r, inputs.as_ptr(), 2, &mut valid)),
        NvSciError_Success
    );
    assert!(valid);
    let bigger = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(8192)]);
    assert_eq!(
        call!(t.NvSciBufAttrListValidateReconciled(r, &bigger, 1, &mut valid)),
        NvSciError_ReconciliationFailed
    );
    assert!(!valid);
    for l in [a, c, r, bigger] {
        b.free(l);
    }
}

#[test]
fn gpu_cacheability() {
    let b = Buf::new();
    let cached = |on: bool| {
        (
            NvSciBufGeneralAttrKey_EnableGpuCache,
            bytes_of(&NvSciBufAttrValGpuCache { gpuId: gpu(1), cacheability: on }),
        )
    };
    let ids = (NvSciBufGeneralAttrKey_GpuId, bytes_of_slice(&[gpu(1)]));
    let base = || vec![types(&[NvSciBufType_RawBuffer]), raw_size(64), ids.clone()];

    // Single slot asking for caching, no CPU access: cached, no software coherency.
    let a = b.list(&[base(), vec![cached(true)]].concat());
    let r = b.reconcile(&[a]).unwrap();
    assert_eq!(b.get(r, NvSciBufGeneralAttrKey_EnableGpuCache).unwrap()[16], 1);
    assert_eq!(b.get(r, NvSciBufGeneralAttrKey_GpuSwNeedCacheCoherency).unwrap()[16], 0);
    b.free(r);

    // Same with CPU access in another slot that also asks for caching: coherency needed.
    let c = b.list(&[base(), vec![cached(true), cpu(true)]].concat());
    let r = b.reconcile(&[a, c]).unwrap();
    assert_eq!(b.get(r, NvSciBufGeneralAttrKey_EnableGpuCache).unwrap()[16], 1);
    assert_eq!(b.get(r, NvSciBufGeneralAttrKey_GpuSwNeedCacheCoherency).unwrap()[16], 1);
    b.free(r);

    // A slot that does not mention the GPU contributes the default false (AND).
    let d = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(64)]);
    let r = b.reconcile(&[a, d]).unwrap();
    assert_eq!(b.get(r, NvSciBufGeneralAttrKey_EnableGpuCache).unwrap()[16], 0);
    assert_eq!(b.get(r, NvSciBufGeneralAttrKey_GpuSwNeedCacheCoherency).unwrap()[16], 0);
    b.free(r);

    // Cacheability for a GPU that is not in GpuId: conflict on EnableGpuCache.
    let e = b.list(&[
        types(&[NvSciBufType_RawBuffer]),
        raw_size(64),
        (
            NvSciBufGeneralAttrKey_EnableGpuCache,
            bytes_of(&NvSciBufAttrValGpuCache { gpuId: gpu(9), cacheability: true }),
        ),
    ]);
    let (err, conflict) = b.reconcile(&[e]).unwrap_err();
    assert_eq!(err, NvSciError_ReconciliationFailed);
    assert!(b.get(conflict, NvSciBufGeneralAttrKey_EnableGpuCache).is_some());
    assert!(b.dump(conflict).starts_with("NvSciBufGeneralAttrKey_EnableGpuCache: slot 0 names GPU 0909"));
    b.free(conflict);
    for l in [a, c, d, e] {
        b.free(l);
    }
}

#[test]
fn cpu_sw_cache_coherency_setting() {
    let b = Buf::new();
    let l = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(64)]);
    let r0 = b.reconcile(&[l]).unwrap();
    unsafe { nvsci_mock::set_cpu_need_sw_cache_coherency(b.m, true) };
    let r1 = b.reconcile(&[l]).unwrap();
    assert_eq!(b.get(r0, NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency).unwrap(), [0]);
    assert_eq!(b.get(r1, NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency).unwrap(), [1]);
    for x in [l, r0, r1] {
        b.free(x);
    }
}

#[test]
fn raw_size_conflict() {
    let b = Buf::new();
    let t = b.t;
    let a = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(4096)]);
    let c = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(8192), cpu(true)]);
    let before = b.ledger().counts();
    let (err, conflict) = b.reconcile(&[a, c]).unwrap_err();
    assert_eq!(err, NvSciError_ReconciliationFailed);
    assert!(!conflict.is_null());
    // The conflict list is a new, counted list.
    assert_eq!(b.ledger().counts().attr_lists, before.attr_lists + 1);
    assert_eq!(b.get(conflict, NvSciBufRawBufferAttrKey_Size).unwrap(), bytes_of(&4096u64));
    assert_eq!(b.get(conflict, NvSciBufGeneralAttrKey_NeedCpuAccess), None);
    assert_eq!(b.dump(conflict), "NvSciBufRawBufferAttrKey_Size: slot 0 = 4096, slot 1 = 8192\n");
    let mut rec = true;
    assert_eq!(call!(t.NvSciBufAttrListIsReconciled(conflict, &mut rec)), NvSciError_Success);
    assert!(!rec);
    // ReconcileAndObjAlloc reports the same conflict.
    let inputs = [a, c];
    let mut obj = ptr::null_mut();
    let mut conflict2 = ptr::null_mut();
    assert_eq!(
        call!(t.NvSciBufAttrListReconcileAndObjAlloc(inputs.as_ptr(), 2, &mut obj, &mut conflict2)),
        NvSciError_ReconciliationFailed
    );
    assert!(obj.is_null() && !conflict2.is_null());
    for l in [a, c, conflict, conflict2] {
        b.free(l);
    }
    assert_eq!(b.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn types_conflict_and_mandatory_keys() {
    let b = Buf::new();
    let raw = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(64)]);
    let img = b.list(&nv12(64, 64));
    let (err, conflict) = b.reconcile(&[raw, img]).unwrap_err();
    assert_eq!(err, NvSciError_ReconciliationFailed);
    assert!(b.get(conflict, NvSciBufGeneralAttrKey_Types).is_some());
    assert!(b.dump(conflict).starts_with("NvSciBufGeneralAttrKey_Types: slot 0 = 1, slot 1 = 2"));
    b.free(conflict);

    // Missing mandatory keys are documented as BadParameter (no conflict list).
    let no_types = b.list(&[cpu(true)]);
    assert_eq!(b.reconcile(&[no_types]).unwrap_err(), (NvSciError_BadParameter, ptr::null_mut()));
    let no_size = b.list(&[types(&[NvSciBufType_RawBuffer])]);
    assert_eq!(b.reconcile(&[no_size]).unwrap_err(), (NvSciError_BadParameter, ptr::null_mut()));
    let mut attrs = nv12(64, 64);
    attrs.retain(|(k, _)| *k != NvSciBufImageAttrKey_PlaneHeight);
    let no_height = b.list(&attrs);
    assert_eq!(b.reconcile(&[no_height]).unwrap_err(), (NvSciError_BadParameter, ptr::null_mut()));
    // ... unless another slot provides them.
    let r = b.reconcile(&[no_height, img]).unwrap();
    b.free(r);
    // Tensors are not emulated.
    let tensor = b.list(&[types(&[NvSciBufType_Tensor])]);
    assert_eq!(b.reconcile(&[tensor]).unwrap_err().0, NvSciError_NotSupported);
    for l in [raw, img, no_types, no_size, no_height, tensor] {
        b.free(l);
    }
}

#[test]
fn nv12_layout() {
    let b = Buf::new();
    let mut attrs = nv12(1920, 1080);
    attrs.push(cpu(true));
    let producer = b.list(&attrs);
    let consumer = b.list(&nv12(1920, 1080));
    let r = b.reconcile(&[producer, consumer]).unwrap();
    assert_eq!(MOCK_PITCH_ALIGN, 256);
    assert_eq!(MOCK_PLANE_ALIGN, 4096);
    // Y: 1920 B/row -> pitch 2048; 2048 * 1080 = 2211840 (= 540 * 4096).
    // UV (V8U8, 16 bpp): 960 * 2 = 1920 B/row -> 2048; 2048 * 540 = 1105920 (= 270 * 4096).
    assert_eq!(b.get_u32s(r, NvSciBufImageAttrKey_PlanePitch), [2048, 2048]);
    assert_eq!(b.get_u32s(r, NvSciBufImageAttrKey_PlaneAlignedHeight), [1080, 540]);
    assert_eq!(b.get_u64s(r, NvSciBufImageAttrKey_PlaneOffset), [0, 2211840]);
    assert_eq!(b.get_u64s(r, NvSciBufImageAttrKey_PlaneAlignedSize), [2211840, 1105920]);
    assert_eq!(b.get_u64s(r, NvSciBufImageAttrKey_Size), [3317760]);
    assert_eq!(b.get_u64s(r, NvSciBufImageAttrKey_Alignment), [4096]);
    assert_eq!(b.get_u32s(r, NvSciBufImageAttrKey_PlaneBitsPerPixel), [8, 16]);
    assert_eq!(b.get(r, NvSciBufImageAttrKey_PlaneChannelCount).unwrap(), [1, 2]);
    assert_eq!(b.get_u32s(r, NvSciBufImageAttrKey_PlaneDatatype), [NvSciDataType_Uint8, NvSciDataType_Uint8]);
    assert_eq!(b.get_u32s(r, NvSciBufImageAttrKey_PlaneBaseAddrAlign), [4096, 4096]);
    assert_eq!(b.get_u32s(r, NvSciBufImageAttrKey_PlaneCount), [2]);
    assert_eq!(b.get_u32s(r, NvSciBufImageAttrKey_PlaneWidth), [1920, 960]);
    assert_eq!(b.get_u64s(r, NvSciBufImageAttrKey_PlaneSecondFieldOffset), [0, 0]);
    assert_eq!(b.get_u32s(r, NvSciBufImageAttrKey_Layout), [NvSciBufImage_PitchLinearType]);

    // A larger base alignment in one slot applies to that plane.
    let mut aligned = nv12(1920, 1080);
    aligned.push((NvSciBufImageAttrKey_PlaneBaseAddrAlign, bytes_of_slice(&[4096u32, 65536])));
    let a = b.list(&aligned);
    let r2 = b.reconcile(&[a, consumer]).unwrap();
    assert_eq!(b.get_u32s(r2, NvSciBufImageAttrKey_PlaneBaseAddrAlign), [4096, 65536]);
    // 2211840 rounded up to 64 KiB = 2228224; plane 0 absorbs the gap so sizes add up.
    assert_eq!(b.get_u64s(r2, NvSciBufImageAttrKey_PlaneOffset), [0, 2228224]);
    assert_eq!(b.get_u64s(r2, NvSciBufImageAttrKey_PlaneAlignedSize), [2228224, 1114112]);
    assert_eq!(b.get_u64s(r2, NvSciBufImageAttrKey_Size), [2228224 + 1114112]);

    // Allocation of the image honours size and the largest plane alignment.
    let t = b.t;
    let mut obj = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjAlloc(r2, &mut obj)), NvSciError_Success);
    let mut p: *const c_void = ptr::null();
    assert_eq!(call!(t.NvSciBufObjGetConstCpuPtr(obj, &mut p)), NvSciError_BadParameter);
    call!(t.NvSciBufObjFree(obj));
    assert_eq!(call!(t.NvSciBufObjAlloc(r, &mut obj)), NvSciError_Success);
    assert_eq!(call!(t.NvSciBufObjGetConstCpuPtr(obj, &mut p)), NvSciError_Success);
    assert_eq!(p as usize % 4096, 0);
    let data = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), 3317760) };
    assert!(data.iter().all(|x| *x == 0));
    call!(t.NvSciBufObjFree(obj));
    for l in [producer, consumer, r, a, r2] {
        b.free(l);
    }
}

#[test]
fn image_conflicts_and_unsupported() {
    let b = Buf::new();
    let a = b.list(&nv12(1920, 1080));
    let c = b.list(&nv12(1280, 720));
    let (err, conflict) = b.reconcile(&[a, c]).unwrap_err();
    assert_eq!(err, NvSciError_ReconciliationFailed);
    assert!(b.get(conflict, NvSciBufImageAttrKey_PlaneWidth).is_some());
    assert!(b.get(conflict, NvSciBufImageAttrKey_PlaneHeight).is_some());
    assert_eq!(b.get(conflict, NvSciBufImageAttrKey_PlaneCount), None);
    let text = b.dump(conflict);
    assert!(
        text.contains("NvSciBufImageAttrKey_PlaneWidth: slot 0 = [1920, 960], slot 1 = [1280, 640]\n"),
        "{text}"
    );
    assert!(
        text.contains("NvSciBufImageAttrKey_PlaneHeight: slot 0 = [1080, 540], slot 1 = [720, 360]\n"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 2);
    b.free(conflict);

    let with = |key: u32, v: Vec<u8>| {
        let mut attrs: Vec<(u32, Vec<u8>)> = nv12(64, 64).into_iter().filter(|(k, _)| *k != key).collect();
        attrs.push((key, v));
        b.list(&attrs)
    };
    let block = with(NvSciBufImageAttrKey_Layout, bytes_of(&NvSciBufImage_BlockLinearType));
    assert_eq!(b.reconcile(&[block]).unwrap_err().0, NvSciError_NotSupported);
    let bayer = with(
        NvSciBufImageAttrKey_PlaneColorFormat,
        bytes_of_slice(&[NvSciColor_Bayer8RGGB, NvSciColor_V8U8]),
    );
    assert_eq!(b.reconcile(&[bayer]).unwrap_err().0, NvSciError_NotSupported);
    let zero = with(NvSciBufImageAttrKey_PlaneWidth, bytes_of_slice(&[0u32, 0]));
    assert_eq!(b.reconcile(&[zero]).unwrap_err().0, NvSciError_BadParameter);
    let short = with(NvSciBufImageAttrKey_PlaneHeight, bytes_of_slice(&[64u32]));
    assert_eq!(b.reconcile(&[short]).unwrap_err().0, NvSciError_BadParameter);
    let padded = with(NvSciBufImageAttrKey_TopPadding, bytes_of_slice(&[2u64, 0]));
    assert_eq!(b.reconcile(&[padded]).unwrap_err().0, NvSciError_NotSupported);
    let unpadded = with(NvSciBufImageAttrKey_TopPadding, bytes_of_slice(&[0u64, 0]));
    let r = b.reconcile(&[unpadded]).unwrap();
    assert_eq!(b.get_u64s(r, NvSciBufImageAttrKey_TopPadding), [0, 0]);
    for l in [a, c, block, bayer, zero, short, padded, unpadded, r] {
        b.free(l);
    }
}

#[test]
fn objects_and_permissions() {
    let b = Buf::new();
    let t = b.t;
    let l = b.list(&[
        types(&[NvSciBufType_RawBuffer]),
        raw_size(256),
        cpu(true),
        (NvSciBufRawBufferAttrKey_Align, bytes_of(&128u64)),
    ]);
    // Unreconciled list: no allocation.
    let mut obj = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjAlloc(l, &mut obj)), NvSciError_BadParameter);
    let r = b.reconcile(&[l]).unwrap();
    // The reconciled list says Readonly (nobody asked for more); the allocation gets ReadWrite.
    assert_eq!(b.get_u32s(r, NvSciBufGeneralAttrKey_ActualPerm), [NvSciBufAccessPerm_Readonly]);
    assert_eq!(call!(t.NvSciBufObjAlloc(r, &mut obj)), NvSciError_Success);
    assert_eq!(call!(t.NvSciBufObjAlloc(r, ptr::null_mut())), NvSciError_BadParameter);
    b.free(r);
    b.free(l);

    let mut objl = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjGetAttrList(obj, &mut objl)), NvSciError_Success);
    assert_eq!(b.get_u32s(objl, NvSciBufGeneralAttrKey_ActualPerm), [NvSciBufAccessPerm_ReadWrite]);
    assert_eq!(b.set(objl, &[cpu(true)]), NvSciError_BadParameter);

    let mut p: *mut c_void = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjGetCpuPtr(obj, &mut p)), NvSciError_Success);
    assert_eq!(p as usize % 128, 0);
    unsafe { p.cast::<u8>().write_bytes(0x5a, 256) };

    // Read-only duplicate.
    let mut ro = ptr::null_mut();
    assert_eq!(
        call!(t.NvSciBufObjDupWithReducePerm(obj, NvSciBufAccessPerm_Readonly, &mut ro)),
        NvSciError_Success
    );
    let mut p2: *mut c_void = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjGetCpuPtr(ro, &mut p2)), NvSciError_BadParameter);
    let mut cp: *const c_void = ptr::null();
    assert_eq!(call!(t.NvSciBufObjGetConstCpuPtr(ro, &mut cp)), NvSciError_Success);
    assert_eq!(cp, p.cast_const());
    let mut rol = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjGetAttrList(ro, &mut rol)), NvSciError_Success);
    assert_ne!(rol, objl);
    assert_eq!(b.get_u32s(rol, NvSciBufGeneralAttrKey_ActualPerm), [NvSciBufAccessPerm_Readonly]);
    // Permissions cannot be raised, and only Readonly / ReadWrite are valid.
    let mut up = ptr::null_mut();
    assert_eq!(
        call!(t.NvSciBufObjDupWithReducePerm(ro, NvSciBufAccessPerm_ReadWrite, &mut up)),
        NvSciError_BadParameter
    );
    assert_eq!(
        call!(t.NvSciBufObjDupWithReducePerm(obj, NvSciBufAccessPerm_Auto, &mut up)),
        NvSciError_BadParameter
    );
    assert_eq!(
        call!(t.NvSciBufObjDupWithReducePerm(obj, NvSciBufAccessPerm_Invalid, &mut up)),
        NvSciError_BadParameter
    );
    assert!(up.is_null());
    // Plain dup keeps the permission.
    let mut d = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjDup(ro, &mut d)), NvSciError_Success);
    assert_eq!(call!(t.NvSciBufObjGetCpuPtr(d, &mut p2)), NvSciError_BadParameter);
    // Same permission as the source: like Dup.
    let mut rw = ptr::null_mut();
    assert_eq!(
        call!(t.NvSciBufObjDupWithReducePerm(obj, NvSciBufAccessPerm_ReadWrite, &mut rw)),
        NvSciError_Success
    );
    assert_eq!(call!(t.NvSciBufObjGetCpuPtr(rw, &mut p2)), NvSciError_Success);
    assert_eq!(p2, p);

    // Flush: bounds-checked no-op.
    assert_eq!(call!(t.NvSciBufObjFlushCpuCacheRange(obj, 0, 256)), NvSciError_Success);
    assert_eq!(call!(t.NvSciBufObjFlushCpuCacheRange(obj, 255, 1)), NvSciError_Success);
    assert_eq!(call!(t.NvSciBufObjFlushCpuCacheRange(obj, 0, 0)), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciBufObjFlushCpuCacheRange(obj, 200, 57)), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciBufObjFlushCpuCacheRange(obj, u64::MAX, 2)), NvSciError_Overflow);

    // The memory outlives the first reference.
    let counts = b.ledger().counts();
    assert_eq!(counts.objects, 4);
    call!(t.NvSciBufObjFree(obj));
    let data = unsafe { std::slice::from_raw_parts(cp.cast::<u8>(), 256) };
    assert!(data.iter().all(|x| *x == 0x5a));
    assert_eq!(call!(t.NvSciBufObjValidate(ro)), NvSciError_Success);
    // Freeing a borrowed list is ignored.
    b.free(rol);
    assert_eq!(b.get_u32s(rol, NvSciBufGeneralAttrKey_ActualPerm), [NvSciBufAccessPerm_Readonly]);
    for o in [ro, d, rw] {
        call!(t.NvSciBufObjFree(o));
    }
    assert_eq!(b.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn no_cpu_access() {
    let b = Buf::new();
    let t = b.t;
    let l = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(64)]);
    let mut obj = ptr::null_mut();
    let mut conflict = ptr::null_mut();
    assert_eq!(
        call!(t.NvSciBufAttrListReconcileAndObjAlloc(&l, 1, &mut obj, &mut conflict)),
        NvSciError_Success
    );
    assert!(conflict.is_null());
    let mut p: *mut c_void = ptr::null_mut();
    let mut cp: *const c_void = ptr::null();
    assert_eq!(call!(t.NvSciBufObjGetCpuPtr(obj, &mut p)), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciBufObjGetConstCpuPtr(obj, &mut cp)), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciBufObjFlushCpuCacheRange(obj, 0, 64)), NvSciError_NotPermitted);
    call!(t.NvSciBufObjFree(obj));
    b.free(l);
    // The intermediate reconciled list was freed.
    assert_eq!(b.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn clone_append_and_slots() {
    let b = Buf::new();
    let t = b.t;
    let a = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(64)]);
    let c = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(64), cpu(true)]);
    // Clone: independent copy whose keys may be set again.
    let mut cl = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufAttrListClone(a, &mut cl)), NvSciError_Success);
    assert_eq!(b.set(cl, &[raw_size(128)]), NvSciError_Success);
    assert_eq!(b.get_u64s(cl, NvSciBufRawBufferAttrKey_Size), [128]);
    assert_eq!(b.get_u64s(a, NvSciBufRawBufferAttrKey_Size), [64]);
    // Clone needs Types.
    let empty = b.list(&[]);
    let mut cl2 = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufAttrListClone(empty, &mut cl2)), NvSciError_BadParameter);
    // Append: slots concatenated, read-only.
    let inputs = [a, c];
    let mut ap = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufAttrListAppendUnreconciled(inputs.as_ptr(), 2, &mut ap)), NvSciError_Success);
    assert_eq!(call!(t.NvSciBufAttrListGetSlotCount(ap)), 2);
    assert_eq!(b.get_slot(ap, 0, NvSciBufGeneralAttrKey_NeedCpuAccess), Ok(None));
    assert_eq!(b.get_slot(ap, 1, NvSciBufGeneralAttrKey_NeedCpuAccess), Ok(Some(vec![1])));
    assert_eq!(b.get_slot(ap, 2, NvSciBufGeneralAttrKey_NeedCpuAccess), Err(NvSciError_BadParameter));
    assert_eq!(b.set(ap, &[(NvSciBufRawBufferAttrKey_Align, bytes_of(&8u64))]), NvSciError_BadParameter);
    let dup = [a, a];
    assert_eq!(
        call!(t.NvSciBufAttrListAppendUnreconciled(dup.as_ptr(), 2, &mut cl2)),
        NvSciError_BadParameter
    );
    let with_empty = [a, empty];
    assert_eq!(
        call!(t.NvSciBufAttrListAppendUnreconciled(with_empty.as_ptr(), 2, &mut cl2)),
        NvSciError_BadParameter
    );
    // An appended list reconciles like its parts.
    let r = b.reconcile(&[ap]).unwrap();
    assert_eq!(b.get(r, NvSciBufGeneralAttrKey_NeedCpuAccess).unwrap(), [1]);
    // Lists of different modules do not mix.
    let other = Buf::new();
    let foreign = other.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(64)]);
    assert_eq!(b.reconcile(&[a, foreign]).unwrap_err().0, NvSciError_BadParameter);
    other.free(foreign);
    // Debug dump of an ordinary list.
    let text = b.dump(ap);
    assert!(text.contains("slots=2"), "{text}");
    assert!(text.contains("NvSciBufRawBufferAttrKey_Size = 64"), "{text}");
    call!(t.NvSciBufAttrListFreeDesc(ptr::null_mut()));
    call!(t.NvSciBufAttrListAndObjFreeDesc(ptr::null_mut()));
    for l in [a, c, cl, empty, ap, r] {
        b.free(l);
    }
    assert_eq!(b.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn handle_validation() {
    let b = Buf::new();
    let t = b.t;
    let l = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(64)]);
    // A list passed as an object or a module, NULL handles.
    let mut p: *mut c_void = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjGetCpuPtr(l.cast(), &mut p)), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciBufObjValidate(l.cast())), NvSciError_BadParameter);
    let mut l2 = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufAttrListCreate(l.cast(), &mut l2)), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciBufAttrListCreate(ptr::null_mut(), &mut l2)), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciBufAttrListCreate(b.m, ptr::null_mut())), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciBufModuleOpen(ptr::null_mut())), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciBufAttrListGetSlotCount(ptr::null_mut())), 0);
    // void functions ignore NULL and foreign handles.
    call!(t.NvSciBufAttrListFree(ptr::null_mut()));
    call!(t.NvSciBufObjFree(ptr::null_mut()));
    call!(t.NvSciBufObjFree(l.cast()));
    call!(t.NvSciBufModuleClose(ptr::null_mut()));
    assert_eq!(unsafe { nvsci_mock::buf_module_ledger(ptr::null_mut()) }.map(|_| ()), None);
    assert_eq!(unsafe { nvsci_mock::buf_module_ledger(l.cast()) }.map(|_| ()), None);
    // IPC exports check their handles first (NULL object), then the endpoint (0 is none).
    let mut desc = NvSciBufObjIpcExportDescriptor::default();
    assert_eq!(
        call!(t.NvSciBufObjIpcExport(ptr::null_mut(), NvSciBufAccessPerm_Readonly, 0, &mut desc)),
        NvSciError_BadParameter
    );
    b.free(l);
}

#[test]
fn ledger_counts() {
    let global_before = nvsci_mock::global_ledger().counts();
    let b = Buf::new();
    let ledger = b.ledger();
    assert_eq!(ledger.counts(), HandleCounts { modules: 1, ..Default::default() });
    assert!(nvsci_mock::global_ledger().counts().modules >= 1);
    let t = b.t;
    let l = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(64)]);
    let r = b.reconcile(&[l]).unwrap();
    let mut obj = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjAlloc(r, &mut obj)), NvSciError_Success);
    let mut dump: *mut c_void = ptr::null_mut();
    let mut len = 0usize;
    assert_eq!(call!(t.NvSciBufAttrListDebugDump(l, &mut dump, &mut len)), NvSciError_Success);
    let counts = ledger.counts();
    assert_eq!(
        counts,
        HandleCounts { modules: 1, attr_lists: 2, objects: 1, descs: 1, ..Default::default() }
    );
    assert_eq!(counts.total(), 5);
    call!(t.NvSciBufAttrListFreeDesc(dump));
    call!(t.NvSciBufObjFree(obj));
    b.free(l);
    b.free(r);
    assert_eq!(ledger.counts(), HandleCounts { modules: 1, ..Default::default() });
    drop(b);
    assert_eq!(ledger.counts().total(), 0);
    // Other tests run concurrently: only check that this test's handles are not left behind.
    let _ = global_before;
}
