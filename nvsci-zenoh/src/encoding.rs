//! The pixel encodings the bridge carries, as ROS names them, and the checks that a received
//! image is what it says it is and fits the local stream.
//!
//! Names and sizes from ros2/common_interfaces `sensor_msgs/include/sensor_msgs/image_encodings.hpp`
//! (Kilted): `rgb8` (3 channels of 8 bits), `rgba8` (4 channels of 8 bits) and `nv12` (planar;
//! 1 channel of 8 bits, so `step` is the luma row, and `getHeightScaling` 1.5: the luma rows,
//! then half as many rows of interleaved U/V). `nv12` exists from Kilted and Rolling on; Jazzy
//! and Humble do not know it.

use crate::cdr::Image;
use nvsci::pipeline::FrameFormat;

/// A pixel encoding the bridge knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Encoding {
    /// `nv12`: a luma plane of `height` rows of `step` bytes, then `height / 2` rows of
    /// interleaved U, V (U first) of `step` bytes. The nvsci NV12 frames.
    Nv12,
    /// `rgba8`: 4 bytes per pixel, R, G, B, A. The nvsci RGBA frames.
    Rgba8,
    /// `rgb8`: 3 bytes per pixel, R, G, B. Recognised and checked; no nvsci frame format holds it.
    Rgb8,
}

impl Encoding {
    /// The encoding named `name` (ROS's spelling), if the bridge knows it.
    pub fn from_ros(name: &str) -> Option<Self> {
        match name {
            "nv12" => Some(Self::Nv12),
            "rgba8" => Some(Self::Rgba8),
            "rgb8" => Some(Self::Rgb8),
            _ => None,
        }
    }

    /// ROS's name of the encoding.
    pub fn ros_name(self) -> &'static str {
        match self {
            Self::Nv12 => "nv12",
            Self::Rgba8 => "rgba8",
            Self::Rgb8 => "rgb8",
        }
    }

    /// The encoding of a stream's frames and their width and height (`None` for raw frames).
    pub fn of_format(format: &FrameFormat) -> Option<(Self, u32, u32)> {
        match *format {
            FrameFormat::Nv12 { width, height, .. } => Some((Self::Nv12, width, height)),
            FrameFormat::Rgba { width, height } => Some((Self::Rgba8, width, height)),
            _ => None,
        }
    }

    /// Bytes of one row of pixels (the smallest `step`); for NV12, a luma row.
    pub fn min_step(self, width: u32) -> u64 {
        width as u64
            * match self {
                Self::Nv12 => 1,
                Self::Rgba8 => 4,
                Self::Rgb8 => 3,
            }
    }

    /// Rows of `step` bytes in an image `height` pixels high (NV12: 1.5 times the height).
    pub fn rows(self, height: u32) -> u64 {
        match self {
            Self::Nv12 => height as u64 * 3 / 2,
            Self::Rgba8 | Self::Rgb8 => height as u64,
        }
    }
}

/// A received image that cannot go into the local stream: what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The encoding is none the bridge knows ([`Encoding`]).
    #[error("unknown encoding `{encoding}` (the bridge carries nv12, rgba8 and rgb8)")]
    UnknownEncoding {
        /// The encoding the message named.
        encoding: String,
    },
    /// `step` is smaller than one row of pixels.
    #[error("step {step} is smaller than a row of {width} pixels of {encoding:?} ({min} bytes)")]
    Step {
        /// The encoding.
        encoding: Encoding,
        /// The message's width.
        width: u32,
        /// The message's step.
        step: u32,
        /// The smallest step for the width.
        min: u64,
    },
    /// NV12 with an odd width or height (4:2:0 chroma needs both even).
    #[error("nv12 needs an even width and height, got {width}x{height}")]
    OddNv12 {
        /// The message's width.
        width: u32,
        /// The message's height.
        height: u32,
    },
    /// `data` does not hold `step` times the rows the encoding has for the height.
    #[error("{encoding:?} {width}x{height}, step {step}: {expected} data bytes expected, {actual} received")]
    Size {
        /// The encoding.
        encoding: Encoding,
        /// The message's width.
        width: u32,
        /// The message's height.
        height: u32,
        /// The message's step.
        step: u32,
        /// `step` times the rows.
        expected: u64,
        /// `data`'s length.
        actual: usize,
    },
    /// The image is in another encoding than the local stream's frames.
    #[error("a {received:?} image for a stream of {stream:?} frames")]
    EncodingMismatch {
        /// The message's encoding.
        received: Encoding,
        /// The encoding of the stream's frames (`None`: raw frames, which hold no image).
        stream: Option<Encoding>,
    },
    /// The image is wider or higher than the local stream's frames.
    #[error("a {width}x{height} image is larger than the stream's {stream_width}x{stream_height} frames")]
    TooLarge {
        /// The message's width.
        width: u32,
        /// The message's height.
        height: u32,
        /// The stream's frame width.
        stream_width: u32,
        /// The stream's frame height.
        stream_height: u32,
    },
    /// The image is smaller than the local stream's frames (the bridge does not scale or pad).
    #[error("a {width}x{height} image does not match the stream's {stream_width}x{stream_height} frames")]
    Dimensions {
        /// The message's width.
        width: u32,
        /// The message's height.
        height: u32,
        /// The stream's frame width.
        stream_width: u32,
        /// The stream's frame height.
        stream_height: u32,
    },
}

