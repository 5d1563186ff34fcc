//! Tests of the camera example. The pictures it writes are checked against values computed here
//! from the BT.601 formulas, not by the crate's converter; clips are written here, sample by
//! sample, and compared with the conversion of those samples. The `*_gpu` tests run the same
//! checks on the CUDA converter (with a GPU required, `NVSCI_REQUIRE=gpu` or `NVSCI_REQUIRE_GPU=1`,
//! they fail instead of skipping without a GPU).
use super::*;
use test_pattern::{Geometry, Rect, BARS, REVERSE};

/// The mock's handle ledger is process-wide: tests that build rings take turns, and each
/// checks that it ends with no live handle.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn assert_ledger_clean(what: &str) {
    // Dropped CUDA imports are destroyed on the teardown thread once their work finished: wait
    // for that before counting.
    #[cfg(feature = "cuda")]
    if let Ok(dev) = nvsci::cuda::CudaGpu::open(0) {
        assert_eq!(
            dev.flush_teardown(std::time::Duration::from_secs(60)),
            0,
            "{what}: destroys still queued"
        );
    }
    assert_eq!(
        nvsci_mock::global_ledger().counts(),
        nvsci_mock::HandleCounts::default(),
        "{what}: mock handles left alive"
    );
}

/// A folder of its own for one test's files, removed when the test ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("camera-zero-copy-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn args(backend: &str, w: u32, h: u32, frames: u64) -> Args {
    Args {
        width: Some(w),
        height: Some(h),
        frames: Some(frames),
        buffers: Some(3),
        backend: Some(backend.to_owned()),
        recorder: true,
        ..Default::default()
    }
}

/// Runs `a` and checks that every frame verified, on `converter` when one is named.
fn run_ok(a: &Args, converter: Option<&str>) -> Report {
    let r = run(a).unwrap();
    assert!(r.ok, "{r:?}");
    if let Some(c) = converter {
        assert_eq!(r.converter, c, "{r:?}");
    }
    assert_ledger_clean("after a run");
    r
}

struct Picture {
    w: u32,
    h: u32,
    rgba: Vec<u8>,
    text: Vec<(String, String)>,
}

impl Picture {
    fn decode(bytes: &[u8]) -> Self {
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
        let mut rgba = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut rgba).unwrap();
        assert_eq!((info.color_type, info.bit_depth), (png::ColorType::Rgba, png::BitDepth::Eight));
        rgba.truncate(info.buffer_size());
        let text = reader
            .info()
            .uncompressed_latin1_text
            .iter()
            .map(|t| (t.keyword.clone(), t.text.clone()))
            .collect();
        Self { w: info.width, h: info.height, rgba, text }
    }

    fn open(path: &Path) -> Self {
        Self::decode(&std::fs::read(path).unwrap())
    }

    fn at(&self, x: u32, y: u32) -> [u8; 4] {
        let i = ((y * self.w + x) * 4) as usize;
        self.rgba[i..i + 4].try_into().unwrap()
    }

    /// The `w` x `h` part at `(x, y)`.
    fn crop(&self, x: u32, y: u32, w: u32, h: u32) -> Picture {
        let mut rgba = Vec::with_capacity((w * h * 4) as usize);
        for row in y..y + h {
            let i = ((row * self.w + x) * 4) as usize;
            rgba.extend_from_slice(&self.rgba[i..i + (w * 4) as usize]);
        }
        Picture { w, h, rgba, text: Vec::new() }
    }

    fn says(&self, keyword: &str, what: &str) -> bool {
        self.text.iter().any(|(k, t)| k == keyword && t.contains(what))
    }
}

/// The textbook BT.601 limited-range inverse in floating point: R'G'B' on 0..255, unclamped.
fn bt601_limited_to_rgb([y, cb, cr]: [f64; 3]) -> [f64; 3] {
    let (l, pb, pr) = ((y - 16.0) / 219.0, (cb - 128.0) / 224.0, (cr - 128.0) / 224.0);
    let (kr, kb) = (0.299, 0.114);
    let r = l + 2.0 * (1.0 - kr) * pr;
    let b = l + 2.0 * (1.0 - kb) * pb;
    let g = (l - kr * r - kb * b) / (1.0 - kr - kb);
    [r, g, b].map(|v| v * 255.0)
}

