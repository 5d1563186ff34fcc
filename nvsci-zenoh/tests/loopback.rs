//! Two processes over TCP on the loopback interface (Zenoh peers, multicast scouting off,
//! explicit endpoints): this test process runs the camera (a mock NvSci stream) and the bridge
//! consumer; a second process, this test binary started again as `receiver_process`, runs the
//! receiving side and reports what it saw on its standard output.

#[path = "../../examples/support/nv12_pattern.rs"]
mod nv12_pattern;

use nv12_pattern::fill_test_pattern;
use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat, FrameLayout};
use nvsci_zenoh::attachment::Attachment;
use nvsci_zenoh::cdr::Image;
use nvsci_zenoh::graph::{IMAGE_TYPE_HASH, IMAGE_TYPE_NAME};
use nvsci_zenoh::{BridgeConfig, BridgeConsumer, BridgeProducer, Congestion, Rows, StampClock};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zenoh::Wait;

const TOPIC: &str = "/loopback/image";
/// Capture time of frame `s`: BASE + s * STEP ns (the stamps carry it unchanged).
const BASE: u64 = 1_700_000_000_000_000_000;
const STEP: u64 = 1_000_000;
const CHILD_ENV: &str = "NVSCI_ZENOH_TEST_CHILD";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn config() -> BridgeConfig {
    BridgeConfig::new(TOPIC).multicast_scouting(false).reliable().stamp_clock(StampClock::AsIs)
}

fn mock() -> Backend {
    Backend::with_library(nvsci::NvSci::mock())
}

/// The camera sequence a capture time stands for.
fn sequence_of(capture_ns: u64) -> u64 {
    assert!(capture_ns >= BASE && (capture_ns - BASE).is_multiple_of(STEP), "capture time {capture_ns}");
    (capture_ns - BASE) / STEP
}

/// Whether `pixels` (NV12 rows of `step` bytes, as a message carries them) are frame `seq` of
/// the pattern: each row's first `w` bytes compared with the pattern written into a packed
/// layout.
fn is_pattern(w: u32, h: u32, step: u32, seq: u64, pixels: &[u8]) -> bool {
    let layout = FrameLayout::packed(FrameFormat::nv12(w, h), 1, 1).unwrap();
    let mut expected = vec![0u8; layout.size as usize];
    fill_test_pattern(&layout, seq, &mut expected).unwrap();
    let (w, step) = (w as usize, step as usize);
    step >= w
        && pixels.len() == step * h as usize * 3 / 2
        && expected.chunks(w).zip(pixels.chunks(step)).all(|(e, r)| e == &r[..w])
}

/// The receiving process, this binary started again.
struct Receiver {
    child: Child,
    lines: std::io::Lines<BufReader<ChildStdout>>,
}

