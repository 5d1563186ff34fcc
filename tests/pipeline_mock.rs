//! The frame ring on the mock: ordering, several consumers, timeouts, bad input, teardown.
#![cfg(feature = "mock")]

#[path = "../examples/support/nv12_pattern.rs"]
mod nv12_pattern;

use nvsci::pipeline::{FrameFormat, FrameRing, RingConfig};
use nvsci::{Error, NvSci};
use std::time::Duration;

fn ring(format: FrameFormat, frames: usize, consumers: usize, timeout_ms: u64) -> FrameRing {
    FrameRing::new(
        &NvSci::mock(),
        format,
        RingConfig { frames, consumers, timeout: Duration::from_millis(timeout_ms), ..Default::default() },
    )
    .unwrap()
}

#[test]
fn frames_arrive_in_order_with_their_contents() {
    let (mut p, mut cs) = ring(FrameFormat::Raw { size: 4096 }, 3, 1, 1000).split().unwrap();
    let c = &mut cs[0];
    for seq in 0..10u64 {
        let f = p.acquire().unwrap();
        assert_eq!(f.sequence(), seq);
        assert_eq!(f.index(), (seq % 3) as usize);
        p.buffer(&f).unwrap().cpu_write().unwrap().fill(seq as u8);
        p.present(f).unwrap();
        let g = c.acquire().unwrap();
        assert_eq!((g.sequence(), g.index()), (seq, (seq % 3) as usize));
        assert!(c.view(&g).unwrap().cpu_read().unwrap().iter().all(|&b| b == seq as u8));
        c.release(g).unwrap();
    }
}

#[test]
fn consumers_get_read_only_views_and_layout_comes_from_attributes() {
    let r = ring(FrameFormat::Nv12 { width: 1920, height: 1080 }, 2, 2, 1000);
    let l = r.layout().clone();
    // Mock alignment rules: pitch 2048 for both planes, chroma plane at 2048 * 1080.
    assert_eq!(l.size, 3_317_760);
    assert_eq!((l.planes[0].pitch, l.planes[1].pitch, l.planes[1].offset), (2048, 2048, 2_211_840));
    let (mut p, mut cs) = r.split().unwrap();
    let f = p.acquire().unwrap();
    p.present(f).unwrap();
    for c in cs.iter_mut() {
        let g = c.acquire().unwrap();
        assert_eq!(c.view(&g).unwrap().perm(), nvsci::buf::Perm::ReadOnly);
        assert!(matches!(c.view(&g).unwrap().cpu_write(), Err(Error::PermissionDenied(_))));
        c.release(g).unwrap();
    }
}

