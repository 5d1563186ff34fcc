//! Which bytes of a frame make a message's `data`, at what `step`: the layout arithmetic of the
//! bridge consumer, done once when it starts, from the stream's frame layout.
//!
//! `sensor_msgs/msg/Image`'s `data` is `step` bytes per row, one row after another: for `nv12`
//! the `height` luma rows, then `height / 2` rows of interleaved U, V; for `rgba8` the `height`
//! rows (`image_encodings.hpp`). `step` may exceed a row of pixels (`Image.msg`: "full row length
//! in bytes"). A pitch-linear frame whose planes share one pitch holds exactly such rows, padding
//! included ([`Rows::Stored`]); the plane's rows are then one range of the frame's bytes, which the
//! message can take as it is. Rows packed narrower than the pitch ([`Rows::Packed`]) are one range
//! per row, the first `step` bytes of each: the message takes those ranges as they are too.

use crate::config::Rows;
use crate::encoding::Encoding;
use crate::error::BridgeError;
use nvsci::buf::ImageLayout;
use nvsci::pipeline::FrameLayout;
use std::ops::Range;

/// The rows one plane gives the message, one after another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlaneRows {
    /// Offset of the plane's first row in the frame's bytes (pitch-linear frames; 0 for a
    /// block-linear plane, read from its CUDA array).
    pub offset: usize,
    /// Bytes from one row of the plane to the next in the frame (a block-linear plane: `step`).
    pub pitch: usize,
    /// Rows of the plane.
    pub rows: usize,
    /// Bytes of each row that go into the message: the message's `step`.
    pub step: usize,
}

impl PlaneRows {
    /// Bytes of the message that come from this plane.
    pub fn len(&self) -> usize {
        self.step * self.rows
    }

    /// The frame's bytes that hold the message's rows of this plane (pitch-linear frames), in
    /// as few ranges as they lie in: one where the rows lie back to back (`pitch == step`), else
    /// one per row (its first `step` bytes; the padding up to the pitch left out).
    pub fn ranges(&self) -> impl Iterator<Item = Range<usize>> {
        let p = *self;
        let (count, len) = if p.pitch == p.step { (1, p.len()) } else { (p.rows, p.step) };
        (0..count).map(move |r| {
            let at = p.offset + r * p.pitch;
            at..at + len
        })
    }
}

/// How a bridge consumer turns each frame of a stream into a message's `data`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The image's encoding.
    pub encoding: Encoding,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The message's `step`.
    pub step: u32,
    /// The planes' rows, in the message's order.
    pub planes: nvsci::heapless::Vec<PlaneRows, 2>,
    /// Whether the frames are block-linear: their planes are read from CUDA arrays, not from
    /// the frame's bytes.
    pub block_linear: bool,
}

impl Plan {
    /// The plan for frames laid out as `layout`, published as `rows` asks where the layout
    /// allows. `arrays`: whether the consumer can read a block-linear frame's planes (a CUDA
    /// consumer, through the planes' CUDA arrays); a block-linear stream is refused otherwise.
    /// Raw frames, block-linear frames without `arrays`, and layouts whose planes do not hold
    /// their rows are refused ([`BridgeError::Format`]).
    pub fn new(layout: &FrameLayout, rows: Rows, arrays: bool) -> Result<Self, BridgeError> {
        let refused = || BridgeError::Format { format: layout.format };
        let (encoding, width, height) = Encoding::of_format(&layout.format).ok_or_else(refused)?;
        let row = encoding.min_step(width) as usize;
        let h = height as usize;
        let heights: &[usize] = match encoding {
            Encoding::Nv12 => &[h, h / 2],
            Encoding::Rgba8 | Encoding::Rgb8 => &[h],
        };
        if layout.planes.len() != heights.len() {
            return Err(refused());
        }
        let mut planes = nvsci::heapless::Vec::new();
        match layout.format.image_layout() {
            Some(ImageLayout::BlockLinear) if arrays => {
                for &r in heights {
                    let _ = planes.push(PlaneRows { offset: 0, pitch: row, rows: r, step: row });
                }
                return Ok(Self { encoding, width, height, step: row as u32, planes, block_linear: true });
            }
            Some(ImageLayout::PitchLinear) => {}
            _ => return Err(refused()),
        }
        let size = usize::try_from(layout.size).map_err(|_| refused())?;
        // Each plane's rows of pixels lie inside the frame.
        for (p, &r) in layout.planes.iter().zip(heights) {
            let end = (p.pitch as usize)
                .checked_mul(r - 1)
                .and_then(|v| v.checked_add(row))
                .and_then(|v| v.checked_add(usize::try_from(p.offset).ok()?));
            if (p.pitch as usize) < row || end.is_none_or(|e| e > size) {
                return Err(refused());
            }
        }
        // As stored: one pitch for every plane, each plane's last row whole (its padding
        // included) inside the frame.
        let pitch = layout.planes[0].pitch as usize;
        let stored = rows == Rows::Stored
            && layout
                .planes
                .iter()
                .zip(heights)
                .all(|(p, &r)| p.pitch as usize == pitch && p.offset as usize + pitch * r <= size);
        let step = if stored { pitch } else { row };
        for (p, &r) in layout.planes.iter().zip(heights) {
            let _ =
                planes.push(PlaneRows { offset: p.offset as usize, pitch: p.pitch as usize, rows: r, step });
        }
        let step = u32::try_from(step).map_err(|_| refused())?;
        Ok(Self { encoding, width, height, step, planes, block_linear: false })
    }

