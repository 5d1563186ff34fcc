//! NvSciIpc endpoints: opened by name, closed on drop, with frame reads and writes that wait on
//! the endpoint's event descriptor up to a timeout.

use super::Ipc;
use crate::error::{Error, IpcError, NvSciError, Result, Wait};
use crate::result::{ipc as nvipc, is_missing};
use nvsci_sys as sys;
use std::ffi::CString;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a wait for the peer looks at the event descriptor without sleeping (yielding the
/// CPU between looks) before it sleeps in `poll`, on machines with [`SPIN_MIN_CPUS`] or more and
/// only while the peer answers that fast (the endpoint's last wait ended within it): a peer that
/// answers within it (frames handed off back to back between two processes) is seen without the
/// wake-up of a sleeping thread, and a stream whose frames come further apart pays no spin (a
/// fixed spin cost a consumer process of 2000 frames/s 25 us of CPU per frame on an H100 host).
const EVENT_SPIN: Duration = Duration::from_micros(30);

/// The fewest CPUs on which a wait spins first: with fewer, the spinning side takes the CPU its
/// peer needs to answer (on two cores the hand-off's p50 grew from 24 to 65 us).
const SPIN_MIN_CPUS: usize = 4;

/// Whether waits for the peer spin first (never under Miri, whose clock makes it pointless).
fn spin_allowed() -> bool {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    !cfg!(miri)
        && *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get())) >= SPIN_MIN_CPUS
}

/// The geometry of an endpoint's channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointInfo {
    /// Frames the channel holds in each direction.
    pub frames: u32,
    /// Bytes per frame: the largest single [`IpcEndpoint::write`].
    pub frame_size: u32,
}

/// An open NvSciIpc endpoint (`NvSciIpcOpenEndpoint`; `NvSciIpcCloseEndpointSafe` on drop, or
/// `NvSciIpcCloseEndpoint` where the library lacks it).
///
/// Frames are the channel's unit: each [`write`](Self::write) sends one frame of at most
/// [`EndpointInfo::frame_size`] bytes and each [`read`](Self::read) receives one.
/// [`send_message`](Self::send_message) / [`recv_message`](Self::recv_message) carry larger
/// messages (attribute-list descriptors) over several frames. The endpoint's event descriptor
/// ([`event_fd`](Self::event_fd)) can be registered with poll, epoll or an async runtime; after
/// it becomes readable, [`events`](Self::events) says what happened.
///
/// # Sessions
///
/// nvsciipc.h requires `NvSciIpcGetEventSafe` before reads and writes and reports the
/// connection events (`CONN_EST`, `CONN_RESET`) once each ("edge-triggered events and once
/// they're read by user, events are cleared"). Every read and write here asks for the events
/// first, and the endpoint remembers what they said, whichever call or thread collected them:
/// once the connection was established and then reset, the session is over and every later
/// [`read`](Self::read), [`write`](Self::write) and [`wait_connected`](Self::wait_connected)
/// fails with [`IpcError::PeerGone`], even if a restarted peer has connected to the channel
/// meanwhile. Open the endpoint again to talk to the new peer.
///
/// # Threads
///
/// The endpoint is `Send` and `Sync`. nvsciipc.h documents its calls as thread-safe but asks
/// for two endpoints where reads and writes run concurrently ("Client processes who want
/// concurrent read and write operation on endpoints need to open two endpoints"): this type
/// serialises its library calls on one endpoint (never while it waits for the peer), so a
/// reader and a writer thread sharing it are correct, just not concurrent inside the library.
pub struct IpcEndpoint {
    ipc: Ipc,
    raw: sys::NvSciIpcEndpoint,
    name: String,
    event_fd: RawFd,
    info: EndpointInfo,
    /// Held around each event, read and write call of the library (never while waiting).
    calls: Mutex<()>,
    /// An event reported the connection (`CONN_EST`, or a FIFO event, which "also mean that
    /// connection is established").
    established: AtomicBool,
    /// The established connection was reset: the session is over.
    gone: AtomicBool,
    /// The last wait for the peer ended within [`EVENT_SPIN`]: the next one spins first.
    quick_peer: AtomicBool,
}

impl std::fmt::Debug for IpcEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpcEndpoint").field("name", &self.name).field("info", &self.info).finish()
    }
}

