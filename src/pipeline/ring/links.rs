//! The ring's links to its consumers, one implementation of [`ConsumerLink`] per place a
//! consumer lives: [`Here`] for one in this process (FIFO or mailbox: its queue is the state
//! machine's), and [`RemoteConsumer`] for one in another process behind an endpoint (its frames
//! sent with their present fences, its releases, requests and departures taken, its loss
//! noticed, the end of the stream told). In a consumer's process, the link to the producer there
//! (its frames received, this consumer's releases and departure sent).
//!
//! The ring (`ring.rs`) asks the links, never the transport: the fences a message carries are
//! exported and imported here through the backend's NvSci extension, and the NvSciIpc messages
//! themselves are `backend::ipc`'s, which never calls the ring's backend. The state machine
//! (`state.rs`) knows nothing of either.

use super::{clone_gone, deadline_after, Inner};
use crate::error::{Error, IpcError, Result, Wait};
use crate::pipeline::backend::ipc::{Back, Received, RemoteConsumer, Upstream};
use crate::pipeline::backend::Point;
use crate::pipeline::config::MAX_CONSUMERS;
use crate::pipeline::state::{ConsumerSet, FrameMeta, QueueMode, SeatStatus, StreamState};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The longest a departing consumer process waits for the producer to read its departure (and
/// the producer to send its answer), when the ring's timeout is longer.
const DETACH_WAIT: Duration = Duration::from_millis(100);

/// How one consumer seat of a producer's stream is joined to its consumer. The state machine
/// decides which frames the consumer is offered and what it holds; the link carries a frame to
/// the consumer and brings back what the consumer hands back.
pub(crate) trait ConsumerLink: Send + Sync {
    /// The session of the consumer attached to the seat now: a frame offered now is that
    /// session's, and is never delivered to a later consumer of the seat. 0 where a seat's
    /// consumer does not change behind the ring's back (this process).
    fn session(&self) -> u64;

    /// Carries the frame in `slot`, offered to the consumer of `session` (and queued for it in
    /// the state machine), to that consumer. A failure is the ring's to report: the producer's
    /// next acquire returns it.
    fn deliver(&self, ring: &Inner, slot: usize, meta: &FrameMeta, session: u64);

    /// Takes back, without waiting, what the consumer handed back, where the producer is the
    /// one to read it; whether there was anything to look at.
    fn poll(&self, ring: &Inner) -> Result<bool>;

    /// Ends the stream for the consumer: no frame follows.
    fn end(&self, ring: &Inner, deadline: Instant);
}

/// A consumer in this process, FIFO or mailbox (its queue mode is the state machine's): it
/// takes the frames the state machine offers it (a present wakes it) and hands them back with
/// its own calls (which wake the producer), so nothing needs carrying.
pub(crate) struct Here;

impl ConsumerLink for Here {
    fn session(&self) -> u64 {
        0
    }

    fn deliver(&self, _ring: &Inner, _slot: usize, _meta: &FrameMeta, _session: u64) {}

    fn poll(&self, _ring: &Inner) -> Result<bool> {
        Ok(false)
    }

    fn end(&self, _ring: &Inner, _deadline: Instant) {}
}

/// Which thread sends a frame to a consumer in another process: what it may do when the
/// consumer turns out to be gone (see [`Inner::send_frame_to`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sender {
    /// The producer's thread (a seat it reads itself): it reads what the consumer left behind
    /// unless another reader is at it, which then detaches the consumer; it never waits.
    Producer,
    /// The seat's sender thread: it waits for the seat's reader to finish its read.
    SeatThread,
    /// A thread that holds the seat's reader (answering a mailbox consumer's request).
    Reader,
}

impl ConsumerLink for RemoteConsumer {
    fn session(&self) -> u64 {
        self.attached_session.load(Ordering::Acquire)
    }