    /// Bytes of the message's `data`.
    pub fn data_len(&self) -> usize {
        self.planes.iter().map(PlaneRows::len).sum()
    }

    /// The frame's bytes that make the message's `data`, in order: each plane's
    /// [`ranges`](PlaneRows::ranges) (pitch-linear frames; a CPU frame's message is these ranges
    /// of its mapping, with no copy).
    pub fn ranges(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        self.planes.iter().flat_map(PlaneRows::ranges)
    }

    /// Frame bytes the plan reads (the end of its last row).
    pub fn frame_bytes(&self) -> usize {
        self.planes.iter().map(|p| p.offset + p.pitch * (p.rows - 1) + p.step).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvsci::pipeline::FrameFormat;

    fn plane(offset: usize, pitch: usize, rows: usize, step: usize) -> PlaneRows {
        PlaneRows { offset, pitch, rows, step }
    }

    #[test]
    fn nv12_1080p_with_rows_padded_to_256_bytes() {
        // The mock's layout of 1920x1080 NV12: pitch 2048 (1920 up to 256), chroma at
        // 2048 * 1080 = 2 211 840, 3 317 760 bytes.
        let layout = FrameLayout::packed(FrameFormat::nv12(1920, 1080), 256, 1).unwrap();
        assert_eq!((layout.size, layout.planes[1].offset), (3_317_760, 2_211_840));

        let stored = Plan::new(&layout, Rows::Stored, false).unwrap();
        assert_eq!(stored.step, 2048);
        assert_eq!(stored.planes[..], [plane(0, 2048, 1080, 2048), plane(2_211_840, 2048, 540, 2048)]);
        // 1620 rows of 2048 bytes: the whole frame, taken as it is.
        assert_eq!(stored.data_len(), 3_317_760);
        assert_eq!(stored.ranges().collect::<Vec<_>>(), [0..2_211_840, 2_211_840..3_317_760]);

        let packed = Plan::new(&layout, Rows::Packed, false).unwrap();
        assert_eq!(packed.step, 1920);
        assert_eq!(packed.planes[..], [plane(0, 2048, 1080, 1920), plane(2_211_840, 2048, 540, 1920)]);
        // 1620 rows of 1920 bytes, each its own range: the first 1920 bytes of every 2048.
        assert_eq!(packed.data_len(), 3_110_400);
        let ranges: Vec<_> = packed.ranges().collect();
        assert_eq!(ranges.len(), 1620);
        assert_eq!(ranges[..2], [0..1920, 2048..3968]);
        assert_eq!(ranges[1079], 1079 * 2048..1079 * 2048 + 1920);
        assert_eq!(ranges[1080], 2_211_840..2_211_840 + 1920);
        assert_eq!(ranges[1619], 2_211_840 + 539 * 2048..2_211_840 + 539 * 2048 + 1920);
        assert_eq!(ranges.iter().map(|r| r.len()).sum::<usize>(), packed.data_len());
        assert_eq!(packed.frame_bytes(), 2_211_840 + 2048 * 539 + 1920);
    }

    #[test]
    fn rows_without_padding_are_taken_as_they_are_either_way() {
        // 1280 is a multiple of 256: no padding; packed rows are the stored ones.
        let layout = FrameLayout::packed(FrameFormat::nv12(1280, 720), 256, 1).unwrap();
        for rows in [Rows::Stored, Rows::Packed] {
            let p = Plan::new(&layout, rows, false).unwrap();
            assert_eq!(p.step, 1280);
            assert_eq!(p.planes[..], [plane(0, 1280, 720, 1280), plane(921_600, 1280, 360, 1280)]);
            assert_eq!(p.ranges().collect::<Vec<_>>(), [0..921_600, 921_600..1_382_400]);
        }
        // RGBA 1920 wide: 7680-byte rows, a multiple of 256.
        let layout = FrameLayout::packed(FrameFormat::Rgba { width: 1920, height: 4 }, 256, 1).unwrap();
        let p = Plan::new(&layout, Rows::Packed, false).unwrap();
        assert_eq!((p.step, p.data_len()), (7680, 4 * 7680));
        assert_eq!(p.ranges().map(|r| (r.start, r.end)).collect::<Vec<_>>(), [(0, 4 * 7680)]);
        assert_eq!(p.planes[..], [plane(0, 7680, 4, 7680)]);
    }

    #[test]
    fn planes_apart_are_two_ranges() {
        // Chroma aligned to 64 KiB: a gap after the luma rows; each plane is still one range.
        let layout = FrameLayout::packed(FrameFormat::nv12(640, 480), 256, 65536).unwrap();
        assert_eq!(layout.planes[1].offset, 393_216); // 768 * 480 = 368 640, up to 64 KiB
        let p = Plan::new(&layout, Rows::Stored, false).unwrap();
        assert_eq!(p.planes[..], [plane(0, 768, 480, 768), plane(393_216, 768, 240, 768)]);
        assert_eq!(p.ranges().collect::<Vec<_>>(), [0..368_640, 393_216..577_536]);
        assert_eq!(p.data_len(), 768 * 720);
    }

    #[test]
    fn stored_rows_fall_back_to_packed_where_the_layout_has_none() {
        let base = FrameLayout::packed(FrameFormat::nv12(64, 4), 256, 1).unwrap();
        // Planes of different pitches: no one step for both.
        let mut l = base.clone();
        l.planes[1].pitch = 512;
        l.size = 256 * 4 + 512 * 2;
        let p = Plan::new(&l, Rows::Stored, false).unwrap();
        assert_eq!(p.step, 64);
        assert_eq!(p.planes[..], [plane(0, 256, 4, 64), plane(1024, 512, 2, 64)]);
        // One range per row: luma rows 256 bytes apart, chroma rows 512 apart from 1024.
        let r: Vec<_> = p.ranges().collect();
        assert_eq!(r, [0..64, 256..320, 512..576, 768..832, 1024..1088, 1536..1600]);
        // The last chroma row's padding past the end of the frame: its pixels are inside.
        let mut l = base.clone();
        l.size = 1024 + 256 + 64;
        let p = Plan::new(&l, Rows::Stored, false).unwrap();
        assert_eq!((p.step, p.frame_bytes()), (64, 1024 + 256 + 64));
    }

    #[test]
    fn what_cannot_be_an_image_is_refused() {
        let refused = |l: &FrameLayout, arrays: bool| matches!(Plan::new(l, Rows::Stored, arrays), Err(BridgeError::Format { format }) if format == l.format);
        let raw = FrameLayout { format: FrameFormat::Raw { size: 64 }, size: 64, planes: Default::default() };
        assert!(refused(&raw, true));
        let base = FrameLayout::packed(FrameFormat::nv12(64, 4), 256, 1).unwrap();
        // A pitch below a row.
        let mut l = base.clone();
        l.planes[0].pitch = 32;
        assert!(refused(&l, false));
        // A frame too short for its last chroma row's pixels.
        let mut l = base.clone();
        l.size = 1024 + 256 + 63;
        assert!(refused(&l, false));
        // One plane for NV12.
        let mut l = base.clone();
        l.planes.pop();
        assert!(refused(&l, false));
    }

    #[test]
    fn block_linear_planes_come_packed_from_their_arrays() {
        // A block-linear layout's offsets and pitches describe tiles; the message's rows come
        // from the planes' arrays, packed: 64 luma bytes per row, 32 U, V pairs per chroma row.
        let mut l = FrameLayout::packed(FrameFormat::nv12(64, 32), 64, 4096).unwrap();
        l.format = FrameFormat::nv12_block_linear(64, 32);
        assert!(matches!(
            Plan::new(&l, Rows::Stored, false),
            Err(BridgeError::Format { format }) if format == l.format
        ));
        for rows in [Rows::Stored, Rows::Packed] {
            let p = Plan::new(&l, rows, true).unwrap();
            assert!(p.block_linear);
            assert_eq!(p.step, 64);
            assert_eq!(p.planes[..], [plane(0, 64, 32, 64), plane(0, 64, 16, 64)]);
            assert_eq!(p.data_len(), 64 * 48);
        }
    }

    #[test]
    fn packed_rows_are_the_first_step_bytes_of_each_row() {
        // 4x2 NV12 in rows of 8 bytes: luma rows at 0 and 8, chroma at 16.
        let mut l = FrameLayout::packed(FrameFormat::nv12(4, 2), 8, 1).unwrap();
        l.size = 24;
        let frame: Vec<u8> = (0..24).collect();
        let p = Plan::new(&l, Rows::Packed, false).unwrap();
        let data: Vec<u8> = p.ranges().flat_map(|r| frame[r].to_vec()).collect();
        assert_eq!(data, [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19]);
        assert_eq!(p.frame_bytes(), 20);
    }
}
