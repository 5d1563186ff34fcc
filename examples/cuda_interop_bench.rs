//! Overhead of the crate's CUDA interop wrappers against the same raw driver calls, in one run:
//!
//! (a) signal + wait round trip on a CUDA stream on a Vulkan-exported timeline semaphore imported
//!     into CUDA: `CudaSemaphore::signal` then `wait`, against `cuSignalExternalSemaphoresAsync`
//!     / `cuWaitExternalSemaphoresAsync` with hand-built parameters (target ratio <= 1.05);
//! (b) import + map + unmap of a CUDA VMM-exported fd (`ExportableAllocation`):
//!     `ExternalMemory::from_opaque_fd` + `map_all` + drops, against `cuImportExternalMemory` /
//!     `cuExternalMemoryGetMappedBuffer` / `cuMemFree` / `cuDestroyExternalMemory`.
//!
//! Both sides are measured in interleaved blocks (alternating which goes first) to cancel drift.
//! Prints a markdown table; exits non-zero when a verification fails.
//!
//! ```text
//! cargo run --release --features vulkan --example cuda_interop_bench -- [--iters 10000] [--map-iters 1000]
//! ```

#[path = "support/percentile.rs"]
mod percentile;

use nvsci::cuda::cudarc::driver::sys;
use nvsci::cuda::{CudaGpu, CudaSemaphore, ExportableAllocation, ExternalMemory, ReadWrite, SemaphoreKind};
use nvsci::vulkan::{TimelineSemaphore, VulkanContext};
use percentile::pct;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn arg(name: &str, default: usize) -> Res<usize> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        Some(i) => Ok(args.get(i + 1).ok_or(format!("{name} needs a value"))?.parse()?),
        None => Ok(default),
    }
}

fn check(what: &str, r: sys::CUresult) -> Res<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed: {r:?}").into())
    }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

fn signal_params(value: u64) -> sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS {
    sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS {
        params: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st__bindgen_ty_1 {
            fence: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st__bindgen_ty_1__bindgen_ty_1 { value },
            nvSciSync: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st__bindgen_ty_1__bindgen_ty_2 {
                fence: core::ptr::null_mut(),
            },
            keyedMutex: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st__bindgen_ty_1__bindgen_ty_3 { key: 0 },
            reserved: [0; 12],
        },
        flags: 0,
        reserved: [0; 16],
    }
}

fn wait_params(value: u64) -> sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS {
    sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS {
        params: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st__bindgen_ty_1 {
            fence: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st__bindgen_ty_1__bindgen_ty_1 { value },
            nvSciSync: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st__bindgen_ty_1__bindgen_ty_2 {
                fence: core::ptr::null_mut(),
            },
            keyedMutex: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st__bindgen_ty_1__bindgen_ty_3 {
                key: 0,
                timeoutMs: 0,
            },
            reserved: [0; 10],
        },
        flags: 0,
        reserved: [0; 16],
    }
}

struct Row {
    what: String,
    crate_ns: f64,
    raw_ns: f64,
    target: &'static str,
}

