//! A Rust CUDA consumer's time per frame converting NV12 to RGBA in place: the Rust figure that
//! `examples/python/bench_torch_consumer.py` sets beside its PyTorch consumer (same frames, same
//! size, same loop).
//!
//! ```text
//! cargo run --release --example cuda_consumer_bench -- [--width 3840 --height 2160] [--frames 500]
//! ```
//!
//! One thread, one stream (the mock NvSci library: a CPU producer, one CUDA consumer, four
//! frames). Per frame, the producer acquires a frame (its CPU waits for the frame's release
//! fence), writes its marker into luma pixel (0, 0) and presents it; the consumer's
//! `Consumer::process` enqueues the present wait on its stream, the NV12 -> RGBA kernel
//! (`nvsci::convert::Nv12ToRgba`, which adds the frame's R + G + B to the frame's own counter)
//! and the release signal. Every byte of a slot but the marker is 128 (written once, the first
//! time the slot comes round), so every frame's R + G + B is known from the BT.601 oracle
//! (`support/bt601.rs`): a frame converted before its marker was written, or a stale slot, gives
//! another sum.
//!
//! Measured after 20 warm-up frames: wall time per frame (the GPU drained at the end), this
//! thread's CPU time per frame, and the floor: the same kernel enqueued `frames` times on one
//! held frame (same memory, no hand-off). Prints one line:
//!
//! ```text
//! cuda_consumer_bench WxH frames=N per_frame_us=.. cpu_us=.. kernel_alone_us=.. verified=N mismatched=M
//! ```
//!
//! and exits non-zero on a mismatching frame. On the mock the frames are page-locked host memory
//! mapped into CUDA (its GPU mode): the kernel reads them across the bus, as the Python consumer
//! does.

#[path = "support/bt601.rs"]
mod bt601;
#[path = "support/rusage.rs"]
mod rusage;

use nvsci::convert::Nv12ToRgba;
use nvsci::cuda::cudarc::driver::DevicePtr;
use nvsci::pipeline::{Backend, ConsumerDesc, Engine, FrameFormat};
use nvsci::NvSci;
use std::process::ExitCode;
use std::time::{Duration, Instant};

type Res<T> = Result<T, String>;

fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

const WARM_UP: u64 = 20;
const SLOTS: usize = 4;

/// Frame `t`'s marker (luma pixel (0, 0)): distinct across any four consecutive frames.
fn marker(t: u64) -> u8 {
    16 + (t % 200) as u8
}

/// R + G + B of a frame whose bytes are all 128 but luma pixel (0, 0), which is `m`.
fn frame_sum(pixels: u64, m: u8) -> u64 {
    let s = |c: [u8; 3]| c.iter().map(|&v| v as u64).sum::<u64>();
    (pixels - 1) * s(bt601::rgb(128, 128, 128)) + s(bt601::rgb(m, 128, 128))
}

struct Args {
    width: u32,
    height: u32,
    frames: u64,
}

fn parse() -> Res<Args> {
    let mut a = Args { width: 3840, height: 2160, frames: 500 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        let n = v.parse::<u64>().map_err(|err| format!("{flag} {v}: {err}"))?;
        match flag.as_str() {
            "--width" => a.width = n as u32,
            "--height" => a.height = n as u32,
            "--frames" => a.frames = n.max(1),
            other => return Err(format!("unknown argument {other} (--width, --height, --frames)")),
        }
    }
    Ok(a)
}