// SAFETY: NvSciIpc documents its read, write, event and info functions as thread-safe and the
// handle is a plain integer without thread affinity.
unsafe impl Send for IpcEndpoint {}
// SAFETY: as above; `&IpcEndpoint` only reaches those thread-safe calls, serialised by `calls`
// where nvsciipc.h asks for one endpoint per concurrent reader and writer.
unsafe impl Sync for IpcEndpoint {}

impl Drop for IpcEndpoint {
    fn drop(&mut self) {
        let fns = &self.ipc.0.fns;
        // NvSciIpcCloseEndpointSafe where the library has it: the deprecated NvSciIpcCloseEndpoint
        // does nothing in DRIVE OS safety builds, and nvsciipc.h names the Safe call as the one
        // that closes endpoints before NvSciIpcDeinit.
        // SAFETY: `raw` is our open endpoint, closed exactly once; `clear = false` asks for
        // no extra clean-up of the channel.
        match unsafe { nvipc::close_endpoint_safe(fns, self.raw, false) } {
            Ok(()) => {}
            Err(e) if is_missing(&e) => {
                // SAFETY: as above, through the older entry point (libraries without the Safe one).
                let _ = unsafe { nvipc::close_endpoint(fns, self.raw) };
            }
            Err(Error::NvSci { code, .. }) => {
                log::warn!("NvSciIpcCloseEndpointSafe({}) failed: {}", self.name, code);
            }
            Err(_) => {}
        }
    }
}

/// Events reported by [`IpcEndpoint::events`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct IpcEvents(pub u32);

impl IpcEvents {
    /// A frame can be read (`NV_SCI_IPC_EVENT_READ`).
    pub fn readable(self) -> bool {
        self.0 & sys::NV_SCI_IPC_EVENT_READ != 0
    }
    /// A frame can be written (`NV_SCI_IPC_EVENT_WRITE`).
    pub fn writable(self) -> bool {
        self.0 & sys::NV_SCI_IPC_EVENT_WRITE != 0
    }
    /// The connection was established (`NV_SCI_IPC_EVENT_CONN_EST`).
    pub fn connected(self) -> bool {
        self.0 & sys::NV_SCI_IPC_EVENT_CONN_EST != 0
    }
    /// The connection was reset (`NV_SCI_IPC_EVENT_CONN_RESET`).
    pub fn reset(self) -> bool {
        self.0 & sys::NV_SCI_IPC_EVENT_CONN_RESET != 0
    }
}

fn deadline(timeout: Option<Duration>) -> Option<Instant> {
    timeout.map(|t| Instant::now() + t)
}

pub(crate) fn timeout_micros(timeout: Option<Duration>) -> i64 {
    timeout.map_or(-1, |t| i64::try_from(t.as_micros()).unwrap_or(i64::MAX))
}

/// The longest message sent and received without allocating (the ring's per-frame messages).
pub(crate) const SMALL_MESSAGE: usize = 128;