/// The coefficients of that inverse per output channel, in units of 8-bit input steps:
/// R from (Y, Cr), G from (Y, Cb, Cr), B from (Y, Cb).
fn coefficients() -> [Vec<f64>; 3] {
    let (ky, kc) = (255.0 / 219.0, 255.0 / 224.0);
    let (kr, kb) = (0.299, 0.114);
    let kg = 1.0 - kr - kb;
    [
        vec![ky, kc * 2.0 * (1.0 - kr)],
        vec![ky, kc * 2.0 * (1.0 - kb) * kb / kg, kc * 2.0 * (1.0 - kr) * kr / kg],
        vec![ky, kc * 2.0 * (1.0 - kb)],
    ]
}

/// How far a correct 8-bit conversion of a bar may land from the bar's nominal colour, per
/// channel: the Y'CbCr samples are rounded to integers (0.5 each, times the coefficients),
/// a fixed-point converter's coefficients are rounded to 1/256 (1/512 each, times at most
/// 219 luma and 112 chroma steps), and the result is rounded (0.5).
fn tolerance() -> [f64; 3] {
    coefficients().map(|k| {
        let samples: f64 = k.iter().map(|c| 0.5 * c).sum();
        let fixed_point = (219.0 + 112.0 * (k.len() - 1) as f64) / 512.0;
        samples + fixed_point + 0.5
    })
}

/// 75% of full scale (191.25) or 0, per channel.
fn nominal(percent: [u8; 3]) -> [f64; 3] {
    percent.map(|p| p as f64 * 255.0 / 100.0)
}

fn assert_near(got: [u8; 4], want: [f64; 3], what: &str) {
    let tol = tolerance();
    let ok = (0..3).all(|c| (got[c] as f64 - want[c]).abs() <= tol[c]) && got[3] == 255;
    assert!(ok, "{what}: RGBA {got:?}, expected {want:.2?} within {tol:.2?}");
}

#[test]
fn the_tolerance_tells_the_usual_mistakes_apart() {
    // The bars' Y'CbCr from the forward BT.601 limited-range formula (rounded), then decoded
    // wrongly: each mistake moves some bar outside the tolerance.
    let encode = |[r, g, b]: [f64; 3]| {
        let y = 0.299 * r + 0.587 * g + 0.114 * b;
        [16.0 + 219.0 * y, 128.0 + 224.0 * (b - y) / 1.772, 128.0 + 224.0 * (r - y) / 1.402].map(f64::round)
    };
    let tol = tolerance();
    let worst = |decode: &dyn Fn([f64; 3]) -> [f64; 3]| {
        let mut worst = 0.0f64;
        for bar in BARS {
            let want = nominal(bar.rgb_percent);
            let got = decode(encode(bar.rgb_percent.map(|p| p as f64 / 100.0))).map(|v| v.clamp(0.0, 255.0));
            for c in 0..3 {
                worst = worst.max((got[c] - want[c]).abs() - tol[c]);
            }
        }
        worst
    };
    assert!(worst(&bt601_limited_to_rgb) <= 0.0, "the right conversion must pass");
    assert!(worst(&|[y, cb, cr]| bt601_limited_to_rgb([y, cr, cb])) > 50.0, "U and V swapped");
    let bt709 = |[y, cb, cr]: [f64; 3]| {
        let (l, pb, pr) =
            ((y - 16.0) * 255.0 / 219.0, (cb - 128.0) * 255.0 / 224.0, (cr - 128.0) * 255.0 / 224.0);
        [l + 1.5748 * pr, l - 0.1873 * pb - 0.4681 * pr, l + 1.8556 * pb]
    };
    assert!(worst(&bt709) > 5.0, "BT.709 matrix");
    let full_range = |[y, cb, cr]: [f64; 3]| {
        [
            y + 1.402 * (cr - 128.0),
            y - 0.344136 * (cb - 128.0) - 0.714136 * (cr - 128.0),
            y + 1.772 * (cb - 128.0),
        ]
    };
    assert!(worst(&full_range) > 5.0, "full range");
    // The bars' table is what the forward formula gives.
    for bar in BARS {
        assert_eq!(
            encode(bar.rgb_percent.map(|p| p as f64 / 100.0)),
            bar.ycbcr.map(f64::from),
            "{}",
            bar.name
        );
    }
}

