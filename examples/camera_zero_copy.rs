//! A camera feeding a zero-copy frame ring, with a consumer converting NV12 to RGBA, and the
//! pictures to judge the result by.
//!
//! ```text
//! cargo run --example camera_zero_copy -- --out frame.png            # best backend present, else the mock
//! cargo run --example camera_zero_copy -- --contact-sheet sheet.png  # every Nth frame in a grid
//! cargo run --example camera_zero_copy -- --input clip.y4m [--loop --frames N]
//! cargo run --release --features vulkan --example camera_zero_copy -- --backend vulkan
//!     [--width 1920 --height 1080 --frames N --buffers 4 --recorder --compare-copy]
//! ```
//!
//! One loop serves every backend: the camera (a CPU thread) writes each frame into the ring and
//! presents it; the converter waits for the frame's present fence on its own engine, converts,
//! and releases the frame with its own engine's fence.
//!
//! * nvsci (Jetson/DRIVE): NvSciBuf frames and NvSciSync fences imported into CUDA; the
//!   converter is a CUDA kernel that waits and signals on its stream.
//! * mock: the mock NvSci; with a CUDA GPU, the same CUDA converter as on Jetson (mock buffers
//!   page-locked in host memory, fences as counters the stream waits on and writes); without
//!   one, the conversion runs on the CPU.
//! * vulkan (desktop NVIDIA GPU, feature `vulkan`): Vulkan-exported frames and timeline
//!   semaphores; the same CUDA converter.
//!
//! The camera shows a test pattern (75% colour bars, reverse bars, the frame number and a moving
//! square, BT.601 limited range: `support/test_pattern.rs`) or plays a YUV4MPEG2 clip
//! (`--input`, 8-bit 4:2:0 or mono, its planes interleaved into NV12 on the CPU:
//! `support/y4m.rs`). `--out` writes the last converted frame as a PNG, `--contact-sheet` every
//! Nth converted frame in a labelled grid (`support/contact_sheet.rs`); both state the colour
//! conversion in the PNG's text chunks. docs/pipeline.md lists the bars' values.
//!
//! Every converted frame is checked against an independent reference, the camera's frame
//! converted by a BT.601 oracle written from the standard (`support/bt601.rs`, not the crate's
//! converter): its R + G + B statistic first, as a fast pre-check, then a position-sensitive
//! digest of its pixels (`support/rgba_digest.rs`, computed on the converter's engine next to the
//! conversion, so no frame is read back: it changes whenever a pixel, a channel or a pixel's
//! place differs), and the last frame byte for byte. The program exits non-zero on any mismatch.
//! `--recorder` adds a second consumer, a CPU recorder reading the frames in place, that
//! checksums every frame (every backend). `--compare-copy` (CUDA converter) also runs the copy
//! pipeline a user would otherwise write (the camera writes each frame into ordinary host
//! memory, cuMemcpyHtoD, same kernel) and prints both. Set `RUST_LOG=debug` to see the
//! memory-sync decision of every wait and signal.

#[path = "support/bt601.rs"]
mod bt601;
#[path = "support/contact_sheet.rs"]
mod contact_sheet;
#[path = "support/digits.rs"]
mod digits;
#[path = "support/nv12.rs"]
mod nv12;
#[path = "support/rgba_digest.rs"]
mod rgba_digest;
#[path = "support/rusage.rs"]
mod rusage;
#[path = "support/test_pattern.rs"]
mod test_pattern;
#[path = "support/y4m.rs"]
mod y4m;

use nv12::{tight_layout, Nv12Planes};
use nvsci::buf::{ImageLayout, PlaneDst, PlaneSrc, SplitChroma};
use nvsci::convert::nv12_to_rgba;
use nvsci::pipeline::{Backend, Consumer, ConsumerDesc, Engine, FrameFormat, FrameLayout};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use test_pattern::ColourBars;
use y4m::{Y4mClip, Y4mPlayer};

/// How the converters turn Y'CbCr into RGB (`nvsci::convert`, CPU and CUDA alike).
const CONVERSION: &str = "Y'CbCr to RGB: BT.601 matrix, limited range (Y 16-235, Cb/Cr 16-240), \
     8-bit integer arithmetic (nvsci::convert)";

const HELP: &str = "\
camera_zero_copy: a camera feeding a zero-copy frame ring, an NV12 -> RGBA converter, pictures

