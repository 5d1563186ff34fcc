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
    assert!(t.NvSciBufObjGetPixels.is_some());
    assert!(t.NvSciBufObjPutPixels.is_some());
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
    let (err, refused) = b.reconcile(&[tensor]).unwrap_err();
    assert_eq!(err, NvSciError_NotSupported);
    // The refusal comes with a list naming the key and the value given.
    assert_eq!(b.get_u32s(refused, NvSciBufGeneralAttrKey_Types), [NvSciBufType_Tensor]);
    let text = b.dump(refused);
    assert!(
        text.starts_with("NvSciBufGeneralAttrKey_Types: slot 0 = ") && text.contains("tensors"),
        "{text}"
    );
    b.free(refused);
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
    // Block-linear and padded images reconcile (layouts: tests/buf.rs `image_layout_invariants`);
    // surface-based keys and packed formats the mock does not size are refused.
    let block = with(NvSciBufImageAttrKey_Layout, bytes_of(&NvSciBufImage_BlockLinearType));
    let rb = b.reconcile(&[block]).unwrap();
    assert_eq!(b.get_u32s(rb, NvSciBufImageAttrKey_Layout), [NvSciBufImage_BlockLinearType]);
    b.free(rb);
    let bayer = with(
        NvSciBufImageAttrKey_PlaneColorFormat,
        bytes_of_slice(&[NvSciColor_Bayer8RGGB, NvSciColor_V8U8]),
    );
    let (err, refused) = b.reconcile(&[bayer]).unwrap_err();
    assert_eq!(err, NvSciError_NotSupported);
    assert_eq!(
        b.get_u32s(refused, NvSciBufImageAttrKey_PlaneColorFormat),
        [NvSciColor_Bayer8RGGB, NvSciColor_V8U8]
    );
    assert!(b.dump(refused).starts_with("NvSciBufImageAttrKey_PlaneColorFormat: "));
    b.free(refused);
    let vpr = with(NvSciBufImageAttrKey_VprFlag, bytes_of(&true));
    let (err, refused) = b.reconcile(&[vpr]).unwrap_err();
    assert_eq!(err, NvSciError_NotSupported);
    assert_eq!(b.get(refused, NvSciBufImageAttrKey_VprFlag).unwrap(), [1]);
    b.free(refused);
    b.free(vpr);
    let zero = with(NvSciBufImageAttrKey_PlaneWidth, bytes_of_slice(&[0u32, 0]));
    assert_eq!(b.reconcile(&[zero]).unwrap_err().0, NvSciError_BadParameter);
    let short = with(NvSciBufImageAttrKey_PlaneHeight, bytes_of_slice(&[64u32]));
    assert_eq!(b.reconcile(&[short]).unwrap_err().0, NvSciError_BadParameter);
    let padded = with(NvSciBufImageAttrKey_TopPadding, bytes_of_slice(&[2u64, 0]));
    let rp = b.reconcile(&[padded]).unwrap();
    assert_eq!(b.get_u64s(rp, NvSciBufImageAttrKey_TopPadding), [2, 0]);
    b.free(rp);
    let padded_short = with(NvSciBufImageAttrKey_TopPadding, bytes_of_slice(&[2u64]));
    assert_eq!(b.reconcile(&[padded_short]).unwrap_err().0, NvSciError_BadParameter);
    b.free(padded_short);
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
    // The module's own ledger; the global one, which other tests here change concurrently, is
    // checked in tests/global_ledger.rs.
    let b = Buf::new();
    let ledger = b.ledger();
    assert_eq!(ledger.counts(), HandleCounts { modules: 1, ..Default::default() });
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
}

// ---------------------------------------------------------------- images: layouts and pixels

