//! Loom models of the seat service's in-process protocol: the producer queues frames in the
//! seats' outboxes and rings the doorbell ([`Outboxes::queue`], [`Outboxes::ring`], as a present
//! does), each seat's sender drains its outbox and sleeps on the doorbell
//! ([`Outboxes::run_sender`], the loop of its thread), and the service's drop stops them
//! ([`Outboxes::stop_senders`]). The code run is the service's own; only the futex under the
//! doorbell is loom's emulation ([`super::super::sync::Futex`]), which never times out, so a
//! missed wake-up is a sender asleep for ever: a deadlock, which loom reports. (The doorbell's
//! handshake uses SeqCst fences, which loom models; without them loom reports a deadlock that
//! the C++ memory model rules out, as it takes SeqCst loads and writes for AcqRel.)
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --lib loom` (`.ci/run`'s loom step).

use super::super::sync::model;
use super::{AtomicBool, Outboxes};
use crate::pipeline::state::FrameMeta;
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

/// A frame of sequence `n` (in slot `n % 4`) for session `session`.
fn queue(outbox: &Outboxes, k: usize, n: u64, session: u64) {
    assert!(outbox.queue(k, (n % 4) as usize, &FrameMeta::new(n), session), "outbox {k} full");
}

/// What the senders sent, by seat, for the producer to wait on.
#[derive(Default)]
struct Sent {
    by_seat: Mutex<[Vec<u64>; 2]>,
    more: Condvar,
}

impl Sent {
    /// Waits until seat `k`'s sender sent `n` frames. A sender asleep after a ring that did
    /// not wake it never gets there: loom reports the deadlock.
    fn wait_for(&self, k: usize, n: usize) {
        let mut sent = self.by_seat.lock().unwrap();
        while sent[k].len() < n {
            sent = self.more.wait(sent).unwrap();
        }
    }
}

/// Runs seat `k`'s sender on its own thread, recording what it sends, until `stop`.
fn sender(
    outbox: &Arc<Outboxes>,
    stop: &Arc<AtomicBool>,
    sent: &Arc<Sent>,
    k: usize,
) -> thread::JoinHandle<()> {
    let (outbox, stop, sent) = (outbox.clone(), stop.clone(), sent.clone());
    thread::spawn(move || {
        outbox.run_sender(k, &stop, |o| {
            sent.by_seat.lock().unwrap()[k].push(o.meta.sequence);
            sent.more.notify_all();
        });
    })
}

/// One sender, two presents: whatever the interleaving of the sender's look at its outbox and
/// its sleep with the producer's queue and ring, the sender is woken for each frame and sends
/// both, once each, in order. The producer stops it only once it sent both, so the stop's own
/// ring never stands in for a ring that did not wake it. At most 4 preemptions (15,800
/// executions).
#[test]
fn loom_doorbell_wakes_a_sender_for_every_present() {
    model(Some(4), || {
        let outbox = Arc::new(Outboxes::new(1));
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(Sent::default());
        let s = sender(&outbox, &stop, &sent, 0);
        for n in 1..=2 {
            queue(&outbox, 0, n, 1);
            outbox.ring();
        }
        sent.wait_for(0, 2);
        outbox.stop_senders(&stop);
        s.join().unwrap();
        assert_eq!(sent.by_seat.lock().unwrap()[0], [1, 2]);
    });
}

/// Two seats, each with its sender, and one ring per present for both (as a present offered to
/// two consumers in other processes does), two presents: each sender sends exactly its seat's
/// frames, once each, in order; no frame is lost to a ring the other sender took, and none is
/// sent twice. At most 2 preemptions (29,037 executions).
#[test]
fn loom_two_senders_send_each_frame_once() {
    model(Some(2), || {
        let outbox = Arc::new(Outboxes::new(2));
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(Sent::default());
        let senders = [sender(&outbox, &stop, &sent, 0), sender(&outbox, &stop, &sent, 1)];
        for n in 1..=2 {
            queue(&outbox, 0, n, 1);
            queue(&outbox, 1, n, 1);
            outbox.ring();
        }
        sent.wait_for(0, 2);
        sent.wait_for(1, 2);
        outbox.stop_senders(&stop);
        for s in senders {
            s.join().unwrap();
        }
        assert_eq!(*sent.by_seat.lock().unwrap(), [[1, 2], [1, 2]]);
    });
}

/// The service's drop right after a present: the frame is still sent (the drop's comment, "the
/// senders send what is queued, then stop"), and the sender returns, whether it was asleep or
/// looking at its outbox when the drop came. At most 4 preemptions (2,506 executions).
///
/// This model found a frame left unsent: the sender read its stop flag after draining its
/// outbox, so with the sender's drain finding nothing, then the producer's queue, ring and stop,
/// then the sender's look at the flag, the sender returned with the frame still queued. It now
/// reads the flag before the drain.
#[test]
fn loom_stop_sends_what_is_queued_then_returns() {
    model(Some(4), || {
        let outbox = Arc::new(Outboxes::new(1));
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(Sent::default());
        let s = sender(&outbox, &stop, &sent, 0);
        queue(&outbox, 0, 1, 1);
        outbox.ring();
        outbox.stop_senders(&stop);
        s.join().unwrap();
        assert_eq!(sent.by_seat.lock().unwrap()[0], [1]);
    });
}

/// The stop with two senders and nothing queued: both return (the stop's ring wakes every
/// sleeper, not one). At most 3 preemptions (9,438 executions).
#[test]
fn loom_stop_wakes_every_sender() {
    model(Some(3), || {
        let outbox = Arc::new(Outboxes::new(2));
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(Sent::default());
        let senders = [sender(&outbox, &stop, &sent, 0), sender(&outbox, &stop, &sent, 1)];
        outbox.stop_senders(&stop);
        for s in senders {
            s.join().unwrap();
        }
        assert_eq!(*sent.by_seat.lock().unwrap(), [Vec::<u64>::new(), Vec::new()]);
    });
}