/// (a): ns per signal+wait iteration, crate vs raw.
fn semaphore_round_trip(
    dev: &CudaGpu,
    vk: &std::sync::Arc<VulkanContext>,
    iters: usize,
    failures: &mut Vec<String>,
) -> Res<Row> {
    let timeline = TimelineSemaphore::new_exportable(vk, 0)?;
    let wrapped = CudaSemaphore::import(dev, timeline.export_fd()?, SemaphoreKind::Timeline)?;
    // The raw side imports its own fd of the same semaphore.
    let fd = timeline.export_fd()?;
    let desc = sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
        type_: sys::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD,
        handle: sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_st__bindgen_ty_1 { fd: fd.as_raw_fd() },
        flags: 0,
        reserved: [0; 16],
    };
    dev.context().bind_to_thread()?;
    let mut raw: sys::CUexternalSemaphore = core::ptr::null_mut();
    // SAFETY: a complete descriptor holding a valid timeline-semaphore fd.
    check("cuImportExternalSemaphore", unsafe { sys::cuImportExternalSemaphore(&mut raw, &desc) })?;
    let _ = fd.into_raw_fd(); // the driver owns it now
    let stream = dev.context().new_stream()?;
    let cu_stream = stream.cu_stream();

    let block = 100.min(iters.max(1));
    let blocks = iters.div_ceil(block);
    let mut value = 0u64;
    let (mut t_crate, mut t_raw) = (Duration::ZERO, Duration::ZERO);
    let crate_block = |value: &mut u64| -> Res<Duration> {
        let t0 = Instant::now();
        for _ in 0..block {
            *value += 1;
            wrapped.signal(&stream, *value)?;
            wrapped.wait(&stream, *value)?;
        }
        stream.synchronize()?;
        Ok(t0.elapsed())
    };
    let raw_block = |value: &mut u64| -> Res<Duration> {
        let t0 = Instant::now();
        for _ in 0..block {
            *value += 1;
            let s = signal_params(*value);
            let w = wait_params(*value);
            // SAFETY: one live semaphore and one parameter block per call, on a live stream.
            check("cuSignalExternalSemaphoresAsync", unsafe {
                sys::cuSignalExternalSemaphoresAsync(&raw, &s, 1, cu_stream)
            })?;
            // SAFETY: as above.
            check("cuWaitExternalSemaphoresAsync", unsafe {
                sys::cuWaitExternalSemaphoresAsync(&raw, &w, 1, cu_stream)
            })?;
        }
        stream.synchronize()?;
        Ok(t0.elapsed())
    };
    // Warm-up, then interleaved blocks (ABBA order).
    crate_block(&mut value)?;
    raw_block(&mut value)?;
    for b in 0..blocks {
        if b.is_multiple_of(2) {
            t_crate += crate_block(&mut value)?;
            t_raw += raw_block(&mut value)?;
        } else {
            t_raw += raw_block(&mut value)?;
            t_crate += crate_block(&mut value)?;
        }
        // Verification (untimed): Vulkan sees the last value CUDA signalled.
        let seen = timeline.value()?;
        if seen != value {
            failures.push(format!("timeline value {seen} after block {b}, expected {value}"));
        }
    }
    drop(wrapped);
    dev.context().bind_to_thread()?;
    // SAFETY: all work on the stream finished (synchronised in every block).
    check("cuDestroyExternalSemaphore", unsafe { sys::cuDestroyExternalSemaphore(raw) })?;
    let n = (blocks * block) as f64;
    Ok(Row {
        what: format!("signal+wait round trip, Vulkan timeline semaphore (N={})", blocks * block),
        crate_ns: t_crate.as_nanos() as f64 / n,
        raw_ns: t_raw.as_nanos() as f64 / n,
        target: "<= 1.05",
    })
}

/// The raw import of a VMM-exported `fd` of `size` bytes and its whole mapping
/// (`cuImportExternalMemory` + `cuExternalMemoryGetMappedBuffer`); the import is destroyed again
/// if the mapping fails.
fn raw_import_map(fd: std::os::fd::OwnedFd, size: u64) -> Res<(sys::CUexternalMemory, sys::CUdeviceptr)> {
    let desc = sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
        type_: sys::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
        handle: sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st__bindgen_ty_1 { fd: fd.as_raw_fd() },
        size,
        flags: 0,
        reserved: [0; 16],
    };
    let mut mem: sys::CUexternalMemory = core::ptr::null_mut();
    // SAFETY: a complete descriptor with a valid VMM-exported fd of `size` bytes.
    check("cuImportExternalMemory", unsafe { sys::cuImportExternalMemory(&mut mem, &desc) })?;
    let _ = fd.into_raw_fd(); // owned by the driver after a successful import
    let bdesc = sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC { offset: 0, size, flags: 0, reserved: [0; 16] };
    let mut ptr: sys::CUdeviceptr = 0;
    // SAFETY: the import is alive and the range lies inside it.
    let mapped = unsafe { sys::cuExternalMemoryGetMappedBuffer(&mut ptr, mem, &bdesc) };
    if mapped != sys::CUresult::CUDA_SUCCESS {
        // SAFETY: the import is alive and has no mapping.
        unsafe { sys::cuDestroyExternalMemory(mem) };
        check("cuExternalMemoryGetMappedBuffer", mapped)?;
    }
    Ok((mem, ptr))
}

