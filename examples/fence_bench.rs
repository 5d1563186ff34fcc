//! Engine -> CPU fence wake-ups on a CUDA GPU, the crate (the mock in GPU mode) beside the raw
//! floor, in one run.
//!
//! Round trip: the CPU signals a fence, a CUDA stream waits on it and signals another, the CPU
//! waits for that.
//!
//! * raw: a page-locked host counter pair, `cuStreamWaitValue64` / `cuStreamWriteValue64`, the CPU
//!   spinning on the second counter;
//! * crate: `SyncObj::signal`, `CudaSyncObj::wait` / `signal`, `Fence::wait` (mock GPU mode: a
//!   short spin, then a sleep that the stream's `SyncCounterNotify` host function ends).
//!
//! Also the CPU time (this thread's, `CLOCK_THREAD_CPUTIME_ID`) of a `Fence::wait` on a stream
//! signal that comes 10 ms later, and the caller's time to enqueue a stream wait + stream signal
//! (fences already expired, so the stream never stalls): the crate's `CudaSyncObj::wait` +
//! `signal_into` against the raw `cuStreamWaitValue64` + `cuStreamWriteValue64`, and two raw
//! reproductions of what the crate adds per signal on the mock (the CPU waiters' wake-up: an
//! event recorded on the stream, a side stream waiting for it and running a host function; and
//! the same ordered by a wait on the counter instead of the event), interleaved per iteration.
//!
//! `cargo run --release --example fence_bench -- [iterations]`

#[path = "support/percentile.rs"]
mod percentile;
#[path = "support/rusage.rs"]
mod rusage;

use nvsci::cuda::cudarc::driver::sys;
use nvsci::cuda::{fill_sync_attrs, CudaGpu, CudaSyncObj, MemSync};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::NvSci;
use percentile::pct;
use std::time::{Duration, Instant};

// cudarc binds the `_v2` stream memory operations from its CUDA 11.7 bindings on, the original
// entry points before (as src/cuda/semaphore.rs does).
#[cfg(any(feature = "cuda-11040", feature = "cuda-11050", feature = "cuda-11060"))]
use sys::{cuStreamWaitValue64 as stream_wait_value64, cuStreamWriteValue64 as stream_write_value64};
#[cfg(not(any(feature = "cuda-11040", feature = "cuda-11050", feature = "cuda-11060")))]
use sys::{cuStreamWaitValue64_v2 as stream_wait_value64, cuStreamWriteValue64_v2 as stream_write_value64};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn thread_cpu() -> Duration {
    rusage::cpu_time(rusage::THREAD)
}

fn ck(what: &str, r: sys::CUresult) -> Res<()> {
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(format!("{what}: {r:?}").into());
    }
    Ok(())
}

/// The raw floor: two page-locked counters, the stream waits on one and writes the other.
fn raw(dev: &CudaGpu, n: usize) -> Res<Vec<f64>> {
    let stream = dev.context().new_stream()?;
    dev.context().bind_to_thread()?;
    let mut host: *mut core::ffi::c_void = core::ptr::null_mut();
    // SAFETY: valid out-pointer; 16 bytes of mapped, page-locked memory.
    ck("cuMemHostAlloc", unsafe { sys::cuMemHostAlloc(&mut host, 16, sys::CU_MEMHOSTALLOC_DEVICEMAP) })?;
    let a = host as *mut u64;
    // SAFETY: two u64 inside the allocation.
    let b = unsafe { a.add(1) };
    let (mut da, mut db) = (0, 0);
    // SAFETY: both addresses lie in the mapped allocation.
    unsafe {
        a.write_volatile(0);
        b.write_volatile(0);
        ck("cuMemHostGetDevicePointer", sys::cuMemHostGetDevicePointer_v2(&mut da, a.cast(), 0))?;
        ck("cuMemHostGetDevicePointer", sys::cuMemHostGetDevicePointer_v2(&mut db, b.cast(), 0))?;
    }
    let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
    let mut out = Vec::with_capacity(n);
    for i in 1..=n as u64 {
        // SAFETY: the counters stay allocated until the stream is synchronised below.
        unsafe {
            ck("wait", stream_wait_value64(stream.cu_stream(), da, i, geq))?;
            ck("write", stream_write_value64(stream.cu_stream(), db, i, 0))?;
        }
        std::thread::sleep(Duration::from_micros(200)); // the stream is parked on the wait
        let t = Instant::now();
        // SAFETY: atomic-width accesses to the mapped counters.
        unsafe { std::ptr::write_volatile(a, i) };
        // SAFETY: as above.
        while unsafe { std::ptr::read_volatile(b) } < i {
            std::hint::spin_loop();
        }
        out.push(t.elapsed().as_secs_f64() * 1e6);
    }
    stream.synchronize()?;
    // SAFETY: allocated above; no work uses it any more.
    unsafe { sys::cuMemFreeHost(host) };
    Ok(out)
}

