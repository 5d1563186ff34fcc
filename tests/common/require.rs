//! What a test needs from the machine, declared in one place: a CUDA GPU, a Vulkan device, the
//! NvSci libraries, Linux.
//!
//! A test that finds something it needs missing either skips, and the skip is recorded, or fails,
//! where the environment says the capability must be there:
//!
//! * `NVSCI_REQUIRE`: a comma-separated list of required capabilities, `gpu`, `vulkan`, `nvsci`,
//!   `linux` (or `all`), e.g. `NVSCI_REQUIRE=gpu,vulkan`. The older single variables
//!   `NVSCI_REQUIRE_GPU=1`, `NVSCI_REQUIRE_VULKAN=1` and `NVSCI_REQUIRE_NVSCI=1` are read too (GPU
//!   runners set the first).
//! * A skip writes the line `SKIPPED <binary> <test> <reason>` to the process's standard error
//!   (past libtest's output capture, so it shows in a plain `cargo test`) and, where
//!   `NVSCI_SKIP_DIR` names a folder, appends it to `$NVSCI_SKIP_DIR/skipped`.
//!   `toolchain/run-tests.sh` sets that folder and reports skipped tests apart from passed ones.
//!
//! The file is shared by the integration tests (`tests/common`), the library's unit tests and the
//! examples' tests (through `#[path]`), so it uses the standard library only.
#![allow(dead_code)]

use std::fmt::Display;
use std::io::Write;

/// Something a test needs from the machine it runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    /// A CUDA GPU and its driver (for tests of the CUDA interop and GPU engines, with the GPU's
    /// own Vulkan driver where a test joins Vulkan to CUDA).
    Gpu,
    /// A Vulkan device (Mesa's lavapipe in CI).
    Vulkan,
    /// NVIDIA's NvSci libraries (Jetson, DRIVE OS).
    NvSci,
    /// Linux interfaces (`/proc`, `memfd`, fd passing).
    Linux,
}

impl Capability {
    /// The name used in `NVSCI_REQUIRE`.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Gpu => "gpu",
            Capability::Vulkan => "vulkan",
            Capability::NvSci => "nvsci",
            Capability::Linux => "linux",
        }
    }

    /// The single variable that required this capability before `NVSCI_REQUIRE`.
    fn single_var(self) -> Option<&'static str> {
        match self {
            Capability::Gpu => Some("NVSCI_REQUIRE_GPU"),
            Capability::Vulkan => Some("NVSCI_REQUIRE_VULKAN"),
            Capability::NvSci => Some("NVSCI_REQUIRE_NVSCI"),
            Capability::Linux => None,
        }
    }

    /// Whether the environment requires this capability (a test missing it fails).
    pub fn required(self) -> bool {
        let listed = std::env::var("NVSCI_REQUIRE").is_ok_and(|list| {
            list.split(',').map(str::trim).any(|c| c.eq_ignore_ascii_case(self.name()) || c == "all")
        });
        listed || self.single_var().is_some_and(|v| std::env::var(v).is_ok_and(|v| v == "1"))
    }
}

/// A test needing `needs` found `reason` in its way: fails (panics) if the environment requires
/// any of `needs`, and otherwise records the skip and returns `None`, for
/// `let Some(x) = ... else { return };`.
pub fn unavailable<T>(needs: &[Capability], reason: impl Display) -> Option<T> {
    if let Some(c) = needs.iter().find(|c| c.required()) {
        panic!("{} is required here ({}), but {reason}", c.name(), required_by(*c));
    }
    record_skip(needs, &reason);
    None
}

/// As [`unavailable`] for a test with nothing to hand back.
pub fn skip(needs: &[Capability], reason: impl Display) {
    unavailable::<()>(needs, reason);
}

/// The variable that made `c` required, for the failure message.
fn required_by(c: Capability) -> String {
    match c.single_var() {
        Some(v) if std::env::var(v).is_ok_and(|v| v == "1") => format!("{v}=1"),
        _ => format!("NVSCI_REQUIRE={}", std::env::var("NVSCI_REQUIRE").unwrap_or_default()),
    }
}

/// An entry point that is not a test of its own (the peer process of a two-process test, run
/// only when that test starts it), reached without its cue: records `NOTRUN`, which
/// `toolchain/run-tests.sh` counts as not run, neither passed nor skipped.
pub fn not_a_test(reason: impl Display) {
    record("NOTRUN", "", &reason);
}

fn record_skip(needs: &[Capability], reason: &dyn Display) {
    let needs: Vec<&str> = needs.iter().map(|c| c.name()).collect();
    let needs = if needs.is_empty() { String::new() } else { format!("needs {}: ", needs.join("+")) };
    record("SKIPPED", &needs, reason);
}

/// Writes `<tag> <binary> <test> <needs><reason>` to standard error and, where `NVSCI_SKIP_DIR`
/// names a folder, appends it to `$NVSCI_SKIP_DIR/skipped`.
fn record(tag: &str, needs: &str, reason: &dyn Display) {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "?".into());
    // libtest runs each test on a thread named after it.
    let test = std::thread::current().name().unwrap_or("?").to_owned();
    // One line, one write: lines of parallel tests do not interleave.
    let reason = reason.to_string().replace('\n', " ");
    let line = format!("{tag} {binary} {test} {needs}{reason}\n");
    // Written to the stream itself, not through `eprint!`, which libtest captures for passing tests.
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(dir) = std::env::var_os("NVSCI_SKIP_DIR") {
        let path = std::path::Path::new(&dir).join("skipped");
        match std::fs::OpenOptions::new().create(true).append(true).open(&path) {
            Ok(mut f) => {
                if let Err(e) = f.write_all(line.as_bytes()) {
                    panic!("could not record the skip in {}: {e}", path.display());
                }
            }
            Err(e) => panic!("could not record the skip in {}: {e}", path.display()),
        }
    }
}
