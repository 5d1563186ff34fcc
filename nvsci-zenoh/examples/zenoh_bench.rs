//! The bridge against raw Zenoh, in one process and one run: two Zenoh peer sessions over TCP
//! on the loopback interface (multicast scouting off, explicit endpoints), a raw subscriber on
//! the receiving one.
//!
//! * raw: the sending session puts the same bytes as the bridge's message (a 1080p NV12 frame
//!   in a `sensor_msgs/msg/Image`, 3 110 448 bytes) from one shared buffer (no copy per put:
//!   the floor), with a 33-byte attachment as the bridge's, which carries the send time;
//! * raw + copy: the same, with one copy of the message into a new buffer per put (what the
//!   bridge's copy out of the frame costs, without the stream);
//! * bridge: a camera (mock NvSci stream, CPU producer) presents 1080p NV12 frames; the bridge
//!   consumer (a mailbox) copies each into its message and puts it on the same session.
//!
//! Two measures each: frames/s received while the sender goes as fast as it can (raw: puts back
//! to back; bridge: the camera presents the next frame as soon as the bridge took the previous
//! one, so the bridge never waits for a frame and the camera does not spin on the shared
//! cores), and the latency
//! of one frame at a time (put, or present, to the subscriber's callback; the next one after
//! the previous arrived), p50 and p90.
//!
//! ```text
//! cargo run --release --manifest-path nvsci-zenoh/Cargo.toml --example zenoh_bench -- --frames 300
//! ```

#[path = "support/args.rs"]
mod args;
#[path = "../../examples/support/percentile.rs"]
mod percentile;

use args::arg;
use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat};
use nvsci_zenoh::cdr::{Image, Time};
use nvsci_zenoh::{BridgeConfig, BridgeConsumer, StampClock};
use percentile::pct;
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use zenoh::bytes::ZBytes;
use zenoh::Wait;

