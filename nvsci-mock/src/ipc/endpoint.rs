//! Emulated NvSciIpc endpoints: one Unix domain socket (`SOCK_SEQPACKET`) per connected pair for
//! the connection itself, and the pair's frames in shared memory ([`super::channel`]).
//!
//! Messages on the socket start with a tag byte: the connector's greeting (carrying the link id
//! both ends stamp into descriptors, and the descriptors of the pair's shared memory and wake-ups)
//! or a file descriptor passed with `SCM_RIGHTS` by an object export. The socket's end (the peer
//! closed or died) ends the connection. Application frames (`NvSciIpcWrite`) never touch the
//! socket: they are copied into the pair's ring, and the peer is woken only when it had nothing
//! left to read. The event fd handed out is an epoll descriptor that becomes readable when the
//! socket has data or closed, a connection is pending, a connection attempt should be retried, the
//! peer wrote frames or made room, or connection events wait to be collected with
//! `NvSciIpcGetEvent`.

use super::channel::{Channel, Full};
use super::config::{self, EndpointConfig};
use crate::ffi::{guard, guard_void, lock, non_null, write_out, Res};
use nvsci_sys::*;
use std::collections::HashMap;
use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::raw::{c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The connector's greeting: the link id (`u64`), with the pair's shared memory and wake-up
/// descriptors ([`Channel::for_listener`]).
const TAG_HELLO: u8 = 1;
/// A descriptor exported through the endpoint: its transfer id (`u64`) and the descriptor.
const TAG_FD: u8 = 3;

/// The NvSciIpc version the emulation reports (the DRIVE OS 6.0.10 header: 1.4).
const MAJOR: u32 = 1;
const MINOR: u32 = 4;

/// Whether NvSciIpc is initialised. Not a count: nvsciipc.h (DRIVE OS 6.0.10, `NvSciIpcInit` /
/// `NvSciIpcDeinit`) documents no reference counting, so one `NvSciIpcDeinit` ends what any
/// number of `NvSciIpcInit` calls began.
static INITIALIZED: AtomicBool = AtomicBool::new(false);
/// `NvSciIpcDeinit` calls made while endpoints were still open, which nvsciipc.h forbids
/// ("Before calling this API, the user shall ensure all existing opened endpoints are closed by
/// NvSciIpcCloseEndpointSafe()"); the function returns nothing, so the mock counts them.
static DEINIT_WITH_OPEN_ENDPOINTS: AtomicU64 = AtomicU64::new(0);
/// `NvSciIpcInit` and `NvSciIpcDeinit` calls made in this process.
static INIT_CALLS: AtomicU64 = AtomicU64::new(0);
static DEINIT_CALLS: AtomicU64 = AtomicU64::new(0);
/// Safety-build behaviour: the deprecated `NvSciIpcCloseEndpoint` does nothing (DRIVE OS safety
/// builds keep only the `*Safe` entry points working).
static SAFETY_BUILD: AtomicBool = AtomicBool::new(false);
static ENDPOINTS: Mutex<Option<HashMap<u64, Arc<Endpoint>>>> = Mutex::new(None);
static NEXT_HANDLE: AtomicU64 = AtomicU64::new(0x4e53_4950_0000_0001); // "NSIP"...

pub(crate) struct Endpoint {
    name: String,
    cfg: EndpointConfig,
    epoll: OwnedFd,
    notify: OwnedFd,
    st: Mutex<State>,
    /// The objects of this process exported or imported through this endpoint (see [`bind`]).
    bound: Mutex<Vec<Bound>>,
}

/// What an object exported or imported through an endpoint is, for [`EndpointClose`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BoundKind {
    /// An NvSciBuf object (its allocation, in this process).
    Buf,
    /// An NvSciSync object (its state, which every fence of it also holds).
    Sync,
}

/// One object exported or imported through an endpoint: alive while any handle or fence of it is.
struct Bound {
    /// The address of the object's shared state (one entry per object).
    key: usize,
    kind: BoundKind,
    alive: Box<dyn Fn() -> bool + Send>,
}

/// One `NvSciIpcCloseEndpointSafe` (or effective `NvSciIpcCloseEndpoint`) in this process, and
/// the objects exported or imported through that endpoint that were still alive when it closed.
///
/// nvsciipc.h (version 1.4, DRIVE OS 6.0.10, `NvSciIpcCloseEndpointSafe`, "@pre Closing
/// Inter-Chip Endpoint"): "before calling NvSciIpcCloseEndpointSafe() for (INTER_CHIP, PCIE)
/// endpoint, the user must ensure all fences submitted to NvIpc for Inter-Chip communication for
/// signaling are expired and also all NvSciBufObjs and NvSciSyncObjs mappings registered,
/// exported and imported with NvIpc for Inter-Chip communication are un-registered and
/// released". The header documents no error for a close that breaks the rule, so the mock
/// records it rather than refusing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointClose {
    /// The endpoint's name.
    pub endpoint: String,
    /// NvSciBuf objects exported or imported through it with a handle still alive.
    pub live_buf_objects: usize,
    /// NvSciSync objects exported or imported through it with a handle or a fence still alive.
    pub live_sync_objects: usize,
}

