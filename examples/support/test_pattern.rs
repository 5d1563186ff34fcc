//! The synthetic camera's picture: colour bars in NV12 with the frame number and a moving square
//! drawn into every frame.
//!
//! Colour: BT.601 matrix, limited ("studio") range: Y 16 to 235, Cb and Cr 16 to 240 around 128.
//! That is what the crate's converters implement (`nvsci::convert`, the CPU reference and
//! the CUDA kernel), so the converted bars have known RGB values.
//!
//! Layout of a `w` x `h` frame (every edge on an even row and column, so each 2x2 chroma block
//! lies inside one region and the bars carry no blended chroma):
//!
//! * rows `0 .. 2h/3`: seven 75% colour bars, left to right white, yellow, cyan, green, magenta,
//!   red, blue ([`BARS`]), each `w/7` wide;
//! * rows `2h/3 .. 3h/4`: the reverse bars under them: blue, black, magenta, black, cyan, black,
//!   white ([`REVERSE`]);
//! * rows `3h/4 .. h`: black, with the frame number in 100% white on the left half
//!   ([`Geometry::number`]) and a 100% white square moving left to right along the right half
//!   ([`Geometry::track`], [`Geometry::step`] pixels per frame, starting over at the left end).
//!
//! The number and the square change only luma; the chroma under them is neutral (128, 128).

use super::digits;
use super::nv12::Nv12Planes;
use nvsci::pipeline::FrameLayout;
use std::ops::Range;

/// One colour bar: what it stands for and the Y, Cb, Cr it is generated with.
#[derive(Clone, Copy, Debug)]
pub struct Bar {
    pub name: &'static str,
    /// R', G', B' in percent of full scale (75% bars).
    pub rgb_percent: [u8; 3],
    /// Y, Cb, Cr (BT.601, limited range, rounded to the nearest integer).
    pub ycbcr: [u8; 3],
}

/// The 75% colour bars, left to right (the values of ITU-R BT.801 / SMPTE EG 1 for BT.601).
pub const BARS: [Bar; 7] = [
    Bar { name: "white", rgb_percent: [75, 75, 75], ycbcr: [180, 128, 128] },
    Bar { name: "yellow", rgb_percent: [75, 75, 0], ycbcr: [162, 44, 142] },
    Bar { name: "cyan", rgb_percent: [0, 75, 75], ycbcr: [131, 156, 44] },
    Bar { name: "green", rgb_percent: [0, 75, 0], ycbcr: [112, 72, 58] },
    Bar { name: "magenta", rgb_percent: [75, 0, 75], ycbcr: [84, 184, 198] },
    Bar { name: "red", rgb_percent: [75, 0, 0], ycbcr: [65, 100, 212] },
    Bar { name: "blue", rgb_percent: [0, 0, 75], ycbcr: [35, 212, 114] },
];

/// Black (Y 16).
pub const BLACK: [u8; 3] = [16, 128, 128];
/// 100% white (Y 235): the frame number and the moving square.
pub const WHITE: [u8; 3] = [235, 128, 128];

/// The reverse bars under bar `i`: the index of the bar whose colour they repeat, or `None` for
/// black.
pub const REVERSE: [Option<usize>; 7] = [Some(6), None, Some(4), None, Some(2), None, Some(0)];

/// The Y, Cb, Cr of the reverse bar under bar `i`.
pub fn reverse_ycbcr(i: usize) -> [u8; 3] {
    REVERSE[i].map_or(BLACK, |b| BARS[b].ycbcr)
}

/// One line describing the pattern and its colour, for `--help`, logs and PNG metadata.
pub const DESCRIPTION: &str = "75% colour bars (white, yellow, cyan, green, magenta, red, blue), \
     reverse bars, frame number, moving square; NV12, BT.601 matrix, limited range \
     (Y 16-235, Cb/Cr 16-240)";

/// The bars' colours and values in one line, for picture metadata.
pub fn bar_values() -> String {
    let bars: Vec<String> = BARS
        .iter()
        .map(|b| {
            let [r, g, bl] = b.rgb_percent;
            let [y, cb, cr] = b.ycbcr;
            format!("{} {r}/{g}/{bl}% -> {y}/{cb}/{cr}", b.name)
        })
        .collect();
    format!("bars R'G'B' -> Y'CbCr: {}", bars.join(", "))
}

/// A rectangle of pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
}

impl Rect {
    #[cfg(test)]
    pub fn contains(&self, x: u32, y: u32) -> bool {
        x >= self.x && x - self.x < self.w && y >= self.y && y - self.y < self.h
    }
}

