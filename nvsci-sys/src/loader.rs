//! Opens `libnvscibuf.so.1` and `libnvscisync.so.1` (and, on request, `libnvsciipc.so`) at run
//! time and fills the function tables.
//!
//! Search order for each library, first hit wins:
//! 1. every directory in `NVSCI_LIB_DIR` (colon-separated),
//! 2. [`JETPACK6_LIB_DIR`] (JetPack 6 and 7),
//! 3. [`JETPACK5_LIB_DIR`] (JetPack 5),
//! 4. the dynamic linker's default search path (the bare SONAME).
//!
//! NvSciBuf is opened first: NvSciSync depends on it, and the dynamic linker then reuses the copy
//! already loaded instead of searching for it again. Loading never panics; every failure is a
//! [`LoadError`] that names what was looked for and where.
#![deny(clippy::undocumented_unsafe_blocks)]

use crate::{NvSciBufFns, NvSciError_Success, NvSciIpcFns, NvSciSyncFns};
use std::fmt;
use std::path::{Path, PathBuf};

/// SONAME of the NvSciBuf library.
pub const NVSCIBUF_SONAME: &str = "libnvscibuf.so.1";
/// SONAME of the NvSciSync library.
pub const NVSCISYNC_SONAME: &str = "libnvscisync.so.1";
/// File names NvSciIpc is installed under, tried in this order: Jetson Linux and DRIVE OS ship the
/// unversioned `libnvsciipc.so` (in the core package, not the nvsci one); some images add a `.so.1`.
pub const NVSCIIPC_NAMES: [&str; 2] = ["libnvsciipc.so", "libnvsciipc.so.1"];
/// The NvSciIpc major version these bindings speak (every 1.x minor has the required functions).
pub const IPC_REQUIRED_MAJOR: u32 = 1;
/// Environment variable holding extra directories (colon-separated) searched first.
pub const LIB_DIR_ENV: &str = "NVSCI_LIB_DIR";
/// Where JetPack 6 and 7 (Jetson Linux r36+) install the NvSci libraries.
pub const JETPACK6_LIB_DIR: &str = "/usr/lib/aarch64-linux-gnu/nvidia";
/// Where JetPack 5 (Jetson Linux r35) installs the NvSci libraries.
pub const JETPACK5_LIB_DIR: &str = "/usr/lib/aarch64-linux-gnu/tegra";
/// The NvSci major version these bindings speak.
pub const REQUIRED_MAJOR: u32 = 2;
/// The oldest minor version these bindings need (every required function exists in 2.0).
pub const REQUIRED_MINOR: u32 = 0;

/// One place a library was looked for, and why it was not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// The path or bare name handed to the dynamic loader.
    pub path: String,
    /// The loader's message.
    pub error: String,
}

/// Why the NvSci libraries could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// The library was found nowhere; `tried` lists every attempt in order.
    NotFound {
        /// SONAME that was looked for.
        library: &'static str,
        /// Every path tried, with the loader's answer.
        tried: Vec<Attempt>,
    },
    /// The library loaded but lacks a function every 2.x version exports.
    MissingSymbol {
        /// SONAME of the library.
        library: &'static str,
        /// Path it was loaded from.
        path: String,
        /// The missing function.
        symbol: &'static str,
    },
    /// The library reports that it is not compatible with NvSci major version 2.
    IncompatibleVersion {
        /// SONAME of the library.
        library: &'static str,
        /// Path it was loaded from.
        path: String,
        /// The version that was asked for.
        required: (u32, u32),
        /// The NvSciError the check returned (0 when the check ran and answered "incompatible").
        code: u32,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NotFound { library, tried } if tried.is_empty() => write!(
                f,
                "{library} not found: no directory was given to search (and the default search path was \
                 not asked for)"
            ),
            LoadError::NotFound { library, tried } => {
                write!(f, "{library} not found; tried: ")?;
                for (i, a) in tried.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{} ({})", a.path, a.error)?;
                }
                write!(
                    f,
                    ". Set {LIB_DIR_ENV} to the directory holding the NvSci libraries \
                     (they ship only with Jetson Linux and DRIVE OS)"
                )
            }
            LoadError::MissingSymbol { library, path, symbol } => {
                write!(f, "{library} at {path} does not export required function {symbol}")
            }
            LoadError::IncompatibleVersion { library, path, required, code } => write!(
                f,
                "{library} at {path} is not compatible with version {}.{} (major version {} \
                 required; version check returned 0x{code:x})",
                required.0, required.1, required.0
            ),
        }
    }
}

impl std::error::Error for LoadError {}

