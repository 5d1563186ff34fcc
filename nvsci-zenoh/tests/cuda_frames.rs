//! CUDA frames through the bridge consumer, on the mock NvSci in GPU mode: the bridge's consumer
//! is on a CUDA engine, so each frame is copied device -> pinned host memory on its stream,
//! after the present wait `acquire` enqueued there and before the release signal, straight into
//! the buffers the message is published from (rows as stored: one copy per plane; packed: a 2D
//! copy per plane; block-linear frames: a 2D copy from each plane's CUDA array). The receiving
//! side is a raw Zenoh subscriber in the same process (a second session over TCP on loopback),
//! which decodes every message and checks its pixels against the pattern of the frame's
//! sequence (carried by the stamp, unchanged).
//!
//! Needs a CUDA GPU: `#[ignore]`d, run with `--include-ignored` on a GPU host; without a GPU a
//! test records a skip and returns, unless `NVSCI_REQUIRE_GPU=1` (or `NVSCI_REQUIRE=gpu`) makes
//! it fail.
#![cfg(feature = "cuda")]

#[path = "../../examples/support/nv12_pattern.rs"]
mod nv12_pattern;
#[path = "../../tests/common/require.rs"]
mod require;

use nv12_pattern::fill_test_pattern;
use nvsci::cuda::CudaGpu;
use nvsci::pipeline::{Backend, ConsumerDesc, Engine, FrameFormat, FrameLayout, Producer};
use nvsci_zenoh::cdr::Image;
use nvsci_zenoh::{BridgeConfig, BridgeConsumer, Rows, StampClock};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use zenoh::Wait;

/// Capture time of frame `s`: BASE + s * STEP ns (the stamps carry it unchanged).
const BASE: u64 = 1_700_000_000_000_000_000;
const STEP: u64 = 1_000_000;
const FRAMES: u64 = 120;

fn gpu() -> Option<CudaGpu> {
    match CudaGpu::open(0) {
        Ok(d) => Some(d),
        Err(e) => require::unavailable(&[require::Capability::Gpu], format!("no CUDA GPU: {e}")),
    }
}

/// One received message: its stamp (ns), width, height, encoding, step and pixels.
type Received = (u64, u32, u32, String, u32, Vec<u8>);

/// The receiving side: a session, its subscriber to the topic and the probe token that tells
/// the sending session it is there.
struct Receiver {
    recv: mpsc::Receiver<Received>,
    _token: zenoh::liveliness::LivelinessToken,
    _sub: zenoh::pubsub::Subscriber<()>,
    _session: zenoh::Session,
}

/// Two Zenoh peer sessions over TCP on loopback: the sender's, returned to hand to the bridge,
/// and the receiver with a subscriber to `config`'s topic. Returns once the sender's session has
/// seen the receiver's probe token, declared after the subscriber (a session's declarations
/// arrive in order, so the subscriber is known by then).
fn sessions(config: &BridgeConfig) -> (zenoh::Session, Receiver) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let c = config.clone();
    let tx = zenoh::open(c.clone().listen(format!("tcp/127.0.0.1:{port}")).zenoh_config().unwrap())
        .wait()
        .unwrap();
    let rx = zenoh::open(c.connect(format!("tcp/127.0.0.1:{port}")).zenoh_config().unwrap()).wait().unwrap();
    let (send, recv) = mpsc::channel();
    let sub = rx
        .declare_subscriber(config.key_expr())
        .callback(move |s| {
            let p = s.payload().to_bytes();
            let img = Image::decode(&p).expect("a message the bridge published does not decode");
            let stamp = img.stamp.to_nanos().expect("a negative stamp");
            let _ = send.send((
                stamp,
                img.width,
                img.height,
                img.encoding.to_owned(),
                img.step,
                img.data.to_vec(),
            ));
        })
        .wait()
        .unwrap();
    let token = rx.liveliness().declare_token("nvsci/test/probe").wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    'wait: loop {
        let replies = tx.liveliness().get("nvsci/test/probe").wait().unwrap();
        while let Ok(reply) = replies.recv() {
            if reply.result().is_ok() {
                break 'wait;
            }
        }
        assert!(Instant::now() < deadline, "the sessions did not connect within 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    (tx, Receiver { recv, _token: token, _sub: sub, _session: rx })
}

