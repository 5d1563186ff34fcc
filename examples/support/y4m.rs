//! YUV4MPEG2 (`.y4m`) clips as a camera: the header parsed, every frame located when the clip is
//! opened (so a truncated or malformed file is refused before anything runs), and frames read
//! one at a time into an NV12 frame (4:2:0 planar U and V interleaved on the CPU).
//!
//! Accepted: 8-bit 4:2:0 (`C420jpeg`, `C420mpeg2`, `C420paldv`, `C420`; no `C` means 4:2:0 too)
//! and 8-bit luma only (`Cmono`, chroma set to neutral), even width and height up to
//! [`MAX_DIMENSION`]. The chroma siting the tag names is not resampled, and the samples are
//! converted as whatever the converter implements (BT.601 limited range): `XCOLORRANGE=FULL`
//! is reported, not converted. `F` (frame rate), `I` (interlacing) and `A` (pixel aspect) are
//! checked and reported; frames play as fast as the pipeline takes them.
//!
//! ffmpeg writes these with `-pix_fmt yuv420p` (`C420jpeg`, or `C420mpeg2` / `C420paldv` after
//! the source's chroma location) or `-pix_fmt gray` (`Cmono`); its y4m muxer refuses NV12.

use super::nv12::Nv12Planes;
use nvsci::pipeline::FrameLayout;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Largest width or height taken (8K): larger frames do not fit the ring's buffers.
pub const MAX_DIMENSION: u32 = 8192;

/// Longest header or frame-marker line read before giving up on a file that is not a clip.
const MAX_LINE: u64 = 4096;

/// What is wrong with a clip; every message names the file, and the field or frame and value.
#[derive(Debug)]
pub enum Y4mError {
    /// The file cannot be opened or read.
    Io { path: PathBuf, action: String, source: std::io::Error },
    /// A header field is missing, malformed or unsupported (`field` empty: the header line
    /// itself).
    Header { path: PathBuf, field: &'static str, value: Option<String>, problem: String },
    /// A frame's marker or samples are missing or malformed.
    Frame { path: PathBuf, index: u64, offset: u64, problem: String },
}

impl fmt::Display for Y4mError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Y4mError::Io { path, action, source } => {
                write!(f, "{}: cannot {action}: {source}", path.display())
            }
            Y4mError::Header { path, field: "", problem, .. } => {
                write!(f, "{}: header: {problem}", path.display())
            }
            Y4mError::Header { path, field, value: None, problem } => {
                write!(f, "{}: header field {field}: {problem}", path.display())
            }
            Y4mError::Header { path, field, value: Some(v), problem } => {
                write!(f, "{}: header field {field}: {v} {problem}", path.display())
            }
            Y4mError::Frame { path, index, offset, problem } => {
                write!(f, "{}: frame {index} (byte {offset}): {problem}", path.display())
            }
        }
    }
}

impl std::error::Error for Y4mError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Y4mError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The sample layout of a clip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chroma {
    /// 8-bit 4:2:0: the Y plane, then U and V at half width and height.
    C420,
    /// 8-bit luma only.
    Mono,
}

/// What a clip's header says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub width: u32,
    pub height: u32,
    pub chroma: Chroma,
    /// The `C` value as written (`420jpeg` when the header has none).
    pub colorspace: String,
    /// `F`: frames per second as a fraction, if given.
    pub rate: Option<(u32, u32)>,
    /// `I`: `p`, `t`, `b`, `m` or `?`.
    pub interlace: char,
    /// `XCOLORRANGE`: `Some(true)` for FULL, `Some(false)` for LIMITED.
    pub full_range: Option<bool>,
}

impl Header {
    /// Bytes of samples per frame.
    pub fn frame_bytes(&self) -> usize {
        let luma = self.width as usize * self.height as usize;
        match self.chroma {
            Chroma::C420 => luma + luma / 2,
            Chroma::Mono => luma,
        }
    }