impl IpcEndpoint {
    /// Opens the endpoint `name` (as configured in `/etc/nvsciipc.cfg`, or the mock's
    /// configuration file), resets it so that the connection is established, and reads its
    /// geometry. A name that is not configured, already open, or too long is an
    /// [`IpcError::Endpoint`] naming it.
    pub fn open(ipc: &Ipc, name: &str) -> Result<Self> {
        let fns = &ipc.0.fns;
        let err = |reason: String, code: Option<NvSciError>| {
            Error::Ipc(IpcError::Endpoint { endpoint: name.to_owned(), reason, code })
        };
        let cname = CString::new(name).map_err(|_| err("the name contains a NUL byte".into(), None))?;
        if name.is_empty() || name.len() >= sys::NVSCIIPC_MAX_ENDPOINT_NAME as usize {
            return Err(err(
                format!("names are 1 to {} bytes long", sys::NVSCIIPC_MAX_ENDPOINT_NAME - 1),
                None,
            ));
        }
        // SAFETY: the library is initialised (`ipc` holds it) and `cname` is NUL-terminated and
        // outlives the call; the endpoint is closed once, by `Drop`.
        let opened = unsafe { nvipc::open_endpoint(fns, cname.as_ptr()) };
        let raw = match opened {
            Ok(raw) => raw,
            Err(Error::NvSci { code: NvSciError(code), .. }) => {
                let reason = match code {
                    sys::NvSciError_NoSuchEntry => {
                        if ipc.0.mock {
                            "not configured (no such entry in $NVSCI_MOCK_IPC_DIR/nvsciipc.cfg)".to_owned()
                        } else {
                            "not configured (no such entry in /etc/nvsciipc.cfg)".to_owned()
                        }
                    }
                    sys::NvSciError_Busy => "already open (in this or another process)".to_owned(),
                    sys::NvSciError_NotPermitted => "this process may not open it".to_owned(),
                    _ => "NvSciIpcOpenEndpoint failed".to_owned(),
                };
                return Err(err(reason, Some(NvSciError(code))));
            }
            Err(e) => return Err(e),
        };
        // From here on the endpoint is ours and closed by `Drop` on any error below.
        let mut ep = Self {
            ipc: ipc.clone(),
            raw,
            name: name.to_owned(),
            event_fd: -1,
            info: EndpointInfo { frames: 0, frame_size: 0 },
            calls: Mutex::new(()),
            established: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            quick_peer: AtomicBool::new(false),
        };
        // SAFETY: `raw` is open.
        let fd = unsafe { nvipc::get_linux_event_fd(fns, raw) };
        ep.event_fd = fd.map_err(|e| ep.failed("NvSciIpcGetLinuxEventFd", e))?;
        // SAFETY: as above.
        let info = unsafe { nvipc::get_endpoint_info(fns, raw) };
        let info = info.map_err(|e| ep.failed("NvSciIpcGetEndpointInfo", e))?;
        ep.info = EndpointInfo { frames: info.nframes, frame_size: info.frame_size };
        // SAFETY: `raw` is open.
        match unsafe { nvipc::reset_endpoint_safe(fns, raw) } {
            // SAFETY: `raw` is open (libraries without the Safe entry point).
            Err(e) if is_missing(&e) => unsafe { nvipc::reset_endpoint(fns, raw) }?,
            r => r.map_err(|e| ep.failed("NvSciIpcResetEndpointSafe", e))?,
        }
        Ok(ep)
    }

    /// A failed call on this endpoint as [`IpcError::Endpoint`] naming `function` (an error that is
    /// not the library's status passes unchanged).
    fn failed(&self, function: &'static str, e: Error) -> Error {
        match e {
            Error::NvSci { code, .. } => Error::Ipc(IpcError::Endpoint {
                endpoint: self.name.clone(),
                reason: format!("{function} failed"),
                code: Some(code),
            }),
            other => other,
        }
    }

    fn check(&self, function: &'static str, code: sys::NvSciError) -> Result<()> {
        if code == sys::NvSciError_Success {
            Ok(())
        } else {
            Err(Error::Ipc(IpcError::Endpoint {
                endpoint: self.name.clone(),
                reason: format!("{function} failed"),
                code: Some(NvSciError(code)),
            }))
        }
    }

    /// The endpoint's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The channel's geometry.
    pub fn info(&self) -> EndpointInfo {
        self.info
    }

    /// The raw handle, for NvSci calls that take an endpoint.
    pub fn as_raw(&self) -> sys::NvSciIpcEndpoint {
        self.raw
    }

    /// The NvSciIpc this endpoint was opened with.
    pub fn ipc(&self) -> &Ipc {
        &self.ipc
    }