/// The colour bars and reverse bars of a converted pattern frame, at each bar's first two,
/// middle and last columns and at the first, middle and last rows of each band (a chroma
/// column or row read one off shows at the edges).
fn check_bars(p: &Picture) {
    let g = Geometry::new(p.w, p.h);
    for (i, bar) in BARS.iter().enumerate() {
        let (x0, x1) = (g.edges[i], g.edges[i + 1]);
        let under = REVERSE[i].map_or([0.0; 3], |b| nominal(BARS[b].rgb_percent));
        for x in [x0, x0 + 1, (x0 + x1) / 2, x1 - 1] {
            for y in [0, g.bars_end / 2, g.bars_end - 1] {
                assert_near(p.at(x, y), nominal(bar.rgb_percent), &format!("{} bar at ({x}, {y})", bar.name));
            }
            for y in [g.bars_end, g.band - 1] {
                assert_near(p.at(x, y), under, &format!("reverse bar under {} at ({x}, {y})", bar.name));
            }
        }
    }
}

/// The bottom band of frame `t`: black, and 100% white exactly where the number `t` and the
/// square are (luma only: black converts to 0 and Y 235 to 255 exactly).
fn check_band(p: &Picture, t: u64) {
    let g = Geometry::new(p.w, p.h);
    let mut white = std::collections::HashSet::new();
    digits::draw(t, g.scale, |x, y| {
        if x < g.number.w && y < g.number.h {
            white.insert((g.number.x + x, g.number.y + y));
        }
    });
    let sx = g.square_x(t);
    for y in g.track.y..g.track.y + g.square {
        for x in sx..sx + g.square {
            white.insert((x, y));
        }
    }
    assert!(white.len() > g.square as usize * g.square as usize, "frame {t}: no number drawn");
    for y in g.band..p.h {
        for x in 0..p.w {
            let want = if white.contains(&(x, y)) { [255, 255, 255, 255] } else { [0, 0, 0, 255] };
            assert_eq!(p.at(x, y), want, "frame {t}: band pixel ({x}, {y})");
        }
    }
}

fn check_metadata(p: &Picture) {
    assert!(p.says("Comment", "BT.601 matrix, limited range"), "{:?}", p.text);
    assert!(p.says("Software", "camera_zero_copy"), "{:?}", p.text);
}

/// The picture checks on `backend` (and `converter`, when named): the bars of two
/// consecutive frames, their bottom bands (number and square moved, nothing else changed),
/// the text chunks, and a contact sheet of every third frame.
fn pictures(backend: &str, converter: Option<&str>, tag: &str) {
    let _serial = serial();
    let scratch = Scratch::new(&format!("pictures-{tag}"));
    let (w, h) = (320, 180);
    let mut last = Vec::new();
    for frames in [6, 7] {
        let out = scratch.path(&format!("frame-{frames}.png"));
        let sheet = scratch.path(&format!("sheet-{frames}.png"));
        let a = Args {
            out: Some(out.clone()),
            sheet: Some(sheet.clone()),
            every: Some(3),
            ..args(backend, w, h, frames)
        };
        let r = run_ok(&a, converter);
        assert_eq!((r.width, r.height, r.frames, r.last_frame), (w, h, frames, frames - 1));
        let p = Picture::open(&out);
        assert_eq!((p.w, p.h), (w, h));
        check_bars(&p);
        check_band(&p, frames - 1);
        check_metadata(&p);
        assert!(p.says("Title", &format!("frame {}", frames - 1)), "{:?}", p.text);
        assert!(p.says("Description", "75% colour bars"), "{:?}", p.text);
        // The sheet: frames 0, 3, 6 (of 7) or 0, 3 (of 6), each tile the frame itself
        // (320 wide: not shrunk) with its number under it.
        let s = Picture::open(&sheet);
        let want: Vec<u64> = (0..frames).step_by(3).collect();
        assert_eq!(r.sheet_frames, want);
        let grid = contact_sheet::Grid::new(w, h, want.len() as u32);
        assert_eq!((s.w, s.h), (grid.width, grid.height));
        check_metadata(&s);
        for (k, &t) in want.iter().enumerate() {
            let (x, y) = grid.origin(k as u32);
            let tile = s.crop(x, y, w, h);
            check_bars(&tile);
            check_band(&tile, t);
            let label = s.crop(x, y + h, w, grid.label_h);
            let mut ink = Vec::new();
            digits::draw(t, contact_sheet::LABEL_SCALE, |lx, ly| {
                ink.push((lx, ly + contact_sheet::LABEL_PAD))
            });
            for (lx, ly) in ink {
                assert_eq!(label.at(lx, ly), [255; 4], "label of frame {t}");
            }
        }
        last.push(p);
    }
    // From one frame to the next only the number and the square changed.
    let g = Geometry::new(w, h);
    let [number, track] = g.dynamic();
    let (a, b) = (&last[0], &last[1]);
    let differs = |r: Rect| (r.y..r.y + r.h).any(|y| (r.x..r.x + r.w).any(|x| a.at(x, y) != b.at(x, y)));
    assert!(differs(number), "the frame number did not change");
    assert!(differs(track), "the square did not move");
    for y in 0..h {
        for x in 0..w {
            if !number.contains(x, y) && !track.contains(x, y) {
                assert_eq!(a.at(x, y), b.at(x, y), "({x}, {y}) changed between frames");
            }
        }
    }
}