/// A named set of plane formats, widths and heights.
type FormatCase = (&'static str, Vec<u32>, Vec<u32>, Vec<u32>);

/// An image request: formats with widths and heights per plane.
struct Img {
    block_linear: bool,
    interlaced: bool,
    formats: Vec<u32>,
    widths: Vec<u32>,
    heights: Vec<u32>,
    /// Top, bottom, left, right padding per plane (pixels).
    pads: Option<[Vec<u64>; 4]>,
}

/// Bytes per pixel of the formats the tests use (NvSciBufAttrValColorFmt: one byte per channel).
#[allow(non_upper_case_globals)]
fn bytes_per_pixel(f: u32) -> u64 {
    match f {
        NvSciColor_Y8 | NvSciColor_U8 | NvSciColor_V8 => 1,
        NvSciColor_V8U8 | NvSciColor_U8V8 => 2,
        NvSciColor_A8B8G8R8 | NvSciColor_B8G8R8A8 | NvSciColor_A8R8G8B8 => 4,
        _ => panic!("format {f}"),
    }
}

impl Img {
    /// The planar YUV and RGBA formats of NVIDIA's samples and camera stacks at `w` x `h`.
    fn formats(w: u32, h: u32) -> Vec<FormatCase> {
        let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
        vec![
            ("NV12", vec![NvSciColor_Y8, NvSciColor_V8U8], vec![w, cw], vec![h, ch]),
            ("YV12", vec![NvSciColor_Y8, NvSciColor_V8, NvSciColor_U8], vec![w, cw, cw], vec![h, ch, ch]),
            ("I420", vec![NvSciColor_Y8, NvSciColor_U8, NvSciColor_V8], vec![w, cw, cw], vec![h, ch, ch]),
            ("NV16", vec![NvSciColor_Y8, NvSciColor_V8U8], vec![w, cw], vec![h, h]),
            ("NV21", vec![NvSciColor_Y8, NvSciColor_U8V8], vec![w, cw], vec![h, ch]),
            ("BGRA", vec![NvSciColor_B8G8R8A8], vec![w], vec![h]),
            ("ABGR", vec![NvSciColor_A8B8G8R8], vec![w], vec![h]),
        ]
    }

    fn attrs(&self, cpu_access: bool) -> Vec<(u32, Vec<u8>)> {
        let layout =
            if self.block_linear { NvSciBufImage_BlockLinearType } else { NvSciBufImage_PitchLinearType };
        let scan = if self.interlaced { NvSciBufScan_InterlaceType } else { NvSciBufScan_ProgressiveType };
        let mut v = vec![
            types(&[NvSciBufType_Image]),
            (NvSciBufImageAttrKey_Layout, bytes_of(&layout)),
            (NvSciBufImageAttrKey_ScanType, bytes_of(&scan)),
            (NvSciBufImageAttrKey_PlaneCount, bytes_of(&(self.formats.len() as u32))),
            (NvSciBufImageAttrKey_PlaneColorFormat, bytes_of_slice(&self.formats)),
            (NvSciBufImageAttrKey_PlaneWidth, bytes_of_slice(&self.widths)),
            (NvSciBufImageAttrKey_PlaneHeight, bytes_of_slice(&self.heights)),
            cpu(cpu_access),
            perm(NvSciBufAccessPerm_ReadWrite),
        ];
        if let Some(p) = &self.pads {
            let keys = [
                NvSciBufImageAttrKey_TopPadding,
                NvSciBufImageAttrKey_BottomPadding,
                NvSciBufImageAttrKey_LeftPadding,
                NvSciBufImageAttrKey_RightPadding,
            ];
            for (k, vals) in keys.iter().zip(p) {
                v.push((*k, bytes_of_slice(vals)));
            }
        }
        v
    }

    fn pad(&self, which: usize, plane: usize) -> u64 {
        self.pads.as_ref().map_or(0, |p| p[which][plane])
    }
}

/// The reconciled plane layout, as the list reports it.
#[derive(Debug)]
struct Planes {
    pitch: Vec<u32>,
    aligned_height: Vec<u32>,
    offset: Vec<u64>,
    aligned_size: Vec<u64>,
    second_field: Vec<u64>,
    align: Vec<u32>,
    size: u64,
}

fn planes_of(b: &Buf, r: NvSciBufAttrList) -> Planes {
    Planes {
        pitch: b.get_u32s(r, NvSciBufImageAttrKey_PlanePitch),
        aligned_height: b.get_u32s(r, NvSciBufImageAttrKey_PlaneAlignedHeight),
        offset: b.get_u64s(r, NvSciBufImageAttrKey_PlaneOffset),
        aligned_size: b.get_u64s(r, NvSciBufImageAttrKey_PlaneAlignedSize),
        second_field: b.get_u64s(r, NvSciBufImageAttrKey_PlaneSecondFieldOffset),
        align: b.get_u32s(r, NvSciBufImageAttrKey_PlaneBaseAddrAlign),
        size: b.get_u64s(r, NvSciBufImageAttrKey_Size)[0],
    }
}

/// The documented invariants of a reconciled image layout (nvscibuf.h: PlanePitch,
/// PlaneAlignedHeight, PlaneAlignedSize, Size, Alignment, PlaneSecondFieldOffset, paddings) and
/// the Tegra block-linear rules (GOB 64 bytes x 8 rows, blocks of 2^n GOBs, at most 32).
fn check_invariants(b: &Buf, r: NvSciBufAttrList, img: &Img, what: &str) {
    let p = planes_of(b, r);
    let n = img.formats.len();
    assert_eq!(p.pitch.len(), n, "{what}");
    for (k, which) in [
        (NvSciBufImageAttrKey_TopPadding, 0),
        (NvSciBufImageAttrKey_BottomPadding, 1),
        (NvSciBufImageAttrKey_LeftPadding, 2),
        (NvSciBufImageAttrKey_RightPadding, 3),
    ] {
        let want: Vec<u64> = (0..n).map(|i| img.pad(which, i)).collect();
        assert_eq!(b.get_u64s(r, k), want, "{what}: padding key {k:#x}");
    }
    let mut sum = 0;
    for i in 0..n {
        let bpp = bytes_per_pixel(img.formats[i]);
        let padded_w = img.pad(2, i) + u64::from(img.widths[i]) + img.pad(3, i);
        let padded_h = img.pad(0, i) + u64::from(img.heights[i]) + img.pad(1, i);
        let rows = if img.interlaced { padded_h.div_ceil(2) } else { padded_h };
        let (pitch, ah) = (u64::from(p.pitch[i]), u64::from(p.aligned_height[i]));
        assert!(pitch >= padded_w * bpp, "{what}: plane {i} pitch {pitch} < {padded_w} x {bpp}");
        assert!(ah >= rows, "{what}: plane {i} aligned height {ah} < {rows} rows per field");
        let fields = if img.interlaced { 2 } else { 1 };
        assert!(p.aligned_size[i] >= pitch * ah * fields, "{what}: plane {i} size");
        assert!(
            p.align[i].is_power_of_two() && p.offset[i].is_multiple_of(u64::from(p.align[i])),
            "{what}: plane {i}"
        );
        if i + 1 < n {
            assert!(
                p.offset[i] + p.aligned_size[i] <= p.offset[i + 1],
                "{what}: planes {i} and {} overlap",
                i + 1
            );
        } else {
            assert!(p.offset[i] + p.aligned_size[i] <= p.size, "{what}: last plane past Size");
        }
        if img.interlaced {
            // The second field follows the first and stays inside the plane.
            assert!(p.second_field[i] >= pitch * rows, "{what}: plane {i} second field");
            assert!(p.second_field[i] + pitch * ah <= p.aligned_size[i], "{what}: plane {i} second field");
        } else {
            assert_eq!(p.second_field[i], 0, "{what}: progressive second field");
        }
        if img.block_linear {
            assert_eq!(pitch % 64, 0, "{what}: block-linear pitch is whole GOBs");
            let gobs_high = ah / 8;
            assert_eq!(ah % 8, 0, "{what}: block-linear rows are whole GOBs");
            let log2 = nvsci_mock::block_linear_log2_gobs(p.aligned_height[i]);
            assert!(log2 <= 5, "{what}: at most 32 GOBs per block");
            assert_eq!(gobs_high % (1 << log2), 0, "{what}: rows are whole blocks");
            // Rounding to whole blocks adds less than one block of rows.
            assert!(ah - rows < 8 << log2, "{what}: plane {i} aligned height pads less than one block");
            assert_eq!(pitch * ah % 512, 0, "{what}: a field is whole GOBs");
        }
        sum += p.aligned_size[i];
    }
    // Size = sum of PlaneAlignedSize; Alignment = the first plane's PlaneBaseAddrAlign.
    assert_eq!(p.size, sum, "{what}");
    assert_eq!(b.get_u64s(r, NvSciBufImageAttrKey_Alignment), [u64::from(p.align[0])], "{what}");
}

fn pad_sets(n: usize) -> Vec<Option<[Vec<u64>; 4]>> {
    vec![
        None,
        // cudaNvSci's request: 100 rows of top and bottom padding, none left and right.
        Some([vec![100; n], vec![100; n], vec![0; n], vec![0; n]]),
        Some([vec![3; n], vec![5; n], vec![7; n], vec![9; n]]),
    ]
}

#[test]
fn image_layout_invariants() {
    let b = Buf::new();
    let sizes: &[(u32, u32)] =
        if cfg!(miri) { &[(33, 17)] } else { &[(1920, 1080), (3840, 2160), (33, 17), (1, 1)] };
    // Under Miri (which checks the code paths, not the arithmetic the native run covers) each
    // format and layout takes one of the padding sets in turn: every set and every layout still
    // runs, in a third of the reconciliations.
    for &(w, h) in sizes {
        for (f, (name, formats, widths, heights)) in Img::formats(w, h).into_iter().enumerate() {
            for (p, pads) in pad_sets(formats.len()).into_iter().enumerate() {
                for (l, (block_linear, interlaced)) in
                    [(false, false), (true, false), (false, true), (true, true)].into_iter().enumerate()
                {
                    if cfg!(miri) && (f * 4 + l) % 3 != p {
                        continue;
                    }
                    let img = Img {
                        block_linear,
                        interlaced,
                        formats: formats.clone(),
                        widths: widths.clone(),
                        heights: heights.clone(),
                        pads: pads.clone(),
                    };
                    let what =
                        format!("{name} {w}x{h} bl={block_linear} interlaced={interlaced} pads={pads:?}");
                    let l = b.list(&img.attrs(false));
                    let r = b.reconcile(&[l]).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                    check_invariants(&b, r, &img, &what);
                    b.free(r);
                    b.free(l);
                }
            }
        }
    }
}

#[test]
fn block_height_follows_plane_height() {
    // 2^n GOBs with n = ceil(log2(GOB rows)), at most 16 GOBs (the mock's documented choice).
    for (rows, log2) in [(1, 0), (8, 0), (9, 1), (16, 1), (17, 2), (64, 3), (65, 4), (128, 4), (1080, 4)] {
        assert_eq!(nvsci_mock::block_linear_log2_gobs(rows), log2, "{rows} rows");
    }
    let b = Buf::new();
    // Y8 1920x1080 block-linear: 1920 bytes = 30 GOBs wide; 1080 rows -> 16-GOB blocks of 128
    // rows -> 9 block rows = 1152 rows.
    let img = Img {
        block_linear: true,
        interlaced: false,
        formats: vec![NvSciColor_Y8],
        widths: vec![1920],
        heights: vec![1080],
        pads: None,
    };
    let l = b.list(&img.attrs(false));
    let r = b.reconcile(&[l]).unwrap();
    let p = planes_of(&b, r);
    assert_eq!(p.pitch, [1920]);
    assert_eq!(p.aligned_height, [1152]);
    b.free(r);
    b.free(l);
}

/// An allocated image with CPU access; freed on drop.
struct Obj<'a> {
    b: &'a Buf,
    obj: NvSciBufObj,
    img: Img,
    planes: Planes,
}