    /// The descriptor that becomes readable when something happened on the endpoint; valid as
    /// long as the endpoint is open. Call [`events`](Self::events) once it is readable.
    pub fn event_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the library owns the descriptor and keeps it open until the endpoint is
        // closed, which cannot happen while `self` is borrowed.
        unsafe { BorrowedFd::borrow_raw(self.event_fd) }
    }

    /// The events that occurred since the last call (`NvSciIpcGetEventSafe`). The connection
    /// events are reported once each; the endpoint also remembers them (see the type's
    /// "Sessions").
    pub fn events(&self) -> Result<IpcEvents> {
        let _calls = self.lock_calls();
        self.events_locked()
    }

    fn lock_calls(&self) -> std::sync::MutexGuard<'_, ()> {
        self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn events_locked(&self) -> Result<IpcEvents> {
        let fns = &self.ipc.0.fns;
        // SAFETY: the endpoint is open.
        let ev = match unsafe { nvipc::get_event_safe(fns, self.raw) } {
            // SAFETY: as above (libraries without the Safe entry point).
            Err(e) if is_missing(&e) => unsafe { nvipc::get_event(fns, self.raw) },
            r => r,
        };
        let ev = IpcEvents(ev.map_err(|e| self.failed("NvSciIpcGetEvent", e))?);
        // A reset of an established connection ends the session. A reset reported before the
        // first connection, or with it in one answer, is part of establishing it (both ends
        // reset their endpoint to start the channel), not the loss of a peer.
        if ev.reset() && self.established.load(Ordering::Acquire) {
            self.gone.store(true, Ordering::Release);
        }
        if ev.connected() || ev.writable() || ev.readable() {
            self.established.store(true, Ordering::Release);
        }
        Ok(ev)
    }

    /// The connection was established and then reset (or a read or write was told so).
    fn session_over(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// `ConnectionReset` from a read or write: the peer is gone if the connection was ever
    /// established (remembered: the session is over); before that, the endpoint is not
    /// connected yet.
    fn reset_answer(&self, function: &'static str, during: &'static str, code: sys::NvSciError) -> Error {
        if self.established.load(Ordering::Acquire) {
            self.gone.store(true, Ordering::Release);
            self.peer_gone(during)
        } else {
            self.not_connected(function, code)
        }
    }

    /// Waits until the event descriptor is readable or `until` passes (spurious wake-ups are
    /// fine: callers re-check). Returns false once the deadline has passed. First looks at the
    /// descriptor without sleeping for [`EVENT_SPIN`] (where [`spin_allowed`], and when the last
    /// wait ended within that time), yielding the CPU between looks; then sleeps in `poll`, at most 100 ms per call, so a loop around it
    /// re-checks its deadline at least that often; with no deadline (`timeout: None` from the
    /// caller) the loop waits for the peer without a limit.
    fn wait_event(&self, until: Option<Instant>) -> bool {
        let start = Instant::now();
        if until.is_some_and(|d| d <= start) {
            return false;
        }
        let mut p = libc::pollfd { fd: self.event_fd, events: libc::POLLIN, revents: 0 };
        if spin_allowed() && self.quick_peer.load(Ordering::Relaxed) {
            let spin_end = until.map_or(start + EVENT_SPIN, |d| d.min(start + EVENT_SPIN));
            loop {
                // SAFETY: one valid pollfd for an open descriptor; a timeout of 0 never sleeps.
                if unsafe { libc::poll(&mut p, 1, 0) } > 0 {
                    return true;
                }
                if Instant::now() >= spin_end {
                    break;
                }
                std::thread::yield_now();
            }
        }
        let ms = match until {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return false;
                }
                left.as_millis().clamp(1, 100) as i32
            }
            None => 100,
        };
        // SAFETY: one valid pollfd for an open descriptor.
        let ready = unsafe { libc::poll(&mut p, 1, ms) } > 0;
        // Spin next time only for a peer that answered within the spin's time: a stream whose
        // frames come every few hundred microseconds or more waits without burning the CPU.
        self.quick_peer.store(ready && start.elapsed() <= EVENT_SPIN, Ordering::Relaxed);
        true
    }

    /// Waits until the connection with the peer endpoint is established, up to `timeout`
    /// (`None`: without a limit). [`IpcError::PeerGone`] once the session is over (see the
    /// type's "Sessions").
    pub fn wait_connected(&self, timeout: Option<Duration>) -> Result<()> {
        let until = deadline(timeout);
        loop {
            self.events()?;
            if self.session_over() {
                return Err(self.peer_gone("connecting"));
            }
            if self.established.load(Ordering::Acquire) {
                return Ok(());
            }
            if !self.wait_event(until) {
                return Err(self.timed_out("connecting", timeout));
            }
        }
    }

    /// Writes one frame (at most [`EndpointInfo::frame_size`] bytes), waiting up to `timeout`
    /// (`None`: without a limit) for room in the channel.
    ///
    /// The channel holds [`EndpointInfo::frames`] frames per direction: once the peer has that
    /// many unread, `NvSciIpcWriteSafe` answers "write channel is full" (`InsufficientMemory`)
    /// and this waits for the `WRITE` event, which comes when the peer reads. A write that
    /// finds no room within `timeout` is [`Error::Timeout`] ([`Wait::Endpoint`]); [`IpcError::PeerGone`] once
    /// the session is over; [`IpcError::Endpoint`] (code `InvalidState`) before the connection was
    /// ever established.
    pub fn write(&self, frame: &[u8], timeout: Option<Duration>) -> Result<()> {
        if frame.is_empty() || frame.len() > self.info.frame_size as usize {
            return Err(Error::Ipc(IpcError::Endpoint {
                endpoint: self.name.clone(),
                reason: format!("a frame is 1 to {} bytes, not {}", self.info.frame_size, frame.len()),
                code: None,
            }));
        }
        let until = deadline(timeout);
        loop {
            let calls = self.lock_calls();
            // nvsciipc.h: "Before using any Read/Write APIs, the user must check if
            // NV_SCI_IPC_EVENT_READ or NV_SCI_IPC_EVENT_WRITE event is available through
            // NvSciIpcGetEventSafe()".
            let ev = self.events_locked()?;
            if self.session_over() {
                return Err(self.peer_gone("write"));
            }
            // Without WRITE, an established channel is full: wait. Before the first connection
            // the library's own answer (InvalidState) says why the write cannot proceed.
            if !ev.writable() && self.established.load(Ordering::Acquire) {
                drop(calls);
                if !self.wait_event(until) {
                    return Err(self.timed_out("write", timeout));
                }
                continue;
            }
            let fns = &self.ipc.0.fns;
            // SAFETY: the endpoint is open; `frame` is readable for its length (checked to fit in
            // u32 above).
            let written = match unsafe {
                nvipc::write_safe(fns, self.raw, frame.as_ptr().cast(), frame.len() as u32)
            } {
                Err(e) if is_missing(&e) => {
                    // SAFETY: as above (libraries without the Safe entry point).
                    unsafe { nvipc::write(fns, self.raw, frame.as_ptr().cast(), frame.len()) }.map(drop)
                }
                r => r.map(drop),
            };
            drop(calls);
            let code = match written {
                Ok(()) => return Ok(()),
                Err(Error::NvSci { code, .. }) => code.0,
                Err(e) => return Err(e),
            };
            match code {
                sys::NvSciError_ConnectionReset => {
                    return Err(self.reset_answer("NvSciIpcWrite", "write", code))
                }
                // "write channel is full and the write operation aborted": wait for room.
                sys::NvSciError_InsufficientMemory => {}
                sys::NvSciError_InvalidState => return Err(self.not_connected("NvSciIpcWrite", code)),
                c => return self.check("NvSciIpcWrite", c),
            }
            if !self.wait_event(until) {
                return Err(self.timed_out("write", timeout));
            }
        }
    }

    /// Reads one frame into `buf`, waiting up to `timeout` (`None`: without a limit) for one to
    /// arrive, and returns how many bytes were copied: `buf.len()` or
    /// [`EndpointInfo::frame_size`], whichever is smaller. Errors as for [`write`](Self::write).
    ///
    /// NvSciIpc frames carry no length: `NvSciIpcReadSafe` copies the number of bytes asked for,
    /// and `NvSciIpcWriteSafe` fills the bytes of a frame its writer did not fill with zero
    /// (nvsciipc.h). So the returned count is not the length the peer
    /// wrote: a protocol carries its own lengths, as [`send_message`](Self::send_message) does.
    pub fn read(&self, buf: &mut [u8], timeout: Option<Duration>) -> Result<usize> {
        let size = buf.len().min(self.info.frame_size as usize);
        if size == 0 {
            return Err(Error::Ipc(IpcError::Endpoint {
                endpoint: self.name.clone(),
                reason: "read into an empty buffer".into(),
                code: None,
            }));
        }
        let until = deadline(timeout);
        loop {
            let calls = self.lock_calls();
            // Events first, as for writes.
            let ev = self.events_locked()?;
            if self.session_over() {
                return Err(self.peer_gone("read"));
            }
            if !ev.readable() && self.established.load(Ordering::Acquire) {
                drop(calls);
                if !self.wait_event(until) {
                    return Err(self.timed_out("read", timeout));
                }
                continue;
            }
            let fns = &self.ipc.0.fns;
            // SAFETY: the endpoint is open; `buf` is writable for `size` bytes (at most the
            // frame size, so it fits in u32).
            let got = match unsafe { nvipc::read_safe(fns, self.raw, buf.as_mut_ptr().cast(), size as u32) } {
                Err(e) if is_missing(&e) => {
                    // SAFETY: as above (libraries without the Safe entry point).
                    unsafe { nvipc::read(fns, self.raw, buf.as_mut_ptr().cast(), size) }
                        .map(|n| usize::try_from(n).unwrap_or(0))
                }
                r => r.map(|n| n as usize),
            };
            drop(calls);
            let code = match got {
                // The library reports the size asked for; a shorter count would not say more.
                Ok(n) => return Ok(n.min(size)),
                Err(Error::NvSci { code, .. }) => code.0,
                Err(e) => return Err(e),
            };
            match code {
                sys::NvSciError_ConnectionReset => {
                    return Err(self.reset_answer("NvSciIpcRead", "read", code))
                }
                // "read channel is empty and the read operation aborted": wait for a frame.
                sys::NvSciError_InsufficientMemory => {}
                sys::NvSciError_InvalidState => return Err(self.not_connected("NvSciIpcRead", code)),
                c => return self.check("NvSciIpcRead", c).map(|_| 0),
            }
            if !self.wait_event(until) {
                return Err(self.timed_out("read", timeout));
            }
        }
    }

    /// Sends `msg` of any length as a sequence of frames: the first starts with the message
    /// length (4 bytes, little endian).
    pub fn send_message(&self, msg: &[u8], timeout: Option<Duration>) -> Result<()> {
        let fs = self.info.frame_size as usize;
        if fs <= 4 {
            return Err(Error::Ipc(IpcError::Endpoint {
                endpoint: self.name.clone(),
                reason: format!("frames of {fs} bytes are too small"),
                code: None,
            }));
        }
        let len = u32::try_from(msg.len()).map_err(|_| {
            Error::Ipc(IpcError::Endpoint {
                endpoint: self.name.clone(),
                reason: format!("a message of {} bytes is too long", msg.len()),
                code: None,
            })
        })?;
        let first = msg.len().min(fs - 4);
        // The first frame: on the stack for a small message (the ring's per-frame messages), so
        // sending one allocates nothing.
        let mut small = [0u8; 4 + SMALL_MESSAGE];
        let mut large = Vec::new();
        let frame: &mut [u8] = if first <= SMALL_MESSAGE {
            &mut small[..4 + first]
        } else {
            large.resize(4 + first, 0);
            &mut large
        };
        frame[..4].copy_from_slice(&len.to_le_bytes());
        frame[4..].copy_from_slice(&msg[..first]);
        self.write(frame, timeout)?;
        for chunk in msg[first..].chunks(fs) {
            self.write(chunk, timeout)?;
        }
        Ok(())
    }

    /// Receives a message sent with [`send_message`](Self::send_message).
    pub fn recv_message(&self, timeout: Option<Duration>) -> Result<Vec<u8>> {
        let fs = self.info.frame_size as usize;
        let mut frame = vec![0u8; fs];
        let n = self.read(&mut frame, timeout)?;
        let bad = |reason: String| {
            Error::Ipc(IpcError::Endpoint { endpoint: self.name.clone(), reason, code: None })
        };
        if n < 4 {
            return Err(bad(format!("a message frame of {n} bytes has no length")));
        }
        let len = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        if len > 64 << 20 {
            return Err(bad(format!("a message of {len} bytes is larger than 64 MiB")));
        }
        let mut msg = Vec::with_capacity(len);
        msg.extend_from_slice(&frame[4..n.min(4 + len)]);
        while msg.len() < len {
            let n = self.read(&mut frame, timeout)?;
            let take = n.min(len - msg.len());
            msg.extend_from_slice(&frame[..take]);
        }
        if msg.len() != len {
            return Err(bad(format!("message length {} does not match its header {len}", msg.len())));
        }
        Ok(msg)
    }

    /// Receives a message sent with [`send_message`](Self::send_message) of at most
    /// `SMALL_MESSAGE` bytes into `buf`, allocating nothing; returns its length. A longer message
    /// (or one longer than `buf`) is an [`IpcError::Endpoint`] and leaves the channel out of step.
    pub(crate) fn recv_small_message(&self, buf: &mut [u8], timeout: Option<Duration>) -> Result<usize> {
        let fs = self.info.frame_size as usize;
        let cap = buf.len().min(SMALL_MESSAGE);
        let mut first = [0u8; 4 + SMALL_MESSAGE];
        let n = self.read(&mut first[..(4 + cap).min(fs.max(1))], timeout)?;
        let bad = |reason: String| {
            Error::Ipc(IpcError::Endpoint { endpoint: self.name.clone(), reason, code: None })
        };
        if n < 4 {
            return Err(bad(format!("a message frame of {n} bytes has no length")));
        }
        let len = u32::from_le_bytes([first[0], first[1], first[2], first[3]]) as usize;
        if len > cap {
            return Err(bad(format!("a message of {len} bytes where at most {cap} were expected")));
        }
        let mut got = (n - 4).min(len);
        buf[..got].copy_from_slice(&first[4..4 + got]);
        while got < len {
            let take = (len - got).min(fs);
            got += self.read(&mut buf[got..got + take], timeout)?.min(take);
        }
        Ok(len)
    }

    /// `InvalidState` from a read or write: the endpoint is not connected (yet) or is being
    /// reset. An error, not something to retry: retrying would loop for ever without a timeout.
    fn not_connected(&self, function: &'static str, code: sys::NvSciError) -> Error {
        Error::Ipc(IpcError::Endpoint {
            endpoint: self.name.clone(),
            reason: format!(
                "{function}: the endpoint is not connected or is being reset (call wait_connected first)"
            ),
            code: Some(crate::error::NvSciError(code)),
        })
    }

    pub(crate) fn peer_gone(&self, during: &'static str) -> Error {
        Error::Ipc(IpcError::PeerGone { endpoint: self.name.clone(), during })
    }

    pub(crate) fn timed_out(&self, during: &'static str, timeout: Option<Duration>) -> Error {
        Error::Timeout {
            waited_for: Wait::Endpoint { endpoint: self.name.clone(), during },
            // Only a bounded wait runs out.
            timeout: timeout.unwrap_or(Duration::MAX),
        }
    }
}

