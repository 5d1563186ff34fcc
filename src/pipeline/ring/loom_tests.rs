//! A loom model of the ring's lock and condition variable (`Inner::shared`, `Inner::changed`):
//! a producer waiting for a free slot while consumers release or detach, and consumers
//! waiting for a frame while the producer presents.
//!
//! This is a model of the pattern, not the ring's code: the ring needs a backend (buffers,
//! fences), which loom cannot run. The state machine ([`StreamState`]) is the ring's own; the
//! lock and the condition variable are loom's, held and notified in the shape `ring.rs` holds
//! and notifies its own, step for step:
//!
//! * the producer's acquire (`acquire_slot`): a take in one hold of the lock; when every slot
//!   is busy, a second hold that looks for a free slot again before it waits;
//! * a consumer's acquire (`Consumer::acquire_until`, `Inner::wait_state`): a take in one hold;
//!   finding nothing, a second hold that takes or waits, in a loop;
//! * the producer's present (`Producer::publish`), a consumer's release (`Inner::give_back`)
//!   and a consumer's drop (`Drop for Consumer`): the change in one hold, `notify_all` after
//!   letting go of the lock.
//!
//! loom's timed wait never times out, so a notify that a waiter misses leaves it waiting for
//! ever, which loom reports as a deadlock, where the ring's wait would only end in a timeout.
//! What the model leaves out: fence waits and signals, the links to consumers in other
//! processes (the producer's polls of their endpoints between waits), and the wake-ups of
//! async consumers (modelled in `wakers::loom_tests`).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --lib loom` (`.ci/run`'s loom step).

use super::sync::model;
use crate::pipeline::state::{FrameMeta, QueueMode, StreamState, Take};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

/// The ring's lock and condition variable around the state machine.
struct Ring {
    shared: Mutex<StreamState>,
    changed: Condvar,
}

/// A ring of `frames` slots with a consumer in this process on each seat in `modes`.
fn ring(frames: usize, modes: &[QueueMode]) -> Arc<Ring> {
    let mut st = StreamState::new(frames, modes.len(), 0);
    for (c, &mode) in modes.iter().enumerate() {
        assert_eq!(st.attach(mode, usize::MAX, |s| s == c), Some(c));
    }
    Arc::new(Ring { shared: Mutex::new(st), changed: Condvar::new() })
}

impl Ring {
    /// `acquire_slot`: the slot to write, and the frame's sequence.
    fn producer_acquire(&self) -> (usize, u64) {
        loop {
            let took = self.shared.lock().unwrap().producer_take();
            match took {
                Take::Slot { slot, sequence, .. } => return (slot, sequence),
                Take::AlreadyHeld => panic!("the producer holds a frame already"),
                Take::Busy { .. } => {
                    let sh = self.shared.lock().unwrap();
                    if sh.has_free_slot() {
                        continue;
                    }
                    drop(self.changed.wait(sh).unwrap());
                }
            }
        }
    }

    /// `Producer::publish`.
    fn present(&self, slot: usize, sequence: u64) {
        self.shared.lock().unwrap().present(slot, FrameMeta::new(sequence)).expect("the producer's slot");
        self.changed.notify_all();
    }

    /// The producer's loop: `n` frames acquired and presented.
    fn produce(&self, n: u64) {
        for expected in 0..n {
            let (slot, sequence) = self.producer_acquire();
            assert_eq!(sequence, expected);
            self.present(slot, sequence);
        }
    }

    /// `Consumer::acquire_until` (in this process) with `Inner::wait_state`: the slot and the
    /// sequence of consumer `c`'s next frame.
    fn consumer_acquire(&self, c: usize) -> (usize, u64) {
        let taken = self.shared.lock().unwrap().consumer_take(c);
        let (slot, meta) = match taken {
            Some(f) => f,
            None => {
                let mut sh = self.shared.lock().unwrap();
                loop {
                    if let Some(f) = sh.consumer_take(c) {
                        break f;
                    }
                    sh = self.changed.wait(sh).unwrap();
                }
            }
        };
        self.shared.lock().unwrap().delivered(c, meta.sequence);
        (slot, meta.sequence)
    }

    /// `Inner::give_back`: consumer `c` releases `slot` after reading it.
    fn release(&self, c: usize, slot: usize) {
        self.shared.lock().unwrap().consumer_release(c, slot, true).expect("the consumer's slot");
        self.changed.notify_all();
    }

    /// Consumer `c`'s loop: `n` frames acquired and released; their sequences.
    fn consume(&self, c: usize, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| {
                let (slot, sequence) = self.consumer_acquire(c);
                self.release(c, slot);
                sequence
            })
            .collect()
    }

    /// `Drop for Consumer`: consumer `c` detaches.
    fn detach(&self, c: usize) {
        drop(self.shared.lock().unwrap().detach(c));
        self.changed.notify_all();
    }
}

/// Two slots, one FIFO consumer, three frames: the producer's third acquire waits for the
/// consumer's release of the first frame, and the consumer waits for each frame while the
/// producer presents it. Neither misses the other's notify, and the consumer gets every frame
/// in order. At most 4 preemptions (3,324 executions; every interleaving, 608,652 executions,
/// passed once by hand in 3 minutes).
#[test]
fn loom_ring_producer_and_fifo_consumer_wait_for_each_other() {
    model(Some(4), || {
        let ring = ring(2, &[QueueMode::Fifo]);
        let consumer = {
            let ring = ring.clone();
            thread::spawn(move || ring.consume(0, 3))
        };
        ring.produce(3);
        assert_eq!(consumer.join().unwrap(), [0, 1, 2]);
        let st = ring.shared.lock().unwrap();
        st.check();
        assert!(st.has_free_slot(), "every frame was released");
    });
}

/// Two slots, a FIFO and a mailbox consumer, three frames: the producer waits only for the
/// frames the consumers hold or have queued (a mailbox's unread frame goes back when a newer
/// one replaces it), every wait ends, the FIFO consumer gets every frame in order and the
/// mailbox consumer one frame. At most 3 preemptions (44,207 executions).
#[test]
fn loom_ring_producer_waits_for_fifo_not_for_mailbox() {
    model(Some(3), || {
        let ring = ring(2, &[QueueMode::Fifo, QueueMode::Mailbox]);
        let fifo = {
            let ring = ring.clone();
            thread::spawn(move || ring.consume(0, 3))
        };
        let mailbox = {
            let ring = ring.clone();
            thread::spawn(move || ring.consume(1, 1))
        };
        ring.produce(3);
        assert_eq!(fifo.join().unwrap(), [0, 1, 2]);
        let got = mailbox.join().unwrap();
        assert!(got.len() == 1 && got[0] < 3, "the mailbox consumer got {got:?}");
        ring.shared.lock().unwrap().check();
    });
}

/// Two slots, one FIFO consumer that takes nothing and detaches (drops) while the producer
/// presents three frames: the producer, waiting for a free slot, is woken by the detach, which
/// hands the frames queued for the consumer back, and finishes. Every interleaving (236
/// executions).
#[test]
fn loom_ring_detach_wakes_a_waiting_producer() {
    model(None, || {
        let ring = ring(2, &[QueueMode::Fifo]);
        let consumer = {
            let ring = ring.clone();
            thread::spawn(move || ring.detach(0))
        };
        ring.produce(3);
        consumer.join().unwrap();
        let st = ring.shared.lock().unwrap();
        st.check();
        assert_eq!(st.status(0), crate::pipeline::state::SeatStatus::Vacant);
    });
}
