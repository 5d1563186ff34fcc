//! The stream's state machine: who holds which slot, what each consumer has queued, and which
//! frames a consumer skipped. Pure bookkeeping, no fences, no I/O and no locks: the ring
//! ([`super::ring`]) holds it under its lock and turns its answers into fence waits, clears and
//! messages; the model tests drive it directly.
//!
//! The rules (NvSciStream's pool, queues, limiter and multicast are the model):
//!
//! * The producer takes a free slot (no consumer holds or has queued it), the one presented
//!   longest ago first, and presents it with its metadata; the present offers the frame to every
//!   attached consumer.
//! * A FIFO consumer queues every frame it is offered; a mailbox consumer keeps only the newest:
//!   a frame it had queued but not taken goes straight back (it never read it).
//! * A consumer's limit caps what it holds and has queued: a frame offered beyond it is skipped
//!   for that consumer. A FIFO consumer without a lower limit than the ring's frames paces the
//!   producer; a mailbox consumer holds the producer back by at most the frames it holds.
//! * A FIFO consumer in another process has no queue here: a frame offered to it is sent and
//!   held until its release comes back. A mailbox consumer in another process has its mailbox
//!   here, in the producer's process: a frame is sent to it only when it asks for one
//!   ([`StreamState::request`]), so a frame it never asked for is replaced here without any
//!   message, and the producer never waits for it beyond the frames it holds.
//! * Consumers attach to vacant seats and get frames from the next present on; a detached
//!   consumer's queued frames go back at once and the frames it holds as it releases them; a
//!   killed one (a process gone) gives everything back at once.

use super::config::{MAX_CONSUMERS, MAX_FRAMES};

/// Bytes of the user header every frame carries ([`ProducerFrame::user_header_mut`](super::ProducerFrame::user_header_mut)).
pub const USER_HEADER_SIZE: usize = 32;

/// How a consumer takes frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QueueMode {
    /// Every frame, in order (up to the consumer's limit); the producer waits for a FIFO
    /// consumer when every slot is held.
    #[default]
    Fifo,
    /// Only the newest frame: a presented frame replaces the one the consumer has not taken
    /// yet, which goes straight back to the producer.
    Mailbox,
}

/// What travels with every frame: its sequence, the producer's capture time and the user
/// header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameMeta {
    pub(crate) sequence: u64,
    pub(crate) capture_ns: u64,
    pub(crate) user: [u8; USER_HEADER_SIZE],
}

impl FrameMeta {
    #[cfg(test)]
    pub(crate) const fn new(sequence: u64) -> Self {
        Self { sequence, capture_ns: 0, user: [0; USER_HEADER_SIZE] }
    }
}

/// One consumer's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerStats {
    /// Frames this consumer acquired (for a consumer in another process, as
    /// [`Producer::consumer_stats`](crate::pipeline::Producer::consumer_stats) counts it: frames
    /// sent to it).
    pub delivered: u64,
    /// Frames presented while it was attached that it never got: replaced in its mailbox, or
    /// refused by its limit.
    pub skipped: u64,
    /// The sequence of the last frame it acquired (for a consumer in another process, seen by
    /// the producer: the last frame sent to it).
    pub last_sequence: Option<u64>,
}

/// A set of consumers of one stream, by index.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ConsumerSet(pub(crate) u32);

impl ConsumerSet {
    /// Whether consumer `c` is in the set.
    pub fn contains(&self, c: usize) -> bool {
        c < 32 && self.0 & (1 << c) != 0
    }
    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }
    /// The consumers in the set, in index order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..32).filter(|c| self.contains(*c))
    }
}

impl std::fmt::Debug for ConsumerSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// Where a seat is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SeatStatus {
    /// Nobody: the seat can be attached.
    Vacant,
    /// A consumer is attached.
    Attached,
    /// Its consumer detached but still holds frames: vacant once they are released.
    Detaching,
}