/// The latest endpoint closes of this process, oldest first (see [`MAX_CLOSES_KEPT`]).
static CLOSES: Mutex<Vec<EndpointClose>> = Mutex::new(Vec::new());

/// How many of the latest endpoint closes [`closes`] keeps.
pub(crate) const MAX_CLOSES_KEPT: usize = 1024;

#[derive(Default)]
struct State {
    listener: Option<OwnedFd>,
    sock: Option<OwnedFd>,
    retry: Option<OwnedFd>,
    link: Option<u64>,
    /// A connection was established and `NvSciIpcGetEvent` has not reported it yet.
    est_edge: bool,
    /// The connection as the application sees it: established once `NvSciIpcGetEvent` reported
    /// `CONN_EST` for the live connection, and not any more once it reported `CONN_RESET`.
    /// nvsciipc.h: reads and writes need the connection established through
    /// `NvSciIpcGetEventSafe` ("Before using any Read/Write APIs, the user must check if
    /// NV_SCI_IPC_EVENT_READ or NV_SCI_IPC_EVENT_WRITE event is available through
    /// NvSciIpcGetEventSafe()"; "NvSciIpcGetEventSafe() has additional support to establish
    /// connection between two endpoint software entities"), and the state a reset leaves only
    /// takes effect "until the next event notification on the local endpoint".
    app_up: bool,
    /// The connection was lost (or reset) and `NvSciIpcGetEvent` has not reported it yet.
    reset_edge: bool,
    /// The transport is down: the peer closed, died or reset, and no new peer connected yet.
    closed: bool,
    /// This endpoint was reset in De-Init mode (`NvSciIpcResetEndpointSafe` after the connection
    /// was established): it stays down until closed.
    local_reset: bool,
    /// The connection was lost with frames still queued: `reset_edge` follows once they are read.
    reset_after_drain: bool,
    /// The frames of the connection (or of the lost one, until they were read). The listening
    /// end gets it with the connector's greeting.
    chan: Option<Channel>,
    /// A write found the sending FIFO full (or filled it) and `NvSciIpcGetEvent` has not
    /// reported room since.
    was_full: bool,
    notified: bool,
    fds: HashMap<u64, OwnedFd>,
    next_transfer: u64,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn owned(fd: RawFd) -> Res<OwnedFd> {
    if fd < 0 {
        return Err(NvSciError_ResourceError);
    }
    // SAFETY: `fd` was just returned by a successful system call and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn epoll_add(epoll: &OwnedFd, fd: RawFd) {
    let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
    // SAFETY: both descriptors are live; `ev` is a valid event description.
    unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
}

fn epoll_del(epoll: &OwnedFd, fd: RawFd) {
    // SAFETY: both descriptors are live; a NULL event is allowed for EPOLL_CTL_DEL.
    unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
}

fn sockaddr(path: &std::path::Path) -> Res<(libc::sockaddr_un, libc::socklen_t)> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: sockaddr_un is plain old data; all zeroes is a valid (empty) value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(NvSciError_BadParameter);
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Ok((addr, len as libc::socklen_t))
}

fn seqpacket() -> Res<OwnedFd> {
    // SAFETY: plain socket creation.
    owned(unsafe {
        libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0)
    })
}

fn try_connect(path: &std::path::Path) -> Option<OwnedFd> {
    let (addr, len) = sockaddr(path).ok()?;
    let fd = seqpacket().ok()?;
    // SAFETY: `addr` is a valid sockaddr_un of `len` bytes; `fd` is a live socket.
    let r = unsafe { libc::connect(fd.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) };
    (r == 0).then_some(fd)
}

/// Binds the listening socket; a stale socket file left by a dead process is replaced, a live
/// listener means the endpoint is open elsewhere (`Busy`).
fn listen_at(path: &std::path::Path) -> Res<OwnedFd> {
    let (addr, len) = sockaddr(path)?;
    for _ in 0..2 {
        let fd = seqpacket()?;
        // SAFETY: as in `try_connect`.
        if unsafe { libc::bind(fd.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) } == 0 {
            // SAFETY: `fd` is a bound socket.
            if unsafe { libc::listen(fd.as_raw_fd(), 1) } != 0 {
                return Err(NvSciError_ResourceError);
            }
            return Ok(fd);
        }
        if errno() != libc::EADDRINUSE {
            return Err(NvSciError_NotPermitted);
        }
        if try_connect(path).is_some() {
            return Err(NvSciError_Busy);
        }
        let _ = std::fs::remove_file(path);
    }
    Err(NvSciError_Busy)
}

