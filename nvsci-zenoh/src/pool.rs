//! The buffers a CUDA frame's pixels are copied into (page-locked host memory), lent to Zenoh as
//! a message's slices and back in the pool when Zenoh drops the message, so that a steady stream
//! of frames allocates nothing. Zenoh takes them as `bytes::Bytes` with an owner
//! (`Bytes::from_owner`), whose drop runs when the last reference goes: when `put` returns for a
//! message sent over the network (Zenoh serialises it into its transmission batches before `put`
//! returns), or later if a subscriber in the same session keeps the sample.

use bytes::Bytes;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use zenoh::bytes::ZBytes;

/// Bytes that Zenoh may read from any thread until it drops them.
pub(crate) trait Lendable: Send + 'static {
    /// The bytes.
    fn bytes(&self) -> &[u8];
}

#[cfg(test)]
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
