//! A synthetic camera (the mock NvSci stream, NV12 test pattern) whose frames a bridge consumer
//! publishes on Zenoh as `sensor_msgs/msg/Image`.
//!
//! ```text
//! cargo run --manifest-path nvsci-zenoh/Cargo.toml --example zenoh_camera -- \
//!     --topic /camera/image_raw --connect tcp/192.168.1.10:7447 --frames 300 --period-ms 33
//! ```
//!
//! Frame `s` carries the pattern of `support/nv12_pattern.rs` for `s`. With `--stamp-base B`,
//! its capture time (and so `header.stamp`) is `B + s * 1 000 000` ns, unchanged (the tests
//! read the sequence back from the stamp); without, the stream's CLOCK_MONOTONIC capture time
//! moved to the system clock. `--rows packed` publishes rows of `width` bytes (default: the
//! frames' rows as stored, `step` = their pitch). Prints the bridge's tokens, then its counters
//! at the end.

#[path = "support/args.rs"]
mod args;
#[path = "../../examples/support/nv12_pattern.rs"]
mod nv12_pattern;

use args::{arg, args};
use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat};
use nvsci_zenoh::{BridgeConfig, BridgeConsumer, Rows, StampClock};
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::init();
    let (w, h) = (arg("--width", 640u32), arg("--height", 480u32));
    let frames = arg("--frames", 100u64);
    let period = Duration::from_millis(arg("--period-ms", 33u64));
    let stamp_base = arg("--stamp-base", 0u64);
    let mut config = BridgeConfig::new(arg("--topic", "/camera/image_raw".to_string()))
        .domain(arg("--domain", 0u32))
        .frame_id(arg("--frame-id", "camera".to_string()))
        .multicast_scouting(arg("--scouting", 1u8) == 1);
    for e in args("--connect") {
        config = config.connect(e);
    }
    for e in args("--listen") {
        config = config.listen(e);
    }
    match arg("--rows", "stored".to_string()).as_str() {
        "stored" => {}
        "packed" => config = config.rows(Rows::Packed),
        other => return Err(format!("--rows {other}: stored or packed").into()),
    }
    if arg("--reliable", 0u8) == 1 {
        config = config.reliable();
    }
    if stamp_base != 0 {
        config = config.stamp_clock(StampClock::AsIs);
    }
    let ring = Backend::with_library(nvsci::NvSci::mock())
        .stream(FrameFormat::nv12(w, h))
        .timeout(Duration::from_millis(200))
        .consumer(ConsumerDesc::cpu().mailbox())
        .build()?;
    let (mut camera, mut consumers) = ring.split()?;
    let bridge = BridgeConsumer::spawn(consumers.remove(0), &config)?;
    println!("KEY {}", bridge.key_expr());
    println!("NODE {}", bridge.node_token());
    println!("PUBLISHER {}", bridge.publisher_token());
    // Give the subscribers a moment to see the publisher before the first frame.
    std::thread::sleep(Duration::from_millis(arg("--settle-ms", 500u64)));
    let start = Instant::now();
    for s in 0..frames {
        if let Some(wait) = (start + period * s as u32).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let mut frame = camera.acquire()?;
        nv12_pattern::fill_test_pattern(camera.layout(), s, &mut camera.cpu_write(&frame)?)?;
        if stamp_base != 0 {
            frame.set_capture_time(stamp_base + s * 1_000_000);
        }
        camera.present(frame)?;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while {
        let st = bridge.stats();
        st.published + st.skipped + st.publish_errors < frames && Instant::now() < deadline
    } {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(arg("--linger-ms", 500u64)));
    let st = bridge.stop();
    println!("STATS published={} skipped={} publish_errors={}", st.published, st.skipped, st.publish_errors);
    Ok(())
}
