//! The frames of one connected endpoint pair: two rings in shared memory (one per direction) and
//! one event descriptor per end that the other end writes to wake it.
//!
//! Tegra's IVC queues, which carry NvSciIpc's `INTER_PROCESS` and `INTER_THREAD` channels, keep
//! their frames and positions in memory both ends map, and notify the peer only "upon transition
//! from empty to non-empty" (a frame for a reader that found nothing left) and "from full to
//! non-full" (room for a writer that found the channel full); Linux, drivers/firmware/tegra/ivc.c.
//! The emulation does the same: a frame written or read is a copy and two counters, and a system
//! call is made only to wake an end that has nothing left to do.
//!
//! Layout of the shared memory (created by the connecting end, mapped by the listening one):
//!
//! ```text
//! 0     magic, frames per direction, frame size
//! 64    direction 0 (connector -> listener): written count     128  read count
//! 192   direction 1 (listener -> connector): written count     256  read count
//! 320   "woken" flag of the listener (the reader of direction 0)
//! 384   "woken" flag of the connector (the reader of direction 1)
//! 1024  direction 0's slots, then direction 1's: each a u32 length and `frame size` bytes
//! ```
//!
//! A flag is 1 while its end's descriptor holds a wake-up it has not cleared: a waker that finds
//! it set makes no system call, and an end clears its descriptor only when the flag says there
//! is something to clear.

use crate::ffi::Res;
use crate::pages::Pages;
use nvsci_sys::*;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering::SeqCst};

const MAGIC: u64 = 0x4e53_4950_5249_4e47; // "NSIPRING"
const WRITTEN: [usize; 2] = [64, 192];
const READ: [usize; 2] = [128, 256];
const WOKEN: [usize; 2] = [320, 384];
const SLOTS: usize = 1024;

/// A frame that does not fit: the ring holds `frames` frames per direction.
#[derive(Debug)]
pub(crate) struct Full;

/// One end's view of a connected pair's frames.
pub(crate) struct Channel {
    mem: Pages,
    nframes: u32,
    frame_size: u32,
    stride: usize,
    /// The direction this end writes (0 for the connecting end); it reads the other.
    tx: usize,
    /// This end's wake-up descriptor (in its epoll set); the peer writes it.
    kick_mine: OwnedFd,
    /// The peer's wake-up descriptor.
    kick_peer: OwnedFd,
}

fn eventfd() -> Res<OwnedFd> {
    // SAFETY: plain descriptor creation.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(NvSciError_ResourceError);
    }
    // SAFETY: `fd` was just returned by eventfd and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn stride(frame_size: u32) -> usize {
    (4 + frame_size as usize).next_multiple_of(8)
}

fn size(nframes: u32, frame_size: u32) -> Option<u64> {
    (nframes as u64).checked_mul(stride(frame_size) as u64)?.checked_mul(2)?.checked_add(SLOTS as u64)
}

impl Channel {
    /// A new pair's memory and descriptors, made by the connecting end (see
    /// [`for_listener`](Self::for_listener) for what it sends to the listening end).
    pub(crate) fn create(nframes: u32, frame_size: u32) -> Res<Channel> {
        let len = size(nframes, frame_size).ok_or(NvSciError_InsufficientMemory)?;
        let mem = Pages::zeroed(len, 0)?;
        let kick_listener = eventfd()?;
        let kick_connector = eventfd()?;
        let ch = Channel {
            mem,
            nframes,
            frame_size,
            stride: stride(frame_size),
            tx: 0,
            kick_mine: kick_connector,
            kick_peer: kick_listener,
        };
        // SAFETY: offset 0 of the mapping is 8-aligned and in bounds (it is at least SLOTS bytes);
        // nobody else maps it yet.
        unsafe {
            let p = ch.mem.as_ptr();
            p.cast::<u64>().write(MAGIC);
            p.add(8).cast::<u32>().write(nframes);
            p.add(12).cast::<u32>().write(frame_size);
        }
        Ok(ch)
    }

    /// The descriptors the listening end needs, in the order [`open`](Self::open) takes them;
    /// `None` where the memory is not shareable (no memfd).
    pub(crate) fn for_listener(&self) -> Option<[BorrowedFd<'_>; 3]> {
        Some([self.mem.fd()?, self.kick_peer.as_fd(), self.kick_mine.as_fd()])
    }

