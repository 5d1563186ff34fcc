//! The pixel oracle of the examples and tests: BT.601 limited-range Y'CbCr to R'G'B', written
//! from the standard rather than from `nvsci::convert`, the converter it checks.
//!
//! The matrix comes from BT.601's luma weights Kr = 0.299, Kb = 0.114 and the limited range's
//! scales (219 luma steps from 16, 224 chroma steps around 128); each coefficient is rounded to
//! 1/256 here, at run time, and the result rounded to the nearest integer and clamped to 0..255.
//! A converter whose matrix, range, rounding or channel order differs disagrees with it on some
//! pixel. The tests below hold it to the unrounded formula (within one step on every input).
//!
//! It also holds the broken converters the verification is shown to fail on ([`Fault`]), and the
//! comparison of a converted frame with the oracle's ([`first_difference`]).
#![allow(dead_code)]

use std::sync::OnceLock;

/// BT.601's luma weight of red.
pub const KR: f64 = 0.299;
/// BT.601's luma weight of blue.
pub const KB: f64 = 0.114;

/// The inverse matrix in 1/256 steps: R from (Y, Cr), G from (Y, Cb, Cr), B from (Y, Cb).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Matrix {
    pub y: i32,
    pub r_cr: i32,
    pub g_cb: i32,
    pub g_cr: i32,
    pub b_cb: i32,
}

/// The unrounded inverse coefficients per 8-bit input step: (luma, R from Cr, G from Cb, G from
/// Cr, B from Cb), the last three of G as magnitudes (they are subtracted).
pub fn coefficients() -> [f64; 5] {
    let kg = 1.0 - KR - KB;
    let (ky, kc) = (255.0 / 219.0, 255.0 / 224.0);
    [
        ky,
        kc * 2.0 * (1.0 - KR),
        kc * 2.0 * (1.0 - KB) * KB / kg,
        kc * 2.0 * (1.0 - KR) * KR / kg,
        kc * 2.0 * (1.0 - KB),
    ]
}

/// The coefficients rounded to 1/256.
pub fn matrix() -> Matrix {
    static M: OnceLock<Matrix> = OnceLock::new();
    *M.get_or_init(|| {
        let [y, r_cr, g_cb, g_cr, b_cb] = coefficients().map(|k| (k * 256.0).round() as i32);
        Matrix { y, r_cr, g_cb, g_cr, b_cb }
    })
}

/// R', G', B' of one limited-range sample.
pub fn rgb(y: u8, cb: u8, cr: u8) -> [u8; 3] {
    rgb_with(&matrix(), y, cb, cr)
}

fn rgb_with(m: &Matrix, y: u8, cb: u8, cr: u8) -> [u8; 3] {
    let (l, b, r) = (m.y * (y as i32 - 16), cb as i32 - 128, cr as i32 - 128);
    // x / 256 rounded to the nearest integer (halves up), then clamped.
    let q = |x: i32| ((x + 128).div_euclid(256)).clamp(0, 255) as u8;
    [q(l + m.r_cr * r), q(l - m.g_cb * b - m.g_cr * r), q(l + m.b_cb * b)]
}

/// Packed RGBA (`width * 4` bytes per row, alpha 255) of a `width` x `height` picture whose
/// sample at `(x, row)` is `ycbcr(x, row)`.
pub fn rgba(width: u32, height: u32, ycbcr: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
    let m = matrix();
    let mut out = Vec::with_capacity(width as usize * height as usize * 4);
    for row in 0..height {
        for x in 0..width {
            let [y, cb, cr] = ycbcr(x, row);
            out.extend(rgb_with(&m, y, cb, cr));
            out.push(255);
        }
    }
    out
}

/// R + G + B over every pixel of packed RGBA: the converters' per-frame statistic, a fast
/// pre-check that cannot see a moved pixel or swapped channels.
pub fn statistic(rgba: &[u8]) -> u64 {
    rgba.chunks_exact(4).map(|p| p[0] as u64 + p[1] as u64 + p[2] as u64).sum()
}

/// The first pixel where a converted `width`-wide RGBA frame differs from the oracle's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Difference {
    pub x: u32,
    pub y: u32,
    pub got: [u8; 4],
    pub want: [u8; 4],
}

/// Compares `got` with `want` pixel by pixel (both packed RGBA of `width` pixels per row).
pub fn first_difference(got: &[u8], want: &[u8], width: u32) -> Option<Difference> {
    if got.len() != want.len() {
        return Some(Difference { x: u32::MAX, y: u32::MAX, got: [0; 4], want: [0; 4] });
    }
    let i = got.chunks_exact(4).zip(want.chunks_exact(4)).position(|(a, b)| a != b)?;
    let px = |s: &[u8]| -> [u8; 4] { s[i * 4..i * 4 + 4].try_into().unwrap() };
    let w = width.max(1) as usize;
    Some(Difference { x: (i % w) as u32, y: (i / w) as u32, got: px(got), want: px(want) })
}