impl<'a> Obj<'a> {
    fn new(b: &'a Buf, img: Img, cpu_access: bool) -> Obj<'a> {
        let l = b.list(&img.attrs(cpu_access));
        let r = b.reconcile(&[l]).unwrap();
        let planes = planes_of(b, r);
        let t = b.t;
        let mut obj = ptr::null_mut();
        assert_eq!(call!(t.NvSciBufObjAlloc(r, &mut obj)), NvSciError_Success);
        b.free(r);
        b.free(l);
        Obj { b, obj, img, planes }
    }

    /// The user planes the pixel calls take for this image (nvscibuf.h, `srcPtrs`: one for RGBA,
    /// RAW and single-plane YUV images, "separate plane pointers for Y, U and V planes" for YUV
    /// images of more planes): per user plane `(NvSciBuf plane, bytes per pixel, bytes from one
    /// pixel to the next in that plane, offset of its bytes in a pixel of that plane)`. An
    /// interleaved chroma plane holds U in the low byte for V8U8 ("pattern VVVVVVVV UUUUUUUU",
    /// nvscibuf.h 2.11), V in the low byte for U8V8.
    fn user_planes(&self) -> Vec<(usize, u64, u64, u64)> {
        let f = &self.img.formats;
        let bpp0 = bytes_per_pixel(f[0]);
        match f.len() {
            1 => vec![(0, bpp0, bpp0, 0)],
            2 => {
                let u_first = f[1] == NvSciColor_V8U8;
                let (u, v) = if u_first { (0, 1) } else { (1, 0) };
                vec![(0, bpp0, bpp0, 0), (1, 1, 2, u), (1, 1, 2, v)]
            }
            _ => {
                let u = if f[1] == NvSciColor_U8 { 1 } else { 2 };
                vec![(0, bpp0, bpp0, 0), (u, 1, 1, 0), (3 - u, 1, 1, 0)]
            }
        }
    }

    /// Pixel rectangle of NvSciBuf plane `i` for the first plane's rectangle (x0, y0, x1, y1):
    /// the rectangle itself for the first plane, the whole plane for the others (a rectangle is
    /// only accepted for single-plane RGBA or RAW images).
    fn plane_rect(&self, i: usize, r: (u64, u64, u64, u64)) -> (u64, u64, u64, u64) {
        if i == 0 {
            r
        } else {
            (0, 0, u64::from(self.img.widths[i]), u64::from(self.img.heights[i]))
        }
    }

    fn put(
        &self,
        obj: NvSciBufObj,
        rect: Option<NvSciBufRect>,
        bufs: &[Vec<u8>],
        pitches: &[u32],
    ) -> NvSciError {
        let t = self.b.t;
        let mut ptrs: Vec<*const c_void> = bufs.iter().map(|v| v.as_ptr().cast()).collect();
        let sizes: Vec<u32> = bufs.iter().map(|v| v.len() as u32).collect();
        let rp = rect.as_ref().map_or(ptr::null(), |r| r as *const NvSciBufRect);
        call!(t.NvSciBufObjPutPixels(obj, rp, ptrs.as_mut_ptr(), sizes.as_ptr(), pitches.as_ptr()))
    }

    fn get(
        &self,
        obj: NvSciBufObj,
        rect: Option<NvSciBufRect>,
        bufs: &mut [Vec<u8>],
        pitches: &[u32],
    ) -> NvSciError {
        let t = self.b.t;
        let mut ptrs: Vec<*mut c_void> = bufs.iter_mut().map(|v| v.as_mut_ptr().cast()).collect();
        let sizes: Vec<u32> = bufs.iter().map(|v| v.len() as u32).collect();
        let rp = rect.as_ref().map_or(ptr::null(), |r| r as *const NvSciBufRect);
        call!(t.NvSciBufObjGetPixels(obj, rp, ptrs.as_mut_ptr(), sizes.as_ptr(), pitches.as_ptr()))
    }

    /// Caller buffers (one per user plane) for the rectangle `r` at `extra` bytes of slack per
    /// row, filled by `f(NvSciBuf plane, x byte, y)` (coordinates in the NvSciBuf plane's image).
    fn buffers(
        &self,
        r: (u64, u64, u64, u64),
        extra: u32,
        f: impl Fn(usize, u64, u64) -> u8,
    ) -> (Vec<Vec<u8>>, Vec<u32>) {
        let mut bufs = Vec::new();
        let mut pitches = Vec::new();
        for (p, bpp, step, offset) in self.user_planes() {
            let (x0, y0, x1, y1) = self.plane_rect(p, r);
            let row = (x1 - x0) * bpp;
            let pitch = row as u32 + extra;
            let mut v = vec![0xeeu8; (u64::from(pitch) * (y1 - y0)) as usize];
            for y in y0..y1 {
                for xu in 0..row {
                    let xb = (x0 + xu / bpp) * step + offset + xu % bpp;
                    v[((y - y0) * u64::from(pitch) + xu) as usize] = f(p, xb, y);
                }
            }
            bufs.push(v);
            pitches.push(pitch);
        }
        (bufs, pitches)
    }

    /// The bytes of NvSciBuf planes, one tightly packed buffer per plane, filled by `f`.
    fn planes_of(&self, f: impl Fn(usize, u64, u64) -> u8) -> Vec<Vec<u8>> {
        (0..self.img.formats.len())
            .map(|i| {
                let row = u64::from(self.img.widths[i]) * bytes_per_pixel(self.img.formats[i]);
                let h = u64::from(self.img.heights[i]);
                (0..h).flat_map(|y| (0..row).map(move |xb| (xb, y))).map(|(xb, y)| f(i, xb, y)).collect()
            })
            .collect()
    }

    /// The whole image read back (into user planes), one tightly packed buffer per NvSciBuf
    /// plane.
    fn read_all(&self) -> Vec<Vec<u8>> {
        let whole = (0, 0, u64::from(self.img.widths[0]), u64::from(self.img.heights[0]));
        let (mut bufs, pitches) = self.buffers(whole, 0, |_, _, _| 0);
        assert_eq!(self.get(self.obj, None, &mut bufs, &pitches), NvSciError_Success);
        let users = self.user_planes();
        let mut out = self.planes_of(|_, _, _| 0);
        for ((p, bpp, step, offset), (buf, pitch)) in users.into_iter().zip(bufs.iter().zip(&pitches)) {
            let row = u64::from(self.img.widths[p]) * bytes_per_pixel(self.img.formats[p]);
            for y in 0..u64::from(self.img.heights[p]) {
                for xu in 0..u64::from(self.img.widths[p]) * bpp {
                    let xb = (xu / bpp) * step + offset + xu % bpp;
                    out[p][(y * row + xb) as usize] = buf[(y * u64::from(*pitch) + xu) as usize];
                }
            }
        }
        out
    }

    fn cpu_bytes(&self) -> &[u8] {
        let t = self.b.t;
        let mut p: *const c_void = ptr::null();
        assert_eq!(call!(t.NvSciBufObjGetConstCpuPtr(self.obj, &mut p)), NvSciError_Success);
        // SAFETY: the object's memory spans Size bytes and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), self.planes.size as usize) }
    }
}

impl Drop for Obj<'_> {
    fn drop(&mut self) {
        let t = self.b.t;
        call!(t.NvSciBufObjFree(self.obj));
    }
}

