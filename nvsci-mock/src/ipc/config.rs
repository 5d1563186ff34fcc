//! Where the emulated endpoints are configured and where their sockets live.
//!
//! The mock reads an `nvsciipc.cfg` in the format of NVIDIA's `/etc/nvsciipc.cfg`, one channel
//! per line:
//!
//! ```text
//! # backend      endpoint 1     endpoint 2     frames  frame size  [gid]
//! INTER_PROCESS  camera_0       camera_1       16      4096
//! ```
//!
//! `INTER_PROCESS` and `INTER_THREAD` lines are both served by Unix domain sockets (the
//! connection) and shared-memory rings (the frames); other backends
//! (`INTER_VM`, `INTER_CHIP`) and malformed lines are ignored. Blank lines and `#` comments are
//! skipped. The file and the sockets live in one directory: the one given to
//! [`crate::set_ipc_dir`], else `$NVSCI_MOCK_IPC_DIR`. The first endpoint of a line listens on
//! `<dir>/<endpoint 1>.sock`; the second connects to it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Environment variable naming the directory of `nvsciipc.cfg` and the sockets.
pub const IPC_DIR_ENV: &str = "NVSCI_MOCK_IPC_DIR";
/// The configuration file's name inside that directory.
pub const CONFIG_FILE: &str = "nvsciipc.cfg";

static DIR_OVERRIDE: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Sets the directory for endpoints opened from now on in this process (`None`: back to
/// `$NVSCI_MOCK_IPC_DIR`).
pub fn set_ipc_dir(dir: Option<&Path>) {
    *crate::ffi::lock(&DIR_OVERRIDE) = dir.map(Path::to_path_buf);
}

pub(crate) fn dir() -> Option<PathBuf> {
    crate::ffi::lock(&DIR_OVERRIDE)
        .clone()
        .or_else(|| std::env::var_os(IPC_DIR_ENV).filter(|v| !v.is_empty()).map(PathBuf::from))
}

/// One configured endpoint, as seen from its own side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EndpointConfig {
    /// This endpoint listens (first on its line) or connects (second).
    pub listens: bool,
    /// The socket path: `<dir>/<first endpoint>.sock`.
    pub socket: PathBuf,
    pub nframes: u32,
    pub frame_size: u32,
}

/// Finds `name` in `<dir>/nvsciipc.cfg`.
pub(crate) fn lookup(dir: &Path, name: &str) -> Option<EndpointConfig> {
    let text = std::fs::read_to_string(dir.join(CONFIG_FILE)).ok()?;
    text.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or("");
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || !matches!(f[0], "INTER_PROCESS" | "INTER_THREAD") {
            return None;
        }
        let nframes: u32 = f[3].parse().ok().filter(|n| *n > 0)?;
        let frame_size: u32 = f[4].parse().ok().filter(|n| *n > 0)?;
        let listens = if f[1] == name {
            true
        } else if f[2] == name {
            false
        } else {
            return None;
        };
        Some(EndpointConfig { listens, socket: dir.join(format!("{}.sock", f[1])), nframes, frame_size })
    })
}
