//! The NvSciIpc transport of the ring: a consumer in another process, attached to a ring's
//! producer through one NvSciIpc endpoint pair (NvSciStream's IPC blocks are the model: where a
//! consumer lives does not change the producer's code).
//!
//! The producer's process owns the frames and the present object; a consumer's process
//! imports them and owns its release object. Set-up follows NvSci's rule that whoever signals
//! a sync object allocates it. An attach, while the stream is built or while it runs:
//!
//! 1. the producer offers the seat (`W`): the consumer's index, the ring's `gpu_cache`
//!    setting, the stream's token and the offer's generation, and the waiter lists for its
//!    release object (the producer's engine's, and the CPU's, which waits before anything is
//!    freed);
//! 2. the consumer answers (`C`) with the token and generation it was offered, its engine, queue
//!    mode, limit and frame format, its buffer list (read-only, its engine) and its waiter lists
//!    for the present object (its engine's; a CUDA consumer also the CPU's);
//! 3. the producer checks the answer against the seat and the stream and refuses (`X`, naming
//!    what did not fit) or sends (`S`) the frame count, the reconciled buffer list, the present
//!    object (wait only) and every frame (read-only). While the stream is built, the consumers'
//!    lists join one reconciliation with every party's; a seat reserved for a consumer that
//!    attaches later was reconciled with lists made on its behalf for the seat's engine, and the
//!    consumer's import of the reconciled list checks that it fits its own;
//! 4. the consumer imports them, allocates its release object (its engine signals, the
//!    producer's engine and CPU wait) and sends it (`R`, wait only). It gets frames from the next
//!    present on.
//!
//! Per frame the producer's present sends each FIFO consumer in another process the slot, the
//! sequence, the present fence and the metadata (`F`); the consumer's acquire receives it and
//! its engine waits on the fence; its release sends back the slot, the sequence and its release
//! fence (`L`), which the producer's acquire receives before it reuses the slot. A mailbox
//! consumer in another process keeps its mailbox in the producer's process: its acquire asks
//! for a frame (`Q`) and the producer sends the newest at once, or the next one presented; a
//! frame it never asked for is replaced without a message and never holds the producer. A
//! consumer that leaves says so (`D`) after its fences expired; one that dies is dropped when
//! its endpoint reports the loss. When the producer is dropped it sends the end of the stream
//! (`E`) and takes back the frames still out.
//!
//! Endpoints are declared after what was exported through them, so they close last: frames,
//! sync objects and fences are freed first, as NVIDIA's rawstream sample does (inter-chip
//! endpoints require it).

use super::nvsci::{party_list, Member, NvSciRing, RemoteLists};
use crate::buf::{BufAttrList, BufModule, BufObj, ImageLayout, Perm};
use crate::error::{invalid, AttachField, Error, IpcError, Result, RingError, Wait};
use crate::ipc::{AttrListDescriptor, BufObjDescriptor, FenceDescriptor, Ipc, IpcEndpoint, SMALL_MESSAGE};
use crate::pipeline::config::{ConsumerDesc, RingConfig, MAX_FRAMES};
use crate::pipeline::engine::Engine;
use crate::pipeline::format::{FrameFormat, FrameLayout};
use crate::pipeline::state::{FrameMeta, QueueMode, USER_HEADER_SIZE};
use crate::sync::{SyncAttrList, SyncModule, SyncObj, SyncPerm};
use crate::NvSci;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAITER_LIST: u8 = b'W';
const CONSUMER_LISTS: u8 = b'C';
const SETUP: u8 = b'S';
const REFUSED: u8 = b'X';
const RELEASE_OBJ: u8 = b'R';
const FRAME: u8 = b'F';
const RELEASED: u8 = b'L';
const REQUEST: u8 = b'Q';
const DETACH: u8 = b'D';
const END: u8 = b'E';

fn protocol(ep: &IpcEndpoint, what: String) -> Error {
    Error::Ipc(IpcError::Endpoint {
        endpoint: ep.name().to_owned(),
        reason: format!("unexpected message from the peer: {what}"),
        code: None,
    })
}

/// Checks that the channel of `ep` holds every message a ring of `frames` slots can have in
/// flight in one direction: a fence message per slot and the end. NvSciIpc holds `nframes`
/// frames per direction and a write to a full channel fails ("write channel is full",
/// nvsciipc.h, `NvSciIpcWriteSafe`); with more in flight, producer and consumer could both wait
/// to write while neither reads.
fn check_channel(ep: &IpcEndpoint, frames: usize) -> Result<()> {
    let info = ep.info();
    let fs = info.frame_size as usize;
    // `send_message`: a 4-byte length, then the message, over frames of `fs` bytes.
    let len = 4 + FRAME_MSG;
    // One frame per ring message: a message split over frames could be cut by a timeout
    // between its frames, leaving the peer reading the next message's start as its rest.
    if fs < len {
        return Err(invalid(
            "endpoint",
            format!(
                "endpoint {} carries frames of {fs} bytes; a ring's fence messages need {len}",
                ep.name()
            ),
        ));
    }
    let per_message = 1;
    let needed = frames.saturating_mul(per_message).saturating_add(1);
    if needed > info.frames as usize {
        return Err(invalid(
            "frames",
            format!(
                "{frames} frames need {needed} NvSciIpc frames in flight ({per_message} per fence \
                 message of {len} bytes in frames of {fs} bytes, and the end), but endpoint {} holds \
                 nframes = {}",
                ep.name(),
                info.frames
            ),
        ));
    }
    Ok(())
}

fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads length-prefixed fields from a message.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        (self.0.len() >= n).then(|| {
            let (a, b) = self.0.split_at(n);
            self.0 = b;
            a
        })
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes)
    }
    fn field(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

fn expect(ep: &IpcEndpoint, msg: &[u8], tag: u8) -> Result<()> {
    match msg.first() {
        Some(t) if *t == tag => Ok(()),
        Some(t) => Err(protocol(ep, format!("tag {:?} where {:?} was expected", *t as char, tag as char))),
        None => Err(protocol(ep, "an empty message".into())),
    }
}

/// The length of a fence message: the tag, the slot, the sequence and the fence.
const FENCE_MSG: usize = 1 + 4 + 8 + FenceDescriptor::SIZE;
/// The length of a frame message: a fence message, then the capture time and the user header.
const FRAME_MSG: usize = FENCE_MSG + 8 + USER_HEADER_SIZE;
const _: () = assert!(FRAME_MSG <= SMALL_MESSAGE, "frame messages travel without allocating");

/// A fence message, on the stack: the per-frame path allocates nothing.
fn fence_msg(tag: u8, slot: usize, seq: u64, desc: &FenceDescriptor) -> [u8; FENCE_MSG] {
    let mut m = [0u8; FENCE_MSG];
    m[0] = tag;
    m[1..5].copy_from_slice(&(slot as u32).to_le_bytes());
    m[5..13].copy_from_slice(&seq.to_le_bytes());
    m[13..].copy_from_slice(desc.as_bytes());
    m
}

/// A frame message, on the stack: the fence message of the present, then the metadata.
fn frame_msg(slot: usize, meta: &FrameMeta, desc: &FenceDescriptor) -> [u8; FRAME_MSG] {
    let mut m = [0u8; FRAME_MSG];
    m[..FENCE_MSG].copy_from_slice(&fence_msg(FRAME, slot, meta.sequence, desc));
    m[FENCE_MSG..FENCE_MSG + 8].copy_from_slice(&meta.capture_ns.to_le_bytes());
    m[FENCE_MSG + 8..].copy_from_slice(&meta.user);
    m
}

fn parse_frame_msg(ep: &IpcEndpoint, msg: &[u8]) -> Result<(usize, FrameMeta, FenceDescriptor)> {
    if msg.len() != FRAME_MSG {
        expect(ep, msg, FRAME)?;
        return Err(protocol(ep, format!("a frame message of {} bytes ({FRAME_MSG} expected)", msg.len())));
    }
    let (slot, sequence, desc) = parse_fence_msg(ep, &msg[..FENCE_MSG], FRAME)?;
    let mut f = Fields(&msg[FENCE_MSG..]);
    let truncated = || protocol(ep, "a truncated frame message".into());
    let capture_ns = f.u64().ok_or_else(truncated)?;
    let user: [u8; USER_HEADER_SIZE] = f.0.try_into().map_err(|_| truncated())?;
    Ok((slot, FrameMeta { sequence, capture_ns, user }, desc))
}

fn parse_fence_msg(ep: &IpcEndpoint, msg: &[u8], tag: u8) -> Result<(usize, u64, FenceDescriptor)> {
    expect(ep, msg, tag)?;
    let mut f = Fields(&msg[1..]);
    let slot = f.u32().ok_or_else(|| protocol(ep, "a truncated fence message".into()))?;
    let seq = f.u64().ok_or_else(|| protocol(ep, "a truncated fence message".into()))?;
    let desc = FenceDescriptor::from_bytes(f.0)?;
    Ok((slot as usize, seq, desc))
}

/// The waiter lists of `engine` (and of the CPU, where the engine is not the CPU).
fn waiter_lists(sync: &SyncModule, engine: &Engine) -> Result<Vec<SyncAttrList>> {
    let mut lists = vec![party_list(sync, engine, false, true)?];
    if !engine.is_cpu() {
        lists.push(party_list(sync, &Engine::Cpu, false, true)?);
    }
    Ok(lists)
}

/// A frame format on the wire: its kind, size or dimensions, and layout (18 bytes).
fn format_bytes(f: &FrameFormat) -> [u8; 18] {
    let mut b = [0u8; 18];
    let (kind, size, w, h, layout) = match *f {
        FrameFormat::Raw { size } => (1u8, size, 0, 0, 0u8),
        FrameFormat::Nv12 { width, height, layout } => {
            (2, 0, width, height, if layout == ImageLayout::BlockLinear { 2 } else { 1 })
        }
        FrameFormat::Rgba { width, height } => (3, 0, width, height, 0),
    };
    b[0] = kind;
    b[1..9].copy_from_slice(&size.to_le_bytes());
    b[9..13].copy_from_slice(&w.to_le_bytes());
    b[13..17].copy_from_slice(&h.to_le_bytes());
    b[17] = layout;
    b
}

/// An engine on the wire: 0 for the CPU, 1 and the GPU id for a CUDA device (17 bytes).
fn engine_bytes(e: &Engine) -> [u8; 17] {
    let mut b = [0u8; 17];
    if let Some(id) = e.gpu_id() {
        b[0] = 1;
        b[1..].copy_from_slice(&id.0);
    }
    b
}

/// What the producer checks an attach against: the stream's token, the offer's generation,
/// the seat's engine (`None`: any) and the stream's format.
pub(crate) struct Offer<'a> {
    pub(crate) token: u64,
    pub(crate) generation: u32,
    pub(crate) engine: Option<&'a Engine>,
    pub(crate) format: &'a FrameFormat,
}