    /// One line for logs and picture metadata.
    pub fn describe(&self) -> String {
        let mut s = format!("{}x{} C{}", self.width, self.height, self.colorspace);
        if let Some((n, d)) = self.rate {
            s.push_str(&format!(" F{n}:{d}"));
        }
        s.push_str(&format!(" I{}", self.interlace));
        match self.full_range {
            Some(true) => s.push_str(" XCOLORRANGE=FULL"),
            Some(false) => s.push_str(" XCOLORRANGE=LIMITED"),
            None => {}
        }
        s
    }
}

/// A clip, checked and indexed: its header and where each frame's samples start.
#[derive(Clone, Debug)]
pub struct Y4mClip {
    path: PathBuf,
    header: Header,
    frames: Vec<u64>,
}

impl Y4mClip {
    /// Opens `path`, parses the header and locates every frame. Nothing is accepted that a
    /// later read could find short or malformed (unless the file changes meanwhile).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Y4mError> {
        let path = path.as_ref().to_path_buf();
        let io = |action: &str| {
            let path = path.clone();
            let action = action.to_string();
            move |source| Y4mError::Io { path, action, source }
        };
        let file = File::open(&path).map_err(io("open"))?;
        let len = file.metadata().map_err(io("read"))?.len();
        let mut r = BufReader::new(file);
        let line = read_line(&mut r).map_err(io("read"))?;
        let header = parse_header(&path, &line)?;
        let frame_bytes = header.frame_bytes() as u64;
        let mut frames = Vec::new();
        let mut offset = line.len() as u64;
        loop {
            let marker = read_line(&mut r).map_err(io("read"))?;
            if marker.is_empty() {
                break;
            }
            let index = frames.len() as u64;
            let bad = |problem: String| Y4mError::Frame { path: path.clone(), index, offset, problem };
            if !marker.ends_with(b"\n") {
                return Err(bad(if marker.len() as u64 >= MAX_LINE {
                    format!("no end of line within {MAX_LINE} bytes of the frame marker")
                } else {
                    format!("the file ends inside the frame marker {}", quoted(&marker))
                }));
            }
            if !(marker.starts_with(b"FRAME ") || marker == b"FRAME\n") {
                return Err(bad(format!("expected the marker FRAME, found {}", quoted(&marker))));
            }
            let start = offset + marker.len() as u64;
            let left = len.saturating_sub(start);
            if left < frame_bytes {
                return Err(bad(format!(
                    "{left} of {frame_bytes} bytes of samples before the end of the file (the header \
                     promises {})",
                    header.describe()
                )));
            }
            frames.push(start);
            offset = start + frame_bytes;
            r.seek(SeekFrom::Start(offset)).map_err(io("read"))?;
        }
        if frames.is_empty() {
            return Err(Y4mError::Frame {
                path,
                index: 0,
                offset,
                problem: "no frame after the header (the clip is empty)".into(),
            });
        }
        Ok(Self { path, header, frames })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Frames in the clip.
    pub fn frames(&self) -> u64 {
        self.frames.len() as u64
    }

    /// Checks a frame size asked for elsewhere (`--width`, `--height`) against the clip's.
    pub fn check_size(&self, width: Option<u32>, height: Option<u32>) -> Result<(), Y4mError> {
        for (field, flag, have, want) in
            [("W", "--width", self.header.width, width), ("H", "--height", self.header.height, height)]
        {
            if let Some(want) = want.filter(|&w| w != have) {
                return Err(Y4mError::Header {
                    path: self.path.clone(),
                    field,
                    value: Some(have.to_string()),
                    problem: format!(
                        "does not match {flag} {want} (the ring is sized from the clip; leave out --width \
                         and --height or convert the clip)"
                    ),
                });
            }
        }
        Ok(())
    }

    /// A reader of the clip's frames (its own file handle, for a camera thread).
    pub fn player(&self) -> Result<Y4mPlayer, Y4mError> {
        let file = File::open(&self.path).map_err(|source| Y4mError::Io {
            path: self.path.clone(),
            action: "open".into(),
            source,
        })?;
        Ok(Y4mPlayer { clip: self.clone(), file, samples: vec![0u8; self.header.frame_bytes()] })
    }
}

/// Reads frames of a [`Y4mClip`] into NV12 frames.
pub struct Y4mPlayer {
    clip: Y4mClip,
    file: File,
    samples: Vec<u8>,
}