    fn deliver(&self, ring: &Inner, slot: usize, meta: &FrameMeta, session: u64) {
        if !ring.read_by_service(self.consumer) {
            ring.send_frame_to(self, slot, meta, session, Sender::Producer);
            return;
        }
        // The seat's sender sends it (the producer rings the senders' doorbell once for the
        // frame, whatever the number of seats).
        let k = ring.remotes.iter().position(|r| r.consumer == self.consumer);
        if !k.is_some_and(|k| ring.outbox.queue(k, slot, meta, session)) {
            let e = self.protocol_error(format!(
                "frame {} offered with more frames unsent than the ring has slots",
                meta.sequence
            ));
            ring.not_sent(self, slot, meta.sequence, session, e);
        }
    }

    fn poll(&self, ring: &Inner) -> Result<bool> {
        // A seat the service serves is its reader's to read (it wakes the producer).
        let holds = ring.shared().st.holders_of(self.consumer) != 0;
        if !holds || ring.read_by_service(self.consumer) {
            return Ok(false);
        }
        match ring.take_remote_release(self, Duration::ZERO) {
            Ok(()) | Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. }) => Ok(true),
            Err(e) => Err(e),
        }
    }

    fn end(&self, ring: &Inner, deadline: Instant) {
        let c = self.consumer;
        let left = deadline.saturating_duration_since(Instant::now());
        let (session, sent) = self.send_end(left);
        if let Err(e) = sent {
            log::warn!("frame ring {}: the end of the stream not sent to consumer {c}: {e}", ring.id);
            if matches!(e, Error::Ipc(IpcError::PeerGone { .. })) {
                ring.drop_remote(c, session, &e);
            }
        }
    }
}

impl Inner {
    /// The consumer in another process with ring index `consumer`.
    pub(super) fn remote(&self, consumer: usize) -> Option<&RemoteConsumer> {
        self.remotes.iter().find(|r| r.consumer == consumer)
    }

    /// The link of seat `consumer`.
    pub(super) fn link(&self, consumer: usize) -> &dyn ConsumerLink {
        match self.remote(consumer) {
            Some(r) => r,
            None => &Here,
        }
    }

    /// Drops consumer `consumer` (in another process) from the multicast once its peer is gone
    /// ([`IpcError::PeerGone`] in endpoint session `session`): the producer no longer waits for
    /// it. Only a gone peer is dropped: its endpoint was closed or reset, which a consumer
    /// process does only after its ring waited for its fences (or when the process died, and
    /// its engines with it), so the slots it held can be reused. A live consumer is never
    /// dropped: its held slots stay held until it releases them. A session that is not the
    /// attached consumer's (an earlier one) drops nobody. A consumer that said it leaves is
    /// recorded as gone on purpose; one that did not is lost, and its error is reported by the
    /// producer's next acquire (once, whoever noticed; losses before that acquire share the
    /// report, and the seat's record counts each). The seat service opens a new endpoint
    /// session for the next consumer.
    pub(super) fn drop_remote(&self, consumer: usize, session: u64, why: &Error) {
        debug_assert!(matches!(why, Error::Ipc(IpcError::PeerGone { .. })), "only a gone peer is dropped");
        let Some(r) = self.remote(consumer) else { return };
        let left = {
            let mut sh = self.shared();
            if sh.st.status(consumer) == SeatStatus::Vacant
                || r.attached_session.load(Ordering::Acquire) != session
            {
                return;
            }
            let left = r.leaving.swap(false, Ordering::AcqRel);
            sh.st.kill(consumer);
            r.attached_session.store(0, Ordering::Release);
            for s in 0..self.config.frames {
                // Its process no longer signals: nothing of it is left to wait for.
                self.backend.clear(s, Point::Release(consumer));
            }
            if !left {
                sh.deferred.get_or_insert_with(|| clone_gone(why));
            }
            if let Some(hub) = &self.hub {
                // Its fences are cleared: its release object can go (under the lock, so that
                // it is never the next consumer's).
                let _ = hub.ring.attach_release(consumer, None);
            }
            left
        };
        {
            let mut rec = r.record.lock().unwrap_or_else(|e| e.into_inner());
            if left {
                rec.left += 1;
            } else {
                rec.lost += 1;
            }
        }
        if left {
            log::debug!("frame ring {}: consumer {consumer} (in another process) left", self.id);
        } else {
            log::warn!("frame ring {}: consumer {consumer} (in another process) dropped: {why}", self.id);
        }
        self.changed.notify_all();
        self.seat_freed.notify_all();
    }