/// Where everything is in a `width` x `height` frame.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    pub width: u32,
    pub height: u32,
    /// Bar `i` covers columns `edges[i] .. edges[i + 1]`.
    pub edges: [u32; 8],
    /// First row below the colour bars (the reverse bars start here).
    pub bars_end: u32,
    /// First row of the bottom band (number and square).
    pub band: u32,
    /// Where the frame number is drawn (clipped to it), and its scale (font pixels to pixels;
    /// 0 when the band is too small for digits).
    pub number: Rect,
    pub scale: u32,
    /// Where the square moves; its side is [`Geometry::square`].
    pub track: Rect,
    pub square: u32,
    /// Pixels the square moves per frame.
    pub step: u32,
}

impl Geometry {
    pub fn new(width: u32, height: u32) -> Self {
        let even = |v: u64| (v & !1) as u32;
        let (w, h) = (width as u64, height as u64);
        let mut edges = [width; 8];
        for (i, e) in edges.iter_mut().take(7).enumerate() {
            *e = even(i as u64 * w / 7);
        }
        let bars_end = even(h * 2 / 3);
        let band = even(h * 3 / 4);
        let band_h = height - band;
        let margin = even(band_h as u64 / 6);
        let inner = band_h - 2 * margin;
        let scale = inner / digits::GLYPH_H;
        // The digits' height rounded up to even; still inside the band (`inner` is even).
        let rect_h = (digits::height(scale) + 1) & !1;
        let mx = even(w / 40).max(2).min(even(w / 4));
        let half = even(w / 2);
        let number = Rect { x: mx, y: band + margin, w: half.saturating_sub(2 * mx), h: rect_h };
        let track =
            Rect { x: half + mx, y: band + margin, w: (width - half).saturating_sub(2 * mx), h: rect_h };
        let square = rect_h.min(track.w);
        let step = even(track.w as u64 / 24).max(2);
        Self { width, height, edges, bars_end, band, number, scale, track, square, step }
    }

    /// The bar whose columns hold column `x`.
    pub fn bar_at(&self, x: u32) -> usize {
        self.edges[..7].iter().rposition(|&e| e <= x).unwrap_or(0)
    }

    /// Left edge of the square in frame `t`.
    pub fn square_x(&self, t: u64) -> u32 {
        let span = (self.track.w - self.square) as u64;
        if span == 0 {
            return self.track.x;
        }
        // (t * step) mod span, without overflow; even, since step and span are.
        self.track.x + ((t % span) * self.step as u64 % span) as u32
    }

    /// The rectangles that change from frame to frame; everything else is the same in every frame.
    #[cfg(test)]
    pub fn dynamic(&self) -> [Rect; 2] {
        [self.number, self.track]
    }

    /// Y, Cb, Cr of the static picture (no number, no square) at pixel `(x, row)`.
    pub fn static_ycbcr(&self, x: u32, row: u32) -> [u8; 3] {
        if row < self.bars_end {
            BARS[self.bar_at(x)].ycbcr
        } else if row < self.band {
            reverse_ycbcr(self.bar_at(x))
        } else {
            BLACK
        }
    }
}

/// The pattern, its static part rendered once; each frame is a copy of it plus the number and the
/// square.
pub struct ColourBars {
    geometry: Geometry,
    /// Luma, `width` bytes per row.
    y: Vec<u8>,
    /// Chroma, `width` bytes (U, V pairs) per row, `height / 2` rows.
    uv: Vec<u8>,
}

impl ColourBars {
    /// The pattern for `width` x `height` frames (both even; the caller checks).
    pub fn new(width: u32, height: u32) -> Self {
        let g = Geometry::new(width, height);
        let (w, h) = (width as usize, height as usize);
        let mut y = vec![0u8; w * h];
        let mut uv = vec![0u8; w * (h / 2)];
        for (row, line) in y.chunks_exact_mut(w.max(1)).enumerate() {
            for (x, b) in line.iter_mut().enumerate() {
                *b = g.static_ycbcr(x as u32, row as u32)[0];
            }
        }
        for (brow, line) in uv.chunks_exact_mut(w.max(1)).enumerate() {
            for (bx, pair) in line.chunks_exact_mut(2).enumerate() {
                let [_, cb, cr] = g.static_ycbcr(2 * bx as u32, 2 * brow as u32);
                pair.copy_from_slice(&[cb, cr]);
            }
        }
        Self { geometry: g, y, uv }
    }

    /// Writes frame `t` into `dst`, laid out as `layout`.
    pub fn write_frame(&self, t: u64, layout: &FrameLayout, dst: &mut [u8]) -> Result<(), String> {
        let g = &self.geometry;
        let p = Nv12Planes::of(layout, g.width, g.height, dst.len())?;
        let w = p.width.max(1);
        for (row, src) in self.y.chunks_exact(w).enumerate() {
            p.y_row(dst, row).copy_from_slice(src);
        }
        for (row, src) in self.uv.chunks_exact(w).enumerate() {
            p.uv_row(dst, row).copy_from_slice(src);
        }
        self.white_runs(t, |row, columns| {
            p.y_row(dst, row as usize)[columns.start as usize..columns.end as usize].fill(WHITE[0])
        });
        Ok(())
    }