#[test]
fn producer_waits_for_every_consumer_and_times_out_on_a_stuck_one() {
    let (mut p, mut cs) = ring(FrameFormat::Raw { size: 256 }, 2, 2, 50).split().unwrap();
    for _ in 0..2 {
        let f = p.acquire().unwrap();
        p.present(f).unwrap();
    }
    // Consumer 0 takes and releases frame 0; consumer 1 takes it but never releases.
    let a = cs[0].acquire().unwrap();
    cs[0].release(a).unwrap();
    let _stuck = cs[1].acquire().unwrap();
    let t = std::time::Instant::now();
    match p.acquire() {
        Err(Error::RingTimeout { timeout_us, detail }) => {
            assert_eq!(timeout_us, 50_000);
            assert!(detail.contains("consumer(s) 1 have not released slot 0 (frame 0)"), "{detail}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(t.elapsed() >= Duration::from_millis(40));
}

#[test]
fn consumer_times_out_without_frames() {
    let (_p, mut cs) = ring(FrameFormat::Raw { size: 256 }, 2, 1, 20).split().unwrap();
    assert!(matches!(cs[0].acquire(), Err(Error::RingTimeout { .. })));
}

#[test]
fn bad_input_is_refused() {
    let lib = NvSci::mock();
    let cfg = RingConfig::default();
    let cases = [
        (FrameFormat::Raw { size: 0 }, cfg, "format.size"),
        (FrameFormat::Nv12 { width: 0, height: 480 }, cfg, "format"),
        (FrameFormat::Nv12 { width: 641, height: 480 }, cfg, "format"),
        (FrameFormat::Nv12 { width: 640, height: 481 }, cfg, "format"),
        (FrameFormat::Rgba { width: 64, height: 0 }, cfg, "format"),
        (FrameFormat::Raw { size: 64 }, RingConfig { frames: 0, ..cfg }, "config.frames"),
        (FrameFormat::Raw { size: 64 }, RingConfig { frames: 1, ..cfg }, "config.frames"),
        (FrameFormat::Raw { size: 64 }, RingConfig { frames: 17, ..cfg }, "config.frames"),
        (FrameFormat::Raw { size: 64 }, RingConfig { consumers: 0, ..cfg }, "config.consumers"),
        (FrameFormat::Raw { size: 64 }, RingConfig { consumers: 5, ..cfg }, "config.consumers"),
    ];
    for (format, config, field) in cases {
        match FrameRing::new(&lib, format, config) {
            Err(Error::InvalidArgument { name, .. }) => assert_eq!(name, field, "{format:?} {config:?}"),
            other => panic!("{format:?} {config:?}: expected InvalidArgument, got {other:?}"),
        }
    }
}

#[test]
fn acquiring_twice_without_presenting_is_refused() {
    let (mut p, _cs) = ring(FrameFormat::Raw { size: 64 }, 2, 1, 100).split().unwrap();
    let f = p.acquire().unwrap();
    assert!(matches!(p.acquire(), Err(Error::InvalidArgument { name: "producer", .. })));
    p.present(f).unwrap();
}

#[test]
fn threads_and_several_consumers_see_every_frame() {
    let (mut p, cs) = ring(FrameFormat::Raw { size: 1024 }, 3, 3, 2000).split().unwrap();
    const N: u64 = 200;
    let handles: Vec<_> = cs
        .into_iter()
        .map(|mut c| {
            std::thread::spawn(move || {
                for seq in 0..N {
                    let f = c.acquire().unwrap();
                    assert_eq!(f.sequence(), seq);
                    let v = c.view(&f).unwrap().cpu_read().unwrap();
                    assert!(v.iter().all(|&b| b == (seq % 251) as u8), "frame {seq} torn");
                    drop(v);
                    c.release(f).unwrap();
                }
            })
        })
        .collect();
    for seq in 0..N {
        let f = p.acquire().unwrap();
        p.buffer(&f).unwrap().cpu_write().unwrap().fill((seq % 251) as u8);
        p.present(f).unwrap();
    }
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn yuv_to_rgb_matches_known_values() {
    use nvsci::convert::yuv_to_rgb;
    // BT.601 studio range: black, white, mid grey and the primaries' usual 8-bit encodings.
    assert_eq!(yuv_to_rgb(16, 128, 128), [0, 0, 0]);
    assert_eq!(yuv_to_rgb(235, 128, 128), [255, 255, 255]);
    assert_eq!(yuv_to_rgb(126, 128, 128), [128, 128, 128]);
    assert_eq!(yuv_to_rgb(81, 90, 240), [255, 0, 0]);
    // Green's usual encoding rounds to B = 1: (298*129 + 516*(-74) + 128) >> 8 = 386 >> 8 = 1.
    assert_eq!(yuv_to_rgb(145, 54, 34), [0, 255, 1]);
    assert_eq!(yuv_to_rgb(41, 240, 110), [0, 0, 255]);
}

#[test]
fn nv12_conversion_through_the_ring_matches_the_pattern() {
    use nv12_pattern::{fill_test_pattern, test_pattern, test_pattern_statistic};
    use nvsci::convert::{nv12_to_rgba, yuv_to_rgb};
    let (w, h) = (96u32, 64u32);
    let (mut p, mut cs) = ring(FrameFormat::Nv12 { width: w, height: h }, 2, 1, 1000).split().unwrap();
    let layout = p.layout().clone();
    let mut rgba = vec![0u8; (w * h * 4) as usize];
    for t in 0..3u64 {
        let f = p.acquire().unwrap();
        fill_test_pattern(&layout, t, &mut p.buffer(&f).unwrap().cpu_write().unwrap()).unwrap();
        p.present(f).unwrap();
        let g = cs[0].acquire().unwrap();
        let sum = nv12_to_rgba(&layout, &cs[0].view(&g).unwrap().cpu_read().unwrap(), &mut rgba).unwrap();
        cs[0].release(g).unwrap();
        assert_eq!(sum, test_pattern_statistic(w, h, t));
        for (x, row) in [(0u32, 0u32), (w - 1, h - 1), (37, 20), (38, 21)] {
            let (y, u, v) = test_pattern(x, row, t);
            let [r, gg, b] = yuv_to_rgb(y, u, v);
            let i = ((row * w + x) * 4) as usize;
            assert_eq!(&rgba[i..i + 4], &[r, gg, b, 255], "pixel ({x},{row}) of frame {t}");
        }
    }
}

#[test]
fn packed_layout_matches_the_mock_reconciled_layout() {
    // The packed layout with the mock's documented alignments (256-byte pitch, 4096-byte
    // planes) must equal what reconciliation produces for the same NV12 frame.
    let fmt = FrameFormat::Nv12 { width: 1280, height: 720 };
    let packed = nvsci::pipeline::FrameLayout::packed(fmt, 256, 4096).unwrap();
    let r = ring(fmt, 2, 1, 100);
    assert_eq!(&packed, r.layout());
    // 1280 -> pitch 1280; 1280 * 720 = 921600 = 225 * 4096; chroma 1280 * 360 = 460800 -> 462848.
    assert_eq!((packed.planes[1].offset, packed.size), (921_600, 921_600 + 462_848));
    assert!(nvsci::pipeline::FrameLayout::packed(fmt, 100, 4096).is_err());
}

#[test]
fn frames_cannot_cross_rings_or_consumers() {
    let (mut p1, mut c1) = ring(FrameFormat::Raw { size: 64 }, 4, 2, 200).split().unwrap();
    let (mut p2, _c2) = ring(FrameFormat::Raw { size: 64 }, 2, 1, 200).split().unwrap();
    for _ in 0..4 {
        let f = p1.acquire().unwrap();
        p1.present(f).unwrap();
    }
    let _ = p2.acquire().unwrap();
    // A frame of ring 1 (slot 0) presented to ring 2 is refused, not a panic or a corruption.
    let mut p1b = p1;
    let g = c1[0].acquire().unwrap();
    c1[0].release(g).unwrap();
    let g = c1[1].acquire().unwrap();
    c1[1].release(g).unwrap();
    let f = p1b.acquire().unwrap();
    assert!(matches!(p2.buffer(&f), Err(Error::InvalidArgument { name: "frame", .. })));
    assert!(matches!(p2.present(f), Err(Error::InvalidArgument { name: "frame", .. })));
    // Consumer 1 cannot release (or read) consumer 0's frame.
    let g = c1[0].acquire().unwrap();
    assert!(matches!(c1[1].view(&g), Err(Error::InvalidArgument { name: "frame", .. })));
    assert!(matches!(c1[1].release(g), Err(Error::InvalidArgument { name: "frame", .. })));
}

#[test]
fn unbounded_timeouts_do_not_overflow() {
    let (mut p, mut cs) = FrameRing::new(
        &NvSci::mock(),
        FrameFormat::Raw { size: 64 },
        RingConfig { frames: 2, consumers: 1, timeout: Duration::MAX, ..Default::default() },
    )
    .unwrap()
    .split()
    .unwrap();
    let f = p.acquire().unwrap();
    p.present(f).unwrap();
    let g = cs[0].acquire().unwrap();
    cs[0].release(g).unwrap();
}

#[test]
fn conversion_refuses_inconsistent_layouts() {
    use nv12_pattern::fill_test_pattern;
    use nvsci::convert::nv12_to_rgba;
    use nvsci::pipeline::FrameLayout;
    let good = FrameLayout::packed(FrameFormat::Nv12 { width: 64, height: 32 }, 256, 4096).unwrap();
    let src = vec![0u8; good.size as usize];
    let mut rgba = vec![0u8; 64 * 32 * 4];
    assert!(nv12_to_rgba(&good, &src, &mut rgba).is_ok());
    // Short source, wrong destination, odd and degenerate sizes, a pitch smaller than a row.
    assert!(matches!(
        nv12_to_rgba(&good, &src[..100], &mut rgba),
        Err(Error::InvalidArgument { name: "src", .. })
    ));
    assert!(matches!(
        nv12_to_rgba(&good, &src, &mut rgba[1..]),
        Err(Error::InvalidArgument { name: "dst", .. })
    ));
    for fmt in [FrameFormat::Nv12 { width: 63, height: 32 }, FrameFormat::Nv12 { width: 64, height: 1 }] {
        let mut bad = good.clone();
        bad.format = fmt;
        assert!(matches!(nv12_to_rgba(&bad, &src, &mut rgba), Err(Error::InvalidArgument { .. })), "{fmt:?}");
    }
    let mut narrow = good.clone();
    narrow.planes[0].pitch = 16;
    assert!(nv12_to_rgba(&narrow, &src, &mut rgba).is_err());
    assert!(fill_test_pattern(&narrow, 0, &mut vec![0u8; good.size as usize]).is_err());
    assert!(matches!(
        FrameLayout::packed(FrameFormat::Rgba { width: 0x4000_0001, height: 2 }, 256, 4096),
        Err(Error::InvalidArgument { .. })
    ));
}