#[derive(Clone, Debug)]
struct Seat {
    status: SeatStatus,
    remote: bool,
    mode: QueueMode,
    limit: usize,
    /// Slots offered and not taken (local consumers only).
    queue: heapless::Deque<usize, MAX_FRAMES>,
    /// Slots taken and not released (for a remote consumer: sent and not released).
    held: u32,
    /// A mailbox consumer in another process asked for a frame and was not sent one yet.
    wants: bool,
    stats: ConsumerStats,
}

impl Seat {
    fn outstanding(&self) -> usize {
        self.held.count_ones() as usize + self.queue.len()
    }
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// Consumers that hold the slot or have it queued.
    holders: u32,
    /// What was presented in it last (`None`: never presented).
    meta: Option<FrameMeta>,
    /// Whether a consumer released the frame after reading it, since its present.
    read: bool,
}

/// What the producer's take found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// The slot to write, the frame's sequence, and whether no consumer read what was presented
    /// in the slot last (so no release fence covers the producer's own present fence).
    Slot { slot: usize, sequence: u64, unread: bool },
    /// Every slot is held: the one presented longest ago, and who holds it.
    Busy { slot: usize, sequence: u64, holders: ConsumerSet },
    /// The producer holds a frame already.
    AlreadyHeld,
}

/// What a present did besides queueing the frame.
#[derive(Debug, Default)]
pub(crate) struct Presented {
    /// (consumer, slot) of frames replaced in mailboxes: their release fences are to be
    /// cleared (the consumer never read them).
    pub(crate) replaced: heapless::Vec<(usize, usize), MAX_CONSUMERS>,
    /// Consumers in other processes the frame is to be sent to.
    pub(crate) send_to: ConsumerSet,
}

/// Why the state refused an operation: a token or message that does not fit it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Misfit {
    /// The consumer does not hold that slot (a stale or replayed release).
    NotHeld,
    /// The producer does not hold that slot.
    NotProducers,
    /// A request for a frame from a consumer that is not an attached mailbox consumer in
    /// another process.
    NoRemoteMailbox,
}

/// The stream's state: `frames` slots, `seats` consumer seats.
#[derive(Clone, Debug)]
pub(crate) struct StreamState {
    frames: usize,
    seats: usize,
    slots: [Slot; MAX_FRAMES],
    seat: [Seat; MAX_CONSUMERS],
    next: u64,
    producer: Option<usize>,
}

impl StreamState {
    /// A stream of `frames` slots (2 to [`MAX_FRAMES`]) and `seats` seats (1 to
    /// [`MAX_CONSUMERS`]), every seat vacant; `remote` marks the seats of consumers in other
    /// processes.
    pub(crate) fn new(frames: usize, seats: usize, remote: u32) -> Self {
        debug_assert!((1..=MAX_FRAMES).contains(&frames) && (1..=MAX_CONSUMERS).contains(&seats));
        Self {
            frames,
            seats,
            slots: [Slot { holders: 0, meta: None, read: false }; MAX_FRAMES],
            seat: core::array::from_fn(|c| Seat {
                status: SeatStatus::Vacant,
                remote: remote & (1 << c) != 0,
                mode: QueueMode::Fifo,
                limit: frames,
                queue: heapless::Deque::new(),
                held: 0,
                wants: false,
                stats: ConsumerStats::default(),
            }),
            next: 0,
            producer: None,
        }
    }

    /// The sequence of the producer's next frame.
    #[cfg(test)]
    pub(crate) fn next_sequence(&self) -> u64 {
        self.next
    }

    /// Seat `c`'s status.
    pub(crate) fn status(&self, c: usize) -> SeatStatus {
        self.seat[c].status
    }

    /// Seat `c`'s counters.
    pub(crate) fn stats(&self, c: usize) -> ConsumerStats {
        self.seat[c].stats
    }

    /// Seat `c`'s queue mode.
    pub(crate) fn mode(&self, c: usize) -> QueueMode {
        self.seat[c].mode
    }

    /// The consumers holding slot `slot` or having it queued.
    pub(crate) fn holders(&self, slot: usize) -> ConsumerSet {
        ConsumerSet(self.slots[slot].holders)
    }

    /// The sequence presented in slot `slot` last.
    pub(crate) fn sequence(&self, slot: usize) -> Option<u64> {
        self.slots[slot].meta.map(|m| m.sequence)
    }

