//! Byte-level encoding of the descriptors the mock hands out: little-endian words with a magic
//! number first and an FNV-1a checksum, so that a truncated, corrupted or foreign descriptor is
//! refused instead of misread.

use crate::ffi::Res;
use nvsci_sys::{NvSciError_BadParameter, NvSciError_ResourceError};

/// FNV-1a over `bytes`.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// Appends values to a growing buffer.
#[derive(Default)]
pub(crate) struct Writer(pub Vec<u8>);

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.0.extend_from_slice(v);
        self
    }
    /// Appends the checksum of everything written so far and returns the bytes.
    pub(crate) fn seal(mut self) -> Vec<u8> {
        let sum = fnv1a(&self.0);
        self.u64(sum);
        self.0
    }
}

/// Reads values back; every read past the end is `None`.
pub(crate) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    /// Checks the trailing checksum of `sealed` and reads what precedes it.
    pub(crate) fn open(sealed: &'a [u8]) -> Option<Self> {
        let split = sealed.len().checked_sub(8)?;
        let (body, sum) = sealed.split_at(split);
        (u64::from_le_bytes(sum.try_into().ok()?) == fnv1a(body)).then_some(Reader(body))
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.take(4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes)
    }
    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.take(8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes)
    }
    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        self.take(n)
    }
    /// Whether everything was read.
    pub(crate) fn is_done(&self) -> bool {
        self.0.is_empty()
    }
}

/// Packs sealed bytes into the `u64` words of a fixed-size C descriptor (a length prefix, then
/// the bytes, zero-padded): `ResourceError` if they do not fit.
pub(crate) fn to_words<const W: usize>(sealed: &[u8]) -> Res<[u64; W]> {
    let mut bytes = vec![0u8; W * 8];
    if sealed.len() + 4 > bytes.len() {
        return Err(NvSciError_ResourceError);
    }
    bytes[..4].copy_from_slice(&(sealed.len() as u32).to_le_bytes());
    bytes[4..4 + sealed.len()].copy_from_slice(sealed);
    let mut words = [0u64; W];
    for (w, c) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        *w = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
    }
    Ok(words)
}

/// The bytes of a fixed-size C descriptor's words.
pub(crate) fn words_to_bytes<const B: usize>(words: &[u64]) -> [u8; B] {
    let mut b = [0u8; B];
    for (c, w) in b.chunks_exact_mut(8).zip(words) {
        c.copy_from_slice(&w.to_ne_bytes());
    }
    b
}

/// The sealed bytes inside a fixed-size descriptor's bytes written by [`to_words`]
/// (`BadParameter` when the length prefix runs past them).
pub(crate) fn sealed_in(desc: &[u8]) -> Res<&[u8]> {
    let len =
        u32::from_le_bytes(desc.get(..4).and_then(|b| b.try_into().ok()).ok_or(NvSciError_BadParameter)?);
    desc.get(4..4usize.checked_add(len as usize).ok_or(NvSciError_BadParameter)?)
        .ok_or(NvSciError_BadParameter)
}

/// A caller's descriptor buffer (`BadParameter` for NULL or an empty one).
///
/// # Safety
/// `desc` must be NULL or readable for `len` bytes, for as long as the slice is used.
pub(crate) unsafe fn caller_bytes<'a>(desc: *const std::os::raw::c_void, len: usize) -> Res<&'a [u8]> {
    if len == 0 {
        return Err(NvSciError_BadParameter);
    }
    // SAFETY: forwarded contract.
    unsafe { crate::ffi::slice_in(desc.cast::<u8>(), len) }
}

/// One `*AttrListAndObj` descriptor: the reconciled list's and the object's descriptors.
pub(crate) fn join_pair(list: &[u8], object: &[u8]) -> Vec<u8> {
    let mut w = Writer::default();
    w.u32(list.len() as u32).bytes(list).bytes(object);
    w.0
}

/// The list and object descriptors of a [`join_pair`] descriptor (`BadParameter` if truncated).
pub(crate) fn split_pair(bytes: &[u8]) -> Res<(&[u8], &[u8])> {
    let n = bytes
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or(NvSciError_BadParameter)?;
    let split =
        4usize.checked_add(n as usize).filter(|s| *s <= bytes.len()).ok_or(NvSciError_BadParameter)?;
    Ok((&bytes[4..split], &bytes[split..]))
}
