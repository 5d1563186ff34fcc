//! The NvSciIpc transport of the ring: a consumer in another process, attached to a ring's
//! producer through one NvSciIpc endpoint pair (NvSciStream's IPC blocks are the model: where a
//! consumer lives does not change the producer's code).
//!
//! The producer's process owns the frames and the present object; a consumer's process
//! imports them and owns its release object. Set-up follows NvSci's rule that whoever signals
//! a sync object allocates it, with every consumer (in this process or another) in one
//! reconciliation:
//!
//! 1. the producer sends each remote consumer its index, the ring's `gpu_cache` setting and the
//!    waiter lists for its release object (the producer's engine's, and the CPU's, which waits
//!    before anything is freed);
//! 2. each remote consumer sends its buffer list (read-only, its engine) and its waiter lists
//!    for the present object (its engine's; a CUDA consumer also the CPU's, as it may wait on the
//!    CPU);
//! 3. the producer reconciles every party's lists, allocates the frames, the present object and
//!    the release objects of its own process's consumers, and sends each remote consumer the
//!    frame count, the reconciled buffer list, the present object (wait only) and every frame
//!    (read-only);
//! 4. each remote consumer imports them, allocates its release object (its engine signals, the
//!    producer's engine and CPU wait) and sends it (wait only).
//!
//! Per frame the producer's present sends each remote consumer the slot, the sequence and the
//! present fence; the consumer's acquire receives it and its engine waits on the fence; its
//! release sends back the slot, the sequence and its release fence, which the producer's
//! acquire receives before it reuses the slot. When the producer is dropped it sends the end of
//! the stream and takes back the frames still out.
//!
//! Endpoints are declared after what was exported through them, so they close last: frames,
//! sync objects and fences are freed first, as NVIDIA's rawstream sample does (inter-chip
//! endpoints require it).

use super::nvsci::{party_list, Member, NvSciRing, RemoteLists};
use super::RingBackend;
use crate::buf::{BufAttrList, BufModule, BufObj, Perm};
use crate::error::{invalid, Error, IpcError, Result, RingError};
use crate::ipc::{AttrListDescriptor, BufObjDescriptor, FenceDescriptor, IpcEndpoint, SMALL_MESSAGE};
use crate::pipeline::config::{RingConfig, MAX_FRAMES};
use crate::pipeline::engine::Engine;
use crate::pipeline::format::{FrameFormat, FrameLayout};
use crate::pipeline::state::{FrameMeta, USER_HEADER_SIZE};
use crate::sync::{SyncAttrList, SyncModule, SyncObj, SyncPerm};
use crate::NvSci;
use std::time::Duration;

const WAITER_LIST: u8 = b'W';
const CONSUMER_LISTS: u8 = b'C';
const SETUP: u8 = b'S';
const RELEASE_OBJ: u8 = b'R';
const FRAME: u8 = b'F';
const RELEASED: u8 = b'L';
const END: u8 = b'E';

/// A consumer of a ring: in this process on an engine, or in another process at the other end
/// of an NvSciIpc endpoint (which connects there with [`Consumer::connect`](crate::pipeline::Consumer::connect)).
#[derive(Debug)]
pub enum RingConsumer {
    /// A consumer in this process, working on this engine.
    Local(Engine),
    /// A consumer in the process at the other end of this endpoint.
    Remote(IpcEndpoint),
}

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

