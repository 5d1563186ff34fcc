//! The bytes of a CUDA consumer's frame on the host: one device -> pinned host copy per frame on
//! the consumer's stream, between the present wait that `acquire` enqueued and the release
//! signal that `release` enqueues, so the ring's fences order it on both sides.

use nvsci::cuda::cudarc::driver::{DeviceSlice, PinnedHostSlice};
use nvsci::pipeline::{Consumer, ConsumerFrame};

/// Page-locked host memory the frames of one CUDA consumer are copied into, allocated at the
/// first frame (the size of the frame's mapping) and reused for every later one.
#[derive(Default)]
pub(crate) struct Readback {
    pinned: Option<PinnedHostSlice<u8>>,
}

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
        Ok(())
    }

    /// Waits until the consumer's stream has done the copy that [`enqueue`](Self::enqueue)
    /// queued (and everything before it), and returns the frame's bytes.
    pub(crate) fn finish(&self, consumer: &Consumer) -> nvsci::Result<&[u8]> {
        let (Some(stream), Some(pinned)) = (consumer.stream(), &self.pinned) else {
            return Err(nvsci::Error::InvalidArgument {
                name: "consumer",
                reason: "no device -> host copy was enqueued".into(),
            });
        };
        stream.synchronize()?;
        Ok(pinned.as_slice()?)
    }
}