/// A mapping and its import, handed to [`RawDestroyer`]'s thread.
struct RawObjects(sys::CUdeviceptr, sys::CUexternalMemory);

// SAFETY: the driver's handles may be used from any thread that has their context current; the
// destroy thread binds it before using them, and each pair is destroyed once, by that thread only.
unsafe impl Send for RawObjects {}

enum RawMsg {
    Destroy(RawObjects),
    Flush(mpsc::Sender<()>),
}

/// The raw reproduction of a deferred destroy, with no crate code: the caller imports and maps and
/// sends the handles to one long-lived thread, which synchronises the context once for what it has
/// gathered (a queued stream operation may still use the memory) and then frees and destroys it.
/// The floor of any teardown that moves destroys off the caller's thread.
struct RawDestroyer {
    tx: Option<mpsc::Sender<RawMsg>>,
    thread: Option<JoinHandle<()>>,
}

impl RawDestroyer {
    fn new(ctx: Arc<nvsci::cuda::cudarc::driver::CudaContext>) -> Self {
        let (tx, rx) = mpsc::channel::<RawMsg>();
        let thread = std::thread::spawn(move || {
            if ctx.bind_to_thread().is_err() {
                return;
            }
            let mut objects = Vec::new();
            let mut flushes = Vec::new();
            while let Ok(first) = rx.recv() {
                let mut msg = Some(first);
                while let Some(m) = msg.take().or_else(|| rx.try_recv().ok()) {
                    match m {
                        RawMsg::Destroy(o) => objects.push(o),
                        RawMsg::Flush(done) => flushes.push(done),
                    }
                }
                if !objects.is_empty() {
                    // SAFETY: the context is current on this thread.
                    let _ = unsafe { sys::cuCtxSynchronize() };
                }
                for RawObjects(ptr, mem) in objects.drain(..) {
                    // SAFETY: each mapping and import arrives once; the mapping is freed before its
                    // import is destroyed, after a synchronisation that started after both were sent.
                    unsafe {
                        sys::cuMemFree_v2(ptr);
                        sys::cuDestroyExternalMemory(mem);
                    }
                }
                for done in flushes.drain(..) {
                    let _ = done.send(());
                }
            }
        });
        Self { tx: Some(tx), thread: Some(thread) }
    }

    fn destroy(&self, objects: RawObjects) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(RawMsg::Destroy(objects));
        }
    }

    /// Returns once everything sent before has been destroyed.
    fn flush(&self) {
        let (done, wait) = mpsc::channel();
        if let Some(tx) = &self.tx {
            if tx.send(RawMsg::Flush(done)).is_ok() {
                let _ = wait.recv();
            }
        }
    }
}

