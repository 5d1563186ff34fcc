//! Model tests of the state machine: random interleavings of present, acquire, release,
//! attach, detach and kill over FIFO and mailbox consumers (proptest), each step checked
//! against the invariants and against an independent model of what each consumer must see.

use super::*;
use proptest::prelude::*;
use std::collections::{BTreeSet, VecDeque};

#[derive(Clone, Debug)]
enum Op {
    ProducerTake,
    ProducerPresent,
    ProducerDiscard,
    Take(usize),
    Untake(usize),
    Release(usize, bool),
    Attach(bool, usize),
    Detach(usize),
    Kill(usize),
    Request(usize),
}

fn op(seats: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::ProducerTake),
        3 => Just(Op::ProducerPresent),
        1 => Just(Op::ProducerDiscard),
        4 => (0..seats).prop_map(Op::Take),
        1 => (0..seats).prop_map(Op::Untake),
        4 => (0..seats, any::<bool>()).prop_map(|(c, r)| Op::Release(c, r)),
        1 => (any::<bool>(), 1..6usize).prop_map(|(m, l)| Op::Attach(m, l)),
        1 => (0..seats).prop_map(Op::Detach),
        1 => (0..seats).prop_map(Op::Kill),
        2 => (0..seats).prop_map(Op::Request),
    ]
}

/// What each consumer must see, kept apart from the state machine.
#[derive(Default, Clone)]
struct Expect {
    attached: bool,
    mailbox: bool,
    /// FIFO: sequences offered and not taken, in order; mailbox: the newest offered.
    offered: VecDeque<u64>,
    /// Slots taken and not released, with their sequences.
    held: Vec<(usize, u64)>,
    /// Every sequence delivered since the last attach.
    seen: BTreeSet<u64>,
    /// A remote mailbox consumer asked for a frame and was not sent one yet.
    wants: bool,
    /// Most frames it may hold and have queued.
    limit: usize,
}

/// A frame sent to remote mailbox consumer `c` (on its request, a present or a release that
/// made room): it must be the newest offered, and it is held from now on.
fn sent_to_mailbox(e: &mut Expect, c: usize, slot: usize, seq: u64) {
    assert!(e.wants, "mailbox {c} was sent a frame it did not ask for");
    assert!(e.held.len() < e.limit, "mailbox {c} was sent a frame beyond its limit");
    assert!(e.seen.insert(seq), "sequence {seq} delivered twice to {c}");
    assert!(e.seen.last() == Some(&seq), "sequences of {c} must increase");
    e.wants = false;
    e.held.push((slot, seq));
}

