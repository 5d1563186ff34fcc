//! NVIDIA's cudaNvSci sample (cuda-samples, `Samples/4_CUDA_Libraries/cudaNvSci`) on this crate
//! and the mock: the sample's attribute lists (a raw buffer, and a block-linear B8G8R8A8 image
//! with 100 rows of top and bottom padding and interlaced scan), each with the GPU's id as the
//! sample sets it, reconciled, allocated, and the sample's two callers ordered by NvSciSync fences.
//!
//! With a CUDA GPU, the sample's CUDA path. Caller 1 imports the raw buffer and the image
//! (`ExternalMemory::from_buf_obj`; on the mock a block-linear image for a GPU is host-NUMA CUDA
//! virtual memory, imported with `cuImportExternalMemory`), maps the image as a CUDA array of one
//! level (`map_plane`), copies the picture into it on its stream, builds the sample's texture over
//! it (normalised coordinates, bilinear filter, wrap addressing, normalised-float reads), rotates
//! the picture by 0.5 rad into the raw buffer (the sample's `transformKernel`) and signals the
//! NvSciSync object on its stream (`CudaSyncObj::signal`). Caller 2, on another thread and
//! another stream, imports the raw buffer, waits for that fence on its stream
//! (`CudaSyncObj::wait`, no host wait), turns the buffer grey in place (`rgbToGrayscaleKernel`:
//! weights 0.3, 0.59, 0.11, alpha 0) and signals a second object that the CPU waits for. The
//! main thread then reads the raw buffer and checks it against the same computation done on the
//! CPU (the texture unit's filter weights are 8-bit fixed point, so up to [`TOLERANCE`] levels
//! per channel; the grey computation itself is bit-exact).
//!
//! Without a GPU (or with `--cpu`), the CPU part: caller 1 writes the picture into the image
//! (`put_pixels`, through the block-linear layout), reads it back as its texture
//! (`get_pixels`), rotates it with the same sampling on the CPU into the raw buffer and signals;
//! caller 2 waits on the CPU, turns the raw buffer grey and signals back; the output is checked
//! against the reference exactly. A CPU party joins the lists for that CPU access.
//!
//! Kernels: hand-written PTX ([`ROTATE_PTX`], [`GRAYSCALE_PTX`]), JIT-compiled by the driver, so
//! no CUDA toolkit is needed to build. On a Jetson the same lists reconcile with NVIDIA's library
//! (`NvSci::load()`).
//!
//! `cargo run --example cuda_nvsci -- [--size N] [--cpu]` (N x N pixels, default 1024 as the
//! sample's teapot picture). `NVSCI_REQUIRE_GPU=1` makes a missing GPU an error.

use nvsci::buf::{
    BufAttr, BufAttrList, BufModule, BufObj, BufType, ColorFormat, ColorStd, ImageLayout, Perm, PlaneDst,
    PlaneSrc, ScanType,
};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::{GpuId, NvSci};
use std::time::Duration;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The sample's rotation angle in radians.
const ANGLE: f32 = 0.5;

/// The sample's raw-buffer list (`setRawBufAttrList`), with the GPU id it adds for its device
/// where there is one.
fn sample_raw_list(m: &BufModule, size: u64, gpu: Option<GpuId>) -> Res<BufAttrList> {
    let mut l = m.attr_list()?;
    l.set(&[
        BufAttr::RawSize(size),
        BufAttr::Types(&[BufType::RAW_BUFFER]),
        BufAttr::NeedCpuAccess(false),
        BufAttr::RequiredPerm(Perm::ReadWrite),
    ])?;
    if let Some(id) = gpu {
        l.set(&[BufAttr::GpuId(&[id])])?;
    }
    Ok(l)
}

