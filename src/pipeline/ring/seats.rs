//! The seat service of a producer with consumers in other processes: two threads per seat.
//! Its reader takes everything the consumer sends (releases, a mailbox consumer's requests,
//! answered at once, and its departure) and notices its loss when its endpoint reports it; it
//! also attaches the next consumer to a vacant seat while the stream runs (a new endpoint
//! session each time: nvsciipc.h allows `NvSciIpcResetEndpointSafe` "exactly once per endpoint
//! handle during Init mode", so a new peer takes a new handle). Its sender carries the frames
//! the producer's present offered the consumer, from the seat's outbox to its endpoint.
//!
//! So the producer's present costs the same whatever the number of consumer processes: it
//! queues each frame in the outboxes of the seats it was offered to (no system call, no
//! allocation) and rings one doorbell that wakes every sender at once; the fence exports and
//! endpoint writes of the seats run on their senders, side by side, and its acquire waits for
//! the state their readers update.
//!
//! One seat is the producer's own (`Inner::read_by_service`): the first seat of a consumer in
//! another process, while that consumer is FIFO. The producer sends its frames in its present
//! and reads its endpoint when it needs a slot back (a stream with one consumer process pays no
//! hand-off between threads); its reader looks at the endpoint without waiting every 20 ms
//! while the producer is not reading it, so that a consumer that died holding frames the
//! producer does not need yet is noticed too, and its sender has nothing to send.
//!
//! One reader at a time per endpoint (`RemoteConsumer::reader`), which applies what it read
//! before it lets go: a second reader could take the message whose wake-up the first was
//! waiting for. Without the service (before the producer is split, and while the stream ends)
//! the producer sends the frames and reads every endpoint itself.

use super::links::Sender;
use super::sync::{fence, lock, AtomicBool, AtomicU32, Futex, Mutex, Ordering};
use super::{Inner, SeatStatus};
use crate::error::{Error, IpcError, Result, RingError, Wait};
use crate::pipeline::config::{MAX_CONSUMERS, MAX_FRAMES};
use crate::pipeline::state::FrameMeta;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long one wait of the service lasts before it looks at its stop flag again.
const STEP: Duration = Duration::from_millis(20);

/// A frame offered to the consumer of a seat, waiting for the seat's sender: its slot, its
/// metadata and the endpoint session of the consumer it was offered to.
#[derive(Clone, Copy)]
struct Outgoing {
    slot: usize,
    meta: FrameMeta,
    session: u64,
}

/// The frames offered to the consumers in other processes that their senders have not sent
/// yet, one queue per seat (in `Inner::remotes` order), and the doorbell that wakes the senders.
pub(crate) struct Outboxes {
    queues: Box<[Mutex<heapless::Deque<Outgoing, MAX_FRAMES>>]>,
    /// A frame was queued since the doorbell last rang.
    queued: AtomicBool,
    bell: Doorbell,
}

impl Outboxes {
    /// Empty outboxes for `seats` seats (at most [`MAX_CONSUMERS`]), allocated once here.
    pub(crate) fn new(seats: usize) -> Self {
        let queues = (0..seats.min(MAX_CONSUMERS)).map(|_| Mutex::new(heapless::Deque::new())).collect();
        Self { queues, queued: AtomicBool::new(false), bell: Doorbell::default() }
    }

    /// Queues the frame in `slot` for the sender of seat `k`, offered to the consumer of
    /// endpoint session `session`; frames of earlier sessions still queued are dropped (no
    /// later consumer gets them). Allocates nothing and makes no system call; false when the
    /// queue is full (more frames than slots for one session: a consumer that released frames
    /// it was never sent).
    pub(crate) fn queue(&self, k: usize, slot: usize, meta: &FrameMeta, session: u64) -> bool {
        let Some(q) = self.queues.get(k) else { return false };
        let mut q = lock(q);
        while q.front().is_some_and(|o| o.session != session) {
            q.pop_front();
        }
        let queued = q.push_back(Outgoing { slot, meta: *meta, session }).is_ok();
        self.queued.store(true, Ordering::Release);
        queued
    }

    /// Wakes every sender waiting for frames if a frame was queued since the last ring (one
    /// system call, and none when no sender sleeps).
    pub(crate) fn ring(&self) {
        if self.queued.swap(false, Ordering::AcqRel) {
            self.bell.ring();
        }
    }