impl Receiver {
    /// Starts it in `mode` connecting to `endpoint`, and waits for its `READY <zid>` line.
    fn start(mode: &str, endpoint: &str, w: u32, h: u32) -> (Self, String) {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["receiver_process", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, format!("{mode} {endpoint} {w} {h}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut r = Self { child, lines };
        let zid = r.line_with("READY ").expect("the receiver did not start");
        (r, zid)
    }

    /// What follows `prefix` on the first line holding it (libtest prints on the same lines).
    fn line_with(&mut self, prefix: &str) -> Option<String> {
        for line in self.lines.by_ref() {
            let line = line.ok()?;
            if let Some(at) = line.find(prefix) {
                return Some(line[at + prefix.len()..].to_owned());
            }
        }
        None
    }

    /// Tells it to finish (closes its standard input) and returns its `RESULT` counters.
    fn finish(mut self) -> HashMap<String, u64> {
        drop(self.child.stdin.take());
        let result = self.line_with("RESULT ").expect("the receiver reported no result");
        let status = self.child.wait().unwrap();
        assert!(status.success(), "receiver: {status}");
        result
            .split_whitespace()
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_owned(), v.parse().unwrap())
            })
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // A test that failed before `finish`: do not leave the process behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits until the session sees a subscription's liveliness token (`MS`) under `prefix`, and
/// returns every token under `prefix`, sorted.
fn wait_for_tokens(session: &zenoh::Session, prefix: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let replies = session.liveliness().get(format!("{prefix}/**")).wait().unwrap();
        let mut tokens = Vec::new();
        while let Ok(reply) = replies.recv() {
            if let Ok(sample) = reply.result() {
                tokens.push(sample.key_expr().to_string());
            }
        }
        if tokens.iter().any(|t| t.contains("/MS/")) {
            tokens.sort();
            return tokens;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no subscription token under {prefix} within 20 s");
}

/// What the camera did.
struct Camera {
    presented: u64,
    acquire_errors: u64,
}

/// Presents `n` frames of the pattern, one every `period`, through a stream whose one
/// consumer is the bridge (a mailbox), and waits until the bridge took or skipped the last.
fn run_camera(
    session: &zenoh::Session,
    config: &BridgeConfig,
    w: u32,
    h: u32,
    n: u64,
    period: Duration,
) -> (Camera, nvsci_zenoh::PublishStats) {
    let ring = mock()
        .stream(FrameFormat::nv12(w, h))
        .frames(4)
        .timeout(Duration::from_millis(200))
        .consumer(ConsumerDesc::cpu().mailbox())
        .build()
        .unwrap();
    let (mut camera, mut consumers) = ring.split().unwrap();
    let bridge = BridgeConsumer::spawn_on(session.clone(), consumers.remove(0), config).unwrap();
    let mut cam = Camera { presented: 0, acquire_errors: 0 };
    let start = Instant::now();
    for s in 0..n {
        // The camera's clock: frame s at start + s * period, whatever the bridge does.
        if let Some(wait) = (start + period * s as u32).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let mut frame = match camera.acquire() {
            Ok(f) => f,
            Err(e) => {
                eprintln!("camera: acquire {s}: {e}");
                cam.acquire_errors += 1;
                continue;
            }
        };
        assert_eq!(frame.sequence(), s);
        fill_test_pattern(camera.layout(), s, &mut camera.cpu_write(&frame).unwrap()).unwrap();
        frame.set_capture_time(BASE + s * STEP);
        camera.present(frame).unwrap();
        cam.presented += 1;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while {
        let st = bridge.stats();
        st.published + st.skipped + st.publish_errors < n && Instant::now() < deadline
    } {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = bridge.stop();
    (cam, stats)
}

#[test]
fn frames_cross_two_processes() {
    // Rows as stored (padding included) and packed (rows of `w` bytes), both published from the
    // frames' mappings: the receiving side takes either.
    for rows in [Rows::Stored, Rows::Packed] {
        frames_cross(rows);
    }
}

fn frames_cross(rows: Rows) {
    let (w, h, n) = (320, 240, 40);
    let port = free_port();
    let cfg = config().listen(format!("tcp/127.0.0.1:{port}")).rows(rows);
    let session = zenoh::open(cfg.zenoh_config().unwrap()).wait().unwrap();
    let (receiver, child_zid) = Receiver::start("bridge", &format!("tcp/127.0.0.1:{port}"), w, h);
    // The receiver's node and subscription tokens, as rmw_zenoh writes them (reliable,
    // keep-last 1).
    let tokens = wait_for_tokens(&session, &format!("@ros2_lv/0/{child_zid}"));
    assert_eq!(
        tokens,
        [
            format!("@ros2_lv/0/{child_zid}/0/0/NN/%/%/nvsci_bridge"),
            format!(
                "@ros2_lv/0/{child_zid}/0/1/MS/%/%/nvsci_bridge/%loopback%image/{IMAGE_TYPE_NAME}/\
                 {IMAGE_TYPE_HASH}/::,1:,:,:,,"
            ),
        ]
    );
    let (cam, stats) = run_camera(&session, &cfg, w, h, n, Duration::from_millis(25));
    let r = receiver.finish();
    eprintln!("{rows:?}: camera presented {}, bridge {stats:?}, receiver {r:?}", cam.presented);
    assert_eq!((cam.presented, cam.acquire_errors), (n, 0));
    assert_eq!(stats.published + stats.skipped, n, "every frame published or skipped by the mailbox");
    assert_eq!((stats.publish_errors, stats.stream_errors), (0, 0));
    assert!(stats.published > 0);
    // Reliable and blocking on loopback: every message published arrived.
    assert_eq!(r["received"], stats.published);
    assert_eq!(r["presented"] + r["replaced"], r["received"]);
    assert_eq!(r["rejected"] + r["stream_errors"], 0);
    // Every frame presented on the receiving side was read and is the pattern of its sequence.
    assert_eq!(r["verified"], r["presented"]);
    assert_eq!(r["wrong"], 0);
    assert!(r["verified"] > 0);
    drop(session);
}

#[test]
fn slow_receiver_drops_frames_at_the_bridge_not_the_camera() {
    // 640x480 NV12 (460 800 bytes): the loopback's socket buffers and Zenoh's queue hold a
    // few dozen at most; the receiver takes 40 ms per message, the camera presents one every
    // 10 ms.
    let (w, h, n) = (640, 480, 120);
    let port = free_port();
    let cfg = config().listen(format!("tcp/127.0.0.1:{port}")).congestion(Congestion::Block);
    let session = zenoh::open(cfg.zenoh_config().unwrap()).wait().unwrap();
    let (receiver, child_zid) = Receiver::start("slow", &format!("tcp/127.0.0.1:{port}"), w, h);
    wait_for_tokens(&session, &format!("@ros2_lv/0/{child_zid}"));
    let (cam, stats) = run_camera(&session, &cfg, w, h, n, Duration::from_millis(10));
    let r = receiver.finish();
    eprintln!("camera presented {}, bridge {stats:?}, receiver {r:?}", cam.presented);
    // The camera presented every frame, never held back by the link (each frame published from
    // its mapping, held while its put was blocked).
    assert_eq!((cam.presented, cam.acquire_errors), (n, 0));
    // The bridge skipped frames (its mailbox kept the newest while a put was blocked) ...
    assert!(stats.skipped > 0, "{stats:?}");
    assert_eq!(stats.published + stats.skipped, n);
    // ... and everything it published arrived, intact.
    assert_eq!(r["received"], stats.published);
    assert_eq!((r["verified"], r["wrong"]), (r["received"], 0));
}

/// The receiving process of the tests above (started by them; it fails when run alone).
#[test]
#[ignore = "the receiving process of the loopback tests, which start it"]
fn receiver_process() {
    let args =
        std::env::var(CHILD_ENV).expect("started by the loopback tests with NVSCI_ZENOH_TEST_CHILD set");
    let args: Vec<&str> = args.split_whitespace().collect();
    let (mode, endpoint) = (args[0], args[1]);
    let (w, h): (u32, u32) = (args[2].parse().unwrap(), args[3].parse().unwrap());
    let cfg = config().connect(endpoint);
    // Standard input closes when the camera side is done.
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        d.store(true, Ordering::Release);
    });
    // Waits until the camera side is done and nothing arrived for a second.
    let last_arrival = Arc::new(Mutex::new(Instant::now()));
    let quiet = |last: &Mutex<Instant>| {
        done.load(Ordering::Acquire) && last.lock().unwrap().elapsed() > Duration::from_secs(1)
    };
    match mode {
        "bridge" => {
            let ring = mock()
                .stream(FrameFormat::nv12(w, h))
                .frames(4)
                .timeout(Duration::from_millis(100))
                .consumer(ConsumerDesc::cpu())
                .build()
                .unwrap();
            let (producer, mut consumers) = ring.split().unwrap();
            let mut consumer = consumers.remove(0);
            let bridge = BridgeProducer::spawn(producer, &cfg).unwrap();
            println!("READY {}", bridge.zid());
            let (mut verified, mut wrong) = (0u64, 0u64);
            let mut last_message_seq = 0i64;
            let layout = consumer.layout().clone();
            let mut expected = vec![0u8; layout.size as usize];
            loop {
                let frame = match consumer.acquire() {
                    Ok(f) => f,
                    Err(_) if quiet(&last_arrival) => break,
                    Err(_) => continue,
                };
                *last_arrival.lock().unwrap() = Instant::now();
                let seq = sequence_of(frame.capture_time());
                let bytes = consumer.cpu_read(&frame).unwrap();
                // The pattern written over a copy of the frame changes nothing (padding kept).
                expected.copy_from_slice(&bytes);
                fill_test_pattern(&layout, seq, &mut expected).unwrap();
                // The user header: the publisher's message sequence number, increasing.
                let msg_seq = i64::from_le_bytes(frame.user_header()[..8].try_into().unwrap());
                if expected[..] == bytes[..] && msg_seq > last_message_seq {
                    verified += 1;
                } else {
                    wrong += 1;
                }
                last_message_seq = msg_seq;
                drop(bytes);
                consumer.release(frame).unwrap();
            }
            let (_, s) = bridge.stop();
            let rejected =
                s.malformed + s.bad_attachment + s.unknown_encoding + s.bad_size + s.mismatched + s.too_large;
            println!(
                "RESULT received={} presented={} replaced={} rejected={rejected} stream_errors={} verified={verified} wrong={wrong}",
                s.received, s.presented, s.replaced, s.stream_errors
            );
        }
        "slow" => {
            let session = zenoh::open(cfg.zenoh_config().unwrap()).wait().unwrap();
            let received = Arc::new(AtomicU64::new(0));
            let verified = Arc::new(AtomicU64::new(0));
            let (rc, vc, la) = (received.clone(), verified.clone(), last_arrival.clone());
            let _sub = session
                .declare_subscriber(cfg.key_expr())
                .callback(move |sample| {
                    rc.fetch_add(1, Ordering::AcqRel);
                    let payload = sample.payload().to_bytes();
                    let ok = sample.attachment().is_some_and(|a| Attachment::parse(&a.to_bytes()).is_ok())
                        && Image::decode(&payload).is_ok_and(|img| {
                            (img.width, img.height, img.encoding) == (w, h, "nv12")
                                && is_pattern(
                                    w,
                                    h,
                                    img.step,
                                    sequence_of(img.stamp.to_nanos().unwrap()),
                                    img.data,
                                )
                        });
                    if ok {
                        vc.fetch_add(1, Ordering::AcqRel);
                    }
                    std::thread::sleep(Duration::from_millis(40));
                    *la.lock().unwrap() = Instant::now();
                })
                .wait()
                .unwrap();
            // The token the camera side waits for (the subscriber is declared first).
            let token = format!("@ros2_lv/0/{}/0/1/MS/%/%/slow_receiver", session.zid());
            let _token = session.liveliness().declare_token(token).wait().unwrap();
            println!("READY {}", session.zid());
            while !quiet(&last_arrival) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let (r, v) = (received.load(Ordering::Acquire), verified.load(Ordering::Acquire));
            println!("RESULT received={r} verified={v} wrong={}", r - v);
        }
        other => panic!("unknown mode {other}"),
    }
}