/// The sample's image list (`setImageBufAttrList`), with the GPU id where there is one.
fn sample_image_list(m: &BufModule, width: u32, height: u32, gpu: Option<GpuId>) -> Res<BufAttrList> {
    let mut l = m.attr_list()?;
    l.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::PlaneCount(1),
        BufAttr::Layout(ImageLayout::BlockLinear),
        BufAttr::TopPadding(&[100]),
        BufAttr::BottomPadding(&[100]),
        BufAttr::LeftPadding(&[0]),
        BufAttr::RightPadding(&[0]),
        BufAttr::PlaneColorFormat(&[ColorFormat::B8G8R8A8]),
        BufAttr::PlaneColorStd(&[ColorStd::SRGB]),
        BufAttr::PlaneWidth(&[width]),
        BufAttr::PlaneHeight(&[height]),
        BufAttr::NeedCpuAccess(false),
        BufAttr::RequiredPerm(Perm::ReadWrite),
        BufAttr::ScanType(ScanType::Interlace),
    ])?;
    if let Some(id) = gpu {
        l.set(&[BufAttr::GpuId(&[id])])?;
    }
    Ok(l)
}

/// The CPU party standing in for the sample's CUDA work: it asks for CPU access.
fn cpu_list(m: &BufModule, ty: BufType) -> Res<BufAttrList> {
    let mut l = m.attr_list()?;
    l.set(&[BufAttr::Types(&[ty]), BufAttr::NeedCpuAccess(true), BufAttr::RequiredPerm(Perm::ReadWrite)])?;
    Ok(l)
}

/// A sync object signalled by one CPU party and waited on by another.
fn cpu_sync(m: &SyncModule) -> Res<SyncObj> {
    let mut s = m.attr_list()?;
    s.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::SignalOnly)])?;
    let mut w = m.attr_list()?;
    w.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::WaitOnly)])?;
    Ok(SyncObj::alloc(&SyncAttrList::reconcile(&[&s, &w])?)?)
}

/// The picture: a deterministic RGBA pattern standing in for the sample's teapot.
fn picture(width: u32, height: u32) -> Vec<u8> {
    let mut p = Vec::with_capacity(width as usize * height as usize * 4);
    for y in 0..height {
        for x in 0..width {
            let d = ((x as i64 - width as i64 / 2).pow(2) + (y as i64 - height as i64 / 2).pow(2)) as u64;
            p.extend_from_slice(&[
                (x * 255 / width.max(1)) as u8,
                (y * 255 / height.max(1)) as u8,
                (d >> 8) as u8,
                255,
            ]);
        }
    }
    p
}

/// A bilinear, wrapping texture fetch at normalised coordinates (u, v) (CUDA Programming Guide,
/// "Texture Fetching", linear filtering: `x_B = u * W - 0.5`, weights from its fraction).
fn tex2d(img: &[u8], width: u32, height: u32, u: f32, v: f32) -> [f32; 4] {
    let (w, h) = (width as i64, height as i64);
    let xb = u * width as f32 - 0.5;
    let yb = v * height as f32 - 0.5;
    let (i, j) = (xb.floor(), yb.floor());
    let (a, b) = (xb - i, yb - j);
    let texel = |x: i64, y: i64| -> [f32; 4] {
        let (x, y) = (x.rem_euclid(w) as usize, y.rem_euclid(h) as usize);
        let p = &img[(y * width as usize + x) * 4..][..4];
        [p[0] as f32 / 255.0, p[1] as f32 / 255.0, p[2] as f32 / 255.0, p[3] as f32 / 255.0]
    };
    let (i, j) = (i as i64, j as i64);
    let (t00, t10, t01, t11) = (texel(i, j), texel(i + 1, j), texel(i, j + 1), texel(i + 1, j + 1));
    std::array::from_fn(|c| {
        (1.0 - a) * (1.0 - b) * t00[c] + a * (1.0 - b) * t10[c] + (1.0 - a) * b * t01[c] + a * b * t11[c]
    })
}

/// The sample's `transformKernel`: pixel (x, y) of the output samples the rotated position.
fn rotate(img: &[u8], width: u32, height: u32, out: &mut [u8]) {
    let (s, c) = ANGLE.sin_cos();
    for y in 0..height {
        for x in 0..width {
            let u = x as f32 - width as f32 / 2.0;
            let v = y as f32 - height as f32 / 2.0;
            let tu = (u * c - v * s) / width as f32;
            let tv = (v * c + u * s) / height as f32;
            let px = tex2d(img, width, height, tu + 0.5, tv + 0.5);
            let o = &mut out[(y as usize * width as usize + x as usize) * 4..][..4];
            for (d, f) in o.iter_mut().zip(px) {
                *d = (f.clamp(0.0, 1.0) * 255.0) as u8;
            }
        }
    }
}