struct Crate {
    _module: SyncModule,
    ready: SyncObj,
    ready_cuda: CudaSyncObj,
    done_cuda: CudaSyncObj,
    ctx: nvsci::sync::CpuWaitContext,
}

fn setup(dev: &CudaGpu, lib: &NvSci) -> Res<Crate> {
    let module = SyncModule::open(lib)?;
    let cpu = |perm| -> nvsci::Result<SyncAttrList> {
        let mut l = module.attr_list()?;
        l.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(perm)])?;
        Ok(l)
    };
    let mut waits = module.attr_list()?;
    fill_sync_attrs(dev, &mut waits, false, true)?;
    let ready = SyncObj::alloc(&SyncAttrList::reconcile(&[&cpu(SyncPerm::SignalOnly)?, &waits])?)?;
    let mut signals = module.attr_list()?;
    fill_sync_attrs(dev, &mut signals, true, false)?;
    let done = SyncObj::alloc(&SyncAttrList::reconcile(&[&signals, &cpu(SyncPerm::WaitOnly)?])?)?;
    Ok(Crate {
        ready_cuda: CudaSyncObj::import(dev, &ready)?,
        done_cuda: CudaSyncObj::import(dev, &done)?,
        ctx: module.cpu_wait_context()?,
        ready,
        _module: module,
    })
}

fn crate_round_trips(dev: &CudaGpu, c: &mut Crate, n: usize) -> Res<Vec<f64>> {
    let stream = dev.context().new_stream()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let f = c.ready.generate_fence()?;
        c.ready_cuda.wait(&stream, &f, MemSync::Skip)?;
        let done = c.done_cuda.signal(&stream, MemSync::Skip)?;
        std::thread::sleep(Duration::from_micros(200));
        let t = Instant::now();
        c.ready.signal()?;
        done.wait(&mut c.ctx, Some(Duration::from_secs(5)))?;
        out.push(t.elapsed().as_secs_f64() * 1e6);
    }
    stream.synchronize()?;
    Ok(out)
}

/// CPU time of a wait whose stream signal comes `delay` after the wait starts (the CPU signals
/// from another thread).
fn long_wait_cpu(dev: &CudaGpu, c: &mut Crate, delay: Duration, reps: usize) -> Res<(f64, f64)> {
    let stream = dev.context().new_stream()?;
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let f = c.ready.generate_fence()?;
        c.ready_cuda.wait(&stream, &f, MemSync::Skip)?;
        let done = c.done_cuda.signal(&stream, MemSync::Skip)?;
        let ready = c.ready.clone();
        let signaller = std::thread::spawn(move || {
            std::thread::sleep(delay);
            ready.signal()
        });
        let (t, c0) = (Instant::now(), thread_cpu());
        done.wait(&mut c.ctx, Some(Duration::from_secs(5)))?;
        cpu.push((thread_cpu() - c0).as_secs_f64() * 1e6);
        wall.push(t.elapsed().as_secs_f64() * 1e3);
        signaller.join().map_err(|_| "signaller panicked")??;
    }
    stream.synchronize()?;
    Ok((pct(&mut cpu, 0.5), pct(&mut wall, 0.5)))
}

extern "C" fn no_op(_: *mut core::ffi::c_void) {}

