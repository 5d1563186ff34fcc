//! NvSciIpc emulation: endpoint pairs connected through Unix domain sockets (see [`config`] for
//! the configuration file and the crate-private `endpoint` module for the transport), and the plumbing the NvSciBuf and
//! NvSciSync export/import entry points use to hand memory and counters to the peer process.

pub(crate) mod codec;
pub mod config;
pub(crate) mod endpoint;
pub(crate) mod lists;

use nvsci_sys::NvSciIpcFns;

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