#[test]
fn pattern_pictures_show_the_bars_number_and_square() {
    pictures("mock", None, "mock");
}

#[test]
fn a_shrunk_contact_sheet_keeps_the_bar_colours() {
    let _serial = serial();
    let scratch = Scratch::new("shrunk-sheet");
    let sheet = scratch.path("sheet.png");
    let a = Args { sheet: Some(sheet.clone()), every: Some(2), recorder: false, ..args("mock", 640, 360, 3) };
    let r = run_ok(&a, None);
    assert_eq!(r.sheet_frames, [0, 2]);
    let s = Picture::open(&sheet);
    let grid = contact_sheet::Grid::new(640, 360, 2);
    assert_eq!((grid.tile_w, grid.tile_h, s.w, s.h), (320, 180, grid.width, grid.height));
    let (x, y) = grid.origin(1);
    let tile = s.crop(x, y, 320, 180);
    let g = Geometry::new(640, 360);
    for (i, bar) in BARS.iter().enumerate() {
        let cx = (g.edges[i] + g.edges[i + 1]) / 4;
        assert_near(tile.at(cx, g.bars_end / 4), nominal(bar.rgb_percent), bar.name);
    }
}

/// Planar samples of clip frame `k`: luma over the whole limited range, U and V different
/// functions of the block (a swap or a row or column off shows).
fn clip_planes(w: u32, h: u32, k: u64) -> [Vec<u8>; 3] {
    let (w, h, k) = (w as u64, h as u64, k);
    let y = (0..h).flat_map(|r| (0..w).map(move |x| (16 + (x * 7 + r * 3 + k * 11) % 220) as u8)).collect();
    let u =
        (0..h / 2).flat_map(|r| (0..w / 2).map(move |x| (16 + (x * 13 + r + k * 29) % 225) as u8)).collect();
    let v = (0..h / 2)
        .flat_map(|r| (0..w / 2).map(move |x| (16 + (r * 17 + x * 5 + k * 31) % 225) as u8))
        .collect();
    [y, u, v]
}

/// Writes a clip of `frames` frames (`mono`: luma only) the way ffmpeg does, some frame
/// markers with parameters.
fn write_clip(path: &Path, w: u32, h: u32, frames: u64, mono: bool) {
    let c = if mono { "Cmono" } else { "C420jpeg XYSCSS=420JPEG" };
    let mut bytes = format!("YUV4MPEG2 W{w} H{h} F25:1 Ip A1:1 {c} XCOLORRANGE=LIMITED\n").into_bytes();
    for k in 0..frames {
        bytes.extend_from_slice(if k % 2 == 1 { b"FRAME Ip XTAG=1\n" } else { b"FRAME\n" });
        let [y, u, v] = clip_planes(w, h, k);
        bytes.extend_from_slice(&y);
        if !mono {
            bytes.extend_from_slice(&u);
            bytes.extend_from_slice(&v);
        }
    }
    std::fs::write(path, bytes).unwrap();
}

