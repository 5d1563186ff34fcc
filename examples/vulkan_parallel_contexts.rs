//! Reproduction for Vulkan contexts used from several threads: `--threads` threads each get a
//! `VulkanContext` `--rounds` times and drop it, and the program reports whether every thread
//! finished within `--timeout-s` (exit status 3 when one is stuck).
//!
//! - By default the threads get the process's shared context (the crate's default).
//! - `--private` creates and destroys a context of its own each round (instance + device).
//! - `--raw` calls only `vkCreateInstance` / `vkCreateDevice` / destroy through ash, to tell a
//!   crate problem from a loader or driver one; `--keep-loader` shares one loaded loader between
//!   the raw rounds, and `--lock` lets the raw rounds take turns.
//! - `--linger` keeps every thread alive until all finished; `--leak` never destroys the private
//!   contexts; `--waves N` runs the rounds on N fresh threads in turn, each ending afterwards.
//!
//! ```text
//! cargo run --release --features vulkan --example vulkan_parallel_contexts -- --threads 8 --rounds 20 --private
//! ```
//!
//! What these showed on the NVIDIA driver 580 is in docs/vulkan.md.

use nvsci::vulkan::ash::{self, vk};
use nvsci::vulkan::{ContextOptions, VulkanContext};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn raw_round(shared: Option<&ash::Entry>) -> Result<(), String> {
    let entry = match shared {
        Some(e) => e.clone(),
        // SAFETY: loading the system Vulkan loader runs its initialisers, which have no
        // preconditions.
        None => unsafe { ash::Entry::load() }.map_err(|e| e.to_string())?,
    };
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: a valid create info without layers or extensions.
    let instance = unsafe { entry.create_instance(&info, None) }.map_err(|e| e.to_string())?;
    // SAFETY: the instance is alive.
    let pds = unsafe { instance.enumerate_physical_devices() }.map_err(|e| e.to_string())?;
    if let Some(&pd) = pds.first() {
        let prio = [1.0f32];
        let q = [vk::DeviceQueueCreateInfo::default().queue_family_index(0).queue_priorities(&prio)];
        let dinfo = vk::DeviceCreateInfo::default().queue_create_infos(&q);
        // SAFETY: queue family 0 exists on every device; one queue of priority 1.
        let device = unsafe { instance.create_device(pd, &dinfo, None) }.map_err(|e| e.to_string())?;
        // SAFETY: the device is idle (nothing was submitted) and destroyed once.
        unsafe { device.destroy_device(None) };
    }
    // SAFETY: every child object is destroyed.
    unsafe { instance.destroy_instance(None) };
    Ok(())
}

fn main() -> ExitCode {
    env_logger::init();
    let mut threads = 8usize;
    let mut rounds = 20usize;
    let mut timeout = 60u64;
    let mut raw = false;
    let mut keep_loader = false;
    let mut linger = false;
    let mut leak = false;
    let mut lock = false;
    let mut waves = 1usize;
    let mut private = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut v = || args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        match a.as_str() {
            "--threads" => threads = v() as usize,
            "--rounds" => rounds = v() as usize,
            "--timeout-s" => timeout = v(),
            "--raw" => raw = true,
            "--keep-loader" => keep_loader = true,
            "--linger" => linger = true,
            "--leak" => leak = true,
            "--lock" => lock = true,
            "--waves" => waves = v() as usize,
            "--private" => private = true,
            other => {
                eprintln!("unknown argument {other}");
                return ExitCode::from(2);
            }
        }
    }
    // With --keep-loader the raw rounds share one loaded loader (never unloaded while they run).
    // SAFETY: as in raw_round.
    let shared = if keep_loader { unsafe { ash::Entry::load() }.ok().map(Arc::new) } else { None };
    let done = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    static RAW_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let start = Instant::now();
    for _ in 0..threads {
        let (done, failed, shared) = (done.clone(), failed.clone(), shared.clone());
        std::thread::spawn(move || {
            let run = move || {
                for _ in 0..rounds {
                    let r = if raw {
                        let _g = lock.then(|| RAW_LOCK.lock().unwrap_or_else(|e| e.into_inner()));
                        raw_round(shared.as_deref())
                    } else {
                        let options = ContextOptions::default().with_private(private);
                        VulkanContext::with_options(options)
                            .map(|c| if leak { std::mem::forget(c) } else { drop(c) })
                            .map_err(|e| e.to_string())
                    };
                    if let Err(e) = r {
                        eprintln!("round failed: {e}");
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                }
            };
            if waves <= 1 {
                run();
            } else {
                // Each wave runs the rounds on a fresh thread that ends afterwards.
                for _ in 0..waves {
                    let _ = std::thread::spawn(run.clone()).join();
                }
            }
            done.fetch_add(1, Ordering::SeqCst);
            // With --linger no thread ends before every thread finished its rounds.
            while linger && done.load(Ordering::SeqCst) < threads {
                std::thread::sleep(Duration::from_millis(5));
            }
        });
    }
    while done.load(Ordering::SeqCst) < threads && start.elapsed() < Duration::from_secs(timeout) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let finished = done.load(Ordering::SeqCst);
    let mode = match (raw, keep_loader) {
        (true, true) => "raw ash, one loader",
        (true, false) => "raw ash, loader per round",
        _ if private => "private VulkanContext",
        _ => "shared VulkanContext",
    };
    let switches: Vec<&str> = [(lock, "taking turns"), (leak, "never destroyed"), (linger, "threads linger")]
        .into_iter()
        .filter_map(|(on, what)| on.then_some(what))
        .chain((waves > 1).then_some("fresh threads per wave"))
        .collect();
    let mode =
        if switches.is_empty() { mode.to_owned() } else { format!("{mode} ({})", switches.join(", ")) };
    println!(
        "{mode} {threads} threads x {rounds} rounds: {finished} threads finished in {:.1} s, {} rounds failed{}",
        start.elapsed().as_secs_f64(),
        failed.load(Ordering::SeqCst),
        if finished < threads { " -- HUNG (threads still inside Vulkan calls)" } else { "" }
    );
    if finished < threads {
        // Leave the stuck threads behind; exit without running destructors.
        std::process::exit(3);
    }
    ExitCode::SUCCESS
}
