//! `sensor_msgs/msg/Image` in ROS 2's CDR, the payload rmw_zenoh publishes.
//!
//! A payload is a 4-byte encapsulation header (`00 01 00 00`: plain CDR, little-endian;
//! `00 00 00 00` is the big-endian form, accepted when decoding) followed by the message in CDR
//! (OMG CDR as eProsima Fast-CDR writes it), every primitive aligned to its size counted from
//! the end of the header. A string is a `uint32` length that counts the terminating NUL, the
//! bytes, then the NUL; a `uint8[]` is a `uint32` element count, then the bytes.
//!
//! `sensor_msgs/msg/Image` (ros2/common_interfaces `sensor_msgs/msg/Image.msg`, with
//! `std_msgs/msg/Header` and `builtin_interfaces/msg/Time`), in order:
//!
//! | field | CDR |
//! |---|---|
//! | `header.stamp.sec` | `int32` |
//! | `header.stamp.nanosec` | `uint32` |
//! | `header.frame_id` | string |
//! | `height`, `width` | `uint32` each |
//! | `encoding` | string |
//! | `is_bigendian` | `uint8` |
//! | `step` | `uint32` (bytes per row) |
//! | `data` | `uint8[]` |

use std::fmt;

/// The encapsulation header of a little-endian plain CDR payload (representation id
/// `CDR_LE` = 0x0001, options 0).
pub const ENCAPSULATION_LE: [u8; 4] = [0x00, 0x01, 0x00, 0x00];
/// The encapsulation header of a big-endian plain CDR payload (`CDR_BE` = 0x0000).
pub const ENCAPSULATION_BE: [u8; 4] = [0x00, 0x00, 0x00, 0x00];

/// `builtin_interfaces/msg/Time`: seconds and nanoseconds since the epoch of the stamp's clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time {
    /// Seconds.
    pub sec: i32,
    /// Nanoseconds within the second (0 to 999 999 999).
    pub nanosec: u32,
}

impl Time {
    /// The time `ns` nanoseconds after the epoch; `None` if the seconds do not fit an `i32`
    /// (after 2038-01-19 on the system clock).
    pub fn from_nanos(ns: u64) -> Option<Self> {
        let sec = i32::try_from(ns / 1_000_000_000).ok()?;
        Some(Self { sec, nanosec: (ns % 1_000_000_000) as u32 })
    }

    /// Nanoseconds since the epoch; `None` for a negative time or nanoseconds out of range.
    pub fn to_nanos(self) -> Option<u64> {
        if self.sec < 0 || self.nanosec >= 1_000_000_000 {
            return None;
        }
        Some(self.sec as u64 * 1_000_000_000 + self.nanosec as u64)
    }
}

/// A `sensor_msgs/msg/Image`, borrowing its strings and pixels.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Image<'a> {
    /// `header.stamp`.
    pub stamp: Time,
    /// `header.frame_id`.
    pub frame_id: &'a str,
    /// Rows.
    pub height: u32,
    /// Columns.
    pub width: u32,
    /// Pixel encoding as ROS names it (`sensor_msgs/image_encodings.hpp`: `rgb8`, `rgba8`,
    /// `nv12`, ...).
    pub encoding: &'a str,
    /// `is_bigendian` (0 or 1; meaningless for 8-bit encodings).
    pub is_bigendian: u8,
    /// Bytes per row.
    pub step: u32,
    /// The pixels.
    pub data: &'a [u8],
}

impl fmt::Debug for Image<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Image")
            .field("stamp", &self.stamp)
            .field("frame_id", &self.frame_id)
            .field("height", &self.height)
            .field("width", &self.width)
            .field("encoding", &self.encoding)
            .field("is_bigendian", &self.is_bigendian)
            .field("step", &self.step)
            .field("data.len()", &self.data.len())
            .finish()
    }
}

