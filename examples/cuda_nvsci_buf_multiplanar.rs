//! NVIDIA's cudaNvSciBufMultiplanar sample (cuda-samples,
//! `Samples/8_Platform_Specific/Tegra/cudaNvSciBufMultiplanar`) on this crate, its CPU part: the
//! sample's attribute list (a block-linear planar YUV 4:2:0 image, planes Y8, V8, U8, chroma at
//! half width and height, progressive, no VPR) given by both of its callers, reconciled with a
//! CPU party's list and allocated once.
//!
//! Caller 1 writes a frame into the three planes (`put_pixels`, through the block-linear
//! layout) and signals; caller 2, on another thread, waits, flips every bit of every plane (the
//! sample's `flipSurfaceBits` kernel: `data = ~data`) reading and writing the planes with
//! `get_pixels` / `put_pixels`, and signals back; the main thread waits, reads the planes and
//! checks them against the frame flipped on the CPU (the sample's `flipBits` reference).
//!
//! The sample's CUDA part (each plane as a CUDA mipmapped array, the kernel on a surface) is not
//! in this port: the mock's images cannot be mapped as CUDA arrays yet. Runs on the mock; on a
//! Jetson the same list reconciles with NVIDIA's library.
//!
//! `cargo run --example cuda_nvsci_buf_multiplanar -- [--size WxH]` (default 720x480, the
//! sample's frame).

use nvsci::buf::{
    BufAttr, BufAttrList, BufModule, BufObj, BufType, ColorFormat, ImageLayout, Perm, PlaneDst, PlaneSrc,
    ScanType,
};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::NvSci;
use std::time::Duration;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The sample's list (`setAttrListImageMultiPlanes`), less the GPU id it adds for its device.
fn sample_list(m: &BufModule, width: u32, height: u32) -> Res<BufAttrList> {
    let mut l = m.attr_list()?;
    l.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::NeedCpuAccess(false),
        BufAttr::RequiredPerm(Perm::ReadWrite),
        BufAttr::Layout(ImageLayout::BlockLinear),
        BufAttr::VprFlag(false),
        BufAttr::PlaneCount(3),
        BufAttr::PlaneColorFormat(&[ColorFormat::Y8, ColorFormat::V8, ColorFormat::U8]),
        BufAttr::PlaneWidth(&[width, width / 2, width / 2]),
        BufAttr::PlaneHeight(&[height, height / 2, height / 2]),
        BufAttr::ScanType(ScanType::Progressive),
    ])?;
    Ok(l)
}

fn cpu_sync(m: &SyncModule) -> Res<SyncObj> {
    let mut s = m.attr_list()?;
    s.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::SignalOnly)])?;
    let mut w = m.attr_list()?;
    w.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(SyncPerm::WaitOnly)])?;
    Ok(SyncObj::alloc(&SyncAttrList::reconcile(&[&s, &w])?)?)
}

/// A frame, one tightly packed buffer per plane (standing in for the sample's YUV file).
fn frame(obj: &BufObj) -> Res<Vec<(Vec<u8>, u32)>> {
    Ok(obj
        .planes()?
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut v = Vec::with_capacity(p.width as usize * p.height as usize);
            for y in 0..p.height {
                for x in 0..p.width {
                    v.push((x.wrapping_mul(3) ^ y.wrapping_mul(5) ^ (i as u32 * 77)) as u8);
                }
            }
            (v, p.width)
        })
        .collect())
}

fn put(obj: &BufObj, f: &[(Vec<u8>, u32)]) -> nvsci::Result<()> {
    let src: Vec<PlaneSrc<'_>> = f.iter().map(|(d, pitch)| PlaneSrc { data: d, pitch: *pitch }).collect();
    obj.put_pixels(None, &src)
}

fn get(obj: &BufObj, f: &mut [(Vec<u8>, u32)]) -> nvsci::Result<()> {
    let mut dst: Vec<PlaneDst<'_>> =
        f.iter_mut().map(|(d, pitch)| PlaneDst { data: d, pitch: *pitch }).collect();
    obj.get_pixels(None, &mut dst)
}

/// The sample's `flipBits`.
fn flip_bits(f: &mut [(Vec<u8>, u32)]) {
    for (plane, _) in f {
        for b in plane.iter_mut() {
            *b = !*b;
        }
    }
}

/// Runs both callers on a `width` x `height` frame; returns the bytes checked.
pub fn run(width: u32, height: u32) -> Res<usize> {
    let lib = NvSci::mock();
    let bufs = BufModule::open(&lib)?;
    let syncs = SyncModule::open(&lib)?;
    let mut cpu = bufs.attr_list()?;
    cpu.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::NeedCpuAccess(true),
        BufAttr::RequiredPerm(Perm::ReadWrite),
    ])?;
    let (caller1, caller2) = (sample_list(&bufs, width, height)?, sample_list(&bufs, width, height)?);
    let image = BufObj::alloc(&BufAttrList::reconcile(&[&caller1, &caller2, &cpu])?)?;
    for (i, p) in image.planes()?.iter().enumerate() {
        println!(
            "plane {i}: {:?} {}x{}, pitch {}, {} rows, offset {}",
            p.format, p.width, p.height, p.pitch, p.aligned_height, p.offset
        );
    }
    let to_caller2 = cpu_sync(&syncs)?;
    let to_caller1 = cpu_sync(&syncs)?;
    let source = frame(&image)?;

    std::thread::scope(|scope| -> Res<usize> {
        put(&image, &source)?;
        let fence = to_caller2.generate_fence()?;
        to_caller2.signal()?;
        let (image, to_caller1, syncs) = (&image, &to_caller1, &syncs);
        let caller2 = scope.spawn(move || -> Res<nvsci::sync::Fence> {
            let mut ctx = syncs.cpu_wait_context()?;
            fence.wait(&mut ctx, Some(Duration::from_secs(10)))?;
            let mut planes = frame(image)?;
            get(image, &mut planes)?;
            flip_bits(&mut planes);
            put(image, &planes)?;
            let done = to_caller1.generate_fence()?;
            to_caller1.signal()?;
            Ok(done)
        });
        let done = caller2.join().map_err(|_| "caller 2 panicked")??;
        let mut ctx = syncs.cpu_wait_context()?;
        done.wait(&mut ctx, Some(Duration::from_secs(10)))?;

        let mut want = source.clone();
        flip_bits(&mut want);
        let mut got = frame(image)?;
        get(image, &mut got)?;
        for (i, ((g, _), (w, _))) in got.iter().zip(&want).enumerate() {
            if let Some(at) = g.iter().zip(w).position(|(a, b)| a != b) {
                return Err(format!("plane {i} byte {at}: {} instead of {}", g[at], w[at]).into());
            }
        }
        Ok(want.iter().map(|(p, _)| p.len()).sum())
    })
}

fn main() -> Res<()> {
    let (mut width, mut height) = (720u32, 480u32);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--size" => {
                let v = args.next().ok_or("--size needs WxH")?;
                let (w, h) = v.split_once('x').ok_or("--size needs WxH")?;
                (width, height) = (w.parse()?, h.parse()?);
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let n = run(width, height)?;
    println!("cudaNvSciBufMultiplanar CPU part: {n} bytes of three block-linear planes flipped and checked");
    println!("(the sample's CUDA part, each plane as a CUDA array, does not run on the mock yet)");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cpu_part_runs_on_the_mock() {
        assert_eq!(super::run(64, 36).unwrap(), 64 * 36 + 2 * 32 * 18);
    }
}
