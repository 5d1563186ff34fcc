//! The wake-ups of consumers in this process that wait for a frame as a future
//! ([`Consumer::next_frame`](crate::pipeline::Consumer::next_frame)) rather than on the ring's
//! condition variable: one task waker per seat, kept beside the state machine under the ring's
//! lock (the state machine itself knows nothing of them).
//!
//! A waiting future looks at its queue and, finding it empty, leaves its waker here under the
//! same hold of the lock; a present queues the frame and takes the wakers of the consumers it
//! queued it for under that lock too, and wakes them after letting go of it. So no present falls
//! between the look and the registration, and no waker runs under the ring's lock.

use crate::pipeline::config::MAX_CONSUMERS;
use crate::pipeline::state::{FrameMeta, StreamState};
use std::task::Waker;

/// At most one registered waker per consumer seat.
#[derive(Default)]
pub(crate) struct ConsumerWakers {
    wakers: [Option<Waker>; MAX_CONSUMERS],
    /// Bit `c` set while seat `c` has a waker here (a present with nobody waiting looks no
    /// further).
    registered: u32,
}

impl ConsumerWakers {
    /// Consumer `c` (in this process) takes its next queued frame from `st` (and a waker it
    /// left at an earlier look is forgotten), or, finding none, leaves `waker` here. Called
    /// under the ring's lock, one hold for both: no present falls between the look and the
    /// registration.
    pub(crate) fn take_or_register(
        &mut self,
        st: &mut StreamState,
        c: usize,
        waker: &Waker,
    ) -> Option<(usize, FrameMeta)> {
        let taken = st.consumer_take(c);
        match taken {
            None => self.register(c, waker),
            Some(_) if self.registered & (1 << c) != 0 => self.clear(c),
            Some(_) => {}
        }
        taken
    }

    /// After the present of the frame in `slot` to `st`, under the same hold of the ring's lock:
    /// the wakers of the consumers in this process (`here`, one bit each) the frame was queued
    /// for, to be woken once the lock is let go.
    pub(crate) fn take_presented(
        &mut self,
        st: &StreamState,
        slot: usize,
        here: u32,
    ) -> heapless::Vec<Waker, MAX_CONSUMERS> {
        self.take(st.holders(slot).0 & here)
    }

    /// Leaves `waker` for consumer `c`: the next present that queues a frame for it wakes it.
    /// Replaces an earlier waker of `c` (cloning only when it would wake another task).
    fn register(&mut self, c: usize, waker: &Waker) {
        match &mut self.wakers[c] {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
        self.registered |= 1 << c;
    }

    /// Forgets consumer `c`'s waker (its future completed or was dropped): a waker left here
    /// would keep that task's memory alive until the next present.
    pub(crate) fn clear(&mut self, c: usize) {
        self.wakers[c] = None;
        self.registered &= !(1 << c);
    }

    /// Takes the wakers of the consumers in `consumers` (one bit each), to be woken once the
    /// ring's lock is let go.
    fn take(&mut self, consumers: u32) -> heapless::Vec<Waker, MAX_CONSUMERS> {
        let mut due = self.registered & consumers;
        self.registered &= !due;
        let mut out = heapless::Vec::new();
        while due != 0 {
            let c = due.trailing_zeros() as usize;
            due &= due - 1;
            if let Some(w) = self.wakers[c].take() {
                // Cannot overflow: at most one waker per seat.
                let _ = out.push(w);
            }
        }
        out
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
