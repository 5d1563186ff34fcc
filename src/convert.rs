//! NV12 -> RGBA conversion: the CPU version and the matching CUDA kernel (PTX text, and a
//! launcher with the `cuda` feature), bit-exact with each other (BT.601 studio range, integer
//! arithmetic), plus a per-frame statistic (the sum of R + G + B).
//!
//! Both take the luma and chroma plane offsets from the frame's layout as they are (either
//! plane may come first in the buffer).

use crate::error::{invalid, Result};
use crate::pipeline::FrameLayout;

/// Converts one pixel (BT.601 studio range, 8-bit integer arithmetic).
pub fn yuv_to_rgb(y: u8, u: u8, v: u8) -> [u8; 3] {
    let c = y as i32 - 16;
    let d = u as i32 - 128;
    let e = v as i32 - 128;
    let clamp = |x: i32| x.clamp(0, 255) as u8;
    [
        clamp((298 * c + 409 * e + 128) >> 8),
        clamp((298 * c - 100 * d - 208 * e + 128) >> 8),
        clamp((298 * c + 516 * d + 128) >> 8),
    ]
}

/// Converts an NV12 frame laid out as `layout` (pitches and offsets from its planes) into packed
/// RGBA (`width * 4` bytes per row). Returns the frame statistic: the sum of R + G + B over all
/// pixels.
pub fn nv12_to_rgba(layout: &FrameLayout, src: &[u8], dst: &mut [u8]) -> Result<u64> {
    let (w, h) = layout.nv12_fits(src.len(), "src")?;
    if Some(dst.len()) != w.checked_mul(h).and_then(|v| v.checked_mul(4)) {
        return Err(invalid("dst", format!("{} bytes; {w}x{h} RGBA needs 4 bytes per pixel", dst.len())));
    }
    let (yp, uvp) = (&layout.planes[0], &layout.planes[1]);
    let mut sum = 0u64;
    for (yy, out_row) in dst.chunks_exact_mut(w * 4).enumerate() {
        let y_row = &src[yp.offset as usize + yy * yp.pitch as usize..][..w];
        let uv_row = &src[uvp.offset as usize + (yy / 2) * uvp.pitch as usize..][..w];
        for (xx, px) in out_row.chunks_exact_mut(4).enumerate() {
            let [r, g, b] = yuv_to_rgb(y_row[xx], uv_row[xx & !1], uv_row[(xx & !1) + 1]);
            px.copy_from_slice(&[r, g, b, 255]);
            sum += r as u64 + g as u64 + b as u64;
        }
    }
    Ok(sum)
}