/// An attach (`C`) as the producer reads it.
struct AttachAnswer<'a> {
    mode: QueueMode,
    limit: Option<usize>,
    /// The consumer's buffer list and waiter lists.
    lists: Fields<'a>,
}

/// Reads and checks an attach against `offer`: what does not fit is named.
fn parse_attach<'a>(msg: &'a [u8], offer: &Offer<'_>) -> std::result::Result<AttachAnswer<'a>, AttachField> {
    if msg.first() != Some(&CONSUMER_LISTS) {
        return Err(AttachField::Message);
    }
    let mut f = Fields(&msg[1..]);
    let token = f.u64().ok_or(AttachField::Message)?;
    let generation = f.u32().ok_or(AttachField::Message)?;
    let engine = f.take(17).ok_or(AttachField::Message)?;
    let mode = f.take(1).ok_or(AttachField::Message)?[0];
    let limit = f.u32().ok_or(AttachField::Message)?;
    let format = f.take(18).ok_or(AttachField::Message)?;
    if token != offer.token {
        return Err(AttachField::Stream);
    }
    if generation != offer.generation {
        return Err(AttachField::Generation);
    }
    if offer.engine.is_some_and(|e| engine != engine_bytes(e)) {
        return Err(AttachField::Engine);
    }
    if format != format_bytes(offer.format) {
        return Err(AttachField::Format);
    }
    let mode = match mode {
        0 => QueueMode::Fifo,
        1 => QueueMode::Mailbox,
        _ => return Err(AttachField::Mode),
    };
    let limit = match limit {
        0 => return Err(AttachField::Limit),
        u32::MAX => None,
        n => Some(n as usize),
    };
    Ok(AttachAnswer { mode, limit, lists: f })
}

/// Tells the consumer what did not fit and returns the error for this side.
fn refuse(ep: &IpcEndpoint, field: AttachField, timeout: Option<Duration>) -> Error {
    if let Err(e) = ep.send_message(&[REFUSED, field.code()], timeout) {
        log::debug!("endpoint `{}`: the refusal was not sent: {e}", ep.name());
    }
    Error::Ring(RingError::AttachRefused { endpoint: ep.name().to_owned(), field })
}

/// The offer of a seat (`W`): index, GPU cache setting, token, generation, the producer's
/// waiter lists.
fn offer_msg(index: usize, config: RingConfig, offer: &Offer<'_>, waiters: &AttrListDescriptor) -> Vec<u8> {
    let mut m = vec![WAITER_LIST];
    m.extend_from_slice(&(index as u32).to_le_bytes());
    m.push(u8::from(config.gpu_cache));
    m.extend_from_slice(&offer.token.to_le_bytes());
    m.extend_from_slice(&offer.generation.to_le_bytes());
    m.extend_from_slice(waiters.as_bytes());
    m
}

/// What a seat for a consumer in another process went through, for
/// [`Producer::remote_seats`](crate::pipeline::Producer::remote_seats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteSeat {
    /// The seat's consumer index.
    pub consumer: usize,
    /// The endpoint's name.
    pub endpoint: String,
    /// Whether a consumer is attached now.
    pub attached: bool,
    /// Consumers attached to it (while the stream was built and since).
    pub attaches: u64,
    /// Attaches refused, and what did not fit in the last one.
    pub refused: u64,
    /// What did not fit in the last refused attach.
    pub last_refusal: Option<AttachField>,
    /// Consumers that left it (a detach message).
    pub left: u64,
    /// Consumers it lost (their endpoint reported the loss without a detach: a process that died).
    pub lost: u64,
}

/// A consumer seat in another process, as the producer's process sees it: the endpoint of its
/// current session (reopened for the next consumer when one leaves or dies) and its record.
pub(crate) struct RemoteConsumer {
    /// Its index in the ring.
    pub(crate) consumer: usize,
    /// The seat's engine: an attaching consumer's must be the same (`None`: any).
    pub(crate) engine: Option<Engine>,
    ipc: Ipc,
    name: String,
    /// The endpoint of the current session, and the session's number.
    ep: Mutex<Option<(u64, Arc<IpcEndpoint>)>>,
    /// The number of the latest session.
    sessions: AtomicU64,
    /// The session of the consumer attached to the seat (0: none). Written under the ring's
    /// state lock, with the attach or drop it goes with, so that what the state says a consumer
    /// holds and the session it holds it in agree; a message or a send of another session is
    /// no business of the consumer attached now.
    pub(crate) attached_session: AtomicU64,
    /// The generation of the seat's latest offer.
    pub(crate) generation: AtomicU32,
    /// The attached consumer said it leaves: its endpoint's loss that follows is no death.
    pub(crate) leaving: AtomicBool,
    pub(crate) record: Mutex<RemoteSeat>,
    /// Held by whoever reads the endpoint and applies what it read (the producer, or the seat
    /// service): one reader at a time, so that no reader waits for a message another took.
    pub(crate) reader: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a consumer in another process sent back.
pub(crate) enum Back {
    /// A release: the slot, its sequence and the release fence.
    Released(usize, u64, FenceDescriptor),
    /// A mailbox consumer asks for a frame.
    Request,
    /// The consumer leaves (its fences expired).
    Detach,
}

impl RemoteConsumer {
    pub(crate) fn new(consumer: usize, engine: Option<Engine>, ep: IpcEndpoint) -> Self {
        let record = RemoteSeat { consumer, endpoint: ep.name().to_owned(), ..RemoteSeat::default() };
        Self {
            consumer,
            engine,
            ipc: ep.ipc().clone(),
            name: ep.name().to_owned(),
            ep: Mutex::new(Some((1, Arc::new(ep)))),
            sessions: AtomicU64::new(1),
            attached_session: AtomicU64::new(0),
            generation: AtomicU32::new(0),
            leaving: AtomicBool::new(false),
            record: Mutex::new(record),
            reader: Mutex::new(()),
        }
    }