impl Drop for RawDestroyer {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// (b): ns per import+map+unmap+destroy, crate vs raw (and raw plus a context synchronise before
/// the free). The crate's destroys run on its teardown thread: the interleaved rows time the
/// caller, the batch line after them includes the destroys (`flush_teardown`).
fn import_map_unmap(dev: &CudaGpu, iters: usize, failures: &mut Vec<String>) -> Res<(Row, Row)> {
    let alloc = ExportableAllocation::new(dev, 2 << 20)?;
    let size = alloc.size() as u64;
    dev.context().bind_to_thread()?;
    // SAFETY: the allocation is mapped read-write on this device and `size` bytes long.
    check("cuMemsetD8", unsafe { sys::cuMemsetD8_v2(alloc.device_address(), 0x5a, size as usize) })?;
    // SAFETY: the context is current on this thread; synchronising has no other precondition.
    check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })?;

    let raw_cycle = |sync: bool, verify: bool| -> Res<Duration> {
        let fd = alloc.export_fd()?;
        let t0 = Instant::now();
        let (mem, ptr) = raw_import_map(fd, size)?;
        let mut probe = [0u8; 4];
        if verify {
            // SAFETY: the mapping is at least 4 bytes long.
            check("cuMemcpyDtoH", unsafe { sys::cuMemcpyDtoH_v2(probe.as_mut_ptr().cast(), ptr, 4) })?;
        }
        if sync {
            // SAFETY: plain context synchronise.
            check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })?;
        }
        // SAFETY: the pointer came from cuExternalMemoryGetMappedBuffer and is freed once.
        check("cuMemFree", unsafe { sys::cuMemFree_v2(ptr) })?;
        // SAFETY: the import is destroyed once, after its mapping.
        check("cuDestroyExternalMemory", unsafe { sys::cuDestroyExternalMemory(mem) })?;
        let t = t0.elapsed();
        if ptr == 0 || (verify && probe != [0x5a; 4]) {
            return Err(format!("raw import mapped {ptr:#x} reading {probe:?}").into());
        }
        Ok(t)
    };
    let destroyer = RawDestroyer::new(dev.context().clone());
    let raw_deferred_cycle = || -> Res<()> {
        let (mem, ptr) = raw_import_map(alloc.export_fd()?, size)?;
        destroyer.destroy(RawObjects(ptr, mem));
        Ok(())
    };
    let crate_cycle = |verify: bool| -> Res<Duration> {
        let fd = alloc.export_fd()?;
        let t0 = Instant::now();
        let mem = ExternalMemory::<ReadWrite>::from_opaque_fd(dev, fd, size, false)?;
        let mapped = mem.map_all()?;
        let ptr = mapped.device_address();
        let mut probe = [0u8; 4];
        if verify {
            // SAFETY: the mapping is at least 4 bytes long.
            check("cuMemcpyDtoH", unsafe { sys::cuMemcpyDtoH_v2(probe.as_mut_ptr().cast(), ptr, 4) })?;
        }
        drop(mapped);
        drop(mem);
        let t = t0.elapsed();
        if ptr == 0 || (verify && probe != [0x5a; 4]) {
            return Err(format!("crate import mapped {ptr:#x} reading {probe:?}").into());
        }
        Ok(t)
    };
    // Verified warm-up of each path (the timed cycles skip the probe copy).
    for _ in 0..3 {
        if let Err(e) = crate_cycle(true) {
            failures.push(format!("crate import: {e}"));
        }
        if let Err(e) = raw_cycle(false, true) {
            failures.push(format!("raw import: {e}"));
        }
    }
    let fds = open_fds();
    let block = 50.min(iters.max(1));
    let blocks = iters.div_ceil(block);
    let (mut t_crate, mut t_raw, mut t_raw_sync) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for b in 0..blocks {
        for i in 0..block {
            // Rotate the order of the three variants every iteration.
            for k in 0..3 {
                match (b * block + i + k) % 3 {
                    0 => t_crate += crate_cycle(false)?,
                    1 => t_raw += raw_cycle(false, false)?,
                    _ => t_raw_sync += raw_cycle(true, false)?,
                }
            }
        }
    }
    dev.flush_teardown(Duration::from_secs(60));
    if open_fds() != fds {
        failures.push(format!("open fds changed from {fds} to {} over the import cycles", open_fds()));
    }
    let n = (blocks * block) as f64;
    let crate_ns = t_crate.as_nanos() as f64 / n;
    // End to end, in interleaved rounds (the machine's speed drifts between runs): a batch of crate
    // cycles and the teardown thread's destroys of all of them; the same number of raw cycles
    // (each destroying at once); crate cycles each waiting for their own destroys. Medians of the
    // per-round figures.
    let rounds = 10;
    let per = (blocks * block).div_ceil(rounds).max(1);
    let (mut batch, mut raw, mut each, mut deferred) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut deferred_each = Vec::new();
    for _ in 0..rounds {
        let t0 = Instant::now();
        for _ in 0..per {
            raw_deferred_cycle()?;
        }
        destroyer.flush();
        deferred.push(t0.elapsed().as_nanos() as f64 / per as f64);
        let t0 = Instant::now();
        for _ in 0..per {
            raw_deferred_cycle()?;
            destroyer.flush();
        }
        deferred_each.push(t0.elapsed().as_nanos() as f64 / per as f64);
        let t0 = Instant::now();
        for _ in 0..per {
            crate_cycle(false)?;
        }
        let left = dev.flush_teardown(Duration::from_secs(60));
        batch.push(t0.elapsed().as_nanos() as f64 / per as f64);
        if left != 0 {
            failures.push(format!("{left} destroys still queued after a batch"));
        }
        let t0 = Instant::now();
        for _ in 0..per {
            raw_cycle(false, false)?;
        }
        raw.push(t0.elapsed().as_nanos() as f64 / per as f64);
        let t0 = Instant::now();
        for _ in 0..per {
            crate_cycle(false)?;
            dev.flush_teardown(Duration::from_secs(60));
        }
        each.push(t0.elapsed().as_nanos() as f64 / per as f64);
    }
    let median = |v: &[f64]| pct(&mut v.to_vec(), 0.5);
    let ratio_to =
        |v: &[f64], floor: &[f64]| median(&v.iter().zip(floor).map(|(c, r)| c / r).collect::<Vec<_>>());
    let ratio = |v: &[f64]| ratio_to(v, &raw);
    println!(
        "import+map+unmap, {rounds} rounds of {per} cycles, medians: raw {:.0} ns/iter; crate, destroys completed \
         at the end of each batch {:.0} ns/iter ({:.3}x), each cycle waiting for its own destroys {:.0} ns/iter \
         ({:.3}x)",
        median(&raw),
        median(&batch),
        ratio(&batch),
        median(&each),
        ratio(&each)
    );
    println!(
        "  raw, destroys deferred to one thread that synchronises once per gathered burst (the floor of a \
         deferred teardown), destroys completed at the end of each batch: {:.0} ns/iter ({:.3}x of raw); \
         crate batch / raw deferred: {:.3}x; each raw cycle waiting for its deferred destroys {:.0} ns/iter \
         ({:.3}x of raw), crate one at a time / raw deferred one at a time: {:.3}x",
        median(&deferred),
        ratio(&deferred),
        ratio_to(&batch, &deferred),
        median(&deferred_each),
        ratio(&deferred_each),
        ratio_to(&each, &deferred_each)
    );
    Ok((
        Row {
            what: format!("import+map+unmap of a VMM fd, {} MiB (N={})", size >> 20, blocks * block),
            crate_ns,
            raw_ns: t_raw.as_nanos() as f64 / n,
            target: "-",
        },
        Row {
            what: "  same, raw side also calling cuCtxSynchronize before cuMemFree (as the crate did before its \
                   teardown queue)"
                .into(),
            crate_ns,
            raw_ns: t_raw_sync.as_nanos() as f64 / n,
            target: "-",
        },
    ))
}