    /// The listening end's view of a pair created by its peer: `fds` as [`for_listener`]
    /// (Self::for_listener) sent them. Memory that is not a pair of this size is `BadParameter`.
    pub(crate) fn open(nframes: u32, frame_size: u32, fds: Vec<OwnedFd>) -> Res<Channel> {
        let [mem, kick_listener, kick_connector]: [OwnedFd; 3] =
            fds.try_into().map_err(|_| NvSciError_BadParameter)?;
        let len = size(nframes, frame_size).ok_or(NvSciError_InsufficientMemory)?;
        let len = usize::try_from(len)
            .ok()
            .and_then(|l| l.checked_next_multiple_of(crate::pages::page_size()))
            .ok_or(NvSciError_InsufficientMemory)?;
        #[cfg(not(miri))]
        let mem = Pages::map(mem, len)?;
        // Miri has no shared mappings (the mock's IPC is not run under it).
        #[cfg(miri)]
        let mem: Pages = {
            drop((mem, len));
            return Err(NvSciError_ResourceError);
        };
        // SAFETY: as in `create`; the creator wrote these before sending the descriptor.
        let (magic, n, fs) = unsafe {
            let p = mem.as_ptr();
            let magic = p.cast::<u64>().read_volatile();
            (magic, p.add(8).cast::<u32>().read_volatile(), p.add(12).cast::<u32>().read_volatile())
        };
        if magic != MAGIC || n != nframes || fs != frame_size {
            return Err(NvSciError_BadParameter);
        }
        Ok(Channel {
            mem,
            nframes,
            frame_size,
            stride: stride(frame_size),
            tx: 1,
            kick_mine: kick_listener,
            kick_peer: kick_connector,
        })
    }