    /// Calls `fill(row, columns)` for each run of 100% white drawn into frame `t`: the number
    /// (clipped to its rectangle) and the square. Everything under them is black.
    pub fn white_runs(&self, t: u64, mut fill: impl FnMut(u32, Range<u32>)) {
        let g = &self.geometry;
        let n = g.number;
        if g.scale > 0 {
            digits::draw_runs(t, g.scale, |x, y, len| {
                if x < n.w && y < n.h {
                    fill(n.y + y, n.x + x..n.x + (x + len).min(n.w));
                }
            });
        }
        let sx = g.square_x(t);
        for row in g.track.y..g.track.y + g.square {
            fill(row, sx..sx + g.square);
        }
    }

    /// Pixels of frame `t` that are 100% white (the number and the square); the rest of the
    /// frame is the same in every frame.
    #[cfg(test)]
    pub fn white_pixels(&self, t: u64) -> u64 {
        let mut n = 0;
        self.white_runs(t, |_, columns| n += columns.len() as u64);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BT.601 limited range from R'G'B' in 0..1, rounded to the nearest integer.
    fn bt601_limited(r: f64, g: f64, b: f64) -> [u8; 3] {
        let y = 0.299 * r + 0.587 * g + 0.114 * b;
        let q = |v: f64| v.round() as u8;
        [q(16.0 + 219.0 * y), q(128.0 + 224.0 * (b - y) / 1.772), q(128.0 + 224.0 * (r - y) / 1.402)]
    }

    #[test]
    fn bars_are_the_bt601_limited_range_values_of_75_percent_colours() {
        for bar in BARS {
            let [r, g, b] = bar.rgb_percent.map(|p| p as f64 / 100.0);
            assert_eq!(bar.ycbcr, bt601_limited(r, g, b), "{}", bar.name);
        }
        assert_eq!(BLACK, bt601_limited(0.0, 0.0, 0.0));
        assert_eq!(WHITE, bt601_limited(1.0, 1.0, 1.0));
    }

    #[test]
    fn every_region_starts_on_an_even_pixel_and_fits_the_frame() {
        for (w, h) in
            [(2, 2), (14, 8), (64, 48), (320, 180), (480, 270), (640, 360), (1920, 1080), (8192, 4320)]
        {
            let g = Geometry::new(w, h);
            assert!(
                g.edges.windows(2).all(|e| e[0] <= e[1] && e[0].is_multiple_of(2)),
                "{w}x{h}: {:?}",
                g.edges
            );
            assert!(
                g.bars_end.is_multiple_of(2)
                    && g.band.is_multiple_of(2)
                    && g.bars_end <= g.band
                    && g.band <= h
            );
            for r in g.dynamic() {
                assert!(
                    r.x.is_multiple_of(2)
                        && r.y.is_multiple_of(2)
                        && r.w.is_multiple_of(2)
                        && r.h.is_multiple_of(2),
                    "{w}x{h}: {r:?}"
                );
                assert!(r.x + r.w <= w && r.y + r.h <= h && r.y >= g.band, "{w}x{h}: {r:?}");
            }
            assert!(g.number.x + g.number.w <= g.track.x, "{w}x{h}: the rectangles overlap");
            for t in [0, 1, 7, 1000, u64::MAX] {
                let x = g.square_x(t);
                assert!(x.is_multiple_of(2) && x >= g.track.x && x + g.square <= g.track.x + g.track.w);
            }
            // Rendering any frame of any size stays inside its buffer.
            let p = ColourBars::new(w.min(640), h.min(360));
            let layout = super::super::nv12::tight_layout(w.min(640), h.min(360)).unwrap();
            let mut buf = vec![0u8; layout.size as usize];
            p.write_frame(u64::MAX, &layout, &mut buf).unwrap();
            assert!(p.write_frame(0, &layout, &mut buf[1..]).is_err());
        }
        // The white pixels counted are the white pixels written, all in the band.
        let p = ColourBars::new(320, 180);
        let layout = super::super::nv12::tight_layout(320, 180).unwrap();
        let mut buf = vec![0u8; layout.size as usize];
        for t in [0, 8, 1234] {
            p.write_frame(t, &layout, &mut buf).unwrap();
            let band = &buf[320 * p.geometry.band as usize..320 * 180];
            assert_eq!(band.iter().filter(|&&y| y == WHITE[0]).count() as u64, p.white_pixels(t));
            assert!(band.iter().all(|&y| y == WHITE[0] || y == BLACK[0]));
        }
        let g = Geometry::new(1920, 1080);
        assert_eq!((g.bars_end, g.band, g.scale), (720, 810, 26));
        assert!(g.square_x(1) > g.square_x(0));
    }
}
