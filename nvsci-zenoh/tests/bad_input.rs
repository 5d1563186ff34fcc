//! The bridge producer against bad messages, sent by a raw Zenoh publisher over TCP on the
//! loopback interface: each is counted under its reason, and the bridge and the stream go on
//! (the good message sent last is presented).

use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat};
use nvsci_zenoh::attachment::Attachment;
use nvsci_zenoh::cdr::{CdrError, Field, Image, Time};
use nvsci_zenoh::encoding::{Encoding, ImageError};
use nvsci_zenoh::{BridgeConfig, BridgeProducer, ReceiveStats, Rejected, StampClock};
use std::time::{Duration, Instant};
use zenoh::Wait;

fn image<'a>(encoding: &'a str, w: u32, h: u32, step: u32, data: &'a [u8]) -> Image<'a> {
    Image {
        stamp: Time { sec: 5, nanosec: 6 },
        frame_id: "cam",
        height: h,
        width: w,
        encoding,
        is_bigendian: 0,
        step,
        data,
    }
}

#[test]
fn bad_messages_are_counted_and_the_bridge_goes_on() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base =
        BridgeConfig::new("/bad/image").multicast_scouting(false).reliable().stamp_clock(StampClock::AsIs);
    let sender = zenoh::open(base.clone().listen(format!("tcp/127.0.0.1:{port}")).zenoh_config().unwrap())
        .wait()
        .unwrap();
    let ring = Backend::with_library(nvsci::NvSci::mock())
        .stream(FrameFormat::nv12(8, 4))
        .timeout(Duration::from_millis(500))
        .consumer(ConsumerDesc::cpu())
        .build()
        .unwrap();
    let (producer, mut consumers) = ring.split().unwrap();
    let mut consumer = consumers.remove(0);
    let bridge =
        BridgeProducer::spawn(producer, &base.clone().connect(format!("tcp/127.0.0.1:{port}"))).unwrap();
    // Wait for the bridge's subscription to reach the sender.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let replies = sender.liveliness().get(bridge.subscription_token()).wait().unwrap();
        if replies.recv().is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "the bridge's subscription never showed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let publisher = sender.declare_publisher(base.key_expr()).wait().unwrap();
    let attachment =
        |seq: i64| Attachment { sequence: seq, source_timestamp: 1, gid: [3; 16] }.to_bytes().to_vec();
    let good: Vec<u8> = (0..48).collect();
    let send = |payload: Vec<u8>, att: Option<Vec<u8>>| {
        let put = publisher.put(payload);
        match att {
            Some(a) => put.attachment(a).wait().unwrap(),
            None => put.wait().unwrap(),
        }
        // One at a time: the bridge keeps only the newest message it has not taken yet.
        std::thread::sleep(Duration::from_millis(150));
    };
    let mut truncated = image("nv12", 8, 4, 8, &good).encode().unwrap();
    truncated.truncate(30);
    send(truncated, Some(attachment(1)));
    send(image("nv12", 8, 4, 8, &good).encode().unwrap(), Some(vec![0; 5]));
    send(image("yuv420", 8, 4, 8, &good).encode().unwrap(), Some(attachment(2)));
    send(image("nv12", 8, 4, 8, &good[..40]).encode().unwrap(), Some(attachment(3)));
    let big = vec![0u8; 16 * 4 * 3 / 2];
    send(image("nv12", 16, 4, 16, &big).encode().unwrap(), Some(attachment(4)));
    let rgba = vec![0u8; 8 * 4 * 4];
    send(image("rgba8", 8, 4, 32, &rgba).encode().unwrap(), Some(attachment(5)));
    send(image("nv12", 8, 4, 8, &good).encode().unwrap(), Some(attachment(6)));

    let frame = consumer.acquire().expect("the good message, presented after the bad ones");
    {
        // The message's 8-byte rows (4 luma, 2 chroma) at the frame's pitches.
        let bytes = consumer.cpu_read(&frame).unwrap();
        let planes = &consumer.layout().planes;
        for (i, src) in good.chunks(8).enumerate() {
            let (p, r) = if i < 4 { (&planes[0], i) } else { (&planes[1], i - 4) };
            let at = p.offset as usize + r * p.pitch as usize;
            assert_eq!(&bytes[at..at + 8], src, "row {i}");
        }
    }
    assert_eq!(frame.capture_time(), 5_000_000_006);
    assert_eq!(i64::from_le_bytes(frame.user_header()[..8].try_into().unwrap()), 6);
    consumer.release(frame).unwrap();
    let s = bridge.stats();
    let counts = |s: &ReceiveStats| {
        [
            s.received,
            s.presented,
            s.replaced,
            s.malformed,
            s.bad_attachment,
            s.without_attachment,
            s.unknown_encoding,
            s.bad_size,
            s.mismatched,
            s.too_large,
            s.stream_errors,
        ]
    };
    // received, presented, replaced, malformed, bad attachment, without attachment, unknown
    // encoding, bad size, mismatched, too large, stream errors
    assert_eq!(counts(&s), [7, 1, 0, 1, 1, 0, 1, 1, 1, 1, 0], "{s:?}");
    assert_eq!(
        s.last_rejected,
        Some(Rejected::Image(ImageError::EncodingMismatch {
            received: Encoding::Rgba8,
            stream: Some(Encoding::Nv12)
        }))
    );
    let (_, _) = bridge.stop();
    // The first rejection named the field it cut (checked on its own: `last_rejected` keeps
    // only the last).
    let mut t = image("nv12", 8, 4, 8, &good).encode().unwrap();
    t.truncate(30);
    assert!(matches!(Image::decode(&t), Err(CdrError::Truncated { field: Field::Encoding, .. })));
}
