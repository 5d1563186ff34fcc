//! Cross-process fence wake-ups, the crate (NvSciSync objects shared over NvSciIpc, CPU signals
//! and CPU waits) beside the raw floor, in one run. Runs on any Linux machine, on the mock (CPU
//! mode), whose NvSciIpc channels it declares itself.
//!
//! Round trip, timed in process A: A signals, process B's wait returns, B signals a second
//! object, A's wait returns.
//!
//! * raw: two 32-bit counters in a shared file mapping, each its own futex word; a signal
//!   stores the next value and `FUTEX_WAKE`s, a wait `FUTEX_WAIT`s while the counter is below
//!   its value (no spinning);
//! * crate: `SyncObj::signal` and `Fence::wait` on objects each process allocated and exported
//!   to the other (`SyncObj::export_with_attr_list`, `SyncModule::import_attr_list_and_obj`),
//!   with fences exported ahead of the timed loop (the mock's wait spins 30 us, then sleeps on a
//!   futex in the counter page both processes map, which the other process's signal wakes).
//!
//! Raw and crate round trips alternate, so that whatever else the machine runs weighs on both
//! alike. In both, A sleeps 200 us before each signal, so that B is asleep in its wait when the
//! signal comes (the hand-off this measures is a wake-up, not a spinning reader).
//!
//! Also the CPU time (A's waiting thread, `CLOCK_THREAD_CPUTIME_ID`) of a wait whose signal B
//! sends 10 ms after A's.
//!
//! ```text
//! cargo run --release --example fence_bench_ipc -- [iterations]     (default 2000)
//! ```

#[path = "support/percentile.rs"]
mod percentile;
#[path = "support/rusage.rs"]
mod rusage;