    /// The endpoint of the current session; [`IpcError::PeerGone`] while there is none.
    pub(crate) fn endpoint(&self) -> Result<Arc<IpcEndpoint>> {
        self.session().map(|(_, ep)| ep)
    }

    /// The current session and its endpoint; [`IpcError::PeerGone`] while there is none.
    pub(crate) fn session(&self) -> Result<(u64, Arc<IpcEndpoint>)> {
        lock(&self.ep).clone().ok_or_else(|| self.gone("a session"))
    }

    fn gone(&self, during: &'static str) -> Error {
        Error::Ipc(IpcError::PeerGone { endpoint: self.name.clone(), during })
    }

    /// Closes the current session's endpoint (once the last user lets go of it).
    pub(crate) fn close(&self) {
        lock(&self.ep).take();
    }

    /// Opens the endpoint again for the next consumer (nvsciipc.h allows one reset in Init mode
    /// per endpoint handle: a new session takes a new handle). `Busy` while a user of the old
    /// session still holds it.
    pub(crate) fn reopen(&self) -> Result<(u64, Arc<IpcEndpoint>)> {
        let mut ep = lock(&self.ep);
        if let Some(e) = ep.as_ref() {
            return Ok(e.clone());
        }
        let e = Arc::new(IpcEndpoint::open(&self.ipc, &self.name)?);
        let session = self.sessions.fetch_add(1, Ordering::AcqRel) + 1;
        *ep = Some((session, e.clone()));
        self.leaving.store(false, Ordering::Release);
        Ok((session, e))
    }

    /// The endpoint of session `session` ([`IpcError::PeerGone`] if that session is over): the
    /// one a frame of that session's consumer is exported through and sent on.
    pub(crate) fn session_endpoint(&self, session: u64) -> Result<Arc<IpcEndpoint>> {
        let (now, ep) = self.session()?;
        if now != session {
            return Err(self.gone("an earlier session"));
        }
        Ok(ep)
    }

    /// Sends the frame in `slot` with its metadata and its present fence, exported through
    /// `ep` (the endpoint of the consumer's session, [`session_endpoint`](Self::session_endpoint)).
    pub(crate) fn send_frame(
        ep: &IpcEndpoint,
        slot: usize,
        meta: &FrameMeta,
        present: &FenceDescriptor,
        timeout: Duration,
    ) -> Result<()> {
        ep.send_message(&frame_msg(slot, meta, present), Some(timeout))
    }

    /// Receives the next message of the current session (whose number comes with it): a
    /// release, a request or a detach.
    pub(crate) fn recv(&self, timeout: Duration) -> (u64, Result<Back>) {
        let (session, ep) = match self.session() {
            Ok(s) => s,
            Err(e) => return (0, Err(e)),
        };
        let mut msg = [0u8; FENCE_MSG];
        let got = ep.recv_small_message(&mut msg, Some(timeout)).and_then(|n| match &msg[..n] {
            [REQUEST] => Ok(Back::Request),
            [DETACH] => Ok(Back::Detach),
            m => parse_fence_msg(&ep, m, RELEASED).map(|(s, q, d)| Back::Released(s, q, d)),
        });
        (session, got)
    }

    /// Answers the departure of the consumer of endpoint session `session`: no frame follows
    /// (the end of the stream, for it), so its process may close its endpoint. Until this
    /// answer it keeps the endpoint open, since a reset endpoint drops the messages not read yet
    /// (its departure among them, which would make it look lost).
    pub(crate) fn answer_detach(&self, session: u64, timeout: Duration) -> Result<()> {
        self.session_endpoint(session)?.send_message(&[END], Some(timeout))
    }

    /// Tells the consumer of the current session (whose number comes back) that no more frames
    /// will come.
    pub(crate) fn send_end(&self, timeout: Duration) -> (u64, Result<()>) {
        match self.session() {
            Ok((session, ep)) => (session, ep.send_message(&[END], Some(timeout))),
            Err(e) => (0, Err(e)),
        }
    }

    /// The error for a message that does not fit the ring's state.
    pub(crate) fn protocol_error(&self, what: String) -> Error {
        Error::Ipc(IpcError::Endpoint {
            endpoint: self.name.clone(),
            reason: format!("unexpected message from the peer: {what}"),
            code: None,
        })
    }

