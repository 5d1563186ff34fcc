//! A contact sheet: converted frames shrunk to tiles in a grid, each labelled with its frame
//! number underneath, so that motion, order and colour show at a glance.

use super::digits;

/// Widest tile; narrower frames keep their size.
pub const MAX_TILE_WIDTH: u32 = 320;
/// Most tiles on one sheet.
pub const MAX_TILES: u64 = 64;
/// Tiles per row (fewer when there are fewer tiles).
pub const COLUMNS: u32 = 4;
/// Space around tiles.
const GAP: u32 = 6;
/// Scale of the label digits, and the space above and below them.
pub const LABEL_SCALE: u32 = 2;
pub const LABEL_PAD: u32 = 4;
/// Background and label colours.
const BACKGROUND: [u8; 4] = [24, 24, 24, 255];
const INK: [u8; 4] = [255, 255, 255, 255];

/// Size of the tile of a `width` x `height` frame.
pub fn tile_size(width: u32, height: u32) -> (u32, u32) {
    if width <= MAX_TILE_WIDTH {
        (width, height)
    } else {
        (MAX_TILE_WIDTH, ((height as u64 * MAX_TILE_WIDTH as u64 / width as u64) as u32).max(1))
    }
}

/// `rgba` (`width` x `height`, 4 bytes per pixel) shrunk to `tw` x `th` by averaging the source
/// pixels each tile pixel covers (rounded to nearest).
pub fn shrink(rgba: &[u8], width: u32, height: u32, tw: u32, th: u32) -> Vec<u8> {
    let (w, h) = (width as usize, height as usize);
    let span = |o: u32, t: u32, n: usize| {
        let a = o as usize * n / t as usize;
        a..((o as usize + 1) * n / t as usize).max(a + 1)
    };
    let mut out = Vec::with_capacity(tw as usize * th as usize * 4);
    for oy in 0..th {
        let ys = span(oy, th, h);
        for ox in 0..tw {
            let xs = span(ox, tw, w);
            let mut sum = [0u64; 4];
            for y in ys.clone() {
                for px in rgba[(y * w + xs.start) * 4..(y * w + xs.end) * 4].chunks_exact(4) {
                    for (s, &c) in sum.iter_mut().zip(px) {
                        *s += c as u64;
                    }
                }
            }
            let n = (ys.len() * xs.len()) as u64;
            out.extend(sum.map(|s| ((s + n / 2) / n) as u8));
        }
    }
    out
}

/// Where tile `k` of a sheet lies, and the sheet's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    pub tile_w: u32,
    pub tile_h: u32,
    pub columns: u32,
    pub rows: u32,
    pub label_h: u32,
    pub width: u32,
    pub height: u32,
}

impl Grid {
    /// The grid of `tiles` tiles of `width` x `height` frames.
    pub fn new(width: u32, height: u32, tiles: u32) -> Self {
        let (tile_w, tile_h) = tile_size(width, height);
        let columns = tiles.clamp(1, COLUMNS);
        let rows = tiles.div_ceil(columns).max(1);
        let label_h = digits::height(LABEL_SCALE) + 2 * LABEL_PAD;
        Self {
            tile_w,
            tile_h,
            columns,
            rows,
            label_h,
            width: GAP + columns * (tile_w + GAP),
            height: GAP + rows * (tile_h + label_h + GAP),
        }
    }

    /// Top left corner of tile `k`; its label is below it.
    pub fn origin(&self, k: u32) -> (u32, u32) {
        let (col, row) = (k % self.columns, k / self.columns);
        (GAP + col * (self.tile_w + GAP), GAP + row * (self.tile_h + self.label_h + GAP))
    }
}

/// The sheet of `frames` (frame number, RGBA of a `width` x `height` frame), in order: the grid
/// and its RGBA pixels.
pub fn render(frames: &[(u64, Vec<u8>)], width: u32, height: u32) -> (Grid, Vec<u8>) {
    let g = Grid::new(width, height, frames.len() as u32);
    let sw = g.width as usize;
    let mut sheet: Vec<u8> = BACKGROUND.iter().copied().cycle().take(sw * g.height as usize * 4).collect();
    for (k, (number, rgba)) in frames.iter().enumerate() {
        let (x0, y0) = g.origin(k as u32);
        let tile = shrink(rgba, width, height, g.tile_w, g.tile_h);
        let row_bytes = g.tile_w as usize * 4;
        for (ty, src) in tile.chunks_exact(row_bytes).enumerate() {
            let at = ((y0 as usize + ty) * sw + x0 as usize) * 4;
            sheet[at..at + row_bytes].copy_from_slice(src);
        }
        let ly = y0 + g.tile_h + LABEL_PAD;
        digits::draw(*number, LABEL_SCALE, |x, y| {
            if x < g.tile_w {
                let at = ((ly + y) as usize * sw + (x0 + x) as usize) * 4;
                sheet[at..at + 4].copy_from_slice(&INK);
            }
        });
    }
    (g, sheet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_average_what_they_cover() {
        // 4x2 -> 2x1: each tile pixel averages a 2x2 block.
        let px = |v: u8| [v, v, v, 255];
        let src: Vec<u8> = [0, 10, 100, 200, 20, 30, 100, 201].iter().flat_map(|&v| px(v)).collect();
        assert_eq!(shrink(&src, 4, 2, 2, 1), [15, 15, 15, 255, 150, 150, 150, 255]);
        assert_eq!(shrink(&src, 4, 2, 4, 2), src);
        assert_eq!(tile_size(1920, 1080), (320, 180));
        assert_eq!(tile_size(64, 48), (64, 48));
    }

    #[test]
    fn tiles_are_laid_out_in_rows_with_their_labels() {
        let g = Grid::new(64, 48, 6);
        assert_eq!((g.columns, g.rows), (4, 2));
        assert_eq!(g.origin(0), (GAP, GAP));
        assert_eq!(g.origin(5), (GAP + 64 + GAP, GAP + 48 + g.label_h + GAP));
        let frames: Vec<(u64, Vec<u8>)> = (0..6).map(|k| (k * 10, vec![k as u8 * 40; 64 * 48 * 4])).collect();
        let (g2, sheet) = render(&frames, 64, 48);
        assert_eq!(g2, g);
        assert_eq!(sheet.len(), (g.width * g.height * 4) as usize);
        let at = |x: u32, y: u32| &sheet[((y * g.width + x) * 4) as usize..][..4];
        let (x, y) = g.origin(3);
        assert_eq!(at(x + 1, y + 1), [120; 4]);
        assert_eq!(at(0, 0), BACKGROUND);
        // A label is drawn under each tile ("30": the top row of the 3 is lit).
        assert_eq!(at(x, y + g.tile_h + LABEL_PAD), INK);
        assert_eq!(at(x, y + g.tile_h + LABEL_PAD - 1), BACKGROUND);
    }
}