fn main() -> Res<()> {
    env_logger::init();
    let iters = arg("--iters", 10_000)?;
    let map_iters = arg("--map-iters", 1_000)?;
    let dev = CudaGpu::open(0)?;
    let vk = VulkanContext::for_cuda(&dev)?;
    println!(
        "GPU: {} ({}), Vulkan: {} API {}",
        dev.name()?,
        vk.info().uuid_string(),
        vk.info().name,
        vk.info().api_version_string()
    );
    let mut failures = Vec::new();
    let a = semaphore_round_trip(&dev, &vk, iters, &mut failures)?;
    let (b, b_sync) = import_map_unmap(&dev, map_iters, &mut failures)?;
    println!();
    println!("| measurement | crate (ns/iter) | raw (ns/iter) | crate/raw | target |");
    println!("|---|---:|---:|---:|---|");
    for r in [&a, &b, &b_sync] {
        println!(
            "| {} | {:.0} | {:.0} | {:.3} | {} |",
            r.what,
            r.crate_ns,
            r.raw_ns,
            r.crate_ns / r.raw_ns,
            r.target
        );
    }
    if a.crate_ns / a.raw_ns > 1.05 {
        println!("\nnote: the semaphore ratio is above the 1.05 target");
    }
    if !failures.is_empty() {
        eprintln!("\nverification failures:");
        for f in &failures {
            eprintln!("  {f}");
        }
        std::process::exit(1);
    }
    Ok(())
}
