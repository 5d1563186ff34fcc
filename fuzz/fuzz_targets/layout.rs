//! Frame-format and plane-layout arithmetic: packed layouts from arbitrary formats and
//! alignments, and the NV12 conversion over arbitrary layouts, buffer sizes and bytes.
#![no_main]

mod common;

use common::Input;
use libfuzzer_sys::fuzz_target;
use nvsci::convert::nv12_to_rgba;
use nvsci::pipeline::{FrameFormat, FrameLayout};

fuzz_target!(|data: &[u8]| {
    common::abort_on_panic();
    let mut i = Input(data);
    let (w, h) = (i.u32(), i.u32());
    let format = match i.u8() % 3 {
        0 => FrameFormat::Raw { size: i.u64() },
        1 => FrameFormat::nv12(w, h),
        _ => FrameFormat::Rgba { width: w, height: h },
    };
    let _ = format.validate();
    let pitch_align = i.u32();
    let plane_align = i.u64();
    let Ok(mut layout) = FrameLayout::packed(format, pitch_align, plane_align) else { return };
    check_packed(&layout, format, pitch_align, plane_align);
    // Tamper with the layout the way a corrupted or foreign description could.
    if i.u8() % 2 == 0 {
        if let Some(p) = layout.planes.get_mut((i.u8() % 2) as usize) {
            p.offset = i.u64() % (1 << 24);
            p.pitch = i.u32() % (1 << 16);
        }
    }
    if layout.size > 8 << 20 {
        return;
    }
    let src_len = (layout.size as usize).saturating_sub((i.u8() % 3) as usize);
    // The frame's bytes: the rest of the input, repeated (zeros when none is left).
    let mut src = vec![0u8; src_len];
    for (d, s) in src.iter_mut().zip(i.bytes(src_len).iter().cycle()) {
        *d = *s;
    }
    if let Some((fw, fh)) = format.dimensions() {
        let px = (fw as usize).saturating_mul(fh as usize);
        if px <= 4 << 20 {
            let mut dst = vec![0u8; px * 4];
            if nv12_to_rgba(&layout, &src, &mut dst).is_ok() {
                // Accepted: both planes' rows lie inside the source and cover a row.
                for (p, rows) in [(&layout.planes[0], fh as u64), (&layout.planes[1], fh as u64 / 2)] {
                    assert!(p.pitch >= fw, "accepted a pitch {} below the row of {fw} bytes", p.pitch);
                    let end = p.offset + p.pitch as u64 * (rows - 1) + fw as u64;
                    assert!(end <= src.len() as u64, "accepted a plane ending at {end} of {}", src.len());
                }
            }
        }
    }
});

/// What `FrameLayout::packed` promises of a layout it accepts: every plane starts on the plane
/// alignment, its pitch is a multiple of the pitch alignment and holds a row, its size holds its
/// rows, planes follow each other without overlapping, and the frame holds them all.
fn check_packed(layout: &FrameLayout, format: FrameFormat, pitch_align: u32, plane_align: u64) {
    assert_eq!(layout.format, format);
    if let FrameFormat::Raw { size } = format {
        assert!(layout.planes.is_empty() && layout.size == size, "{layout:?}");
        return;
    }
    assert!(!layout.planes.is_empty(), "{layout:?}");
    let mut end = 0u64;
    for (i, p) in layout.planes.iter().enumerate() {
        assert_eq!(p.offset % plane_align, 0, "plane {i} offset off its alignment: {layout:?}");
        assert_eq!(p.pitch % pitch_align, 0, "plane {i} pitch off its alignment: {layout:?}");
        assert!(
            u64::from(p.pitch) * 8 >= u64::from(p.width) * u64::from(p.bits_per_pixel),
            "plane {i} pitch does not hold a row: {layout:?}"
        );
        assert!(p.aligned_size >= u64::from(p.pitch) * u64::from(p.height), "plane {i} size: {layout:?}");
        assert!(p.offset >= end, "plane {i} overlaps the plane before: {layout:?}");
        end = p.offset + p.aligned_size;
    }
    assert!(end <= layout.size, "planes end at {end}, past the frame of {}: {layout:?}", layout.size);
}
