//! Soak: many import / map / signal / wait / unmap cycles through the NvSci code path (the mock
//! in its GPU mode on a desktop GPU), with device memory in use, open descriptors and resident
//! set size sampled at the start and the end.
//!
//! ```text
//! cargo run --release --example soak [-- --cycles 100000]
//! ```
//!
//! Each cycle imports a buffer (read-write) and a sync object into CUDA, maps the buffer, has a
//! stream wait for a CPU-signalled fence, write the buffer and signal back, waits for that signal
//! on the CPU, checks the byte the GPU wrote, and drops everything.

use nvsci::buf::{BufAttr, BufAttrList, BufModule, BufObj, BufType, Perm};
use nvsci::cuda::cudarc::driver::sys;
use nvsci::cuda::{fill_sync_attrs, CudaGpu, CudaSyncObj, ExternalMemory, MemSync, ReadWrite};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::NvSci;
use std::process::ExitCode;
use std::time::{Duration, Instant};

type Res<T> = Result<T, String>;

fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

/// (device memory in use in bytes, open fds, resident set in bytes).
fn sample() -> Res<(usize, usize, usize)> {
    let (free, total) = nvsci::cuda::cudarc::driver::result::mem_get_info().map_err(e)?;
    let fds = std::fs::read_dir("/proc/self/fd").map_err(e)?.count();
    let statm = std::fs::read_to_string("/proc/self/statm").map_err(e)?;
    let pages: usize = statm.split_whitespace().nth(1).ok_or("statm")?.parse().map_err(e)?;
    Ok((total - free, fds, pages * 4096))
}

fn sync_obj(m: &SyncModule, dev: &CudaGpu, cpu_signals: bool) -> Res<SyncObj> {
    let mut cpu = m.attr_list().map_err(e)?;
    let perm = if cpu_signals { SyncPerm::SignalOnly } else { SyncPerm::WaitOnly };
    cpu.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(perm)]).map_err(e)?;
    let mut gpu = m.attr_list().map_err(e)?;
    fill_sync_attrs(dev, &mut gpu, !cpu_signals, cpu_signals).map_err(e)?;
    SyncObj::alloc(&SyncAttrList::reconcile(&[&cpu, &gpu]).map_err(e)?).map_err(e)
}

fn run() -> Res<()> {
    let mut cycles = 100_000u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--cycles" => cycles = args.next().ok_or("--cycles needs a value")?.parse().map_err(e)?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let dev = CudaGpu::open(0).map_err(e)?;
    let lib = NvSci::mock();
    let bm = BufModule::open(&lib).map_err(e)?;
    let mut l = bm.attr_list().map_err(e)?;
    l.set(&[
        BufAttr::Types(&[BufType::RAW_BUFFER]),
        BufAttr::RawSize(1 << 20),
        BufAttr::NeedCpuAccess(true),
        BufAttr::RequiredPerm(Perm::ReadWrite),
        BufAttr::GpuId(&[dev.gpu_id()]),
    ])
    .map_err(e)?;
    let buf = BufObj::alloc(&BufAttrList::reconcile(&[&l]).map_err(e)?).map_err(e)?;
    let sm = SyncModule::open(&lib).map_err(e)?;
    let to_gpu = sync_obj(&sm, &dev, true)?;
    let from_gpu = sync_obj(&sm, &dev, false)?;
    let mut ctx = sm.cpu_wait_context().map_err(e)?;
    let stream = dev.context().new_stream().map_err(e)?;
    let mut cycle = |i: u64| -> Res<()> {
        let mem = ExternalMemory::<ReadWrite>::from_buf_obj(&dev, &buf).map_err(e)?;
        let map = mem.map_all().map_err(e)?;
        let wait_on = CudaSyncObj::import(&dev, &to_gpu).map_err(e)?;
        let signal_with = CudaSyncObj::import(&dev, &from_gpu).map_err(e)?;
        let go = to_gpu.generate_fence().map_err(e)?;
        wait_on.wait(&stream, &go, MemSync::Perform).map_err(e)?;
        // SAFETY: the mapping covers 1 MiB; the memset is queued after the wait.
        let r = unsafe { sys::cuMemsetD8Async(map.device_address(), i as u8, 1, stream.cu_stream()) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(format!("cuMemsetD8Async: {r:?}"));
        }
        let done = signal_with.signal(&stream, MemSync::Perform).map_err(e)?;
        to_gpu.signal().map_err(e)?;
        done.wait(&mut ctx, Some(Duration::from_secs(10))).map_err(e)?;
        if buf.cpu_read().map_err(e)?[0] != i as u8 {
            return Err(format!("cycle {i}: the GPU's write is not in the buffer"));
        }
        Ok(())
    };
    for i in 0..100 {
        cycle(i)?; // warm-up: first-use allocations of the driver and the process
    }
    // Dropped imports are destroyed on the teardown thread: sample settled states.
    dev.flush_teardown(Duration::from_secs(60));
    let start = sample()?;
    let t0 = Instant::now();
    for i in 0..cycles {
        cycle(i)?;
    }
    let elapsed = t0.elapsed();
    let left = dev.flush_teardown(Duration::from_secs(60));
    if left != 0 {
        return Err(format!("{left} destroys still queued 60 s after the last cycle"));
    }
    let end = sample()?;
    println!("device: {}", dev.name().map_err(e)?);
    println!(
        "{cycles} import/map/wait/write/signal/unmap cycles in {:.1} s ({:.1} us per cycle), every write checked",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / cycles as f64
    );
    println!("| sample | device memory in use (MiB) | open fds | resident set (MiB) |");
    println!("|---|---:|---:|---:|");
    for (name, (mem, fds, rss)) in [("start", start), ("end", end)] {
        println!("| {name} | {:.1} | {fds} | {:.1} |", mem as f64 / 1048576.0, rss as f64 / 1048576.0);
    }
    Ok(())
}

fn main() -> ExitCode {
    env_logger::init();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}
