//! The mock's CPU block-linear layout copy (`NvSciBufObjPutPixels` / `GetPixels` on a
//! block-linear image), against a plain copy of the same bytes in the same run.
//!
//! ```text
//! cargo run --release --example mock_layout_bench [-- --iters N]
//! ```
//!
//! Images: one-plane A8B8G8R8 (the layout copy alone) and NV12 (Y, U and V user planes: the
//! layout copy plus the chroma interleave), at 1920x1080 and 3840x2160, block-linear and
//! pitch-linear. Each figure is the median of `--iters` calls (default 50), in GB/s of image
//! bytes; the floor is `copy_from_slice` of the same number of bytes between two buffers.

use nvsci::buf::{
    BufAttr, BufAttrList, BufModule, BufObj, BufType, ColorFormat, ImageLayout, Perm, PlaneDst, PlaneSrc,
    ScanType,
};
use std::time::Instant;

fn image(m: &BufModule, layout: ImageLayout, fmts: &[ColorFormat], w: u32, h: u32) -> nvsci::Result<BufObj> {
    let n = fmts.len();
    let widths: Vec<u32> = (0..n).map(|i| if i == 0 { w } else { w / 2 }).collect();
    let heights: Vec<u32> = (0..n).map(|i| if i == 0 { h } else { h / 2 }).collect();
    let mut l = m.attr_list()?;
    l.set(&[
        BufAttr::Types(&[BufType::IMAGE]),
        BufAttr::Layout(layout),
        BufAttr::ScanType(ScanType::Progressive),
        BufAttr::PlaneCount(n as u32),
        BufAttr::PlaneColorFormat(fmts),
        BufAttr::PlaneWidth(&widths),
        BufAttr::PlaneHeight(&heights),
        BufAttr::NeedCpuAccess(true),
        BufAttr::RequiredPerm(Perm::ReadWrite),
    ])?;
    BufObj::alloc(&BufAttrList::reconcile(&[&l])?)
}

fn median_secs(iters: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm-up: page faults, caches
    let mut t: Vec<f64> = (0..iters)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[iters / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let iters = match args.iter().position(|a| a == "--iters") {
        Some(i) => args.get(i + 1).ok_or("--iters N")?.parse()?,
        None => 50,
    };
    let m = BufModule::open(&nvsci::NvSci::mock())?;
    println!("| image | layout | put GB/s | get GB/s | memcpy GB/s | put / memcpy | get / memcpy |");
    println!("|---|---|---|---|---|---|---|");
    for (w, h) in [(1920u32, 1080u32), (3840, 2160)] {
        for (name, fmts) in
            [("RGBA8", &[ColorFormat::A8B8G8R8][..]), ("NV12", &[ColorFormat::Y8, ColorFormat::V8U8][..])]
        {
            // User planes: one for RGBA, Y, U and V for NV12 (nvscibuf.h).
            let sizes: Vec<(usize, u32)> = if fmts.len() == 1 {
                vec![(w as usize * 4 * h as usize, w * 4)]
            } else {
                let c = (w / 2) as usize * (h / 2) as usize;
                vec![(w as usize * h as usize, w), (c, w / 2), (c, w / 2)]
            };
            let bytes: usize = sizes.iter().map(|s| s.0).sum();
            let src: Vec<Vec<u8>> =
                sizes.iter().map(|&(n, _)| (0..n).map(|i| (i * 31 % 251) as u8).collect()).collect();
            let mut dst: Vec<Vec<u8>> = sizes.iter().map(|&(n, _)| vec![0u8; n]).collect();
            let (a, mut b) = (vec![1u8; bytes], vec![0u8; bytes]);
            let floor = median_secs(iters, || {
                b.copy_from_slice(&a);
                std::hint::black_box(&b);
            });
            for layout in [ImageLayout::BlockLinear, ImageLayout::PitchLinear] {
                let obj = image(&m, layout, fmts, w, h)?;
                let planes: Vec<PlaneSrc<'_>> =
                    src.iter().zip(&sizes).map(|(d, &(_, pitch))| PlaneSrc { data: d, pitch }).collect();
                let put = median_secs(iters, || obj.put_pixels(None, &planes).expect("put"));
                let get = median_secs(iters, || {
                    let mut out: Vec<PlaneDst<'_>> = dst
                        .iter_mut()
                        .zip(&sizes)
                        .map(|(d, &(_, pitch))| PlaneDst { data: d, pitch })
                        .collect();
                    obj.get_pixels(None, &mut out).expect("get")
                });
                assert!(dst == src, "{name} {w}x{h} {layout:?}: the pixels read back differ");
                let gbs = |s: f64| bytes as f64 / s / 1e9;
                println!(
                    "| {name} {w}x{h} | {layout:?} | {:.2} | {:.2} | {:.2} | {:.2}x | {:.2}x |",
                    gbs(put),
                    gbs(get),
                    gbs(floor),
                    floor / put,
                    floor / get
                );
                dst.iter_mut().for_each(|d| d.fill(0));
            }
        }
    }
    Ok(())
}