fn pattern(seed: u8) -> impl Fn(usize, u64, u64) -> u8 {
    move |plane, x, y| (x as u8).wrapping_mul(7) ^ (y as u8).wrapping_mul(13) ^ (plane as u8 * 91) ^ seed
}

#[test]
fn pixels_round_trip_every_layout() {
    let b = Buf::new();
    let (w, h) = if cfg!(miri) { (13, 9) } else { (37, 23) };
    // Under Miri, one padding set, and each format in half of the layouts, in turn (every layout
    // still runs); natively, everything.
    for (f, (name, formats, widths, heights)) in Img::formats(w, h).into_iter().enumerate() {
        for pads in pad_sets(formats.len()).into_iter().take(if cfg!(miri) { 1 } else { 3 }) {
            for (l, (block_linear, interlaced)) in
                [(false, false), (true, false), (false, true), (true, true)].into_iter().enumerate()
            {
                if cfg!(miri) && (f + l) % 2 != 0 {
                    continue;
                }
                let what =
                    format!("{name} bl={block_linear} interlaced={interlaced} pads={}", pads.is_some());
                let img = Img {
                    block_linear,
                    interlaced,
                    formats: formats.clone(),
                    widths: widths.clone(),
                    heights: heights.clone(),
                    pads: pads.clone(),
                };
                let o = Obj::new(&b, img, true);
                let whole = (0, 0, u64::from(w), u64::from(h));
                // Whole image in at a pitch with slack, out at a tight pitch.
                let (src, pitches) = o.buffers(whole, 5, pattern(1));
                assert_eq!(o.put(o.obj, None, &src, &pitches), NvSciError_Success, "{what}");
                assert_eq!(o.read_all(), o.planes_of(pattern(1)), "{what}: whole round trip");
                let part = (3, 1, 12.min(u64::from(w)), 8.min(u64::from(h)));
                let rect = NvSciBufRect { x0: part.0, y0: part.1, x1: part.2, y1: part.3 };
                let (src2, pitches2) = o.buffers(part, 3, pattern(77));
                if o.img.formats.len() > 1 {
                    // "rect can only be non-NULL for NvSciSurfType_RGBA or NvSciSurfType_RAW, it
                    // must be NULL for NvSciSurfType_YUV" (BadParameter): nothing changes.
                    assert_eq!(o.put(o.obj, Some(rect), &src2, &pitches2), NvSciError_BadParameter, "{what}");
                    let (mut out, p3) = o.buffers(part, 2, |_, _, _| 0);
                    assert_eq!(o.get(o.obj, Some(rect), &mut out, &p3), NvSciError_BadParameter, "{what}");
                    assert_eq!(o.read_all(), o.planes_of(pattern(1)), "{what}: after refused rectangles");
                    continue;
                }
                // A partial, odd rectangle of an RGBA image: only it changes.
                assert_eq!(o.put(o.obj, Some(rect), &src2, &pitches2), NvSciError_Success, "{what}");
                let got = o.read_all();
                for (i, plane) in got.iter().enumerate() {
                    let (x0, y0, x1, y1) = o.plane_rect(i, part);
                    let bpp = bytes_per_pixel(o.img.formats[i]);
                    let row = u64::from(o.img.widths[i]) * bpp;
                    for y in 0..u64::from(o.img.heights[i]) {
                        for xb in 0..row {
                            let inside = y >= y0 && y < y1 && xb >= x0 * bpp && xb < x1 * bpp;
                            let expect = if inside { pattern(77)(i, xb, y) } else { pattern(1)(i, xb, y) };
                            assert_eq!(
                                plane[(y * row + xb) as usize],
                                expect,
                                "{what}: plane {i} byte {xb} row {y}"
                            );
                        }
                    }
                }
                // The same rectangle read back alone.
                let (mut out, pitches3) = o.buffers(part, 2, |_, _, _| 0);
                assert_eq!(o.get(o.obj, Some(rect), &mut out, &pitches3), NvSciError_Success, "{what}");
                let (want2, _) = o.buffers(part, 2, pattern(77));
                // Compare the rows only: the slack after each row is the caller's.
                for (i, (a, e)) in out.iter().zip(&want2).enumerate() {
                    let (x0, _, x1, _) = o.plane_rect(i, part);
                    let row = ((x1 - x0) * bytes_per_pixel(o.img.formats[i])) as usize;
                    for (ra, re) in a.chunks(pitches3[i] as usize).zip(e.chunks(pitches3[i] as usize)) {
                        assert_eq!(ra[..row], re[..row], "{what}: plane {i}");
                    }
                }
            }
        }
    }
}

