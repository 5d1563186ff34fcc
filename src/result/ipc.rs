//! `libnvsciipc.so`: initialisation, endpoints, events and frames.
//!
//! Contracts from nvsciipc.h (DRIVE OS 6.0): every endpoint handle passed is one this library
//! opened and has not closed; the library is initialised ([`init`]) before any other call and
//! de-initialised only once every endpoint of the process is closed. The `*Safe` entry points
//! (DRIVE OS 6.0+) are optional: callers fall back to the older ones where they are missing.

use super::nvfn;
use crate::error::{check, Result};
use core::ffi::{c_char, c_void};
use nvsci_sys::{NvSciIpcEndpoint, NvSciIpcEndpointInfo, NvSciIpcFns};

/// `NvSciIpcInit`.
///
/// # Safety
/// Balanced by exactly one [`deinit`] once no endpoint of the process is open; the library
/// counts nothing itself, so the caller makes one initialisation per process and
/// implementation.
pub(crate) unsafe fn init(t: &NvSciIpcFns) -> Result<()> {
    let f = nvfn!(t, NvSciIpcInit);
    // SAFETY: no arguments; caller contract.
    check("NvSciIpcInit", unsafe { f() })
}

/// `NvSciIpcDeinit`.
///
/// # Safety
/// Balances a successful [`init`]; every endpoint of the process is closed ("all endpoints
/// must be closed before NvSciIpcDeinit", nvsciipc.h) and no other thread calls the library.
pub(crate) unsafe fn deinit(t: &NvSciIpcFns) -> Result<()> {
    let f = nvfn!(t, NvSciIpcDeinit);
    // SAFETY: caller contract.
    unsafe { f() };
    Ok(())
}

/// `NvSciIpcOpenEndpoint`: opens the endpoint `name` (configured in `/etc/nvsciipc.cfg`).
///
/// # Safety
/// The library is initialised and `name` is a NUL-terminated string readable during the call.
/// The endpoint returned is the caller's to close once ([`close_endpoint_safe`] or
/// [`close_endpoint`]).
pub(crate) unsafe fn open_endpoint(t: &NvSciIpcFns, name: *const c_char) -> Result<NvSciIpcEndpoint> {
    let f = nvfn!(t, NvSciIpcOpenEndpoint);
    let mut raw = 0;
    // SAFETY: caller contract; `raw` is a valid out-pointer.
    check("NvSciIpcOpenEndpoint", unsafe { f(name, &mut raw) })?;
    Ok(raw)
}

/// `NvSciIpcCloseEndpointSafe` (optional): closes `ep`; `clear` asks for clean-up of the
/// channel.
///
/// # Safety
/// `ep` is open and closed exactly once; no call on it runs or follows.
pub(crate) unsafe fn close_endpoint_safe(t: &NvSciIpcFns, ep: NvSciIpcEndpoint, clear: bool) -> Result<()> {
    let f = nvfn!(t, NvSciIpcCloseEndpointSafe);
    // SAFETY: caller contract.
    check("NvSciIpcCloseEndpointSafe", unsafe { f(ep, clear) })
}

/// `NvSciIpcCloseEndpoint` (deprecated; does nothing in safety builds).
///
/// # Safety
/// As for [`close_endpoint_safe`].
pub(crate) unsafe fn close_endpoint(t: &NvSciIpcFns, ep: NvSciIpcEndpoint) -> Result<()> {
    let f = nvfn!(t, NvSciIpcCloseEndpoint);
    // SAFETY: caller contract.
    unsafe { f(ep) };
    Ok(())
}

/// `NvSciIpcResetEndpointSafe` (optional): resets `ep`, starting the connection handshake.
///
/// # Safety
/// `ep` is open and not used by another thread during the call.
pub(crate) unsafe fn reset_endpoint_safe(t: &NvSciIpcFns, ep: NvSciIpcEndpoint) -> Result<()> {
    let f = nvfn!(t, NvSciIpcResetEndpointSafe);
    // SAFETY: caller contract.
    check("NvSciIpcResetEndpointSafe", unsafe { f(ep) })
}

/// `NvSciIpcResetEndpoint` (deprecated).
///
/// # Safety
/// As for [`reset_endpoint_safe`].
pub(crate) unsafe fn reset_endpoint(t: &NvSciIpcFns, ep: NvSciIpcEndpoint) -> Result<()> {
    let f = nvfn!(t, NvSciIpcResetEndpoint);
    // SAFETY: caller contract.
    unsafe { f(ep) };
    Ok(())
}

/// `NvSciIpcGetLinuxEventFd`: the endpoint's event descriptor, owned by the library and open
/// until the endpoint is closed.
///
/// # Safety
/// `ep` is open.
pub(crate) unsafe fn get_linux_event_fd(t: &NvSciIpcFns, ep: NvSciIpcEndpoint) -> Result<i32> {
    let f = nvfn!(t, NvSciIpcGetLinuxEventFd);
    let mut fd = -1;
    // SAFETY: caller contract; `fd` is a valid out-pointer.
    check("NvSciIpcGetLinuxEventFd", unsafe { f(ep, &mut fd) })?;
    Ok(fd)
}