    /// The endpoint's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

/// What the producer's process keeps to attach consumers in other processes while the stream
/// runs: the ring's objects and reconciled buffer list, the stream's token, format and
/// parameters.
pub(crate) struct AttachHub {
    pub(crate) ring: Arc<NvSciRing>,
    reconciled: Mutex<BufAttrList>,
    producer: Engine,
    format: FrameFormat,
    config: RingConfig,
    pub(crate) token: u64,
}

/// A stream token: random per stream, so that an attach meant for another stream (or an
/// earlier run) is told apart.
fn stream_token() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom(2) writes at most `b.len()` bytes into the valid buffer it is given.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    let t = if n == 8 {
        u64::from_le_bytes(b)
    } else {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        (now as u64) ^ (u64::from(std::process::id()) << 32)
    };
    t | 1
}

impl AttachHub {
    /// Runs an attach with the consumer at the other end of `ep` (steps 1 to 4 above) for seat
    /// `seat` with the offer of generation `generation`; returns its queue mode and limit. The
    /// seat's release object is recorded in the ring.
    pub(crate) fn attach(
        &self,
        ep: &IpcEndpoint,
        seat: &RemoteConsumer,
        generation: u32,
    ) -> Result<(QueueMode, Option<usize>)> {
        let t = Some(self.config.timeout);
        let sync = self.ring.sync_module();
        let waiters = waiter_lists(sync, &self.producer)?;
        let waiter_refs: Vec<&SyncAttrList> = waiters.iter().collect();
        let offer =
            Offer { token: self.token, generation, engine: seat.engine.as_ref(), format: &self.format };
        let exported = SyncAttrList::export_unreconciled(&waiter_refs, ep)?;
        ep.send_message(&offer_msg(seat.consumer, self.config, &offer, &exported), t)?;
        let msg = ep.recv_message(t)?;
        let answer = parse_attach(&msg, &offer).map_err(|field| refuse(ep, field, t))?;
        let mut m = vec![SETUP];
        m.extend_from_slice(&(self.config.frames as u32).to_le_bytes());
        put(&mut m, lock(&self.reconciled).export_reconciled(ep)?.as_bytes());
        put(&mut m, self.ring.present_object().export_with_attr_list(SyncPerm::WaitOnly, ep)?.as_bytes());
        for s in 0..self.config.frames {
            let b = self.ring.buffer(s).expect("the producer's ring holds every buffer");
            m.extend_from_slice(b.export(Perm::ReadOnly, ep)?.as_bytes());
        }
        ep.send_message(&m, t)?;
        let msg = ep.recv_message(t)?;
        expect(ep, &msg, RELEASE_OBJ)?;
        let obj = sync.import_attr_list_and_obj(
            ep,
            &AttrListDescriptor::from_bytes(&msg[1..])?,
            &waiter_refs,
            SyncPerm::WaitOnly,
            t,
        )?;
        self.ring.attach_release(seat.consumer, Some(obj))?;
        Ok((answer.mode, answer.limit))
    }
}

/// A consumer seat of a stream being built with consumers in other processes.
pub(crate) enum SeatLink {
    /// In this process, on this engine.
    Local(Engine),
    /// In the process at the other end of the endpoint, attached while the stream is built; its
    /// engine must be this one.
    Remote(IpcEndpoint, Engine),
    /// Reserved for a consumer on this engine in the process at the other end of the endpoint,
    /// which attaches while the stream runs.
    Reserved(IpcEndpoint, Engine),
}

/// A producer's ring with consumers in other processes: the backend, the engine of each
/// consumer (the CPU stands in for a remote one, whose engine is its own process's business),
/// the remote seats and what attaches consumers to them later; per seat, the mode and limit
/// of the consumer attached while the stream was built (`None`: reserved).
pub(crate) struct ProducerSide {
    pub(crate) ring: Arc<NvSciRing>,
    pub(crate) engines: Vec<Engine>,
    pub(crate) remotes: Vec<RemoteConsumer>,
    pub(crate) hub: Arc<AttachHub>,
    pub(crate) attached: Vec<Option<(QueueMode, Option<usize>)>>,
}

/// Builds the NvSci backend of a ring with `seats` in this process and in others, running the
/// attach with each remote one attached now (steps 1 to 4 above; `config` validated already).
pub(crate) fn build_producer(
    lib: &NvSci,
    format: FrameFormat,
    config: RingConfig,
    producer: &Engine,
    seats: Vec<SeatLink>,
) -> Result<ProducerSide> {
    let timeout = Some(config.timeout);
    let sync = SyncModule::open(lib)?;
    let bufm = BufModule::open(lib)?;
    let token = stream_token();
    let mut engines = Vec::with_capacity(seats.len());
    let mut remotes = Vec::new();
    let mut reserved = Vec::new();
    let mut now = Vec::new();
    for (i, c) in seats.into_iter().enumerate() {
        match c {
            SeatLink::Local(e) => engines.push(e),
            SeatLink::Remote(ep, e) => {
                engines.push(Engine::Cpu);
                now.push(remotes.len());
                remotes.push(RemoteConsumer::new(i, Some(e), ep));
            }
            SeatLink::Reserved(ep, e) => {
                engines.push(Engine::Cpu);
                reserved.push((i, e.clone()));
                remotes.push(RemoteConsumer::new(i, Some(e), ep));
            }
        }
    }
    for r in &remotes {
        check_channel(&*r.endpoint()?, config.frames)?;
    }
    // 1. The offers, with the producer's waiter lists for each release object.
    let waiters = waiter_lists(&sync, producer)?;
    let waiter_refs: Vec<&SyncAttrList> = waiters.iter().collect();
    for &i in &now {
        let r = &remotes[i];
        let ep = r.endpoint()?;
        ep.wait_connected(timeout)?;
        let offer = Offer { token, generation: 0, engine: r.engine.as_ref(), format: &format };
        let exported = SyncAttrList::export_unreconciled(&waiter_refs, &ep)?;
        ep.send_message(&offer_msg(r.consumer, config, &offer, &exported), timeout)?;
    }
    // 2. Their answers and lists.
    let mut lists = Vec::with_capacity(now.len());
    let mut modes = Vec::with_capacity(now.len());
    for &i in &now {
        let r = &remotes[i];
        let ep = r.endpoint()?;
        let msg = ep.recv_message(timeout)?;
        let offer = Offer { token, generation: 0, engine: r.engine.as_ref(), format: &format };
        let mut answer = parse_attach(&msg, &offer).map_err(|field| refuse(&ep, field, timeout))?;
        let bad = || protocol(&ep, "a truncated list message".into());
        let f = &mut answer.lists;
        let buf =
            bufm.import_unreconciled(&ep, &AttrListDescriptor::from_bytes(f.field().ok_or_else(bad)?)?)?;
        let waiters =
            sync.import_unreconciled(&ep, &AttrListDescriptor::from_bytes(f.field().ok_or_else(bad)?)?)?;
        lists.push(RemoteLists { buf, waiters });
        modes.push((answer.mode, answer.limit));
    }
    // 3. One reconciliation for every party; share the frames and the present object.
    let mut members = Vec::with_capacity(engines.len());
    let mut next_remote = lists.iter();
    for (i, e) in engines.iter().enumerate() {
        if let Some((_, e)) = reserved.iter().find(|(c, _)| *c == i) {
            members.push(Member::Reserved(e));
        } else if remotes.iter().any(|r| r.consumer == i) {
            // One list per remote consumer attached now, in index order.
            members.push(Member::Remote(next_remote.next().expect("one list per remote consumer")));
        } else {
            members.push(Member::Local(e));
        }
    }
    let (mut ring, reconciled) = NvSciRing::new(&bufm, &sync, format, config, producer, &members)?;
    drop(members);
    for &i in &now {
        let ep = remotes[i].endpoint()?;
        let mut m = vec![SETUP];
        m.extend_from_slice(&(config.frames as u32).to_le_bytes());
        put(&mut m, reconciled.export_reconciled(&ep)?.as_bytes());
        put(&mut m, ring.present_object().export_with_attr_list(SyncPerm::WaitOnly, &ep)?.as_bytes());
        for s in 0..config.frames {
            let b = ring.buffer(s).expect("the producer's ring holds every buffer");
            m.extend_from_slice(b.export(Perm::ReadOnly, &ep)?.as_bytes());
        }
        ep.send_message(&m, timeout)?;
    }
    // 4. Their release objects.
    for &i in &now {
        let r = &remotes[i];
        let ep = r.endpoint()?;
        let msg = ep.recv_message(timeout)?;
        expect(&ep, &msg, RELEASE_OBJ)?;
        let obj = sync.import_attr_list_and_obj(
            &ep,
            &AttrListDescriptor::from_bytes(&msg[1..])?,
            &waiter_refs,
            SyncPerm::WaitOnly,
            timeout,
        )?;
        ring.set_remote_release(r.consumer, obj)?;
        r.attached_session.store(1, Ordering::Release);
        lock(&r.record).attaches += 1;
    }
    drop(lists);
    let mut attached = vec![None; engines.len()];
    for (k, &i) in now.iter().enumerate() {
        attached[remotes[i].consumer] = Some(modes[k]);
    }
    let ring = Arc::new(ring);
    let hub = Arc::new(AttachHub {
        ring: ring.clone(),
        reconciled: Mutex::new(reconciled),
        producer: producer.clone(),
        format,
        config,
        token,
    });
    Ok(ProducerSide { ring, engines, remotes, hub, attached })
}

/// A consumer process's end of the ring: receives frames, sends releases.
pub(crate) struct Upstream {
    /// The consumer's index in the producer's ring.
    pub(crate) index: usize,
    pub(crate) ep: IpcEndpoint,
    /// A message could not be followed: this consumer is out of step with the producer.
    pub(crate) broken: std::sync::atomic::AtomicBool,
    /// A mailbox consumer: it asks for each frame (its mailbox is in the producer's process).
    pub(crate) mailbox: bool,
    /// A request was sent and no frame came for it yet.
    pub(crate) asked: AtomicBool,
}

/// What a consumer's receive found: a frame (its slot, metadata and present fence) or the end.
pub(crate) enum Received {
    Frame(usize, FrameMeta, FenceDescriptor),
    End,
}

impl Upstream {
    /// Receives the next frame or the end of the stream. A message that cannot be followed
    /// (it cannot be parsed, or does not fit a ring message) leaves this consumer out of step
    /// with the producer for good: this and every later receive fail with a protocol error.
    /// The endpoint is not reset here: frames this consumer still holds, or released with work
    /// still reading them, keep their slots until the ring is dropped, which waits for its
    /// fences before it closes the endpoint (the producer then drops this consumer as gone).
    pub(crate) fn recv(&self, timeout: Duration) -> Result<Received> {
        if self.broken.load(Ordering::Acquire) {
            return Err(protocol(&self.ep, "out of step with the producer since an earlier message".into()));
        }
        let mut msg = [0u8; FRAME_MSG];
        let n = match self.ep.recv_small_message(&mut msg, Some(timeout)) {
            Ok(n) => n,
            Err(
                e @ (Error::Timeout { waited_for: Wait::Endpoint { .. }, .. }
                | Error::Ipc(IpcError::PeerGone { .. })),
            ) => return Err(e),
            Err(e) => {
                self.broken.store(true, Ordering::Release);
                return Err(e);
            }
        };
        let msg = &msg[..n];
        if msg == [END] {
            return Ok(Received::End);
        }
        parse_frame_msg(&self.ep, msg).map(|(slot, meta, desc)| Received::Frame(slot, meta, desc)).map_err(
            |e| {
                log::warn!("endpoint `{}`: out of step with the producer: {e}", self.ep.name());
                self.broken.store(true, Ordering::Release);
                e
            },
        )
    }