/// GOB address of byte `xb` of row `y` by the Tegra X1 TRM's block-linear equations, written
/// independently of the mock: GOB = 64 bytes x 8 rows; a block = `gobs` GOBs stacked.
fn trm_address(xb: u64, y: u64, pitch: u64, gobs: u64) -> u64 {
    let block_rows = 8 * gobs;
    let gob_address =
        (y / block_rows) * (pitch / 64) * 512 * gobs + (xb / 64) * 512 * gobs + (y % block_rows / 8) * 512;
    let in_gob = (xb % 64 / 32) * 256 + (y % 8 / 2) * 64 + (xb % 32 / 16) * 32 + (y % 2) * 16 + xb % 16;
    gob_address + in_gob
}

/// GOBs per block by the mock's documented rule, computed here without the mock: the smallest
/// power of two covering the rows in GOBs, at most 16.
fn gobs_per_block(rows: u64) -> u64 {
    let gobs = rows.div_ceil(8).max(1);
    gobs.next_power_of_two().min(16)
}

#[test]
fn block_linear_bytes_sit_where_the_trm_puts_them() {
    let b = Buf::new();
    let (w, h) = if cfg!(miri) { (40, 20) } else { (200, 150) };
    let cases = [
        // RGBA progressive, no padding.
        Img {
            block_linear: true,
            interlaced: false,
            formats: vec![NvSciColor_A8B8G8R8],
            widths: vec![w],
            heights: vec![h],
            pads: None,
        },
        // NV12 interlaced with padding.
        Img {
            block_linear: true,
            interlaced: true,
            formats: vec![NvSciColor_Y8, NvSciColor_V8U8],
            widths: vec![w, w / 2],
            heights: vec![h, h / 2],
            pads: Some([vec![4, 2], vec![3, 1], vec![5, 2], vec![6, 3]]),
        },
    ];
    for img in cases {
        let o = Obj::new(&b, img, true);
        let whole = (0, 0, u64::from(w), u64::from(h));
        let (src, pitches) = o.buffers(whole, 0, pattern(5));
        assert_eq!(o.put(o.obj, None, &src, &pitches), NvSciError_Success);
        let raw = o.cpu_bytes();
        for i in 0..o.img.formats.len() {
            let bpp = bytes_per_pixel(o.img.formats[i]);
            let (top, left) = (o.img.pad(0, i), o.img.pad(2, i));
            let padded_h = top + u64::from(o.img.heights[i]) + o.img.pad(1, i);
            let rows = if o.img.interlaced { padded_h.div_ceil(2) } else { padded_h };
            let gobs = gobs_per_block(rows);
            let pitch = u64::from(o.planes.pitch[i]);
            let (pw, ph) = (u64::from(o.img.widths[i]), u64::from(o.img.heights[i]));
            for (x, y) in [
                (0, 0),
                (1, 0),
                (pw - 1, 0),
                (0, 1),
                (pw / 2, ph / 2),
                (pw - 1, ph - 1),
                (17, 9),
                (3, ph - 2),
            ] {
                for c in 0..bpp {
                    let xb = (left + x) * bpp + c;
                    let py = top + y;
                    let (field, row) = if o.img.interlaced { (py % 2, py / 2) } else { (0, py) };
                    let at = o.planes.offset[i]
                        + field * o.planes.second_field[i]
                        + trm_address(xb, row, pitch, gobs);
                    assert_eq!(
                        raw[at as usize],
                        pattern(5)(i, x * bpp + c, y),
                        "plane {i} pixel ({x}, {y}) byte {c}"
                    );
                }
            }
        }
    }
}