    /// This end's wake-up descriptor, for the endpoint's epoll set.
    pub(crate) fn event_fd(&self) -> BorrowedFd<'_> {
        self.kick_mine.as_fd()
    }

    fn counter(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is one of the 64-aligned header offsets, inside the mapping, which lives
        // as long as `self`; the peer only ever accesses it atomically too.
        unsafe { &*self.mem.as_ptr().add(off).cast::<AtomicU64>() }
    }

    fn flag(&self, owner_rx: usize) -> &AtomicU32 {
        // SAFETY: as in `counter`.
        unsafe { &*self.mem.as_ptr().add(WOKEN[owner_rx]).cast::<AtomicU32>() }
    }

    fn slot(&self, dir: usize, pos: u64) -> *mut u8 {
        let index = (pos % u64::from(self.nframes)) as usize;
        let ring = SLOTS + dir * self.nframes as usize * self.stride;
        // SAFETY: `index < nframes`, so the slot lies inside the mapping (see `size`).
        unsafe { self.mem.as_ptr().add(ring + index * self.stride) }
    }

    fn rx(&self) -> usize {
        1 - self.tx
    }

    /// Frames written by this end that the peer has not read yet.
    pub(crate) fn in_flight(&self) -> u32 {
        let w = self.counter(WRITTEN[self.tx]).load(SeqCst);
        let r = self.counter(READ[self.tx]).load(SeqCst);
        // A peer that wrote nonsense into its count cannot make this exceed the ring.
        (w.wrapping_sub(r)).min(u64::from(self.nframes)) as u32
    }

    /// Whether the peer wrote frames this end has not read.
    pub(crate) fn readable(&self) -> bool {
        let rx = self.rx();
        self.counter(WRITTEN[rx]).load(SeqCst) != self.counter(READ[rx]).load(SeqCst)
    }

    /// Wakes the end whose receiving direction is `owner_rx`, unless a wake-up is pending there.
    fn kick(&self, owner_rx: usize) {
        if self.flag(owner_rx).swap(1, SeqCst) == 0 {
            let fd = if owner_rx == self.rx() { &self.kick_mine } else { &self.kick_peer };
            let one = 1u64;
            // SAFETY: an 8-byte write of a u64 to a live non-blocking eventfd.
            unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }

    /// Copies `frame` into the next free slot and wakes the peer if it has nothing else to read.
    pub(crate) fn write(&self, frame: &[u8]) -> Result<(), Full> {
        let (w_at, r_at) = (WRITTEN[self.tx], READ[self.tx]);
        let w = self.counter(w_at).load(SeqCst);
        let r = self.counter(r_at).load(SeqCst);
        if w.wrapping_sub(r) >= u64::from(self.nframes) {
            return Err(Full);
        }
        let n = frame.len().min(self.frame_size as usize);
        let slot = self.slot(self.tx, w);
        // SAFETY: the slot is this end's to fill (the peer has read it: `w - r < nframes`), 4-aligned
        // (stride and base are multiples of 8) and holds 4 + frame_size bytes.
        unsafe {
            slot.cast::<u32>().write_volatile(n as u32);
            std::ptr::copy_nonoverlapping(frame.as_ptr(), slot.add(4), n);
        }
        self.counter(w_at).store(w.wrapping_add(1), SeqCst);
        // The peer reads the direction this end writes.
        self.kick(self.tx);
        Ok(())
    }

    /// Copies the oldest unread frame into `buf` (its first `buf.len()` bytes; the rest of `buf`
    /// filled with `fill`) and returns the length its writer wrote; `None` when nothing is
    /// waiting. A writer that had found the ring full is woken.
    pub(crate) fn read(&self, buf: &mut [u8], fill: u8) -> Option<usize> {
        let rx = self.rx();
        let (w_at, r_at) = (WRITTEN[rx], READ[rx]);
        let r = self.counter(r_at).load(SeqCst);
        let w = self.counter(w_at).load(SeqCst);
        if w == r {
            return None;
        }
        let slot = self.slot(rx, r);
        // SAFETY: the slot holds a frame the peer finished writing (published by the count
        // loaded above) and does not touch until this end's read count passes it.
        let len = unsafe { slot.cast::<u32>().read_volatile() }.min(self.frame_size) as usize;
        let n = len.min(buf.len());
        // SAFETY: `n` bytes of the slot's payload into `buf`, which has at least `n` bytes.
        unsafe { std::ptr::copy_nonoverlapping(slot.add(4), buf.as_mut_ptr(), n) };
        buf[n..].fill(fill);
        self.counter(r_at).store(r.wrapping_add(1), SeqCst);
        // nvsciipc.h, NvSciIpcGetEventSafe: a WRITE event occurs "each time the endpoint's
        // sending FIFO ceases to be full". Reading the latest count after the store above means
        // a writer that found the ring full before that store is seen here.
        if self.counter(w_at).load(SeqCst).wrapping_sub(r) >= u64::from(self.nframes) {
            self.kick(self.tx);
        }
        Some(len)
    }

    /// Clears this end's wake-up once it has nothing left to do; `pending` says whether it
    /// still does (checked again after clearing, so a wake-up that raced the clear is kept).
    pub(crate) fn settle(&self, pending: impl Fn(&Self) -> bool) {
        self.settle_around(pending, || {});
    }

    /// [`settle`](Self::settle), running `between` after the descriptor was cleared and before
    /// the flag is: where a peer's wake-up that found the flag still set is lost but for the
    /// second look.
    fn settle_around(&self, pending: impl Fn(&Self) -> bool, between: impl FnOnce()) {
        let rx = self.rx();
        if pending(self) {
            return;
        }
        if self.flag(rx).load(SeqCst) == 1 {
            let mut v = 0u64;
            // SAFETY: an 8-byte read into a u64 from a live non-blocking eventfd.
            unsafe { libc::read(self.kick_mine.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
            between();
            self.flag(rx).store(0, SeqCst);
        }
        fence(SeqCst);
        if pending(self) {
            self.kick(rx);
        }
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    /// Both ends of one pair, in this process.
    fn pair(nframes: u32, frame_size: u32) -> (Channel, Channel) {
        let c = Channel::create(nframes, frame_size).unwrap();
        let fds = c.for_listener().unwrap().iter().map(|f| f.try_clone_to_owned().unwrap()).collect();
        let l = Channel::open(nframes, frame_size, fds).unwrap();
        (c, l)
    }

    fn ready(c: &Channel) -> bool {
        let mut p = libc::pollfd { fd: c.event_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    #[test]
    fn frames_cross_in_order_with_their_lengths_and_the_ring_refuses_a_fifth() {
        let (c, l) = pair(4, 8);
        for i in 0..4u8 {
            c.write(&[i; 3][..=usize::from(i % 3)]).unwrap();
        }
        assert!(c.write(b"x").is_err(), "a fifth frame fit a ring of four");
        assert_eq!(c.in_flight(), 4);
        let mut buf = [0u8; 8];
        for i in 0..4u8 {
            let n = usize::from(i % 3) + 1;
            assert_eq!(l.read(&mut buf, 0xee), Some(n));
            assert_eq!(&buf[..n], &vec![i; n][..]);
            assert!(buf[n..].iter().all(|b| *b == 0xee), "bytes past the frame are not the fill");
        }
        assert_eq!(l.read(&mut buf, 0), None);
        assert_eq!(c.in_flight(), 0);
    }

    /// The second look of `settle`: a wake-up that arrives after the descriptor was cleared but
    /// while the flag still says "woken" makes no system call, so the end must find the frame
    /// itself and keep its descriptor readable.
    #[test]
    fn a_wake_up_racing_the_clear_is_not_lost() {
        let (c, l) = pair(2, 8);
        c.write(b"a").unwrap();
        assert!(ready(&l));
        let mut buf = [0u8; 1];
        l.read(&mut buf, 0).unwrap();
        l.settle_around(Channel::readable, || c.write(b"b").unwrap());
        assert!(l.readable());
        assert!(ready(&l), "a frame waits and the reader's descriptor is quiet");
        l.read(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"b");
        l.settle(Channel::readable);
        assert!(!ready(&l), "nothing waits and the descriptor is readable");
    }

    #[test]
    fn memory_of_another_size_is_refused() {
        let c = Channel::create(4, 64).unwrap();
        let fds = c.for_listener().unwrap().iter().map(|f| f.try_clone_to_owned().unwrap()).collect();
        assert_eq!(Channel::open(4, 32, fds).err(), Some(NvSciError_BadParameter));
    }
}