/// The sample's `rgbToGrayscaleKernel`, in place.
fn grayscale(pixels: &mut [u8]) {
    for p in pixels.chunks_exact_mut(4) {
        let g = (p[0] as f64 * 0.3 + p[1] as f64 * 0.59 + p[2] as f64 * 0.11) as u8;
        p.copy_from_slice(&[g, g, g, 0]);
    }
}

/// Prints the reconciled layout of the image's plane.
fn describe(image: &BufObj) -> Res<()> {
    let plane = image.planes()?[0];
    println!(
        "image: {}x{} block-linear, interlaced, pitch {} bytes, {} rows per field, {} bytes in all",
        plane.width,
        plane.height,
        plane.pitch,
        plane.aligned_height,
        image.size()
    );
    Ok(())
}

/// Runs both callers' CPU part on an image of `width` x `height`; returns the number of pixels
/// checked.
pub fn run_cpu(width: u32, height: u32) -> Res<usize> {
    let lib = NvSci::mock();
    let bufs = BufModule::open(&lib)?;
    let syncs = SyncModule::open(&lib)?;
    let size = u64::from(width) * u64::from(height) * 4;

    // Caller 1 and caller 2 import the same raw buffer (both give the sample's list); the image
    // is caller 1's. The CPU party joins both.
    let raw_lists = [
        sample_raw_list(&bufs, size, None)?,
        sample_raw_list(&bufs, size, None)?,
        cpu_list(&bufs, BufType::RAW_BUFFER)?,
    ];
    let raw = BufObj::alloc(&BufAttrList::reconcile(&raw_lists.iter().collect::<Vec<_>>())?)?;
    let image_lists = [sample_image_list(&bufs, width, height, None)?, cpu_list(&bufs, BufType::IMAGE)?];
    let image = BufObj::alloc(&BufAttrList::reconcile(&image_lists.iter().collect::<Vec<_>>())?)?;
    describe(&image)?;

    let to_caller2 = cpu_sync(&syncs)?;
    let to_caller1 = cpu_sync(&syncs)?;
    let source = picture(width, height);
    // The whole image: no rectangle (NULL in the C call).
    let whole = None;
    let pitch = width * 4;

    std::thread::scope(|scope| -> Res<usize> {
        // Caller 1: picture -> image -> (texture) -> rotated into the raw buffer -> signal.
        image.put_pixels(whole, &[PlaneSrc { data: &source, pitch }])?;
        let mut texture = vec![0u8; source.len()];
        image.get_pixels(whole, &mut [PlaneDst { data: &mut texture, pitch }])?;
        rotate(&texture, width, height, &mut raw.cpu_write()?);
        let fence = to_caller2.generate_fence()?;
        to_caller2.signal()?;

        // Caller 2: waits for caller 1's fence, turns the buffer grey, signals back.
        let (raw, to_caller1, syncs) = (&raw, &to_caller1, &syncs);
        let caller2 = scope.spawn(move || -> Res<nvsci::sync::Fence> {
            let mut ctx = syncs.cpu_wait_context()?;
            fence.wait(&mut ctx, Some(Duration::from_secs(10)))?;
            grayscale(&mut raw.cpu_write()?);
            let done = to_caller1.generate_fence()?;
            to_caller1.signal()?;
            Ok(done)
        });
        let done = caller2.join().map_err(|_| "caller 2 panicked")??;
        let mut ctx = syncs.cpu_wait_context()?;
        done.wait(&mut ctx, Some(Duration::from_secs(10)))?;

        // The CPU reference from the picture itself.
        let mut want = vec![0u8; source.len()];
        rotate(&source, width, height, &mut want);
        grayscale(&mut want);
        let got = raw.cpu_read()?;
        if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
            return Err(format!("raw buffer byte {i}: {} instead of {}", got[i], want[i]).into());
        }
        Ok(want.len() / 4)
    })
}

