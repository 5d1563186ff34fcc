//! GPU mode of the emulation (`nvsci_mock::host_gpu_fns`), exercised through the function tables
//! only.
// `call!` passes raw pointers to the C entry points, so its arguments expand inside `unsafe`.
#![allow(clippy::macro_metavars_in_unsafe)]

mod common;

use common::*;
use nvsci_mock::HandleCounts;
use nvsci_sys::*;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Handles and counter addresses are plain pointers; the mock's records are thread-safe.
#[derive(Clone, Copy)]
struct Send<T>(T);
unsafe impl<T> std::marker::Send for Send<T> {}

/// The counter behind `SyncObjGetCounter`'s address, accessed the way a GPU stream would: 64-bit
/// atomic loads and stores, no mock call.
fn counter_at<'a>(p: *mut u64) -> &'a AtomicU64 {
    // SAFETY: `p` comes from `SyncObjGetCounter`: 8-byte aligned and alive while a handle or fence
    // of its object is, which each test keeps for as long as it uses the counter; every access to
    // it is atomic.
    unsafe { AtomicU64::from_ptr(p) }
}

/// Allocates a buffer from `pairs` (list freed).
fn buffer(b: &Buf, pairs: &[(u32, Vec<u8>)]) -> NvSciBufObj {
    let t = b.t;
    let l = b.list(pairs);
    let mut obj = ptr::null_mut();
    let mut conflict = ptr::null_mut();
    assert_eq!(
        call!(t.NvSciBufAttrListReconcileAndObjAlloc(&l, 1, &mut obj, &mut conflict)),
        NvSciError_Success
    );
    assert!(conflict.is_null());
    b.free(l);
    obj
}

fn host_memory(obj: NvSciBufObj) -> (*mut c_void, u64) {
    let g = nvsci_mock::host_gpu_fns();
    let (mut base, mut size) = (ptr::null_mut(), 0u64);
    assert_eq!(call!(g.BufObjGetHostMemory(obj, &mut base, &mut size)), NvSciError_Success);
    (base, size)
}

/// The page size the mock uses: the host memory of a one-byte buffer is exactly one page.
fn page_size(b: &Buf) -> u64 {
    let t = b.t;
    let o = buffer(b, &[types(&[NvSciBufType_RawBuffer]), raw_size(1)]);
    let (_, page) = host_memory(o);
    call!(t.NvSciBufObjFree(o));
    assert!(page.is_power_of_two() && page >= 4096, "{page}");
    page
}

fn counter_of(obj: NvSciSyncObj) -> *mut u64 {
    let g = nvsci_mock::host_gpu_fns();
    let mut p = ptr::null_mut();
    assert_eq!(call!(g.SyncObjGetCounter(obj, &mut p)), NvSciError_Success);
    assert!(!p.is_null());
    p
}

fn engine_fence(obj: NvSciSyncObj, f: &mut NvSciSyncFence) -> u64 {
    let g = nvsci_mock::host_gpu_fns();
    let t = nvsci_mock::sync_fns();
    assert_eq!(call!(g.SyncObjGenerateEngineFence(obj, f)), NvSciError_Success);
    let (mut id, mut value) = (99u64, 99u64);
    assert_eq!(call!(t.NvSciSyncFenceExtractFence(f, &mut id, &mut value)), NvSciError_Success);
    assert_eq!(id, 0);
    value
}

/// A list filled for GPU `n` with `flags`.
fn gpu_list(s: &Sync, n: u8, flags: i32) -> NvSciSyncAttrList {
    let g = nvsci_mock::host_gpu_fns();
    let l = s.list(&[]);
    assert_eq!(call!(g.SyncAttrListFillGpu(l, &gpu(n), flags)), NvSciError_Success);
    l
}

