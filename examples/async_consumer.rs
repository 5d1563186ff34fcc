//! Consumers of a camera as tokio tasks (`Consumer::next_frame`, feature `tokio`).
//!
//! ```text
//! cargo run --example async_consumer --features tokio                       # consumers in this process
//! cargo run --example async_consumer --features tokio -- --process          # a consumer process
//! cargo run --example async_consumer --features tokio -- --process --mailbox --frames 600
//! ```
//!
//! A camera thread draws the moving NV12 test pattern into a stream and presents each frame.
//!
//! * In this process (default): two consumers are tasks of one current-thread tokio runtime,
//!   so one thread serves both: a FIFO "recorder" that converts every frame to RGBA, and a
//!   mailbox "viewer" that takes the newest frame every few milliseconds. Each task is woken by
//!   the camera's present; neither has a thread of its own.
//! * `--process`: the consumer is another process of this program, attached through an NvSciIpc
//!   endpoint (NVIDIA's on Jetson / DRIVE OS, else the mock's); its task is woken by the
//!   endpoint's event descriptor, registered with tokio's reactor. `--mailbox` makes it a mailbox
//!   consumer.
//!
//! Every frame a consumer takes is converted to RGBA and checked: its RGB sum must equal the
//! sum computed from the pattern itself, and a FIFO consumer must see every sequence in order.
//! The program exits non-zero on any mismatch.

#[path = "support/nv12_pattern.rs"]
mod nv12_pattern;

use nv12_pattern::{fill_test_pattern, test_pattern_statistic};
use nvsci::convert::nv12_to_rgba;
use nvsci::ipc::{Ipc, IpcEndpoint};
use nvsci::pipeline::{Backend, Consumer, ConsumerDesc, FrameFormat, Producer};
use nvsci::{Error, Implementation, NvSci, RingError};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const WIDTH: u32 = 320;
const HEIGHT: u32 = 240;
const TIMEOUT: Duration = Duration::from_secs(10);

struct Args {
    frames: u64,
    process: bool,
    mailbox: bool,
    consumer_role: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args { frames: 120, process: false, mailbox: false, consumer_role: false };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--frames" => {
                let v = it.next().ok_or("--frames needs a value")?;
                a.frames = v.parse().map_err(|e| format!("--frames {v}: {e}"))?;
            }
            "--process" => a.process = true,
            "--mailbox" => a.mailbox = true,
            "--role-consumer" => a.consumer_role = true,
            "-h" | "--help" => {
                return Err("usage: async_consumer [--frames N] [--process [--mailbox]]".into())
            }
            other => return Err(format!("unknown argument {other} (see --help)")),
        }
    }
    if a.frames == 0 {
        return Err("--frames: at least 1".into());
    }
    Ok(a)
}

fn format() -> FrameFormat {
    FrameFormat::nv12(WIDTH, HEIGHT)
}