    /// Hands frame (`slot`, `seq`) back unread: its release with a cleared fence (nothing read
    /// it, so the producer need not wait for anything).
    pub(crate) fn send_unread(&self, slot: usize, seq: u64, timeout: Duration) -> Result<()> {
        let msg = fence_msg(RELEASED, slot, seq, &FenceDescriptor([0; FenceDescriptor::SIZE]));
        self.ep.send_message(&msg, Some(timeout))
    }

    /// Sends the release of frame (`slot`, `seq`) with its release fence, exported through
    /// this endpoint.
    pub(crate) fn send_release(
        &self,
        slot: usize,
        seq: u64,
        release: &FenceDescriptor,
        timeout: Duration,
    ) -> Result<()> {
        self.ep.send_message(&fence_msg(RELEASED, slot, seq, release), Some(timeout))
    }

    /// The error for a message that does not fit the ring's state.
    pub(crate) fn protocol_error(&self, what: String) -> Error {
        protocol(&self.ep, what)
    }

    /// A mailbox consumer asks for a frame, unless it asked already and no frame came for it
    /// yet (the producer sends one frame per request).
    pub(crate) fn ask(&self, timeout: Duration) -> Result<()> {
        if !self.mailbox || self.asked.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.ep
            .send_message(&[REQUEST], Some(timeout))
            .inspect_err(|_| self.asked.store(false, Ordering::Release))
    }