/// Largest difference, in 8-bit levels per channel, between the GPU's output and the CPU
/// reference: the texture unit computes the bilinear weights in 9-bit fixed point with 8
/// fractional bits (CUDA C++ Programming Guide, "Texture Fetching", "Linear Filtering"), the
/// reference in `f32`, which moves a filtered channel by up to about 2 levels, and the
/// truncations to 8 bits after the rotation and after the grey weighting by up to one more each.
/// Everything else (coordinates, the grey weighting) is computed the same way on both sides.
pub const TOLERANCE: u8 = 6;

/// The first byte of the raw buffer outside the tolerance (or an alpha byte that differs).
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
struct Mismatch {
    byte: usize,
    got: u8,
    want: u8,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Mismatch { byte, got, want } = self;
        write!(f, "raw buffer byte {byte} (pixel {}): {got} instead of {want}", byte / 4)
    }
}

impl std::error::Error for Mismatch {}

/// Compares the GPU's output with the reference: every alpha byte exactly, every colour byte
/// within [`TOLERANCE`]. Returns the largest difference and the share of bytes equal.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn compare(got: &[u8], want: &[u8]) -> Result<(u8, f64), Mismatch> {
    let (mut worst, mut equal) = (0u8, 0usize);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let d = g.abs_diff(*w);
        if (i % 4 == 3 && d != 0) || d > TOLERANCE {
            return Err(Mismatch { byte: i, got: *g, want: *w });
        }
        worst = worst.max(d);
        equal += usize::from(d == 0);
    }
    Ok((worst, equal as f64 / want.len().max(1) as f64))
}

#[cfg(feature = "cuda")]
mod gpu {
    //! The sample's CUDA path: the NvSci objects imported into CUDA, the kernels on two streams,
    //! the callers ordered by NvSciSync fences signalled and waited on those streams.
    use super::*;
    use nvsci::cuda::cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
    use nvsci::cuda::{fill_sync_attrs, ArrayRegion, CudaGpu, CudaSyncObj, ExternalMemory, MappedArray};
    use nvsci::cuda::{
        ArrayTexture, MappedBuffer, MemSync, ReadWrite, TextureAddress, TextureFilter, TextureOptions,
        TextureRead,
    };
    use std::sync::Arc;

    /// `rotate(u64 tex, u32* out, u32 width, u32 height, f32 cos, f32 sin)`: the sample's
    /// `transformKernel`. Pixel (x, y) of `out` (`width` x `height`, row-major RGBA8) samples
    /// the texture at normalised coordinates `(tu + 0.5, tv + 0.5)`, with `u = x - width / 2`,
    /// `v = y - height / 2`, `tu = (u cos - v sin) / width`, `tv = (v cos + u sin) / height`, and
    /// stores each channel as `(unsigned)(saturate(c) * 255)`. The angle's cosine and sine come
    /// from the host. Every operation rounds to nearest and none is fused (explicit `.rn`), as
    /// the CPU reference computes. 2D grid, one thread per pixel.
    pub const ROTATE_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry rotate(
    .param .u64 p_tex,
    .param .u64 p_out,
    .param .u32 p_width,
    .param .u32 p_height,
    .param .f32 p_cos,
    .param .f32 p_sin
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<24>;
    .reg .f32 %f<40>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [p_tex];
    ld.param.u64 %rd2, [p_out];
    ld.param.u32 %r1, [p_width];
    ld.param.u32 %r2, [p_height];
    ld.param.f32 %f1, [p_cos];
    ld.param.f32 %f2, [p_sin];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r6, %r3, %r4, %r5;
    mov.u32 %r3, %ctaid.y;
    mov.u32 %r4, %ntid.y;
    mov.u32 %r5, %tid.y;
    mad.lo.s32 %r7, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r6, %r1;
    setp.ge.u32 %p2, %r7, %r2;
    or.pred %p3, %p1, %p2;
    @%p3 bra DONE;
    cvt.rn.f32.u32 %f3, %r1;
    cvt.rn.f32.u32 %f4, %r2;
    cvt.rn.f32.u32 %f5, %r6;
    cvt.rn.f32.u32 %f6, %r7;
    div.rn.f32 %f7, %f3, 0f40000000;
    div.rn.f32 %f8, %f4, 0f40000000;
    sub.rn.f32 %f9, %f5, %f7;
    sub.rn.f32 %f10, %f6, %f8;
    mul.rn.f32 %f11, %f9, %f1;
    mul.rn.f32 %f12, %f10, %f2;
    sub.rn.f32 %f13, %f11, %f12;
    mul.rn.f32 %f14, %f10, %f1;
    mul.rn.f32 %f15, %f9, %f2;
    add.rn.f32 %f16, %f14, %f15;
    div.rn.f32 %f17, %f13, %f3;
    div.rn.f32 %f18, %f16, %f4;
    add.rn.f32 %f19, %f17, 0f3F000000;
    add.rn.f32 %f20, %f18, 0f3F000000;
    tex.2d.v4.f32.f32 {%f21, %f22, %f23, %f24}, [%rd1, {%f19, %f20}];
    cvt.sat.f32.f32 %f25, %f21;
    cvt.sat.f32.f32 %f26, %f22;
    cvt.sat.f32.f32 %f27, %f23;
    cvt.sat.f32.f32 %f28, %f24;
    mul.rn.f32 %f29, %f25, 0f437F0000;
    mul.rn.f32 %f30, %f26, 0f437F0000;
    mul.rn.f32 %f31, %f27, 0f437F0000;
    mul.rn.f32 %f32, %f28, 0f437F0000;
    cvt.rzi.u32.f32 %r8, %f29;
    cvt.rzi.u32.f32 %r9, %f30;
    cvt.rzi.u32.f32 %r10, %f31;
    cvt.rzi.u32.f32 %r11, %f32;
    shl.b32 %r9, %r9, 8;
    shl.b32 %r10, %r10, 16;
    shl.b32 %r11, %r11, 24;
    or.b32 %r8, %r8, %r9;
    or.b32 %r8, %r8, %r10;
    or.b32 %r8, %r8, %r11;
    mad.lo.s32 %r12, %r7, %r1, %r6;
    mul.wide.u32 %rd3, %r12, 4;
    cvta.to.global.u64 %rd4, %rd2;
    add.s64 %rd5, %rd4, %rd3;
    st.global.u32 [%rd5], %r8;
DONE:
    ret;
}
"#;