fn run() -> Res<bool> {
    let a = parse()?;
    let b = Backend::with_library(NvSci::mock());
    let dev = b.cuda().ok_or("this benchmark needs a CUDA GPU (the mock's GPU mode)")?.clone();
    let ring = b
        .stream(FrameFormat::nv12(a.width, a.height))
        .frames(SLOTS)
        .timeout(Duration::from_secs(10))
        .producer(Engine::Cpu)
        .consumer(ConsumerDesc::new(Engine::Cuda(dev.clone())))
        .build()
        .map_err(e)?;
    let layout = ring.layout().clone();
    let (mut p, cs) = ring.split().map_err(e)?;
    let mut c = cs.into_iter().next().ok_or("no consumer")?;
    let stream = dev.context().new_stream().map_err(e)?;
    c.set_stream(stream.clone()).map_err(e)?;
    let kernel = Nv12ToRgba::load(&dev).map_err(e)?;
    let pixels = a.width as u64 * a.height as u64;
    let rgba = stream.alloc_zeros::<u8>((pixels * 4) as usize).map_err(e)?;
    let total = WARM_UP + a.frames;
    // One counter per frame, and one for the floor.
    let sums = stream.alloc_zeros::<u64>(total as usize + 1).map_err(e)?;
    let y0 = layout.planes[0].offset as usize;
    let mut filled = [false; SLOTS];

    let mut frame = |t: u64| -> Res<()> {
        let f = p.acquire().map_err(e)?;
        {
            let mut w = p.cpu_write(&f).map_err(e)?;
            if !filled[f.index()] {
                w.fill(128);
                filled[f.index()] = true;
            }
            w[y0] = marker(t);
        }
        p.present(f).map_err(e)?;
        c.process(|f| {
            let s = f.stream();
            let (dst, _g1) = rgba.device_ptr(s);
            let (sum0, _g2) = sums.device_ptr(s);
            // SAFETY: the frame is a whole NV12 frame of `layout` mapped for the device; `dst`
            // holds w*h*4 bytes and `sum0 + 8 t` is element t < total of `sums`, both alive
            // until the stream is synchronised below.
            unsafe { kernel.enqueue(s, &layout, f.device_address(), dst, sum0 + 8 * t) }
        })
        .map_err(e)
    };
    for t in 0..WARM_UP {
        frame(t)?;
    }
    stream.synchronize().map_err(e)?;
    let (t0, cpu0) = (Instant::now(), rusage::cpu_time(rusage::THREAD));
    for t in WARM_UP..total {
        frame(t)?;
    }
    stream.synchronize().map_err(e)?;
    let per_frame = t0.elapsed().as_secs_f64() * 1e6 / a.frames as f64;
    let cpu = (rusage::cpu_time(rusage::THREAD) - cpu0).as_secs_f64() * 1e6 / a.frames as f64;

    // The floor: the same kernel, `frames` times, on one held frame (its marker is the next one).
    let f = p.acquire().map_err(e)?;
    p.cpu_write(&f).map_err(e)?[y0] = marker(total);
    p.present(f).map_err(e)?;
    let mut alone: Res<f64> = Err("the floor did not run".into());
    c.process(|f| {
        let s = f.stream();
        let (dst, _g1) = rgba.device_ptr(s);
        let (sum0, _g2) = sums.device_ptr(s);
        // SAFETY: as above (the last counter).
        unsafe { kernel.enqueue(s, &layout, f.device_address(), dst, sum0 + 8 * total) }?;
        alone = (|| {
            s.synchronize().map_err(e)?;
            let t = Instant::now();
            for _ in 1..a.frames {
                // SAFETY: as above.
                unsafe { kernel.enqueue(s, &layout, f.device_address(), dst, sum0 + 8 * total) }
                    .map_err(e)?;
            }
            s.synchronize().map_err(e)?;
            Ok(t.elapsed().as_secs_f64() * 1e6 / (a.frames - 1).max(1) as f64)
        })();
        Ok(())
    })
    .map_err(e)?;
    let alone = alone?;

    let got = stream.clone_dtoh(&sums).map_err(e)?;
    stream.synchronize().map_err(e)?;
    let mut bad = (0..total).filter(|&t| got[t as usize] != frame_sum(pixels, marker(t))).count() as u64;
    if got[total as usize] != a.frames.max(1) * frame_sum(pixels, marker(total)) {
        bad += 1;
    }
    println!(
        "cuda_consumer_bench {}x{} frames={} per_frame_us={per_frame:.1} cpu_us={cpu:.1} kernel_alone_us={alone:.1} \
         verified={} mismatched={bad}",
        a.width,
        a.height,
        a.frames,
        total + 1 - bad
    );
    drop(c);
    Ok(bad == 0)
}

fn main() -> ExitCode {
    env_logger::init();
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(msg) => {
            eprintln!("cuda_consumer_bench: {msg}");
            ExitCode::FAILURE
        }
    }
}
