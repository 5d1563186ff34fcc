//! A position-sensitive digest of a packed RGBA frame, computed on the GPU next to the converter
//! (so that every converted frame is checked without reading it back) and on the CPU from the
//! oracle's frame.
//!
//! `digest = sum over pixels i of weight(i) * pixel(i)` modulo 2^64, `pixel(i)` the pixel's four
//! bytes as a little-endian `u32` and `weight(i)` an odd 64-bit number mixed from `i`
//! (SplitMix64's finaliser). A single changed pixel always changes the digest (an odd weight
//! times a non-zero difference below 2^32 is not 0 modulo 2^64); so do swapped channels, and a
//! pixel moved (two weights that differ). Unlike R + G + B, it sees where each value lies.
#![allow(dead_code)]

/// The weight of pixel `i`.
pub fn weight(i: u64) -> u64 {
    let mut z = i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
}

/// What pixel `i` with bytes `px` adds to the digest.
pub fn term(i: u64, px: [u8; 4]) -> u64 {
    weight(i).wrapping_mul(u32::from_le_bytes(px) as u64)
}

/// The digest of packed RGBA.
pub fn digest(rgba: &[u8]) -> u64 {
    rgba.chunks_exact(4)
        .enumerate()
        .fold(0u64, |d, (i, p)| d.wrapping_add(term(i as u64, [p[0], p[1], p[2], p[3]])))
}

/// `rgba_digest(const u32* rgba, u64 pixels, u64* digest)`: adds the digest of `pixels` packed
/// RGBA pixels to `*digest` (a `u64` the caller zeroes): one thread per pixel, a warp's terms
/// summed with shuffles (each 64-bit term as two 32-bit halves), one atomic per warp. Blocks of
/// 256 threads (any multiple of 32), grid `ceil(pixels / 256)`. Same arithmetic as [`digest`].
pub const RGBA_DIGEST_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry rgba_digest(
    .param .u64 p_rgba,
    .param .u64 p_pixels,
    .param .u64 p_digest
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<16>;

    ld.param.u64 %rd1, [p_rgba];
    ld.param.u64 %rd2, [p_pixels];
    ld.param.u64 %rd3, [p_digest];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    // %rd4 = i, %rd10 = this thread's term (0 past the end)
    mul.wide.u32 %rd4, %r1, %r2;
    cvt.u64.u32 %rd5, %r3;
    add.s64 %rd4, %rd4, %rd5;
    mov.u64 %rd10, 0;
    setp.ge.u64 %p1, %rd4, %rd2;
    @%p1 bra REDUCE;

    cvta.to.global.u64 %rd6, %rd1;
    shl.b64 %rd7, %rd4, 2;
    add.s64 %rd6, %rd6, %rd7;
    ld.global.u32 %r4, [%rd6];
    cvt.u64.u32 %rd8, %r4;
    // weight(i): SplitMix64's finaliser of i + 1, made odd
    add.s64 %rd9, %rd4, 1;
    mul.lo.u64 %rd9, %rd9, 0x9E3779B97F4A7C15;
    shr.u64 %rd11, %rd9, 30;
    xor.b64 %rd9, %rd9, %rd11;
    mul.lo.u64 %rd9, %rd9, 0xBF58476D1CE4E5B9;
    shr.u64 %rd11, %rd9, 27;
    xor.b64 %rd9, %rd9, %rd11;
    mul.lo.u64 %rd9, %rd9, 0x94D049BB133111EB;
    shr.u64 %rd11, %rd9, 31;
    xor.b64 %rd9, %rd9, %rd11;
    or.b64 %rd9, %rd9, 1;
    mul.lo.u64 %rd10, %rd9, %rd8;

REDUCE:
    mov.b64 {%r5, %r6}, %rd10;
    shfl.sync.down.b32 %r7, %r5, 16, 31, -1;
    shfl.sync.down.b32 %r8, %r6, 16, 31, -1;
    mov.b64 %rd12, {%r7, %r8};
    add.s64 %rd10, %rd10, %rd12;
    mov.b64 {%r5, %r6}, %rd10;
    shfl.sync.down.b32 %r7, %r5, 8, 31, -1;
    shfl.sync.down.b32 %r8, %r6, 8, 31, -1;
    mov.b64 %rd12, {%r7, %r8};
    add.s64 %rd10, %rd10, %rd12;
    mov.b64 {%r5, %r6}, %rd10;
    shfl.sync.down.b32 %r7, %r5, 4, 31, -1;
    shfl.sync.down.b32 %r8, %r6, 4, 31, -1;
    mov.b64 %rd12, {%r7, %r8};
    add.s64 %rd10, %rd10, %rd12;
    mov.b64 {%r5, %r6}, %rd10;
    shfl.sync.down.b32 %r7, %r5, 2, 31, -1;
    shfl.sync.down.b32 %r8, %r6, 2, 31, -1;
    mov.b64 %rd12, {%r7, %r8};
    add.s64 %rd10, %rd10, %rd12;
    mov.b64 {%r5, %r6}, %rd10;
    shfl.sync.down.b32 %r7, %r5, 1, 31, -1;
    shfl.sync.down.b32 %r8, %r6, 1, 31, -1;
    mov.b64 %rd12, {%r7, %r8};
    add.s64 %rd10, %rd10, %rd12;
    mov.u32 %r9, %laneid;
    setp.ne.u32 %p2, %r9, 0;
    @%p2 bra DONE;
    cvta.to.global.u64 %rd13, %rd3;
    atom.global.add.u64 %rd14, [%rd13], %rd10;
DONE:
    ret;
}
"#;

/// Launch geometry of [`RGBA_DIGEST_PTX`] for `pixels` pixels: (grid, block).
pub fn launch_dims(pixels: u64) -> (u32, u32) {
    (pixels.div_ceil(256) as u32, 256)
}

#[cfg(test)]
mod rgba_digest_tests {
    use super::*;

    #[test]
    fn one_changed_pixel_swapped_channels_or_a_moved_pixel_change_the_digest() {
        let frame: Vec<u8> = (0..64 * 4).map(|i| (i * 37 % 251) as u8).collect();
        let d = digest(&frame);
        for i in 0..64 {
            for c in 0..4 {
                let mut f = frame.clone();
                f[i * 4 + c] ^= 1;
                assert_ne!(digest(&f), d, "pixel {i} channel {c}");
            }
            let mut f = frame.clone();
            f[i * 4..i * 4 + 4].swap(0, 2);
            assert_ne!(digest(&f), d, "pixel {i}: R and B swapped");
            if i + 1 < 64 {
                let mut f = frame.clone();
                let (a, b) = f[i * 4..i * 4 + 8].split_at_mut(4);
                a.swap_with_slice(b);
                assert_ne!(digest(&f), d, "pixels {i} and {} swapped", i + 1);
            }
        }
        // SplitMix64's published first output for seed 0 (state 0x9E3779B97F4A7C15), made odd.
        assert_eq!(weight(0), 0xE220_A839_7B1D_CDAF);
    }
}