/// Allocates an object from `lists` (lists freed).
fn object_from(s: &Sync, lists: &[NvSciSyncAttrList]) -> NvSciSyncObj {
    let t = s.t;
    let mut o = ptr::null_mut();
    let mut c = ptr::null_mut();
    assert_eq!(
        call!(t.NvSciSyncAttrListReconcileAndObjAlloc(lists.as_ptr(), lists.len(), &mut o, &mut c)),
        NvSciError_Success
    );
    assert!(c.is_null());
    for l in lists {
        s.free(*l);
    }
    o
}

#[test]
fn table_is_complete() {
    assert!(nvsci_mock::host_gpu_fns().is_complete());
}

#[test]
fn host_memory_buffers_export_no_gpu_memory() {
    // A raw buffer is host memory on every machine: `BufObjExportGpuMemory` answers NotSupported
    // (the documented answer for host memory), NULL arguments BadParameter.
    let b = Buf::new();
    let t = b.t;
    let g = nvsci_mock::host_gpu_fns();
    let o = buffer(&b, &[types(&[NvSciBufType_RawBuffer]), raw_size(4096)]);
    let (mut fd, mut size) = (-1i32, 0u64);
    assert_eq!(call!(g.BufObjExportGpuMemory(o, &mut fd, &mut size)), NvSciError_NotSupported);
    assert_eq!((fd, size), (-1, 0));
    assert_eq!(call!(g.BufObjExportGpuMemory(o, ptr::null_mut(), &mut size)), NvSciError_BadParameter);
    assert_eq!(call!(g.BufObjExportGpuMemory(ptr::null_mut(), &mut fd, &mut size)), NvSciError_BadParameter);
    call!(t.NvSciBufObjFree(o));
}