/// CUDA kernel `nv12_to_rgba(frame, y_offset, y_pitch, uv_offset, uv_pitch, width, height, dst,
/// sum)`: one thread per pixel (2D grid; blocks of at most 1024 threads, a multiple of 32), the
/// luma plane at `frame + y_offset`, the interleaved chroma plane at `frame + uv_offset`, packed
/// RGBA output, and R + G + B summed per block (warp shuffles, then the block's warps through
/// shared memory) and added to `*sum` (a `u64` the caller zeroes) with one atomic per block.
/// Same arithmetic as [`yuv_to_rgb`]. Parameter types: `u64, u64, u32, u64, u32, u32, u32, u64,
/// u64`. [`Nv12ToRgba`] launches it.
pub const NV12_TO_RGBA_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry nv12_to_rgba(
    .param .u64 p_src,
    .param .u64 p_yoff,
    .param .u32 p_ypitch,
    .param .u64 p_uvoff,
    .param .u32 p_uvpitch,
    .param .u32 p_w,
    .param .u32 p_h,
    .param .u64 p_dst,
    .param .u64 p_sum
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<24>;
    .shared .align 4 .u32 warp_sums[32];

    ld.param.u64 %rd1, [p_src];
    ld.param.u64 %rd19, [p_yoff];
    ld.param.u32 %r1, [p_ypitch];
    ld.param.u64 %rd2, [p_uvoff];
    ld.param.u32 %r2, [p_uvpitch];
    ld.param.u32 %r3, [p_w];
    ld.param.u32 %r4, [p_h];
    ld.param.u64 %rd3, [p_dst];
    ld.param.u64 %rd4, [p_sum];

    mov.u32 %r5, %ctaid.x;
    mov.u32 %r6, %ntid.x;
    mov.u32 %r7, %tid.x;
    mad.lo.u32 %r8, %r5, %r6, %r7;
    mov.u32 %r5, %ctaid.y;
    mov.u32 %r6, %ntid.y;
    mov.u32 %r7, %tid.y;
    mad.lo.u32 %r9, %r5, %r6, %r7;
    setp.ge.u32 %p1, %r8, %r3;
    setp.ge.u32 %p2, %r9, %r4;
    or.pred %p3, %p1, %p2;
    mov.u32 %r26, 0;
    @%p3 bra REDUCE;

    cvta.to.global.u64 %rd5, %rd1;
    mul.wide.u32 %rd6, %r9, %r1;
    cvt.u64.u32 %rd7, %r8;
    add.s64 %rd8, %rd6, %rd7;
    add.s64 %rd8, %rd8, %rd19;
    add.s64 %rd9, %rd5, %rd8;
    ld.global.u8 %r10, [%rd9];

    shr.u32 %r11, %r9, 1;
    mul.wide.u32 %rd10, %r11, %r2;
    and.b32 %r12, %r8, 0xFFFFFFFE;
    cvt.u64.u32 %rd11, %r12;
    add.s64 %rd12, %rd10, %rd11;
    add.s64 %rd12, %rd12, %rd2;
    add.s64 %rd13, %rd5, %rd12;
    ld.global.u8 %r13, [%rd13];
    ld.global.u8 %r14, [%rd13+1];

    sub.s32 %r15, %r10, 16;
    sub.s32 %r16, %r13, 128;
    sub.s32 %r17, %r14, 128;
    mul.lo.s32 %r18, %r15, 298;

    mad.lo.s32 %r19, %r17, 409, %r18;
    add.s32 %r19, %r19, 128;
    shr.s32 %r19, %r19, 8;
    max.s32 %r19, %r19, 0;
    min.s32 %r19, %r19, 255;

    mad.lo.s32 %r20, %r16, -100, %r18;
    mad.lo.s32 %r20, %r17, -208, %r20;
    add.s32 %r20, %r20, 128;
    shr.s32 %r20, %r20, 8;
    max.s32 %r20, %r20, 0;
    min.s32 %r20, %r20, 255;

    mad.lo.s32 %r21, %r16, 516, %r18;
    add.s32 %r21, %r21, 128;
    shr.s32 %r21, %r21, 8;
    max.s32 %r21, %r21, 0;
    min.s32 %r21, %r21, 255;

    shl.b32 %r22, %r20, 8;
    or.b32 %r23, %r19, %r22;
    shl.b32 %r24, %r21, 16;
    or.b32 %r25, %r23, %r24;
    or.b32 %r25, %r25, 0xFF000000;

    mul.wide.u32 %rd14, %r9, %r3;
    add.s64 %rd14, %rd14, %rd7;
    shl.b64 %rd14, %rd14, 2;
    cvta.to.global.u64 %rd15, %rd3;
    add.s64 %rd15, %rd15, %rd14;
    st.global.u32 [%rd15], %r25;

    add.s32 %r26, %r19, %r20;
    add.s32 %r26, %r26, %r21;

REDUCE:
    // Warp sum of R + G + B (at most 32 * 765), then the warps' sums through shared memory
    // (at most 1024 * 765, fits 32 bits), one atomic per block. Every thread gets here, in
    // range or not, so the full-mask shuffles are converged and the barrier is reached by all.
    shfl.sync.down.b32 %r27, %r26, 16, 31, 0xffffffff;
    add.s32 %r26, %r26, %r27;
    shfl.sync.down.b32 %r27, %r26, 8, 31, 0xffffffff;
    add.s32 %r26, %r26, %r27;
    shfl.sync.down.b32 %r27, %r26, 4, 31, 0xffffffff;
    add.s32 %r26, %r26, %r27;
    shfl.sync.down.b32 %r27, %r26, 2, 31, 0xffffffff;
    add.s32 %r26, %r26, %r27;
    shfl.sync.down.b32 %r27, %r26, 1, 31, 0xffffffff;
    add.s32 %r26, %r26, %r27;
    // linear thread index and warp index
    mov.u32 %r29, %tid.x;
    mov.u32 %r30, %tid.y;
    mov.u32 %r31, %ntid.x;
    mad.lo.u32 %r32, %r30, %r31, %r29;
    shr.u32 %r33, %r32, 5;
    mov.u32 %r28, %laneid;
    setp.ne.u32 %p1, %r28, 0;
    mov.u32 %r34, warp_sums;
    shl.b32 %r35, %r33, 2;
    add.u32 %r35, %r34, %r35;
    @!%p1 st.shared.u32 [%r35], %r26;
    bar.sync 0;
    setp.ne.u32 %p2, %r32, 0;
    @%p2 bra DONE;
    // thread 0: add the block's warp sums
    mov.u32 %r36, %ntid.y;
    mul.lo.u32 %r36, %r36, %r31;
    add.u32 %r36, %r36, 31;
    shr.u32 %r36, %r36, 5;
    mov.u32 %r37, 0;
    mov.u32 %r38, 0;
SUM:
    shl.b32 %r35, %r37, 2;
    add.u32 %r35, %r34, %r35;
    ld.shared.u32 %r39, [%r35];
    add.u32 %r38, %r38, %r39;
    add.u32 %r37, %r37, 1;
    setp.lt.u32 %p3, %r37, %r36;
    @%p3 bra SUM;
    cvt.u64.u32 %rd16, %r38;
    cvta.to.global.u64 %rd17, %rd4;
    atom.global.add.u64 %rd18, [%rd17], %rd16;
DONE:
    ret;
}
"#;