fn run(frames: usize, seats: usize, remote: u32, ops: Vec<Op>) {
    let mut st = StreamState::new(frames, seats, remote);
    let mut ex = vec![Expect::default(); seats];
    let mut writing: Option<(usize, u64)> = None;
    for op in ops {
        match op {
            Op::ProducerTake => match st.producer_take() {
                Take::Slot { slot, sequence, .. } => {
                    assert!(writing.is_none());
                    for (c, e) in ex.iter().enumerate() {
                        assert!(
                            !e.held.iter().any(|h| h.0 == slot),
                            "producer took slot {slot} consumer {c} holds"
                        );
                    }
                    writing = Some((slot, sequence));
                }
                Take::Busy { holders, .. } => {
                    assert!(writing.is_none());
                    assert!(!holders.is_empty());
                    // Busy only when every slot is held or queued by someone.
                    for s in 0..frames {
                        assert!(!st.holders(s).is_empty(), "slot {s} is free but the producer was told busy");
                    }
                }
                Take::AlreadyHeld => assert!(writing.is_some()),
            },
            Op::ProducerDiscard => {
                st.producer_discard();
                writing = None;
            }
            Op::ProducerPresent => {
                let Some((slot, seq)) = writing.take() else {
                    assert_eq!(
                        st.present(0, FrameMeta::new(st.next_sequence())).unwrap_err(),
                        Misfit::NotProducers
                    );
                    continue;
                };
                let out = st.present(slot, FrameMeta::new(seq)).unwrap();
                for (c, e) in ex.iter_mut().enumerate() {
                    if !e.attached {
                        assert!(!st.holders(slot).contains(c));
                        continue;
                    }
                    let remote_c = remote & (1 << c) != 0;
                    if e.mailbox && !e.offered.is_empty() {
                        assert!(out.replaced.iter().any(|r| r.0 == c), "mailbox {c} not emptied");
                        e.offered.clear();
                    }
                    if st.holders(slot).contains(c) {
                        if remote_c && !e.mailbox {
                            assert!(out.send_to.contains(c));
                            e.held.push((slot, seq));
                            e.seen.insert(seq);
                        } else if remote_c && out.send_to.contains(c) {
                            sent_to_mailbox(e, c, slot, seq);
                        } else {
                            assert!(!out.send_to.contains(c));
                            e.offered.push_back(seq);
                        }
                    } else {
                        assert!(!out.send_to.contains(c));
                    }
                }
            }
            Op::Take(c) => {
                if remote & (1 << c) != 0 {
                    assert!(st.consumer_take(c).is_none());
                    continue;
                }
                match st.consumer_take(c) {
                    Some((slot, meta)) => {
                        let e = &mut ex[c];
                        assert!(e.attached);
                        assert_ne!(
                            Some(slot),
                            writing.map(|w| w.0),
                            "consumer {c} got the slot being written"
                        );
                        let want = if e.mailbox { e.offered.pop_back() } else { e.offered.pop_front() };
                        assert_eq!(Some(meta.sequence), want, "consumer {c} got the wrong frame");
                        if e.mailbox {
                            assert!(e.offered.is_empty());
                        }
                        assert!(
                            e.seen.insert(meta.sequence),
                            "sequence {} delivered twice to {c}",
                            meta.sequence
                        );
                        assert!(e.seen.last() == Some(&meta.sequence), "sequences of {c} must increase");
                        st.delivered(c, meta.sequence);
                        e.held.push((slot, meta.sequence));
                    }
                    None => assert!(!ex[c].attached || ex[c].offered.is_empty()),
                }
            }
            Op::Untake(c) => {
                // Undo the newest take, as a failed engine wait does.
                if remote & (1 << c) != 0 {
                    continue;
                }
                let Some(&(slot, seq)) = ex[c].held.last() else { continue };
                if !ex[c].attached {
                    continue;
                }
                ex[c].held.pop();
                ex[c].seen.remove(&seq);
                // Roll the counter back as the ring does: it counts only completed acquires,
                // so the test counts here instead and undoes it.
                let s = &mut st.seat[c].stats;
                s.delivered -= 1;
                s.last_sequence = ex[c].seen.last().copied();
                let dropped = st.consumer_untake(c, slot);
                let e = &mut ex[c];
                if dropped {
                    assert!(e.mailbox && !e.offered.is_empty());
                } else if e.mailbox {
                    e.offered.push_back(seq);
                } else {
                    e.offered.push_front(seq);
                }
            }
            Op::Release(c, read) => {
                let Some((slot, _)) = ex[c].held.first().copied() else {
                    // A release of a slot not held is refused (a stale or replayed token).
                    assert_eq!(st.consumer_release(c, 0, read), Err(Misfit::NotHeld));
                    continue;
                };
                st.consumer_release(c, slot, read).unwrap();
                ex[c].held.remove(0);
                if let Some((slot, meta)) = st.serve(c) {
                    let e = &mut ex[c];
                    assert_eq!(e.offered.pop_back(), Some(meta.sequence), "mailbox {c} sent the wrong frame");
                    sent_to_mailbox(e, c, slot, meta.sequence);
                }
                // Replayed: refused.
                if !ex[c].held.iter().any(|h| h.0 == slot) {
                    assert_eq!(st.consumer_release(c, slot, read), Err(Misfit::NotHeld));
                }
            }
            Op::Attach(mailbox, limit) => {
                let mode = if mailbox { QueueMode::Mailbox } else { QueueMode::Fifo };
                if let Some(c) = st.attach(mode, limit, |_| true) {
                    assert!(!ex[c].attached && ex[c].held.is_empty());
                    ex[c] = Expect {
                        attached: true,
                        mailbox,
                        limit: limit.clamp(1, frames),
                        ..Default::default()
                    };
                    assert_eq!(st.stats(c), ConsumerStats::default());
                } else {
                    assert!((0..seats).all(|c| st.status(c) != SeatStatus::Vacant));
                }
            }
            Op::Detach(c) => {
                let back = st.detach(c);
                let e = &mut ex[c];
                if e.attached {
                    assert_eq!(back.len(), e.offered.len());
                    e.offered.clear();
                    e.attached = false;
                    e.wants = false;
                } else {
                    assert!(back.is_empty());
                }
            }
            Op::Kill(c) => {
                st.kill(c);
                ex[c] = Expect::default();
                assert_eq!(st.status(c), SeatStatus::Vacant);
            }
            Op::Request(c) => {
                let e = &mut ex[c];
                let requester = e.attached && e.mailbox && remote & (1 << c) != 0;
                match st.request(c) {
                    Err(m) => {
                        assert!(!requester, "mailbox {c} in another process refused: {m:?}");
                        assert_eq!(m, Misfit::NoRemoteMailbox);
                    }
                    Ok(sent) => {
                        assert!(requester, "consumer {c} asked for a frame it cannot ask for");
                        e.wants = true;
                        match sent {
                            Some((slot, meta)) => {
                                assert_eq!(
                                    e.offered.pop_back(),
                                    Some(meta.sequence),
                                    "mailbox {c}: wrong frame"
                                );
                                sent_to_mailbox(e, c, slot, meta.sequence);
                            }
                            None => assert!(
                                e.offered.is_empty() || e.held.len() >= e.limit,
                                "mailbox {c} asked with a frame waiting and room, and got nothing"
                            ),
                        }
                    }
                }
            }
        }
        st.check();
        for (c, e) in ex.iter().enumerate() {
            if e.attached {
                assert_eq!(st.stats(c).delivered, e.seen.len() as u64, "delivered count of {c}");
                assert_eq!(st.stats(c).last_sequence, e.seen.last().copied());
            }
            for &(slot, _) in &e.held {
                assert!(st.holds(c, slot), "consumer {c} lost slot {slot}");
            }
        }
    }
    // Every frame is eventually reclaimed: once each consumer releases what it holds and
    // detaches, the producer gets every slot in turn.
    st.producer_discard();
    for (c, e) in ex.iter().enumerate() {
        st.detach(c);
        for &(slot, _) in &e.held {
            st.consumer_release(c, slot, true).unwrap();
        }
        assert_eq!(st.status(c), SeatStatus::Vacant, "seat {c} not vacant after releasing everything");
    }
    st.check();
    let mut got = BTreeSet::new();
    for _ in 0..frames {
        match st.producer_take() {
            Take::Slot { slot, sequence, .. } => {
                got.insert(slot);
                st.present(slot, FrameMeta::new(sequence)).unwrap();
            }
            other => panic!("slot lost: {other:?}"),
        }
    }
    assert_eq!(got.len(), frames, "every slot comes back");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 4 } else { 512 }, ..ProptestConfig::default() })]

    #[test]
    fn random_interleavings_keep_every_invariant(
        frames in 2..=6usize,
        seats in 1..=5usize,
        remote in 0..32u32,
        ops in proptest::collection::vec(op(5), 1..200),
    ) {
        let ops = ops.into_iter().filter(|o| match o {
            Op::Take(c) | Op::Untake(c) | Op::Release(c, _) | Op::Detach(c) | Op::Kill(c) | Op::Request(c) => {
                *c < seats
            }
            _ => true,
        }).collect();
        run(frames, seats, remote & ((1 << seats) - 1), ops);
    }
}

