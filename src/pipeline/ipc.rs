//! A frame ring across two processes: a producer process owns the buffers and presents frames,
//! a consumer process imports them read-only and returns release fences, over one NvSciIpc
//! endpoint pair.
//!
//! Set-up follows NvSci's rule that whoever signals a sync object allocates it:
//!
//! 1. the producer sends the CPU waiter list for the consumer's release object;
//! 2. the consumer sends its buffer list (read-only, its engine) and its waiter list for the
//!    producer's present object;
//! 3. the producer reconciles, allocates the frames and the present object, and exports the
//!    reconciled buffer list, every frame (read-only) and the present object (wait only);
//! 4. the consumer imports them, allocates its release object (its engine signals, the
//!    producer's CPU waits) and exports it (wait only).
//!
//! Per frame the producer waits for the slot's last release fence, writes the frame, signals
//! the present object and sends the slot, sequence number and present fence; the consumer
//! waits on that fence (on the CPU or its CUDA stream), processes the frame and sends back its
//! release fence. Nothing is allocated per frame but the message buffers.

use super::backend::nvsci::party_list;
use super::engine::Engine;
use super::format::{FrameFormat, FrameLayout};
use crate::buf::{BufAttrList, BufModule, BufObj, Perm};
use crate::error::{invalid, Error, Result};
use crate::ipc::{AttrListDescriptor, BufObjDescriptor, FenceDescriptor, IpcEndpoint, ReadOnlyBufObj};
use crate::sync::{CpuWaitContext, Fence, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use crate::NvSci;
use std::time::Duration;

const WAITER_LIST: u8 = b'W';
const CONSUMER_LISTS: u8 = b'C';
const SETUP: u8 = b'S';
const RELEASE_OBJ: u8 = b'R';
const FRAME: u8 = b'F';
const RELEASED: u8 = b'L';
const END: u8 = b'E';

/// Most frames an IPC ring holds.
pub const MAX_IPC_FRAMES: usize = 16;

fn protocol(ep: &IpcEndpoint, what: String) -> Error {
    Error::Ipc {
        endpoint: ep.name().to_owned(),
        reason: format!("unexpected message from the peer: {what}"),
        code: None,
    }
}

/// Checks that the channel holds every message a ring of `frames` slots can have in flight in
/// one direction: a fence message per slot and the end. NvSciIpc holds `nframes` frames per
/// direction and a write to a full channel fails ("write channel is full", nvsciipc.h,
/// `NvSciIpcWriteSafe`); with more in flight, producer and consumer could both wait to write
/// while neither reads.
fn check_channel(ep: &IpcEndpoint, frames: usize) -> Result<()> {
    let info = ep.info();
    let fs = info.frame_size as usize;
    // `send_message`: a 4-byte length, then the message, over frames of `fs` bytes.
    let len = 4 + 1 + 4 + 8 + FenceDescriptor::SIZE;
    let per_message = if fs == 0 { usize::MAX } else { len.div_ceil(fs) };
    let needed = frames.saturating_mul(per_message).saturating_add(1);
    if needed > info.frames as usize {
        return Err(invalid(
            "frames",
            format!(
                "{frames} frames need {needed} NvSciIpc frames in flight ({per_message} per fence message of                  {len} bytes in frames of {fs} bytes, and the end), but endpoint {} holds nframes = {}",
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

fn fence_msg(tag: u8, slot: u32, seq: u64, desc: &FenceDescriptor) -> Vec<u8> {
    let mut m = Vec::with_capacity(1 + 4 + 8 + FenceDescriptor::SIZE);
    m.push(tag);
    m.extend_from_slice(&slot.to_le_bytes());
    m.extend_from_slice(&seq.to_le_bytes());
    m.extend_from_slice(desc.as_bytes());
    m
}

fn parse_fence_msg(ep: &IpcEndpoint, msg: &[u8], tag: u8) -> Result<(u32, u64, FenceDescriptor)> {
    expect(ep, msg, tag)?;
    let mut f = Fields(&msg[1..]);
    let slot = f.u32().ok_or_else(|| protocol(ep, "a truncated fence message".into()))?;
    let seq = f.u64().ok_or_else(|| protocol(ep, "a truncated fence message".into()))?;
    let desc = FenceDescriptor::from_bytes(f.0)?;
    Ok((slot, seq, desc))
}

/// The producer side: owns the frames and presents them to the consumer process.
pub struct IpcProducer {
    layout: FrameLayout,
    frames: Vec<BufObj>,
    present: SyncObj,
    release: SyncObj,
    /// Release fence of each slot's last frame (cleared once waited).
    released: Vec<Fence>,
    /// Whether each slot's last frame is still with the consumer.
    outstanding: Vec<bool>,
    ctx: CpuWaitContext,
    seq: u64,
    timeout: Option<Duration>,
    /// Declared last, so dropped last: frames, sync objects and fences are freed before the
    /// endpoint closes (NVIDIA's rawstream sample frees its objects first; inter-chip endpoints
    /// require it).
    ep: IpcEndpoint,
}

impl std::fmt::Debug for IpcProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpcProducer").field("endpoint", &self.ep).field("frames", &self.frames.len()).finish()
    }
}

impl IpcProducer {
    /// Runs the set-up with the consumer at the other end of `ep` (connecting first): allocates
    /// `frames` buffers of `format` on `lib` (written by the CPU) and shares them.
    ///
    /// The endpoint's channel must hold a fence message per frame and one more
    /// ([`EndpointInfo::frames`](crate::ipc::EndpointInfo::frames), `nframes` in
    /// nvsciipc.cfg): with frames of at least 73 bytes that is `frames + 1 <= nframes`;
    /// otherwise [`Error::InvalidArgument`] names both counts.
    pub fn connect(
        lib: &NvSci,
        ep: IpcEndpoint,
        format: FrameFormat,
        frames: usize,
        timeout: Option<Duration>,
    ) -> Result<Self> {
        if frames == 0 || frames > MAX_IPC_FRAMES {
            return Err(invalid("frames", format!("1 to {MAX_IPC_FRAMES} frames, not {frames}")));
        }
        format.validate()?;
        check_channel(&ep, frames)?;
        ep.wait_connected(timeout)?;
        let sync = SyncModule::open(lib)?;
        let bufm = BufModule::open(lib)?;
        // 1. Our CPU waiter list for the consumer's release object.
        let waiter = party_list(&sync, &Engine::Cpu, false, true)?;
        let mut m = vec![WAITER_LIST];
        m.extend_from_slice(SyncAttrList::export_unreconciled(&[&waiter], &ep)?.as_bytes());
        ep.send_message(&m, timeout)?;
        // 2. The consumer's lists.
        let msg = ep.recv_message(timeout)?;
        expect(&ep, &msg, CONSUMER_LISTS)?;
        let mut f = Fields(&msg[1..]);
        let bad = || protocol(&ep, "a truncated list message".into());
        let cons_buf =
            bufm.import_unreconciled(&ep, &AttrListDescriptor::from_bytes(f.field().ok_or_else(bad)?)?)?;
        let cons_sync =
            sync.import_unreconciled(&ep, &AttrListDescriptor::from_bytes(f.field().ok_or_else(bad)?)?)?;
        // 3. Reconcile and allocate; share.
        let own = format.attr_list(&bufm, Perm::ReadWrite, true, None, true)?;
        let reconciled = BufAttrList::reconcile(&[&own, &cons_buf])?;
        let signaler = party_list(&sync, &Engine::Cpu, true, false)?;
        let present = SyncObj::alloc(&SyncAttrList::reconcile(&[&signaler, &cons_sync])?)?;
        let mut buffers = Vec::with_capacity(frames);
        let mut m = vec![SETUP];
        m.extend_from_slice(&(frames as u32).to_le_bytes());
        put(&mut m, reconciled.export_reconciled(&ep)?.as_bytes());
        put(&mut m, present.export_with_attr_list(SyncPerm::WaitOnly, &ep)?.as_bytes());
        for _ in 0..frames {
            let b = BufObj::alloc(&reconciled)?;
            m.extend_from_slice(b.export(Perm::ReadOnly, &ep)?.as_bytes());
            buffers.push(b);
        }
        let layout = FrameLayout { format, size: buffers[0].size(), planes: buffers[0].planes()? };
        ep.send_message(&m, timeout)?;
        // 4. The consumer's release object.
        let msg = ep.recv_message(timeout)?;
        expect(&ep, &msg, RELEASE_OBJ)?;
        let release = sync.import_attr_list_and_obj(
            &ep,
            &AttrListDescriptor::from_bytes(&msg[1..])?,
            &[&waiter],
            SyncPerm::WaitOnly,
            timeout,
        )?;
        Ok(Self {
            ctx: sync.cpu_wait_context()?,
            ep,
            layout,
            released: (0..frames).map(|_| Fence::cleared()).collect(),
            outstanding: vec![false; frames],
            frames: buffers,
            present,
            release,
            seq: 0,
            timeout,
        })
    }

    /// The frames' layout.
    pub fn layout(&self) -> &FrameLayout {
        &self.layout
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &IpcEndpoint {
        &self.ep
    }

    /// Takes the consumer's release messages until slot `slot` is back.
    fn reclaim(&mut self, slot: usize) -> Result<()> {
        while self.outstanding[slot] {
            let msg = self.ep.recv_message(self.timeout)?;
            let (s, _seq, desc) = parse_fence_msg(&self.ep, &msg, RELEASED)?;
            let s = s as usize;
            if s >= self.frames.len() || !self.outstanding[s] {
                return Err(protocol(
                    &self.ep,
                    format!("a release of slot {s}, which is not with the consumer"),
                ));
            }
            self.released[s] = self.release.import_fence(&desc)?;
            self.outstanding[s] = false;
        }
        Ok(())
    }

    /// Presents the next frame: waits until its slot is released (its release fence expired),
    /// lets `write` fill it on the CPU (`write(bytes, sequence)`), signals the present object
    /// and sends the frame to the consumer. Returns the frame's sequence number.
    pub fn produce(&mut self, write: impl FnOnce(&mut [u8], u64)) -> Result<u64> {
        let slot = (self.seq % self.frames.len() as u64) as usize;
        self.reclaim(slot)?;
        self.released[slot].wait(&mut self.ctx, self.timeout)?;
        self.released[slot].clear();
        {
            let mut w = self.frames[slot].cpu_write()?;
            write(&mut w, self.seq);
        }
        let fence = self.present.generate_fence()?;
        self.present.signal()?;
        let desc = fence.export(&self.ep)?;
        self.ep.send_message(&fence_msg(FRAME, slot as u32, self.seq, &desc), self.timeout)?;
        self.outstanding[slot] = true;
        self.seq += 1;
        Ok(self.seq - 1)
    }

    /// Tells the consumer there are no more frames, waits until every frame is back and the
    /// consumer has read the end (or closed its endpoint), so that closing this endpoint cannot
    /// reset the channel under a message the consumer has yet to read (nvsciipc.h: once a reset
    /// is reported, reads fail and "all existing data in channel will be discarded").
    pub fn finish(mut self) -> Result<()> {
        self.ep.send_message(&[END], self.timeout)?;
        for slot in 0..self.frames.len() {
            self.reclaim(slot)?;
            self.released[slot].wait(&mut self.ctx, self.timeout)?;
        }
        match self.ep.recv_message(self.timeout) {
            Ok(m) => expect(&self.ep, &m, END),
            // Every frame is back: a consumer that closed after reading the end is done too.
            Err(Error::IpcPeerGone { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// A frame received by an [`IpcConsumer`]; hand it back with [`IpcConsumer::release`] or
/// [`IpcConsumer::release_after`].
#[derive(Debug)]
pub struct IpcFrame {
    slot: usize,
    seq: u64,
    present: Fence,
}

impl IpcFrame {
    /// The slot (index of the shared buffer).
    pub fn slot(&self) -> usize {
        self.slot
    }
    /// The producer's sequence number.
    pub fn sequence(&self) -> u64 {
        self.seq
    }
    /// The fence that expires once the producer finished writing the frame.
    pub fn present_fence(&self) -> &Fence {
        &self.present
    }
}

/// The consumer side: imports the producer's frames read-only and returns release fences.
pub struct IpcConsumer {
    layout: FrameLayout,
    frames: Vec<ReadOnlyBufObj>,
    present: SyncObj,
    release: SyncObj,
    engine: Engine,
    ctx: CpuWaitContext,
    timeout: Option<Duration>,
    /// Declared last, so dropped last: frames, sync objects and fences are freed before the
    /// endpoint closes (NVIDIA's rawstream sample frees its objects first; inter-chip endpoints
    /// require it).
    ep: IpcEndpoint,
}

impl std::fmt::Debug for IpcConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpcConsumer").field("endpoint", &self.ep).field("frames", &self.frames.len()).finish()
    }
}

impl IpcConsumer {
    /// Runs the set-up with the producer at the other end of `ep`, for frames of `format`
    /// processed on `engine` (the CPU reads them; a CUDA device waits and signals on a stream).
    pub fn connect(
        lib: &NvSci,
        ep: IpcEndpoint,
        format: FrameFormat,
        engine: Engine,
        timeout: Option<Duration>,
    ) -> Result<Self> {
        format.validate()?;
        ep.wait_connected(timeout)?;
        let sync = SyncModule::open(lib)?;
        let bufm = BufModule::open(lib)?;
        // 1. The producer's waiter list for our release object.
        let msg = ep.recv_message(timeout)?;
        expect(&ep, &msg, WAITER_LIST)?;
        let prod_waiter = sync.import_unreconciled(&ep, &AttrListDescriptor::from_bytes(&msg[1..])?)?;
        // 2. Our lists. The CPU always waits too (teardown waits on the CPU).
        let own_buf = format.attr_list(&bufm, Perm::ReadOnly, true, engine.gpu_id(), true)?;
        // NvSciSync reconciles NeedCpuAccess per peer and NvSciSyncFenceWait needs CPU wait
        // permission, so an engine consumer that may also wait on the CPU (`wait_cpu`, teardown)
        // sends the CPU's waiter list beside its engine's.
        let own_wait = party_list(&sync, &engine, false, true)?;
        let cpu_wait = party_list(&sync, &Engine::Cpu, false, true)?;
        let waiters: &[&SyncAttrList] = if engine.is_cpu() { &[&own_wait] } else { &[&own_wait, &cpu_wait] };
        let mut m = vec![CONSUMER_LISTS];
        put(&mut m, BufAttrList::export_unreconciled(&[&own_buf], &ep)?.as_bytes());
        put(&mut m, SyncAttrList::export_unreconciled(waiters, &ep)?.as_bytes());
        ep.send_message(&m, timeout)?;
        // 3. The producer's frames and present object.
        let msg = ep.recv_message(timeout)?;
        expect(&ep, &msg, SETUP)?;
        let mut f = Fields(&msg[1..]);
        let bad = || protocol(&ep, "a truncated set-up message".into());
        let count = f.u32().ok_or_else(bad)? as usize;
        if count == 0 || count > MAX_IPC_FRAMES {
            return Err(protocol(&ep, format!("{count} frames (1 to {MAX_IPC_FRAMES} expected)")));
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
            waiters,
            SyncPerm::WaitOnly,
            timeout,
        )?;
        let mut frames = Vec::with_capacity(count);
        for _ in 0..count {
            let d = BufObjDescriptor::from_bytes(f.take(BufObjDescriptor::SIZE).ok_or_else(bad)?)?;
            frames.push(BufObj::import_read_only(&ep, &d, &reconciled, timeout)?);
        }
        let b0 = frames[0].as_buf_obj();
        let layout = FrameLayout { format, size: b0.size(), planes: b0.planes()? };
        // 4. Our release object: our engine signals, the producer's CPU waits.
        let signaler = party_list(&sync, &engine, true, false)?;
        let mut inputs = vec![&signaler, &prod_waiter];
        let cpu_waiter;
        if !engine.is_cpu() {
            cpu_waiter = party_list(&sync, &Engine::Cpu, false, true)?;
            inputs.push(&cpu_waiter);
        }
        let release = SyncObj::alloc(&SyncAttrList::reconcile(&inputs)?)?;
        let mut m = vec![RELEASE_OBJ];
        m.extend_from_slice(release.export_with_attr_list(SyncPerm::WaitOnly, &ep)?.as_bytes());
        ep.send_message(&m, timeout)?;
        Ok(Self { ctx: sync.cpu_wait_context()?, ep, layout, frames, present, release, engine, timeout })
    }

    /// The frames' layout.
    pub fn layout(&self) -> &FrameLayout {
        &self.layout
    }

    /// The shared buffer of slot `slot` (read-only).
    pub fn buffer(&self, slot: usize) -> Option<&ReadOnlyBufObj> {
        self.frames.get(slot)
    }

    /// Every shared buffer, by slot (to import into CUDA once).
    pub fn buffers(&self) -> &[ReadOnlyBufObj] {
        &self.frames
    }

    /// The producer's present object (to import into CUDA for GPU waits).
    pub fn present_object(&self) -> &SyncObj {
        &self.present
    }

    /// This consumer's release object (to import into CUDA for GPU signals).
    pub fn release_object(&self) -> &SyncObj {
        &self.release
    }

    /// The engine this consumer was set up for.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &IpcEndpoint {
        &self.ep
    }

    /// The next frame, or `None` once the producer finished. Its present fence may not have
    /// expired yet: wait with [`wait_cpu`](Self::wait_cpu) or on a CUDA stream.
    pub fn next_frame(&mut self) -> Result<Option<IpcFrame>> {
        let msg = self.ep.recv_message(self.timeout)?;
        if msg.first() == Some(&END) {
            // Acknowledged, so the producer keeps the channel open until the end was read.
            self.ep.send_message(&[END], self.timeout)?;
            return Ok(None);
        }
        let (slot, seq, desc) = parse_fence_msg(&self.ep, &msg, FRAME)?;
        let slot = slot as usize;
        if slot >= self.frames.len() {
            return Err(protocol(&self.ep, format!("slot {slot} of {} frames", self.frames.len())));
        }
        let present = self.present.import_fence(&desc)?;
        Ok(Some(IpcFrame { slot, seq, present }))
    }

    /// Waits on the CPU until the frame's present fence expired.
    pub fn wait_cpu(&mut self, frame: &IpcFrame) -> Result<()> {
        frame.present.wait(&mut self.ctx, self.timeout)
    }

    /// Releases a frame processed on the CPU: signals the release object now.
    pub fn release(&mut self, frame: IpcFrame) -> Result<()> {
        let fence = self.release.generate_fence()?;
        self.release.signal()?;
        self.release_after(frame, fence)
    }

    /// Releases a frame with a fence of the release object signalled by this consumer's engine
    /// (e.g. a CUDA stream's, from `CudaSyncObj::signal`).
    pub fn release_after(&mut self, frame: IpcFrame, fence: Fence) -> Result<()> {
        let desc = fence.export(&self.ep)?;
        self.ep.send_message(&fence_msg(RELEASED, frame.slot as u32, frame.seq, &desc), self.timeout)
    }
}