/// Enqueue time (us) per iteration of: the raw pair, the raw pair + an event-ordered host
/// function on a side stream, the raw pair + a counter-ordered host function, the crate's wait +
/// signal, the crate's wait alone and its signal alone, and the second of two back-to-back raw
/// wake-ups, event-ordered and counter-ordered.
fn enqueue_cost(dev: &CudaGpu, c: &mut Crate, n: usize) -> Res<[Vec<f64>; 8]> {
    let stream = dev.context().new_stream()?;
    let side = dev.context().new_stream()?;
    dev.context().bind_to_thread()?;
    let mut host: *mut core::ffi::c_void = core::ptr::null_mut();
    // SAFETY: valid out-pointer; 16 bytes of mapped, page-locked memory.
    ck("cuMemHostAlloc", unsafe { sys::cuMemHostAlloc(&mut host, 16, sys::CU_MEMHOSTALLOC_DEVICEMAP) })?;
    let a = host as *mut u64;
    // SAFETY: two u64 inside the allocation.
    let b = unsafe { a.add(1) };
    let (mut da, mut db) = (0, 0);
    let mut event: sys::CUevent = core::ptr::null_mut();
    // SAFETY: both addresses lie in the mapped allocation; valid out-pointers. `a` holds 2^62,
    // so every wait on it is satisfied: `CU_STREAM_WAIT_VALUE_GEQ` compares cyclically
    // ("(int64_t)(*addr - value) >= 0", cuda.h), so `u64::MAX` would never satisfy a wait for
    // a small value.
    unsafe {
        a.write_volatile(1 << 62);
        b.write_volatile(0);
        ck("cuMemHostGetDevicePointer", sys::cuMemHostGetDevicePointer_v2(&mut da, a.cast(), 0))?;
        ck("cuMemHostGetDevicePointer", sys::cuMemHostGetDevicePointer_v2(&mut db, b.cast(), 0))?;
        ck(
            "cuEventCreate",
            sys::cuEventCreate(&mut event, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32),
        )?;
    }
    let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
    let (s, side_s) = (stream.cu_stream(), side.cu_stream());
    let mut out: [Vec<f64>; 8] = Default::default();
    let mut fence = nvsci::sync::Fence::cleared();
    let us = |t: Instant| t.elapsed().as_secs_f64() * 1e6;
    for i in 1..=n as u64 {
        // SAFETY (each block): the counters and the event stay alive until the streams are
        // synchronised below; `no_op` makes no CUDA call.
        let t = Instant::now();
        unsafe {
            ck("wait", stream_wait_value64(s, da, i, geq))?;
            ck("write", stream_write_value64(s, db, i, 0))?;
        }
        out[0].push(us(t));
        let t = Instant::now();
        unsafe {
            ck("wait", stream_wait_value64(s, da, i, geq))?;
            ck("write", stream_write_value64(s, db, i, 0))?;
            ck("cuEventRecord", sys::cuEventRecord(event, s))?;
            ck("cuStreamWaitEvent", sys::cuStreamWaitEvent(side_s, event, 0))?;
            ck("cuLaunchHostFunc", sys::cuLaunchHostFunc(side_s, Some(no_op), core::ptr::null_mut()))?;
        }
        out[1].push(us(t));
        let t = Instant::now();
        unsafe {
            ck("wait", stream_wait_value64(s, da, i, geq))?;
            ck("write", stream_write_value64(s, db, i, 0))?;
            ck("wait side", stream_wait_value64(side_s, db, i, geq))?;
            ck("cuLaunchHostFunc", sys::cuLaunchHostFunc(side_s, Some(no_op), core::ptr::null_mut()))?;
        }
        out[2].push(us(t));
        // Back to back: a second wake-up enqueued right after a first, only the second timed:
        // whether an enqueue on the side stream waits behind a host function still pending there.
        for (k, counter_ordered) in [(6, false), (7, true)] {
            let mut t = Instant::now();
            for j in 0..2 {
                if j == 1 {
                    t = Instant::now();
                }
                unsafe {
                    ck("wait", stream_wait_value64(s, da, i, geq))?;
                    ck("write", stream_write_value64(s, db, i, 0))?;
                    if counter_ordered {
                        ck("wait side", stream_wait_value64(side_s, db, i, geq))?;
                    } else {
                        ck("cuEventRecord", sys::cuEventRecord(event, s))?;
                        ck("cuStreamWaitEvent", sys::cuStreamWaitEvent(side_s, event, 0))?;
                    }
                    ck(
                        "cuLaunchHostFunc",
                        sys::cuLaunchHostFunc(side_s, Some(no_op), core::ptr::null_mut()),
                    )?;
                }
            }
            out[k].push(us(t));
        }
        // The crate: a fence of `ready` that the CPU already signalled, so the wait passes.
        let f = c.ready.generate_fence()?;
        c.ready.signal()?;
        let t = Instant::now();
        c.ready_cuda.wait(&stream, &f, MemSync::Auto)?;
        c.done_cuda.signal_into(&stream, MemSync::Auto, &mut fence)?;
        out[3].push(us(t));
        let f = c.ready.generate_fence()?;
        c.ready.signal()?;
        let t = Instant::now();
        c.ready_cuda.wait(&stream, &f, MemSync::Auto)?;
        out[4].push(us(t));
        let t = Instant::now();
        c.done_cuda.signal_into(&stream, MemSync::Auto, &mut fence)?;
        out[5].push(us(t));
        if i % 32 == 0 {
            stream.synchronize()?;
            side.synchronize()?;
        }
    }
    stream.synchronize()?;
    side.synchronize()?;
    // SAFETY: created above; no work uses them any more.
    unsafe {
        sys::cuEventDestroy_v2(event);
        sys::cuMemFreeHost(host);
    }
    Ok(out)
}

