//! When the bridge consumer gives a CPU frame back: a frame published from its mapping
//! ([`Rows::Stored`]) stays held while Zenoh holds its message, here a subscriber of the same
//! session that keeps the sample, and is released when the sample goes, after the bridge and the
//! camera are gone too, with every NvSciBuf handle of the stream freed then (the mock's ledger);
//! a frame copied into a message buffer ([`Rows::Packed`] rows narrower than the pitch) is
//! released at once.

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
        while bridge.stats().published <= seq {
            assert!(Instant::now() < deadline, "{:?}", bridge.stats());
            std::thread::sleep(Duration::from_millis(1));
        }
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
    match rows {
        // The kept sample holds frame 0, and through it the stream: its buffers are alive.
        Rows::Stored => assert!(ledger.counts().objects > 0, "{:?}", ledger.counts()),
        _ => assert_eq!(ledger.counts().total(), 0, "a copied frame was released at once"),
    }
    drop(kept.lock().unwrap().take());
    // The sample was the last holder: every handle of the stream is freed.
    assert_eq!(ledger.counts().total(), 0, "{:?}", ledger.counts());
    (slots, stats)
}

#[test]
fn a_frame_published_in_place_stays_held_while_a_subscriber_keeps_its_message() {
    let (slots, stats) = run(Rows::Stored);
    // The camera never got frame 0's slot back while the sample held it, and went on with the
    // other two.
    assert!(slots[1..].iter().all(|&s| s != slots[0]), "slots {slots:?}");
    assert_eq!((stats.published, stats.copied), (FRAMES, 0), "{stats:?}");
    assert_eq!((stats.skipped, stats.stream_errors, stats.publish_errors), (0, 0, 0), "{stats:?}");
}

#[test]
fn a_frame_copied_into_its_message_is_released_at_once() {
    let (slots, stats) = run(Rows::Packed);
    // Frame 0's slot came back to the camera while the sample was still kept (its pixels are a
    // copy, checked against frame 0 after the slot was rewritten).
    assert!(slots[1..].contains(&slots[0]), "slots {slots:?}");
    assert_eq!((stats.published, stats.copied), (FRAMES, FRAMES), "{stats:?}");
    assert_eq!((stats.skipped, stats.stream_errors, stats.publish_errors), (0, 0, 0), "{stats:?}");
}