/// A timer that wakes the connecting endpoint every millisecond to retry its connection.
fn retry_timer() -> Res<OwnedFd> {
    // SAFETY: plain descriptor creation.
    let t = owned(unsafe {
        libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC)
    })?;
    let every = libc::timespec { tv_sec: 0, tv_nsec: 1_000_000 };
    let spec = libc::itimerspec { it_interval: every, it_value: every };
    // SAFETY: `t` is a live timerfd and `spec` a valid setting.
    unsafe { libc::timerfd_settime(t.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    Ok(t)
}

fn random_link() -> u64 {
    let t =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let seed = t ^ (u64::from(std::process::id()) << 32) ^ NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
    crate::ipc::codec::fnv1a(&seed.to_le_bytes()) | 1
}

/// The most descriptors one message carries (the greeting's three).
const MAX_FDS: usize = 3;

fn send(sock: &OwnedFd, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> Result<(), i32> {
    let mut iov = libc::iovec { iov_base: bytes.as_ptr().cast_mut().cast(), iov_len: bytes.len() };
    // SAFETY: msghdr is plain old data; all zeroes is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    let mut cbuf = [0u64; 8];
    if !fds.is_empty() {
        let fds = &fds[..fds.len().min(MAX_FDS)];
        let bytes = (std::mem::size_of::<RawFd>() * fds.len()) as u32;
        // SAFETY: CMSG_SPACE is a pure computation.
        let space = unsafe { libc::CMSG_SPACE(bytes) } as usize;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer is 64 bytes, 8-aligned, and holds one SCM_RIGHTS header with
        // at most three descriptors (CMSG_SPACE of 12 bytes is 32 here); the header pointer and
        // the descriptors written are inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(bytes) as _;
            for (i, fd) in fds.iter().enumerate() {
                libc::CMSG_DATA(c).cast::<RawFd>().add(i).write_unaligned(fd.as_raw_fd());
            }
        }
    }
    // SAFETY: `msg` points to live buffers for the duration of the call.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

enum Received {
    /// A message of this many bytes, now at the start of the receive buffer, and the
    /// descriptors it carried.
    Message(usize, Vec<OwnedFd>),
    Empty,
    Closed,
}

/// Receives one message into `buf` (sized for the largest message; reused for every call, so
/// polling an empty socket allocates nothing).
fn recv(sock: &OwnedFd, buf: &mut [u8]) -> Received {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut cbuf = [0u64; 8];
    // SAFETY: as in `send`.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: `msg` describes live, writable buffers.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        let e = errno();
        return if e == libc::EAGAIN || e == libc::EWOULDBLOCK || e == libc::EINTR {
            Received::Empty
        } else {
            Received::Closed
        };
    }
    if n == 0 {
        return Received::Closed;
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `msg_control`; the CMSG macros walk inside `msg_controllen`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let count =
                    ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    let raw = libc::CMSG_DATA(c).cast::<RawFd>().add(i).read_unaligned();
                    fds.push(OwnedFd::from_raw_fd(raw));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Received::Message(n as usize, fds)
}

impl Endpoint {
    /// A new connection replaces whatever the last one left: its frames are discarded
    /// (nvsciipc.h, `NvSciIpcResetEndpointSafe`: "all existing data in channel will be
    /// discarded") and the peer's FIFO starts empty.
    fn new_connection(&self, st: &mut State, chan: Option<Channel>) {
        st.closed = false;
        st.was_full = false;
        self.set_channel(st, chan);
    }

    /// Replaces the frames of the connection, keeping the epoll set in step: the wake-up
    /// descriptor is shared with the peer, so closing it would not take it out of the set.
    fn set_channel(&self, st: &mut State, chan: Option<Channel>) {
        if let Some(old) = st.chan.take() {
            epoll_del(&self.epoll, old.event_fd().as_raw_fd());
        }
        if let Some(c) = &chan {
            epoll_add(&self.epoll, c.event_fd().as_raw_fd());
        }
        st.chan = chan;
    }

    /// Frames from the peer wait to be read.
    fn readable(st: &State) -> bool {
        st.chan.as_ref().is_some_and(Channel::readable)
    }

    /// Frames this endpoint wrote that the peer has not read (none without a connection).
    fn in_flight(st: &State) -> u32 {
        st.chan.as_ref().map_or(0, Channel::in_flight)
    }

    /// The connection is gone: this endpoint was reset, or the peer closed, died or reset.
    /// `CONN_RESET` is reported once, then the endpoint waits for the next peer (a restarted
    /// peer process connects to the same channel again). What the peer wrote before it went
    /// away stays readable first: the reset is raised once those frames were read (a peer's
    /// close is not documented to discard what it sent; nvsciipc.h documents discarding for
    /// `NvSciIpcResetEndpointSafe` only).
    fn lost(&self, st: &mut State) {
        if let Some(sock) = st.sock.take() {
            epoll_del(&self.epoll, sock.as_raw_fd());
        }
        st.link = None;
        st.closed = true;
        st.reset_after_drain = true;
    }

    /// Takes in what arrived ([`drain`](Self::drain)) and brings the event descriptor up to date
    /// ([`settle`](Self::settle)). `socket`: read the socket even where the connection's frames
    /// give no reason to (see `drain`).
    fn pump(&self, st: &mut State, socket: bool) {
        self.drain(st, socket);
        self.settle(st);
    }

    /// Connects (again) where there is no connection, and moves what arrived on the socket into
    /// the endpoint's state. The socket carries the greeting, exported descriptors and the end of
    /// the connection, none of them per frame: it is read before the greeting and where `socket`
    /// asks for it (`NvSciIpcGetEvent` with no frame waiting: a peer that died writes nothing
    /// more, so the end of its socket is seen once its last frames were read). Once per call is
    /// enough: what arrives later makes the event descriptor readable.
    fn drain(&self, st: &mut State, socket: bool) {
        if st.reset_after_drain && !Self::readable(st) {
            st.reset_after_drain = false;
            st.reset_edge = true;
        }
        if st.sock.is_none() && !st.local_reset && !st.reset_after_drain {
            if self.cfg.listens && st.listener.is_none() {
                // Listen again for the peer's next connection.
                if let Ok(l) = listen_at(&self.cfg.socket) {
                    epoll_add(&self.epoll, l.as_raw_fd());
                    st.listener = Some(l);
                }
            }
            if !self.cfg.listens && st.retry.is_none() {
                if let Ok(t) = retry_timer() {
                    epoll_add(&self.epoll, t.as_raw_fd());
                    st.retry = Some(t);
                }
            }
            if self.cfg.listens {
                if let Some(l) = &st.listener {
                    // SAFETY: `l` is a listening socket; NULL address outputs are allowed.
                    let fd = unsafe {
                        libc::accept4(
                            l.as_raw_fd(),
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                        )
                    };
                    if let Ok(sock) = owned(fd) {
                        // The connector's greeting (with the link id and the frames' memory) is
                        // already queued on the socket: it is read below, which establishes the
                        // connection here.
                        epoll_add(&self.epoll, sock.as_raw_fd());
                        if let Some(l) = st.listener.take() {
                            epoll_del(&self.epoll, l.as_raw_fd());
                        }
                        let _ = std::fs::remove_file(&self.cfg.socket);
                        st.sock = Some(sock);
                        self.new_connection(st, None);
                    }
                }
            } else if let Some(sock) = try_connect(&self.cfg.socket) {
                // Connected as soon as the listener's backlog took us (as the real channel is
                // established without the peer calling in): greet the listener with the link id
                // both ends stamp into descriptors and the pair's frames.
                let link = random_link();
                let mut hello = vec![TAG_HELLO];
                hello.extend_from_slice(&link.to_le_bytes());
                let chan = Channel::create(self.cfg.nframes, self.cfg.frame_size).ok();
                let sent = chan
                    .as_ref()
                    .and_then(Channel::for_listener)
                    .is_some_and(|fds| send(&sock, &hello, &fds).is_ok());
                if sent {
                    epoll_add(&self.epoll, sock.as_raw_fd());
                    if let Some(t) = st.retry.take() {
                        epoll_del(&self.epoll, t.as_raw_fd());
                    }
                    st.sock = Some(sock);
                    st.link = Some(link);
                    st.est_edge = true;
                    self.new_connection(st, chan);
                }
            }
        }
        if let Some(t) = &st.retry {
            let mut expirations = 0u64;
            // SAFETY: reading 8 bytes from a non-blocking timerfd into a u64.
            unsafe { libc::read(t.as_raw_fd(), (&mut expirations as *mut u64).cast(), 8) };
        }
        if !socket && st.link.is_some() {
            return;
        }
        let mut buf = [0u8; 16];
        while let Some(sock) = &st.sock {
            match recv(sock, &mut buf) {
                Received::Empty => break,
                Received::Closed => self.lost(st),
                Received::Message(n, fds) => match buf[..n].first().copied() {
                    Some(TAG_HELLO) if n == 9 && st.link.is_none() => {
                        match Channel::open(self.cfg.nframes, self.cfg.frame_size, fds) {
                            Ok(chan) => {
                                st.link = buf[1..9].try_into().ok().map(u64::from_le_bytes);
                                st.est_edge = true;
                                self.set_channel(st, Some(chan));
                            }
                            // A greeting without usable frames: not a peer of this channel.
                            Err(_) => self.lost(st),
                        }
                    }
                    Some(TAG_FD) if n == 9 && fds.len() == 1 => {
                        if let (Ok(id), Some(fd)) = (<[u8; 8]>::try_from(&buf[1..9]), fds.into_iter().next())
                        {
                            st.fds.insert(u64::from_le_bytes(id), fd);
                        }
                    }
                    // Anything else is dropped, with the descriptors it carried.
                    _ => {}
                },
            }
        }
    }

    /// Makes the event descriptor readable exactly while something waits to be collected:
    /// connection events through this endpoint's own eventfd, frames and room through the
    /// channel's wake-up (cleared here once nothing is left for it). No reading from the socket.
    fn settle(&self, st: &mut State) {
        if st.reset_after_drain && !Self::readable(st) {
            st.reset_after_drain = false;
            st.reset_edge = true;
        }
        if let Some(chan) = &st.chan {
            let was_full = st.was_full;
            let nframes = self.cfg.nframes;
            chan.settle(|c| c.readable() || (was_full && c.in_flight() < nframes));
        }
        let level = st.est_edge || st.reset_edge;
        if level != st.notified {
            let mut v = 1u64;
            // SAFETY: 8-byte read/write of a u64 on a non-blocking eventfd.
            unsafe {
                if level {
                    libc::write(self.notify.as_raw_fd(), (&v as *const u64).cast(), 8);
                } else {
                    libc::read(self.notify.as_raw_fd(), (&mut v as *mut u64).cast(), 8);
                }
            }
            st.notified = level;
        }
    }

    fn connected(st: &State) -> bool {
        st.link.is_some() && st.sock.is_some() && !st.closed
    }

    /// The error of a read or write the application's view of the connection does not allow.
    fn not_usable(st: &State) -> NvSciError {
        if st.local_reset || st.closed {
            // "the endpoint is being reset" (NvSciIpcReadSafe / NvSciIpcWriteSafe), until a new
            // connection is established and reported.
            NvSciError_ConnectionReset
        } else {
            // No connection established through NvSciIpcGetEventSafe yet: "an invalid
            // operation state".
            NvSciError_InvalidState
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let st = lock(&self.st);
        if st.listener.is_some() {
            let _ = std::fs::remove_file(&self.cfg.socket);
        }
    }
}

fn registry<R>(f: impl FnOnce(&mut HashMap<u64, Arc<Endpoint>>) -> R) -> R {
    let mut g = lock(&ENDPOINTS);
    f(g.get_or_insert_with(HashMap::new))
}

pub(crate) fn get(h: NvSciIpcEndpoint) -> Res<Arc<Endpoint>> {
    let ep = registry(|m| m.get(&h).cloned()).ok_or(NvSciError_BadParameter)?;
    // After NvSciIpcDeinit the endpoint database is gone (nvsciipc.h: Deinit "cleans up the
    // NvSciIpc endpoint internal database created by NvSciIpcInit()").
    initialized()?;
    Ok(ep)
}

fn initialized() -> Res {
    if !INITIALIZED.load(Ordering::Acquire) {
        Err(NvSciError_NotInitialized)
    } else {
        Ok(())
    }
}

/// The link id of a connected endpoint (stamped into every descriptor exported through it).
pub(crate) fn link(h: NvSciIpcEndpoint) -> Res<u64> {
    let ep = get(h)?;
    let mut st = lock(&ep.st);
    ep.pump(&mut st, false);
    if st.closed {
        return Err(NvSciError_ConnectionReset);
    }
    st.link.filter(|_| Endpoint::connected(&st)).ok_or(NvSciError_InvalidState)
}

/// Sends `fd` to the peer; returns `(link, transfer id)`.
pub(crate) fn send_fd(h: NvSciIpcEndpoint, fd: BorrowedFd<'_>) -> Res<(u64, u64)> {
    let ep = get(h)?;
    let mut st = lock(&ep.st);
    ep.pump(&mut st, false);
    if st.closed {
        return Err(NvSciError_ConnectionReset);
    }
    let link = st.link.filter(|_| Endpoint::connected(&st)).ok_or(NvSciError_InvalidState)?;
    st.next_transfer += 1;
    let id = st.next_transfer;
    let mut m = vec![TAG_FD];
    m.extend_from_slice(&id.to_le_bytes());
    let sock = st.sock.as_ref().ok_or(NvSciError_InvalidState)?;
    match send(sock, &m, &[fd]) {
        Ok(()) => Ok((link, id)),
        Err(e) if e == libc::EAGAIN => Err(NvSciError_InsufficientMemory),
        Err(_) => Err(NvSciError_ConnectionReset),
    }
}

/// Takes the descriptor of transfer `id` sent by the peer, waiting up to `timeout_us` (negative:
/// forever) for it to arrive.
pub(crate) fn take_fd(h: NvSciIpcEndpoint, id: u64, timeout_us: i64) -> Res<OwnedFd> {
    let ep = get(h)?;
    let deadline = u64::try_from(timeout_us).ok().map(|us| Instant::now() + Duration::from_micros(us));
    loop {
        let sock_fd = {
            let mut st = lock(&ep.st);
            ep.pump(&mut st, true);
            if let Some(fd) = st.fds.remove(&id) {
                return Ok(fd);
            }
            if st.closed {
                return Err(NvSciError_ConnectionReset);
            }
            st.sock.as_ref().map(AsRawFd::as_raw_fd)
        };
        let wait_ms = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(NvSciError_Timeout);
                }
                left.as_millis().clamp(1, 10) as i32
            }
            None => 10,
        };
        match sock_fd {
            Some(fd) => {
                let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd; a descriptor closed meanwhile reports POLLNVAL.
                unsafe { libc::poll(&mut p, 1, wait_ms) };
            }
            None => std::thread::sleep(Duration::from_millis(wait_ms as u64)),
        }
    }
}