#[test]
fn a_mailbox_consumer_gets_the_newest_frame_and_the_older_one_goes_back() {
    let mut st = StreamState::new(3, 1, 0);
    st.attach(QueueMode::Mailbox, 1, |_| true).unwrap();
    let mut replaced = Vec::new();
    for seq in 0..5 {
        let Take::Slot { slot, sequence, .. } = st.producer_take() else {
            panic!("the producer never waits")
        };
        assert_eq!(sequence, seq);
        replaced.extend(st.present(slot, FrameMeta::new(seq)).unwrap().replaced);
    }
    // Frames 0..=3 were replaced in turn; frame 4 waits in the mailbox.
    assert_eq!(replaced.len(), 4);
    let (_, meta) = st.consumer_take(0).unwrap();
    assert_eq!(meta.sequence, 4);
    assert_eq!(st.stats(0).skipped, 4);
}

#[test]
fn a_slow_mailbox_consumer_holds_the_producer_back_by_what_it_holds_only() {
    let mut st = StreamState::new(2, 2, 0);
    st.attach(QueueMode::Mailbox, 1, |_| true).unwrap();
    // Consumer 0 takes a frame and keeps it; the producer still cycles through the other slot.
    let Take::Slot { slot, sequence, .. } = st.producer_take() else { panic!() };
    st.present(slot, FrameMeta::new(sequence)).unwrap();
    let (held, _) = st.consumer_take(0).unwrap();
    for _ in 0..10 {
        let Take::Slot { slot, sequence, .. } = st.producer_take() else { panic!("held back") };
        assert_ne!(slot, held);
        st.present(slot, FrameMeta::new(sequence)).unwrap();
        st.check();
    }
    // Its limit of 1 refused every frame while it held one.
    assert_eq!(st.stats(0).skipped, 10);
}