/// The camera: `frames` frames of the test pattern, presented as fast as the stream takes them.
fn camera(mut p: Producer, frames: u64) -> Result<(), String> {
    let layout = p.layout().clone();
    for _ in 0..frames {
        let f = p.acquire().map_err(|e| e.to_string())?;
        fill_test_pattern(&layout, f.sequence(), &mut p.cpu_write(&f).map_err(|e| e.to_string())?)?;
        p.present(f).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// What one consumer saw.
#[derive(Default)]
struct Seen {
    frames: u64,
    wrong: u64,
    out_of_order: u64,
    last: Option<u64>,
}

impl Seen {
    fn report(&self, who: &str) -> bool {
        println!(
            "{who}: {} frames converted and verified: {} correct, {} wrong, {} out of order",
            self.frames,
            self.frames - self.wrong,
            self.wrong,
            self.out_of_order
        );
        self.wrong == 0 && self.out_of_order == 0 && self.frames > 0
    }
}

/// Takes the next frame (`None`: the producer in another process ended the stream), converts it
/// and checks it against the pattern; `fifo`: every sequence must follow the last.
async fn take(c: &mut Consumer, rgba: &mut [u8], seen: &mut Seen, fifo: bool) -> Result<Option<u64>, String> {
    let f = match c.next_frame().await {
        Ok(f) => f,
        Err(Error::Ring(RingError::Ended { .. })) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let seq = f.sequence();
    let layout = c.layout().clone();
    let sum = {
        let bytes = c.cpu_read(&f).map_err(|e| e.to_string())?;
        nv12_to_rgba(&layout, &bytes[..layout.size as usize], rgba).map_err(|e| e.to_string())?
    };
    c.release(f).map_err(|e| e.to_string())?;
    seen.frames += 1;
    seen.wrong += u64::from(sum != test_pattern_statistic(WIDTH, HEIGHT, seq));
    let in_order = seen.last.is_none_or(|l| if fifo { seq == l + 1 } else { seq > l });
    seen.out_of_order += u64::from(!in_order);
    seen.last = Some(seq);
    Ok(Some(seq))
}

/// Consumers in this process: a FIFO recorder and a mailbox viewer, two tasks on one thread.
fn here(a: &Args) -> Result<bool, String> {
    let ring = Backend::with_library(NvSci::mock())
        .stream(format())
        .frames(4)
        .timeout(TIMEOUT)
        .consumer(ConsumerDesc::cpu())
        .consumer(ConsumerDesc::cpu().mailbox())
        .build()
        .map_err(|e| e.to_string())?;
    let (p, mut consumers) = ring.split().map_err(|e| e.to_string())?;
    let (mut viewer, mut recorder) = (consumers.pop().unwrap(), consumers.pop().unwrap());
    let frames = a.frames;
    let cam = std::thread::spawn(move || camera(p, frames));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let start = Instant::now();
    let (rec, view) = rt.block_on(async {
        let recorder = tokio::spawn(async move {
            let (mut rgba, mut seen) = (vec![0u8; (WIDTH * HEIGHT * 4) as usize], Seen::default());
            while seen.frames < frames {
                take(&mut recorder, &mut rgba, &mut seen, true).await?;
                // The conversion is CPU work on the thread both tasks share: let the viewer in
                // between frames (a frame that is there already completes `next_frame` at once).
                tokio::task::yield_now().await;
            }
            Ok::<_, String>(seen)
        });
        let viewer = tokio::spawn(async move {
            let (mut rgba, mut seen) = (vec![0u8; (WIDTH * HEIGHT * 4) as usize], Seen::default());
            // The newest frame every 5 ms, until the camera's last.
            while seen.last != Some(frames - 1) {
                take(&mut viewer, &mut rgba, &mut seen, false).await?;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok::<_, String>(seen)
        });
        (recorder.await, viewer.await)
    });
    cam.join().map_err(|_| "the camera thread panicked".to_string())??;
    let joined = |r: Result<Result<Seen, String>, tokio::task::JoinError>| r.map_err(|e| e.to_string())?;
    let (rec, view) = (joined(rec)?, joined(view)?);
    println!(
        "camera: {frames} frames of {WIDTH}x{HEIGHT} NV12 in {:.2} s; both consumers on one thread",
        start.elapsed().as_secs_f64()
    );
    Ok(rec.report("recorder (FIFO, a tokio task)") & view.report("viewer (mailbox, a tokio task)"))
}

/// The NvSci implementation and NvSciIpc to use: NVIDIA's when both load, else the mock.
fn libraries() -> Result<(NvSci, Ipc), String> {
    if let (Ok(lib), Ok(ipc)) = (NvSci::load(), Ipc::load()) {
        return Ok((lib, ipc));
    }
    Ok((NvSci::mock(), Ipc::mock().map_err(|e| e.to_string())?))
}

/// The endpoints: NVIDIA's `nvscisync_a_0` / `nvscisync_a_1` of `/etc/nvsciipc.cfg`, or a pair
/// of the mock's.
fn endpoints(lib: &NvSci) -> (&'static str, &'static str) {
    match lib.implementation() {
        Implementation::Native => ("nvscisync_a_0", "nvscisync_a_1"),
        Implementation::Mock => ("async_consumer_0", "async_consumer_1"),
    }
}

fn desc(a: &Args) -> ConsumerDesc {
    if a.mailbox {
        ConsumerDesc::cpu().mailbox()
    } else {
        ConsumerDesc::cpu()
    }
}

/// The consumer process: one tokio task on a current-thread runtime, woken by its endpoint's
/// event descriptor, until the camera ends the stream.
fn consumer_process(a: &Args) -> Result<bool, String> {
    let (lib, ipc) = libraries()?;
    let ep = IpcEndpoint::open(&ipc, endpoints(&lib).1).map_err(|e| e.to_string())?;
    let mut c = Consumer::connect_with(&lib, ep, format(), desc(a), TIMEOUT).map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let fifo = !a.mailbox;
    let seen = rt.block_on(async {
        let (mut rgba, mut seen) = (vec![0u8; (WIDTH * HEIGHT * 4) as usize], Seen::default());
        while take(&mut c, &mut rgba, &mut seen, fifo).await?.is_some() {
            if !fifo {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        Ok::<_, String>(seen)
    })?;
    let who = if fifo {
        "consumer process (FIFO, a tokio task)"
    } else {
        "consumer process (mailbox, a tokio task)"
    };
    let complete = !fifo || seen.frames == a.frames;
    if !complete {
        println!("{who}: {} of {} frames", seen.frames, a.frames);
    }
    Ok(seen.report(who) && complete)
}

/// The camera process: starts the consumer process, builds the stream with it as a consumer
/// in another process, presents the frames and ends the stream.
fn camera_process(a: &Args) -> Result<bool, String> {
    let (lib, ipc) = libraries()?;
    let (pname, cname) = endpoints(&lib);
    let mut cmd = std::process::Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
    cmd.args(std::env::args().skip(1)).arg("--role-consumer");
    let mut dir = None;
    if ipc.is_mock() && std::env::var_os(nvsci_mock::IPC_DIR_ENV).is_none() {
        // A fresh directory with this run's channel.
        let d = std::env::temp_dir().join(format!("nvsci-async-consumer-{}", std::process::id()));
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        let cfg = format!("# async_consumer\nINTER_PROCESS {pname} {cname} 16 4096\n");
        std::fs::write(d.join("nvsciipc.cfg"), cfg).map_err(|e| format!("{}: {e}", d.display()))?;
        nvsci_mock::set_ipc_dir(Some(&d));
        cmd.env(nvsci_mock::IPC_DIR_ENV, &d);
        dir = Some(d);
    }
    let mut child = cmd.spawn().map_err(|e| format!("starting the consumer process: {e}"))?;
    let run = || -> Result<(), String> {
        let ep = IpcEndpoint::open(&ipc, pname).map_err(|e| e.to_string())?;
        let ring = Backend::with_library(lib.clone())
            .stream(format())
            .frames(4)
            .timeout(TIMEOUT)
            .remote_consumer(ep, desc(a))
            .build()
            .map_err(|e| e.to_string())?;
        let (p, _) = ring.split().map_err(|e| e.to_string())?;
        let start = Instant::now();
        // Dropping the producer (in `camera`) ends the stream and takes every frame back.
        camera(p, a.frames)?;
        println!(
            "camera: {} frames of {WIDTH}x{HEIGHT} NV12 in {:.2} s",
            a.frames,
            start.elapsed().as_secs_f64()
        );
        Ok(())
    };
    let r = run();
    let status = child.wait().map_err(|e| e.to_string())?;
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
    r?;
    Ok(status.success())
}

fn main() -> ExitCode {
    env_logger::init();
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let r = if a.consumer_role {
        consumer_process(&a)
    } else if a.process {
        camera_process(&a)
    } else {
        here(&a)
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("async_consumer: {e}");
            ExitCode::FAILURE
        }
    }
}