pub(crate) unsafe extern "C" fn init() -> NvSciError {
    guard("NvSciIpcInit", || {
        INIT_CALLS.fetch_add(1, Ordering::Relaxed);
        INITIALIZED.store(true, Ordering::Release);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn deinit() {
    guard_void(|| {
        DEINIT_CALLS.fetch_add(1, Ordering::Relaxed);
        if registry(|m| !m.is_empty()) {
            DEINIT_WITH_OPEN_ENDPOINTS.fetch_add(1, Ordering::Relaxed);
        }
        INITIALIZED.store(false, Ordering::Release);
    })
}

pub(crate) unsafe extern "C" fn open_endpoint(name: *const c_char, out: *mut NvSciIpcEndpoint) -> NvSciError {
    guard("NvSciIpcOpenEndpoint", || {
        non_null(name)?;
        non_null(out)?;
        initialized()?;
        // SAFETY: `name` is non-NULL; the caller passes a NUL-terminated string. The read stops
        // at the NUL.
        let name = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| NvSciError_BadParameter)?;
        if name.is_empty() || name.len() >= NVSCIIPC_MAX_ENDPOINT_NAME as usize {
            return Err(NvSciError_BadParameter);
        }
        let dir = config::dir().ok_or(NvSciError_NoSuchEntry)?;
        let cfg = config::lookup(&dir, name).ok_or(NvSciError_NoSuchEntry)?;
        if registry(|m| m.values().any(|e| e.name == name)) {
            return Err(NvSciError_Busy);
        }
        // SAFETY: plain descriptor creation.
        let epoll = owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: as above.
        let notify = owned(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        epoll_add(&epoll, notify.as_raw_fd());
        let mut st = State::default();
        if cfg.listens {
            let l = listen_at(&cfg.socket)?;
            epoll_add(&epoll, l.as_raw_fd());
            st.listener = Some(l);
        } else {
            let t = retry_timer()?;
            epoll_add(&epoll, t.as_raw_fd());
            st.retry = Some(t);
        }
        let ep = Arc::new(Endpoint {
            name: name.to_owned(),
            cfg,
            epoll,
            notify,
            st: Mutex::new(st),
            bound: Mutex::new(Vec::new()),
        });
        {
            let mut st = lock(&ep.st);
            ep.pump(&mut st, true);
        }
        let h = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
        registry(|m| m.insert(h, ep));
        crate::ledger::global_ledger().add(crate::ledger::Kind::Endpoint);
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, h) }
    })
}

fn close(h: NvSciIpcEndpoint) -> Res {
    let ep = registry(|m| m.remove(&h)).ok_or(NvSciError_BadParameter)?;
    crate::ledger::global_ledger().sub(crate::ledger::Kind::Endpoint);
    let live = |kind| lock(&ep.bound).iter().filter(|b| b.kind == kind && (b.alive)()).count();
    let record = EndpointClose {
        endpoint: ep.name.clone(),
        live_buf_objects: live(BoundKind::Buf),
        live_sync_objects: live(BoundKind::Sync),
    };
    let mut closes = lock(&CLOSES);
    // A long-running process opens and closes endpoints without bound: keep the latest only.
    if closes.len() == MAX_CLOSES_KEPT {
        closes.remove(0);
    }
    closes.push(record);
    drop(closes);
    drop(ep);
    Ok(())
}

/// Notes that the object whose shared state is `obj` was exported or imported through `h`, so
/// that closing `h` records whether it is still alive ([`EndpointClose`]). An endpoint that is
/// not open is ignored (the export or import itself reports it).
pub(crate) fn bind<T: Send + Sync + 'static>(h: NvSciIpcEndpoint, obj: &Arc<T>, kind: BoundKind) {
    let Some(ep) = registry(|m| m.get(&h).cloned()) else { return };
    let key = Arc::as_ptr(obj) as *const u8 as usize;
    let mut bound = lock(&ep.bound);
    // Two live objects never share an address: a live entry at this address is this object
    // (a fence exported per frame finds its object here).
    if bound.iter().any(|b| b.key == key && (b.alive)()) {
        return;
    }
    // Objects freed already need no record.
    bound.retain(|b| (b.alive)());
    let weak = Arc::downgrade(obj);
    bound.push(Bound { key, kind, alive: Box::new(move || weak.strong_count() > 0) });
}