/// What clip frame `k` converts to, pixel by pixel from its planar samples.
fn clip_rgba(w: u32, h: u32, k: u64, mono: bool) -> Vec<u8> {
    let [y, u, v] = clip_planes(w, h, k);
    let (w, h) = (w as usize, h as usize);
    let mut out = Vec::with_capacity(w * h * 4);
    for row in 0..h {
        for x in 0..w {
            let c = (row / 2) * (w / 2) + x / 2;
            let (cb, cr) = if mono { (128, 128) } else { (u[c], v[c]) };
            out.extend(bt601::rgb(y[row * w + x], cb, cr));
            out.push(255);
        }
    }
    out
}

/// A generated clip played through the ring (block-linear frames when `block_linear`, which
/// the camera writes with `put_pixels`): to its end, looped, luma only; the last frame and a
/// contact sheet of every frame compared with the conversion of the samples written.
fn clip_round_trip(backend: &str, converter: Option<&str>, tag: &str, block_linear: bool) {
    let _serial = serial();
    let (w, h) = (64, 48);
    let scratch = Scratch::new(&format!("clip-{tag}"));
    let clip = scratch.path("clip.y4m");
    write_clip(&clip, w, h, 5, false);
    let out = scratch.path("last.png");
    let sheet = scratch.path("sheet.png");
    let base = Args {
        backend: Some(backend.to_owned()),
        buffers: Some(3),
        recorder: true,
        input: Some(clip.clone()),
        out: Some(out.clone()),
        block_linear,
        ..Default::default()
    };
    // To the end: 5 frames, also when more are asked for without --loop.
    for frames in [None, Some(12)] {
        let r =
            run_ok(&Args { frames, sheet: Some(sheet.clone()), every: Some(1), ..base.clone() }, converter);
        assert_eq!((r.width, r.height, r.frames, r.last_frame), (w, h, 5, 4));
        let p = Picture::open(&out);
        assert!(p.rgba == clip_rgba(w, h, 4, false), "last frame of the clip");
        check_metadata(&p);
        assert!(p.says("Description", "frame 4 of 5"), "{:?}", p.text);
        let s = Picture::open(&sheet);
        let grid = contact_sheet::Grid::new(w, h, 5);
        for k in 0..5 {
            let (x, y) = grid.origin(k as u32);
            assert!(s.crop(x, y, w, h).rgba == clip_rgba(w, h, k, false), "sheet tile {k}");
        }
    }
    // Looped: run frame 11 shows clip frame 1.
    let r = run_ok(&Args { frames: Some(12), looping: true, ..base.clone() }, converter);
    assert_eq!((r.frames, r.last_frame), (12, 11));
    assert!(Picture::open(&out).rgba == clip_rgba(w, h, 1, false), "looped clip");
    // Luma only: neutral chroma.
    write_clip(&clip, w, h, 3, true);
    let r = run_ok(&base, converter);
    assert_eq!(r.frames, 3);
    assert!(Picture::open(&out).rgba == clip_rgba(w, h, 2, true), "mono clip");
}

#[test]
fn a_generated_clip_plays_through_the_ring() {
    clip_round_trip("mock", None, "mock", false);
}

#[test]
fn a_generated_clip_plays_through_a_block_linear_ring() {
    clip_round_trip("mock", None, "mock-bl", true);
}