    /// Whether consumer `c` holds slot `slot` (taken, or sent to it).
    pub(crate) fn holds(&self, c: usize, slot: usize) -> bool {
        slot < self.frames && self.seat[c].held & (1 << slot) != 0
    }

    /// The producer takes a free slot: the one presented longest ago (never presented first).
    pub(crate) fn producer_take(&mut self) -> Take {
        if self.producer.is_some() {
            return Take::AlreadyHeld;
        }
        let age = |s: &Slot| s.meta.map_or(0, |m| m.sequence + 1);
        let free =
            (0..self.frames).filter(|&s| self.slots[s].holders == 0).min_by_key(|&s| age(&self.slots[s]));
        match free {
            Some(slot) => {
                self.producer = Some(slot);
                let s = &self.slots[slot];
                Take::Slot { slot, sequence: self.next, unread: s.meta.is_some() && !s.read }
            }
            None => {
                let slot = (0..self.frames).min_by_key(|&s| age(&self.slots[s])).unwrap_or(0);
                let s = &self.slots[slot];
                Take::Busy {
                    slot,
                    sequence: s.meta.map_or(0, |m| m.sequence),
                    holders: ConsumerSet(s.holders),
                }
            }
        }
    }

    /// The slots consumer `c` holds (taken, or sent to it), one bit each.
    pub(crate) fn holders_of(&self, c: usize) -> u32 {
        self.seat[c].held
    }

    /// Whether a slot is free for the producer.
    pub(crate) fn has_free_slot(&self) -> bool {
        self.producer.is_none() && (0..self.frames).any(|s| self.slots[s].holders == 0)
    }

    /// The slots, presented longest ago first.
    pub(crate) fn slots_by_age(&self) -> heapless::Vec<usize, MAX_FRAMES> {
        let mut v: heapless::Vec<usize, MAX_FRAMES> = (0..self.frames).collect();
        v.sort_unstable_by_key(|&s| self.slots[s].meta.map_or(0, |m| m.sequence + 1));
        v
    }

    /// The producer discards the frame it holds (not presented): the slot is free again and
    /// the sequence is handed out again.
    pub(crate) fn producer_discard(&mut self) {
        self.producer = None;
    }

    /// The producer presents the frame in `slot` with `meta` (whose sequence is the one its
    /// take handed out) and offers it to every attached consumer.
    pub(crate) fn present(&mut self, slot: usize, meta: FrameMeta) -> Result<Presented, Misfit> {
        if self.producer != Some(slot) {
            return Err(Misfit::NotProducers);
        }
        self.producer = None;
        self.next = meta.sequence + 1;
        self.slots[slot] = Slot { holders: 0, meta: Some(meta), read: false };
        let mut out = Presented::default();
        for c in 0..self.seats {
            let bit = 1u32 << c;
            let seat = &mut self.seat[c];
            if seat.status != SeatStatus::Attached {
                continue;
            }
            if seat.mode == QueueMode::Mailbox {
                while let Some(old) = seat.queue.pop_front() {
                    self.slots[old].holders &= !bit;
                    seat.stats.skipped += 1;
                    // Cannot overflow: one entry per consumer.
                    let _ = out.replaced.push((c, old));
                }
            }
            if seat.outstanding() >= seat.limit {
                seat.stats.skipped += 1;
                continue;
            }
            self.slots[slot].holders |= bit;
            if seat.remote && seat.mode == QueueMode::Fifo {
                seat.held |= 1 << slot;
                seat.stats.delivered += 1;
                seat.stats.last_sequence = Some(meta.sequence);
                out.send_to.0 |= bit;
            } else {
                // Cannot overflow: at most one entry per slot.
                let _ = seat.queue.push_back(slot);
                let remote = seat.remote;
                if remote && self.serve(c).is_some() {
                    out.send_to.0 |= bit;
                }
            }
        }
        Ok(out)
    }