#[test]
fn buffer_host_memory_is_whole_pages_shared_by_duplicates() {
    let b = Buf::new();
    let t = b.t;
    let g = nvsci_mock::host_gpu_fns();
    let page = page_size(&b);

    let obj = buffer(&b, &[types(&[NvSciBufType_RawBuffer]), raw_size(5000), cpu(true)]);
    let (base, size) = host_memory(obj);
    assert!(!base.is_null());
    assert_eq!(base as u64 % page, 0);
    assert_eq!(size, 5000u64.next_multiple_of(page));
    // Zeroed, padding included.
    let all = unsafe { std::slice::from_raw_parts(base.cast::<u8>(), size as usize) };
    assert!(all.iter().all(|x| *x == 0));

    // Bytes written through the CPU pointer are the host memory's.
    let mut p: *mut c_void = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjGetCpuPtr(obj, &mut p)), NvSciError_Success);
    assert_eq!(p, base);
    unsafe {
        p.cast::<u8>().write(0x11);
        p.cast::<u8>().add(4999).write(0x22);
    }
    let seen = unsafe { std::slice::from_raw_parts(base.cast::<u8>(), 5000) };
    assert_eq!((seen[0], seen[4999]), (0x11, 0x22));

    // Every duplicate reports the same memory.
    let mut ro = ptr::null_mut();
    assert_eq!(
        call!(t.NvSciBufObjDupWithReducePerm(obj, NvSciBufAccessPerm_Readonly, &mut ro)),
        NvSciError_Success
    );
    let mut d = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjDup(obj, &mut d)), NvSciError_Success);
    assert_eq!(host_memory(ro), (base, size));
    assert_eq!(host_memory(d), (base, size));
    // ...and the memory outlives the handle it was allocated through.
    call!(t.NvSciBufObjFree(obj));
    assert_eq!(host_memory(ro), (base, size));
    assert_eq!(unsafe { base.cast::<u8>().add(4999).read() }, 0x22);

    // Argument checks.
    let (mut bp, mut sz) = (ptr::null_mut(), 0u64);
    assert_eq!(call!(g.BufObjGetHostMemory(ptr::null_mut(), &mut bp, &mut sz)), NvSciError_BadParameter);
    assert_eq!(call!(g.BufObjGetHostMemory(ro, ptr::null_mut(), &mut sz)), NvSciError_BadParameter);
    assert_eq!(call!(g.BufObjGetHostMemory(ro, &mut bp, ptr::null_mut())), NvSciError_BadParameter);
    let l = b.list(&[]);
    assert_eq!(call!(g.BufObjGetHostMemory(l.cast(), &mut bp, &mut sz)), NvSciError_BadParameter);
    b.free(l);
    assert_eq!((bp, sz), (ptr::null_mut(), 0));

    call!(t.NvSciBufObjFree(ro));
    call!(t.NvSciBufObjFree(d));
    assert_eq!(b.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn every_allocation_has_pages_of_its_own() {
    let b = Buf::new();
    let t = b.t;
    let page = page_size(&b);

    // An image: size from the reconciled list, rounded up to pages.
    let img = buffer(&b, &nv12(33, 17));
    let mut l = ptr::null_mut();
    assert_eq!(call!(t.NvSciBufObjGetAttrList(img, &mut l)), NvSciError_Success);
    let img_size = b.get_u64s(l, NvSciBufImageAttrKey_Size)[0];
    let (base, size) = host_memory(img);
    assert_eq!(base as u64 % page, 0);
    assert_eq!(size, img_size.next_multiple_of(page));

    // Raw buffers of exactly one page, one byte more, and with a larger alignment request.
    let exact = buffer(&b, &[types(&[NvSciBufType_RawBuffer]), raw_size(page)]);
    assert_eq!(host_memory(exact).1, page);
    let more = buffer(&b, &[types(&[NvSciBufType_RawBuffer]), raw_size(page + 1)]);
    assert_eq!(host_memory(more).1, 2 * page);
    let wide = 4 * page;
    let aligned = buffer(
        &b,
        &[types(&[NvSciBufType_RawBuffer]), raw_size(10), (NvSciBufRawBufferAttrKey_Align, bytes_of(&wide))],
    );
    let (abase, asize) = host_memory(aligned);
    assert_eq!((abase as u64 % wide, asize), (0, page));

    // No two allocations share a page.
    let mut ranges: Vec<(u64, u64)> =
        [img, exact, more, aligned].iter().map(|o| host_memory(*o)).map(|(p, s)| (p as u64, s)).collect();
    ranges.sort();
    for w in ranges.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0, "{ranges:x?}");
    }

    for o in [img, exact, more, aligned] {
        call!(t.NvSciBufObjFree(o));
    }
    assert_eq!(b.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn gpu_signaled_object_engine_fences_and_foreign_counter_stores() {
    let b = Buf::new();
    let page = page_size(&b);
    let s = Sync::new();
    let t = s.t;
    let g = nvsci_mock::host_gpu_fns();
    let o = object_from(&s, &[gpu_list(&s, 7, 1), s.party(NvSciSyncAccessPerm_WaitOnly, true)]);
    let ctx = s.context();

    // The CPU neither generates fences nor signals.
    let mut f = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_BadParameter);
    assert_eq!(call!(t.NvSciSyncObjSignal(o)), NvSciError_BadParameter);
    assert_eq!(f.payload, [0; 6]);

    // Engine fences: 1, 2, ...
    let mut f1 = NVSCI_SYNC_FENCE_INITIALIZER;
    let mut f2 = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(engine_fence(o, &mut f1), 1);
    assert_eq!(engine_fence(o, &mut f2), 2);
    assert_eq!(s.ledger().counts().fences, 2);

    // The counter: alone at the start of a page, shared by duplicates, 0 until stored to.
    let c = counter_of(o);
    assert_eq!(c as u64 % page, 0);
    let mut d = ptr::null_mut();
    assert_eq!(call!(t.NvSciSyncObjDup(o, &mut d)), NvSciError_Success);
    assert_eq!(counter_of(d), c);
    assert_eq!(counter_at(c).load(Ordering::Acquire), 0);
    assert_eq!(call!(t.NvSciSyncFenceWait(&f1, ctx, 0)), NvSciError_Timeout);

    // A store the mock is not told about expires fences.
    counter_at(c).store(1, Ordering::Release);
    assert_eq!(call!(t.NvSciSyncFenceWait(&f1, ctx, 0)), NvSciError_Success);
    let start = Instant::now();
    assert_eq!(call!(t.NvSciSyncFenceWait(&f2, ctx, 20_000)), NvSciError_Timeout);
    assert!(start.elapsed() >= Duration::from_millis(20));

    // ...even while a CPU wait is blocked.
    let addr = Send(c);
    let start = Instant::now();
    let gpu = std::thread::spawn(move || {
        let addr = addr;
        std::thread::sleep(Duration::from_millis(50));
        let stored = Instant::now();
        counter_at(addr.0).store(2, Ordering::Release);
        stored
    });
    assert_eq!(call!(t.NvSciSyncFenceWait(&f2, ctx, 5_000_000)), NvSciError_Success);
    let woke = Instant::now();
    let stored = gpu.join().unwrap();
    assert!(woke >= stored);
    assert!(woke - start >= Duration::from_millis(50));
    // (A wait that did not look at the counter would have run into its 5 s timeout instead.)
    let (mut id, mut value) = (99u64, 99u64);
    assert_eq!(call!(t.NvSciSyncFenceExtractFence(&f2, &mut id, &mut value)), NvSciError_Success);
    assert_eq!((id, value), (0, 2));

    // Generating into a used fence releases its old reference; an infinite wait sees stores too.
    assert_eq!(engine_fence(d, &mut f1), 3);
    assert_eq!(s.ledger().counts().fences, 2);
    let gpu = std::thread::spawn(move || {
        let addr = addr;
        std::thread::sleep(Duration::from_millis(20));
        counter_at(addr.0).store(3, Ordering::Release);
    });
    assert_eq!(call!(t.NvSciSyncFenceWait(&f1, ctx, -1)), NvSciError_Success);
    gpu.join().unwrap();

    // Argument checks.
    let mut p = ptr::null_mut();
    assert_eq!(call!(g.SyncObjGetCounter(ptr::null_mut(), &mut p)), NvSciError_BadParameter);
    assert_eq!(call!(g.SyncObjGetCounter(o, ptr::null_mut())), NvSciError_BadParameter);
    assert_eq!(call!(g.SyncObjGenerateEngineFence(ptr::null_mut(), &mut f)), NvSciError_BadParameter);
    assert_eq!(call!(g.SyncObjGenerateEngineFence(o, ptr::null_mut())), NvSciError_BadParameter);
    let junk = &mut NvSciSyncFence { payload: [1, 2, 3, 4, 5, 6] };
    assert_eq!(call!(g.SyncObjGenerateEngineFence(o, junk)), NvSciError_BadParameter);
    let l = s.list(&[]);
    assert_eq!(call!(g.SyncObjGetCounter(l.cast(), &mut p)), NvSciError_BadParameter);
    assert_eq!(call!(g.SyncObjGenerateEngineFence(l.cast(), &mut f)), NvSciError_BadParameter);
    s.free(l);
    assert!(p.is_null());
    assert_eq!(f.payload, [0; 6]);

    // The fences keep the counter alive after the handles are gone.
    call!(t.NvSciSyncObjFree(o));
    call!(t.NvSciSyncObjFree(d));
    assert_eq!(s.ledger().counts().objects, 0);
    counter_at(c).store(4, Ordering::Release);
    call!(t.NvSciSyncFenceClear(&mut f1));
    call!(t.NvSciSyncFenceClear(&mut f2));
    call!(t.NvSciSyncCpuWaitContextFree(ctx));
    assert_eq!(s.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
    assert_eq!(b.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn cpu_signaled_objects_publish_signals_in_the_counter() {
    let s = Sync::new();
    let t = s.t;
    let g = nvsci_mock::host_gpu_fns();
    // CPU signaler and waiter; CPU signaler with a GPU waiter.
    let cpu = s.cpu_object();
    let to_gpu = object_from(&s, &[s.party(NvSciSyncAccessPerm_SignalOnly, true), gpu_list(&s, 3, 2)]);
    let ctx = s.context();
    for o in [cpu, to_gpu] {
        let mut f = NVSCI_SYNC_FENCE_INITIALIZER;
        assert_eq!(call!(g.SyncObjGenerateEngineFence(o, &mut f)), NvSciError_BadParameter);
        assert_eq!(f.payload, [0; 6]);
        let c = counter_of(o);
        assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_Success);
        assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_Success);
        assert_eq!(counter_at(c).load(Ordering::Acquire), 0);
        assert_eq!(call!(t.NvSciSyncObjSignal(o)), NvSciError_Success);
        assert_eq!(counter_at(c).load(Ordering::Acquire), 1);
        assert_eq!(call!(t.NvSciSyncObjSignal(o)), NvSciError_Success);
        assert_eq!(counter_at(c).load(Ordering::Acquire), 2);
        // Never beyond the last generated value.
        assert_eq!(call!(t.NvSciSyncObjSignal(o)), NvSciError_InvalidState);
        assert_eq!(counter_at(c).load(Ordering::Acquire), 2);
        call!(t.NvSciSyncFenceClear(&mut f));
    }
    // The CPU does not wait on an object only the GPU waits on.
    let mut f = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(call!(t.NvSciSyncObjGenerateFence(to_gpu, &mut f)), NvSciError_Success);
    assert_eq!(call!(t.NvSciSyncFenceWait(&f, ctx, 0)), NvSciError_BadParameter);
    call!(t.NvSciSyncFenceClear(&mut f));
    // Each object has its own counter.
    assert_ne!(counter_of(cpu), counter_of(to_gpu));

    call!(t.NvSciSyncObjFree(cpu));
    call!(t.NvSciSyncObjFree(to_gpu));
    call!(t.NvSciSyncCpuWaitContextFree(ctx));
    assert_eq!(s.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}

#[test]
fn fill_gpu_sets_the_gpu_attributes() {
    let s = Sync::new();
    let t = s.t;
    let g = nvsci_mock::host_gpu_fns();
    let id = gpu(7);

    // Flags.
    for (flags, perm) in [
        (1, NvSciSyncAccessPerm_SignalOnly),
        (2, NvSciSyncAccessPerm_WaitOnly),
        (3, NvSciSyncAccessPerm_WaitSignal),
    ] {
        let l = gpu_list(&s, 7, flags);
        assert_eq!(u64s(&s.get(l, NvSciSyncAttrKey_RequiredPerm).unwrap()), [perm]);
        assert_eq!(
            u32s(&s.get(l, NvSciSyncAttrKey_PrimitiveInfo).unwrap()),
            [NvSciSyncAttrValPrimitiveType_SysmemSemaphorePayload64b]
        );
        assert_eq!(s.get(l, NvSciSyncAttrKey_GpuId).unwrap(), id.bytes);
        assert_eq!(s.get(l, NvSciSyncAttrKey_NeedCpuAccess), None);
        // Filling twice is refused.
        assert_eq!(call!(g.SyncAttrListFillGpu(l, &id, flags)), NvSciError_BadParameter);
        s.free(l);
    }

    // Rejections leave the list untouched.
    let l = s.list(&[]);
    for flags in [0, 4, 5, -1, -3, i32::MAX] {
        assert_eq!(call!(g.SyncAttrListFillGpu(l, &id, flags)), NvSciError_BadParameter, "{flags}");
    }
    assert_eq!(call!(g.SyncAttrListFillGpu(l, ptr::null(), 1)), NvSciError_BadParameter);
    assert_eq!(call!(g.SyncAttrListFillGpu(ptr::null_mut(), &id, 1)), NvSciError_BadParameter);
    let o = s.cpu_object();
    assert_eq!(call!(g.SyncAttrListFillGpu(o.cast(), &id, 1)), NvSciError_BadParameter);
    call!(t.NvSciSyncObjFree(o));
    for key in [NvSciSyncAttrKey_RequiredPerm, NvSciSyncAttrKey_PrimitiveInfo, NvSciSyncAttrKey_GpuId] {
        assert_eq!(s.get(l, key), None);
    }
    // All or nothing: one key already set refuses the whole fill.
    assert_eq!(
        s.set(l, &[(NvSciSyncAttrKey_PrimitiveInfo, bytes_of(&NvSciSyncAttrValPrimitiveType_Syncpoint))]),
        NvSciError_Success
    );
    assert_eq!(call!(g.SyncAttrListFillGpu(l, &id, 1)), NvSciError_BadParameter);
    assert_eq!(s.get(l, NvSciSyncAttrKey_RequiredPerm), None);
    assert_eq!(s.get(l, NvSciSyncAttrKey_GpuId), None);
    s.free(l);

    // Reconciled with a CPU waiter and a second GPU waiter.
    let lists = [gpu_list(&s, 7, 1), s.party(NvSciSyncAccessPerm_WaitOnly, true), gpu_list(&s, 9, 2)];
    let r = s.reconcile(&lists).unwrap_or_else(|(e, _)| panic!("reconcile: {e}"));
    let ids = s.get(r, NvSciSyncAttrKey_GpuId).unwrap();
    assert_eq!(ids.len(), 32);
    assert!(ids.chunks_exact(16).any(|c| c == id.bytes));
    assert!(ids.chunks_exact(16).any(|c| c == gpu(9).bytes));
    assert_eq!(
        u32s(&s.get(r, NvSciSyncAttrKey_PrimitiveInfo).unwrap()),
        [NvSciSyncAttrValPrimitiveType_SysmemSemaphorePayload64b]
    );
    assert_eq!(u64s(&s.get(r, NvSciSyncAttrKey_MaxPrimitiveValue).unwrap()), [u64::MAX]);
    assert_eq!(s.get(r, NvSciSyncAttrKey_NeedCpuAccess).unwrap(), [1]);
    // A reconciled list cannot be filled.
    assert_eq!(call!(g.SyncAttrListFillGpu(r, &id, 1)), NvSciError_BadParameter);
    // The object's signaler is the GPU.
    let mut o = ptr::null_mut();
    assert_eq!(call!(t.NvSciSyncObjAlloc(r, &mut o)), NvSciError_Success);
    let mut f = NVSCI_SYNC_FENCE_INITIALIZER;
    assert_eq!(call!(t.NvSciSyncObjGenerateFence(o, &mut f)), NvSciError_BadParameter);
    assert_eq!(engine_fence(o, &mut f), 1);
    call!(t.NvSciSyncFenceClear(&mut f));
    call!(t.NvSciSyncObjFree(o));
    s.free(r);

    // A GPU that signals and waits, with a CPU waiter.
    let o = object_from(&s, &[gpu_list(&s, 7, 3), s.party(NvSciSyncAccessPerm_WaitOnly, true)]);
    assert_eq!(engine_fence(o, &mut f), 1);
    call!(t.NvSciSyncFenceClear(&mut f));
    call!(t.NvSciSyncObjFree(o));

    // Two signalers still conflict; a CPU-only primitive does not match the GPU's.
    for other in [
        s.party(NvSciSyncAccessPerm_SignalOnly, true),
        s.list(&[
            (NvSciSyncAttrKey_RequiredPerm, bytes_of(&NvSciSyncAccessPerm_WaitOnly)),
            (NvSciSyncAttrKey_NeedCpuAccess, bytes_of(&true)),
            (NvSciSyncAttrKey_PrimitiveInfo, bytes_of(&NvSciSyncAttrValPrimitiveType_SysmemSemaphore)),
        ]),
    ] {
        let gl = gpu_list(&s, 7, 1);
        let (e, c) = s.reconcile(&[gl, other]).unwrap_err();
        assert_eq!(e, NvSciError_ReconciliationFailed);
        s.free(c);
        s.free(gl);
        s.free(other);
    }

    for l in lists {
        s.free(l);
    }
    assert_eq!(s.ledger().counts(), HandleCounts { modules: 1, ..Default::default() });
}
