//! The frame ring on the mock library where the NvSci backend differs from the others (read-only
//! duplicates, layouts from reconciled attributes) and the CPU converter through the ring. The
//! scenarios every backend shares (ordering, several consumers, timeouts, bad input, tokens) run
//! in `tests/ring`.
#![cfg(feature = "mock")]

#[path = "../examples/support/nv12_pattern.rs"]
mod nv12_pattern;

use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat, FrameRing};
use nvsci::{Error, NvSci};
use std::time::Duration;

fn ring(format: FrameFormat, frames: usize, consumers: usize, timeout_ms: u64) -> FrameRing {
    Backend::with_library(NvSci::mock())
        .stream(format)
        .frames(frames)
        .timeout(Duration::from_millis(timeout_ms))
        .consumers(ConsumerDesc::cpu(), consumers)
        .build()
        .unwrap()
}

#[test]
fn consumers_get_read_only_views_and_layout_comes_from_attributes() {
    let r = ring(FrameFormat::nv12(1920, 1080), 2, 2, 1000);
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
    let (mut p, mut cs) = ring(FrameFormat::nv12(w, h), 2, 1, 1000).split().unwrap();
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
    let fmt = FrameFormat::nv12(1280, 720);
    let packed = nvsci::pipeline::FrameLayout::packed(fmt, 256, 4096).unwrap();
    let r = ring(fmt, 2, 1, 100);
    assert_eq!(&packed, r.layout());
    // 1280 -> pitch 1280; 1280 * 720 = 921600 = 225 * 4096; chroma 1280 * 360 = 460800 -> 462848.
    assert_eq!((packed.planes[1].offset, packed.size), (921_600, 921_600 + 462_848));
    assert!(matches!(
        nvsci::pipeline::FrameLayout::packed(fmt, 100, 4096),
        Err(Error::InvalidArgument { name: "alignment", .. })
    ));
}

#[test]
fn conversion_refuses_inconsistent_layouts() {
    use nv12_pattern::fill_test_pattern;
    use nvsci::convert::nv12_to_rgba;
    use nvsci::pipeline::FrameLayout;
    let good = FrameLayout::packed(FrameFormat::nv12(64, 32), 256, 4096).unwrap();
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
    for fmt in [FrameFormat::nv12(63, 32), FrameFormat::nv12(64, 1)] {
        let mut bad = good.clone();
        bad.format = fmt;
        assert!(matches!(nv12_to_rgba(&bad, &src, &mut rgba), Err(Error::InvalidArgument { .. })), "{fmt:?}");
    }
    let mut narrow = good.clone();
    narrow.planes[0].pitch = 16;
    // Refused for the narrow plane (the message names it by its pitch).
    assert!(matches!(
        nv12_to_rgba(&narrow, &src, &mut rgba),
        Err(Error::InvalidArgument { reason, .. }) if reason.contains("pitch: 16")
    ));
    assert!(matches!(
        fill_test_pattern(&narrow, 0, &mut vec![0u8; good.size as usize]),
        Err(e) if e.contains("pitch: 16")
    ));
    assert!(matches!(
        FrameLayout::packed(FrameFormat::Rgba { width: 0x4000_0001, height: 2 }, 256, 4096),
        Err(Error::InvalidArgument { .. })
    ));
}

/// Frame `t` of the NV12 pattern as two packed pitch-linear planes (luma `w` bytes a row,
/// chroma `w` bytes a row of U, V pairs).
fn pattern_planes(w: u32, h: u32, t: u64) -> (Vec<u8>, Vec<u8>) {
    let packed = nvsci::pipeline::FrameLayout::packed(FrameFormat::nv12(w, h), 1, 1).unwrap();
    let mut frame = vec![0u8; packed.size as usize];
    nv12_pattern::fill_test_pattern(&packed, t, &mut frame).unwrap();
    let (y, uv) = frame.split_at(packed.planes[1].offset as usize);
    (y.to_vec(), uv.to_vec())
}