impl Y4mPlayer {
    pub fn clip(&self) -> &Y4mClip {
        &self.clip
    }

    /// Reads frame `index` of the clip and writes it into `dst` (laid out as `layout`): luma rows
    /// as they are, U and V interleaved into the chroma plane (neutral chroma for `Cmono`).
    pub fn read_nv12(&mut self, index: u64, layout: &FrameLayout, dst: &mut [u8]) -> Result<(), Y4mError> {
        let h = &self.clip.header;
        let bad = |offset: u64, problem: String| Y4mError::Frame {
            path: self.clip.path.clone(),
            index,
            offset,
            problem,
        };
        let Some(&start) = self.clip.frames.get(index as usize) else {
            return Err(bad(0, format!("the clip has {} frames", self.clip.frames.len())));
        };
        let p = Nv12Planes::of(layout, h.width, h.height, dst.len()).map_err(|e| bad(start, e))?;
        let read =
            self.file.seek(SeekFrom::Start(start)).and_then(|_| self.file.read_exact(&mut self.samples));
        if let Err(e) = read {
            return Err(match e.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    bad(start, "the file ends inside the frame (it was shortened after it was opened)".into())
                }
                _ => Y4mError::Io {
                    path: self.clip.path.clone(),
                    action: format!("read frame {index}"),
                    source: e,
                },
            });
        }
        let (w, ht) = (p.width, p.height);
        let (luma, chroma) = self.samples.split_at(w * ht);
        for (row, src) in luma.chunks_exact(w).enumerate() {
            p.y_row(dst, row).copy_from_slice(src);
        }
        match h.chroma {
            Chroma::C420 => {
                let (u, v) = chroma.split_at(w / 2 * (ht / 2));
                for (row, (u, v)) in u.chunks_exact(w / 2).zip(v.chunks_exact(w / 2)).enumerate() {
                    for (pair, (&u, &v)) in p.uv_row(dst, row).chunks_exact_mut(2).zip(u.iter().zip(v)) {
                        pair.copy_from_slice(&[u, v]);
                    }
                }
            }
            Chroma::Mono => {
                for row in 0..ht / 2 {
                    p.uv_row(dst, row).fill(128);
                }
            }
        }
        Ok(())
    }
}

/// One line, end of line included, of at most [`MAX_LINE`] bytes (empty at the end of the file).
fn read_line(r: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::new();
    r.take(MAX_LINE).read_until(b'\n', &mut line)?;
    Ok(line)
}

/// At most 40 bytes of `bytes` (a trailing end of line left out), quoted and escaped, for
/// messages.
fn quoted(bytes: &[u8]) -> String {
    let b = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    format!("\"{}\"{}", b[..b.len().min(40)].escape_ascii(), if b.len() > 40 { "..." } else { "" })
}

