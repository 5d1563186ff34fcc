//! Loom models of the wake-up of consumers in this process that wait for a frame as a future
//! ([`Consumer::next_frame`](crate::pipeline::Consumer::next_frame)).
//!
//! The registry ([`ConsumerWakers`]) and the state machine ([`StreamState`]) are the ring's own,
//! called as the ring calls them; the ring's lock is loom's mutex here, held the way the ring
//! holds its own: the future's poll takes its frame or leaves its waker in one hold
//! ([`ConsumerWakers::take_or_register`], as `next_frame`'s `arrive_here`), the present queues
//! the frame and takes the wakers in one hold ([`ConsumerWakers::take_presented`], as
//! `Producer::publish`) and wakes them after letting go, and a future that completes forgets its
//! waker ([`ConsumerWakers::clear`], as `arrive_here`'s guard). The futures run on
//! `loom::future::block_on`, which parks its thread until the waker is woken: a present that
//! does not wake a registered future leaves that thread parked for ever, which loom reports as
//! a deadlock.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --lib loom` (`.ci/run`'s loom step).

use super::super::sync::model;
use super::ConsumerWakers;
use crate::pipeline::state::{FrameMeta, QueueMode, StreamState, Take};
use loom::sync::{Arc, Mutex};
use loom::thread;
use std::task::Poll;

/// The ring's state under its lock (`ring::Shared`, reduced to what this protocol touches).
struct Shared {
    st: StreamState,
    wakers: ConsumerWakers,
}

/// A stream of `frames` slots with a consumer in this process on each seat in `modes`.
fn stream(frames: usize, modes: &[QueueMode]) -> Arc<Mutex<Shared>> {
    let mut st = StreamState::new(frames, modes.len(), 0);
    for (c, &mode) in modes.iter().enumerate() {
        assert_eq!(st.attach(mode, usize::MAX, |s| s == c), Some(c));
    }
    Arc::new(Mutex::new(Shared { st, wakers: ConsumerWakers::default() }))
}

/// Consumer `c`'s `next_frame`: its next frame, waited for as a future; then it counts and
/// releases it (the frame's own engine wait and release fence are not part of this protocol).
fn next_frame(ring: &Mutex<Shared>, c: usize) -> u64 {
    let (slot, meta) = loom::future::block_on(std::future::poll_fn(|cx| {
        let mut sh = ring.lock().unwrap();
        let sh = &mut *sh;
        match sh.wakers.take_or_register(&mut sh.st, c, cx.waker()) {
            Some(f) => Poll::Ready(f),
            None => Poll::Pending,
        }
    }));
    let mut sh = ring.lock().unwrap();
    sh.wakers.clear(c);
    sh.st.delivered(c, meta.sequence);
    sh.st.consumer_release(c, slot, true).expect("the consumer holds the frame it took");
    meta.sequence
}

/// The producer's acquire and present of one frame (a free slot is there: the models give the
/// ring more slots than frames), waking the futures the frame was queued for after letting go
/// of the lock.
fn present(ring: &Mutex<Shared>) {
    let woken = {
        let mut sh = ring.lock().unwrap();
        let sh = &mut *sh;
        let Take::Slot { slot, sequence, .. } = sh.st.producer_take() else {
            panic!("no free slot in the model")
        };
        sh.st.present(slot, FrameMeta::new(sequence)).expect("the producer holds the slot");
        sh.wakers.take_presented(&sh.st, slot, u32::MAX)
    };
    woken.into_iter().for_each(std::task::Waker::wake);
}

/// One FIFO consumer waiting for two frames while the producer presents them: it is woken for
/// each (whether it registered before the present, or looked after it) and gets both, in order.
/// Every interleaving (no preemption bound: 161 executions).
#[test]
fn loom_waiting_consumer_is_woken_by_every_present() {
    model(None, || {
        let ring = stream(3, &[QueueMode::Fifo]);
        let consumer = {
            let ring = ring.clone();
            thread::spawn(move || [next_frame(&ring, 0), next_frame(&ring, 0)])
        };
        present(&ring);
        present(&ring);
        assert_eq!(consumer.join().unwrap(), [0, 1]);
        let sh = ring.lock().unwrap();
        sh.st.check();
        assert_eq!(sh.st.stats(0).delivered, 2);
    });
}

/// A FIFO and a mailbox consumer waiting at once, two presents: both are woken (one present
/// wakes every consumer it queued the frame for, not one), the FIFO consumer gets both frames
/// in order, and the mailbox consumer gets one of them, the newest at the time it looked (the
/// first was replaced in its mailbox if it looked only after the second present). At most 3
/// preemptions (6,264 executions).
#[test]
fn loom_fifo_and_mailbox_consumers_are_both_woken() {
    model(Some(3), || {
        let ring = stream(4, &[QueueMode::Fifo, QueueMode::Mailbox]);
        let fifo = {
            let ring = ring.clone();
            thread::spawn(move || [next_frame(&ring, 0), next_frame(&ring, 0)])
        };
        let mailbox = {
            let ring = ring.clone();
            thread::spawn(move || next_frame(&ring, 1))
        };
        present(&ring);
        present(&ring);
        assert_eq!(fifo.join().unwrap(), [0, 1]);
        let got = mailbox.join().unwrap();
        let sh = ring.lock().unwrap();
        sh.st.check();
        let stats = sh.st.stats(1);
        // One delivered; the other frame either replaced unread (frame 0 only) or still queued.
        assert_eq!(stats.delivered, 1);
        assert_eq!(stats.skipped, if got == 1 { 1 } else { 0 });
    });
}