fn main() -> Res<()> {
    let n: usize = std::env::args().nth(1).map(|s| s.parse()).transpose()?.unwrap_or(2000);
    let dev = CudaGpu::open(0)?;
    println!("device: {}", dev.name()?);
    let lib = NvSci::mock();
    let mut c = setup(&dev, &lib)?;
    // warm-up
    raw(&dev, 50)?;
    crate_round_trips(&dev, &mut c, 50)?;
    let mut r = raw(&dev, n)?;
    let mut k = crate_round_trips(&dev, &mut c, n)?;
    let (r50, r99) = (pct(&mut r, 0.5), pct(&mut r, 0.99));
    let (k50, k99) = (pct(&mut k, 0.5), pct(&mut k, 0.99));
    println!("round trip CPU -> stream -> CPU, {n} iterations (us):");
    println!("  raw floor (host counters, stream wait/write, CPU spinning): p50 {r50:.1}  p99 {r99:.1}");
    println!("  crate (mock GPU mode, Fence::wait):                         p50 {k50:.1}  p99 {k99:.1}");
    println!("  ratio: p50 {:.2}x  p99 {:.2}x", k50 / r50, k99 / r99);
    let (cpu, wall) = long_wait_cpu(&dev, &mut c, Duration::from_millis(10), 20)?;
    println!("a Fence::wait on a stream signal 10 ms away: {wall:.2} ms wall, {cpu:.0} us CPU (p50 of 20)");
    enqueue_cost(&dev, &mut c, 200)?; // warm-up
    let mut e = enqueue_cost(&dev, &mut c, n)?;
    let p = |v: &mut Vec<f64>| (pct(v, 0.5), pct(v, 0.99));
    let [raw_pair, raw_event, raw_counter, krate, kwait, ksignal, event2, counter2] = &mut e;
    let (r50, r99) = p(raw_pair);
    println!("enqueue a stream wait + stream signal, caller's time, {n} iterations (us):");
    println!("  raw cuStreamWaitValue64 + cuStreamWriteValue64:            p50 {r50:.2}  p99 {r99:.2}");
    let (a, b) = p(raw_event);
    println!("  raw + event record, side-stream event wait, host function: p50 {a:.2}  p99 {b:.2}");
    let (a, b) = p(raw_counter);
    println!("  raw + side-stream counter wait, host function:             p50 {a:.2}  p99 {b:.2}");
    let (a, b) = p(event2);
    println!("  the second of two back-to-back event-ordered wake-ups:     p50 {a:.2}  p99 {b:.2}");
    let (a, b) = p(counter2);
    println!("  the second of two back-to-back counter-ordered wake-ups:   p50 {a:.2}  p99 {b:.2}");
    let (k50, k99) = p(krate);
    println!("  crate CudaSyncObj::wait + signal_into (mock GPU mode):     p50 {k50:.2}  p99 {k99:.2}");
    let (a, b) = p(kwait);
    println!("    of which the wait alone:                                 p50 {a:.2}  p99 {b:.2}");
    let (a, b) = p(ksignal);
    println!("    of which the signal alone:                               p50 {a:.2}  p99 {b:.2}");
    println!("  ratio crate / raw: p50 {:.2}x  p99 {:.2}x", k50 / r50, k99 / r99);
    let left = dev.flush_teardown(Duration::from_secs(5));
    println!("teardown queue after flush: {left}");
    Ok(())
}