#[test]
fn a_fifo_consumer_paces_the_producer() {
    let mut st = StreamState::new(2, 1, 0);
    st.attach(QueueMode::Fifo, usize::MAX, |_| true).unwrap();
    for seq in 0..2 {
        let Take::Slot { slot, .. } = st.producer_take() else { panic!() };
        st.present(slot, FrameMeta::new(seq)).unwrap();
    }
    assert!(
        matches!(st.producer_take(), Take::Busy { slot: 0, sequence: 0, holders } if holders.contains(0))
    );
    let (slot, meta) = st.consumer_take(0).unwrap();
    assert_eq!((slot, meta.sequence), (0, 0));
    st.consumer_release(0, slot, true).unwrap();
    assert!(matches!(st.producer_take(), Take::Slot { slot: 0, sequence: 2, unread: false }));
}

#[test]
fn a_frame_no_consumer_read_is_reported_unread_to_the_producer() {
    let mut st = StreamState::new(2, 1, 0);
    for seq in 0..2 {
        let Take::Slot { slot, .. } = st.producer_take() else { panic!() };
        st.present(slot, FrameMeta::new(seq)).unwrap();
    }
    assert!(matches!(st.producer_take(), Take::Slot { slot: 0, unread: true, .. }));
}

#[test]
fn a_late_consumer_gets_frames_from_the_next_present_on() {
    let mut st = StreamState::new(3, 2, 0);
    st.attach(QueueMode::Fifo, 3, |c| c == 0).unwrap();
    let Take::Slot { slot, sequence, .. } = st.producer_take() else { panic!() };
    st.present(slot, FrameMeta::new(sequence)).unwrap();
    assert_eq!(st.attach(QueueMode::Fifo, 3, |_| true), Some(1));
    assert!(st.consumer_take(1).is_none());
    let Take::Slot { slot, sequence, .. } = st.producer_take() else { panic!() };
    st.present(slot, FrameMeta::new(sequence)).unwrap();
    assert_eq!(st.consumer_take(1).map(|(_, m)| m.sequence), Some(1));
    assert_eq!(st.consumer_take(0).map(|(_, m)| m.sequence), Some(0));
}

#[test]
fn a_mailbox_consumer_in_another_process_is_sent_the_newest_frame_only_when_it_asks() {
    let mut st = StreamState::new(3, 1, 1);
    st.attach(QueueMode::Mailbox, 1, |_| true).unwrap();
    let present = |st: &mut StreamState| {
        let Take::Slot { slot, sequence, .. } = st.producer_take() else {
            panic!("the producer never waits")
        };
        (slot, st.present(slot, FrameMeta::new(sequence)).unwrap())
    };
    // Nothing asked: nothing sent; each frame replaces the one before in the mailbox here.
    for _ in 0..4 {
        let (_, out) = present(&mut st);
        assert!(out.send_to.is_empty());
    }
    assert_eq!(st.stats(0).skipped, 3);
    // Asking takes the newest (frame 3) at once.
    let (slot, meta) = st.request(0).unwrap().unwrap();
    assert_eq!(meta.sequence, 3);
    assert!(st.holds(0, slot));
    // Asking again while it holds its limit of one: nothing until it releases.
    assert_eq!(st.request(0).unwrap(), None);
    let (_, out) = present(&mut st);
    assert!(out.send_to.is_empty(), "beyond its limit");
    assert_eq!(st.stats(0).skipped, 4, "frame 4 came while it held its limit");
    st.consumer_release(0, slot, true).unwrap();
    assert_eq!(st.serve(0), None, "nothing waits in its mailbox");
    // Its request still stands: the next frame goes out as it is presented.
    let (slot, out) = present(&mut st);
    assert!(out.send_to.contains(0));
    assert!(st.holds(0, slot));
    assert_eq!(st.stats(0).last_sequence, Some(5));
    st.check();
    // A FIFO consumer, or one in this process, cannot ask.
    let mut fifo = StreamState::new(2, 2, 0b01);
    fifo.attach(QueueMode::Fifo, 2, |c| c == 0).unwrap();
    fifo.attach(QueueMode::Mailbox, 2, |c| c == 1).unwrap();
    assert_eq!(fifo.request(0), Err(Misfit::NoRemoteMailbox));
    assert_eq!(fifo.request(1), Err(Misfit::NoRemoteMailbox));
}
