//! Decimal digits from a 5x7 bitmap font, scaled up by whole pixels: the frame number drawn into
//! the test pattern's luma plane and the labels of the contact sheet.

/// Glyph width and height in font pixels.
pub const GLYPH_W: u32 = 5;
pub const GLYPH_H: u32 = 7;
/// Horizontal advance per digit in font pixels (the glyph and one blank column).
pub const ADVANCE: u32 = GLYPH_W + 1;

/// The digits 0 to 9, one row per byte, the leftmost pixel in bit 4.
const GLYPHS: [[u8; 7]; 10] = [
    [0b01110, 0b10001, 0b10011, 0b10101, 0b11001, 0b10001, 0b01110],
    [0b00100, 0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110],
    [0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b01000, 0b11111],
    [0b11111, 0b00010, 0b00100, 0b00010, 0b00001, 0b10001, 0b01110],
    [0b00010, 0b00110, 0b01010, 0b10010, 0b11111, 0b00010, 0b00010],
    [0b11111, 0b10000, 0b11110, 0b00001, 0b00001, 0b10001, 0b01110],
    [0b00110, 0b01000, 0b10000, 0b11110, 0b10001, 0b10001, 0b01110],
    [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b01000, 0b01000],
    [0b01110, 0b10001, 0b10001, 0b01110, 0b10001, 0b10001, 0b01110],
    [0b01110, 0b10001, 0b10001, 0b01111, 0b00001, 0b00010, 0b01100],
];

/// Number of decimal digits of `n`.
pub fn digit_count(n: u64) -> u32 {
    n.checked_ilog10().map_or(1, |l| l + 1)
}

/// Height in pixels of a number drawn at `scale`.
pub fn height(scale: u32) -> u32 {
    GLYPH_H * scale
}

/// Calls `ink(x, y, len)` for every horizontal run of lit pixels (`len` pixels from `(x, y)`) of
/// `n` drawn at `scale` with its top left corner at the origin; the caller clips.
pub fn draw_runs(n: u64, scale: u32, mut ink: impl FnMut(u32, u32, u32)) {
    let digits = digit_count(n);
    for i in 0..digits {
        let d = (n / 10u64.pow(digits - 1 - i) % 10) as usize;
        let x0 = i * ADVANCE * scale;
        for (gy, &row) in GLYPHS[d].iter().enumerate() {
            let mut gx = 0;
            while gx < GLYPH_W {
                let lit = |x: u32| x < GLYPH_W && row & (0b10000 >> x) != 0;
                if !lit(gx) {
                    gx += 1;
                    continue;
                }
                let start = gx;
                while lit(gx) {
                    gx += 1;
                }
                for sy in 0..scale {
                    ink(x0 + start * scale, gy as u32 * scale + sy, (gx - start) * scale);
                }
            }
        }
    }
}

/// Calls `ink(x, y)` for every lit pixel of `n` drawn at `scale` (see [`draw_runs`]).
pub fn draw(n: u64, scale: u32, mut ink: impl FnMut(u32, u32)) {
    draw_runs(n, scale, |x, y, len| (x..x + len).for_each(|x| ink(x, y)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_drawn_digit_by_digit() {
        assert_eq!((digit_count(0), digit_count(9), digit_count(10), digit_count(u64::MAX)), (1, 1, 2, 20));
        assert_eq!(height(3), 21);
        let mut lit = Vec::new();
        draw(1, 1, |x, y| lit.push((x, y)));
        // "1": the stem in column 2 on every row, the flag, the foot.
        assert!((0..7).all(|y| lit.contains(&(2, y))));
        assert!(lit.contains(&(1, 1)) && lit.contains(&(1, 6)) && lit.contains(&(3, 6)));
        assert_eq!(lit.len(), 7 + 1 + 2);
        let mut a = Vec::new();
        let mut b = Vec::new();
        draw(12, 2, |x, y| a.push((x, y)));
        draw(13, 2, |x, y| b.push((x, y)));
        assert!(a.iter().all(|&(x, y)| x < (2 * ADVANCE - 1) * 2 && y < height(2)));
        assert_ne!(a, b);
        // Runs cover exactly the pixels.
        let mut runs = Vec::new();
        draw_runs(12, 2, |x, y, len| runs.extend((x..x + len).map(|x| (x, y))));
        assert_eq!(runs, a);
        // The leading digit is the same, at the same place.
        let left = |v: &[(u32, u32)]| v.iter().filter(|p| p.0 < ADVANCE * 2).copied().collect::<Vec<_>>();
        assert_eq!(left(&a), left(&b));
    }
}