/// The loaded NvSci libraries and their function tables.
///
/// The tables point into the libraries, which stay loaded until this value is dropped; keep it
/// alive (the safe crate holds it in an `Arc`) for as long as any table copy is used.
pub struct NvSciLibraries {
    // Private: the tables must stay exactly what was resolved from these libraries, because
    // safe code built on them trusts every entry to be the real function.
    buf: NvSciBufFns,
    sync: NvSciSyncFns,
    /// Path NvSciBuf was loaded from.
    pub buf_path: String,
    /// Path NvSciSync was loaded from.
    pub sync_path: String,
    _sync_lib: libloading::Library,
    _buf_lib: libloading::Library,
}

impl NvSciLibraries {
    /// NvSciBuf entry points, as resolved from the loaded library.
    pub fn buf(&self) -> &NvSciBufFns {
        &self.buf
    }

    /// NvSciSync entry points, as resolved from the loaded library.
    pub fn sync(&self) -> &NvSciSyncFns {
        &self.sync
    }
}

impl fmt::Debug for NvSciLibraries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NvSciLibraries")
            .field("buf_path", &self.buf_path)
            .field("sync_path", &self.sync_path)
            .finish_non_exhaustive()
    }
}

/// The directories searched before the default path, in order: `NVSCI_LIB_DIR` entries, then the
/// JetPack 6/7 and JetPack 5 directories.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os(LIB_DIR_ENV)
        .map(|v| std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect())
        .unwrap_or_default();
    dirs.push(PathBuf::from(JETPACK6_LIB_DIR));
    dirs.push(PathBuf::from(JETPACK5_LIB_DIR));
    dirs
}

/// Loads both libraries from [`search_dirs`] and the default search path: the documented
/// locations (`NVSCI_LIB_DIR`, set by whoever runs the program, and the JetPack directories).
pub fn load() -> Result<NvSciLibraries, LoadError> {
    // SAFETY: the documented NvSci locations hold NVIDIA's libraries, whose initialisers have no
    // preconditions; `NVSCI_LIB_DIR` is the documented way for the person running the program to
    // point at them (as LD_LIBRARY_PATH would).
    unsafe { load_from(&search_dirs(), true) }
}

/// Loads both libraries from `dirs`, then (if `default_path`) by bare SONAME.
///
/// # Safety
/// Loading a shared object runs its initialisers, and the function tables are trusted to be
/// NvSci's: every `libnvscibuf.so.1` / `libnvscisync.so.1` in `dirs` must be NVIDIA's NvSci
/// library (or an implementation of the same C API, such as the mock built as a shared object),
/// whose initialisers are sound to run in this process. The same contract as
/// `ash::Entry::load_from` or `libloading::Library::new`.
pub unsafe fn load_from(dirs: &[PathBuf], default_path: bool) -> Result<NvSciLibraries, LoadError> {
    // SAFETY: forwarded contract.
    let (buf_lib, buf_path) = unsafe { open_first(NVSCIBUF_SONAME, dirs, default_path) }?;
    // SAFETY: the library was found under the NvSciBuf SONAME, whose exported functions have the
    // signatures of the header the tables were generated from; `buf_lib` outlives the table
    // because both move into the returned `NvSciLibraries`.
    let buf = unsafe { NvSciBufFns::resolve(&buf_lib) }.map_err(|symbol| LoadError::MissingSymbol {
        library: NVSCIBUF_SONAME,
        path: buf_path.clone(),
        symbol,
    })?;
    check_version(NVSCIBUF_SONAME, &buf_path, buf.NvSciBufCheckVersionCompatibility)?;

    // SAFETY: forwarded contract.
    let (sync_lib, sync_path) = unsafe { open_first(NVSCISYNC_SONAME, dirs, default_path) }?;
    // SAFETY: as above, for the NvSciSync SONAME.
    let sync = unsafe { NvSciSyncFns::resolve(&sync_lib) }.map_err(|symbol| LoadError::MissingSymbol {
        library: NVSCISYNC_SONAME,
        path: sync_path.clone(),
        symbol,
    })?;
    check_version(NVSCISYNC_SONAME, &sync_path, sync.NvSciSyncCheckVersionCompatibility)?;

    Ok(NvSciLibraries { buf, sync, buf_path, sync_path, _sync_lib: sync_lib, _buf_lib: buf_lib })
}

type CheckFn = Option<unsafe extern "C" fn(u32, u32, *mut bool) -> crate::NvSciError>;

fn check_version(library: &'static str, path: &str, check: CheckFn) -> Result<(), LoadError> {
    check_version_of(library, path, check, (REQUIRED_MAJOR, REQUIRED_MINOR))
}