    fn pop(&self, k: usize) -> Option<Outgoing> {
        self.queues.get(k).and_then(|q| lock(q).pop_front())
    }

    /// The loop of seat `k`'s sender: hands the frames queued for the seat to `send`, in
    /// order, and sleeps on the doorbell while there are none, until `stop` (then it sends what
    /// is queued still, so that no frame the state says the consumer holds stays unsent).
    fn run_sender(&self, k: usize, stop: &AtomicBool, mut send: impl FnMut(Outgoing)) {
        loop {
            let seen = self.bell.count();
            // Read before the queue is drained, not after: a frame queued between a drain that
            // found the queue empty and a stop that came before the look would be left unsent.
            // A stop that comes after this look rings after `seen`, so the wait below returns
            // at once and the next turn sees it.
            let stopping = stop.load(Ordering::Acquire);
            while let Some(o) = self.pop(k) {
                send(o);
            }
            if stopping {
                return;
            }
            self.bell.wait(seen, STEP);
        }
    }

    /// Stops the senders (`stop` is the flag their loops were given): each sends what is
    /// queued for it, then returns.
    fn stop_senders(&self, stop: &AtomicBool) {
        stop.store(true, Ordering::Release);
        self.bell.ring();
    }
}

/// An event count on a futex: the producer rings it once per present, and every sender
/// sleeping on it wakes (`FUTEX_WAKE` of all waiters). A sender reads the count before it looks
/// at its queue and sleeps only while the count is still what it read, so no ring is missed.
struct Doorbell {
    rings: Futex,
    sleepers: AtomicU32,
}

impl Default for Doorbell {
    fn default() -> Self {
        Self { rings: Futex::new(0), sleepers: AtomicU32::new(0) }
    }
}