/// The NV12 -> RGBA kernel ([`NV12_TO_RGBA_PTX`]) loaded into a CUDA context, launched with the
/// plane offsets and pitches of a [`FrameLayout`].
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
#[derive(Debug)]
pub struct Nv12ToRgba {
    f: cudarc::driver::CudaFunction,
}

#[cfg(feature = "cuda")]
impl Nv12ToRgba {
    /// Loads the kernel into `gpu`'s context.
    pub fn load(gpu: &crate::cuda::CudaGpu) -> Result<Self> {
        let e = |what: &'static str| move |err| crate::cuda::from_driver(what, err);
        let m = gpu
            .context()
            .load_module(cudarc::nvrtc::Ptx::from_src(NV12_TO_RGBA_PTX))
            .map_err(e("cuModuleLoadData"))?;
        Ok(Self { f: m.load_function("nv12_to_rgba").map_err(e("cuModuleGetFunction"))? })
    }

    /// Enqueues the conversion of the NV12 frame at device address `frame` (laid out as
    /// `layout`: plane 0 luma, plane 1 interleaved chroma, at their own offsets) into packed RGBA
    /// at `dst` (`width * height * 4` bytes), adding R + G + B of every pixel to the `u64` at
    /// `sum`.
    ///
    /// # Safety
    ///
    /// `frame` must hold a whole frame of `layout`, `dst` and `sum` the sizes above, all in the
    /// context of `stream`, alive until the work enqueued on `stream` completes.
    pub unsafe fn enqueue(
        &self,
        stream: &cudarc::driver::CudaStream,
        layout: &FrameLayout,
        frame: u64,
        dst: u64,
        sum: u64,
    ) -> Result<()> {
        use cudarc::driver::PushKernelArg;
        let (w, h) =
            layout.format.dimensions().ok_or_else(|| invalid("layout", "an NV12 image format is needed"))?;
        let (y, uv) = match layout.planes.get(..2) {
            Some([y, uv]) => (y, uv),
            _ => return Err(invalid("layout", "NV12 has two planes")),
        };
        let (y_pitch, uv_pitch) = (y.pitch, uv.pitch);
        let mut b = stream.launch_builder(&self.f);
        b.arg(&frame)
            .arg(&y.offset)
            .arg(&y_pitch)
            .arg(&uv.offset)
            .arg(&uv_pitch)
            .arg(&w)
            .arg(&h)
            .arg(&dst)
            .arg(&sum);
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (w.div_ceil(16), h.div_ceil(16), 1),
            block_dim: (16, 16, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments match the kernel's parameter list; the caller guarantees the
        // buffers (see above).
        unsafe { b.launch(cfg) }.map(drop).map_err(|err| crate::cuda::from_driver("cuLaunchKernel", err))
    }
}