/// A field of the message, as named in errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// The 4-byte encapsulation header.
    Encapsulation,
    /// `header.stamp.sec`.
    StampSec,
    /// `header.stamp.nanosec`.
    StampNanosec,
    /// `header.frame_id`.
    FrameId,
    /// `height`.
    Height,
    /// `width`.
    Width,
    /// `encoding`.
    Encoding,
    /// `is_bigendian`.
    IsBigendian,
    /// `step`.
    Step,
    /// `data`.
    Data,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Encapsulation => "encapsulation header",
            Field::StampSec => "header.stamp.sec",
            Field::StampNanosec => "header.stamp.nanosec",
            Field::FrameId => "header.frame_id",
            Field::Height => "height",
            Field::Width => "width",
            Field::Encoding => "encoding",
            Field::IsBigendian => "is_bigendian",
            Field::Step => "step",
            Field::Data => "data",
        })
    }
}

/// A CDR payload that is not a well-formed `sensor_msgs/msg/Image`, or a message that cannot
/// be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CdrError {
    /// The payload ends inside `field`: it needs `needed` bytes from `offset` (counted from
    /// the start of the payload), and `available` are there.
    #[error("CDR payload ends inside {field}: {needed} bytes needed at offset {offset}, {available} there")]
    Truncated {
        /// The field being read.
        field: Field,
        /// Offset of the field in the payload.
        offset: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the payload at `offset`.
        available: usize,
    },
    /// The encapsulation header is not plain CDR (`00 01 ..` little-endian or `00 00 ..`
    /// big-endian): the payload is XCDR2, a parameter list or not CDR at all.
    #[error("unsupported CDR encapsulation {found:02x?} (plain CDR is 00 01 00 00 or 00 00 00 00)")]
    Encapsulation {
        /// The first four bytes of the payload.
        found: [u8; 4],
    },
    /// A string's last byte (at `offset`) is not the NUL its length counts.
    #[error("{field}: the string's last byte (offset {offset}) is not NUL")]
    NotTerminated {
        /// The string field.
        field: Field,
        /// Offset of the byte that should be NUL.
        offset: usize,
    },
    /// A string is not UTF-8.
    #[error("{field}: not UTF-8")]
    NotUtf8 {
        /// The string field.
        field: Field,
    },
    /// The nanoseconds of the stamp are 1 000 000 000 or more.
    #[error("header.stamp.nanosec {nanosec} is not below 1 000 000 000")]
    Nanosec {
        /// The value read.
        nanosec: u32,
    },
    /// Bytes follow the message beyond the (at most 3) bytes of padding CDR allows.
    #[error("{count} bytes follow the message")]
    Trailing {
        /// Bytes after the end of `data`.
        count: usize,
    },
    /// A field to write is longer than CDR's `uint32` length can say.
    #[error("{field}: {len} bytes do not fit a CDR length")]
    TooLong {
        /// The field.
        field: Field,
        /// Its length in bytes.
        len: usize,
    },
}

/// Bytes the CDR writer of one message: little-endian, alignment counted after the header.
struct Writer<'v> {
    out: &'v mut Vec<u8>,
    origin: usize,
}

impl Writer<'_> {
    fn align(&mut self, n: usize) {
        let pos = self.out.len() - self.origin;
        let pad = (n - pos % n) % n;
        self.out.extend(std::iter::repeat_n(0u8, pad));
    }
    fn u32(&mut self, v: u32) {
        self.align(4);
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    fn string(&mut self, field: Field, s: &str) -> Result<(), CdrError> {
        let len = u32::try_from(s.len() + 1).map_err(|_| CdrError::TooLong { field, len: s.len() })?;
        self.u32(len);
        self.out.extend_from_slice(s.as_bytes());
        self.out.push(0);
        Ok(())
    }
}

/// The CDR reader of one message.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    little: bool,
}

impl<'a> Reader<'a> {
    const ORIGIN: usize = 4;