/// The latest endpoint closes of this process (at most [`MAX_CLOSES_KEPT`]), oldest first.
pub(crate) fn closes() -> Vec<EndpointClose> {
    lock(&CLOSES).clone()
}

pub(crate) unsafe extern "C" fn close_endpoint(h: NvSciIpcEndpoint) {
    guard_void(|| {
        if SAFETY_BUILD.load(Ordering::Relaxed) {
            return;
        }
        let _ = close(h);
    });
}

pub(crate) unsafe extern "C" fn close_endpoint_safe(h: NvSciIpcEndpoint, _clear: bool) -> NvSciError {
    guard("NvSciIpcCloseEndpointSafe", || close(h))
}

fn reset(h: NvSciIpcEndpoint) -> Res {
    let ep = get(h)?;
    let mut st = lock(&ep.st);
    // The reset that follows opening (the documented way to start the connection) changes
    // nothing; once the application has seen the connection, a reset ends it for both ends.
    if st.app_up && Endpoint::connected(&st) {
        ep.lost(&mut st);
        // "all existing data in channel will be discarded".
        ep.set_channel(&mut st, None);
        st.local_reset = true;
    }
    ep.pump(&mut st, true);
    Ok(())
}

pub(crate) unsafe extern "C" fn reset_endpoint(h: NvSciIpcEndpoint) {
    guard_void(|| {
        let _ = reset(h);
    });
}

