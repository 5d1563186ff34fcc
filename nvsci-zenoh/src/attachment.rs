//! The attachment rmw_zenoh puts on every sample: the publisher's sequence number, the source
//! timestamp and the publisher's GID.
//!
//! rmw_zenoh (`rmw_zenoh_cpp/src/detail/attachment_helpers.cpp`, Jazzy 0.2.4 and later, Kilted,
//! Rolling) writes them with Zenoh's serializer (`zenoh::ext::Serializer`): an `int64`
//! little-endian, another `int64` little-endian, then the 16-byte GID as a `std::array`, which
//! the serializer writes as a sequence: its length in LEB128 (`0x10`), then the bytes. 33
//! bytes in all. A subscriber drops samples that carry none. (Releases before Jazzy 0.2.4 wrote
//! labelled fields instead; the two do not interoperate.)

/// Bytes of an attachment.
pub const ATTACHMENT_LEN: usize = 33;

/// One sample's attachment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Attachment {
    /// The publisher's count of messages, from 1.
    pub sequence: i64,
    /// When it was published: nanoseconds since the Unix epoch (system clock).
    pub source_timestamp: i64,
    /// The publisher's GID ([`crate::graph::gid`] of its liveliness token).
    pub gid: [u8; 16],
}

/// An attachment that is not the 33 bytes rmw_zenoh writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AttachmentError {
    /// Not 33 bytes.
    #[error("an attachment of {len} bytes (rmw_zenoh writes {ATTACHMENT_LEN})")]
    Length {
        /// Bytes received.
        len: usize,
    },
    /// The GID's sequence length (byte 16) is not 16.
    #[error("the GID's sequence length is {len:#04x}, not 0x10")]
    GidLength {
        /// The length byte.
        len: u8,
    },
}

impl Attachment {
    /// The 33 bytes.
    pub fn to_bytes(&self) -> [u8; ATTACHMENT_LEN] {
        let mut b = [0u8; ATTACHMENT_LEN];
        b[..8].copy_from_slice(&self.sequence.to_le_bytes());
        b[8..16].copy_from_slice(&self.source_timestamp.to_le_bytes());
        b[16] = 16;
        b[17..].copy_from_slice(&self.gid);
        b
    }

    /// Reads the 33 bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self, AttachmentError> {
        let b: &[u8; ATTACHMENT_LEN] =
            bytes.try_into().map_err(|_| AttachmentError::Length { len: bytes.len() })?;
        if b[16] != 16 {
            return Err(AttachmentError::GidLength { len: b[16] });
        }
        let i64_at = |at: usize| i64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        Ok(Self {
            sequence: i64_at(0),
            source_timestamp: i64_at(8),
            gid: b[17..].try_into().expect("16 bytes"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_33_bytes() {
        let a = Attachment {
            sequence: 1,
            source_timestamp: 0x0102_0304_0506_0708,
            gid: [
                0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae,
                0xaf,
            ],
        };
        #[rustfmt::skip]
        let bytes = [
            1, 0, 0, 0, 0, 0, 0, 0,                         // sequence number, int64 LE
            0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // source timestamp, int64 LE
            0x10,                                           // sequence length 16, LEB128
            0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
        ];
        assert_eq!(a.to_bytes(), bytes);
        assert_eq!(Attachment::parse(&bytes), Ok(a));
    }

    #[test]
    fn malformed_attachments() {
        let good = Attachment { sequence: -2, source_timestamp: 3, gid: [7; 16] }.to_bytes();
        assert_eq!(Attachment::parse(&good[..32]), Err(AttachmentError::Length { len: 32 }));
        assert_eq!(Attachment::parse(&[]), Err(AttachmentError::Length { len: 0 }));
        let mut long = good.to_vec();
        long.push(0);
        assert_eq!(Attachment::parse(&long), Err(AttachmentError::Length { len: 34 }));
        let mut bad = good;
        bad[16] = 0x0f;
        assert_eq!(Attachment::parse(&bad), Err(AttachmentError::GidLength { len: 0x0f }));
        assert_eq!(Attachment::parse(&good).map(|a| a.sequence), Ok(-2));
    }
}
