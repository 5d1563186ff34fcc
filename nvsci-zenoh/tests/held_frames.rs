//! When the bridge consumer gives a CPU frame back, and what its message is: a frame is
//! published from its mapping, its rows as stored ([`Rows::Stored`]) or packed narrower than the
//! pitch ([`Rows::Packed`], one slice of the mapping per row), and stays held while Zenoh holds
//! its message, here a subscriber of the same session that keeps the sample; it is released when
//! the sample goes, after the bridge and the camera are gone too, with every NvSciBuf handle of
//! the stream freed then (the mock's ledger).

#[path = "../../examples/support/nv12_pattern.rs"]
mod nv12_pattern;

use nv12_pattern::fill_test_pattern;
use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat, FrameLayout};
use nvsci_zenoh::cdr::Image;
use nvsci_zenoh::{BridgeConfig, BridgeConsumer, Rows, StampClock};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zenoh::sample::Sample;
use zenoh::Wait;

/// Capture time of frame `s` (the stamps carry it unchanged).
const BASE: u64 = 1_700_000_000_000_000_000;
const STEP: u64 = 1_000_000;
const FRAMES: u64 = 12;

/// Whether `msg` is a `w` x `h` nv12 image whose rows (cut to `w` bytes from its `step`) are
/// frame `seq` of the pattern.
fn is_pattern(msg: &Image<'_>, w: u32, h: u32, seq: u64) -> bool {
    let layout = FrameLayout::packed(FrameFormat::nv12(w, h), 1, 1).unwrap();
    let mut expected = vec![0u8; layout.size as usize];
    fill_test_pattern(&layout, seq, &mut expected).unwrap();
    let (w, step) = (w as usize, msg.step as usize);
    (msg.width, msg.height, msg.encoding) == (w as u32, h, "nv12")
        && msg.data.len() == step * h as usize * 3 / 2
        && expected.chunks(w).zip(msg.data.chunks(step)).all(|(e, r)| e == &r[..w])
}

fn stamp_of(sample: &Sample) -> u64 {
    let p = sample.payload().to_bytes();
    Image::decode(&p).unwrap().stamp.to_nanos().unwrap()
}