pub(crate) unsafe extern "C" fn reset_endpoint_safe(h: NvSciIpcEndpoint) -> NvSciError {
    guard("NvSciIpcResetEndpointSafe", || reset(h))
}

fn read_frame(h: NvSciIpcEndpoint, buf: *mut c_void, size: usize) -> Res<usize> {
    initialized()?;
    let ep = get(h)?;
    if buf.is_null() || size == 0 || size > ep.cfg.frame_size as usize {
        return Err(NvSciError_BadParameter);
    }
    let mut st = lock(&ep.st);
    ep.pump(&mut st, false);
    if !st.app_up {
        // Not established through NvSciIpcGetEventSafe (see `State::app_up`), or reset and
        // reported: InvalidState ("an invalid operation state") or ConnectionReset ("the
        // endpoint is being reset"), not an empty channel.
        return Err(Endpoint::not_usable(&st));
    }
    // SAFETY: the caller provides `size` writable bytes at `buf`.
    let out = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), size) };
    // Frames carry no length: a read copies the `size` bytes asked for ("the number of bytes to
    // copy from the frame", NvSciIpcReadSafe, nvsciipc.h) and reports them all as read. Bytes the
    // writer did not fill read as `UNWRITTEN`.
    if st.chan.as_ref().and_then(|c| c.read(out, UNWRITTEN)).is_none() {
        return Err(if st.closed {
            NvSciError_ConnectionReset
        } else {
            // "read channel is empty and the read operation aborted" (NvSciIpcReadSafe).
            NvSciError_InsufficientMemory
        });
    }
    ep.settle(&mut st);
    Ok(size)
}

