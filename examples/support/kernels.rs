//! PTX kernels (and their host-side expectations) of the examples and the GPU tests, in one
//! place (the tests include this file through `tests/common`). Hand-written PTX:
//! the driver JIT-compiles it for the GPU at load time, so no CUDA toolkit is needed to build.
#![allow(dead_code)]

/// `xor_words(u32* p, u64 n_words, u32 key)`: `p[i] ^= key` for `i < n_words`
/// (one thread per word, 1D grid).
pub const XOR_WORDS_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry xor_words(
    .param .u64 p_ptr,
    .param .u64 p_n,
    .param .u32 p_key
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [p_ptr];
    ld.param.u64 %rd2, [p_n];
    ld.param.u32 %r1, [p_key];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mul.wide.u32 %rd3, %r2, %r3;
    cvt.u64.u32 %rd4, %r4;
    add.s64 %rd3, %rd3, %rd4;
    setp.ge.u64 %p1, %rd3, %rd2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd5, %rd1;
    shl.b64 %rd6, %rd3, 2;
    add.s64 %rd7, %rd5, %rd6;
    ld.global.u32 %r5, [%rd7];
    xor.b32 %r6, %r5, %r1;
    st.global.u32 [%rd7], %r6;
DONE:
    ret;
}
"#;

/// `surface_read(u64 surf, u8* out, u32 width, u32 height, u32 bytes_per_texel)`: copies every
/// texel of a 2D surface object into `out`, packed row-major (2D grid, one thread per texel;
/// texel sizes 1, 2, 4, 8 and 16 bytes).
pub const SURFACE_READ_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry surface_read(
    .param .u64 p_surf,
    .param .u64 p_out,
    .param .u32 p_width,
    .param .u32 p_height,
    .param .u32 p_bpt
)
{
    .reg .pred %p<8>;
    .reg .b16 %rs<2>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [p_surf];
    ld.param.u64 %rd2, [p_out];
    ld.param.u32 %r1, [p_width];
    ld.param.u32 %r2, [p_height];
    ld.param.u32 %r3, [p_bpt];
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %tid.x;
    mad.lo.s32 %r7, %r4, %r5, %r6;
    mov.u32 %r4, %ctaid.y;
    mov.u32 %r5, %ntid.y;
    mov.u32 %r6, %tid.y;
    mad.lo.s32 %r8, %r4, %r5, %r6;
    setp.ge.u32 %p1, %r7, %r1;
    setp.ge.u32 %p2, %r8, %r2;
    or.pred %p3, %p1, %p2;
    @%p3 bra DONE;
    // byte x coordinate for suld.b and the linear output offset
    mul.lo.s32 %r9, %r7, %r3;
    mad.lo.s32 %r10, %r8, %r1, %r7;
    mul.wide.u32 %rd3, %r10, %r3;
    cvta.to.global.u64 %rd4, %rd2;
    add.s64 %rd5, %rd4, %rd3;
    setp.eq.u32 %p4, %r3, 1;
    @%p4 bra B1;
    setp.eq.u32 %p5, %r3, 2;
    @%p5 bra B2;
    setp.eq.u32 %p6, %r3, 4;
    @%p6 bra B4;
    setp.eq.u32 %p7, %r3, 8;
    @%p7 bra B8;
    suld.b.2d.v4.b32.trap {%r11, %r12, %r13, %r14}, [%rd1, {%r9, %r8}];
    st.global.v4.u32 [%rd5], {%r11, %r12, %r13, %r14};
    bra DONE;
B1:
    suld.b.2d.b8.trap {%rs1}, [%rd1, {%r9, %r8}];
    st.global.u8 [%rd5], %rs1;
    bra DONE;
B2:
    suld.b.2d.b16.trap {%rs1}, [%rd1, {%r9, %r8}];
    st.global.u16 [%rd5], %rs1;
    bra DONE;
B4:
    suld.b.2d.b32.trap {%r11}, [%rd1, {%r9, %r8}];
    st.global.u32 [%rd5], %r11;
    bra DONE;
B8:
    suld.b.2d.v2.b32.trap {%r11, %r12}, [%rd1, {%r9, %r8}];
    st.global.v2.u32 [%rd5], {%r11, %r12};
DONE:
    ret;
}
"#;

