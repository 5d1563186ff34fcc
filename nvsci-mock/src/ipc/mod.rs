//! NvSciIpc emulation: endpoint pairs connected through Unix domain sockets, their frames in
//! shared-memory rings (see [`config`] for the configuration file and the crate-private
//! `endpoint` and `channel` modules for the transport), and the plumbing the NvSciBuf and
//! NvSciSync export/import entry points use to hand memory and counters to the peer process.

pub(crate) mod channel;
pub(crate) mod codec;
pub mod config;
pub(crate) mod endpoint;
pub(crate) mod lists;

use nvsci_sys::NvSciIpcFns;

pub use endpoint::EndpointClose;

/// The endpoints this process closed (oldest first; the latest 1024 closes), each with the
/// objects exported or imported through it that were still alive at the close. NVIDIA's rawstream sample frees its
/// objects before it closes its endpoints, and nvsciipc.h requires it of inter-chip endpoints
/// (see [`EndpointClose`]); the header documents no error for it, so the mock only records it.
pub fn endpoint_closes() -> Vec<EndpointClose> {
    endpoint::closes()
}

/// How many `NvSciIpcDeinit` calls in this process found endpoints still open. nvsciipc.h
/// (DRIVE OS 6.0.10) requires every endpoint closed with `NvSciIpcCloseEndpointSafe` first and
/// documents no reference counting of `NvSciIpcInit`; the function returns nothing, so the mock
/// counts the violation here (and, like the library, forgets every endpoint: later calls on them
/// answer `NvSciError_NotInitialized`).
pub fn deinit_with_open_endpoints() -> u64 {
    endpoint::deinit_with_open_endpoints()
}

/// What this process did with NvSciIpc's initialisation: the `NvSciIpcInit` and
/// `NvSciIpcDeinit` calls made so far, and whether the library is initialised now (an Init since
/// the last Deinit). nvsciipc.h documents no reference counting, so one Deinit ends every user's
/// endpoints in the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitRecord {
    /// `NvSciIpcInit` calls.
    pub inits: u64,
    /// `NvSciIpcDeinit` calls.
    pub deinits: u64,
    /// Whether the library is initialised now.
    pub initialised: bool,
}

/// The process's [`InitRecord`].
pub fn init_record() -> InitRecord {
    let (inits, deinits, initialised) = endpoint::init_record();
    InitRecord { inits, deinits, initialised }
}

/// Behave as a DRIVE OS safety build, where the deprecated `NvSciIpcCloseEndpoint` does nothing
/// and only `NvSciIpcCloseEndpointSafe` closes an endpoint (process-wide; off by default).
pub fn set_safety_build(on: bool) {
    endpoint::set_safety_build(on)
}

/// The NvSciIpc function table backed by the emulation (every entry present).
pub fn fns() -> NvSciIpcFns {
    NvSciIpcFns {
        NvSciIpcInit: Some(endpoint::init),
        NvSciIpcDeinit: Some(endpoint::deinit),
        NvSciIpcOpenEndpoint: Some(endpoint::open_endpoint),
        NvSciIpcCloseEndpoint: Some(endpoint::close_endpoint),
        NvSciIpcResetEndpoint: Some(endpoint::reset_endpoint),
        NvSciIpcRead: Some(endpoint::read),
        NvSciIpcWrite: Some(endpoint::write),
        NvSciIpcGetEndpointInfo: Some(endpoint::get_endpoint_info),
        NvSciIpcGetLinuxEventFd: Some(endpoint::get_linux_event_fd),
        NvSciIpcGetEvent: Some(endpoint::get_event),
        NvSciIpcCloseEndpointSafe: Some(endpoint::close_endpoint_safe),
        NvSciIpcResetEndpointSafe: Some(endpoint::reset_endpoint_safe),
        NvSciIpcReadSafe: Some(endpoint::read_safe),
        NvSciIpcWriteSafe: Some(endpoint::write_safe),
        NvSciIpcGetEventSafe: Some(endpoint::get_event_safe),
        NvSciIpcCheckVersionCompatibility: Some(endpoint::check_version),
    }
}