/// A deliberately broken converter: what it does to a correct frame's packed RGBA. Neither
/// fault changes the frame's R + G + B, so only a check of the pixels finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Red and blue swapped in every pixel.
    SwapRedBlue,
    /// Pixel `(x, y)` written one place to the right, and that one's pixel at `(x, y)`.
    MovePixel { x: u32, y: u32 },
}

impl Fault {
    /// Breaks `rgba` (`width` pixels per row) as this fault does.
    pub fn apply(self, rgba: &mut [u8], width: u32) {
        match self {
            Fault::SwapRedBlue => rgba.chunks_exact_mut(4).for_each(|p| p.swap(0, 2)),
            Fault::MovePixel { x, y } => {
                let i = (y as usize * width as usize + x as usize) * 4;
                let (a, b) = rgba[i..i + 8].split_at_mut(4);
                a.swap_with_slice(b);
            }
        }
    }
}

#[cfg(test)]
mod bt601_tests {
    use super::*;

    /// The textbook inverse, unrounded and unclamped.
    fn exact(y: u8, cb: u8, cr: u8) -> [f64; 3] {
        let [ky, r_cr, g_cb, g_cr, b_cb] = coefficients();
        let (l, b, r) = (ky * (y as f64 - 16.0), cb as f64 - 128.0, cr as f64 - 128.0);
        [l + r_cr * r, l - g_cb * b - g_cr * r, l + b_cb * b]
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "arithmetic over a grid of about 700,000 colours, no unsafe code: run natively"
    )]
    fn the_oracle_is_within_one_step_of_the_unrounded_bt601_inverse() {
        // Every luma value, chroma in steps of 5 (0 and 255 included), clamped as 8-bit output
        // is.
        let chroma: Vec<u8> = (0..=255u8).step_by(5).collect();
        let mut worst = 0.0f64;
        for y in 0..=255u8 {
            for &cb in &chroma {
                for &cr in &chroma {
                    let got = rgb(y, cb, cr);
                    let want = exact(y, cb, cr).map(|v| v.clamp(0.0, 255.0));
                    for c in 0..3 {
                        worst = worst.max((got[c] as f64 - want[c]).abs());
                    }
                }
            }
        }
        assert!(worst <= 1.0, "{worst}");
    }

    #[test]
    fn known_colours_convert_to_their_values() {
        // Black, 100% white and mid grey are exact; the 75% bars of BT.801 land on 191 or 0
        // (Y'CbCr of the bars rounded to integers: a step at most).
        assert_eq!(rgb(16, 128, 128), [0, 0, 0]);
        assert_eq!(rgb(235, 128, 128), [255, 255, 255]);
        assert_eq!(rgb(126, 128, 128), [128, 128, 128]);
        assert_eq!(rgb(180, 128, 128), [191, 191, 191]);
        for (ycbcr, want) in [
            ([162, 44, 142], [191, 191, 0]),
            ([131, 156, 44], [0, 191, 191]),
            ([112, 72, 58], [0, 191, 0]),
            ([84, 184, 198], [191, 0, 191]),
            ([65, 100, 212], [191, 0, 0]),
            ([35, 212, 114], [0, 0, 191]),
        ] {
            let got = rgb(ycbcr[0], ycbcr[1], ycbcr[2]);
            for c in 0..3 {
                assert!((got[c] as i32 - want[c]).abs() <= 1, "{ycbcr:?}: {got:?} for {want:?}");
            }
        }
    }

    #[test]
    fn the_faults_keep_the_statistic_and_change_the_pixels() {
        let frame = rgba(8, 2, |x, row| [16 + 20 * x as u8, 60 + 10 * row as u8, 200 - 9 * x as u8]);
        for fault in [Fault::SwapRedBlue, Fault::MovePixel { x: 3, y: 1 }] {
            let mut broken = frame.clone();
            fault.apply(&mut broken, 8);
            assert_eq!(statistic(&broken), statistic(&frame), "{fault:?}");
            let d = first_difference(&broken, &frame, 8).expect("a difference");
            match fault {
                Fault::SwapRedBlue => {
                    let w = d.want;
                    assert_eq!(d.got, [w[2], w[1], w[0], w[3]]);
                }
                Fault::MovePixel { x, y } => {
                    assert_eq!((d.x, d.y), (x, y));
                    let right = ((y * 8 + x + 1) * 4) as usize;
                    assert_eq!(d.got[..], frame[right..right + 4]);
                }
            }
        }
        assert_eq!(first_difference(&frame, &frame, 8), None);
    }
}
