//! Starting a bridge: attaching to a running stream's reserved seat, and the parties and
//! formats it refuses (typed errors, before anything is published).

use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat};
use nvsci_zenoh::{BridgeConfig, BridgeConsumer, BridgeError, BridgeProducer};
use std::time::{Duration, Instant};
use zenoh::Wait;

fn session() -> zenoh::Session {
    let c = BridgeConfig::new("/t").multicast_scouting(false).listen("tcp/127.0.0.1:0");
    zenoh::open(c.zenoh_config().unwrap()).wait().unwrap()
}

fn backend() -> Backend {
    Backend::with_library(nvsci::NvSci::mock())
}

#[test]
fn attaches_to_a_reserved_seat_of_a_running_stream() {
    let ring = backend()
        .stream(FrameFormat::Rgba { width: 16, height: 8 })
        .timeout(Duration::from_millis(100))
        .reserve(ConsumerDesc::cpu(), 1)
        .build()
        .unwrap();
    let (mut camera, _) = ring.split().unwrap();
    let config = BridgeConfig::new("/attach/image").multicast_scouting(false).listen("tcp/127.0.0.1:0");
    let bridge = BridgeConsumer::attach(&camera.attacher(), &config).unwrap();
    assert_eq!(bridge.key_expr(), config.key_expr());
    // A put with no subscriber succeeds: every frame presented from now on is published or
    // skipped by the bridge's mailbox.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut presented = 0;
    while bridge.stats().published < 3 && Instant::now() < deadline {
        let f = camera.acquire().unwrap();
        camera.cpu_write(&f).unwrap().fill(9);
        camera.present(f).unwrap();
        presented += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = bridge.stop();
    assert!(s.published >= 3, "{s:?}");
    assert!(s.published + s.skipped <= presented);
    assert_eq!((s.publish_errors, s.stream_errors), (0, 0));
    // The seat is vacant again: the next one attaches.
    let again = camera.attacher().attach(ConsumerDesc::cpu().mailbox());
    assert!(again.is_ok(), "{again:?}");
}

#[test]
fn refuses_what_it_cannot_bridge() {
    let config = BridgeConfig::new("/refused/image");
    // A FIFO consumer would let a slow link hold the camera back.
    let ring = backend().stream(FrameFormat::nv12(16, 8)).consumer(ConsumerDesc::cpu()).build().unwrap();
    let (_camera, mut consumers) = ring.split().unwrap();
    assert!(matches!(
        BridgeConsumer::spawn_on(session(), consumers.remove(0), &config),
        Err(BridgeError::NotMailbox { .. })
    ));
    // Raw frames hold no image; block-linear frames are tiled.
    for format in [FrameFormat::Raw { size: 4096 }, FrameFormat::nv12_block_linear(64, 32)] {
        let ring = backend().stream(format).consumer(ConsumerDesc::cpu().mailbox()).build().unwrap();
        let (producer, mut consumers) = ring.split().unwrap();
        let got = BridgeConsumer::spawn_on(session(), consumers.remove(0), &config);
        assert!(matches!(got, Err(BridgeError::Format { format: f }) if f == format), "{format:?}: {got:?}");
        let got = BridgeProducer::spawn_on(session(), producer, &config);
        assert!(matches!(got, Err(BridgeError::Format { format: f }) if f == format), "{format:?}: {got:?}");
    }
    // A configuration that cannot work is refused before anything is declared.
    let ring =
        backend().stream(FrameFormat::nv12(16, 8)).consumer(ConsumerDesc::cpu().mailbox()).build().unwrap();
    let (_camera, mut consumers) = ring.split().unwrap();
    assert!(matches!(
        BridgeConsumer::spawn_on(session(), consumers.remove(0), &BridgeConfig::new("no/slash")),
        Err(BridgeError::Config(_))
    ));
}

#[test]
fn stops_and_drops_promptly_while_no_frame_comes() {
    // A stream whose timeout is a minute: the bridge waits for frames in slices of its poll
    // interval, so neither stopping nor dropping it waits for that timeout.
    for stop in [true, false] {
        let ring = backend()
            .stream(FrameFormat::nv12(16, 8))
            .timeout(Duration::from_secs(60))
            .consumer(ConsumerDesc::cpu().mailbox())
            .build()
            .unwrap();
        let (_camera, mut consumers) = ring.split().unwrap();
        let config = BridgeConfig::new("/idle/image");
        let bridge = BridgeConsumer::spawn_on(session(), consumers.remove(0), &config).unwrap();
        // The thread is inside a wait for a frame by now.
        std::thread::sleep(Duration::from_millis(300));
        let start = Instant::now();
        let stats = if stop {
            bridge.stop()
        } else {
            let stats = bridge.stats();
            drop(bridge);
            stats
        };
        let took = start.elapsed();
        // Generous: a loaded machine may be slow, but nowhere near the stream's minute.
        assert!(took < Duration::from_secs(20), "stop={stop}: took {took:?}");
        assert_eq!(stats.published + stats.stream_errors + stats.publish_errors, 0, "{stats:?}");
    }
}
