//! Tests that run consumers (or producers) in other processes: the mock's IPC directory, the
//! child processes (this test binary run again at its `child_process_entry` test), a byte
//! pattern every frame is filled with and checked against, and the mock's ledger.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A fresh directory `nvsci-<prefix>-<pid>-<tag>` with an nvsciipc.cfg declaring `pairs` as
/// `INTER_PROCESS` channels of `nframes` frames of `frame_size` bytes.
pub fn ipc_dir_sized(
    prefix: &str,
    tag: &str,
    pairs: &[(&str, &str)],
    nframes: u32,
    frame_size: u32,
) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nvsci-{prefix}-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cfg = String::from("# test channels\n");
    for (a, b) in pairs {
        cfg.push_str(&format!("INTER_PROCESS {a} {b} {nframes} {frame_size}\n"));
    }
    std::fs::write(dir.join("nvsciipc.cfg"), cfg).unwrap();
    dir
}

/// As [`ipc_dir_sized`], with channels of 16 frames of 4096 bytes.
pub fn ipc_dir(prefix: &str, tag: &str, pairs: &[(&str, &str)]) -> PathBuf {
    ipc_dir_sized(prefix, tag, pairs, 16, 4096)
}

/// Serialises the tests of a binary (the mock's IPC directory and its ledger are process-wide)
/// and points the mock at `dir`.
pub fn use_dir(dir: &Path) -> std::sync::MutexGuard<'static, ()> {
    let g = super::serial();
    nvsci_mock::set_ipc_dir(Some(dir));
    g
}

/// A child process and the lines it printed so far.
pub struct ChildProcess {
    pub child: Child,
    pub lines: Arc<Mutex<Vec<String>>>,
}

/// Starts this test binary again at its `child_process_entry` test (under
/// `$NVSCI_CHILD_RUNNER` when set: an emulator for cross-compiled tests), with `scenario` in
/// the environment variable `scenario_env`, the mock pointed at `dir`, and `env`. The child's
/// standard output lines are collected and echoed, each marked as the child's: its own harness
/// prints a `test result:` summary, so whoever counts this binary's results counts its tests
/// once (a failing child fails the test that started it).
pub fn spawn_child(scenario_env: &str, scenario: &str, dir: &Path, env: &[(&str, String)]) -> ChildProcess {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = match std::env::var("NVSCI_CHILD_RUNNER").ok().filter(|r| !r.is_empty()) {
        Some(runner) => {
            let mut parts = runner.split_whitespace();
            let mut c = Command::new(parts.next().unwrap());
            c.args(parts).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    cmd.args(["child_process_entry", "--exact", "--include-ignored", "--nocapture", "--test-threads=1"])
        .env(scenario_env, scenario)
        .env(nvsci_mock::IPC_DIR_ENV, dir)
        .stdout(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    // The child is killed when the thread that started it ends (prctl(2), PR_SET_PDEATHSIG: "the
    // parent death signal is sent upon subsequent termination of the parent thread"): each test
    // runs on a thread of its own, so a test that fails before it waited for its child does not
    // leave the child running.
    // SAFETY: only prctl(2) runs between fork and exec, which is async-signal-safe; it touches
    // no memory of the parent.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = cmd.spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let tag = format!("[child {scenario}]");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = lines.clone();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            // One write per line, so that lines of children running side by side do not mix.
            let marked = format!("{tag} {line}\n");
            eprint!("{marked}");
            seen.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        }
    });
    ChildProcess { child, lines }
}

/// Waits (at most 60 s) until a child printed a line containing `marker` (`lines`: its
/// [`ChildProcess::lines`]).
pub fn wait_line(lines: &Mutex<Vec<String>>, marker: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    while !lines.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|l| l.contains(marker)) {
        assert!(Instant::now() < until, "the child process never printed {marker:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for `c` to exit; kills it and fails after `within`.
pub fn wait_child(mut c: Child, within: Duration) -> ExitStatus {
    let until = Instant::now() + within;
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > until {
            let _ = c.kill();
            panic!("child process did not finish within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The number in environment variable `name`, if set.
pub fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap())
}

/// The byte at `i` of frame `seq`: differs between neighbouring bytes and between frames (also
/// 256 frames apart).
pub fn pattern(seq: u64, i: usize) -> u8 {
    (i as u64).wrapping_mul(31).wrapping_add(seq.wrapping_mul(7)).wrapping_add(seq >> 8) as u8
}

/// Writes frame `seq`'s pattern into the first `len` bytes of `bytes`.
pub fn fill(bytes: &mut [u8], seq: u64, len: usize) {
    for (i, b) in bytes.iter_mut().take(len).enumerate() {
        *b = pattern(seq, i);
    }
}

/// Checks each of the first `len` bytes of frame `seq` (`who` read it).
pub fn check(bytes: &[u8], seq: u64, len: usize, who: &str) {
    assert!(bytes.len() >= len, "{who}: frame of {} bytes", bytes.len());
    for (i, b) in bytes.iter().take(len).enumerate() {
        assert_eq!(*b, pattern(seq, i), "{who}: frame {seq} byte {i}");
    }
}

/// Asserts that the mock holds no handle any more.
pub fn ledger_is_clean() {
    let counts = nvsci_mock::global_ledger().counts();
    assert_eq!(counts.total(), 0, "mock handles left: {counts:?}");
}