fn parse_header(path: &Path, line: &[u8]) -> Result<Header, Y4mError> {
    let err = |field: &'static str, value: Option<&str>, problem: String| Y4mError::Header {
        path: path.to_path_buf(),
        field,
        value: value.map(str::to_string),
        problem,
    };
    if line.is_empty() {
        return Err(err(
            "",
            None,
            "the file is empty (a clip starts with the line YUV4MPEG2 W.. H..)".into(),
        ));
    }
    if !line.starts_with(b"YUV4MPEG2") || !matches!(line.get(9), Some(b' ' | b'\n') | None) {
        let word = line.split(|&b| b == b' ' || b == b'\n').next().unwrap_or_default();
        return Err(err("magic", Some(&quoted(word)), "is not YUV4MPEG2 (not a y4m clip)".into()));
    }
    if !line.ends_with(b"\n") {
        return Err(err(
            "",
            None,
            if line.len() as u64 >= MAX_LINE {
                format!("no end of line within the first {MAX_LINE} bytes")
            } else {
                format!(
                    "the file ends after {} bytes, inside the header line {} (truncated)",
                    line.len(),
                    quoted(line)
                )
            },
        ));
    }
    let text = String::from_utf8_lossy(&line[9..line.len() - 1]);
    let (mut width, mut height) = (None, None);
    let mut header = Header {
        width: 0,
        height: 0,
        chroma: Chroma::C420,
        colorspace: "420jpeg".into(),
        rate: None,
        interlace: '?',
        full_range: None,
    };
    let ratio = |field: &'static str, v: &str, zero_ok: bool| -> Result<(u32, u32), Y4mError> {
        let parsed =
            v.split_once(':').and_then(|(n, d)| Some((n.parse::<u32>().ok()?, d.parse::<u32>().ok()?)));
        match parsed {
            Some((n, d)) if zero_ok || (n > 0 && d > 0) => Ok((n, d)),
            _ => Err(err(field, Some(v), "is not a ratio n:d of whole numbers".into())),
        }
    };
    for token in text.split(' ').filter(|t| !t.is_empty()) {
        let (tag, v) = token.split_at(token.chars().next().map_or(0, char::len_utf8));
        match tag {
            "W" | "H" => {
                let field = if tag == "W" { "W" } else { "H" };
                let n = v
                    .parse::<u32>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| err(field, Some(v), "is not a positive whole number".into()))?;
                if tag == "W" {
                    width = Some(n);
                } else {
                    height = Some(n);
                }
            }
            "F" => header.rate = Some(ratio("F", v, false)?),
            "A" => {
                let _aspect = ratio("A", v, true)?;
            }
            "I" => {
                header.interlace = match v {
                    "p" | "t" | "b" | "m" | "?" => v.chars().next().unwrap_or('?'),
                    _ => {
                        return Err(err("I", Some(v), "is not an interlacing mode (p, t, b, m or ?)".into()))
                    }
                }
            }
            "C" => {
                header.chroma = match v {
                    "420jpeg" | "420mpeg2" | "420paldv" | "420" => Chroma::C420,
                    "mono" => Chroma::Mono,
                    _ => {
                        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
                        let deep = (v.starts_with("mono") && v.len() > 4)
                            || v.rsplit_once('p')
                                .is_some_and(|(layout, bits)| digits(layout) && digits(bits));
                        let why = if deep {
                            "more than 8 bits per sample"
                        } else if v.starts_with("422") {
                            "4:2:2 chroma"
                        } else if v.starts_with("444") {
                            "4:4:4 chroma"
                        } else if v.starts_with("411") {
                            "4:1:1 chroma"
                        } else {
                            "an unknown colour space"
                        };
                        return Err(err(
                            "C",
                            Some(&format!("chroma {v}")),
                            format!(
                                "is not supported: {why} (8-bit 4:2:0 or mono only; ffmpeg -pix_fmt yuv420p \
                                 writes 4:2:0)"
                            ),
                        ));
                    }
                };
                header.colorspace = v.to_string();
            }
            "X" => match v.split_once('=') {
                Some(("COLORRANGE", "FULL")) => header.full_range = Some(true),
                Some(("COLORRANGE", "LIMITED")) => header.full_range = Some(false),
                _ => {}
            },
            // Unknown fields are ignored, as the format asks.
            _ => {}
        }
    }
    for (field, value) in [("W", width), ("H", height)] {
        let Some(n) = value else {
            return Err(err(field, None, format!("missing (the header is {})", quoted(line))));
        };
        if !n.is_multiple_of(2) {
            return Err(err(
                field,
                Some(&n.to_string()),
                "is odd (NV12 needs an even width and height)".into(),
            ));
        }
        if n > MAX_DIMENSION {
            return Err(err(
                field,
                Some(&n.to_string()),
                format!("is more than the ring takes ({MAX_DIMENSION} at most)"),
            ));
        }
    }
    header.width = width.unwrap_or(0);
    header.height = height.unwrap_or(0);
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(text: &str) -> Result<Header, String> {
        parse_header(Path::new("clip.y4m"), text.as_bytes()).map_err(|e| e.to_string())
    }

    #[test]
    fn headers_as_ffmpeg_and_others_write_them() {
        let h = header("YUV4MPEG2 W640 H360 F25:1 Ip A1:1 C420jpeg XYSCSS=420JPEG XCOLORRANGE=LIMITED\n")
            .unwrap();
        assert_eq!(
            (h.width, h.height, h.chroma, h.rate, h.interlace),
            (640, 360, Chroma::C420, Some((25, 1)), 'p')
        );
        assert_eq!(
            (h.colorspace.as_str(), h.full_range, h.frame_bytes()),
            ("420jpeg", Some(false), 640 * 360 * 3 / 2)
        );
        let h = header("YUV4MPEG2 W64 H48 F30000:1001 It A0:0 C420mpeg2 XYSCSS=420MPEG2\n").unwrap();
        assert_eq!((h.interlace, h.rate, h.full_range), ('t', Some((30000, 1001)), None));
        // No C: 4:2:0; unknown fields ignored; mono.
        let h = header("YUV4MPEG2 H2 W4 Zwhatever\n").unwrap();
        assert_eq!((h.width, h.height, h.chroma, h.colorspace.as_str()), (4, 2, Chroma::C420, "420jpeg"));
        let h = header("YUV4MPEG2 W4 H2 Cmono XCOLORRANGE=FULL\n").unwrap();
        assert_eq!((h.chroma, h.frame_bytes(), h.full_range), (Chroma::Mono, 8, Some(true)));
        assert_eq!(h.describe(), "4x2 Cmono I? XCOLORRANGE=FULL");
    }

    #[test]
    fn bad_headers_name_the_field_and_value() {
        for (text, want) in [
            ("", "clip.y4m: header: the file is empty"),
            ("RIFF1234\n", "clip.y4m: header field magic: \"RIFF1234\" is not YUV4MPEG2"),
            ("\u{89}PNG\r\n", "header field magic: \"\\xc2\\x89PNG\\r\" is not YUV4MPEG2"),
            ("YUV4MPEG2X W2 H2\n", "header field magic: \"YUV4MPEG2X\" is not YUV4MPEG2"),
            ("YUV4MPEG2 W64 H4", "clip.y4m: header: the file ends after 16 bytes, inside the header line"),
            ("YUV4MPEG2 H48\n", "clip.y4m: header field W: missing"),
            ("YUV4MPEG2 W64\n", "clip.y4m: header field H: missing"),
            ("YUV4MPEG2 Wabc H48\n", "clip.y4m: header field W: abc is not a positive whole number"),
            ("YUV4MPEG2 W0 H48\n", "header field W: 0 is not a positive whole number"),
            ("YUV4MPEG2 W63 H48\n", "clip.y4m: header field W: 63 is odd"),
            ("YUV4MPEG2 W64 H47\n", "clip.y4m: header field H: 47 is odd"),
            (
                "YUV4MPEG2 W10000 H48\n",
                "clip.y4m: header field W: 10000 is more than the ring takes (8192 at most)",
            ),
            (
                "YUV4MPEG2 W64 H48 C422\n",
                "clip.y4m: header field C: chroma 422 is not supported: 4:2:2 chroma",
            ),
            ("YUV4MPEG2 W64 H48 C444\n", "header field C: chroma 444 is not supported: 4:4:4 chroma"),
            ("YUV4MPEG2 W64 H48 C444alpha\n", "header field C: chroma 444alpha is not supported: 4:4:4"),
            (
                "YUV4MPEG2 W64 H48 C420p10\n",
                "header field C: chroma 420p10 is not supported: more than 8 bits",
            ),
            (
                "YUV4MPEG2 W64 H48 Cmono16\n",
                "header field C: chroma mono16 is not supported: more than 8 bits",
            ),
            (
                "YUV4MPEG2 W64 H48 Cxyz\n",
                "header field C: chroma xyz is not supported: an unknown colour space",
            ),
            ("YUV4MPEG2 W64 H48 F25\n", "header field F: 25 is not a ratio"),
            ("YUV4MPEG2 W64 H48 Ix\n", "header field I: x is not an interlacing mode"),
        ] {
            let got = header(text).unwrap_err();
            assert!(got.contains(want), "{text:?}: {got}");
        }
        let long = format!("YUV4MPEG2 W2 H2 X{}", "a".repeat(MAX_LINE as usize));
        let got = header(&long[..MAX_LINE as usize]).unwrap_err();
        assert!(got.contains("no end of line within the first 4096 bytes"), "{got}");
    }
}