/// Publishes FRAMES frames of 64x16 NV12 (rows padded to 256 bytes by the mock) through a bridge
/// as `rows` asks, to a subscriber of the bridge's own session that keeps the first sample.
/// Returns, per frame, the slot the camera wrote it into, the bridge's counters, and checks the
/// kept sample against frame 0 before and after the stream's parties are gone.
/// Waits until `bridge` has published frame `seq` (its `seq + 1`-th message), at most until
/// `deadline`.
fn wait_published(bridge: &BridgeConsumer, seq: u64, deadline: Instant) {
    while bridge.stats().published <= seq {
        assert!(Instant::now() < deadline, "{:?}", bridge.stats());
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn run(rows: Rows) -> (Vec<usize>, nvsci_zenoh::PublishStats) {
    let (w, h) = (64u32, 16u32);
    let ring = Backend::with_library(nvsci::NvSci::mock())
        .stream(FrameFormat::nv12(w, h))
        .frames(3)
        .timeout(Duration::from_secs(5))
        .consumer(ConsumerDesc::cpu().mailbox())
        .build()
        .unwrap();
    let (mut camera, mut consumers) = ring.split().unwrap();
    let consumer = consumers.remove(0);
    let ledger = consumer.slot_view(0).unwrap().module().mock_ledger().expect("the mock's module");
    let layout = camera.layout().clone();
    assert!(layout.planes[0].pitch > w, "{layout:?}: rows without padding test nothing here");

    let topic = format!("/held/{rows:?}").to_lowercase();
    let config = BridgeConfig::new(topic).multicast_scouting(false).stamp_clock(StampClock::AsIs).rows(rows);
    let session = zenoh::open(config.zenoh_config().unwrap()).wait().unwrap();
    let kept = Arc::new(Mutex::new(None::<Sample>));
    let k = kept.clone();
    let sub = session
        .declare_subscriber(config.key_expr())
        .callback(move |s| {
            let mut k = k.lock().unwrap();
            if k.is_none() {
                *k = Some(s);
            }
        })
        .wait()
        .unwrap();
    let bridge = BridgeConsumer::spawn_on(session.clone(), consumer, &config).unwrap();

    let mut slots = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    for seq in 0..FRAMES {
        let mut f = camera.acquire().unwrap();
        slots.push(f.index());
        fill_test_pattern(&layout, seq, &mut camera.cpu_write(&f).unwrap()).unwrap();
        f.set_capture_time(BASE + seq * STEP);
        camera.present(f).unwrap();
        // One frame at a time: the bridge publishes each (its mailbox replaces none).
        wait_published(&bridge, seq, deadline);
    }
    let stats = bridge.stop();
    let check_kept = |when: &str| {
        let k = kept.lock().unwrap();
        let sample = k.as_ref().expect("the subscriber kept a sample");
        assert_eq!(stamp_of(sample), BASE, "{when}: the first frame's message is kept");
        let p = sample.payload().to_bytes();
        assert!(is_pattern(&Image::decode(&p).unwrap(), w, h, 0), "{when}: frame 0's pixels changed");
    };
    check_kept("after the camera wrote the other frames");
    drop(camera);
    check_kept("after the bridge and the camera are gone");
    drop((sub, session));
    // The kept sample holds frame 0, and through it the stream: its buffers are alive.
    assert!(ledger.counts().objects > 0, "{:?}", ledger.counts());
    drop(kept.lock().unwrap().take());
    // The sample was the last holder: every handle of the stream is freed.
    assert_eq!(ledger.counts().total(), 0, "{:?}", ledger.counts());
    (slots, stats)
}

/// The camera never got frame 0's slot back while the sample held it, and went on with the
/// other two; every frame was published, none copied (no `copied` counter: the CPU reader has
/// no path that copies).
fn check_held(slots: &[usize], stats: &nvsci_zenoh::PublishStats) {
    assert!(slots[1..].iter().all(|&s| s != slots[0]), "slots {slots:?}");
    assert_eq!(stats.published, FRAMES, "{stats:?}");
    assert_eq!((stats.skipped, stats.stream_errors, stats.publish_errors), (0, 0, 0), "{stats:?}");
}

#[test]
fn a_frame_published_in_place_stays_held_while_a_subscriber_keeps_its_message() {
    let (slots, stats) = run(Rows::Stored);
    check_held(&slots, &stats);
}

#[test]
fn a_frame_published_as_packed_rows_stays_held_while_a_subscriber_keeps_its_message() {
    let (slots, stats) = run(Rows::Packed);
    check_held(&slots, &stats);
}

/// Frame `seq`'s byte at column `col` of row `row` of plane `plane` (0: luma, 1: chroma), below
/// `PAD`, which marks the padding past each row.
fn pixel(plane: usize, row: usize, col: usize, seq: u64) -> u8 {
    ((plane * 97 + row * 13 + col * 3 + seq as usize * 5) % 0xE0) as u8
}
const PAD: u8 = 0xEE;

#[test]
fn packed_rows_are_slices_of_the_frames_mapping() {
    // 64x16 NV12, which the mock lays out in rows of 256 bytes: 16 luma rows at 0, 8 chroma rows
    // at 4096. Packed, the message's `data` is each row's first 64 bytes, one after another.
    let (w, h) = (64usize, 16usize);
    let ring = Backend::with_library(nvsci::NvSci::mock())
        .stream(FrameFormat::nv12(w as u32, h as u32))
        .frames(3)
        .timeout(Duration::from_secs(5))
        .consumer(ConsumerDesc::cpu().mailbox())
        .build()
        .unwrap();
    let (mut camera, mut consumers) = ring.split().unwrap();
    let layout = camera.layout().clone();
    let planes: Vec<(usize, usize)> =
        layout.planes.iter().map(|p| (p.offset as usize, p.pitch as usize)).collect();
    assert_eq!(planes, [(0, 256), (4096, 256)], "{layout:?}");

    let config = BridgeConfig::new("/held/packed_bytes")
        .multicast_scouting(false)
        .stamp_clock(StampClock::AsIs)
        .rows(Rows::Packed);
    let session = zenoh::open(config.zenoh_config().unwrap()).wait().unwrap();
    let kept = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let k = kept.clone();
    let sub = session
        .declare_subscriber(config.key_expr())
        .callback(move |s| k.lock().unwrap().push(s))
        .wait()
        .unwrap();
    let bridge = BridgeConsumer::spawn_on(session.clone(), consumers.remove(0), &config).unwrap();

    // Two frames, one at a time, each written whole: pixels, and PAD past each row's 64 bytes.
    let mut mappings = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    for seq in 0..2u64 {
        let mut f = camera.acquire().unwrap();
        {
            let mut bytes = camera.cpu_write(&f).unwrap();
            mappings.push(bytes.as_ptr() as usize);
            bytes.fill(PAD);
            for (p, &(offset, pitch)) in planes.iter().enumerate() {
                for row in 0..[h, h / 2][p] {
                    for col in 0..w {
                        bytes[offset + row * pitch + col] = pixel(p, row, col, seq);
                    }
                }
            }
        }
        f.set_capture_time(BASE + seq * STEP);
        camera.present(f).unwrap();
        wait_published(&bridge, seq, deadline);
    }
    let stats = bridge.stop();
    assert_eq!((stats.published, stats.stream_errors, stats.publish_errors), (2, 0, 0), "{stats:?}");

    let samples = kept.lock().unwrap();
    assert_eq!(samples.len(), 2);
    for (seq, sample) in samples.iter().enumerate() {
        let seq = seq as u64;
        // The hand-computed packed rows: 16 luma rows, then 8 chroma rows, of 64 bytes each.
        let mut expected = Vec::new();
        for (p, rows) in [h, h / 2].into_iter().enumerate() {
            for row in 0..rows {
                expected.extend((0..w).map(|col| pixel(p, row, col, seq)));
            }
        }
        assert_eq!(expected.len(), 64 * 24);
        let bytes = sample.payload().to_bytes();
        let msg = Image::decode(&bytes).unwrap();
        assert_eq!((msg.width, msg.height, msg.step, msg.encoding), (64, 16, 64, "nv12"));
        assert_eq!(msg.stamp.to_nanos(), Some(BASE + seq * STEP));
        assert_eq!(msg.data, &expected[..], "frame {seq}'s packed rows");

        // In place: after the CDR prefix, one slice per row, each the row's 64 bytes where the
        // camera wrote them (this process maps the slot once for both sides).
        let slices: Vec<&[u8]> = sample.payload().slices().collect();
        assert_eq!(slices.len(), 1 + 24, "the prefix, then 24 rows");
        let rows = planes
            .iter()
            .zip([h, h / 2])
            .flat_map(|(&(offset, pitch), n)| (0..n).map(move |r| offset + r * pitch));
        for (i, (slice, at)) in slices[1..].iter().zip(rows).enumerate() {
            assert_eq!(slice.len(), 64, "row {i}");
            assert_eq!(slice.as_ptr() as usize, mappings[seq as usize] + at, "row {i} of frame {seq}");
        }
    }
    drop(samples);
    drop((sub, camera, session));
}
