//! Byte-level encoding of the descriptors the mock hands out: little-endian words with a magic
//! number first and an FNV-1a checksum, so that a truncated, corrupted or foreign descriptor is
//! refused instead of misread.

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

/// Packs sealed bytes into a fixed-size descriptor (`out` must be large enough; the rest is
/// zeroed). Returns `None` if it does not fit.
pub(crate) fn to_fixed(sealed: &[u8], out: &mut [u8]) -> Option<()> {
    if sealed.len() + 4 > out.len() {
        return None;
    }
    out.fill(0);
    out[..4].copy_from_slice(&(sealed.len() as u32).to_le_bytes());
    out[4..4 + sealed.len()].copy_from_slice(sealed);
    Some(())
}

/// The sealed bytes inside a fixed-size descriptor written by [`to_fixed`].
pub(crate) fn from_fixed(desc: &[u8]) -> Option<&[u8]> {
    let len = u32::from_le_bytes(desc.get(..4)?.try_into().ok()?) as usize;
    desc.get(4..4usize.checked_add(len)?)
}
