//! The bytes of a CUDA consumer's frame on the host: one device -> pinned host copy per frame on
//! the consumer's stream, between the present wait that `acquire` enqueued and the release
//! signal that `release` enqueues, so the ring's fences order it on both sides.

use nvsci::cuda::cudarc::driver::{CudaEvent, DeviceSlice, PinnedHostSlice};
use nvsci::pipeline::{Consumer, ConsumerFrame};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Page-locked host memory the frames of one CUDA consumer are copied into, allocated at the
/// first frame (the size of the frame's mapping) and reused for every later one, and the event
/// recorded after each copy.
#[derive(Default)]
pub(crate) struct Readback {
    pinned: Option<PinnedHostSlice<u8>>,
    done: Option<CudaEvent>,
    /// Slot and sequence of the frame whose copy was enqueued last.
    frame: (usize, u64),
}

/// Polls of the copy's event with a yield before the waits turn into sleeps of `NAP`.
const SPINS: u32 = 2000;
const NAP: Duration = Duration::from_micros(100);

impl Readback {
    /// Enqueues the copy of the whole of a held frame's mapping into the pinned memory on the
    /// consumer's stream (after the frame's present wait, which `acquire` enqueued there).
    /// Release the frame after this (its release signal then follows the copy on the stream),
    /// then [`finish`](Self::finish).
    pub(crate) fn enqueue(&mut self, consumer: &Consumer, frame: &ConsumerFrame) -> nvsci::Result<()> {
        let stream = consumer.stream().ok_or_else(|| nvsci::Error::InvalidArgument {
            name: "consumer",
            reason: "a device -> host copy needs a consumer on a CUDA engine".into(),
        })?;
        let buffer = consumer.cuda_buffer(frame)?;
        let len = buffer.len();
        let pinned = match &mut self.pinned {
            Some(p) if p.len() == len => p,
            slot => {
                // Flags 0: cacheable page-locked memory, which the CPU reads at full speed
                // (cudarc's `alloc_pinned` asks for write-combined memory, which the CPU reads
                // uncached: right for uploads, slow for a read-back).
                // SAFETY: `alloc_pinned_with_flags` is unsafe because the memory is left
                // uninitialised; every byte is written by the copy below before the CPU reads
                // any (`finish` reads only after the stream finished that copy), and u8 has no
                // invalid bit patterns.
                let p = unsafe { stream.context().alloc_pinned_with_flags::<u8>(len, 0) }?;
                slot.insert(p)
            }
        };
        stream.memcpy_dtoh(buffer, pinned)?;
        let done = match &mut self.done {
            Some(e) => e,
            slot => slot.insert(stream.context().new_event(None)?),
        };
        done.record(stream)?;
        self.frame = (frame.index(), frame.sequence());
        Ok(())
    }

    /// Waits until the copy that [`enqueue`](Self::enqueue) queued is done, and returns the
    /// frame's bytes. The wait is bounded, so a present fence that never expires cannot hold the
    /// bridge's thread (and a drop of the bridge) forever: it gives up after `timeout`, or
    /// `grace` after `stop` is set, with [`nvsci::Error::Timeout`] naming the frame's present
    /// fence; the pinned memory the copy still targets is then leaked (freeing it under a pending
    /// copy would be undefined), and the next frame allocates anew.
    pub(crate) fn finish(
        &mut self,
        stop: &AtomicBool,
        grace: Duration,
        timeout: Duration,
    ) -> nvsci::Result<&[u8]> {
        let Some(done) = &self.done else {
            return Err(nvsci::Error::InvalidArgument {
                name: "consumer",
                reason: "no device -> host copy was enqueued".into(),
            });
        };
        let start = Instant::now();
        let mut stopping: Option<Instant> = None;
        let mut polls = 0u32;
        while !done.try_is_complete()? {
            if stopping.is_none() && stop.load(Ordering::Acquire) {
                stopping = Some(Instant::now());
            }
            let limit = match stopping {
                Some(at) => at.elapsed() >= grace,
                None => false,
            };
            if limit || start.elapsed() >= timeout {
                if let Some(p) = self.pinned.take() {
                    std::mem::forget(p);
                }
                let (slot, sequence) = self.frame;
                return Err(nvsci::Error::Timeout {
                    waited_for: nvsci::Wait::PresentFence { slot, sequence },
                    timeout: if limit { grace } else { timeout },
                });
            }
            polls += 1;
            if polls < SPINS {
                std::thread::yield_now();
            } else {
                std::thread::sleep(NAP);
            }
        }
        match &self.pinned {
            Some(p) => Ok(p.as_slice()?),
            None => Err(nvsci::Error::InvalidArgument {
                name: "consumer",
                reason: "no device -> host copy was enqueued".into(),
            }),
        }
    }
}