/// nvscibuf.h (DRIVE OS 6.0.5 / 6.0.6 / 6.0.10), NvSciBufObjPutPixels `srcPtrs`: "For YUV
/// surfaces with more than one plane, it is assumed that user provides separate plane pointers
/// for Y, U and V planes (where Y is the first plane, U is the second plane, and V is the third
/// plane)". A semi-planar image takes three user planes, interleaved into its chroma plane in
/// the order of its color format ("for NvSciColor_V8U8 pattern VVVVVVVV UUUUUUUU bit 15 8 7 0":
/// U in the low byte); a planar image stored Y, V, U takes them Y, U, V.
#[test]
fn multi_plane_yuv_takes_y_u_and_v_user_planes() {
    let b = Buf::new();
    let img = |formats: Vec<u32>, n| Img {
        block_linear: false,
        interlaced: false,
        widths: [16, 8, 8][..n].to_vec(),
        heights: [4, 2, 2][..n].to_vec(),
        formats,
        pads: None,
    };
    let y = vec![1u8; 64];
    let (u, v) =
        ((0..16).map(|i| 0x40 + i).collect::<Vec<u8>>(), (0..16).map(|i| 0x80 + i).collect::<Vec<u8>>());
    let bufs = [y.clone(), u.clone(), v.clone()];
    let pitches = [16, 8, 8];
    let cases = [(vec![NvSciColor_Y8, NvSciColor_V8U8], true), (vec![NvSciColor_Y8, NvSciColor_U8V8], false)];
    for (formats, u_first) in cases {
        let o = Obj::new(&b, img(formats.clone(), 2), true);
        assert_eq!(o.put(o.obj, None, &bufs, &pitches), NvSciError_Success, "{formats:?}");
        let mem = o.cpu_bytes();
        let chroma = &mem[o.planes.offset[1] as usize..];
        for row in 0..2usize {
            let at = row * o.planes.pitch[1] as usize;
            for x in 0..8usize {
                let (first, second) =
                    if u_first { (u[row * 8 + x], v[row * 8 + x]) } else { (v[row * 8 + x], u[row * 8 + x]) };
                assert_eq!(
                    [chroma[at + 2 * x], chroma[at + 2 * x + 1]],
                    [first, second],
                    "{formats:?} ({x}, {row})"
                );
            }
        }
        // And back out into three user planes.
        let mut out = vec![vec![0u8; 64], vec![0u8; 16], vec![0u8; 16]];
        assert_eq!(o.get(o.obj, None, &mut out, &pitches), NvSciError_Success);
        assert_eq!(out, bufs, "{formats:?}");
    }
    // Planar Y, V, U: the second user plane is U all the same.
    let o = Obj::new(&b, img(vec![NvSciColor_Y8, NvSciColor_V8, NvSciColor_U8], 3), true);
    assert_eq!(o.put(o.obj, None, &bufs, &pitches), NvSciError_Success);
    let mem = o.cpu_bytes();
    assert_eq!(mem[o.planes.offset[1] as usize], v[0], "the V plane holds V");
    assert_eq!(mem[o.planes.offset[2] as usize], u[0], "the U plane holds U");
}