    /// Delivers a presented frame through the links of the consumers it was offered to, each
    /// to the session it was attached in when the frame was offered (`sessions`, by consumer).
    pub(super) fn deliver(
        &self,
        index: usize,
        meta: &FrameMeta,
        to: ConsumerSet,
        sessions: &[u64; MAX_CONSUMERS],
    ) {
        for c in to.iter() {
            self.link(c).deliver(self, index, meta, sessions[c]);
        }
        // One wake-up for every sender a frame was queued for.
        self.outbox.ring();
    }

    /// Sends the frame in slot `index` to the consumer in another process `r` of endpoint
    /// session `session` (which holds it already in the state). One whose peer is gone is
    /// dropped; one the frame could not be sent to for another reason (a fence export that
    /// failed, a full channel) stays attached and misses this frame (it does not hold the
    /// slot). Either way the error is reported by the producer's next acquire. `by` says which
    /// thread sends, and so how the messages the consumer sent before it went are read first.
    pub(super) fn send_frame_to(
        &self,
        r: &RemoteConsumer,
        index: usize,
        meta: &FrameMeta,
        session: u64,
        by: Sender,
    ) {
        let sequence = meta.sequence;
        let sent = r.session_endpoint(session).and_then(|ep| {
            let present =
                self.nvsci("a consumer in another process")?.export_fence(index, Point::Present, &ep)?;
            RemoteConsumer::send_frame(&ep, index, meta, &present, self.config.timeout)
        });
        match sent {
            Ok(()) => {}
            Err(e @ Error::Ipc(IpcError::PeerGone { .. })) => {
                // What it sent before it went (its last releases, its departure) is still there
                // to read, in order, before the endpoint reports it gone: read it first, so
                // that a consumer that left is not counted as lost.
                let drain = || {
                    while r.attached_session.load(Ordering::Acquire) == session
                        && self.take_locked(r, Duration::ZERO).is_ok()
                    {}
                };
                match by {
                    // This thread holds the seat's reader.
                    Sender::Reader => drain(),
                    // The seat's reader is at most one read (the service's step) away from
                    // letting go, and a gone peer ends its read at once.
                    Sender::SeatThread => {
                        let _reading = r.reader.lock().unwrap_or_else(|e| e.into_inner());
                        drain();
                    }
                    // The producer never waits for another reader here. One that is at it
                    // reads those messages and then finds the peer gone itself (the seat
                    // service looks at the producer's own seats every step): it detaches the
                    // consumer, as left or as lost.
                    Sender::Producer => match r.reader.try_lock() {
                        Ok(_reading) => drain(),
                        Err(_) => return,
                    },
                }
                // Nobody, if the messages read above detached it already.
                self.drop_remote(r.consumer, session, &e);
            }
            Err(e) => self.not_sent(r, index, sequence, session, e),
        }
    }

    /// The frame in slot `index` (frame `sequence`) could not be sent to consumer `r` of
    /// endpoint session `session` for a reason other than its loss (`e`): the consumer stays
    /// attached and misses this frame (it no longer holds the slot); the producer's next
    /// acquire reports `e`.
    fn not_sent(&self, r: &RemoteConsumer, index: usize, sequence: u64, session: u64, e: Error) {
        log::warn!(
            "frame ring {}: frame {sequence} not sent to consumer {} (in another process): {e}",
            self.id,
            r.consumer
        );
        let mut sh = self.shared();
        if r.attached_session.load(Ordering::Acquire) == session {
            let _ = sh.st.consumer_release(r.consumer, index, false);
            sh.deferred.get_or_insert(e);
        }
        drop(sh);
        self.changed.notify_all();
    }