/// The frame `seq` of the pattern as a message carries it (packed NV12 rows).
fn packed_pattern(w: u32, h: u32, seq: u64) -> Vec<u8> {
    let layout = FrameLayout::packed(FrameFormat::nv12(w, h), 1, 1).unwrap();
    let mut expected = vec![0u8; layout.size as usize];
    fill_test_pattern(&layout, seq, &mut expected).unwrap();
    expected
}

/// Checks every message received: an `nv12` image of `w` x `h` in rows of `step` bytes whose
/// pixels (each row's first `w` bytes) are the pattern of the sequence its stamp names, in
/// increasing sequence. Returns the sequences.
fn check_received(rx: &Receiver, w: u32, h: u32, step: u32, want: u64) -> Vec<u64> {
    let mut seqs = Vec::new();
    while (seqs.len() as u64) < want {
        let Ok((stamp, mw, mh, encoding, ms, pixels)) = rx.recv.recv_timeout(Duration::from_secs(20)) else {
            break;
        };
        assert!(stamp >= BASE && (stamp - BASE).is_multiple_of(STEP), "stamp {stamp}");
        let seq = (stamp - BASE) / STEP;
        assert_eq!((mw, mh, encoding.as_str(), ms), (w, h, "nv12", step), "frame {seq}");
        assert_eq!(pixels.len(), (step * h * 3 / 2) as usize, "frame {seq}");
        let expected = packed_pattern(w, h, seq);
        let rows_ok =
            expected.chunks(w as usize).zip(pixels.chunks(step as usize)).all(|(e, r)| e == &r[..w as usize]);
        assert!(rows_ok, "frame {seq}: pixels differ from its pattern");
        assert!(seqs.last().is_none_or(|&l| l < seq), "frame {seq} after {seqs:?}");
        seqs.push(seq);
    }
    seqs
}