use nvsci::ipc::{AttrListDescriptor, FenceDescriptor, Ipc, IpcEndpoint};
use nvsci::sync::{CpuWaitContext, Fence, SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::NvSci;
use percentile::pct;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Time bound of every IPC exchange and every wait (a dead peer ends the run with an error).
const T: Duration = Duration::from_secs(20);
/// Round trips before the timed ones, in each measurement.
const WARM: usize = 50;
/// Waits whose signal comes 10 ms late.
const LONG_REPS: usize = 20;
const LONG_DELAY: Duration = Duration::from_millis(10);
/// A's pause before each signal: B is asleep in its wait by then.
const PARK: Duration = Duration::from_micros(200);
/// The most iterations accepted (every fence of the run is generated and exported up front).
const MAX_ITERATIONS: usize = 1_000_000;
const PEER_FLAG: &str = "--peer";

const USAGE: &str = "\
usage: fence_bench_ipc [ITERATIONS]

Cross-process fence round trips (CPU signal in process A -> CPU wait in process B -> B signals
-> A waits), the crate beside a raw futex ping-pong over shared memory, in one run; then the CPU
time of a cross-process wait whose signal comes 10 ms later.

  ITERATIONS   timed round trips per measurement, 1 to 1000000 (default 2000)
  -h, --help   this text";

/// What the command line asks for.
enum Mode {
    /// Measure, with this many round trips.
    Run(usize),
    /// Be process B of a run of this many round trips.
    Peer(usize),
    Help,
}

fn parse(args: &[String]) -> Result<Mode, String> {
    let count = |s: &str| match s.parse::<usize>() {
        Ok(n) if (1..=MAX_ITERATIONS).contains(&n) => Ok(n),
        _ => Err(format!("ITERATIONS must be a whole number from 1 to {MAX_ITERATIONS}, not {s:?}")),
    };
    match args {
        [] => Ok(Mode::Run(2000)),
        [h] if h == "-h" || h == "--help" => Ok(Mode::Help),
        [p, n] if p == PEER_FLAG => count(n).map(Mode::Peer),
        [n] if !n.starts_with('-') => count(n).map(Mode::Run),
        _ => Err(format!("unexpected arguments {args:?}")),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match parse(&args) {
        Ok(Mode::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
        Ok(Mode::Run(n)) => run(n),
        Ok(Mode::Peer(n)) => peer(n),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fence_bench_ipc: {e}");
            ExitCode::FAILURE
        }
    }
}

fn thread_cpu() -> Duration {
    rusage::cpu_time(rusage::THREAD)
}

// ------------------------------------------------------------------------------------------
// The raw floor: two futex words in a shared file mapping.
// ------------------------------------------------------------------------------------------

/// A page of a file mapped shared in both processes: word 0 is A's counter, word 16 (its own
/// cache line) B's.
struct Shared {
    ptr: *mut u8,
    len: usize,
}

impl Shared {
    fn open(path: &Path, create: bool) -> Res<Shared> {
        use std::os::fd::AsRawFd;
        let len = 4096;
        let f =
            std::fs::OpenOptions::new().read(true).write(true).create(create).truncate(false).open(path)?;
        if create {
            f.set_len(len as u64)?;
        }
        // SAFETY: a fresh shared mapping of a file of at least `len` bytes; no existing memory is
        // affected. The mapping outlives the descriptor, which is closed when `f` drops.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(Shared { ptr: p.cast(), len })
    }

    /// Word `i` (0: A's counter, 1: B's).
    fn word(&self, i: usize) -> &AtomicU32 {
        // SAFETY: offsets 0 and 64 lie in the live, page-aligned mapping; both processes only
        // access these words atomically.
        unsafe { AtomicU32::from_ptr(self.ptr.add(i * 64).cast()) }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `open`; no reference into it outlives `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Stores `v` into `w` and wakes its sleepers (in any process: not a private futex).
fn raw_signal(w: &AtomicU32, v: u32) {
    w.store(v, Ordering::Release);
    // SAFETY: `w` is a live, aligned 32-bit word.
    unsafe { libc::syscall(libc::SYS_futex, w.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
}

/// Sleeps until `w` reaches `v` (an error after [`T`]).
fn raw_wait(w: &AtomicU32, v: u32) -> Res<()> {
    let deadline = Instant::now() + T;
    let ts = libc::timespec { tv_sec: 1, tv_nsec: 0 };
    loop {
        let seen = w.load(Ordering::Acquire);
        if seen >= v {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("raw wait: the other process did not signal".into());
        }
        // SAFETY: `w` is a live, aligned 32-bit word; `ts` a valid timespec. Every outcome
        // returns here and the word is read again.
        unsafe { libc::syscall(libc::SYS_futex, w.as_ptr(), libc::FUTEX_WAIT, seen, &ts) };
    }
}

// ------------------------------------------------------------------------------------------
// The crate: NvSciSync objects shared over NvSciIpc.
// ------------------------------------------------------------------------------------------

/// One process's side: the object it signals, the fences of the other's object it waits on.
struct Side {
    mine: SyncObj,
    theirs: Vec<Fence>,
    ctx: CpuWaitContext,
    _other: SyncObj,
    _module: SyncModule,
}

fn cpu_list(m: &SyncModule, perm: SyncPerm) -> nvsci::Result<SyncAttrList> {
    let mut l = m.attr_list()?;
    l.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(perm)])?;
    Ok(l)
}

/// Sets up one side: each process allocates the object it signals, reconciled with the other's
/// waiter list, and exports it; A sends its fences first, then B. `first` is A.
fn side(lib: &NvSci, ep: &IpcEndpoint, fences: usize, first: bool) -> Res<Side> {
    let m = SyncModule::open(lib)?;
    let waiter = cpu_list(&m, SyncPerm::WaitOnly)?;
    ep.send_message(SyncAttrList::export_unreconciled(&[&waiter], ep)?.as_bytes(), Some(T))?;
    let their_waiter =
        m.import_unreconciled(ep, &AttrListDescriptor::from_bytes(&ep.recv_message(Some(T))?)?)?;
    let signaler = cpu_list(&m, SyncPerm::SignalOnly)?;
    let mine = SyncObj::alloc(&SyncAttrList::reconcile(&[&signaler, &their_waiter])?)?;
    ep.send_message(mine.export_with_attr_list(SyncPerm::WaitOnly, ep)?.as_bytes(), Some(T))?;
    let d = AttrListDescriptor::from_bytes(&ep.recv_message(Some(T))?)?;
    let other = m.import_attr_list_and_obj(ep, &d, &[&waiter], SyncPerm::WaitOnly, Some(T))?;
    // Every fence of the run, generated and exported ahead: the timed loop only signals and
    // waits.
    let send = |ep: &IpcEndpoint| -> Res<()> {
        let mut bytes = Vec::with_capacity(fences * FenceDescriptor::SIZE);
        for _ in 0..fences {
            bytes.extend_from_slice(mine.generate_fence()?.export(ep)?.as_bytes());
        }
        Ok(ep.send_message(&bytes, Some(T))?)
    };
    let recv = |ep: &IpcEndpoint| -> Res<Vec<Fence>> {
        let bytes = ep.recv_message(Some(T))?;
        if bytes.len() != fences * FenceDescriptor::SIZE {
            return Err(
                format!("{} bytes of fence descriptors, expected {fences} fences", bytes.len()).into()
            );
        }
        let mut out = Vec::with_capacity(fences);
        for c in bytes.chunks_exact(FenceDescriptor::SIZE) {
            out.push(other.import_fence(&FenceDescriptor::from_bytes(c)?)?);
        }
        Ok(out)
    };
    let theirs = if first {
        send(ep)?;
        recv(ep)?
    } else {
        let r = recv(ep)?;
        send(ep)?;
        r
    };
    Ok(Side { ctx: m.cpu_wait_context()?, mine, theirs, _other: other, _module: m })
}

/// The measurements, timed in process A. Raw and crate round trips alternate, so that whatever
/// else the machine runs weighs on both alike.
struct Figures {
    /// Round trips (us).
    raw: Vec<f64>,
    krate: Vec<f64>,
    /// Waits on a signal 10 ms away: (wall ms, CPU us).
    raw_long: Vec<(f64, f64)>,
    krate_long: Vec<(f64, f64)>,
}

/// Process A: signal, then wait for B's answer; `park` first when set.
fn a_round(s: &Shared, side: &mut Side, i: usize, park: bool) -> Res<((f64, f64), (f64, f64))> {
    let (a, b) = (s.word(0), s.word(1));
    let v = u32::try_from(i + 1)?;
    let one = |f: &mut dyn FnMut() -> Res<()>| -> Res<(f64, f64)> {
        if park {
            std::thread::sleep(PARK);
        }
        let (t, c0) = (Instant::now(), thread_cpu());
        f()?;
        Ok((t.elapsed().as_secs_f64() * 1e6, (thread_cpu() - c0).as_secs_f64() * 1e6))
    };
    let raw = one(&mut || {
        raw_signal(a, v);
        raw_wait(b, v)
    })?;
    let krate = one(&mut || {
        side.mine.signal()?;
        Ok(side.theirs[i].wait(&mut side.ctx, Some(T))?)
    })?;
    Ok((raw, krate))
}

fn process_a(s: &Shared, side: &mut Side, n: usize) -> Res<Figures> {
    let mut f = Figures { raw: Vec::new(), krate: Vec::new(), raw_long: Vec::new(), krate_long: Vec::new() };
    for i in 0..WARM + n {
        let (raw, krate) = a_round(s, side, i, true)?;
        if i >= WARM {
            f.raw.push(raw.0);
            f.krate.push(krate.0);
        }
    }
    for i in WARM + n..WARM + n + LONG_REPS {
        let (raw, krate) = a_round(s, side, i, false)?;
        f.raw_long.push((raw.0 / 1e3, raw.1));
        f.krate_long.push((krate.0 / 1e3, krate.1));
    }
    Ok(f)
}

/// Process B: wait for A's signal, answer (10 ms later in the last rounds).
fn process_b(s: &Shared, side: &mut Side, n: usize) -> Res<()> {
    let (a, b) = (s.word(0), s.word(1));
    for i in 0..WARM + n + LONG_REPS {
        let v = u32::try_from(i + 1)?;
        let late = i >= WARM + n;
        raw_wait(a, v)?;
        if late {
            std::thread::sleep(LONG_DELAY);
        }
        raw_signal(b, v);
        side.theirs[i].wait(&mut side.ctx, Some(T))?;
        if late {
            std::thread::sleep(LONG_DELAY);
        }
        side.mine.signal()?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// The two processes.
// ------------------------------------------------------------------------------------------

/// The child process, killed if the run ends early.
struct PeerProcess(Option<Child>);

impl Drop for PeerProcess {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn run_dir() -> Res<PathBuf> {
    let dir = std::env::temp_dir().join(format!("nvsci-fence-bench-ipc-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("nvsciipc.cfg"), "INTER_PROCESS fbipc_0 fbipc_1 16 4096\n")?;
    Ok(dir)
}

fn run(n: usize) -> Res<()> {
    let dir = run_dir()?;
    let r = measure(&dir, n);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn measure(dir: &Path, n: usize) -> Res<()> {
    nvsci_mock::set_ipc_dir(Some(dir));
    let lib = NvSci::mock();
    let ipc = Ipc::mock()?;
    let shared = Shared::open(&dir.join("raw.shm"), true)?;
    let mut child = PeerProcess(Some(
        Command::new(std::env::current_exe()?)
            .args([PEER_FLAG, &n.to_string()])
            .env(nvsci_mock::IPC_DIR_ENV, dir)
            .spawn()?,
    ));
    let ep = IpcEndpoint::open(&ipc, "fbipc_0")?;
    ep.wait_connected(Some(T))?;
    let mut side = side(&lib, &ep, WARM + n + LONG_REPS, true)?;
    println!("NvSci: {:?}, {} CPUs", lib.implementation(), std::thread::available_parallelism()?);
    let Figures { raw: mut r, krate: mut k, raw_long: r_long, krate_long: k_long } =
        process_a(&shared, &mut side, n)?;
    let status = child.0.take().ok_or("no child")?.wait()?;
    if !status.success() {
        return Err(format!("process B failed: {status}").into());
    }
    let (r50, r99) = (pct(&mut r, 0.5), pct(&mut r, 0.99));
    let (k50, k99) = (pct(&mut k, 0.5), pct(&mut k, 0.99));
    println!("round trip A signals -> B waits, signals -> A waits, {n} iterations (us):");
    println!("  raw floor (shared-memory counters, futex wait/wake): p50 {r50:.1}  p99 {r99:.1}");
    println!("  crate (SyncObj::signal, Fence::wait across processes): p50 {k50:.1}  p99 {k99:.1}");
    println!("  ratio: p50 {:.2}x  p99 {:.2}x", k50 / r50, k99 / r99);
    let long = |v: Vec<(f64, f64)>| {
        let (mut wall, mut cpu): (Vec<f64>, Vec<f64>) = v.into_iter().unzip();
        (pct(&mut wall, 0.5), pct(&mut cpu, 0.5))
    };
    let ((rw, rc), (kw, kc)) = (long(r_long), long(k_long));
    println!("a cross-process wait on a signal 10 ms away, p50 of {LONG_REPS}:");
    println!("  raw floor: {rw:.2} ms wall, {rc:.0} us CPU");
    println!("  crate:     {kw:.2} ms wall, {kc:.0} us CPU");
    Ok(())
}

fn peer(n: usize) -> Res<()> {
    let dir =
        PathBuf::from(std::env::var_os(nvsci_mock::IPC_DIR_ENV).ok_or("process B needs the IPC directory")?);
    let lib = NvSci::mock();
    let ipc = Ipc::mock()?;
    let shared = Shared::open(&dir.join("raw.shm"), false)?;
    let ep = IpcEndpoint::open(&ipc, "fbipc_1")?;
    ep.wait_connected(Some(T))?;
    let mut side = side(&lib, &ep, WARM + n + LONG_REPS, false)?;
    process_b(&shared, &mut side, n)
}