/// Errors of exports and imports through an endpoint.
impl IpcEndpoint {
    /// Turns an import failure into the error that names its cause.
    pub(crate) fn import_error(
        &self,
        function: &'static str,
        what: &'static str,
        requested: &'static str,
        timeout: Option<Duration>,
        code: sys::NvSciError,
    ) -> Error {
        match code {
            sys::NvSciError_AccessDenied => Error::ImportPermission { what, requested },
            sys::NvSciError_ConnectionReset => self.peer_gone(function),
            sys::NvSciError_Timeout => self.timed_out(function, timeout),
            sys::NvSciError_AttrListValidationFailed => Error::InvalidDescriptor {
                what,
                reason: "the imported reconciled list does not satisfy this process's unreconciled lists".into(),
            },
            // NvSciSync reports a permission mismatch on import as BadParameter too
            // (NvSciSyncIpcImportAttrListAndObj / NvSciSyncObjIpcImport, nvscisync.h), so its
            // explanation names both causes.
            sys::NvSciError_BadParameter if function.starts_with("NvSciSync") => Error::InvalidDescriptor {
                what,
                reason: format!(
                    "{function} refused it: either the descriptor was exported through another endpoint, \
                     truncated or corrupted, or does not match the list it was imported with; or the permission \
                     asked for ({requested}) is more than the export grants (NvSciSync reports both as \
                     BadParameter)"
                ),
            },
            sys::NvSciError_BadParameter => Error::InvalidDescriptor {
                what,
                reason: format!(
                    "{function} refused it (exported through another endpoint, truncated or corrupted, or not \
                     matching the reconciled list it was imported with)"
                ),
            },
            c => Error::NvSci { function, code: crate::NvSciError(c) },
        }
    }

