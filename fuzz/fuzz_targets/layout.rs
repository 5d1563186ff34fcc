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
            let _ = nv12_to_rgba(&layout, &src, &mut dst);
        }
    }
});