    /// A frame came: the request (if any) is answered.
    pub(crate) fn answered(&self) {
        self.asked.store(false, Ordering::Release);
    }

    /// Tells the producer this consumer leaves (every fence of it expired): its seat is free
    /// for the next consumer, and the endpoint's close that follows is no death. Then waits (up
    /// to `timeout` in all) for the producer's answer, the end of the stream, reading past the
    /// frames it sent before it read the departure (never taken: the producer takes them back
    /// with the seat): an endpoint closed before the producer read the departure would drop
    /// it unread, and the producer would count this consumer as lost.
    pub(crate) fn send_detach(&self, timeout: Duration) {
        if self.broken.load(Ordering::Acquire) {
            return;
        }
        let until = Instant::now() + timeout;
        if let Err(e) = self.ep.send_message(&[DETACH], Some(timeout)) {
            log::debug!("endpoint `{}`: the detach was not sent: {e}", self.ep.name());
            return;
        }
        let mut msg = [0u8; FRAME_MSG];
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.ep.recv_small_message(&mut msg, Some(left)) {
                Ok(n) if msg[..n] == [END] => return,
                Ok(_) => {}
                Err(e) => {
                    log::debug!("endpoint `{}`: no answer to the detach: {e}", self.ep.name());
                    return;
                }
            }
        }
    }

    /// The error for the end of the stream.
    pub(crate) fn ended(&self) -> Error {
        Error::Ring(RingError::Ended { endpoint: self.ep.name().to_owned() })
    }
}