#[test]
fn block_linear_frames_go_through_the_ring_with_put_and_get_pixels() {
    use nvsci::buf::{key, ImageLayout, PlaneDst, PlaneSrc, SplitChroma};
    // Odd multiples of the 64-byte GOB width and of 8-row GOBs, so tiles are partly filled.
    let (w, h) = (200u32, 70u32);
    let r = ring(FrameFormat::nv12_block_linear(w, h), 3, 2, 2000);
    let l = r.layout().clone();
    assert_eq!(l.format.image_layout(), Some(ImageLayout::BlockLinear));
    assert_eq!(l.planes.len(), 2);
    let (mut p, mut cs) = r.split().unwrap();
    let frames = 24u64;
    let consumers: Vec<_> = cs
        .drain(..)
        .map(|mut c| {
            std::thread::spawn(move || {
                let (mut y, mut uv) = (vec![0u8; (w * h) as usize], vec![0u8; (w * h / 2) as usize]);
                for t in 0..frames {
                    let g = c.acquire().unwrap();
                    assert_eq!(g.sequence(), t);
                    let view = c.view(&g).unwrap();
                    let layout = view.attr_list().unwrap().get_one(key::IMAGE_LAYOUT).unwrap();
                    assert_eq!(layout, Some(ImageLayout::BlockLinear), "the reconciled list");
                    // Y, U and V user planes (nvscibuf.h); the chroma interleaved afterwards.
                    let mut split = SplitChroma::new(w / 2, h / 2, 1);
                    {
                        let [u, v] = split.planes_mut();
                        c.get_pixels(&g, None, &mut [PlaneDst { data: &mut y, pitch: w }, u, v]).unwrap();
                    }
                    split.interleave_into(PlaneDst { data: &mut uv, pitch: w }).unwrap();
                    let (wy, wuv) = pattern_planes(w, h, t);
                    assert!(y == wy && uv == wuv, "consumer {}: frame {t} differs", c.id());
                    // The raw bytes are tiled, not rows: the ring refuses them as rows, and the
                    // pitch-linear reading of the view's bytes differs.
                    assert!(matches!(c.cpu_read(&g), Err(Error::InvalidArgument { name: "frame", .. })));
                    let raw = view.cpu_read().unwrap();
                    let rows_as_pitch_linear: Vec<u8> =
                        (0..h as usize).flat_map(|r| raw[r * w as usize..][..w as usize].to_vec()).collect();
                    assert_ne!(rows_as_pitch_linear, wy, "frame {t}: block-linear bytes read as rows");
                    drop(raw);
                    c.release(g).unwrap();
                }
            })
        })
        .collect();
    for t in 0..frames {
        let f = p.acquire().unwrap();
        assert!(matches!(p.cpu_write(&f), Err(Error::InvalidArgument { name: "frame", .. })));
        let (y, uv) = pattern_planes(w, h, t);
        let mut split = SplitChroma::new(w / 2, h / 2, 1);
        split.split_from(PlaneSrc { data: &uv, pitch: w }).unwrap();
        let [u, v] = split.planes();
        p.put_pixels(&f, None, &[PlaneSrc { data: &y, pitch: w }, u, v]).unwrap();
        p.present(f).unwrap();
    }
    for c in consumers {
        c.join().unwrap();
    }
}

#[test]
fn block_linear_frames_refuse_what_reads_them_as_rows() {
    use nvsci::buf::{PixelRect, PlaneSrc};
    let bl = FrameFormat::nv12_block_linear(64, 32);
    // A packed layout and the CPU converter describe rows: both name what is wrong.
    assert!(matches!(
        nvsci::pipeline::FrameLayout::packed(bl, 256, 4096),
        Err(Error::InvalidArgument { name: "format.layout", .. })
    ));
    let r = ring(bl, 2, 1, 1000);
    let mut rgba = vec![0u8; 64 * 32 * 4];
    let src = vec![0u8; r.layout().size as usize];
    assert!(matches!(
        nvsci::convert::nv12_to_rgba(r.layout(), &src, &mut rgba),
        Err(Error::InvalidArgument { name: "self.format", .. })
    ));
    // Pixel writes are checked as BufObj::put_pixels checks them.
    let (mut p, _cs) = r.split().unwrap();
    let f = p.acquire().unwrap();
    let (y, u, v) = (vec![1u8; 64 * 32], vec![2u8; 32 * 16], vec![3u8; 32 * 16]);
    let planes = [
        PlaneSrc { data: &y, pitch: 64 },
        PlaneSrc { data: &u, pitch: 32 },
        PlaneSrc { data: &v, pitch: 32 },
    ];
    // No rectangle on a YUV image, inside it or not ("it must be NULL for NvSciSurfType_YUV").
    for rect in [PixelRect::new(0, 0, 65, 32), PixelRect::new(0, 0, 64, 32)] {
        assert!(matches!(
            p.put_pixels(&f, Some(rect), &planes),
            Err(Error::InvalidArgument { name: "rect", .. })
        ));
    }
    // Y, U and V user planes: the NvSciBuf planes' two buffers are refused.
    let uv = vec![2u8; 64 * 16];
    assert!(matches!(
        p.put_pixels(&f, None, &[planes[0], PlaneSrc { data: &uv, pitch: 64 }]),
        Err(Error::InvalidArgument { name: "planes", .. })
    ));
    p.put_pixels(&f, None, &planes).unwrap();
    p.present(f).unwrap();
}