/// Checks that `img` is a consistent image of a known encoding (its size matches its width,
/// height, step and encoding) and returns the encoding.
pub fn check_image(img: &Image<'_>) -> Result<Encoding, ImageError> {
    let encoding = Encoding::from_ros(img.encoding)
        .ok_or_else(|| ImageError::UnknownEncoding { encoding: img.encoding.to_owned() })?;
    let (width, height, step) = (img.width, img.height, img.step);
    if encoding == Encoding::Nv12 && (width % 2 != 0 || height % 2 != 0) {
        return Err(ImageError::OddNv12 { width, height });
    }
    let min = encoding.min_step(width);
    if (step as u64) < min {
        return Err(ImageError::Step { encoding, width, step, min });
    }
    let expected = step as u64 * encoding.rows(height);
    if expected != img.data.len() as u64 {
        return Err(ImageError::Size { encoding, width, height, step, expected, actual: img.data.len() });
    }
    Ok(encoding)
}

/// Checks that `img` (already [`check_image`]d as `encoding`) fits a stream of `format` frames:
/// the same encoding and the same width and height.
pub fn check_fits(img: &Image<'_>, encoding: Encoding, format: &FrameFormat) -> Result<(), ImageError> {
    let Some((stream, stream_width, stream_height)) = Encoding::of_format(format) else {
        return Err(ImageError::EncodingMismatch { received: encoding, stream: None });
    };
    if stream != encoding {
        return Err(ImageError::EncodingMismatch { received: encoding, stream: Some(stream) });
    }
    let (width, height) = (img.width, img.height);
    if width > stream_width || height > stream_height {
        return Err(ImageError::TooLarge { width, height, stream_width, stream_height });
    }
    if (width, height) != (stream_width, stream_height) {
        return Err(ImageError::Dimensions { width, height, stream_width, stream_height });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdr::Time;

    fn img<'a>(encoding: &'a str, width: u32, height: u32, step: u32, data: &'a [u8]) -> Image<'a> {
        Image { stamp: Time::default(), frame_id: "", height, width, encoding, is_bigendian: 0, step, data }
    }

    #[test]
    fn sizes_follow_image_encodings_hpp() {
        // nv12 4x2: step 4, 2 luma rows + 1 chroma row = 12 bytes.
        assert_eq!(check_image(&img("nv12", 4, 2, 4, &[0; 12])), Ok(Encoding::Nv12));
        // rgba8 3x2 with rows padded to 16 bytes: 32 bytes.
        assert_eq!(check_image(&img("rgba8", 3, 2, 16, &[0; 32])), Ok(Encoding::Rgba8));
        // rgb8 3x2: step 9, 18 bytes.
        assert_eq!(check_image(&img("rgb8", 3, 2, 9, &[0; 18])), Ok(Encoding::Rgb8));
    }

    #[test]
    fn inconsistent_images_name_what_is_wrong() {
        assert_eq!(
            check_image(&img("yuv420", 4, 2, 4, &[0; 12])),
            Err(ImageError::UnknownEncoding { encoding: "yuv420".into() })
        );
        assert_eq!(
            check_image(&img("NV12", 4, 2, 4, &[0; 12])),
            Err(ImageError::UnknownEncoding { encoding: "NV12".into() }),
            "ROS names are lowercase"
        );
        assert_eq!(
            check_image(&img("nv12", 3, 2, 4, &[0; 12])),
            Err(ImageError::OddNv12 { width: 3, height: 2 })
        );
        assert_eq!(
            check_image(&img("rgba8", 3, 2, 11, &[0; 22])),
            Err(ImageError::Step { encoding: Encoding::Rgba8, width: 3, step: 11, min: 12 })
        );
        assert_eq!(
            check_image(&img("nv12", 4, 2, 4, &[0; 8])),
            Err(ImageError::Size {
                encoding: Encoding::Nv12,
                width: 4,
                height: 2,
                step: 4,
                expected: 12,
                actual: 8
            })
        );
        assert_eq!(
            check_image(&img("rgb8", 1, 1, 3, &[0; 4])),
            Err(ImageError::Size {
                encoding: Encoding::Rgb8,
                width: 1,
                height: 1,
                step: 3,
                expected: 3,
                actual: 4
            })
        );
    }

    #[test]
    fn fitting_the_stream() {
        let nv12 = FrameFormat::nv12(4, 2);
        let data = [0u8; 64];
        let ok = img("nv12", 4, 2, 4, &data[..12]);
        assert_eq!(check_fits(&ok, Encoding::Nv12, &nv12), Ok(()));
        let rgba = img("rgba8", 4, 2, 16, &data[..32]);
        assert_eq!(
            check_fits(&rgba, Encoding::Rgba8, &nv12),
            Err(ImageError::EncodingMismatch { received: Encoding::Rgba8, stream: Some(Encoding::Nv12) })
        );
        assert_eq!(
            check_fits(&rgba, Encoding::Rgba8, &FrameFormat::Raw { size: 64 }),
            Err(ImageError::EncodingMismatch { received: Encoding::Rgba8, stream: None })
        );
        let big = img("nv12", 6, 2, 6, &data[..18]);
        assert_eq!(
            check_fits(&big, Encoding::Nv12, &nv12),
            Err(ImageError::TooLarge { width: 6, height: 2, stream_width: 4, stream_height: 2 })
        );
        let small = img("nv12", 2, 2, 2, &data[..6]);
        assert_eq!(
            check_fits(&small, Encoding::Nv12, &nv12),
            Err(ImageError::Dimensions { width: 2, height: 2, stream_width: 4, stream_height: 2 })
        );
    }
}