    /// A mailbox consumer `c` in another process asks for a frame: the newest frame in its
    /// mailbox, now (it holds it from here on; the caller sends it), or else the next one
    /// presented (the present's [`Presented::send_to`] names it). A consumer that is not an
    /// attached mailbox consumer in another process gets nothing (`Err`).
    pub(crate) fn request(&mut self, c: usize) -> Result<Option<(usize, FrameMeta)>, Misfit> {
        let seat = &mut self.seat[c];
        if !seat.remote || seat.mode != QueueMode::Mailbox || seat.status != SeatStatus::Attached {
            return Err(Misfit::NoRemoteMailbox);
        }
        seat.wants = true;
        Ok(self.serve(c))
    }

    /// Hands a remote mailbox consumer that asked for a frame the one in its mailbox, while it
    /// holds fewer than its limit (a release makes room: call it again then).
    pub(crate) fn serve(&mut self, c: usize) -> Option<(usize, FrameMeta)> {
        let seat = &mut self.seat[c];
        if !seat.wants || seat.status != SeatStatus::Attached || seat.held.count_ones() as usize >= seat.limit
        {
            return None;
        }
        let slot = seat.queue.pop_front()?;
        seat.wants = false;
        seat.held |= 1 << slot;
        let meta = self.slots[slot].meta?;
        seat.stats.delivered += 1;
        seat.stats.last_sequence = Some(meta.sequence);
        Some((slot, meta))
    }

    /// Consumer `c` takes its next queued frame (a FIFO consumer's oldest, a mailbox
    /// consumer's newest and only one).
    pub(crate) fn consumer_take(&mut self, c: usize) -> Option<(usize, FrameMeta)> {
        let seat = &mut self.seat[c];
        if seat.status != SeatStatus::Attached || seat.remote {
            return None;
        }
        let slot = seat.queue.pop_front()?;
        seat.held |= 1 << slot;
        self.slots[slot].meta.map(|m| (slot, m))
    }

    /// Undoes a take whose engine wait failed: the frame is first in line again, unless a
    /// newer one replaced it in a mailbox meanwhile (then it goes back unread: `true`, and its
    /// release fence is to be cleared).
    pub(crate) fn consumer_untake(&mut self, c: usize, slot: usize) -> bool {
        let bit = 1u32 << c;
        let seat = &mut self.seat[c];
        seat.held &= !(1 << slot);
        if seat.status == SeatStatus::Attached && (seat.mode == QueueMode::Fifo || seat.queue.is_empty()) {
            // Cannot overflow: the slot left the queue in the take.
            let _ = seat.queue.push_front(slot);
            false
        } else {
            self.slots[slot].holders &= !bit;
            seat.stats.skipped += 1;
            self.settle(c);
            true
        }
    }

    /// Counts a frame consumer `c` took and its engine waited for.
    pub(crate) fn delivered(&mut self, c: usize, sequence: u64) {
        let s = &mut self.seat[c].stats;
        debug_assert!(s.last_sequence.is_none_or(|l| l < sequence), "sequences strictly increase");
        s.delivered += 1;
        s.last_sequence = Some(sequence);
    }

    /// A frame arrives from the producer's process at a consumer's (seat 0): it must be free
    /// here.
    pub(crate) fn arrive(&mut self, slot: usize, meta: FrameMeta) -> Result<(), Misfit> {
        if slot >= self.frames || self.slots[slot].holders != 0 || self.producer.is_some() {
            return Err(Misfit::NotHeld);
        }
        self.producer = Some(slot);
        self.present(slot, meta).map(|_| ())
    }

    /// Consumer `c` releases slot `slot`; `read`: it read the frame (its release fence
    /// covers the present fence).
    pub(crate) fn consumer_release(&mut self, c: usize, slot: usize, read: bool) -> Result<(), Misfit> {
        if !self.holds(c, slot) {
            return Err(Misfit::NotHeld);
        }
        self.seat[c].held &= !(1 << slot);
        self.slots[slot].holders &= !(1u32 << c);
        if read {
            self.slots[slot].read = true;
        }
        self.settle(c);
        Ok(())
    }