/// `surface_write(u64 surf, u8* in, u32 width, u32 height, u32 bytes_per_texel)`: the reverse of
/// [`SURFACE_READ_PTX`]: writes every texel of a 2D surface object from `in`, packed row-major
/// (2D grid, one thread per texel; texel sizes 1, 2, 4, 8 and 16 bytes).
pub const SURFACE_WRITE_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry surface_write(
    .param .u64 p_surf,
    .param .u64 p_in,
    .param .u32 p_width,
    .param .u32 p_height,
    .param .u32 p_bpt
)
{
    .reg .pred %p<8>;
    .reg .b16 %rs<2>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [p_surf];
    ld.param.u64 %rd2, [p_in];
    ld.param.u32 %r1, [p_width];
    ld.param.u32 %r2, [p_height];
    ld.param.u32 %r3, [p_bpt];
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %tid.x;
    mad.lo.s32 %r7, %r4, %r5, %r6;
    mov.u32 %r4, %ctaid.y;
    mov.u32 %r5, %ntid.y;
    mov.u32 %r6, %tid.y;
    mad.lo.s32 %r8, %r4, %r5, %r6;
    setp.ge.u32 %p1, %r7, %r1;
    setp.ge.u32 %p2, %r8, %r2;
    or.pred %p3, %p1, %p2;
    @%p3 bra DONE;
    // byte x coordinate for sust.b and the linear input offset
    mul.lo.s32 %r9, %r7, %r3;
    mad.lo.s32 %r10, %r8, %r1, %r7;
    mul.wide.u32 %rd3, %r10, %r3;
    cvta.to.global.u64 %rd4, %rd2;
    add.s64 %rd5, %rd4, %rd3;
    setp.eq.u32 %p4, %r3, 1;
    @%p4 bra B1;
    setp.eq.u32 %p5, %r3, 2;
    @%p5 bra B2;
    setp.eq.u32 %p6, %r3, 4;
    @%p6 bra B4;
    setp.eq.u32 %p7, %r3, 8;
    @%p7 bra B8;
    ld.global.v4.u32 {%r11, %r12, %r13, %r14}, [%rd5];
    sust.b.2d.v4.b32.trap [%rd1, {%r9, %r8}], {%r11, %r12, %r13, %r14};
    bra DONE;
B1:
    ld.global.u8 %rs1, [%rd5];
    sust.b.2d.b8.trap [%rd1, {%r9, %r8}], {%rs1};
    bra DONE;
B2:
    ld.global.u16 %rs1, [%rd5];
    sust.b.2d.b16.trap [%rd1, {%r9, %r8}], {%rs1};
    bra DONE;
B4:
    ld.global.u32 %r11, [%rd5];
    sust.b.2d.b32.trap [%rd1, {%r9, %r8}], {%r11};
    bra DONE;
B8:
    ld.global.v2.u32 {%r11, %r12}, [%rd5];
    sust.b.2d.v2.b32.trap [%rd1, {%r9, %r8}], {%r11, %r12};
DONE:
    ret;
}
"#;