#[test]
fn bad_clips_are_refused_naming_the_file_the_field_and_the_value() {
    let _serial = serial();
    let scratch = Scratch::new("bad-clips");
    let header = |s: &str| format!("YUV4MPEG2 {s}\n").into_bytes();
    let frame = |n: usize| [b"FRAME\n".to_vec(), vec![128u8; n]].concat();
    let good = 64 * 48 * 3 / 2;
    let cases: Vec<(&str, Vec<u8>, Vec<&str>)> = vec![
        ("empty", Vec::new(), vec!["header: the file is empty"]),
        (
            "not-y4m",
            b"\x89PNG\r\n\x1a\n".to_vec(),
            vec!["header field magic: \"\\x89PNG\\r\" is not YUV4MPEG2"],
        ),
        (
            "truncated-header",
            b"YUV4MPEG2 W64 H4".to_vec(),
            vec!["header: the file ends after 16 bytes", "W64 H4"],
        ),
        ("no-width", [header("H48 F25:1"), frame(good)].concat(), vec!["header field W: missing"]),
        ("no-height", [header("W64 F25:1"), frame(good)].concat(), vec!["header field H: missing"]),
        (
            "c422",
            [header("W64 H48 C422"), frame(good)].concat(),
            vec!["header field C: chroma 422 is not supported", "4:2:2"],
        ),
        (
            "c444",
            [header("W64 H48 C444"), frame(good)].concat(),
            vec!["header field C: chroma 444 is not supported", "4:4:4"],
        ),
        (
            "c420p10",
            [header("W64 H48 C420p10"), frame(good)].concat(),
            vec!["header field C: chroma 420p10", "more than 8 bits"],
        ),
        (
            "mono16",
            [header("W64 H48 Cmono16"), frame(good)].concat(),
            vec!["header field C: chroma mono16", "more than 8 bits"],
        ),
        ("odd-width", [header("W63 H48"), frame(good)].concat(), vec!["header field W: 63 is odd"]),
        ("odd-height", [header("W64 H47"), frame(good)].concat(), vec!["header field H: 47 is odd"]),
        (
            "too-wide",
            [header("W10000 H48"), frame(good)].concat(),
            vec!["header field W: 10000 is more than the ring takes"],
        ),
        (
            "short-frame",
            [header("W64 H48"), frame(good), frame(good), frame(1000)].concat(),
            vec!["frame 2 (byte ", "1000 of 4608 bytes of samples before the end of the file"],
        ),
        (
            "bad-marker",
            [header("W64 H48"), frame(good), b"FRAMX\n".to_vec()].concat(),
            vec!["frame 1 (byte", "expected the marker FRAME, found \"FRAMX\""],
        ),
        ("no-frames", header("W64 H48"), vec!["frame 0", "no frame after the header"]),
    ];
    for (name, bytes, wants) in cases {
        let path = scratch.path(&format!("{name}.y4m"));
        std::fs::write(&path, bytes).unwrap();
        let err = Y4mClip::open(&path).unwrap_err();
        let kind_ok = match &err {
            y4m::Y4mError::Header { .. } => !name.contains("frame") && !name.contains("marker"),
            y4m::Y4mError::Frame { .. } => name.contains("frame") || name.contains("marker"),
            y4m::Y4mError::Io { .. } => false,
        };
        assert!(kind_ok, "{name}: {err:?}");
        let a = Args { input: Some(path.clone()), ..args("mock", 64, 48, 4) };
        let (a, b) = (a.clone(), Args { width: None, height: None, ..a });
        for a in [a, b] {
            let msg = run(&a).unwrap_err();
            assert!(msg.starts_with(&path.display().to_string()), "{name}: {msg}");
            for want in &wants {
                assert!(msg.contains(want), "{name}: {msg:?} does not say {want:?}");
            }
            assert_ledger_clean(name);
        }
    }
    // A file that is missing or cannot be read.
    let missing = scratch.path("no-such-clip.y4m");
    let err = Y4mClip::open(&missing).unwrap_err();
    assert!(matches!(&err, y4m::Y4mError::Io { action, .. } if action == "open"), "{err:?}");
    let msg = run(&Args { input: Some(missing.clone()), ..Default::default() }).unwrap_err();
    assert!(msg.starts_with(&format!("{}: cannot open: ", missing.display())), "{msg}");
    let dir = scratch.path("a-directory.y4m");
    std::fs::create_dir_all(&dir).unwrap();
    let msg = run(&Args { input: Some(dir.clone()), ..Default::default() }).unwrap_err();
    assert!(msg.starts_with(&format!("{}: cannot read: ", dir.display())), "{msg}");
    // A clip whose size is not the one asked for.
    let clip = scratch.path("bad-size.y4m");
    write_clip(&clip, 64, 48, 2, false);
    let msg = run(&Args { input: Some(clip.clone()), ..args("mock", 320, 48, 2) }).unwrap_err();
    assert!(msg.contains("bad-size.y4m: header field W: 64 does not match --width 320"), "{msg}");
    let msg = run(&Args { input: Some(clip), width: None, ..args("mock", 320, 50, 2) }).unwrap_err();
    assert!(msg.contains("header field H: 48 does not match --height 50"), "{msg}");
    assert_ledger_clean("bad clips");
}