impl Doorbell {
    fn ring(&self) {
        self.rings.word().fetch_add(1, Ordering::SeqCst);
        // A sender that is about to sleep counted itself before it read `rings` again, each
        // side with a sequentially consistent fence between its write and its read: either it
        // sees this ring and does not sleep, or it is counted here and woken. (Fences rather
        // than SeqCst accesses alone, which would do as well: loom models SeqCst fences, but
        // takes SeqCst accesses for AcqRel, so its model of this code checks the handshake.)
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) != 0 {
            self.rings.wake_all();
        }
    }

    fn count(&self) -> u32 {
        self.rings.word().load(Ordering::SeqCst)
    }

    /// Sleeps until the doorbell rings after `seen` (the count read before), or `timeout`
    /// passes, or a spurious wake-up.
    fn wait(&self, seen: u32, timeout: Duration) {
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.rings.word().load(Ordering::SeqCst) == seen {
            self.rings.wait(seen, timeout);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The threads serving the seats of consumers in other processes; dropping it stops them (each
/// finishes the step it is in: at most one message wait, or one attach, bounded by the ring's
/// timeout).
pub(crate) struct SeatService {
    inner: Arc<Inner>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl SeatService {
    /// Starts a reader and a sender thread per seat of a consumer in another process (none
    /// without such seats).
    pub(crate) fn start(inner: &Arc<Inner>) -> Result<Option<Self>> {
        if inner.remotes.is_empty() {
            return Ok(None);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::with_capacity(2 * inner.remotes.len());
        for k in 0..2 * inner.remotes.len() {
            let (own, flag) = (inner.clone(), stop.clone());
            let (seat, sends) = (k / 2, k % 2 == 1);
            let c = inner.remotes[seat].consumer;
            let spawned = if sends {
                std::thread::Builder::new()
                    .name(format!("nvsci-send-{c}"))
                    .spawn(move || send(&own, seat, &flag))
            } else {
                std::thread::Builder::new()
                    .name(format!("nvsci-seat-{c}"))
                    .spawn(move || serve(&own, seat, &flag))
            };
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    drop(Self { inner: inner.clone(), stop, threads });
                    return Err(Error::Ipc(IpcError::Endpoint {
                        endpoint: "seat service".into(),
                        reason: format!("no thread for a seat: {e}"),
                        code: None,
                    }));
                }
            }
        }
        inner.serviced.store(true, Ordering::Release);
        Ok(Some(Self { inner: inner.clone(), stop, threads }))
    }
}

impl Drop for SeatService {
    fn drop(&mut self) {
        // The senders send what is queued, then stop (the readers stop after their step).
        self.inner.outbox.stop_senders(&self.stop);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The producer sends the frames and reads the endpoints itself from here on.
        self.inner.serviced.store(false, Ordering::Release);
    }
}

/// Sends the frames queued for seat `k` of `inner.remotes`, in order, until `stop` (then what
/// is queued still, so that no frame the state says the consumer holds stays unsent).
fn send(inner: &Inner, k: usize, stop: &AtomicBool) {
    let r = &inner.remotes[k];
    inner
        .outbox
        .run_sender(k, stop, |o| inner.send_frame_to(r, o.slot, &o.meta, o.session, Sender::SeatThread));
}

/// Reads seat `k` of `inner.remotes` and attaches its consumers, until `stop`.
fn serve(inner: &Inner, k: usize, stop: &AtomicBool) {
    let r = &inner.remotes[k];
    let c = r.consumer;
    // Whether the seat's endpoint saw a session (an attach tried, or a consumer attached): the
    // next consumer then needs a new endpoint handle.
    let mut used = inner.shared().st.status(c) != SeatStatus::Vacant;
    while !stop.load(Ordering::Acquire) {
        if inner.shared().st.status(c) != SeatStatus::Vacant {
            used = true;
            if !inner.read_by_service(c) {
                // The producer's own seat (a FIFO consumer): the producer reads its endpoint
                // when it needs a slot back (and notices its loss when a frame cannot be sent
                // to it). Between those, take
                // what is there without waiting, unless the producer is reading: a consumer
                // that died holding only frames the producer does not need yet is noticed too.
                // Wake up when the seat is freed, to offer it to the next consumer at once.
                loop {
                    match inner.try_take_remote_release(r, Duration::ZERO) {
                        Ok(true) if inner.shared().st.status(c) != SeatStatus::Vacant => {}
                        Ok(_) | Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. }) => break,
                        Err(e) => {
                            log::warn!("frame ring {}: consumer {c} (in another process): {e}", inner.id);
                            break;
                        }
                    }
                }
                let sh = inner.shared();
                if sh.st.status(c) != SeatStatus::Vacant {
                    drop(inner.seat_freed.wait_timeout(sh, STEP).unwrap_or_else(|e| e.into_inner()));
                }
                continue;
            }
            match inner.take_remote_release(r, STEP) {
                Ok(()) | Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. }) => {}
                Err(e) => {
                    log::warn!("frame ring {}: consumer {c} (in another process): {e}", inner.id);
                    std::thread::sleep(STEP);
                }
            }
            continue;
        }
        let Some(hub) = inner.hub.as_ref().filter(|_| inner.producer_engine.is_cpu()) else {
            // No attach while the stream runs (a CUDA producer): the seat stays vacant.
            std::thread::sleep(STEP);
            continue;
        };
        if used {
            r.close();
            used = false;
        }
        let (session, ep) = match r.reopen() {
            Ok(s) => s,
            Err(e) => {
                // Busy while another user of the old session still holds it.
                log::debug!("frame ring {}: seat {c} not reopened yet: {e}", inner.id);
                std::thread::sleep(STEP);
                continue;
            }
        };
        match ep.wait_connected(Some(STEP)) {
            Ok(()) => {}
            Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. }) => continue,
            Err(_) => {
                used = true;
                continue;
            }
        }
        used = true;
        let generation = r.generation.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
        match hub.attach(&ep, r, generation) {
            Ok((mode, limit)) => {
                {
                    let mut sh = inner.shared();
                    let attached = sh.st.attach(mode, limit.unwrap_or(usize::MAX), |s| s == c);
                    debug_assert_eq!(attached, Some(c), "the seat was vacant");
                    r.attached_session.store(session, Ordering::Release);
                }
                r.record.lock().unwrap_or_else(|e| e.into_inner()).attaches += 1;
                log::debug!("frame ring {}: consumer {c} attached from another process ({mode:?})", inner.id);
                inner.changed.notify_all();
            }
            Err(e) => {
                let _ = hub.ring.attach_release(c, None);
                if let Error::Ring(RingError::AttachRefused { field, .. }) = &e {
                    let mut rec = r.record.lock().unwrap_or_else(|e| e.into_inner());
                    rec.refused += 1;
                    rec.last_refusal = Some(*field);
                }
                log::warn!("frame ring {}: an attach to seat {c} failed: {e}", inner.id);
            }
        }
        drop(ep);
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