/// Waits until the stream delivered more than `taken` frames to consumer 0 (the bridge took the
/// frame presented last), at most 20 s.
fn wait_delivered(camera: &Producer, taken: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while camera.consumer_stats(0).map_or(0, |s| s.delivered) <= taken {
        assert!(Instant::now() < deadline, "the bridge took no frame");
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn config(topic: &str) -> BridgeConfig {
    BridgeConfig::new(topic).multicast_scouting(false).reliable().stamp_clock(StampClock::AsIs)
}

/// A stream of three `format` frames whose one consumer, a mailbox one on `dev`'s CUDA engine,
/// is handed to a bridge publishing on `config`'s topic, and the receiving side of that topic.
/// The producer (the camera) is on `dev`'s CUDA engine where `cuda_camera`, else the CPU.
fn bridged(
    dev: &CudaGpu,
    format: FrameFormat,
    cuda_camera: bool,
    config: &BridgeConfig,
) -> (Producer, BridgeConsumer, Receiver) {
    let mut b = Backend::with_library_on(nvsci::NvSci::mock(), dev)
        .stream(format)
        .frames(3)
        .timeout(Duration::from_secs(10));
    if cuda_camera {
        b = b.producer(Engine::Cuda(dev.clone()));
    }
    let ring = b.consumer(ConsumerDesc::new(Engine::Cuda(dev.clone())).mailbox()).build().unwrap();
    let (camera, mut consumers) = ring.split().unwrap();
    let (tx, rx) = sessions(config);
    let bridge = BridgeConsumer::spawn_on(tx, consumers.remove(0), config).unwrap();
    (camera, bridge, rx)
}

/// A CUDA camera's frame `seq`: its pattern (rendered in `host`) written on the camera's stream,
/// after the release waits its acquire enqueued there, and presented with a signal after it.
fn present_pattern(camera: &mut Producer, host: &mut [u8], seq: u64) {
    let layout = camera.layout().clone();
    let stream = camera.stream().unwrap().clone();
    let mut f = camera.acquire().unwrap();
    f.set_capture_time(BASE + seq * STEP);
    fill_test_pattern(&layout, seq, host).unwrap();
    stream.memcpy_htod(host, camera.cuda_buffer(&f).unwrap()).unwrap();
    camera.present(f).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cuda_camera_through_a_cuda_bridge_consumer_every_frame_verified() {
    let Some(dev) = gpu() else { return };
    // 640-pixel rows are 768 bytes in the mock's frames: as stored, each plane is one copy of
    // its rows with their padding; packed, one 2D copy into rows of 640 bytes.
    for rows in [Rows::Stored, Rows::Packed] {
        let (w, h) = (640u32, 480u32);
        let config = config(&format!("/cuda/image/{rows:?}").to_lowercase()).rows(rows);
        let (mut camera, bridge, rx) = bridged(&dev, FrameFormat::nv12(w, h), true, &config);
        let layout = camera.layout().clone();
        let pitch = layout.planes[0].pitch;
        assert!(pitch > w && layout.planes[1].pitch == pitch, "{layout:?}");
        let mut host = vec![0u8; layout.size as usize];
        for seq in 0..FRAMES {
            // The next frame once the bridge took this one, so its mailbox replaces none.
            present_pattern(&mut camera, &mut host, seq);
            wait_delivered(&camera, seq);
        }
        let step = if rows == Rows::Stored { pitch } else { w };
        let seqs = check_received(&rx, w, h, step, FRAMES);
        let stats = bridge.stop();
        assert_eq!(seqs, (0..FRAMES).collect::<Vec<_>>(), "{rows:?}: {stats:?}");
        assert_eq!((stats.published, stats.readbacks), (FRAMES, FRAMES), "{stats:?}");
        assert_eq!((stats.skipped, stats.stream_errors, stats.publish_errors), (0, 0, 0), "{stats:?}");
        assert!(stats.readback_copy_ns > 0 && stats.readback_copy_ns <= stats.readback_ns, "{stats:?}");
        // The mock's frames are host memory: both planes of every frame copied by the kernel.
        assert_eq!(stats.readback_kernel_planes, 2 * FRAMES, "{stats:?}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn block_linear_frames_are_published_as_nv12_rows_every_pixel_verified() {
    // A CUDA camera lays each frame's pitch-linear pattern out into the block-linear planes
    // (`upload_planes`: a 2D copy into each plane's CUDA array); the bridge copies each plane's
    // array back out as rows of `w` bytes (a 2D copy from the array into pinned memory, on its
    // stream between the present wait and the release signal) and publishes them as nv12.
    // Dimensions that are no multiple of a tile, and rows as stored asked for (a block-linear
    // frame has none: packed).
    let Some(dev) = gpu() else { return };
    let (w, h) = (1000u32, 562u32);
    let config = config("/cuda/block_linear");
    let (mut camera, bridge, rx) = bridged(&dev, FrameFormat::nv12_block_linear(w, h), true, &config);
    for seq in 0..FRAMES {
        let frame = packed_pattern(w, h, seq);
        let (y, uv) = frame.split_at((w * h) as usize);
        let mut f = camera.acquire().unwrap();
        f.set_capture_time(BASE + seq * STEP);
        camera.upload_planes(&f, &[y, uv]).unwrap();
        camera.present(f).unwrap();
        wait_delivered(&camera, seq);
    }
    let seqs = check_received(&rx, w, h, w, FRAMES);
    let stats = bridge.stop();
    assert_eq!(seqs, (0..FRAMES).collect::<Vec<_>>(), "{stats:?}");
    assert_eq!((stats.published, stats.readbacks), (FRAMES, FRAMES), "{stats:?}");
    assert_eq!((stats.skipped, stats.stream_errors, stats.publish_errors), (0, 0, 0), "{stats:?}");
    // Out of the planes' CUDA arrays: a copy engine's copies.
    assert_eq!(stats.readback_kernel_planes, 0, "{stats:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_copy_waits_for_a_late_present_fence_and_the_camera_for_the_copy() {
    // A CPU camera that presents each frame with a fence it signals only after writing the
    // frame (every 10th after a pause): a copy that did not wait for the present fence on its
    // stream would publish a stale frame; a release signalled before the copy finished would let
    // the camera rewrite the slot under it. The camera goes as fast as the ring lets it (3
    // slots): the bridge's mailbox skips frames, and every frame published must be intact.
    let Some(dev) = gpu() else { return };
    let (w, h) = (320u32, 240u32);
    let config = config("/cuda/late");
    let (mut camera, bridge, rx) = bridged(&dev, FrameFormat::nv12(w, h), false, &config);
    let layout = camera.layout().clone();
    let frames = 300u64;
    let mut host = vec![0u8; layout.size as usize];
    for seq in 0..frames {
        let mut f = camera.acquire().unwrap();
        f.set_capture_time(BASE + seq * STEP);
        let buffer = camera.buffer(&f).unwrap().dup().unwrap();
        let obj = camera.present_sync().unwrap().clone();
        let fence = obj.generate_fence().unwrap();
        camera.present_after(f, fence).unwrap();
        if seq % 10 == 0 {
            std::thread::sleep(Duration::from_millis(3));
        }
        fill_test_pattern(&layout, seq, &mut host).unwrap();
        buffer.cpu_write().unwrap()[..host.len()].copy_from_slice(&host);
        obj.signal().unwrap();
    }
    // The last frame is published (nothing replaces it), so it ends the check.
    let deadline = Instant::now() + Duration::from_secs(20);
    while bridge.stats().last_sequence != Some(frames - 1) {
        assert!(Instant::now() < deadline, "{:?}", bridge.stats());
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = bridge.stop();
    let seqs = check_received(&rx, w, h, layout.planes[0].pitch, stats.published);
    assert_eq!(seqs.len() as u64, stats.published, "{stats:?}");
    assert_eq!(seqs.last(), Some(&(frames - 1)));
    assert_eq!(stats.published + stats.skipped, frames, "{stats:?}");
    assert_eq!(stats.readbacks, stats.published, "{stats:?}");
    assert_eq!((stats.stream_errors, stats.publish_errors), (0, 0), "{stats:?}");
    assert_eq!(stats.readback_kernel_planes, 2 * stats.readbacks, "{stats:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_stop_with_the_next_frames_copies_pending_publishes_nothing_twice() {
    // The bridge enqueues a frame's copies before it puts the previous frame's message. A CUDA
    // camera presents as fast as the ring lets it (3 slots), so the bridge mostly has a frame's
    // copies pending when it is stopped: that frame is waited for and dropped, never published,
    // and every frame the bridge took is published once (in increasing order, each verified) or
    // is that last one.
    let Some(dev) = gpu() else { return };
    let (w, h) = (640u32, 480u32);
    let config = config("/cuda/stop");
    let (mut camera, bridge, rx) = bridged(&dev, FrameFormat::nv12(w, h), true, &config);
    let layout = camera.layout().clone();
    let mut host = vec![0u8; layout.size as usize];
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seq = 0u64;
    while bridge.stats().published < 40 {
        assert!(Instant::now() < deadline, "{:?}", bridge.stats());
        present_pattern(&mut camera, &mut host, seq);
        seq += 1;
    }
    let stats = bridge.stop();
    let taken = camera.consumer_stats(0).unwrap().delivered;
    let seqs = check_received(&rx, w, h, layout.planes[0].pitch, stats.published);
    assert_eq!(seqs.len() as u64, stats.published, "{stats:?}");
    assert_eq!((stats.stream_errors, stats.publish_errors), (0, 0), "{stats:?}");
    // Each frame taken was copied and published once, but for at most one whose copies were
    // pending at the stop (copied, not counted as published nor as a read-back).
    assert_eq!(stats.readbacks, stats.published, "{stats:?}");
    assert!(taken == stats.published || taken == stats.published + 1, "taken {taken}, {stats:?}");
    assert!(stats.readback_wait_ns <= stats.readback_ns, "{stats:?}");
    // Nothing more arrives: no frame was published after the stop.
    assert!(rx.recv.recv_timeout(Duration::from_millis(500)).is_err());
    drop(camera);
}