static BASE: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since the start of the run (at least 1).
fn now_ns() -> u64 {
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    now_ns();
    let (w, h) = (arg("--width", 1920u32), arg("--height", 1080u32));
    let frames = arg("--frames", 300u64);
    let samples = arg("--latency-samples", 100usize);
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let cfg =
        BridgeConfig::new("/bench/image").multicast_scouting(false).reliable().stamp_clock(StampClock::AsIs);
    let tx = zenoh::open(cfg.clone().listen(format!("tcp/127.0.0.1:{port}")).zenoh_config()?).wait()?;
    let rx = zenoh::open(cfg.clone().connect(format!("tcp/127.0.0.1:{port}")).zenoh_config()?).wait()?;

    // Receiving side: (arrival, sent) nanoseconds of every message, raw and bridged.
    let (raw_tx, raw_rx) = mpsc::channel::<(u64, u64)>();
    let _raw_sub = rx
        .declare_subscriber("bench/raw")
        .callback(move |s| {
            let t = now_ns();
            let a = s.attachment().map(|a| a.to_bytes().into_owned()).unwrap_or_default();
            let sent = a.get(..8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
            let _ = raw_tx.send((t, sent));
        })
        .wait()?;
    let (br_tx, br_rx) = mpsc::channel::<(u64, u64)>();
    let _bridge_sub = rx
        .declare_subscriber(cfg.key_expr())
        .callback(move |s| {
            let t = now_ns();
            let p = s.payload().to_bytes();
            let sent = Image::decode(&p).ok().and_then(|i| i.stamp.to_nanos()).unwrap_or(0);
            let _ = br_tx.send((t, sent));
        })
        .wait()?;
    std::thread::sleep(Duration::from_millis(500));

    // The raw floor: the same bytes as one bridge message, from one shared buffer.
    let pixels = vec![0x80u8; (w * h * 3 / 2) as usize];
    let image = Image {
        stamp: Time::default(),
        frame_id: "",
        height: h,
        width: w,
        encoding: "nv12",
        is_bigendian: 0,
        step: w,
        data: &pixels,
    };
    let message = image.encode()?;
    let bytes = message.len();
    let payload = ZBytes::from(message);
    let raw_pub = tx
        .declare_publisher("bench/raw")
        .congestion_control(zenoh::qos::CongestionControl::Block)
        .reliability(zenoh::qos::Reliability::Reliable)
        .wait()?;
    let message_vec = payload.to_bytes().into_owned();
    let raw_put = |sent: u64, copy: bool| -> zenoh::Result<()> {
        let mut attachment = vec![0u8; 33];
        attachment[..8].copy_from_slice(&sent.to_le_bytes());
        let p = if copy { ZBytes::from(message_vec.clone()) } else { payload.clone() };
        raw_pub.put(p).attachment(attachment).wait()
    };
    let mut raw = Vec::new();
    for copy in [false, true] {
        // Throughput: back to back.
        let start = Instant::now();
        for _ in 0..frames {
            raw_put(now_ns(), copy)?;
        }
        let mut got = 0;
        while got < frames && raw_rx.recv_timeout(Duration::from_secs(10)).is_ok() {
            got += 1;
        }
        let fps = got as f64 / start.elapsed().as_secs_f64();
        // Latency: one at a time.
        let mut lat = Vec::with_capacity(samples);
        for _ in 0..samples {
            raw_put(now_ns(), copy)?;
            let (t, sent) = raw_rx.recv_timeout(Duration::from_secs(10))?;
            lat.push((t - sent) as f64 / 1e6);
        }
        raw.push((fps, lat));
    }

    // The bridge.
    let ring = Backend::with_library(nvsci::NvSci::mock())
        .stream(FrameFormat::nv12(w, h))
        .frames(4)
        .timeout(Duration::from_millis(200))
        .consumer(ConsumerDesc::cpu().mailbox())
        .build()?;
    let (mut camera, mut consumers) = ring.split()?;
    for _ in 0..4 {
        // Every slot holds a picture once; the benchmark then presents without rewriting it.
        let f = camera.acquire()?;
        camera.cpu_write(&f)?.fill(0x80);
        camera.present(f)?;
    }
    let bridge = BridgeConsumer::spawn_on(tx.clone(), consumers.remove(0), &cfg)?;
    std::thread::sleep(Duration::from_millis(300));
    while br_rx.try_recv().is_ok() {}
    let published_before = bridge.stats().published;
    let start = Instant::now();
    let mut got = 0u64;
    // Throughput: the next frame as soon as the bridge took the previous one, until `frames`
    // messages arrived.
    let delivered = |c: &nvsci::pipeline::Producer| c.consumer_stats(0).map_or(0, |s| s.delivered);
    while got < frames && start.elapsed() < Duration::from_secs(60) {
        let taken = delivered(&camera);
        let mut f = camera.acquire()?;
        f.set_capture_time(now_ns());
        camera.present(f)?;
        while delivered(&camera) == taken && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_micros(100));
        }
        while br_rx.try_recv().is_ok() {
            got += 1;
        }
    }
    while got < frames && br_rx.recv_timeout(Duration::from_secs(10)).is_ok() {
        got += 1;
    }
    let bridge_fps = got as f64 / start.elapsed().as_secs_f64();
    let st = bridge.stats();
    let (published, skipped) = (st.published - published_before, st.skipped);
    std::thread::sleep(Duration::from_millis(300));
    while br_rx.try_recv().is_ok() {}
    // Latency: present one frame, wait for it to arrive.
    let mut bridge_lat = Vec::with_capacity(samples);
    for _ in 0..samples {
        let mut f = camera.acquire()?;
        let sent = now_ns();
        f.set_capture_time(sent);
        camera.present(f)?;
        loop {
            let (t, s) = br_rx.recv_timeout(Duration::from_secs(10))?;
            if s == sent {
                bridge_lat.push((t - sent) as f64 / 1e6);
                break;
            }
        }
    }
    let st = bridge.stop();

    let (bp50, bp90) = (pct(&mut bridge_lat, 0.5), pct(&mut bridge_lat, 0.9));
    let (raw_fps, rp50) = (raw[0].0, pct(&mut raw[0].1, 0.5));
    println!("{w}x{h} NV12, {bytes} bytes per message, {frames} frames, {samples} latency samples");
    println!("{:<12} {:>10} {:>10} {:>10}", "", "frames/s", "p50 ms", "p90 ms");
    for (name, (fps, lat)) in ["raw", "raw + copy"].iter().zip(&mut raw) {
        let (p50, p90) = (pct(lat, 0.5), pct(lat, 0.9));
        println!("{name:<12} {fps:>10.1} {p50:>10.3} {p90:>10.3}");
    }
    println!("{:<12} {:>10.1} {:>10.3} {:>10.3}", "bridge", bridge_fps, bp50, bp90);
    println!("bridge/raw: frames/s {:.2}x, p50 latency {:.2}x", bridge_fps / raw_fps, bp50 / rp50);
    println!(
        "bridge during the throughput run: {published} published, {skipped} frames skipped by its mailbox; \
         errors {}",
        st.publish_errors + st.stream_errors
    );
    Ok(())
}