    fn take(&mut self, field: Field, n: usize) -> Result<&'a [u8], CdrError> {
        let available = self.bytes.len().saturating_sub(self.pos);
        if n > available {
            return Err(CdrError::Truncated { field, offset: self.pos, needed: n, available });
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn align(&mut self, field: Field, n: usize) -> Result<(), CdrError> {
        let pad = (n - (self.pos - Self::ORIGIN) % n) % n;
        self.take(field, pad).map(|_| ())
    }
    fn u32(&mut self, field: Field) -> Result<u32, CdrError> {
        self.align(field, 4)?;
        let b: [u8; 4] = self.take(field, 4)?.try_into().expect("4 bytes taken");
        Ok(if self.little { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) })
    }
    fn u8(&mut self, field: Field) -> Result<u8, CdrError> {
        Ok(self.take(field, 1)?[0])
    }
    fn string(&mut self, field: Field) -> Result<&'a str, CdrError> {
        let len = self.u32(field)? as usize;
        if len == 0 {
            // Fast-CDR reads a zero length as the empty string.
            return Ok("");
        }
        let at = self.pos;
        let s = self.take(field, len)?;
        if s[len - 1] != 0 {
            return Err(CdrError::NotTerminated { field, offset: at + len - 1 });
        }
        std::str::from_utf8(&s[..len - 1]).map_err(|_| CdrError::NotUtf8 { field })
    }
}

impl<'a> Image<'a> {
    /// Bytes of the whole payload, encapsulation header included.
    pub fn encoded_len(&self) -> usize {
        self.prefix_len() + self.data.len()
    }

    /// Bytes of the payload before the pixels.
    fn prefix_len(&self) -> usize {
        let up4 = |v: usize| v.div_ceil(4) * 4;
        // sec, nanosec, frame_id length at 0, 4, 8; the string; height, width, encoding
        // length (aligned); the string; is_bigendian; step and data length (aligned).
        let after_frame_id = 12 + self.frame_id.len() + 1;
        let after_encoding = up4(after_frame_id) + 12 + self.encoding.len() + 1;
        4 + up4(after_encoding + 1) + 8
    }

