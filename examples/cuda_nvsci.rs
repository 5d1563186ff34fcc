//! NVIDIA's cudaNvSci sample (cuda-samples, `Samples/4_CUDA_Libraries/cudaNvSci`) on this crate,
//! its CPU part: the sample's attribute lists (a raw buffer, and a block-linear B8G8R8A8 image
//! with 100 rows of top and bottom padding and interlaced scan), reconciled with a CPU party's
//! lists, allocated, and the sample's two callers ordered by NvSciSync fences.
//!
//! Caller 1 writes the picture into the image (`put_pixels`, through the block-linear layout),
//! reads it back as its texture (`get_pixels`), rotates it by 0.5 rad with the sample's texture
//! sampling (normalised coordinates, bilinear filter, wrap addressing) into the raw buffer and
//! signals; caller 2, on another thread, waits for that fence, turns the raw buffer grey with the
//! sample's weights (0.3, 0.59, 0.11, alpha 0) and signals back; the main thread waits and checks
//! the raw buffer against the same computation done on the picture directly.
//!
//! The sample's CUDA part (the image as a CUDA mipmapped array and texture, the kernels on
//! streams, the fences through CUDA) is not in this port: the mock's images cannot be mapped as
//! CUDA arrays yet. Runs on the mock (`NvSci::mock()`); on a Jetson the same lists reconcile
//! with NVIDIA's library (`NvSci::load()`).
//!
//! `cargo run --example cuda_nvsci -- [--size N]` (N x N pixels, default 1024 as the sample's
//! teapot picture).

use nvsci::buf::{
    BufAttr, BufAttrList, BufModule, BufObj, BufType, ColorFormat, ColorStd, ImageLayout, Perm, PixelRect,
    PlaneDst, PlaneSrc, ScanType,
};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::NvSci;
use std::time::Duration;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The sample's rotation angle in radians.
const ANGLE: f32 = 0.5;

/// The sample's raw-buffer list (`setRawBufAttrList`), less the GPU id it adds for its device.
fn sample_raw_list(m: &BufModule, size: u64) -> Res<BufAttrList> {
    let mut l = m.attr_list()?;
    l.set(&[
        BufAttr::RawSize(size),
        BufAttr::Types(&[BufType::RAW_BUFFER]),
        BufAttr::NeedCpuAccess(false),
        BufAttr::RequiredPerm(Perm::ReadWrite),
    ])?;
    Ok(l)
}

/// The sample's image list (`setImageBufAttrList`), less the GPU id.
fn sample_image_list(m: &BufModule, width: u32, height: u32) -> Res<BufAttrList> {
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

/// Runs both callers on an image of `width` x `height`; returns the number of pixels checked.
pub fn run(width: u32, height: u32) -> Res<usize> {
    let lib = NvSci::mock();
    let bufs = BufModule::open(&lib)?;
    let syncs = SyncModule::open(&lib)?;
    let size = u64::from(width) * u64::from(height) * 4;

    // Caller 1 and caller 2 import the same raw buffer (both give the sample's list); the image
    // is caller 1's. The CPU party joins both.
    let raw_lists =
        [sample_raw_list(&bufs, size)?, sample_raw_list(&bufs, size)?, cpu_list(&bufs, BufType::RAW_BUFFER)?];
    let raw = BufObj::alloc(&BufAttrList::reconcile(&raw_lists.iter().collect::<Vec<_>>())?)?;
    let image_lists = [sample_image_list(&bufs, width, height)?, cpu_list(&bufs, BufType::IMAGE)?];
    let image = BufObj::alloc(&BufAttrList::reconcile(&image_lists.iter().collect::<Vec<_>>())?)?;
    let plane = image.planes()?[0];
    println!(
        "image: {}x{} block-linear, interlaced, pitch {} bytes, {} rows per field, {} bytes in all",
        plane.width,
        plane.height,
        plane.pitch,
        plane.aligned_height,
        image.size()
    );

    let to_caller2 = cpu_sync(&syncs)?;
    let to_caller1 = cpu_sync(&syncs)?;
    let source = picture(width, height);
    let whole = Some(PixelRect::new(0, 0, width, height));
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

fn main() -> Res<()> {
    let mut size = 1024u32;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--size" => size = args.next().ok_or("--size needs a number")?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let n = run(size, size)?;
    println!(
        "cudaNvSci CPU part: {n} pixels rotated and greyed through the NvSci objects match the reference"
    );
    println!("(the sample's CUDA part, arrays and textures of the image, does not run on the mock yet)");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cpu_part_runs_on_the_mock() {
        assert_eq!(super::run(64, 48).unwrap(), 64 * 48);
    }
}