    /// `grayscale(u8x4* pixels, u64 n)`: the sample's `rgbToGrayscaleKernel`, in place on `n`
    /// RGBA8 pixels: `g = (u8)(r * 0.3 + g * 0.59 + b * 0.11)` in double precision, left to
    /// right, no fused operation; the pixel becomes `(g, g, g, 0)`. 1D grid, one thread per
    /// pixel.
    pub const GRAYSCALE_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry grayscale(
    .param .u64 p_ptr,
    .param .u64 p_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<16>;
    .reg .f64 %fd<8>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [p_ptr];
    ld.param.u64 %rd2, [p_n];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd3, %r1, %r2;
    cvt.u64.u32 %rd4, %r3;
    add.s64 %rd3, %rd3, %rd4;
    setp.ge.u64 %p1, %rd3, %rd2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd5, %rd1;
    shl.b64 %rd6, %rd3, 2;
    add.s64 %rd7, %rd5, %rd6;
    ld.global.u32 %r4, [%rd7];
    and.b32 %r5, %r4, 255;
    shr.u32 %r6, %r4, 8;
    and.b32 %r6, %r6, 255;
    shr.u32 %r7, %r4, 16;
    and.b32 %r7, %r7, 255;
    cvt.rn.f64.u32 %fd1, %r5;
    cvt.rn.f64.u32 %fd2, %r6;
    cvt.rn.f64.u32 %fd3, %r7;
    mul.rn.f64 %fd1, %fd1, 0d3FD3333333333333;
    mul.rn.f64 %fd2, %fd2, 0d3FE2E147AE147AE1;
    mul.rn.f64 %fd3, %fd3, 0d3FBC28F5C28F5C29;
    add.rn.f64 %fd4, %fd1, %fd2;
    add.rn.f64 %fd4, %fd4, %fd3;
    cvt.rzi.u32.f64 %r8, %fd4;
    and.b32 %r8, %r8, 255;
    shl.b32 %r9, %r8, 8;
    shl.b32 %r10, %r8, 16;
    or.b32 %r8, %r8, %r9;
    or.b32 %r8, %r8, %r10;
    st.global.u32 [%rd7], %r8;
DONE:
    ret;
}
"#;