/// Runs a consumer process's attach with the producer at the other end of `ep` (steps 1 to 4
/// above): its frames are `format`, processed on `desc`'s engine, in `desc`'s queue mode and
/// limit. Returns the imported ring, its frame count and the consumer's end of the endpoint.
pub(crate) fn connect_consumer(
    lib: &NvSci,
    ep: IpcEndpoint,
    format: FrameFormat,
    desc: &ConsumerDesc,
    timeout: Duration,
) -> Result<(NvSciRing, usize, Upstream)> {
    let engine = &desc.engine;
    let t = Some(timeout);
    ep.wait_connected(t)?;
    let sync = SyncModule::open(lib)?;
    let bufm = BufModule::open(lib)?;
    // 1. Our index and the producer's waiter lists for our release object.
    let msg = ep.recv_message(t)?;
    expect(&ep, &msg, WAITER_LIST)?;
    let mut f = Fields(&msg[1..]);
    let truncated = || protocol(&ep, "a truncated waiter-list message".into());
    let index = f.u32().ok_or_else(truncated)? as usize;
    // The ring's `gpu_cache`: a consumer's GPU is cached or not as the producer's configuration
    // says, wherever the consumer lives.
    let gpu_cache = match f.take(1).ok_or_else(truncated)? {
        [0] => false,
        [1] => true,
        other => return Err(protocol(&ep, format!("a GPU cache flag of {}", other[0]))),
    };
    let token = f.u64().ok_or_else(truncated)?;
    let generation = f.u32().ok_or_else(truncated)?;
    let prod_waiter = sync.import_unreconciled(&ep, &AttrListDescriptor::from_bytes(f.0)?)?;
    // 2. Our lists. NvSciSync reconciles NeedCpuAccess per peer and NvSciSyncFenceWait needs
    // CPU wait permission, so an engine consumer, which may also wait on the CPU (a dropped
    // frame, teardown), sends the CPU's waiter list beside its engine's.
    let own_buf = format.attr_list(&bufm, Perm::ReadOnly, true, engine.gpu_id(), gpu_cache)?;
    let own_waiters = waiter_lists(&sync, engine)?;
    let waiter_refs: Vec<&SyncAttrList> = own_waiters.iter().collect();
    let mut m = vec![CONSUMER_LISTS];
    m.extend_from_slice(&token.to_le_bytes());
    m.extend_from_slice(&generation.to_le_bytes());
    m.extend_from_slice(&engine_bytes(engine));
    m.push(match desc.mode {
        QueueMode::Fifo => 0,
        QueueMode::Mailbox => 1,
    });
    let limit = desc.limit.map_or(u32::MAX, |l| u32::try_from(l).unwrap_or(u32::MAX - 1));
    m.extend_from_slice(&limit.to_le_bytes());
    m.extend_from_slice(&format_bytes(&format));
    put(&mut m, BufAttrList::export_unreconciled(&[&own_buf], &ep)?.as_bytes());
    put(&mut m, SyncAttrList::export_unreconciled(&waiter_refs, &ep)?.as_bytes());
    ep.send_message(&m, t)?;
    // 3. The producer's frames and present object, or its refusal.
    let msg = ep.recv_message(t)?;
    if let [REFUSED, code] = msg[..] {
        let field = AttachField::from_code(code)
            .ok_or_else(|| protocol(&ep, format!("a refusal with the unknown code {code}")))?;
        return Err(Error::Ring(RingError::AttachRefused { endpoint: ep.name().to_owned(), field }));
    }
    expect(&ep, &msg, SETUP)?;
    let mut f = Fields(&msg[1..]);
    let bad = || protocol(&ep, "a truncated set-up message".into());
    let count = f.u32().ok_or_else(bad)? as usize;
    if !(2..=MAX_FRAMES).contains(&count) {
        return Err(protocol(&ep, format!("{count} frames (2 to {MAX_FRAMES} expected)")));
    }
    check_channel(&ep, count)?;
    let reconciled = bufm.import_reconciled(
        &ep,
        &AttrListDescriptor::from_bytes(f.field().ok_or_else(bad)?)?,
        &[&own_buf],
    )?;
    let present = sync.import_attr_list_and_obj(
        &ep,
        &AttrListDescriptor::from_bytes(f.field().ok_or_else(bad)?)?,
        &waiter_refs,
        SyncPerm::WaitOnly,
        t,
    )?;
    let mut frames: Vec<BufObj> = Vec::with_capacity(count);
    for _ in 0..count {
        let d = BufObjDescriptor::from_bytes(f.take(BufObjDescriptor::SIZE).ok_or_else(bad)?)?;
        frames.push(BufObj::import_read_only(&ep, &d, &reconciled, t)?.into_buf_obj());
    }
    let layout = FrameLayout { format, size: frames[0].size(), planes: frames[0].planes()? };
    // 4. Our release object: our engine signals, the producer's engine and CPU wait; our CPU
    // waits too (teardown).
    let signaler = party_list(&sync, engine, true, false)?;
    let cpu_waiter = party_list(&sync, &Engine::Cpu, false, true)?;
    let release = SyncObj::alloc(&SyncAttrList::reconcile(&[&signaler, &prod_waiter, &cpu_waiter])?)?;
    let mut m = vec![RELEASE_OBJ];
    m.extend_from_slice(release.export_with_attr_list(SyncPerm::WaitOnly, &ep)?.as_bytes());
    ep.send_message(&m, t)?;
    let ring = NvSciRing::imported(sync, layout, frames, present, release);
    let mailbox = desc.mode == QueueMode::Mailbox;
    Ok((
        ring,
        count,
        Upstream { index, ep, broken: Default::default(), mailbox, asked: AtomicBool::new(false) },
    ))
}

#[cfg(all(test, feature = "mock"))]
mod tests {
    use super::*;
    use crate::ipc::Ipc;

    /// A frame message a consumer cannot parse disconnects it from the producer: the parse
    /// error is returned, and the producer's end learns that its peer is gone (so the producer
    /// drops this consumer instead of waiting for a release that never comes).
    #[test]
    fn an_unparseable_frame_message_breaks_the_consumer_and_its_drop_ends_the_session() {
        let dir = std::env::temp_dir().join(format!("nvsci-ipc-unit-{}-parse", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("nvsciipc.cfg"), "INTER_PROCESS up_0 up_1 16 4096\n").unwrap();
        nvsci_mock::set_ipc_dir(Some(&dir));
        let ipc = Ipc::mock().unwrap();
        let producer = IpcEndpoint::open(&ipc, "up_0").unwrap();
        let up = Upstream {
            index: 0,
            ep: IpcEndpoint::open(&ipc, "up_1").unwrap(),
            broken: Default::default(),
            mailbox: false,
            asked: AtomicBool::new(false),
        };
        let t = Some(Duration::from_secs(5));
        up.ep.wait_connected(t).unwrap();
        producer.wait_connected(t).unwrap();
        // A frame message cut short: the tag, then 3 bytes where the slot and sequence belong.
        producer.send_message(&[FRAME, 1, 2, 3], t).unwrap();
        assert!(matches!(
            up.recv(Duration::from_secs(5)),
            Err(Error::Ipc(IpcError::Endpoint { code: None, .. }))
        ));
        // Out of step for good, even when a well-formed message follows.
        producer.send_message(&[END], t).unwrap();
        assert!(matches!(
            up.recv(Duration::from_secs(5)),
            Err(Error::Ipc(IpcError::Endpoint { code: None, .. }))
        ));
        // The session stays up while the consumer's ring (which may still hold frames) lives;
        // dropping it closes the endpoint and the producer sees the consumer gone.
        let mut buf = [0u8; 16];
        assert!(matches!(
            producer.read(&mut buf, Some(Duration::from_millis(50))),
            Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. })
        ));
        drop(up);
        assert!(matches!(producer.read(&mut buf, t), Err(Error::Ipc(IpcError::PeerGone { .. }))));
    }
}
