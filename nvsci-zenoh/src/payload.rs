//! The memory a CPU frame's message is published from: the frame's own mapping.
//!
//! A message is a `ZBytes` of several slices: the CDR prefix (a few dozen bytes), then the pixels.
//! A CPU frame's pixels are never copied: they are slices of the frame's mapping ([`HeldFrame`]),
//! one per plane, or one per row where the rows are packed narrower than the pitch, and the frame
//! stays held until Zenoh drops the message. Zenoh takes them as `bytes::Bytes` with an owner
//! (`Bytes::from_owner`; every slice shares it), whose drop runs when the last reference goes:
//! when `put` returns for a message sent over the network (Zenoh serialises it into its
//! transmission batches before `put` returns), or later if a subscriber in the same session keeps
//! the sample. (A CUDA frame's pixels come from reused pinned buffers: `pool`.)

use bytes::Bytes;
use nvsci::pipeline::ConsumerFrame;
use std::sync::mpsc::Sender;

/// A held CPU frame whose mapped bytes Zenoh reads in place. When Zenoh drops the last slice of
/// it, the frame goes back to the bridge's thread (`back`), which releases it; if that thread
/// is gone, the frame is dropped here, which releases it too (its present fence expired before
/// the CPU read it, so the drop does not wait).
pub(crate) struct HeldFrame {
    frame: Option<ConsumerFrame>,
    ptr: *const u8,
    len: usize,
    back: Sender<ConsumerFrame>,
}

// SAFETY: `ptr` is only read (through `AsRef`), and the bytes it points to stay mapped and
// unwritten while `frame` is held (see `HeldFrame::lend`), whichever thread holds this;
// `ConsumerFrame` and `Sender<ConsumerFrame>` are `Send`.
unsafe impl Send for HeldFrame {}

impl HeldFrame {
    /// The frame's `len` bytes at `ptr`, as message bytes.
    ///
    /// # Safety
    /// `ptr` and `len` are those of the frame's CPU mapping (`Consumer::cpu_read` of this very
    /// frame). The mapping is the ring's, made once per slot and kept while any handle of the
    /// ring lives (the frame is one), so the bytes stay readable at `ptr` after the read guard
    /// dropped; the producer does not write the slot while the frame is held.
    pub unsafe fn lend(
        frame: ConsumerFrame,
        ptr: *const u8,
        len: usize,
        back: Sender<ConsumerFrame>,
    ) -> Bytes {
        Bytes::from_owner(Self { frame: Some(frame), ptr, len, back })
    }
}

impl AsRef<[u8]> for HeldFrame {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `lend`'s contract: `len` readable bytes at `ptr` while the frame is held,
        // which it is until `self` drops.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for HeldFrame {
    fn drop(&mut self) {
        if let Some(frame) = self.frame.take() {
            // A closed channel hands the frame back in the error: dropping it releases it.
            if let Err(e) = self.back.send(frame) {
                drop(e.0);
            }
        }
    }
}