    fn load(gpu: &CudaGpu, ptx: &str, name: &str) -> Res<CudaFunction> {
        let m = gpu.context().load_module(nvsci::cuda::cudarc::nvrtc::Ptx::from_src(ptx))?;
        Ok(m.load_function(name)?)
    }

    /// The sample's texture (`createTexture`): normalised coordinates, linear filtering, wrap
    /// addressing, 8-bit channels read as normalised floats.
    fn sample_texture(array: MappedArray<ReadWrite>) -> nvsci::Result<ArrayTexture<ReadWrite>> {
        let options = TextureOptions::default()
            .with_filter(TextureFilter::Linear)
            .with_address(TextureAddress::Wrap)
            .with_normalized_coords(true)
            .with_read(TextureRead::NormalizedFloat);
        ArrayTexture::new(array, options)
    }

    /// A sync object signalled by CUDA, waited on by CUDA (`cpu_waits` false) or the CPU.
    fn cuda_signalled(gpu: &CudaGpu, m: &SyncModule, cpu_waits: bool) -> Res<SyncObj> {
        let mut s = m.attr_list()?;
        fill_sync_attrs(gpu, &mut s, true, false)?;
        let mut w = m.attr_list()?;
        if cpu_waits {
            w.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::WaitOnly)])?;
        } else {
            fill_sync_attrs(gpu, &mut w, false, true)?;
        }
        Ok(SyncObj::alloc(&SyncAttrList::reconcile(&[&s, &w])?)?)
    }

    /// What a caller keeps alive until the work it queued has completed.
    type Held = (Arc<CudaStream>, Vec<Box<dyn std::any::Any + Send>>);

    /// Caller 1 (`runRotateImageAndSignal`): imports the raw buffer and the image, copies the
    /// picture into the image's array, rotates it through the texture into the raw buffer and
    /// signals `done` on its stream. Returns the fence and what the queued work uses.
    fn caller1(
        gpu: &CudaGpu,
        (raw, image): (&BufObj, &BufObj),
        done: &SyncObj,
        picture: &[u8],
        (width, height): (u32, u32),
    ) -> Res<(nvsci::sync::Fence, Held)> {
        let stream = gpu.context().new_stream()?;
        let raw_mem = ExternalMemory::<ReadWrite>::from_buf_obj(gpu, raw)?;
        let out = raw_mem.map_buffer(0, u64::from(width) * u64::from(height) * 4)?;
        let image_mem = ExternalMemory::<ReadWrite>::from_buf_obj(gpu, image)?;
        // The sample maps the image from offset 0 as a `width` x `height` array of 8-bit RGBA,
        // one level, no flags: the first plane's description.
        let array = image_mem.map_plane(&image.planes()?[0], 0)?;
        // `cudaMemcpy2DToArrayAsync` on the caller's stream (it returns once the copy is done:
        // the picture is not pinned memory).
        array.copy_from_host_async(
            &stream,
            0,
            ArrayRegion::new(0, 0, width as usize, height as usize),
            picture,
        )?;
        let tex = sample_texture(array)?;
        let rotate = load(gpu, ROTATE_PTX, "rotate")?;
        let (s, c) = ANGLE.sin_cos();
        let (t, o) = (tex.handle(), out.device_address());
        let mut b = stream.launch_builder(&rotate);
        b.arg(&t).arg(&o).arg(&width).arg(&height).arg(&c).arg(&s);
        let cfg = LaunchConfig {
            grid_dim: (width.div_ceil(8), height.div_ceil(8), 1),
            block_dim: (8, 8, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments match the kernel's parameters; the texture covers the array it
        // samples and `out` holds width * height pixels; both are returned to the caller, which
        // keeps them until the work completed.
        unsafe { b.launch(cfg) }?;
        let signal = CudaSyncObj::import(gpu, done)?;
        let fence = signal.signal(&stream, MemSync::Auto)?;
        let held: Vec<Box<dyn std::any::Any + Send>> =
            vec![Box::new(tex), Box::new(out), Box::new(raw_mem), Box::new(image_mem), Box::new(signal)];
        Ok((fence, (stream, held)))
    }

    /// Caller 2 (`runImageGrayscale`): imports the raw buffer, waits for `fence` on its stream,
    /// turns the buffer grey and signals `done` there.
    fn caller2(
        gpu: &CudaGpu,
        raw: &BufObj,
        (ready, fence): (&SyncObj, &nvsci::sync::Fence),
        done: &SyncObj,
        pixels: u64,
    ) -> Res<(nvsci::sync::Fence, Held)> {
        let stream = gpu.context().new_stream()?;
        let raw_mem = ExternalMemory::<ReadWrite>::from_buf_obj(gpu, raw)?;
        let buf: MappedBuffer<ReadWrite> = raw_mem.map_buffer(0, pixels * 4)?;
        // The imports and the kernel's loading before the wait: with lazy loading (CUDA 12's
        // default) a kernel is loaded at its first launch, which may synchronise the context
        // (CUDA C++ Programming Guide, "Lazy Loading", "Concurrent Execution"), so it is loaded
        // here by a launch over no pixels rather than behind the wait.
        let wait = CudaSyncObj::import(gpu, ready)?;
        let signal = CudaSyncObj::import(gpu, done)?;
        let grayscale = load(gpu, GRAYSCALE_PTX, "grayscale")?;
        let p = buf.device_address();
        let launch = |n: u64| -> Res<()> {
            let mut b = stream.launch_builder(&grayscale);
            b.arg(&p).arg(&n);
            let blocks = u32::try_from(n.div_ceil(256).max(1))?;
            let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: the arguments match the kernel's parameters and `buf` holds `pixels >= n`
            // pixels; it is returned to the caller, which keeps it until the work completed.
            unsafe { b.launch(cfg) }?;
            Ok(())
        };
        launch(0)?;
        stream.synchronize()?;

        wait.wait(&stream, fence, MemSync::Auto)?;
        launch(pixels)?;
        let done = signal.signal(&stream, MemSync::Auto)?;
        let held: Vec<Box<dyn std::any::Any + Send>> =
            vec![Box::new(buf), Box::new(raw_mem), Box::new(wait), Box::new(signal)];
        Ok((done, (stream, held)))
    }

    /// What the GPU run found.
    pub struct Outcome {
        /// Pixels checked.
        pub pixels: usize,
        /// Largest difference from the reference, in levels.
        pub worst: u8,
        /// Share of bytes equal to the reference.
        pub equal: f64,
    }

    /// Runs the sample's CUDA path on `gpu` with a `width` x `height` picture.
    pub fn run(gpu: &CudaGpu, width: u32, height: u32) -> Res<Outcome> {
        let lib = NvSci::mock();
        let bufs = BufModule::open(&lib)?;
        let syncs = SyncModule::open(&lib)?;
        let id = Some(gpu.gpu_id());
        let size = u64::from(width) * u64::from(height) * 4;
        // Both callers give the sample's raw-buffer list; the CPU party reads the result.
        let raw_lists = [
            sample_raw_list(&bufs, size, id)?,
            sample_raw_list(&bufs, size, id)?,
            cpu_list(&bufs, BufType::RAW_BUFFER)?,
        ];
        let raw = BufObj::alloc(&BufAttrList::reconcile(&raw_lists.iter().collect::<Vec<_>>())?)?;
        // The image is caller 1's alone, as in the sample.
        let image =
            BufObj::alloc(&BufAttrList::reconcile(&[&sample_image_list(&bufs, width, height, id)?])?)?;
        describe(&image)?;
        let to_caller2 = cuda_signalled(gpu, &syncs, false)?;
        let to_cpu = cuda_signalled(gpu, &syncs, true)?;
        let picture = picture(width, height);

        let (done, held) = std::thread::scope(|scope| -> Res<(nvsci::sync::Fence, Vec<Held>)> {
            let (tx, rx) = std::sync::mpsc::channel();
            let (raw, image, to_caller2, to_cpu, picture) = (&raw, &image, &to_caller2, &to_cpu, &picture);
            let c1 = scope.spawn(move || -> Res<Held> {
                let (fence, held) = caller1(gpu, (raw, image), to_caller2, picture, (width, height))?;
                tx.send(fence).map_err(|_| "caller 2 is gone")?;
                Ok(held)
            });
            let c2 = scope.spawn(move || -> Res<(nvsci::sync::Fence, Held)> {
                let fence = rx.recv().map_err(|_| "caller 1 failed before signalling")?;
                caller2(gpu, raw, (to_caller2, &fence), to_cpu, u64::from(width) * u64::from(height))
            });
            let h1 = c1.join().map_err(|_| "caller 1 panicked")?;
            let r2 = c2.join().map_err(|_| "caller 2 panicked")?;
            let h1 = h1?;
            let (done, h2) = r2?;
            Ok((done, vec![h1, h2]))
        })?;
        let mut ctx = syncs.cpu_wait_context()?;
        done.wait(&mut ctx, Some(Duration::from_secs(10)))?;

        let mut want = vec![0u8; picture.len()];
        rotate(&picture, width, height, &mut want);
        grayscale(&mut want);
        let (worst, equal) = compare(&raw.cpu_read()?[..want.len()], &want)?;
        // Everything queued has run (the fence above follows it); the streams are synchronised
        // anyway before the texture, mappings and imports go.
        for (stream, _) in &held {
            stream.synchronize()?;
        }
        drop(held);
        Ok(Outcome { pixels: want.len() / 4, worst, equal })
    }
}

/// Opens the first CUDA GPU, or says why there is none (an error with `NVSCI_REQUIRE_GPU=1`).
#[cfg(feature = "cuda")]
fn open_gpu() -> Res<Option<nvsci::cuda::CudaGpu>> {
    match nvsci::cuda::CudaGpu::open(0) {
        Ok(g) => Ok(Some(g)),
        Err(e) if std::env::var("NVSCI_REQUIRE_GPU").is_ok_and(|v| v == "1") => {
            Err(format!("NVSCI_REQUIRE_GPU=1 but no CUDA GPU: {e}").into())
        }
        Err(e) => {
            println!("no CUDA GPU ({e}): running the sample's CPU part only");
            Ok(None)
        }
    }
}

fn main() -> Res<()> {
    let mut size = 1024u32;
    let mut cpu = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--size" => size = args.next().ok_or("--size needs a number")?.parse()?,
            "--cpu" => cpu = true,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    #[cfg(feature = "cuda")]
    if !cpu {
        if let Some(dev) = open_gpu()? {
            println!("GPU: {}", dev.name()?);
            let o = gpu::run(&dev, size, size)?;
            println!(
                "cudaNvSci CUDA path: {} pixels rotated through the image's texture and greyed on two streams \
                 ordered by NvSciSync fences match the CPU reference (largest difference {} levels, \
                 within {TOLERANCE}; {:.2}% of bytes equal)",
                o.pixels,
                o.worst,
                o.equal * 100.0
            );
            return Ok(());
        }
    }
    #[cfg(not(feature = "cuda"))]
    if !cpu {
        println!("built without the `cuda` feature: running the sample's CPU part only");
    }
    let n = run_cpu(size, size)?;
    println!(
        "cudaNvSci CPU part: {n} pixels rotated and greyed through the NvSci objects match the reference"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cpu_part_runs_on_the_mock() {
        assert_eq!(super::run_cpu(64, 48).unwrap(), 64 * 48);
    }

    #[test]
    fn the_comparison_allows_the_filter_tolerance_only() {
        let want = [10, 10, 10, 0];
        assert_eq!(super::compare(&[16, 4, 10, 0], &want).unwrap().0, 6);
        let mismatch = |byte, got, want| Err(super::Mismatch { byte, got, want });
        assert_eq!(super::compare(&[17, 10, 10, 0], &want), mismatch(0, 17, 10));
        assert_eq!(super::compare(&[10, 10, 10, 1], &want), mismatch(3, 1, 0), "alpha differs");
    }

    #[cfg(feature = "cuda")]
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn the_cuda_path_matches_the_reference() {
        let Some(dev) = super::open_gpu().unwrap() else { return };
        for (w, h) in [(64, 48), (200, 136)] {
            let o = super::gpu::run(&dev, w, h).unwrap();
            assert_eq!(o.pixels, (w * h) as usize);
        }
    }
}