/// What the bytes of a frame beyond those written read as: "If size is less than the frame
/// size, then the remaining bytes of the frame are filled with zero" (NvSciIpcWriteSafe,
/// nvsciipc.h, DRIVE OS 6.0.10).
const UNWRITTEN: u8 = 0;

fn write_frame(h: NvSciIpcEndpoint, buf: *const c_void, size: usize) -> Res<usize> {
    initialized()?;
    let ep = get(h)?;
    if buf.is_null() || size == 0 || size > ep.cfg.frame_size as usize {
        return Err(NvSciError_BadParameter);
    }
    let mut st = lock(&ep.st);
    ep.pump(&mut st, false);
    if !st.app_up || !Endpoint::connected(&st) {
        return Err(Endpoint::not_usable(&st));
    }
    // SAFETY: the caller provides `size` readable bytes at `buf`.
    let payload = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), size) };
    let chan = st.chan.as_ref().ok_or(NvSciError_InvalidState)?;
    match chan.write(payload) {
        Ok(()) => {
            if chan.in_flight() >= ep.cfg.nframes {
                st.was_full = true;
            }
            Ok(size)
        }
        Err(Full) => {
            // The channel holds `nframes` frames per direction (NvSciIpcEndpointInfo): "write
            // channel is full and the write operation aborted" (NvSciIpcWriteSafe, nvsciipc.h).
            st.was_full = true;
            Err(NvSciError_InsufficientMemory)
        }
    }
}

pub(crate) unsafe extern "C" fn read(
    h: NvSciIpcEndpoint,
    buf: *mut c_void,
    size: usize,
    bytes: *mut i32,
) -> NvSciError {
    guard("NvSciIpcRead", || {
        non_null(bytes)?;
        let n = read_frame(h, buf, size)?;
        // SAFETY: `bytes` is non-NULL caller storage.
        unsafe { write_out(bytes, n as i32) }
    })
}

pub(crate) unsafe extern "C" fn read_safe(
    h: NvSciIpcEndpoint,
    buf: *mut c_void,
    size: u32,
    bytes: *mut u32,
) -> NvSciError {
    guard("NvSciIpcReadSafe", || {
        non_null(bytes)?;
        let n = read_frame(h, buf, size as usize)?;
        // SAFETY: as above.
        unsafe { write_out(bytes, n as u32) }
    })
}

pub(crate) unsafe extern "C" fn write(
    h: NvSciIpcEndpoint,
    buf: *const c_void,
    size: usize,
    bytes: *mut i32,
) -> NvSciError {
    guard("NvSciIpcWrite", || {
        non_null(bytes)?;
        let n = write_frame(h, buf, size)?;
        // SAFETY: as above.
        unsafe { write_out(bytes, n as i32) }
    })
}

pub(crate) unsafe extern "C" fn write_safe(
    h: NvSciIpcEndpoint,
    buf: *const c_void,
    size: u32,
    bytes: *mut u32,
) -> NvSciError {
    guard("NvSciIpcWriteSafe", || {
        non_null(bytes)?;
        let n = write_frame(h, buf, size as usize)?;
        // SAFETY: as above.
        unsafe { write_out(bytes, n as u32) }
    })
}