usage: camera_zero_copy [options]

  --backend auto|nvsci|vulkan|mock  where frames and fences come from (default auto: the best present)
  --width W --height H        test pattern size, even (default 1920x1080 with a CUDA converter,
                              640x360 on the CPU; a clip has its own size)
  --frames N                  frames to run (default 600 with CUDA, 24 on the CPU; a clip: its length)
  --buffers N                 frames in the ring, 2 to 16 (default 4)
  --layout pitch-linear|block-linear
                              how the ring's NV12 planes lie in memory (default pitch-linear);
                              block-linear needs an NvSci backend (nvsci, or mock): with a CUDA
                              engine the camera renders pitch-linear into pinned host memory and the
                              producer's CUDA stream lays it out (Producer::upload_planes), else it
                              puts pixels with put_pixels; the CPU reads them with get_pixels, CUDA
                              reads each plane as a read-only array through a texture
  --put-pixels                block-linear: write with put_pixels (NvSciBuf restricts it to debug
                              software) even where a CUDA engine could lay the frame out
  --input clip.y4m            play a YUV4MPEG2 clip (8-bit 4:2:0 or mono) instead of the test pattern
  --loop                      repeat the clip until --frames frames ran (without it the run stops at
                              the clip's end)
  --out frame.png             write the last converted frame
  --contact-sheet sheet.png   write every Nth converted frame in a grid, each labelled with its number
  --every N                   the N of --contact-sheet (default: 12 tiles at most, 64 allowed)
  --recorder                  add a CPU consumer that checksums every frame in place
  --compare-copy              also run the copy pipeline (CUDA converter) and compare frame rates
  -h, --help                  this text

The test pattern is NV12 with the BT.601 matrix and limited range (what the converters implement):
75% colour bars, left to right white, yellow, cyan, green, magenta, red, blue (Y Cb Cr 180 128 128,
162 44 142, 131 156 44, 112 72 58, 84 184 198, 65 100 212, 35 212 114; converted to about 191 or 0
per channel), reverse bars below them (blue, black, magenta, black, cyan, black, white), and a black
band with the frame number and a square moving to the right, both 100% white (Y 235, RGB 255).
Clips are converted the same way, whatever their source used: for ffmpeg, -pix_fmt yuv420p
(its y4m muxer refuses nv12), e.g.
  ffmpeg -i input.mp4 -vf scale=640:360 -pix_fmt yuv420p -frames:v 120 clip.y4m
(for BT.709 material, most HD video, convert the matrix too: -vf colorspace=all=bt601-6-625:iall=bt709).
The PNGs state the conversion in their text chunks. Every frame is verified against an independent
BT.601 conversion of what the camera wrote (its R + G + B, a position-sensitive digest of its pixels,
and the last frame byte for byte); the exit status says whether all matched.";

#[derive(Clone, Debug, Default)]
struct Args {
    width: Option<u32>,
    height: Option<u32>,
    frames: Option<u64>,
    buffers: Option<usize>,
    /// `auto`, `nvsci`, `vulkan` or `mock` (`None`: auto).
    backend: Option<String>,
    input: Option<PathBuf>,
    looping: bool,
    out: Option<PathBuf>,
    sheet: Option<PathBuf>,
    every: Option<u64>,
    recorder: bool,
    compare_copy: bool,
    block_linear: bool,
    put_pixels: bool,
    /// A deliberately broken CPU converter (the tests show that verification fails on it).
    #[cfg(test)]
    fault: Option<bt601::Fault>,
}

/// The command line, or `None` for `--help`.
fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Args>, String> {
    let mut a = Args::default();
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        macro_rules! number {
            () => {{
                let v = value()?;
                Some(v.parse().map_err(|e| format!("{flag} {v}: {e}"))?)
            }};
        }
        match flag.as_str() {
            "--width" => a.width = number!(),
            "--height" => a.height = number!(),
            "--frames" => a.frames = number!(),
            "--buffers" => a.buffers = number!(),
            "--every" => a.every = number!(),
            "--backend" => {
                let v = value()?;
                a.backend = if v == "auto" { None } else { Some(v.to_owned()) };
            }
            "--input" => a.input = Some(PathBuf::from(value()?)),
            "--loop" => a.looping = true,
            "--out" => a.out = Some(PathBuf::from(value()?)),
            "--contact-sheet" => a.sheet = Some(PathBuf::from(value()?)),
            "--recorder" => a.recorder = true,
            "--compare-copy" => a.compare_copy = true,
            "--put-pixels" => a.put_pixels = true,
            "--layout" => {
                a.block_linear = match value()?.as_str() {
                    "pitch-linear" => false,
                    "block-linear" => true,
                    v => return Err(format!("--layout {v}: pitch-linear or block-linear")),
                }
            }
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Some(a))
}

/// Every Nth frame kept for the contact sheet, `tiles` of them.
#[derive(Clone, Copy, Debug)]
struct Capture {
    every: u64,
    tiles: u64,
}

impl Capture {
    /// Whether frame `seq` goes on the sheet, given `taken` frames already there.
    fn wants(&self, seq: u64, taken: usize) -> bool {
        seq.is_multiple_of(self.every) && (taken as u64) < self.tiles
    }
}

/// Where the camera's frames come from.
#[derive(Clone, Debug)]
enum Input {
    Pattern,
    Clip(Y4mClip),
}

/// What a run does, every default resolved.
#[derive(Clone, Debug)]
struct Plan {
    width: u32,
    height: u32,
    frames: u64,
    buffers: usize,
    recorder: bool,
    compare_copy: bool,
    /// Block-linear frames (`--layout block-linear`).
    block_linear: bool,
    /// Block-linear frames written with `put_pixels` even where a CUDA engine could upload them.
    put_pixels: bool,
    input: Input,
    capture: Option<Capture>,
    /// A deliberately broken converter: set by the tests only, on the CPU converter.
    fault: Option<bt601::Fault>,
}

/// A block-linear frame's pixels on the CPU: a tight pitch-linear NV12 frame (`tight_layout`)
/// the camera renders into before `put_pixels`, and consumers read into with `get_pixels`. The
/// pixel calls take Y, U and V user planes (nvscibuf.h), so the chroma goes through `chroma`.
struct Scratch {
    layout: FrameLayout,
    frame: Vec<u8>,
    chroma: SplitChroma,
}

impl Scratch {
    fn new(width: u32, height: u32) -> Result<Self, String> {
        let layout = tight_layout(width, height)?;
        let chroma = SplitChroma::new(width.div_ceil(2), height.div_ceil(2), 1);
        Ok(Self { frame: vec![0u8; layout.size as usize], layout, chroma })
    }

    /// Writes the scratch frame into a held block-linear frame.
    fn put(
        &mut self,
        p: &nvsci::pipeline::Producer,
        f: &nvsci::pipeline::ProducerFrame,
    ) -> Result<(), String> {
        let (off, pitch) = (self.layout.planes[1].offset as usize, self.layout.planes[0].pitch);
        let (y, uv) = self.frame.split_at(off);
        self.chroma.split_from(PlaneSrc { data: uv, pitch }).map_err(|e| e.to_string())?;
        let [u, v] = self.chroma.planes();
        p.put_pixels(f, None, &[PlaneSrc { data: y, pitch }, u, v]).map_err(|e| e.to_string())
    }

    /// Reads a held block-linear frame's pixels into the scratch frame.
    fn get(&mut self, c: &Consumer, f: &nvsci::pipeline::ConsumerFrame) -> Result<(), String> {
        let (off, pitch) = (self.layout.planes[1].offset as usize, self.layout.planes[0].pitch);
        let (y, uv) = self.frame.split_at_mut(off);
        let [u, v] = self.chroma.planes_mut();
        let mut planes = [PlaneDst { data: y, pitch }, u, v];
        c.get_pixels(f, None, &mut planes).map_err(|e| e.to_string())?;
        self.chroma.interleave_into(PlaneDst { data: uv, pitch }).map_err(|e| e.to_string())
    }
}

impl Plan {
    /// Resolves `a` for a backend with (`gpu`) or without a CUDA converter.
    fn new(a: &Args, clip: Option<Y4mClip>, gpu: bool) -> Result<Self, String> {
        let default_frames = if gpu { 600 } else { 24 };
        // The CPU converter is slow in a debug build: keep its default run small.
        let (dw, dh) = if gpu { (1920, 1080) } else { (640, 360) };
        let (width, height, frames) = match &clip {
            None => {
                if a.looping {
                    println!("note: --loop repeats an --input clip; the test pattern runs --frames frames");
                }
                (a.width.unwrap_or(dw), a.height.unwrap_or(dh), a.frames.unwrap_or(default_frames))
            }
            Some(c) => {
                c.check_size(a.width, a.height).map_err(|e| e.to_string())?;
                let frames = match a.frames {
                    _ if a.looping => a.frames.unwrap_or(default_frames),
                    Some(n) if n > c.frames() => {
                        println!(
                            "note: {} has {} frames: the run stops at its end (--loop repeats it)",
                            c.path().display(),
                            c.frames()
                        );
                        c.frames()
                    }
                    n => n.unwrap_or(c.frames()),
                };
                (c.header().width, c.header().height, frames)
            }
        };
        FrameFormat::nv12(width, height).validate().map_err(|e| e.to_string())?;
        for (flag, v) in [("--width", width), ("--height", height)] {
            if v > y4m::MAX_DIMENSION {
                return Err(format!("{flag} {v}: more than the ring takes ({} at most)", y4m::MAX_DIMENSION));
            }
        }
        if frames == 0 {
            return Err("--frames 0: nothing to run".into());
        }
        let capture = match (&a.sheet, a.every) {
            (None, Some(_)) => {
                println!("note: --every applies to --contact-sheet; no sheet asked for");
                None
            }
            (None, None) => None,
            (Some(_), Some(0)) => return Err("--every 0: give a frame interval of 1 or more".into()),
            (Some(_), every) => {
                let every = every.unwrap_or(frames.div_ceil(12));
                let tiles = frames.div_ceil(every);
                if tiles > contact_sheet::MAX_TILES {
                    return Err(format!(
                        "--every {every} over {frames} frames makes {tiles} tiles; a contact sheet takes at most \
                         {} (raise --every)",
                        contact_sheet::MAX_TILES
                    ));
                }
                Some(Capture { every, tiles })
            }
        };
        Ok(Self {
            width,
            height,
            frames,
            buffers: a.buffers.unwrap_or(4),
            recorder: a.recorder,
            compare_copy: a.compare_copy,
            block_linear: a.block_linear,
            put_pixels: a.put_pixels,
            input: clip.map_or(Input::Pattern, Input::Clip),
            capture,
            #[cfg(test)]
            fault: a.fault,
            #[cfg(not(test))]
            fault: None,
        })
    }

    /// What frame `seq` shows, in words.
    fn describe_frame(&self, seq: u64) -> String {
        match &self.input {
            Input::Pattern => {
                format!(
                    "test pattern frame {seq}: {}; {}",
                    test_pattern::DESCRIPTION,
                    test_pattern::bar_values()
                )
            }
            Input::Clip(c) => format!(
                "{} frame {} of {} ({}), run frame {seq}",
                c.path().display(),
                seq % c.frames(),
                c.frames(),
                c.header().describe()
            ),
        }
    }
}

/// A camera's frames: the test pattern, or a clip read frame by frame.
enum Source {
    Pattern(Box<ColourBars>),
    Clip(Box<Y4mPlayer>),
}

impl Source {
    fn open(plan: &Plan) -> Result<Self, String> {
        Ok(match &plan.input {
            Input::Pattern => Source::Pattern(Box::new(ColourBars::new(plan.width, plan.height))),
            Input::Clip(c) => Source::Clip(Box::new(c.player().map_err(|e| e.to_string())?)),
        })
    }

    /// Writes frame `seq` (a clip's frame `seq` modulo its length) into `dst`, laid out as
    /// `layout`.
    fn write_frame(&mut self, seq: u64, layout: &FrameLayout, dst: &mut [u8]) -> Result<(), String> {
        match self {
            Source::Pattern(p) => p.write_frame(seq, layout, dst),
            Source::Clip(p) => {
                let n = p.clip().frames();
                p.read_nv12(seq % n, layout, dst).map_err(|e| e.to_string())
            }
        }
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// FNV-1a over the visible bytes of an NV12 frame (luma rows, then chroma rows; no padding).
fn frame_checksum(p: &Nv12Planes, frame: &[u8]) -> u64 {
    let h = (0..p.height).fold(FNV_OFFSET, |h, row| fnv1a(h, p.y_row_of(frame, row)));
    (0..p.height / 2).fold(h, |h, row| fnv1a(h, p.uv_row_of(frame, row)))
}

/// What each frame must convert to: the camera's frames rendered again here and converted by
/// the BT.601 oracle (`bt601`), independently of the converters under test.
struct Expected {
    source: Source,
    layout: FrameLayout,
    planes: Nv12Planes,
    frame: Vec<u8>,
    /// Test pattern: frame 0's checks without its white pixels (every pattern frame is that
    /// picture plus its own white pixels over black).
    base: Option<Checks>,
    /// Clip: the checks and the NV12 checksum per clip frame.
    clip_frames: HashMap<u64, (Checks, u64)>,
}

/// What a converted frame is checked by: its R + G + B (a fast pre-check) and the
/// position-sensitive digest of its pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Checks {
    statistic: u64,
    digest: u64,
}

impl Checks {
    fn of(rgba: &[u8]) -> Self {
        Self { statistic: bt601::statistic(rgba), digest: rgba_digest::digest(rgba) }
    }
}

impl Expected {
    fn new(plan: &Plan) -> Result<Self, String> {
        let layout = tight_layout(plan.width, plan.height)?;
        let planes = Nv12Planes::of(&layout, plan.width, plan.height, layout.size as usize)?;
        Ok(Self {
            source: Source::open(plan)?,
            frame: vec![0u8; layout.size as usize],
            layout,
            planes,
            base: None,
            clip_frames: HashMap::new(),
        })
    }

    /// Frame `seq` as the oracle converts it.
    fn rgba(&mut self, seq: u64) -> Result<Vec<u8>, String> {
        self.source.write_frame(seq, &self.layout, &mut self.frame)?;
        let (p, frame) = (&self.planes, &self.frame);
        Ok(bt601::rgba(p.width as u32, p.height as u32, |x, row| {
            let (x, row) = (x as usize, row as usize);
            let uv = &p.uv_row_of(frame, row / 2)[x & !1..];
            [p.y_row_of(frame, row)[x], uv[0], uv[1]]
        }))
    }

    /// The checks of frame `seq`. Test-pattern frames differ only in which pixels of the black
    /// band are white (neutral chroma both), so frame 0 is converted once and every other
    /// frame's checks follow from its white pixels.
    fn checks(&mut self, seq: u64) -> Result<Checks, String> {
        if let Source::Clip(p) = &self.source {
            let n = p.clip().frames();
            return self.clip_frame(seq % n).map(|v| v.0);
        }
        let base = match self.base {
            Some(b) => b,
            None => {
                let all = Checks::of(&self.rgba(0)?);
                *self.base.insert(self.with_white_pixels(0, all, false))
            }
        };
        Ok(self.with_white_pixels(seq, base, true))
    }

    /// `checks` with frame `seq`'s white pixels painted over black (`add`) or taken back to black.
    fn with_white_pixels(&self, seq: u64, mut checks: Checks, add: bool) -> Checks {
        let Source::Pattern(p) = &self.source else { return checks };
        let px = |[y, cb, cr]: [u8; 3]| {
            let [r, g, b] = bt601::rgb(y, cb, cr);
            [r, g, b, 255]
        };
        let (white, black) = (px(test_pattern::WHITE), px(test_pattern::BLACK));
        let (from, to) = if add { (black, white) } else { (white, black) };
        let width = self.planes.width as u64;
        p.white_runs(seq, |row, columns| {
            for x in columns {
                let i = row as u64 * width + x as u64;
                let c = &mut checks;
                c.statistic = c.statistic + bt601::statistic(&to) - bt601::statistic(&from);
                c.digest =
                    c.digest.wrapping_sub(rgba_digest::term(i, from)).wrapping_add(rgba_digest::term(i, to));
            }
        });
        checks
    }

    /// The checksum of the visible bytes of frame `seq`.
    fn checksum(&mut self, seq: u64) -> Result<u64, String> {
        if let Source::Clip(p) = &self.source {
            let n = p.clip().frames();
            return self.clip_frame(seq % n).map(|v| v.1);
        }
        self.source.write_frame(seq, &self.layout, &mut self.frame)?;
        Ok(frame_checksum(&self.planes, &self.frame))
    }

    fn clip_frame(&mut self, index: u64) -> Result<(Checks, u64), String> {
        if let Some(&v) = self.clip_frames.get(&index) {
            return Ok(v);
        }
        let rgba = self.rgba(index)?;
        let v = (Checks::of(&rgba), frame_checksum(&self.planes, &self.frame));
        self.clip_frames.insert(index, v);
        Ok(v)
    }
}

/// Frame rate and latency summary of one run.
struct Stats {
    label: String,
    frames: u64,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Stats {
    fn percentile(&self, p: f64) -> Duration {
        let mut v = self.latencies.clone();
        v.sort();
        v.get(((v.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or_default()
    }
    fn fps(&self) -> f64 {
        self.frames as f64 / self.elapsed.as_secs_f64()
    }
    fn print(&self) {
        println!(
            "{}: {} frames, {:.1} frames/s, latency p50 {:.3} ms, p99 {:.3} ms",
            self.label,
            self.frames,
            self.fps(),
            self.percentile(0.5).as_secs_f64() * 1e3,
            self.percentile(0.99).as_secs_f64() * 1e3
        );
    }
}

/// A PNG of `rgba` with tEXt chunks (`keyword`, text; characters outside Latin-1 become `?`).
fn write_png(path: &Path, w: u32, h: u32, rgba: &[u8], text: &[(&str, String)]) -> Result<(), String> {
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let file = std::fs::File::create(path).map_err(|e| at(&e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    for (keyword, value) in text {
        let latin1: String = value.chars().map(|c| if (c as u32) < 0x100 { c } else { '?' }).collect();
        enc.add_text_chunk(keyword.to_string(), latin1).map_err(|e| at(&e))?;
    }
    let mut wr = enc.write_header().map_err(|e| at(&e))?;
    wr.write_image_data(rgba).map_err(|e| at(&e))?;
    wr.finish().map_err(|e| at(&e))
}

/// What a run produced: its timing, the last converted frame and the frames for the sheet.
struct Outcome {
    stats: Vec<Stats>,
    last: (u64, Vec<u8>),
    captures: Vec<(u64, Vec<u8>)>,
    mismatches: Mismatches,
    /// How the camera wrote its frames.
    writer: Writer,
}

/// Frames that failed a check, per check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Mismatches {
    /// Converted frames whose R + G + B differs from the reference's.
    statistic: u64,
    /// Converted frames whose pixels differ from the reference's (the digest differs).
    pixels: u64,
    /// Frames the CPU recorder read that differ from what the camera wrote.
    recorder: u64,
}

impl Mismatches {
    fn total(&self) -> u64 {
        self.statistic + self.pixels + self.recorder
    }

    /// Counts frame `seq`'s converted checks `got` against `want`.
    fn count(&mut self, seq: u64, got: Checks, want: Checks) {
        let (sum, pixels) = (got.statistic != want.statistic, got.digest != want.digest);
        if (sum || pixels) && self.statistic + self.pixels < 10 {
            eprintln!("frame {seq}: converted {got:?}, expected {want:?}");
        }
        self.statistic += sum as u64;
        self.pixels += pixels as u64;
    }
}

/// What the converter hands back at the end.
struct Converted {
    /// Per frame, the checks recorded on the device (CUDA).
    device_checks: Vec<Option<Checks>>,
    last_rgba: Vec<u8>,
    captures: Vec<(u64, Vec<u8>)>,
}

/// The converting consumer: on the CPU, or a CUDA kernel queued on a stream.
enum Converter {
    Cpu {
        consumer: Consumer,
        /// Block-linear frames: their pixels, read with `get_pixels`.
        scratch: Option<Box<Scratch>>,
        rgba: Vec<u8>,
        capture: Option<Capture>,
        captures: Vec<(u64, Vec<u8>)>,
        /// A deliberately broken converter (the tests'), applied to each converted frame.
        fault: Option<bt601::Fault>,
    },
    #[cfg(feature = "cuda")]
    Cuda(Box<gpu::CudaConverter>),
}

impl Converter {
    /// Converts the next frame. The CPU returns its checks at once; the CUDA converter records
    /// them on the device (read back once at the end) and returns `None`.
    fn convert_next(&mut self, layout: &FrameLayout) -> Result<(u64, Option<Checks>), String> {
        match self {
            Converter::Cpu { consumer, scratch, rgba, capture, captures, fault } => {
                let f = consumer.acquire().map_err(|e| e.to_string())?;
                let sum = match scratch {
                    Some(s) => {
                        s.get(consumer, &f)?;
                        nv12_to_rgba(&s.layout, &s.frame, rgba)
                    }
                    None => nv12_to_rgba(layout, &consumer.cpu_read(&f).map_err(|e| e.to_string())?, rgba),
                }
                .map_err(|e| e.to_string())?;
                let seq = f.sequence();
                consumer.release(f).map_err(|e| e.to_string())?;
                if let Some(fault) = fault {
                    fault.apply(rgba, layout.planes[0].width);
                }
                if capture.is_some_and(|c| c.wants(seq, captures.len())) {
                    captures.push((seq, rgba.clone()));
                }
                Ok((seq, Some(Checks { statistic: sum, digest: rgba_digest::digest(rgba) })))
            }
            #[cfg(feature = "cuda")]
            Converter::Cuda(c) => c.convert_next().map(|seq| (seq, None)),
        }
    }

    /// The statistics recorded on the device (CUDA), the last converted frame and the frames
    /// kept for the sheet.
    fn finish(self, frames: u64) -> Result<Converted, String> {
        match self {
            Converter::Cpu { rgba, captures, .. } => {
                Ok(Converted { device_checks: vec![None; frames as usize], last_rgba: rgba, captures })
            }
            #[cfg(feature = "cuda")]
            Converter::Cuda(c) => c.finish(),
        }
    }
}

/// The camera, a CPU thread: writes each frame from `source` into the ring and presents it.
fn spawn_camera(
    mut producer: nvsci::pipeline::Producer,
    mut source: Source,
    n: u64,
    writer: Writer,
) -> std::thread::JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        let layout = producer.layout().clone();
        let (w, h) = (layout.planes[0].width, layout.planes[0].height);
        let mut out = match writer {
            Writer::InPlace => CameraOut::InPlace,
            Writer::PutPixels => CameraOut::PutPixels(Box::new(Scratch::new(w, h)?)),
            #[cfg(feature = "cuda")]
            Writer::Upload => CameraOut::Upload(gpu::Staging::new(&producer, w, h)?),
            #[cfg(not(feature = "cuda"))]
            Writer::Upload => return Err("the block-linear upload needs the cuda feature".into()),
        };
        for _ in 0..n {
            let f = producer.acquire().map_err(|e| e.to_string())?;
            match &mut out {
                CameraOut::InPlace => {
                    let mut frame = producer.cpu_write(&f).map_err(|e| e.to_string())?;
                    source.write_frame(f.sequence(), &layout, &mut frame)?;
                }
                // Block-linear planes are tiled: render pitch-linear, then put the pixels.
                CameraOut::PutPixels(s) => {
                    source.write_frame(f.sequence(), &s.layout, &mut s.frame)?;
                    s.put(&producer, &f)?;
                }
                // Render pitch-linear into pinned memory; the producer's stream lays it out.
                #[cfg(feature = "cuda")]
                CameraOut::Upload(s) => {
                    s.write(&producer, &f, |l, dst| source.write_frame(f.sequence(), l, dst))?
                }
            }
            producer.present(f).map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

/// How the camera writes its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writer {
    /// Renders into the ring's slot in place (pitch-linear frames).
    InPlace,
    /// Renders a tight frame and writes it with `put_pixels` (block-linear frames; NvSciBuf
    /// restricts the call to debug software).
    PutPixels,
    /// Renders into pinned host memory; the producer's CUDA stream lays it out
    /// (`Producer::upload_planes`, block-linear frames).
    Upload,
}

impl Writer {
    /// The writer for `plan` on a backend whose producer can (`cuda`) be a CUDA one.
    fn choose(plan: &Plan, cuda: bool) -> Self {
        match (plan.block_linear, cuda && !plan.put_pixels) {
            (false, _) => Writer::InPlace,
            (true, true) => Writer::Upload,
            (true, false) => Writer::PutPixels,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Writer::InPlace => "renders into the ring's slot in place",
            Writer::PutPixels => {
                "renders a packed frame and writes it with put_pixels (debug-only in NvSciBuf)"
            }
            Writer::Upload => {
                "renders into pinned host memory, the producer's CUDA stream lays it out (upload_planes)"
            }
        }
    }
}

/// The camera's side of a [`Writer`].
enum CameraOut {
    InPlace,
    PutPixels(Box<Scratch>),
    #[cfg(feature = "cuda")]
    Upload(gpu::Staging),
}

/// The recorder, a CPU consumer reading every frame in place and checksumming it: (frame,
/// checksum) per frame.
fn spawn_recorder(
    mut rec: Consumer,
    planes: Nv12Planes,
    n: u64,
) -> std::thread::JoinHandle<Result<Vec<(u64, u64)>, String>> {
    std::thread::spawn(move || {
        let size = rec.layout().size as usize;
        let mut sums = Vec::with_capacity(n as usize);
        let mut scratch = match rec.layout().format.image_layout() {
            Some(ImageLayout::BlockLinear) => Some(Scratch::new(planes.width as u32, planes.height as u32)?),
            _ => None,
        };
        for _ in 0..n {
            let f = rec.acquire().map_err(|e| e.to_string())?;
            if let Some(s) = &mut scratch {
                // Block-linear: checksum the pixels get_pixels hands out (`planes` is the tight layout's).
                s.get(&rec, &f)?;
                sums.push((f.sequence(), frame_checksum(&planes, &s.frame)));
                rec.release(f).map_err(|e| e.to_string())?;
                continue;
            }
            let bytes = rec.cpu_read(&f).map_err(|e| e.to_string())?;
            if bytes.len() < size {
                return Err(format!(
                    "recorder: frame {} has {} bytes, the layout {size}",
                    f.sequence(),
                    bytes.len()
                ));
            }
            let sum = frame_checksum(&planes, &bytes);
            drop(bytes);
            sums.push((f.sequence(), sum));
            rec.release(f).map_err(|e| e.to_string())?;
        }
        Ok(sums)
    })
}

/// The one loop: build the ring on the backend, camera and recorder threads, the converter
/// here.
fn run_ring(backend: &Backend, plan: &Plan) -> Result<Outcome, String> {
    let format = if plan.block_linear {
        FrameFormat::nv12_block_linear(plan.width, plan.height)
    } else {
        FrameFormat::nv12(plan.width, plan.height)
    };
    // A broken converter (the fault tests) is a CPU converter, on a GPU backend too.
    let engine = if plan.fault.is_some() { Engine::Cpu } else { backend.gpu_engine() };
    let writer = Writer::choose(plan, !backend.gpu_engine().is_cpu());
    let producer_engine = if writer == Writer::Upload { backend.gpu_engine() } else { Engine::Cpu };
    let mut stream = backend
        .stream(format)
        .frames(plan.buffers)
        .timeout(Duration::from_secs(10))
        .producer(producer_engine)
        .consumer(ConsumerDesc::new(engine.clone()));
    if plan.recorder {
        stream = stream.consumer(ConsumerDesc::cpu());
    }
    let ring = stream.build().map_err(|e| e.to_string())?;
    let layout = ring.layout().clone();
    println!(
        "ring: {} x NV12 {}x{} {}, {} bytes per frame, luma pitch {}, chroma at {} pitch {}; camera on the CPU, converter on {}",
        plan.buffers,
        plan.width,
        plan.height,
        if plan.block_linear { "block-linear" } else { "pitch-linear" },
        layout.size,
        layout.planes[0].pitch,
        layout.planes[1].offset,
        layout.planes[1].pitch,
        if engine.is_cpu() { "the CPU" } else { "a CUDA stream (fence waits and signals on the stream)" }
    );
    println!("camera: {}", writer.describe());
    // Where the CPU sees the pixels: in place (pitch-linear), or in a tight frame from get_pixels.
    let cpu_layout = if plan.block_linear { tight_layout(plan.width, plan.height)? } else { layout.clone() };
    let planes = Nv12Planes::of(&cpu_layout, plan.width, plan.height, cpu_layout.size as usize)?;
    let source = Source::open(plan)?;
    let (producer, consumers) = ring.split().map_err(|e| e.to_string())?;
    let mut cons = consumers.into_iter();
    let first = cons.next().ok_or("no consumer")?;
    let mut converter = match &engine {
        Engine::Cpu => Converter::Cpu {
            consumer: first,
            scratch: if plan.block_linear {
                Some(Box::new(Scratch::new(plan.width, plan.height)?))
            } else {
                None
            },
            rgba: vec![0u8; (plan.width * plan.height * 4) as usize],
            capture: plan.capture,
            captures: Vec::new(),
            fault: plan.fault,
        },
        #[cfg(feature = "cuda")]
        Engine::Cuda(dev) => Converter::Cuda(Box::new(gpu::CudaConverter::new(first, dev, &layout, plan)?)),
    };
    let n = plan.frames;
    let recorder = cons.next().map(|rec| spawn_recorder(rec, planes, n));
    let start = Instant::now();
    let cpu0 = rusage::cpu_time(rusage::PROCESS);
    let camera = spawn_camera(producer, source, n, writer);
    let mut latencies = Vec::with_capacity(n as usize);
    let mut immediate = Vec::with_capacity(n as usize);
    let mut failed = None;
    for _ in 0..n {
        let t0 = Instant::now();
        match converter.convert_next(&layout) {
            Ok(v) => immediate.push(v),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
        latencies.push(t0.elapsed());
    }
    if let Some(e) = failed {
        // Hand the converter's side back, then wait for the threads (each gives up after the
        // ring's timeout); a camera that stopped first is the cause.
        drop(converter);
        let recorder = recorder.map(|r| r.join());
        let camera = camera.join().map_err(|_| "the camera panicked".to_string())?;
        drop(recorder);
        return Err(match camera {
            Err(c) => format!("camera: {c} (the converter then stopped: {e})"),
            Ok(()) => e,
        });
    }
    let converted = converter.finish(n)?;
    let elapsed = start.elapsed();
    let cpu = rusage::cpu_time(rusage::PROCESS).saturating_sub(cpu0);
    camera.join().map_err(|_| "the camera panicked")??;
    let mut expected = Expected::new(plan)?;
    let mut mismatches = Mismatches::default();
    let mut last_seq = 0;
    for (i, (seq, checks)) in immediate.into_iter().enumerate() {
        let got = checks.or(converted.device_checks[i]).ok_or("missing frame checks")?;
        mismatches.count(seq, got, expected.checks(seq)?);
        last_seq = seq;
    }
    if let Some(r) = recorder {
        let sums = r.join().map_err(|_| "the recorder panicked")??;
        let mut bad = 0;
        for (seq, sum) in sums {
            if sum != expected.checksum(seq)? {
                bad += 1;
                if bad <= 10 {
                    eprintln!("recorder: frame {seq}: checksum differs from the frame the camera wrote");
                }
            }
        }
        println!("recorder (CPU, in place): {n} frames checksummed, {bad} mismatches");
        mismatches.recorder = bad;
    }
    println!(
        "process CPU time (user+sys, all threads): {:.1} us per frame",
        cpu.as_secs_f64() * 1e6 / n as f64
    );
    let label = format!(
        "{} ring, {} NV12->RGBA (call time per frame)",
        backend.kind(),
        if engine.is_cpu() { "CPU" } else { "CUDA" }
    );
    #[cfg_attr(not(feature = "cuda"), allow(unused_mut))] // only the CUDA copy pipeline adds a row
    let mut stats = vec![Stats { label, frames: n, elapsed, latencies }];
    if plan.compare_copy {
        match &engine {
            #[cfg(feature = "cuda")]
            Engine::Cuda(dev) => {
                if plan.block_linear {
                    println!(
                        "note: the copy pipeline uploads pitch-linear frames (cuMemcpyHtoD has no layout): \
                         it is the pipeline a block-linear camera would be compared with on a desktop"
                    );
                }
                let (s, bad) = gpu::run_copy(dev, plan, &cpu_layout)?;
                mismatches.statistic += bad.statistic;
                mismatches.pixels += bad.pixels;
                stats.push(s);
            }
            _ => println!("note: --compare-copy needs a CUDA converter; skipped"),
        }
    }
    Ok(Outcome {
        stats,
        last: (last_seq, converted.last_rgba),
        captures: converted.captures,
        mismatches,
        writer,
    })
}

#[cfg(feature = "cuda")]
mod gpu {
    //! The CUDA converter (one per backend: NvSci, mock on a GPU, Vulkan) and the copy pipeline.
    use super::*;
    use nvsci::convert::Nv12ToRgba;
    use nvsci::cuda::cudarc::driver::{
        CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, HostSlice, LaunchConfig, PinnedHostSlice,
        PushKernelArg, SyncOnDrop,
    };
    use nvsci::cuda::cudarc::nvrtc::Ptx;
    use nvsci::cuda::{CudaGpu, MemSync};
    use std::sync::Arc;

    /// Staging frames in flight: the camera renders the next while the GPU copies the last.
    const STAGING_SLOTS: usize = 3;

    /// Tight pitch-linear NV12 frames in pinned host memory that the camera renders into and
    /// the producer's CUDA stream lays out into the ring's block-linear frames
    /// (`Producer::upload_planes`: one copy per NvSciBuf plane, ordered by the ring's fences).
    /// The slots are used in turn; an event per slot, recorded after its copies, keeps the CPU
    /// from rendering into a slot the GPU has not finished reading.
    pub struct Staging {
        slots: Vec<(PinnedHostSlice<u8>, CudaEvent)>,
        next: usize,
        layout: FrameLayout,
    }

    impl Staging {
        /// Staging for a CUDA producer's `width` x `height` NV12 frames.
        pub fn new(producer: &nvsci::pipeline::Producer, width: u32, height: u32) -> Result<Self, String> {
            let stream = producer.stream().ok_or("the block-linear upload needs a CUDA producer")?;
            let ctx = stream.context();
            let layout = tight_layout(width, height)?;
            let slots = (0..STAGING_SLOTS)
                .map(|_| {
                    // SAFETY: the memory starts uninitialised; it is zeroed below before any
                    // read, and only ever used as bytes.
                    let mut mem = unsafe { ctx.alloc_pinned::<u8>(layout.size as usize) }
                        .map_err(|e| format!("pinned staging frame: {e}"))?;
                    mem.as_mut_slice().map_err(|e| format!("pinned staging frame: {e}"))?.fill(0);
                    let copied = ctx.new_event(None).map_err(|e| format!("staging event: {e}"))?;
                    Ok((mem, copied))
                })
                .collect::<Result<_, String>>()?;
            Ok(Self { slots, next: 0, layout })
        }

        /// Renders a frame with `render` (into the tight layout) and enqueues its upload into
        /// the held `frame` on the producer's stream.
        pub fn write(
            &mut self,
            producer: &nvsci::pipeline::Producer,
            frame: &nvsci::pipeline::ProducerFrame,
            render: impl FnOnce(&FrameLayout, &mut [u8]) -> Result<(), String>,
        ) -> Result<(), String> {
            let (mem, copied) = &mut self.slots[self.next];
            self.next = (self.next + 1) % STAGING_SLOTS;
            // The copies of the frame this slot held last have run.
            copied.synchronize().map_err(|e| format!("staging event: {e}"))?;
            let bytes = mem.as_mut_slice().map_err(|e| format!("pinned staging frame: {e}"))?;
            render(&self.layout, bytes)?;
            let (y, uv) = bytes.split_at_mut(self.layout.planes[1].offset as usize);
            let (y, uv) = (Plane { bytes: y, copied }, Plane { bytes: uv, copied });
            producer.upload_planes(frame, &[&y, &uv]).map_err(|e| format!("upload_planes: {e}"))
        }
    }

    /// One plane of a staging slot as the copy's host source: the copy records the slot's
    /// event after it (as cudarc's own pinned slices do), so the call returns at once.
    struct Plane<'a> {
        bytes: &'a mut [u8],
        copied: &'a CudaEvent,
    }

    impl HostSlice<u8> for Plane<'_> {
        fn len(&self) -> usize {
            self.bytes.len()
        }
        unsafe fn stream_synced_slice<'b>(&'b self, stream: &'b CudaStream) -> (&'b [u8], SyncOnDrop<'b>) {
            (self.bytes, SyncOnDrop::Record(Some((self.copied, stream))))
        }
        unsafe fn stream_synced_mut_slice<'b>(
            &'b mut self,
            stream: &'b CudaStream,
        ) -> (&'b mut [u8], SyncOnDrop<'b>) {
            (self.bytes, SyncOnDrop::Record(Some((self.copied, stream))))
        }
    }

    /// The NV12 -> RGBA kernel and its outputs: the RGBA image, and per frame its statistic and
    /// the digest of its pixels (the digest kernel runs after the conversion, on its stream).
    pub struct Kernel {
        f: Nv12ToRgba,
        digest: CudaFunction,
        pub rgba: CudaSlice<u8>,
        sums: CudaSlice<u64>,
        digests: CudaSlice<u64>,
        layout: FrameLayout,
    }

    impl Kernel {
        pub fn new(
            dev: &CudaGpu,
            stream: &Arc<CudaStream>,
            layout: &FrameLayout,
            plan: &Plan,
        ) -> Result<Self, String> {
            let f = Nv12ToRgba::load(dev).map_err(|e| format!("PTX: {e}"))?;
            let digest = dev
                .context()
                .load_module(Ptx::from_src(rgba_digest::RGBA_DIGEST_PTX))
                .and_then(|m| m.load_function("rgba_digest"))
                .map_err(|e| format!("digest PTX: {e}"))?;
            let rgba = stream
                .alloc_zeros::<u8>((plan.width * plan.height * 4) as usize)
                .map_err(|e| e.to_string())?;
            let sums = stream.alloc_zeros::<u64>(plan.frames as usize).map_err(|e| e.to_string())?;
            let digests = stream.alloc_zeros::<u64>(plan.frames as usize).map_err(|e| e.to_string())?;
            Ok(Self { f, digest, rgba, sums, digests, layout: layout.clone() })
        }

        /// Enqueues the digest of the converted image into slot `t`, after the conversion.
        fn enqueue_digest(&self, stream: &CudaStream, t: u64) -> Result<(), String> {
            let pixels = (self.rgba.len() / 4) as u64;
            let (rgba, _g1) = self.rgba.device_ptr(stream);
            let (digests, _g2) = self.digests.device_ptr(stream);
            let out = digests + 8 * t;
            let (grid, block) = rgba_digest::launch_dims(pixels);
            let cfg = LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 };
            let mut b = stream.launch_builder(&self.digest);
            b.arg(&rgba).arg(&pixels).arg(&out);
            // SAFETY: the arguments match `rgba_digest(u64, u64, u64)`; `rgba` holds `pixels`
            // RGBA pixels and `out` is element `t` (< frames) of the zeroed digests, both alive
            // until the stream is read back.
            unsafe { b.launch(cfg) }.map(drop).map_err(|e| e.to_string())
        }

        /// Enqueues the conversion of the frame at `src` (buffer start) on `stream`, its
        /// statistic going to slot `t`.
        pub fn enqueue(&mut self, stream: &CudaStream, src: u64, t: u64) -> Result<(), String> {
            {
                let (dst, _g1) = self.rgba.device_ptr(stream);
                let (sums, _g2) = self.sums.device_ptr(stream);
                let sum = sums + 8 * t;
                // SAFETY: `src` is a whole NV12 frame of this layout; `dst` holds w*h*4 bytes;
                // `sum` is element `t` of the statistics array (t < frames).
                unsafe { self.f.enqueue(stream, &self.layout, src, dst, sum) }.map_err(|e| e.to_string())?;
            }
            self.enqueue_digest(stream, t)
        }

        /// Enqueues the conversion of a block-linear frame read through its planes' textures.
        pub fn enqueue_planes(
            &mut self,
            stream: &CudaStream,
            planes: &[nvsci::cuda::ArrayTexture<nvsci::cuda::ReadOnly>],
            t: u64,
        ) -> Result<(), String> {
            {
                let (dst, _g1) = self.rgba.device_ptr(stream);
                let (sums, _g2) = self.sums.device_ptr(stream);
                let sum = sums + 8 * t;
                // SAFETY: `dst` holds w*h*4 bytes; `sum` is element `t` of the statistics array
                // (t < frames); the textures are the frame's, alive while the ring is.
                unsafe { self.f.enqueue_planes(stream, &self.layout, planes, dst, sum) }
                    .map_err(|e| e.to_string())?;
            }
            self.enqueue_digest(stream, t)
        }

        /// Waits for `stream` and reads back each frame's checks and the RGBA image.
        pub fn read_back(&self, stream: &Arc<CudaStream>) -> Result<(Vec<Checks>, Vec<u8>), String> {
            let sums = stream.clone_dtoh(&self.sums).map_err(|e| e.to_string())?;
            let digests = stream.clone_dtoh(&self.digests).map_err(|e| e.to_string())?;
            let rgba = stream.clone_dtoh(&self.rgba).map_err(|e| e.to_string())?;
            stream.synchronize().map_err(|e| e.to_string())?;
            let checks = sums
                .into_iter()
                .zip(digests)
                .map(|(statistic, digest)| Checks { statistic, digest })
                .collect();
            Ok((checks, rgba))
        }
    }

    /// Converted frames kept on the device for the contact sheet: one copy of the RGBA image
    /// per tile, queued on the stream after the frame's kernel.
    struct Captures {
        capture: Capture,
        frames: CudaSlice<u8>,
        taken: Vec<u64>,
    }

    /// The ring consumer on a CUDA stream: per frame, a stream wait on the present fence, the
    /// kernel, a stream signal of the release fence; no CPU wait, no synchronisation.
    pub struct CudaConverter {
        kernel: Kernel,
        consumer: Consumer,
        converted: u64,
        captures: Option<Captures>,
    }

    impl CudaConverter {
        pub fn new(
            consumer: Consumer,
            dev: &CudaGpu,
            layout: &FrameLayout,
            plan: &Plan,
        ) -> Result<Self, String> {
            let stream = dev.context().new_stream().map_err(|e| e.to_string())?;
            let kernel = Kernel::new(dev, &stream, layout, plan)?;
            let captures = match plan.capture {
                Some(capture) => Some(Captures {
                    capture,
                    frames: stream
                        .alloc_zeros::<u8>(kernel.rgba.len() * capture.tiles as usize)
                        .map_err(|e| e.to_string())?,
                    taken: Vec::with_capacity(capture.tiles as usize),
                }),
                None => None,
            };
            let mut consumer = consumer;
            consumer.set_stream(stream).map_err(|e| e.to_string())?;
            consumer.set_mem_sync(MemSync::Auto).map_err(|e| e.to_string())?;
            Ok(Self { kernel, consumer, converted: 0, captures })
        }

        pub fn convert_next(&mut self) -> Result<u64, String> {
            let t = self.converted;
            let kernel = &mut self.kernel;
            let captures = &mut self.captures;
            // Copies the converted image of frame `seq` into the capture slots it is wanted in.
            let mut capture = |kernel: &Kernel, stream: &Arc<CudaStream>, seq: u64| -> Result<(), String> {
                let Some(c) = captures.as_mut().filter(|c| c.capture.wants(seq, c.taken.len())) else {
                    return Ok(());
                };
                let n = kernel.rgba.len();
                let k = c.taken.len();
                let mut dst = c.frames.try_slice_mut(k * n..(k + 1) * n).ok_or("capture slot")?;
                stream.memcpy_dtod(&kernel.rgba, &mut dst).map_err(|e| e.to_string())?;
                c.taken.push(seq);
                Ok(())
            };
            let e = |e: nvsci::Error| e.to_string();
            let seq = if self.consumer.layout().format.image_layout() == Some(ImageLayout::BlockLinear) {
                // A block-linear frame is read through its planes' textures, with the token
                // calls: nothing maps the tiled frame as a linear buffer.
                let frame = self.consumer.acquire().map_err(e)?;
                let stream = self.consumer.stream().ok_or("a CUDA consumer")?.clone();
                let seq = frame.sequence();
                let launch = match self.consumer.cuda_planes(&frame) {
                    Ok(planes) => kernel.enqueue_planes(&stream, planes, t),
                    Err(err) => Err(err.to_string()),
                }
                .and_then(|()| capture(kernel, &stream, seq));
                // Released after what was enqueued, whatever the outcome.
                self.consumer.release(frame).map_err(e)?;
                launch?;
                seq
            } else {
                let mut launch = Ok(());
                let seq = self
                    .consumer
                    .process(|f| {
                        launch = kernel
                            .enqueue(f.stream(), f.device_address(), t)
                            .and_then(|()| capture(kernel, f.stream(), f.sequence()));
                        Ok(f.sequence())
                    })
                    .map_err(e)?;
                launch?;
                seq
            };
            self.converted += 1;
            Ok(seq)
        }

        pub fn finish(self) -> Result<Converted, String> {
            let stream = self.consumer.stream().ok_or("the converter's consumer is on a CUDA stream")?;
            let mut captures = Vec::new();
            if let Some(c) = &self.captures {
                let frames = stream.clone_dtoh(&c.frames).map_err(|e| e.to_string())?;
                let n = self.kernel.rgba.len();
                captures =
                    c.taken.iter().zip(frames.chunks_exact(n)).map(|(&s, f)| (s, f.to_vec())).collect();
            }
            let (checks, rgba) = self.kernel.read_back(stream)?;
            Ok(Converted { device_checks: checks.into_iter().map(Some).collect(), last_rgba: rgba, captures })
        }
    }

    /// The copy pipeline: the camera writes each frame into ordinary host memory, cuMemcpyHtoD
    /// into a device buffer, same kernel (one thread, as a user would write it).
    pub fn run_copy(dev: &CudaGpu, plan: &Plan, layout: &FrameLayout) -> Result<(Stats, Mismatches), String> {
        let mut source = Source::open(plan)?;
        let stream = dev.context().new_stream().map_err(|e| e.to_string())?;
        let mut kernel = Kernel::new(dev, &stream, layout, plan)?;
        let mut src = stream.alloc_zeros::<u8>(layout.size as usize).map_err(|e| e.to_string())?;
        let mut camera_frame = vec![0u8; layout.size as usize];
        let mut latencies = Vec::with_capacity(plan.frames as usize);
        let start = Instant::now();
        for t in 0..plan.frames {
            let t0 = Instant::now();
            // The camera writes the frame into host memory (as it writes into the ring on the
            // zero-copy path), then it is copied to the device.
            source.write_frame(t, layout, &mut camera_frame)?;
            stream.memcpy_htod(&camera_frame[..], &mut src).map_err(|e| e.to_string())?;
            let (p, g) = src.device_ptr(&stream);
            kernel.enqueue(&stream, p, t)?;
            drop(g);
            latencies.push(t0.elapsed());
        }
        let (checks, _) = kernel.read_back(&stream)?;
        let elapsed = start.elapsed();
        let mut expected = Expected::new(plan)?;
        let mut bad = Mismatches::default();
        for t in 0..plan.frames {
            bad.count(t, checks[t as usize], expected.checks(t)?);
        }
        Ok((
            Stats {
                label: "copy path (camera writes a host frame, cuMemcpyHtoD, kernel; time per frame)".into(),
                frames: plan.frames,
                elapsed,
                latencies,
            },
            bad,
        ))
    }
}

/// What a run did (the tests read all of it).
#[derive(Debug)]
#[cfg_attr(not(test), allow(dead_code))]
struct Report {
    /// Every frame matched its expectation and the last one the reference pixel for pixel.
    ok: bool,
    /// Frames that failed a check.
    mismatches: Mismatches,
    /// Whether the last converted frame is the reference's, byte for byte.
    last_identical: bool,
    /// "CPU" or "CUDA".
    converter: &'static str,
    /// How the camera wrote its frames.
    writer: Writer,
    width: u32,
    height: u32,
    frames: u64,
    /// The frame written by `--out`.
    last_frame: u64,
    /// The frames on the contact sheet.
    sheet_frames: Vec<u64>,
}

fn run(a: &Args) -> Result<Report, String> {
    // A clip is checked before any backend or ring is made.
    let clip = a.input.as_ref().map(Y4mClip::open).transpose().map_err(|e| e.to_string())?;
    let backend = Backend::by_name(a.backend.as_deref().unwrap_or("auto")).map_err(|e| e.to_string())?;
    println!("{}", backend.explain());
    let gpu = !backend.gpu_engine().is_cpu();
    let plan = Plan::new(a, clip, gpu)?;
    match &plan.input {
        Input::Pattern => println!("camera: {}", test_pattern::DESCRIPTION),
        Input::Clip(c) => {
            println!(
                "camera: {} ({}, {} frames{})",
                c.path().display(),
                c.header().describe(),
                c.frames(),
                if a.looping { ", looped" } else { "" }
            );
            if c.header().full_range == Some(true) {
                println!(
                    "note: {} says XCOLORRANGE=FULL; the converters take limited range, so its darkest and \
                     brightest steps clip (ffmpeg -vf scale=out_range=tv writes limited range)",
                    c.path().display()
                );
            }
        }
    }
    if cfg!(debug_assertions) {
        println!("(debug build: use `cargo run --release --example camera_zero_copy` for figures)");
    }
    let outcome = run_ring(&backend, &plan)?;
    for s in &outcome.stats {
        s.print();
    }
    if outcome.stats.len() == 2 {
        println!("zero-copy / copy frame rate: {:.2}x", outcome.stats[0].fps() / outcome.stats[1].fps());
    }
    // The last frame, converted by the consumer, against the reference, byte for byte.
    let (last_seq, last_rgba) = &outcome.last;
    let reference = Expected::new(&plan)?.rgba(*last_seq)?;
    let last_ok = reference == *last_rgba;
    if let Some(d) = bt601::first_difference(last_rgba, &reference, plan.width) {
        eprintln!("the last frame's RGBA differs from the reference, first at {d:?}");
    }
    // The converter that ran: a broken one (the fault tests) is a CPU converter on any backend.
    let converter = if gpu && plan.fault.is_none() { "CUDA" } else { "CPU" };
    let metadata = |title: String, description: String| {
        vec![
            ("Title", title),
            ("Description", description),
            ("Comment", format!("{CONVERSION}; {} backend, {converter} converter", backend.kind())),
            ("Software", "nvsci camera_zero_copy example".to_string()),
        ]
    };
    if let Some(path) = &a.out {
        let text = metadata(format!("camera_zero_copy frame {last_seq}"), plan.describe_frame(*last_seq));
        write_png(path, plan.width, plan.height, last_rgba, &text)?;
        println!("wrote the last converted frame ({last_seq}) to {}", path.display());
    }
    let sheet_frames: Vec<u64> = outcome.captures.iter().map(|c| c.0).collect();
    if let (Some(path), Some(capture)) = (&a.sheet, plan.capture) {
        let (grid, rgba) = contact_sheet::render(&outcome.captures, plan.width, plan.height);
        let description = format!(
            "every {} frame(s) of {}: {}",
            capture.every,
            plan.frames,
            match &plan.input {
                Input::Pattern => test_pattern::DESCRIPTION.to_string(),
                Input::Clip(c) => format!("{} ({})", c.path().display(), c.header().describe()),
            }
        );
        write_png(
            path,
            grid.width,
            grid.height,
            &rgba,
            &metadata("camera_zero_copy contact sheet".into(), description),
        )?;
        println!(
            "wrote a contact sheet of frames {:?} ({} x {} tiles of {}x{}) to {}",
            sheet_frames,
            grid.columns,
            grid.rows,
            grid.tile_w,
            grid.tile_h,
            path.display()
        );
    }
    let m = outcome.mismatches;
    println!(
        "verified {} frames against the BT.601 reference: {} mismatches (statistic {}, pixels {}, recorder {}){}",
        plan.frames,
        m.total(),
        m.statistic,
        m.pixels,
        m.recorder,
        if last_ok { ", last frame identical to the reference" } else { "" }
    );
    Ok(Report {
        ok: m.total() == 0 && last_ok,
        mismatches: m,
        last_identical: last_ok,
        converter,
        writer: outcome.writer,
        width: plan.width,
        height: plan.height,
        frames: plan.frames,
        last_frame: *last_seq,
        sheet_frames,
    })
}

fn main() -> ExitCode {
    env_logger::init();
    let a = match parse(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n(camera_zero_copy --help lists the options)");
            return ExitCode::from(2);
        }
    };
    match run(&a) {
        Ok(r) if r.ok => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
#[path = "support/camera_picture_tests.rs"]
mod tests;