/// Exports the fence at (`slot`, `point`) of `b` over `ep` and sends it as a `tag` message
/// for frame `seq`.
fn send_fence(
    ep: &IpcEndpoint,
    b: &dyn RingBackend,
    point: super::Point,
    tag: u8,
    (slot, seq): (usize, u64),
    timeout: Duration,
) -> Result<()> {
    let desc = b.export_fence(slot, point, ep)?;
    ep.send_message(&fence_msg(tag, slot, seq, &desc), Some(timeout))
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

/// A consumer in another process, as the producer's process sees it.
pub(crate) struct RemoteConsumer {
    /// Its index in the ring.
    pub(crate) consumer: usize,
    pub(crate) ep: IpcEndpoint,
}

impl RemoteConsumer {
    /// Sends the frame in `slot` with its present fence and metadata.
    pub(crate) fn send_frame(
        &self,
        b: &dyn RingBackend,
        slot: usize,
        meta: &FrameMeta,
        timeout: Duration,
    ) -> Result<()> {
        let desc = b.export_fence(slot, super::Point::Present, &self.ep)?;
        self.ep.send_message(&frame_msg(slot, meta, &desc), Some(timeout))
    }

    /// Receives the next release: the slot, its sequence and the release fence.
    pub(crate) fn recv_release(&self, timeout: Duration) -> Result<(usize, u64, FenceDescriptor)> {
        let mut msg = [0u8; FENCE_MSG];
        let n = self.ep.recv_small_message(&mut msg, Some(timeout))?;
        parse_fence_msg(&self.ep, &msg[..n], RELEASED)
    }

    /// Tells the consumer no more frames will come.
    pub(crate) fn send_end(&self, timeout: Duration) -> Result<()> {
        self.ep.send_message(&[END], Some(timeout))
    }

    /// The error for a message that does not fit the ring's state.
    pub(crate) fn protocol_error(&self, what: String) -> Error {
        protocol(&self.ep, what)
    }

    /// The endpoint's name.
    pub(crate) fn name(&self) -> &str {
        self.ep.name()
    }
}

/// A producer's ring with consumers in other processes: the backend, the engine of each
/// consumer (the CPU stands in for a remote one, whose engine is its own process's business),
/// and the remote consumers.
pub(crate) type ProducerSide = (NvSciRing, Vec<Engine>, Vec<RemoteConsumer>);

/// Builds the NvSci backend of a ring with `consumers` in this process and in others, running
/// the set-up with each remote one (steps 1 to 4 above; `config` validated already).
pub(crate) fn build_producer(
    lib: &NvSci,
    format: FrameFormat,
    config: RingConfig,
    producer: &Engine,
    consumers: Vec<RingConsumer>,
) -> Result<ProducerSide> {
    let timeout = Some(config.timeout);
    let sync = SyncModule::open(lib)?;
    let bufm = BufModule::open(lib)?;
    let mut engines = Vec::with_capacity(consumers.len());
    let mut remotes = Vec::new();
    for (i, c) in consumers.into_iter().enumerate() {
        match c {
            RingConsumer::Local(e) => engines.push(e),
            RingConsumer::Remote(ep) => {
                engines.push(Engine::Cpu);
                remotes.push(RemoteConsumer { consumer: i, ep });
            }
        }
    }
    // 1. The producer's waiter lists for each remote consumer's release object.
    let waiters = waiter_lists(&sync, producer)?;
    let waiter_refs: Vec<&SyncAttrList> = waiters.iter().collect();
    for r in &remotes {
        check_channel(&r.ep, config.frames)?;
        r.ep.wait_connected(timeout)?;
        let mut m = vec![WAITER_LIST];
        m.extend_from_slice(&(r.consumer as u32).to_le_bytes());
        m.push(u8::from(config.gpu_cache));
        m.extend_from_slice(SyncAttrList::export_unreconciled(&waiter_refs, &r.ep)?.as_bytes());
        r.ep.send_message(&m, timeout)?;
    }
    // 2. Their lists.
    let mut lists = Vec::with_capacity(remotes.len());
    for r in &remotes {
        let ep = &r.ep;
        let msg = ep.recv_message(timeout)?;
        expect(ep, &msg, CONSUMER_LISTS)?;
        let mut f = Fields(&msg[1..]);
        let bad = || protocol(ep, "a truncated list message".into());
        let buf =
            bufm.import_unreconciled(ep, &AttrListDescriptor::from_bytes(f.field().ok_or_else(bad)?)?)?;
        let waiters =
            sync.import_unreconciled(ep, &AttrListDescriptor::from_bytes(f.field().ok_or_else(bad)?)?)?;
        lists.push(RemoteLists { buf, waiters });
    }
    // 3. One reconciliation for every party; share the frames and the present object.
    let mut members = Vec::with_capacity(engines.len());
    let mut next_remote = lists.iter();
    for (i, e) in engines.iter().enumerate() {
        if remotes.iter().any(|r| r.consumer == i) {
            // One list per remote consumer, in index order.
            members.push(Member::Remote(next_remote.next().expect("one list per remote consumer")));
        } else {
            members.push(Member::Local(e));
        }
    }
    let (mut ring, reconciled) = NvSciRing::new(&bufm, &sync, format, config, producer, &members)?;
    drop(members);
    for r in &remotes {
        let ep = &r.ep;
        let mut m = vec![SETUP];
        m.extend_from_slice(&(config.frames as u32).to_le_bytes());
        put(&mut m, reconciled.export_reconciled(ep)?.as_bytes());
        put(&mut m, ring.present_object().export_with_attr_list(SyncPerm::WaitOnly, ep)?.as_bytes());
        for s in 0..config.frames {
            let b = ring.buffer(s).expect("the producer's ring holds every buffer");
            m.extend_from_slice(b.export(Perm::ReadOnly, ep)?.as_bytes());
        }
        ep.send_message(&m, timeout)?;
    }
    // 4. Their release objects.
    for r in &remotes {
        let ep = &r.ep;
        let msg = ep.recv_message(timeout)?;
        expect(ep, &msg, RELEASE_OBJ)?;
        let obj = sync.import_attr_list_and_obj(
            ep,
            &AttrListDescriptor::from_bytes(&msg[1..])?,
            &waiter_refs,
            SyncPerm::WaitOnly,
            timeout,
        )?;
        ring.set_remote_release(r.consumer, obj)?;
    }
    drop(lists);
    Ok((ring, engines, remotes))
}

/// A consumer process's end of the ring: receives frames, sends releases.
pub(crate) struct Upstream {
    /// The consumer's index in the producer's ring.
    pub(crate) index: usize,
    pub(crate) ep: IpcEndpoint,
    /// A message could not be followed: this consumer is out of step with the producer.
    pub(crate) broken: std::sync::atomic::AtomicBool,
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
        use std::sync::atomic::Ordering;
        if self.broken.load(Ordering::Acquire) {
            return Err(protocol(&self.ep, "out of step with the producer since an earlier message".into()));
        }
        let mut msg = [0u8; FRAME_MSG];
        let n = match self.ep.recv_small_message(&mut msg, Some(timeout)) {
            Ok(n) => n,
            Err(e @ Error::Ipc(IpcError::Timeout { .. } | IpcError::PeerGone { .. })) => return Err(e),
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

    /// Sends the release of frame (`slot`, `seq`) with its release fence.
    pub(crate) fn send_release(
        &self,
        b: &dyn RingBackend,
        slot: usize,
        seq: u64,
        timeout: Duration,
    ) -> Result<()> {
        send_fence(&self.ep, b, super::Point::Release(0), RELEASED, (slot, seq), timeout)
    }

    /// The error for a message that does not fit the ring's state.
    pub(crate) fn protocol_error(&self, what: String) -> Error {
        protocol(&self.ep, what)
    }

    /// The error for the end of the stream.
    pub(crate) fn ended(&self) -> Error {
        Error::Ring(RingError::Ended { endpoint: self.ep.name().to_owned() })
    }
}

/// Runs a consumer process's set-up with the producer at the other end of `ep` (steps 1 to 4
/// above): its frames are `format`, processed on `engine`. Returns the imported ring, its
/// frame count and the consumer's end of the endpoint.
pub(crate) fn connect_consumer(
    lib: &NvSci,
    ep: IpcEndpoint,
    format: FrameFormat,
    engine: &Engine,
    timeout: Duration,
) -> Result<(NvSciRing, usize, Upstream)> {
    format.validate()?;
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
    let prod_waiter = sync.import_unreconciled(&ep, &AttrListDescriptor::from_bytes(f.0)?)?;
    // 2. Our lists. NvSciSync reconciles NeedCpuAccess per peer and NvSciSyncFenceWait needs
    // CPU wait permission, so an engine consumer, which may also wait on the CPU (a dropped
    // frame, teardown), sends the CPU's waiter list beside its engine's.
    let own_buf = format.attr_list(&bufm, Perm::ReadOnly, true, engine.gpu_id(), gpu_cache)?;
    let own_waiters = waiter_lists(&sync, engine)?;
    let waiter_refs: Vec<&SyncAttrList> = own_waiters.iter().collect();
    let mut m = vec![CONSUMER_LISTS];
    put(&mut m, BufAttrList::export_unreconciled(&[&own_buf], &ep)?.as_bytes());
    put(&mut m, SyncAttrList::export_unreconciled(&waiter_refs, &ep)?.as_bytes());
    ep.send_message(&m, t)?;
    // 3. The producer's frames and present object.
    let msg = ep.recv_message(t)?;
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
    Ok((ring, count, Upstream { index, ep, broken: Default::default() }))
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
        let up =
            Upstream { index: 0, ep: IpcEndpoint::open(&ipc, "up_1").unwrap(), broken: Default::default() };
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
            Err(Error::Ipc(IpcError::Timeout { .. }))
        ));
        drop(up);
        assert!(matches!(producer.read(&mut buf, t), Err(Error::Ipc(IpcError::PeerGone { .. }))));
    }
}
