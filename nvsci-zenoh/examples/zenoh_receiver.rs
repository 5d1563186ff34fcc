//! A bridge producer: subscribes to a topic's `sensor_msgs/msg/Image` messages and presents
//! them into a local stream (the mock NvSci library), whose CPU consumer prints each frame and,
//! with `--out DIR`, writes its pixel rows, packed, to `DIR/frame_<n>.bin`.
//!
//! ```text
//! cargo run --manifest-path nvsci-zenoh/Cargo.toml --example zenoh_receiver -- \
//!     --topic /camera/image_raw --listen tcp/0.0.0.0:7448 --width 640 --height 480
//! ```
//!
//! Runs until `--frames` frames arrived or `--seconds` passed, then prints the bridge's
//! counters.

#[path = "support/args.rs"]
mod args;

use args::{arg, args};
use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat};
use nvsci_zenoh::{BridgeConfig, BridgeProducer, StampClock};
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::init();
    let (w, h) = (arg("--width", 640u32), arg("--height", 480u32));
    let frames = arg("--frames", u64::MAX);
    let seconds = arg("--seconds", 30u64);
    let out = arg("--out", String::new());
    let mut config = BridgeConfig::new(arg("--topic", "/camera/image_raw".to_string()))
        .domain(arg("--domain", 0u32))
        .multicast_scouting(arg("--scouting", 1u8) == 1)
        .stamp_clock(StampClock::AsIs);
    for e in args("--connect") {
        config = config.connect(e);
    }
    for e in args("--listen") {
        config = config.listen(e);
    }
    let ring = Backend::with_library(nvsci::NvSci::mock())
        .stream(FrameFormat::nv12(w, h))
        .timeout(Duration::from_millis(100))
        .consumer(ConsumerDesc::cpu())
        .build()?;
    let (producer, mut consumers) = ring.split()?;
    let mut consumer = consumers.remove(0);
    let bridge = BridgeProducer::spawn(producer, &config)?;
    println!("SUBSCRIPTION {}", bridge.subscription_token());
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut n = 0u64;
    while n < frames && Instant::now() < deadline {
        let frame = match consumer.acquire() {
            Ok(f) => f,
            Err(nvsci::Error::Timeout { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        let message_seq = i64::from_le_bytes(frame.user_header()[..8].try_into()?);
        println!(
            "FRAME {n} sequence={} capture={} message={message_seq}",
            frame.sequence(),
            frame.capture_time()
        );
        if !out.is_empty() {
            let bytes = consumer.cpu_read(&frame)?;
            let mut packed = Vec::with_capacity((w * h * 3 / 2) as usize);
            let planes = &consumer.layout().planes;
            for (p, rows) in [(&planes[0], h), (&planes[1], h / 2)] {
                for r in 0..rows as usize {
                    let at = p.offset as usize + r * p.pitch as usize;
                    packed.extend_from_slice(&bytes[at..at + w as usize]);
                }
            }
            std::fs::write(format!("{out}/frame_{n}.bin"), packed)?;
        }
        consumer.release(frame)?;
        n += 1;
    }
    let (_, s) = bridge.stop();
    println!(
        "STATS received={} presented={} replaced={} malformed={} bad_size={} mismatched={}",
        s.received, s.presented, s.replaced, s.malformed, s.bad_size, s.mismatched
    );
    Ok(())
}
