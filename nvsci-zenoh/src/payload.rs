//! The memory a message's pixels are published from, and when it goes back.
//!
//! A message is a `ZBytes` of several slices: the CDR prefix (a few dozen bytes), then the pixels.
//! The pixels are never copied into a new allocation per frame: they are either the frame's own
//! mapping ([`HeldFrame`]: the frame stays held until Zenoh drops the message) or a buffer the
//! bridge reuses ([`Pool`]: back in the pool when Zenoh drops the message). Zenoh takes them as
//! `bytes::Bytes` with an owner (`Bytes::from_owner`), whose drop runs when the last reference
//! goes: when `put` returns for a message sent over the network (Zenoh serialises it into its
//! transmission batches before `put` returns), or later if a subscriber in the same session keeps
//! the sample.

use bytes::Bytes;
use nvsci::pipeline::ConsumerFrame;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use zenoh::bytes::ZBytes;

/// Bytes that Zenoh may read from any thread until it drops them.
pub(crate) trait Lendable: Send + 'static {
    /// The bytes.
    fn bytes(&self) -> &[u8];
}

impl Lendable for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// Buffers lent to Zenoh and given back when it drops them, so that a steady stream of messages
/// allocates nothing: at most `cap` are kept.
pub(crate) struct Pool<B> {
    free: Mutex<Vec<B>>,
    cap: usize,
}

impl<B: Lendable> Pool<B> {
    /// An empty pool that keeps at most `cap` buffers.
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self { free: Mutex::new(Vec::with_capacity(cap)), cap })
    }

    /// A free buffer for which `fits` holds, if there is one.
    pub fn take(&self, fits: impl Fn(&B) -> bool) -> Option<B> {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        let at = free.iter().position(fits)?;
        Some(free.swap_remove(at))
    }

    /// Buffers free now.
    #[cfg(test)]
    pub fn free(&self) -> usize {
        self.free.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Puts `b` back (dropped if the pool is full).
    pub fn give_back(&self, b: B) {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        if free.len() < self.cap {
            free.push(b);
        }
    }

    /// `b` as message bytes; `b` comes back to this pool when Zenoh drops them (or is dropped,
    /// if the pool is gone or full).
    pub fn lend(self: &Arc<Self>, b: B) -> ZBytes {
        ZBytes::from(Bytes::from_owner(Lent { buf: Some(b), pool: Arc::downgrade(self) }))
    }
}

/// A pool's buffer as Zenoh holds it.
struct Lent<B: Lendable> {
    buf: Option<B>,
    pool: Weak<Pool<B>>,
}

impl<B: Lendable> AsRef<[u8]> for Lent<B> {
    fn as_ref(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], Lendable::bytes)
    }
}

impl<B: Lendable> Drop for Lent<B> {
    fn drop(&mut self) {
        if let (Some(b), Some(pool)) = (self.buf.take(), self.pool.upgrade()) {
            pool.give_back(b);
        }
    }
}

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
// unwritten while `frame` is held (see `HeldFrame::new`), whichever thread holds this;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lent_buffer_comes_back_when_its_last_slice_goes() {
        let pool = Pool::<Vec<u8>>::new(2);
        let z = pool.lend(vec![7u8; 16]);
        let copy = z.clone();
        assert_eq!(pool.free(), 0);
        drop(z);
        assert_eq!(pool.free(), 0, "a clone still holds it");
        assert_eq!(copy.to_bytes().as_ref(), &[7u8; 16]);
        drop(copy);
        assert_eq!(pool.free(), 1);
        let b = pool.take(|b| b.len() == 16).unwrap();
        assert_eq!(b, vec![7u8; 16]);
        assert!(pool.take(|_| true).is_none());
    }

    #[test]
    fn a_full_or_gone_pool_drops_what_comes_back() {
        let pool = Pool::<Vec<u8>>::new(1);
        let (a, b) = (pool.lend(vec![1]), pool.lend(vec![2]));
        drop((a, b));
        assert_eq!(pool.free(), 1, "kept at most its cap");
        let c = pool.lend(vec![3]);
        drop(pool);
        assert_eq!(c.to_bytes().as_ref(), &[3]);
        drop(c); // nowhere to go back to: freed
    }

    #[test]
    fn zenoh_reads_the_lent_bytes_in_place() {
        // The message's slices are the lent buffer itself, not a copy of it.
        let pool = Pool::<Vec<u8>>::new(1);
        let v = vec![5u8; 64];
        let at = v.as_ptr();
        let z = pool.lend(v);
        let slices: Vec<&[u8]> = z.slices().collect();
        assert_eq!(slices.len(), 1);
        assert_eq!(slices[0].as_ptr(), at);
    }
}