    /// Takes one message of a consumer in another process: a release, a mailbox consumer's
    /// request (answered at once with the newest frame, or by the next present), or its detach.
    /// A consumer whose peer is gone is dropped here (`Ok`). A message of an endpoint session
    /// that is not the attached consumer's is ignored.
    pub(super) fn take_remote_release(&self, r: &RemoteConsumer, timeout: Duration) -> Result<()> {
        let _reading = r.reader.lock().unwrap_or_else(|e| e.into_inner());
        self.take_locked(r, timeout)
    }

    /// As [`take_remote_release`](Self::take_remote_release), unless another reader is at it
    /// (then nothing, `Ok(false)`).
    pub(super) fn try_take_remote_release(&self, r: &RemoteConsumer, timeout: Duration) -> Result<bool> {
        match r.reader.try_lock() {
            Ok(_reading) => self.take_locked(r, timeout).map(|()| true),
            Err(_) => Ok(false),
        }
    }

    /// [`take_remote_release`](Self::take_remote_release) with `r.reader` held.
    fn take_locked(&self, r: &RemoteConsumer, timeout: Duration) -> Result<()> {
        let c = r.consumer;
        let (session, got) = r.recv(timeout);
        let back = match got {
            Ok(b) => b,
            Err(e @ Error::Ipc(IpcError::PeerGone { .. })) => {
                self.drop_remote(c, session, &e);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let current = || r.attached_session.load(Ordering::Acquire) == session;
        let served = match back {
            Back::Request => {
                let mut sh = self.shared();
                if !current() || sh.ending {
                    return Ok(());
                }
                match sh.st.request(c) {
                    Ok(served) => served,
                    Err(_) => {
                        return Err(r.protocol_error(format!(
                            "a request for a frame from consumer {c}, which is not a mailbox consumer"
                        )))
                    }
                }
            }
            Back::Detach => {
                if current() {
                    r.leaving.store(true, Ordering::Release);
                    // Its process closes its endpoint once answered.
                    if let Err(e) = r.answer_detach(session, self.config.timeout.min(DETACH_WAIT)) {
                        log::debug!("frame ring {}: consumer {c}'s departure not answered: {e}", self.id);
                    }
                }
                let gone = Error::Ipc(IpcError::PeerGone { endpoint: r.name().to_owned(), during: "detach" });
                self.drop_remote(c, session, &gone);
                return Ok(());
            }
            Back::Released(slot, seq, desc) => {
                // The check, the fence and the release under one hold of the lock: a consumer
                // dropped and another attached meanwhile never has its slot released by a
                // message of its predecessor.
                let mut sh = self.shared();
                if sh.st.status(c) == SeatStatus::Vacant || !current() {
                    // Dropped from the multicast already: what it sends is no longer waited for.
                    return Ok(());
                }
                if !sh.st.holds(c, slot) || sh.st.sequence(slot) != Some(seq) {
                    return Err(r.protocol_error(format!(
                        "a release of frame {seq} in slot {slot}, which consumer {c} does not hold"
                    )));
                }
                self.nvsci("a consumer in another process")?.import_fence(slot, Point::Release(c), &desc)?;
                // A release with no fence hands the frame back unread.
                let read = desc.as_bytes().iter().any(|&b| b != 0);
                let _ = sh.st.consumer_release(c, slot, read);
                // A mailbox consumer that asked while it held its limit gets the frame waiting now.
                let served = sh.st.serve(c);
                // Wake the producer once per slot, not once per consumer process: when no seat
                // the service reads holds the slot any more (what the producer waits for).
                let wake = self.served_by_service_mask(&sh.st) & sh.st.holders(slot).0 == 0;
                drop(sh);
                if wake {
                    self.changed.notify_all();
                }
                served
            }
        };
        if let Some((slot, meta)) = served {
            self.send_frame_to(r, slot, &meta, session, Sender::Reader);
        }
        Ok(())
    }

    /// Whether the seat service serves consumer `c` (in another process): its reader reads
    /// the endpoint and applies the releases as they come (and answers a mailbox consumer's
    /// requests at once), its sender sends the frames the producer queues; the seats side by
    /// side, so the producer's present and acquire cost the same whatever their number. One
    /// seat is the producer's own while the service runs: the first seat of a consumer in
    /// another process, while its consumer is FIFO. The producer sends its frames in its present
    /// and reads the releases it needs in its acquire, with no thread in between (as the caller
    /// of a fork-join runs one branch itself): a stream with one consumer process pays no
    /// hand-off between threads. Without the service the producer serves every seat itself.
    pub(super) fn read_by_service(&self, c: usize) -> bool {
        self.serviced.load(Ordering::Acquire) && !self.producer_seat(c, || self.shared().st.mode(c))
    }

    /// Whether seat `c` is the producer's own while the service runs (see
    /// [`read_by_service`](Self::read_by_service)); `mode` gives its queue mode.
    fn producer_seat(&self, c: usize, mode: impl FnOnce() -> QueueMode) -> bool {
        self.remotes.first().is_some_and(|r| r.consumer == c) && mode() == QueueMode::Fifo
    }

    /// The seats the service reads, from the state `st` (under the state lock; while the
    /// service runs).
    fn served_by_service_mask(&self, st: &StreamState) -> u32 {
        let own = self.remotes.first().map(|r| r.consumer).filter(|&c| self.producer_seat(c, || st.mode(c)));
        self.remote_mask & !own.map_or(0, |c| 1 << c)
    }

    /// Takes back slot `index` from every consumer in another process holding it, or until
    /// `deadline` passes. A consumer that went away is dropped from the
    /// multicast (its error reported by the next acquire); any other error (a release that does
    /// not fit the ring's state, a fence that cannot be imported) is returned and the consumer
    /// stays attached.
    pub(super) fn reclaim_remotes(&self, index: usize, deadline: Instant) -> Result<()> {
        loop {
            let waiting = self.shared().st.holders(index).0 & self.remote_mask;
            if waiting == 0 {
                return Ok(());
            }
            let Some(r) = self.remote(waiting.trailing_zeros() as usize) else { return Ok(()) };
            self.reclaim_remote(r, index, deadline)?;
        }
    }

    /// Takes the releases of consumer in another process `r` until it no longer holds slot
    /// `index`, or `deadline` passes.
    fn reclaim_remote(&self, r: &RemoteConsumer, index: usize, deadline: Instant) -> Result<()> {
        let c = r.consumer;
        loop {
            let (holds, sequence) = {
                let sh = self.shared();
                (sh.st.holders(index).contains(c), sh.st.sequence(index).unwrap_or(0))
            };
            if !holds {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let timed_out = || {
                self.timeout(Wait::RemoteRelease {
                    slot: index,
                    sequence,
                    consumer: c,
                    endpoint: r.name().to_owned(),
                })
            };
            if self.read_by_service(c) {
                // The seat service reads this consumer's endpoint and applies its release under
                // the state lock: wait for the state to change (one reader per endpoint, so no
                // wake-up is lost to another).
                if left.is_zero() {
                    return Err(timed_out());
                }
                let sh = self.shared();
                if sh.st.holders(index).contains(c) {
                    drop(self.changed.wait_timeout(sh, left).unwrap_or_else(|e| e.into_inner()));
                }
                continue;
            }
            let reading = r.reader.lock().unwrap_or_else(|e| e.into_inner());
            // What another reader took before this one had the endpoint is in the state now.
            if !self.shared().st.holders(index).contains(c) {
                continue;
            }
            let took = self.take_locked(r, left);
            drop(reading);
            match took {
                Ok(()) => {}
                Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. }) => return Err(timed_out()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Ends the stream for every consumer in another process still attached, then takes back
    /// the frames they hold, all against one deadline (the ring's timeout from now): each
    /// consumer is told first, so none waits for the end while the producer waits for
    /// another's frames.
    pub(super) fn end_remotes(&self) {
        let deadline = deadline_after(self.config.timeout);
        // No frame goes out from here on, even to a mailbox consumer that asks.
        self.shared().ending = true;
        for c in 0..self.config.consumers {
            if self.shared().st.status(c) != SeatStatus::Vacant {
                self.link(c).end(self, deadline);
            }
        }
        for s in 0..self.config.frames {
            if let Err(e) = self.reclaim_remotes(s, deadline) {
                log::warn!("frame ring {}: slot {s} not handed back by every consumer: {e}", self.id);
            }
        }
    }

    /// A consumer process: the next frame from the producer's process, for consumer `id` (the
    /// only one of this process's view). A mailbox consumer asks for the newest frame (its
    /// mailbox is the producer's), unless the end of the stream (or the answer to an earlier
    /// request) is there already: a peer that ended the stream and closed its end leaves no
    /// room to write into until what it sent is read.
    pub(super) fn take_upstream(
        &self,
        up: &Upstream,
        id: usize,
        deadline: Instant,
    ) -> Result<(usize, FrameMeta)> {
        let mut there = false;
        if up.mailbox && !up.asked.load(Ordering::Acquire) {
            match self.receive(up, Instant::now()) {
                Ok(()) => there = true,
                Err(Error::Timeout { waited_for: Wait::Frame, .. }) => {}
                Err(e) => return Err(e),
            }
        }
        if !there {
            match up.ask(self.config.timeout.min(Duration::from_millis(100))) {
                Ok(()) | Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. }) => {}
                Err(e) => return Err(e),
            }
            self.receive(up, deadline)?;
        }
        self.shared()
            .st
            .consumer_take(id)
            .ok_or_else(|| up.protocol_error("a frame that could not be queued".into()))
    }

    /// A consumer process: hands frame (`slot`, `sequence`) back to the producer's process with
    /// this consumer's release fence.
    pub(super) fn release_upstream(&self, up: &Upstream, slot: usize, sequence: u64) -> Result<()> {
        let release =
            self.nvsci("a producer in another process")?.export_fence(slot, Point::Release(0), &up.ep)?;
        up.send_release(slot, sequence, &release, self.config.timeout)
    }

    /// A consumer process: hands frame (`slot`, `sequence`) back unread (no fence: nothing read
    /// it, so the producer waits for nothing).
    pub(super) fn unread_upstream(&self, up: &Upstream, slot: usize, sequence: u64) -> Result<()> {
        up.send_unread(slot, sequence, self.config.timeout)
    }

    /// A consumer process leaves: every fence of it expired, so its seat is free for the next
    /// consumer (and the endpoint's close that follows is no death).
    pub(super) fn detach_upstream(&self, up: &Upstream) {
        up.send_detach(self.config.timeout.min(DETACH_WAIT));
    }

    /// A consumer process: receives the next frame from the producer's process and records its
    /// present fence and metadata.
    pub(super) fn receive(&self, up: &Upstream, deadline: Instant) -> Result<()> {
        if self.shared().ended {
            return Err(up.ended());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match up.recv(left) {
            Ok(Received::Frame(slot, meta, desc)) => {
                up.answered();
                let seq = meta.sequence;
                let free = slot < self.config.frames && self.shared().st.holders(slot).is_empty();
                let taken = if !free {
                    Err(up.protocol_error(format!("frame {seq} in slot {slot}, which is not free")))
                } else {
                    self.nvsci("a producer in another process")
                        .and_then(|n| n.import_fence(slot, Point::Present, &desc))
                };
                if let Err(e) = taken {
                    // The frame is not taken: hand it straight back, with no fence (nothing
                    // read it), so the producer does not wait for it.
                    if slot < self.config.frames {
                        if let Err(sent) = up.send_unread(slot, seq, self.config.timeout) {
                            log::warn!(
                                "frame ring {}: frame {seq} could not be handed back: {sent}",
                                self.id
                            );
                        }
                    }
                    return Err(e);
                }
                self.shared()
                    .st
                    .arrive(slot, meta)
                    .map_err(|_| up.protocol_error(format!("frame {seq} in slot {slot}, which is not free")))
            }
            Ok(Received::End) => {
                self.shared().ended = true;
                Err(up.ended())
            }
            Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. }) => Err(self.timeout(Wait::Frame)),
            Err(e) => Err(e),
        }
    }
}