    /// Attaches a consumer to the first vacant seat `accept` takes, with `mode` and `limit`
    /// (1 or more; more than the ring's frames means "all"): it gets frames from the next
    /// present on.
    pub(crate) fn attach(
        &mut self,
        mode: QueueMode,
        limit: usize,
        mut accept: impl FnMut(usize) -> bool,
    ) -> Option<usize> {
        let c = (0..self.seats).find(|&c| self.seat[c].status == SeatStatus::Vacant && accept(c))?;
        let seat = &mut self.seat[c];
        seat.status = SeatStatus::Attached;
        seat.mode = mode;
        seat.limit = limit.clamp(1, self.frames);
        seat.wants = false;
        seat.stats = ConsumerStats::default();
        Some(c)
    }

    /// Detaches consumer `c`: its queued frames go back at once (their slots are returned, for
    /// their release fences to be cleared); the frames it holds as it releases them.
    pub(crate) fn detach(&mut self, c: usize) -> heapless::Vec<usize, MAX_FRAMES> {
        let bit = 1u32 << c;
        let mut back = heapless::Vec::new();
        let seat = &mut self.seat[c];
        if seat.status != SeatStatus::Attached {
            return back;
        }
        while let Some(s) = seat.queue.pop_front() {
            self.slots[s].holders &= !bit;
            let _ = back.push(s);
        }
        seat.wants = false;
        seat.status = SeatStatus::Detaching;
        self.settle(c);
        back
    }

    /// Consumer `c` is gone (its process died): everything it held or had queued goes back at
    /// once (the returned slots; their release fences are to be cleared) and the seat is
    /// vacant.
    pub(crate) fn kill(&mut self, c: usize) -> u32 {
        let bit = 1u32 << c;
        let seat = &mut self.seat[c];
        let mut back = seat.held;
        while let Some(s) = seat.queue.pop_front() {
            back |= 1 << s;
        }
        seat.held = 0;
        seat.wants = false;
        seat.status = SeatStatus::Vacant;
        for s in 0..self.frames {
            self.slots[s].holders &= !bit;
        }
        back
    }

    /// A detaching seat that holds nothing any more becomes vacant.
    fn settle(&mut self, c: usize) {
        let seat = &mut self.seat[c];
        if seat.status == SeatStatus::Detaching && seat.held == 0 && seat.queue.is_empty() {
            seat.status = SeatStatus::Vacant;
        }
    }

    /// Checks the invariants every operation keeps (the model tests call it after each step).
    #[cfg(test)]
    pub(crate) fn check(&self) {
        for s in 0..self.frames {
            let mut expect = 0u32;
            for c in 0..self.seats {
                let seat = &self.seat[c];
                let queued = seat.queue.iter().filter(|&&q| q == s).count();
                assert!(queued <= 1, "slot {s} queued twice for consumer {c}");
                let held = seat.held & (1 << s) != 0;
                assert!(!(held && queued == 1), "slot {s} both held and queued by {c}");
                if held || queued == 1 {
                    expect |= 1 << c;
                }
            }
            assert_eq!(self.slots[s].holders, expect, "holders of slot {s}");
            if self.producer == Some(s) {
                assert_eq!(self.slots[s].holders, 0, "the producer writes slot {s} that a consumer holds");
            }
        }
        for c in 0..self.seats {
            let seat = &self.seat[c];
            if seat.status == SeatStatus::Vacant {
                assert!(seat.held == 0 && seat.queue.is_empty(), "vacant seat {c} holds frames");
            }
            if seat.status == SeatStatus::Attached {
                assert!(seat.outstanding() <= seat.limit, "consumer {c} over its limit");
            }
            if seat.mode == QueueMode::Mailbox {
                assert!(seat.queue.len() <= 1, "mailbox {c} holds more than one frame");
            }
            if seat.wants {
                assert!(
                    seat.remote && seat.mode == QueueMode::Mailbox && seat.status == SeatStatus::Attached,
                    "seat {c} wants a frame but is no attached remote mailbox"
                );
            }
            let seqs: Vec<u64> = seat
                .queue
                .iter()
                .map(|&s| self.slots[s].meta.expect("queued frames were presented").sequence)
                .collect();
            assert!(seqs.windows(2).all(|w| w[0] < w[1]), "queue of {c} out of order: {seqs:?}");
        }
    }
}

#[cfg(test)]
mod tests;