    /// [`import_error`](Self::import_error) of a failed result-layer call (an error that is not
    /// the library's status passes unchanged).
    pub(crate) fn import_failure(
        &self,
        what: &'static str,
        requested: &'static str,
        timeout: Option<Duration>,
        e: Error,
    ) -> Error {
        match e {
            Error::NvSci { function, code } => self.import_error(function, what, requested, timeout, code.0),
            other => other,
        }
    }

    /// [`export_error`](Self::export_error) of a failed result-layer call (an error that is not
    /// the library's status passes unchanged).
    pub(crate) fn export_failure(&self, e: Error) -> Error {
        match e {
            Error::NvSci { function, code } => self.export_error(function, code.0),
            other => other,
        }
    }

    /// Turns an export failure into the error that names its cause.
    pub(crate) fn export_error(&self, function: &'static str, code: sys::NvSciError) -> Error {
        match code {
            sys::NvSciError_ConnectionReset => self.peer_gone(function),
            sys::NvSciError_InvalidState => Error::Ipc(IpcError::Endpoint {
                endpoint: self.name().to_owned(),
                reason: format!("{function}: the endpoint is not connected yet (call wait_connected first)"),
                code: Some(crate::NvSciError(code)),
            }),
            c => Error::NvSci { function, code: crate::NvSciError(c) },
        }
    }
}