#[test]
fn bad_sizes_and_options_are_reported_not_panicked() {
    let _serial = serial();
    let bad = |a: Args, want: &str| {
        let msg = run(&a).unwrap_err();
        assert!(msg.contains(want), "{msg:?} does not say {want:?}");
        assert_ledger_clean(want);
    };
    bad(args("mock", 63, 48, 2), "even");
    bad(args("mock", 0, 48, 2), "zero");
    bad(args("mock", 10000, 48, 2), "--width 10000: more than the ring takes (8192 at most)");
    bad(args("mock", 64, 48, 0), "--frames 0");
    let sheet = Some(std::env::temp_dir().join("camera-zero-copy-never-written.png"));
    bad(Args { sheet: sheet.clone(), every: Some(0), ..args("mock", 64, 48, 4) }, "--every 0");
    bad(Args { sheet, every: Some(1), ..args("mock", 64, 48, 65) }, "makes 65 tiles");
    assert!(matches!(parse(["--help".to_string()]), Ok(None)));
    assert!(parse(["--width".to_string()]).unwrap_err().contains("--width needs a value"));
    assert!(parse(["--frames".to_string(), "x".into()]).unwrap_err().contains("--frames x"));
    assert!(parse(["--bogus".to_string()]).unwrap_err().contains("unknown argument --bogus"));
    for said in ["BT.601", "limited range", "white, yellow, cyan, green, magenta, red, blue", "yuv420p"] {
        assert!(HELP.contains(said), "--help does not say {said}");
    }
}

#[test]
fn the_docs_pictures_are_the_pattern_as_converted() {
    // docs/camera_test_pattern.png and docs/camera_contact_sheet.png, written by
    //   cargo run --example camera_zero_copy -- --backend mock --width 480 --height 270 --frames 30 \
    //     --out docs/camera_test_pattern.png --contact-sheet docs/camera_contact_sheet.png
    let regenerate = "regenerate the pictures (command above)";
    let plan = Plan {
        width: 480,
        height: 270,
        frames: 30,
        buffers: 4,
        recorder: false,
        compare_copy: false,
        block_linear: false,
        put_pixels: false,
        input: Input::Pattern,
        capture: None,
        fault: None,
    };
    let mut expected = Expected::new(&plan).unwrap();
    let p = Picture::decode(include_bytes!("../../docs/camera_test_pattern.png"));
    assert_eq!((p.w, p.h), (480, 270));
    assert!(p.rgba == expected.rgba(29).unwrap(), "{regenerate}");
    check_bars(&p);
    check_band(&p, 29);
    check_metadata(&p);
    let s = Picture::decode(include_bytes!("../../docs/camera_contact_sheet.png"));
    let frames: Vec<(u64, Vec<u8>)> = (0..30).step_by(3).map(|t| (t, expected.rgba(t).unwrap())).collect();
    let (grid, rgba) = contact_sheet::render(&frames, 480, 270);
    assert_eq!((s.w, s.h), (grid.width, grid.height), "{regenerate}");
    assert!(s.rgba == rgba, "{regenerate}");
    check_metadata(&s);
}

/// The CUDA converter of the mock backend, or `None` where there is no GPU (a failure with
/// `NVSCI_REQUIRE_GPU=1`).
#[cfg(feature = "cuda")]
fn gpu_backend(kind: &'static str) -> Option<&'static str> {
    use require::{unavailable, Capability};
    match Backend::by_name(kind) {
        Ok(b) if !b.gpu_engine().is_cpu() => Some(kind),
        Ok(_) => unavailable(&[Capability::Gpu], format!("the {kind} backend has no CUDA engine here")),
        Err(e) => unavailable(&[Capability::Gpu], format!("no {kind} backend: {e}")),
    }
}

/// What these tests need from the machine, shared with the integration tests.
#[cfg(feature = "cuda")]
#[path = "../../tests/common/require.rs"]
mod require;

#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA GPU"]
fn pattern_pictures_on_the_cuda_converter_gpu() {
    if let Some(kind) = gpu_backend("mock") {
        pictures(kind, Some("CUDA"), "cuda");
    }
}

#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_generated_clip_plays_through_the_cuda_converter_gpu() {
    if let Some(kind) = gpu_backend("mock") {
        clip_round_trip(kind, Some("CUDA"), "cuda", false);
        clip_round_trip(kind, Some("CUDA"), "cuda-bl", true);
    }
}