/// `texture_read(u64 tex, u8* out, u32 width, u32 height, u32 channels)`: fetches every texel of
/// a 2D texture object over an array of 8-bit unsigned channels (1, 2 or 4) at unnormalised
/// integer coordinates (`tex.2d.v4.u32.s32`: the texel at column x, row y, no filtering) and
/// writes its channels into `out`, packed row-major (`channels` bytes a texel; 2D grid, one
/// thread per texel). The texture must read its elements as integers
/// (`CU_TRSF_READ_AS_INTEGER`, without `CU_TRSF_NORMALIZED_COORDINATES`), so each channel
/// arrives as its 8-bit value in a `u32`; channels the array lacks are not stored.
pub const TEXTURE_READ_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry texture_read(
    .param .u64 p_tex,
    .param .u64 p_out,
    .param .u32 p_width,
    .param .u32 p_height,
    .param .u32 p_channels
)
{
    .reg .pred %p<8>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [p_tex];
    ld.param.u64 %rd2, [p_out];
    ld.param.u32 %r1, [p_width];
    ld.param.u32 %r2, [p_height];
    ld.param.u32 %r3, [p_channels];
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %tid.x;
    mad.lo.s32 %r7, %r4, %r5, %r6;
    mov.u32 %r4, %ctaid.y;
    mov.u32 %r5, %ntid.y;
    mov.u32 %r6, %tid.y;
    mad.lo.s32 %r8, %r4, %r5, %r6;
    setp.ge.u32 %p1, %r7, %r1;
    setp.ge.u32 %p2, %r8, %r2;
    or.pred %p3, %p1, %p2;
    @%p3 bra DONE;
    // the linear output offset: (y * width + x) * channels
    mad.lo.s32 %r10, %r8, %r1, %r7;
    mul.wide.u32 %rd3, %r10, %r3;
    cvta.to.global.u64 %rd4, %rd2;
    add.s64 %rd5, %rd4, %rd3;
    tex.2d.v4.u32.s32 {%r11, %r12, %r13, %r14}, [%rd1, {%r7, %r8}];
    st.global.u8 [%rd5], %r11;
    setp.lt.u32 %p4, %r3, 2;
    @%p4 bra DONE;
    st.global.u8 [%rd5+1], %r12;
    setp.lt.u32 %p5, %r3, 4;
    @%p5 bra DONE;
    st.global.u8 [%rd5+2], %r13;
    st.global.u8 [%rd5+3], %r14;
DONE:
    ret;
}
"#;

/// The XOR key of frame `frame` (never 0, so every frame changes every word).
pub fn frame_key(frame: u64) -> u32 {
    ((frame as u32).wrapping_add(1)).wrapping_mul(0x9E37_79B1) | 1
}

/// What `xor_words` with `key` makes of `input` (little-endian words).
pub fn xor_expected(input: &[u8], key: u32) -> Vec<u8> {
    let k = key.to_le_bytes();
    input.iter().enumerate().map(|(i, b)| b ^ k[i % 4]).collect()
}

/// FNV-1a over `bytes` (per-frame checksums).
pub fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// `fill_pattern(u8* p, u64 n, u32 seed)`: `p[i] = (i * 7 + seed) & 0xff` for `i < n` (one
/// thread per byte, 1D grid).
pub const FILL_PATTERN_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry fill_pattern(
    .param .u64 p_ptr,
    .param .u64 p_n,
    .param .u32 p_seed
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;

    ld.param.u64 %rd1, [p_ptr];
    ld.param.u64 %rd2, [p_n];
    ld.param.u32 %r1, [p_seed];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    cvt.u64.u32 %rd3, %r5;
    setp.ge.u64 %p1, %rd3, %rd2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd4, %rd1;
    add.s64 %rd5, %rd4, %rd3;
    mul.lo.s32 %r6, %r5, 7;
    add.s32 %r7, %r6, %r1;
    st.global.u8 [%rd5], %r7;
DONE:
    ret;
}
"#;

/// The host-side expectation of `fill_pattern`.
pub fn expected_pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n).map(|i| ((i as u32).wrapping_mul(7).wrapping_add(seed) & 0xff) as u8).collect()
}

/// `spin_until_released(u32* started, const u32* release, u64 max_ns)`: one thread sets
/// `*started = 1`, then spins until `*release` is non-zero or `max_ns` nanoseconds of the GPU's
/// global timer have passed. Both words are meant to be page-locked host memory mapped for the
/// device, so the host sees the kernel running and ends it.
pub const SPIN_UNTIL_RELEASED_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry spin_until_released(
    .param .u64 p_started,
    .param .u64 p_release,
    .param .u64 p_max_ns
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<9>;

    ld.param.u64 %rd1, [p_started];
    ld.param.u64 %rd2, [p_release];
    ld.param.u64 %rd3, [p_max_ns];
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    mov.u64 %rd6, %globaltimer;
    mov.u32 %r1, 1;
    st.volatile.global.u32 [%rd4], %r1;
    membar.sys;
LOOP:
    ld.volatile.global.u32 %r2, [%rd5];
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra DONE;
    mov.u64 %rd7, %globaltimer;
    sub.u64 %rd8, %rd7, %rd6;
    setp.lt.u64 %p2, %rd8, %rd3;
    @%p2 bra LOOP;
DONE:
    ret;
}
"#;