/// `NvSciIpcGetEndpointInfo`: the channel's frame count and frame size.
///
/// # Safety
/// `ep` is open.
pub(crate) unsafe fn get_endpoint_info(
    t: &NvSciIpcFns,
    ep: NvSciIpcEndpoint,
) -> Result<NvSciIpcEndpointInfo> {
    let f = nvfn!(t, NvSciIpcGetEndpointInfo);
    let mut info = NvSciIpcEndpointInfo::default();
    // SAFETY: caller contract; `info` is a valid out-pointer.
    check("NvSciIpcGetEndpointInfo", unsafe { f(ep, &mut info) })?;
    Ok(info)
}

/// `NvSciIpcGetEventSafe` (optional): the events since the last call (connection events are
/// reported once each).
///
/// # Safety
/// `ep` is open; "Before using any Read/Write APIs, the user must check if
/// NV_SCI_IPC_EVENT_READ or NV_SCI_IPC_EVENT_WRITE event is available" (nvsciipc.h).
pub(crate) unsafe fn get_event_safe(t: &NvSciIpcFns, ep: NvSciIpcEndpoint) -> Result<u32> {
    let f = nvfn!(t, NvSciIpcGetEventSafe);
    let mut ev = 0;
    // SAFETY: caller contract; `ev` is a valid out-pointer.
    check("NvSciIpcGetEventSafe", unsafe { f(ep, &mut ev) })?;
    Ok(ev)
}

/// `NvSciIpcGetEvent` (deprecated; answers `NotSupported` in safety builds).
///
/// # Safety
/// As for [`get_event_safe`].
pub(crate) unsafe fn get_event(t: &NvSciIpcFns, ep: NvSciIpcEndpoint) -> Result<u32> {
    let f = nvfn!(t, NvSciIpcGetEvent);
    let mut ev = 0;
    // SAFETY: caller contract; `ev` is a valid out-pointer.
    check("NvSciIpcGetEvent", unsafe { f(ep, &mut ev) })?;
    Ok(ev)
}

/// `NvSciIpcWriteSafe` (optional): writes one frame of `size` bytes from `buf`; returns the
/// bytes written. "write channel is full" is `InsufficientMemory`.
///
/// # Safety
/// `ep` is open; `buf` is readable for `size` bytes (at most the frame size).
pub(crate) unsafe fn write_safe(
    t: &NvSciIpcFns,
    ep: NvSciIpcEndpoint,
    buf: *const c_void,
    size: u32,
) -> Result<u32> {
    let f = nvfn!(t, NvSciIpcWriteSafe);
    let mut n = 0u32;
    // SAFETY: caller contract; `n` is a valid out-pointer.
    check("NvSciIpcWriteSafe", unsafe { f(ep, buf, size, &mut n) })?;
    Ok(n)
}

/// `NvSciIpcWrite` (deprecated; answers `NotSupported` in safety builds).
///
/// # Safety
/// As for [`write_safe`].
pub(crate) unsafe fn write(
    t: &NvSciIpcFns,
    ep: NvSciIpcEndpoint,
    buf: *const c_void,
    size: usize,
) -> Result<i32> {
    let f = nvfn!(t, NvSciIpcWrite);
    let mut n = 0i32;
    // SAFETY: caller contract; `n` is a valid out-pointer.
    check("NvSciIpcWrite", unsafe { f(ep, buf, size, &mut n) })?;
    Ok(n)
}

/// `NvSciIpcReadSafe` (optional): reads one frame into `buf`, copying `size` bytes; returns
/// the bytes read. "read channel is empty" is `InsufficientMemory`.
///
/// # Safety
/// `ep` is open; `buf` is writable for `size` bytes and not otherwise accessed during the
/// call.
pub(crate) unsafe fn read_safe(
    t: &NvSciIpcFns,
    ep: NvSciIpcEndpoint,
    buf: *mut c_void,
    size: u32,
) -> Result<u32> {
    let f = nvfn!(t, NvSciIpcReadSafe);
    let mut n = 0u32;
    // SAFETY: caller contract; `n` is a valid out-pointer.
    check("NvSciIpcReadSafe", unsafe { f(ep, buf, size, &mut n) })?;
    Ok(n)
}

/// `NvSciIpcRead` (deprecated; answers `NotSupported` in safety builds).
///
/// # Safety
/// As for [`read_safe`].
pub(crate) unsafe fn read(
    t: &NvSciIpcFns,
    ep: NvSciIpcEndpoint,
    buf: *mut c_void,
    size: usize,
) -> Result<i32> {
    let f = nvfn!(t, NvSciIpcRead);
    let mut n = 0i32;
    // SAFETY: caller contract; `n` is a valid out-pointer.
    check("NvSciIpcRead", unsafe { f(ep, buf, size, &mut n) })?;
    Ok(n)
}