    /// Writes the payload (encapsulation header, message) to the end of `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), CdrError> {
        out.reserve(self.encoded_len());
        self.encode_prefix(self.data.len(), out)?;
        out.extend_from_slice(self.data);
        Ok(())
    }

    /// The payload in a new vector.
    pub fn encode(&self) -> Result<Vec<u8>, CdrError> {
        let mut out = Vec::new();
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Writes everything before the pixels, for a message of `data_len` pixel bytes (ignoring
    /// `self.data`): the caller appends exactly `data_len` bytes, straight from where they are
    /// (a frame's rows), with no intermediate copy.
    pub fn encode_prefix(&self, data_len: usize, out: &mut Vec<u8>) -> Result<(), CdrError> {
        let data_len_u32 =
            u32::try_from(data_len).map_err(|_| CdrError::TooLong { field: Field::Data, len: data_len })?;
        let start = out.len();
        out.extend_from_slice(&ENCAPSULATION_LE);
        let mut w = Writer { out, origin: start + 4 };
        w.u32(self.stamp.sec as u32);
        w.u32(self.stamp.nanosec);
        let written = w.string(Field::FrameId, self.frame_id).and_then(|()| {
            w.u32(self.height);
            w.u32(self.width);
            w.string(Field::Encoding, self.encoding)
        });
        if let Err(e) = written {
            out.truncate(start);
            return Err(e);
        }
        w.out.push(self.is_bigendian);
        w.u32(self.step);
        w.u32(data_len_u32);
        Ok(())
    }

    /// Reads a payload. Every problem is a [`CdrError`] naming the field; a payload may end in
    /// up to 3 bytes of padding after `data`.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, CdrError> {
        let Some(head) = bytes.get(..4) else {
            return Err(CdrError::Truncated {
                field: Field::Encapsulation,
                offset: 0,
                needed: 4,
                available: bytes.len(),
            });
        };
        let little = match [head[0], head[1]] {
            [0x00, 0x01] => true,
            [0x00, 0x00] => false,
            _ => return Err(CdrError::Encapsulation { found: [head[0], head[1], head[2], head[3]] }),
        };
        let mut r = Reader { bytes, pos: 4, little };
        let sec = r.u32(Field::StampSec)? as i32;
        let nanosec = r.u32(Field::StampNanosec)?;
        if nanosec >= 1_000_000_000 {
            return Err(CdrError::Nanosec { nanosec });
        }
        let frame_id = r.string(Field::FrameId)?;
        let height = r.u32(Field::Height)?;
        let width = r.u32(Field::Width)?;
        let encoding = r.string(Field::Encoding)?;
        let is_bigendian = r.u8(Field::IsBigendian)?;
        let step = r.u32(Field::Step)?;
        let len = r.u32(Field::Data)? as usize;
        let data = r.take(Field::Data, len)?;
        let trailing = bytes.len() - r.pos;
        if trailing > 3 {
            return Err(CdrError::Trailing { count: trailing });
        }
        Ok(Self { stamp: Time { sec, nanosec }, frame_id, height, width, encoding, is_bigendian, step, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2x2 rgb8 image, frame "cam": every byte below is written out by hand from the layout
    /// in the module documentation.
    fn rgb8_2x2() -> (Image<'static>, Vec<u8>) {
        const PIXELS: [u8; 12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
        let img = Image {
            stamp: Time { sec: 0x0102_0304, nanosec: 500 },
            frame_id: "cam",
            height: 2,
            width: 2,
            encoding: "rgb8",
            is_bigendian: 0,
            step: 6,
            data: &PIXELS,
        };
        #[rustfmt::skip]
        let mut bytes = vec![
            0x00, 0x01, 0x00, 0x00,             // encapsulation: CDR_LE
            0x04, 0x03, 0x02, 0x01,             // 0: sec
            0xf4, 0x01, 0x00, 0x00,             // 4: nanosec 500
            0x04, 0x00, 0x00, 0x00,             // 8: frame_id length 4 ("cam" + NUL)
            b'c', b'a', b'm', 0x00,             // 12
            0x02, 0x00, 0x00, 0x00,             // 16: height
            0x02, 0x00, 0x00, 0x00,             // 20: width
            0x05, 0x00, 0x00, 0x00,             // 24: encoding length 5
            b'r', b'g', b'b', b'8', 0x00,       // 28
            0x00,                               // 33: is_bigendian
            0x00, 0x00,                         // 34: padding to 36
            0x06, 0x00, 0x00, 0x00,             // 36: step
            0x0c, 0x00, 0x00, 0x00,             // 40: data length 12
        ];
        bytes.extend_from_slice(&PIXELS); // 44
        (img, bytes)
    }

    /// frame_id "camera" (7 bytes with NUL) puts the height at 20 after one byte of padding;
    /// "nv12" leaves is_bigendian at 37 and two bytes of padding.
    fn nv12_2x2() -> (Image<'static>, Vec<u8>) {
        const PIXELS: [u8; 6] = [16, 17, 18, 19, 128, 129];
        let img = Image {
            stamp: Time { sec: -1, nanosec: 999_999_999 },
            frame_id: "camera",
            height: 2,
            width: 2,
            encoding: "nv12",
            is_bigendian: 1,
            step: 2,
            data: &PIXELS,
        };
        #[rustfmt::skip]
        let mut bytes = vec![
            0x00, 0x01, 0x00, 0x00,
            0xff, 0xff, 0xff, 0xff,             // 0: sec -1
            0xff, 0xc9, 0x9a, 0x3b,             // 4: nanosec 999 999 999 = 0x3b9ac9ff
            0x07, 0x00, 0x00, 0x00,             // 8: length 7
            b'c', b'a', b'm', b'e', b'r', b'a', 0x00, // 12..19
            0x00,                               // 19: padding to 20
            0x02, 0x00, 0x00, 0x00,             // 20: height
            0x02, 0x00, 0x00, 0x00,             // 24: width
            0x05, 0x00, 0x00, 0x00,             // 28: length 5
            b'n', b'v', b'1', b'2', 0x00,       // 32..37
            0x01,                               // 37: is_bigendian
            0x00, 0x00,                         // 38: padding to 40
            0x02, 0x00, 0x00, 0x00,             // 40: step
            0x06, 0x00, 0x00, 0x00,             // 44: data length
        ];
        bytes.extend_from_slice(&PIXELS); // 48
        (img, bytes)
    }

    #[test]
    fn encodes_the_hand_computed_bytes() {
        for (img, bytes) in [rgb8_2x2(), nv12_2x2()] {
            assert_eq!(img.encode().unwrap(), bytes, "{img:?}");
            assert_eq!(img.encoded_len(), bytes.len());
        }
    }

    #[test]
    fn decodes_the_hand_computed_bytes() {
        for (img, bytes) in [rgb8_2x2(), nv12_2x2()] {
            assert_eq!(Image::decode(&bytes).unwrap(), img);
        }
    }

    #[test]
    fn prefix_then_rows_is_the_whole_payload() {
        let (img, bytes) = nv12_2x2();
        let mut out = vec![0xaa]; // something already in the buffer: alignment counts from the header
        img.encode_prefix(img.data.len(), &mut out).unwrap();
        out.extend_from_slice(img.data);
        assert_eq!(&out[1..], &bytes[..]);
    }

    #[test]
    fn empty_strings_are_a_nul() {
        let img = Image {
            stamp: Time::default(),
            frame_id: "",
            height: 0,
            width: 0,
            encoding: "",
            is_bigendian: 0,
            step: 0,
            data: &[],
        };
        #[rustfmt::skip]
        let bytes = [
            0x00, 0x01, 0x00, 0x00,
            0, 0, 0, 0,  0, 0, 0, 0,            // stamp
            1, 0, 0, 0,  0, 0, 0, 0,            // frame_id: length 1, NUL, padding to 16
            0, 0, 0, 0,  0, 0, 0, 0,            // 16: height, 20: width
            1, 0, 0, 0,  0,                     // 24: encoding: length 1, NUL
            0,                                  // 29: is_bigendian
            0, 0,                               // padding to 32
            0, 0, 0, 0,  0, 0, 0, 0,            // 32: step, 36: data length
        ];
        assert_eq!(img.encode().unwrap(), bytes);
        assert_eq!(Image::decode(&bytes).unwrap(), img);
    }

    #[test]
    fn big_endian_payloads_decode() {
        #[rustfmt::skip]
        let bytes = [
            0x00, 0x00, 0x00, 0x00,             // CDR_BE
            0x00, 0x00, 0x00, 0x07,             // sec 7
            0x00, 0x00, 0x00, 0x08,             // nanosec 8
            0x00, 0x00, 0x00, 0x01, 0x00,       // frame_id ""
            0x00, 0x00, 0x00,                   // padding to 16
            0x00, 0x00, 0x00, 0x01,             // height 1
            0x00, 0x00, 0x00, 0x01,             // width 1
            0x00, 0x00, 0x00, 0x06, b'm', b'o', b'n', b'o', b'8', 0x00, // 24: encoding
            0x00,                               // 34: is_bigendian
            0x00,                               // padding to 36
            0x00, 0x00, 0x00, 0x01,             // step 1
            0x00, 0x00, 0x00, 0x01,             // data length 1
            0x2a,
        ];
        let img = Image::decode(&bytes).unwrap();
        assert_eq!(img.stamp, Time { sec: 7, nanosec: 8 });
        assert_eq!(
            (img.height, img.width, img.encoding, img.step, img.data),
            (1, 1, "mono8", 1, &[42u8][..])
        );
    }

    #[test]
    fn every_truncation_names_the_field_it_cut() {
        let (_, bytes) = nv12_2x2();
        // The field each prefix length ends in (offsets include the 4-byte header).
        let field_at = |len: usize| match len {
            0..=3 => Field::Encapsulation,
            4..=7 => Field::StampSec,
            8..=11 => Field::StampNanosec,
            12..=22 => Field::FrameId,
            23..=27 => Field::Height,
            28..=31 => Field::Width,
            32..=40 => Field::Encoding,
            41 => Field::IsBigendian,
            42..=47 => Field::Step,
            _ => Field::Data,
        };
        for len in 0..bytes.len() {
            match Image::decode(&bytes[..len]) {
                Err(CdrError::Truncated { field, available, needed, offset }) => {
                    assert_eq!(field, field_at(len), "prefix of {len} bytes");
                    assert!(needed > available, "prefix of {len}: {needed} needed, {available} there");
                    assert_eq!(offset + available, len, "prefix of {len}");
                }
                other => panic!("prefix of {len} bytes: {other:?}"),
            }
        }
    }

    #[test]
    fn a_data_length_past_the_end_is_truncated_data() {
        let (_, mut bytes) = rgb8_2x2();
        bytes[44..48].copy_from_slice(&1000u32.to_le_bytes());
        assert_eq!(
            Image::decode(&bytes),
            Err(CdrError::Truncated { field: Field::Data, offset: 48, needed: 1000, available: 12 })
        );
        // A string length of u32::MAX does not overflow anything.
        let (_, mut bytes) = rgb8_2x2();
        bytes[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            Image::decode(&bytes),
            Err(CdrError::Truncated { field: Field::FrameId, offset: 16, .. })
        ));
    }

    #[test]
    fn malformed_payloads_are_typed_errors() {
        let (_, good) = rgb8_2x2();
        let with = |at: usize, b: &[u8]| {
            let mut v = good.clone();
            v[at..at + b.len()].copy_from_slice(b);
            v
        };
        assert_eq!(
            Image::decode(&with(0, &[0x00, 0x07, 0x00, 0x00])),
            Err(CdrError::Encapsulation { found: [0, 7, 0, 0] })
        );
        // XCDR2 little-endian (PLAIN_CDR2_LE = 0x0007) is not plain CDR.
        assert!(matches!(Image::decode(&with(0, &[0x00, 0x07])), Err(CdrError::Encapsulation { .. })));
        assert_eq!(
            Image::decode(&with(19, b"x")),
            Err(CdrError::NotTerminated { field: Field::FrameId, offset: 19 })
        );
        assert_eq!(
            Image::decode(&with(36, b"!")),
            Err(CdrError::NotTerminated { field: Field::Encoding, offset: 36 })
        );
        assert_eq!(Image::decode(&with(16, &[0xff])), Err(CdrError::NotUtf8 { field: Field::FrameId }));
        assert_eq!(
            Image::decode(&with(8, &1_000_000_000u32.to_le_bytes())),
            Err(CdrError::Nanosec { nanosec: 1_000_000_000 })
        );
        let mut long = good.clone();
        long.extend_from_slice(&[0, 0, 0]);
        assert!(Image::decode(&long).is_ok(), "3 bytes of padding are allowed");
        long.push(0);
        assert_eq!(Image::decode(&long), Err(CdrError::Trailing { count: 4 }));
    }

    #[test]
    fn time_conversions() {
        assert_eq!(Time::from_nanos(1_500_000_000), Some(Time { sec: 1, nanosec: 500_000_000 }));
        assert_eq!(Time { sec: 1, nanosec: 500_000_000 }.to_nanos(), Some(1_500_000_000));
        assert_eq!(Time::from_nanos(u64::MAX), None);
        assert_eq!(Time { sec: -1, nanosec: 0 }.to_nanos(), None);
    }
}