/// DRIVE OS 6.0.10's reconciliation (nvscisync.h of that release: `WaiterRequireTimestamps`
/// true when any list is a WaitOnly/WaitSignal list with NeedCpuAccess) reaches every ring: the
/// ring's sync objects always have a CPU waiter, so they carry timestamps, and CPU frames still
/// flow; under the earlier headers' rule nothing asks for timestamps.
#[test]
fn drive_os_6_0_10_reconciliation_gives_the_ring_timestamp_objects() {
    use nvsci::sync::key::WAITER_REQUIRE_TIMESTAMPS;
    use nvsci_mock::rules::{set_timestamp_rule, TimestampRule};
    for (rule, stamps) in [(TimestampRule::CpuWaiterRequest, false), (TimestampRule::AnyCpuWaiter, true)] {
        set_timestamp_rule(rule);
        let r = ring(FrameFormat::Raw { size: 4096 }, 2, 1, 1000);
        set_timestamp_rule(TimestampRule::CpuWaiterRequest);
        let (mut p, mut cs) = r.split().unwrap();
        let present = p.present_sync().unwrap().attr_list().unwrap();
        assert_eq!(present.get_one(WAITER_REQUIRE_TIMESTAMPS).unwrap(), Some(stamps), "{rule:?}");
        let release = p.release_sync(0).unwrap().attr_list().unwrap();
        assert_eq!(release.get_one(WAITER_REQUIRE_TIMESTAMPS).unwrap(), Some(stamps), "{rule:?}");
        for v in 1..=3u8 {
            let f = p.acquire().unwrap();
            p.cpu_write(&f).unwrap()[0] = v;
            p.present(f).unwrap();
            let g = cs[0].acquire().unwrap();
            assert_eq!(cs[0].cpu_read(&g).unwrap()[0], v);
            cs[0].release(g).unwrap();
        }
    }
}

/// A stream of the most consumers allowed builds (its sync objects reconcile the producer's list,
/// one per consumer and the ring's CPU waiter's: more than 16 lists in one call) and hands every
/// consumer each frame, the bytes the producer wrote; one consumer more is refused, naming the
/// field.
#[test]
fn a_stream_of_max_consumers_builds_and_every_consumer_reads_each_frame() {
    use nvsci::pipeline::{Backend, ConsumerDesc, MAX_CONSUMERS};
    let backend = Backend::with_library(NvSci::mock());
    let build = |n: usize| {
        let mut s = backend.stream(FrameFormat::Raw { size: 4096 }).frames(2).timeout(Duration::from_secs(5));
        for _ in 0..n {
            s = s.consumer(ConsumerDesc::cpu());
        }
        s.build()
    };
    let (mut p, mut cs) = build(MAX_CONSUMERS).unwrap().split().unwrap();
    assert_eq!(cs.len(), MAX_CONSUMERS);
    for t in 0..3u8 {
        let f = p.acquire().unwrap();
        p.cpu_write(&f).unwrap().fill(0xa0 + t);
        p.present(f).unwrap();
        for c in &mut cs {
            let f = c.acquire().unwrap();
            assert!(c.cpu_read(&f).unwrap().iter().all(|&b| b == 0xa0 + t), "consumer {}, frame {t}", c.id());
            c.release(f).unwrap();
        }
    }
    match build(MAX_CONSUMERS + 1) {
        Err(Error::InvalidArgument { name, .. }) => assert_eq!(name, "consumers"),
        other => panic!("{} consumers: {other:?}", MAX_CONSUMERS + 1),
    }
}

#[test]
fn acquire_within_waits_only_as_long_as_it_is_told() {
    // A ring timeout far longer than the waits below: a return at all shows the shorter bound.
    let (mut p, mut cs) = ring(FrameFormat::Raw { size: 64 }, 2, 1, 60_000).split().unwrap();
    let c = &mut cs[0];
    let wait = Duration::from_millis(20);
    match c.acquire_within(wait) {
        Err(Error::Timeout { waited_for: nvsci::Wait::Frame, timeout }) => assert_eq!(timeout, wait),
        other => panic!("expected a frame timeout of 20 ms, got {other:?}"),
    }
    match c.acquire_within(Duration::ZERO) {
        Err(Error::Timeout { waited_for: nvsci::Wait::Frame, timeout }) => {
            assert_eq!(timeout, Duration::ZERO)
        }
        other => panic!("expected a frame timeout of zero, got {other:?}"),
    }
    let f = p.acquire().unwrap();
    p.cpu_write(&f).unwrap().fill(0x5a);
    p.present(f).unwrap();
    // Nothing was taken by the timeouts: the one frame comes, with its bytes.
    let f = c.acquire_within(Duration::ZERO).unwrap();
    assert_eq!(f.sequence(), 0);
    assert!(c.cpu_read(&f).unwrap().iter().all(|&b| b == 0x5a));
    c.release(f).unwrap();
}