#[test]
fn pixels_refusals() {
    let b = Buf::new();
    let t = b.t;
    let nv12_img = |bl| Img {
        block_linear: bl,
        interlaced: false,
        formats: vec![NvSciColor_Y8, NvSciColor_V8U8],
        widths: vec![16, 8],
        heights: vec![8, 4],
        pads: None,
    };
    let o = Obj::new(&b, nv12_img(true), true);
    let whole = (0, 0, 16, 8);
    let (src, pitches) = o.buffers(whole, 0, pattern(0));
    assert_eq!(src.len(), 3, "Y, U and V user planes");
    assert_eq!(o.put(o.obj, None, &src, &pitches), NvSciError_Success);
    let rect = |x0, y0, x1, y1| Some(NvSciBufRect { x0, y0, x1, y1 });
    // "rect is non-NULL and NvSciBufSurfType is NvSciSurfType_YUV": even the whole image.
    assert_eq!(o.put(o.obj, rect(0, 0, 16, 8), &src, &pitches), NvSciError_BadParameter);
    let mut out = src.clone();
    assert_eq!(o.get(o.obj, rect(0, 0, 16, 8), &mut out, &pitches), NvSciError_BadParameter);
    // A single-plane Y8 image is a YUV surface too.
    let luma = Obj::new(
        &b,
        Img { formats: vec![NvSciColor_Y8], widths: vec![16], heights: vec![8], ..nv12_img(false) },
        true,
    );
    let (ysrc, ypitch) = luma.buffers(whole, 0, pattern(0));
    assert_eq!(luma.put(luma.obj, rect(0, 0, 16, 8), &ysrc, &ypitch), NvSciError_BadParameter);
    assert_eq!(luma.put(luma.obj, None, &ysrc, &ypitch), NvSciError_Success);
    // A pitch shorter than a row; a buffer shorter than pitch x rows; zero pitches and sizes.
    assert_eq!(o.put(o.obj, None, &src, &[16, 7, 8]), NvSciError_BadParameter);
    assert_eq!(o.put(o.obj, None, &src, &[16, 8, 0]), NvSciError_BadParameter);
    let mut short = src.clone();
    short[2].pop();
    assert_eq!(o.put(o.obj, None, &short, &pitches), NvSciError_BadParameter);
    let mut out = src.clone();
    out[0].truncate(16 * 7);
    assert_eq!(o.get(o.obj, None, &mut out, &pitches), NvSciError_BadParameter);
    // The NvSciBuf planes' convention (Y, then U and V interleaved as the chroma plane holds
    // them): the interleaved buffer's pitch is fine for a U plane, but the third entry (V) is
    // missing: a NULL pointer there is refused.
    let sizes: Vec<u32> = vec![128, 32, 0];
    let mut ptrs: Vec<*const c_void> = vec![src[0].as_ptr().cast(), src[1].as_ptr().cast(), ptr::null()];
    assert_eq!(
        call!(t.NvSciBufObjPutPixels(
            o.obj,
            ptr::null(),
            ptrs.as_mut_ptr(),
            sizes.as_ptr(),
            [16u32, 16, 16].as_ptr()
        )),
        NvSciError_BadParameter
    );
    // A zero size ("An array member of srcPtrSizes is zero").
    let sizes: Vec<u32> = vec![128, 16, 0];
    let mut ptrs: Vec<*const c_void> = src.iter().map(|v| v.as_ptr().cast()).collect();
    assert_eq!(
        call!(t.NvSciBufObjPutPixels(
            o.obj,
            ptr::null(),
            ptrs.as_mut_ptr(),
            sizes.as_ptr(),
            pitches.as_ptr()
        )),
        NvSciError_BadParameter
    );
    let sizes: Vec<u32> = src.iter().map(|v| v.len() as u32).collect();
    // Overlapping user planes ("srcPtrs for any of the planes overlap").
    let mut same: Vec<*const c_void> =
        vec![src[0].as_ptr().cast(), src[1].as_ptr().cast(), src[1].as_ptr().cast()];
    assert_eq!(
        call!(t.NvSciBufObjPutPixels(
            o.obj,
            ptr::null(),
            same.as_mut_ptr(),
            sizes.as_ptr(),
            pitches.as_ptr()
        )),
        NvSciError_BadParameter
    );
    // A user plane inside the object's memory ("srcPtrs overlap with the memory represented by
    // bufObj").
    let inside = o.cpu_bytes().as_ptr();
    let mut into: Vec<*const c_void> = vec![src[0].as_ptr().cast(), src[1].as_ptr().cast(), inside.cast()];
    assert_eq!(
        call!(t.NvSciBufObjPutPixels(
            o.obj,
            ptr::null(),
            into.as_mut_ptr(),
            sizes.as_ptr(),
            pitches.as_ptr()
        )),
        NvSciError_BadParameter
    );
    // NULL arrays and NULL objects.
    assert_eq!(
        call!(t.NvSciBufObjPutPixels(o.obj, ptr::null(), ptr::null_mut(), sizes.as_ptr(), pitches.as_ptr())),
        NvSciError_BadParameter
    );
    assert_eq!(
        call!(t.NvSciBufObjPutPixels(o.obj, ptr::null(), ptrs.as_mut_ptr(), sizes.as_ptr(), ptr::null())),
        NvSciError_BadParameter
    );
    assert_eq!(
        call!(t.NvSciBufObjPutPixels(
            ptr::null_mut(),
            ptr::null(),
            ptrs.as_mut_ptr(),
            sizes.as_ptr(),
            pitches.as_ptr()
        )),
        NvSciError_BadParameter
    );
    // Nothing was written by the refused calls.
    let want = o.planes_of(pattern(0));
    assert_eq!(o.read_all(), want);

    // Rectangles of an RGBA image outside it, empty or reversed ("x0 or x1 is greater than plane
    // width", "y0 or y1 is greater than plane height", "x0 > x1", "y0 > y1").
    let rgba = Obj::new(
        &b,
        Img { formats: vec![NvSciColor_A8B8G8R8], widths: vec![16], heights: vec![8], ..nv12_img(true) },
        true,
    );
    let (rsrc, rpitch) = rgba.buffers(whole, 0, pattern(0));
    for r in [rect(0, 0, 17, 8), rect(0, 0, 16, 9), rect(4, 0, 4, 8), rect(5, 3, 2, 8), rect(0, 8, 16, 8)] {
        assert_eq!(
            rgba.put(rgba.obj, r, &rsrc, &rpitch),
            NvSciError_BadParameter,
            "{:?}",
            r.map(|r| (r.x0, r.y0, r.x1, r.y1))
        );
    }
    assert_eq!(rgba.put(rgba.obj, rect(0, 0, 16, 8), &rsrc, &rpitch), NvSciError_Success);

    // A read-only duplicate reads but cannot put: "NvSciBufAccessPerm_ReadWrite is not requested
    // ... via NvSciBufGeneralAttrKey_RequiredPerm" is BadParameter.
    let mut ro = ptr::null_mut();
    assert_eq!(
        call!(t.NvSciBufObjDupWithReducePerm(o.obj, NvSciBufAccessPerm_Readonly, &mut ro)),
        NvSciError_Success
    );
    assert_eq!(o.put(ro, None, &src, &pitches), NvSciError_BadParameter);
    let mut out = o.buffers(whole, 0, |_, _, _| 0).0;
    assert_eq!(o.get(ro, None, &mut out, &pitches), NvSciError_Success);
    assert_eq!(out, src);
    call!(t.NvSciBufObjFree(ro));

    // No CPU access requested: neither direction ("CPU access is not requested in unreconciled
    // NvSciBufAttrList of the peer calling this API via NvSciBufGeneralAttrKey_NeedCpuAccess" is
    // BadParameter).
    let blind = Obj::new(&b, nv12_img(false), false);
    assert_eq!(blind.put(blind.obj, None, &src, &pitches), NvSciError_BadParameter);
    let mut out = src.clone();
    assert_eq!(blind.get(blind.obj, None, &mut out, &pitches), NvSciError_BadParameter);

    // Not an image.
    let l = b.list(&[types(&[NvSciBufType_RawBuffer]), raw_size(256), cpu(true)]);
    let r = b.reconcile(&[l]).unwrap();
    let mut raw = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjAlloc(r, &mut raw)), NvSciError_Success);
    assert_eq!(o.put(raw, None, &src, &pitches), NvSciError_BadParameter);
    call!(t.NvSciBufObjFree(raw));
    b.free(r);
    b.free(l);
}