fn check_version_of(
    library: &'static str,
    path: &str,
    check: CheckFn,
    required: (u32, u32),
) -> Result<(), LoadError> {
    let incompatible =
        |code| LoadError::IncompatibleVersion { library, path: path.to_owned(), required, code };
    let Some(check) = check else {
        return Err(incompatible(crate::NvSciError_NotSupported));
    };
    let mut ok = false;
    // SAFETY: NvSci*CheckVersionCompatibility(major, minor, bool*) only writes the bool through a
    // valid pointer; it needs no module or other state.
    let code = unsafe { check(required.0, required.1, &mut ok) };
    if code != NvSciError_Success || !ok {
        return Err(incompatible(code));
    }
    Ok(())
}

/// The dynamic loader's own message (`dlerror()`: wrong architecture, truncated file, missing
/// dependency, ...) rather than libloading's summary "dlopen failed".
fn loader_reason(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(source) => source.to_string(),
        None => e.to_string(),
    }
}

/// Opens the first candidate that loads.
///
/// # Safety
/// As for [`load_from`]: every candidate's initialisers must be sound to run.
unsafe fn open_first(
    soname: &'static str,
    dirs: &[PathBuf],
    default_path: bool,
) -> Result<(libloading::Library, String), LoadError> {
    let mut tried = Vec::new();
    let candidates = dirs.iter().map(|d| d.join(soname)).chain(default_path.then(|| PathBuf::from(soname)));
    for path in candidates {
        let shown = path.display().to_string();
        if path.components().count() > 1 && !Path::new(&path).exists() {
            tried.push(Attempt { path: shown, error: "no such file".into() });
            continue;
        }
        // SAFETY: loading runs the library's initialisers; the caller vouches for every candidate
        // (this function's contract).
        match unsafe { libloading::Library::new(&path) } {
            Ok(lib) => return Ok((lib, shown)),
            Err(e) => tried.push(Attempt { path: shown, error: loader_reason(&e) }),
        }
    }
    Err(LoadError::NotFound { library: soname, tried })
}

/// The loaded NvSciIpc library and its function table.
pub struct NvSciIpcLibrary {
    // Private for the same reason as `NvSciLibraries`' tables.
    fns: NvSciIpcFns,
    /// Path the library was loaded from.
    pub path: String,
    _lib: libloading::Library,
}

impl NvSciIpcLibrary {
    /// NvSciIpc entry points, as resolved from the loaded library.
    pub fn fns(&self) -> &NvSciIpcFns {
        &self.fns
    }
}

impl fmt::Debug for NvSciIpcLibrary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NvSciIpcLibrary").field("path", &self.path).finish_non_exhaustive()
    }
}

/// Loads NvSciIpc from [`search_dirs`] and the default search path (each of [`NVSCIIPC_NAMES`]).
pub fn load_ipc() -> Result<NvSciIpcLibrary, LoadError> {
    // SAFETY: as for `load`: the documented locations hold NVIDIA's library.
    unsafe { load_ipc_from(&search_dirs(), true) }
}

/// Loads NvSciIpc from `dirs`, then (if `default_path`) by bare name, trying every name of
/// [`NVSCIIPC_NAMES`] in each place. When the library exports `NvSciIpcCheckVersionCompatibility`
/// it must accept major version [`IPC_REQUIRED_MAJOR`].
///
/// # Safety
/// As for [`load_from`]: every candidate in `dirs` must be NVIDIA's NvSciIpc (or an
/// implementation of the same C API) whose initialisers are sound to run in this process.
pub unsafe fn load_ipc_from(dirs: &[PathBuf], default_path: bool) -> Result<NvSciIpcLibrary, LoadError> {
    let mut tried = Vec::new();
    for name in NVSCIIPC_NAMES {
        // SAFETY: forwarded contract.
        match unsafe { open_first(name, dirs, default_path) } {
            Ok((lib, path)) => {
                // SAFETY: the library was found under an NvSciIpc name, whose exported functions
                // have the signatures of the header the table was generated from; `lib` moves
                // into the returned value together with the table.
                let fns = unsafe { NvSciIpcFns::resolve(&lib) }.map_err(|symbol| {
                    LoadError::MissingSymbol { library: name, path: path.clone(), symbol }
                })?;
                if fns.NvSciIpcCheckVersionCompatibility.is_some() {
                    check_version_of(
                        name,
                        &path,
                        fns.NvSciIpcCheckVersionCompatibility,
                        (IPC_REQUIRED_MAJOR, 0),
                    )?;
                }
                return Ok(NvSciIpcLibrary { fns, path, _lib: lib });
            }
            Err(LoadError::NotFound { tried: t, .. }) => tried.extend(t),
            Err(e) => return Err(e),
        }
    }
    Err(LoadError::NotFound { library: NVSCIIPC_NAMES[0], tried })
}