pub(crate) unsafe extern "C" fn get_endpoint_info(
    h: NvSciIpcEndpoint,
    info: *mut NvSciIpcEndpointInfo,
) -> NvSciError {
    guard("NvSciIpcGetEndpointInfo", || {
        initialized()?;
        let ep = get(h)?;
        let v = NvSciIpcEndpointInfo { nframes: ep.cfg.nframes, frame_size: ep.cfg.frame_size };
        // SAFETY: `info` is NULL (rejected) or caller storage.
        unsafe { write_out(info, v) }
    })
}

pub(crate) unsafe extern "C" fn get_linux_event_fd(h: NvSciIpcEndpoint, fd: *mut i32) -> NvSciError {
    guard("NvSciIpcGetLinuxEventFd", || {
        initialized()?;
        let ep = get(h)?;
        // SAFETY: `fd` is NULL (rejected) or caller storage.
        unsafe { write_out(fd, ep.epoll.as_raw_fd()) }
    })
}

fn events(h: NvSciIpcEndpoint) -> Res<u32> {
    initialized()?;
    let ep = get(h)?;
    let mut st = lock(&ep.st);
    // The socket only when no frame waits (see `Endpoint::drain`).
    let socket = !Endpoint::readable(&st);
    ep.pump(&mut st, socket);
    let mut ev = 0;
    // nvsciipc.h, NvSciIpcGetEventSafe: "NV_SCI_IPC_EVENT_CONN_EST and
    // NV_SCI_IPC_EVENT_CONN_RESET events are connection event. They're edge-triggered events
    // and once they're read by user, events are cleared." Each is reported once per occurrence.
    if std::mem::take(&mut st.reset_edge) {
        ev |= NV_SCI_IPC_EVENT_CONN_RESET;
        st.app_up = false;
    }
    if std::mem::take(&mut st.est_edge) {
        ev |= NV_SCI_IPC_EVENT_CONN_EST;
        // A peer that wrote and went away before this endpoint's first look: what it wrote is
        // readable first, and the reset follows once it was read (see `lost`).
        st.app_up = Endpoint::connected(&st) || (st.reset_after_drain && Endpoint::readable(&st));
    }
    let in_flight = Endpoint::in_flight(&st);
    // Room is reported below (WRITE): the edge of the FIFO ceasing to be full is collected.
    if in_flight < ep.cfg.nframes {
        st.was_full = false;
    }
    // "NV_SCI_IPC_EVENT_WRITE, NV_SCI_IPC_EVENT_READ and NV_SCI_IPC_EVENT_WRITE_EMPTY events are
    // FIFO status event. As long as free buffer is available on write FIFO or data are
    // available in read FIFO, API keeps reporting same events."
    if st.app_up && Endpoint::connected(&st) {
        if in_flight < ep.cfg.nframes {
            ev |= NV_SCI_IPC_EVENT_WRITE;
        }
        if in_flight == 0 {
            ev |= NV_SCI_IPC_EVENT_WRITE_EMPTY;
        }
    }
    if st.app_up && Endpoint::readable(&st) {
        ev |= NV_SCI_IPC_EVENT_READ;
    }
    ep.settle(&mut st);
    Ok(ev)
}

pub(crate) unsafe extern "C" fn get_event(h: NvSciIpcEndpoint, out: *mut u32) -> NvSciError {
    guard("NvSciIpcGetEvent", || {
        non_null(out)?;
        let ev = events(h)?;
        // SAFETY: `out` is non-NULL caller storage.
        unsafe { write_out(out, ev) }
    })
}

pub(crate) unsafe extern "C" fn get_event_safe(h: NvSciIpcEndpoint, out: *mut u32) -> NvSciError {
    guard("NvSciIpcGetEventSafe", || {
        non_null(out)?;
        let ev = events(h)?;
        // SAFETY: as above.
        unsafe { write_out(out, ev) }
    })
}

pub(crate) unsafe extern "C" fn check_version(major: u32, minor: u32, ok: *mut bool) -> NvSciError {
    guard("NvSciIpcCheckVersionCompatibility", || {
        // SAFETY: `ok` is NULL (rejected) or caller storage.
        unsafe { write_out(ok, major == MAJOR && minor <= MINOR) }
    })
}

/// How many `NvSciIpcDeinit` calls found endpoints still open (a contract violation the library
/// cannot report, since the function returns nothing).
/// `(NvSciIpcInit calls, NvSciIpcDeinit calls, initialised now)` in this process.
pub(crate) fn init_record() -> (u64, u64, bool) {
    (
        INIT_CALLS.load(Ordering::Relaxed),
        DEINIT_CALLS.load(Ordering::Relaxed),
        INITIALIZED.load(Ordering::Acquire),
    )
}

pub(crate) fn deinit_with_open_endpoints() -> u64 {
    DEINIT_WITH_OPEN_ENDPOINTS.load(Ordering::Relaxed)
}

/// Switches the safety-build behaviour of the deprecated close on or off.
pub(crate) fn set_safety_build(on: bool) {
    SAFETY_BUILD.store(on, Ordering::Relaxed);
}