#[cfg(feature = "vulkan")]
#[test]
#[ignore = "needs a CUDA GPU"]
fn pattern_pictures_and_a_clip_on_the_vulkan_backend_gpu() {
    if let Some(kind) = gpu_backend("vulkan") {
        pictures(kind, Some("CUDA"), "vulkan");
        clip_round_trip(kind, Some("CUDA"), "vulkan", false);
    }
}

/// The example's verification fails on a broken converter: red and blue swapped, or one pixel
/// moved (at a bar's edge, where the neighbours differ). Neither changes a frame's R + G + B,
/// so the statistic passes every frame; the pixel check fails every frame, and the last frame
/// differs from the reference where the fault put it.
#[test]
fn a_broken_converter_fails_the_verification() {
    let _serial = serial();
    let (w, h, frames) = (320, 180, 5);
    let edge = Geometry::new(w, h).edges[1] - 1;
    for fault in [bt601::Fault::SwapRedBlue, bt601::Fault::MovePixel { x: edge, y: 0 }] {
        let r = run(&Args { fault: Some(fault), ..args("mock", w, h, frames) }).unwrap();
        assert!(!r.ok, "{fault:?}: {r:?}");
        assert_eq!(r.converter, "CPU", "{fault:?}: a broken converter is a CPU converter");
        assert_eq!(r.mismatches, Mismatches { statistic: 0, pixels: frames, recorder: 0 }, "{fault:?}");
        assert!(!r.last_identical, "{fault:?}");
        assert_ledger_clean("a broken converter");
    }
    // The same run without the fault passes (on the CUDA converter where there is a GPU).
    let r = run_ok(&args("mock", w, h, frames), None);
    assert_eq!(r.mismatches, Mismatches::default());
}

#[test]
fn block_linear_frames_are_verified_on_the_mock_cpu_path() {
    let _serial = serial();
    // Sizes that fill GOBs (64 bytes x 8 rows) partly, with the recorder reading every frame too.
    // `--put-pixels`: the writer a camera without a CUDA producer has (on a GPU host too).
    let r = run_ok(&Args { block_linear: true, put_pixels: true, ..args("mock", 200, 70, 6) }, None);
    assert!(r.ok, "{r:?}");
    assert_eq!(r.writer, Writer::PutPixels);
}

#[test]
fn the_camera_uploads_block_linear_frames_where_a_cuda_producer_can() {
    let plan = |block_linear, put_pixels| {
        let a = Args { block_linear, put_pixels, ..args("mock", 64, 48, 2) };
        Plan::new(&a, None, false).unwrap()
    };
    assert!(parse(["--put-pixels".to_string()]).unwrap().unwrap().put_pixels);
    for cuda in [false, true] {
        assert_eq!(Writer::choose(&plan(false, false), cuda), Writer::InPlace);
        assert_eq!(Writer::choose(&plan(false, true), cuda), Writer::InPlace);
        assert_eq!(Writer::choose(&plan(true, true), cuda), Writer::PutPixels);
    }
    assert_eq!(Writer::choose(&plan(true, false), false), Writer::PutPixels);
    assert_eq!(Writer::choose(&plan(true, false), true), Writer::Upload);
}

/// Block-linear frames written by the production path (pinned host memory, the producer's
/// CUDA stream lays them out) and by `put_pixels`, each frame verified on the CUDA converter,
/// with odd sizes whose planes end inside GOBs.
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA GPU"]
fn block_linear_frames_uploaded_by_a_cuda_producer_gpu() {
    let Some(kind) = gpu_backend("mock") else { return };
    let _serial = serial();
    for (w, h) in [(200, 70), (1920, 1080)] {
        for put_pixels in [false, true] {
            let a = Args { block_linear: true, put_pixels, buffers: Some(4), ..args(kind, w, h, 40) };
            let r = run_ok(&a, Some("CUDA"));
            assert_eq!(r.writer, if put_pixels { Writer::PutPixels } else { Writer::Upload }, "{w}x{h}");
            assert_eq!((r.frames, r.mismatches), (40, Mismatches::default()), "{w}x{h}");
        }
    }
}
