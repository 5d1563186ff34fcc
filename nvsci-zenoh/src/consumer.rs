//! The bridge consumer: a mailbox consumer of a stream that publishes each frame it reads as a
//! `sensor_msgs/msg/Image` on the topic's key expression, with rmw_zenoh's attachment, and
//! makes itself visible on the ROS graph with a node and a publisher token.

use crate::attachment::Attachment;
use crate::cdr::{Image, Time};
use crate::clock::{monotonic_to_realtime, realtime_ns};
use crate::config::{BridgeConfig, Congestion, StampClock};
use crate::encoding::Encoding;
use crate::error::BridgeError;
use crate::graph::{gid, EntityKind, NodeName, Reliability};
use nvsci::pipeline::{Attacher, Consumer, ConsumerDesc, ConsumerFrame, FrameLayout, QueueMode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use zenoh::Wait;

/// The bridge consumer's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PublishStats {
    /// Frames read from the stream and published.
    pub published: u64,
    /// Frames the stream presented that the bridge never read: replaced in its mailbox while
    /// it was publishing an earlier one (the stream's own count for this consumer).
    pub skipped: u64,
    /// Frames read but not published: Zenoh refused the message.
    pub publish_errors: u64,
    /// Failed acquires or reads of a frame (other than the wait for the next one timing out).
    pub stream_errors: u64,
    /// The stream sequence of the last frame published.
    pub last_sequence: Option<u64>,
}

#[derive(Default)]
struct Counters {
    published: AtomicU64,
    skipped: AtomicU64,
    publish_errors: AtomicU64,
    stream_errors: AtomicU64,
    /// Last sequence + 1 (0: none yet).
    last: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> PublishStats {
        let last = self.last.load(Ordering::Acquire);
        PublishStats {
            published: self.published.load(Ordering::Acquire),
            skipped: self.skipped.load(Ordering::Acquire),
            publish_errors: self.publish_errors.load(Ordering::Acquire),
            stream_errors: self.stream_errors.load(Ordering::Acquire),
            last_sequence: last.checked_sub(1),
        }
    }
}

/// A stream's frames on Zenoh, as ROS 2 (rmw_zenoh) sees a `sensor_msgs/msg/Image` publisher.
///
/// A thread acquires each frame from the bridge's mailbox consumer (the newest frame: a slow
/// link makes the bridge skip frames, never the camera wait), copies its rows once into the
/// message, releases it, and publishes the message. Dropping the bridge stops the thread
/// (after its current wait for a frame, at most the stream's timeout) and undeclares its
/// tokens and publisher.
pub struct BridgeConsumer {
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
    key_expr: String,
    publisher_token: String,
    node_token: String,
    zid: String,
    // Dropped after the thread ended (Drop joins it first).
    _tokens: Vec<zenoh::liveliness::LivelinessToken>,
    _session: zenoh::Session,
}

impl std::fmt::Debug for BridgeConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BridgeConsumer")
            .field("key_expr", &self.key_expr)
            .field("zid", &self.zid)
            .field("stats", &self.stats())
            .finish()
    }
}

/// What the thread needs to turn a frame into a message.
struct Frames {
    layout: FrameLayout,
    encoding: Encoding,
    width: u32,
    height: u32,
}

impl Frames {
    fn new(layout: FrameLayout) -> Result<Self, BridgeError> {
        let Some((encoding, width, height)) = Encoding::of_format(&layout.format) else {
            return Err(BridgeError::Format { format: layout.format });
        };
        if layout.format.image_layout() != Some(nvsci::buf::ImageLayout::PitchLinear) {
            return Err(BridgeError::Format { format: layout.format });
        }
        let rows_ok = match encoding {
            Encoding::Nv12 => layout.nv12_fits(layout.size as usize, "frame").is_ok(),
            _ => layout.planes.first().is_some_and(|p| {
                p.pitch as u64 >= encoding.min_step(width)
                    && p.offset + p.pitch as u64 * (height as u64 - 1) + encoding.min_step(width)
                        <= layout.size
            }),
        };
        if !rows_ok {
            return Err(BridgeError::Format { format: layout.format });
        }
        Ok(Self { layout, encoding, width, height })
    }

    /// The rows of each plane (offset, pitch, rows) and the bytes of one row.
    fn planes(&self) -> (nvsci::heapless::Vec<(usize, usize, usize), 2>, usize) {
        let row = self.encoding.min_step(self.width) as usize;
        let h = self.height as usize;
        let p = &self.layout.planes;
        let mut v = nvsci::heapless::Vec::new();
        let _ = v.push((p[0].offset as usize, p[0].pitch as usize, h));
        if self.encoding == Encoding::Nv12 {
            let _ = v.push((p[1].offset as usize, p[1].pitch as usize, h / 2));
        }
        (v, row)
    }
}

impl BridgeConsumer {
    /// Attaches a CPU mailbox consumer to a running stream (a seat reserved with
    /// `StreamBuilder::reserve(ConsumerDesc::cpu(), 1)`) and starts publishing it.
    pub fn attach(attacher: &Attacher, config: &BridgeConfig) -> Result<Self, BridgeError> {
        let consumer = attacher.attach(ConsumerDesc::cpu().mailbox()).map_err(BridgeError::Stream)?;
        Self::spawn(consumer, config)
    }

    /// Starts publishing the frames of `consumer`: a CPU consumer in mailbox mode of a stream of
    /// pitch-linear NV12 or RGBA frames. Opens a Zenoh session from `config`.
    pub fn spawn(consumer: Consumer, config: &BridgeConfig) -> Result<Self, BridgeError> {
        let session = zenoh::open(config.zenoh_config()?)
            .wait()
            .map_err(|e| BridgeError::zenoh("open a session", e))?;
        Self::spawn_on(session, consumer, config)
    }

    /// As [`spawn`](Self::spawn), on a session the caller opened (its mode and endpoints are
    /// its own; `config`'s are not used).
    pub fn spawn_on(
        session: zenoh::Session,
        consumer: Consumer,
        config: &BridgeConfig,
    ) -> Result<Self, BridgeError> {
        config.validate()?;
        if !consumer.engine().is_cpu() {
            return Err(BridgeError::NotCpu);
        }
        if consumer.mode() != QueueMode::Mailbox {
            return Err(BridgeError::NotMailbox { mode: consumer.mode() });
        }
        let frames = Frames::new(consumer.layout().clone())?;
        let zid = session.zid().to_string();
        let node = NodeName {
            domain: config.domain,
            zid: zid.clone(),
            nid: 0,
            enclave: config.enclave.clone(),
            namespace: config.namespace.clone(),
            name: config.node.clone(),
        };
        let node_token = node.token();
        let publisher_token = node.entity_token(EntityKind::Publisher, 1, &config.topic, &config.qos());
        let key_expr = config.key_expr();
        let publisher = session
            .declare_publisher(key_expr.clone())
            .congestion_control(match config.congestion {
                Congestion::Block => zenoh::qos::CongestionControl::Block,
                Congestion::Drop => zenoh::qos::CongestionControl::Drop,
            })
            .reliability(match config.reliability {
                Reliability::Reliable => zenoh::qos::Reliability::Reliable,
                Reliability::BestEffort => zenoh::qos::Reliability::BestEffort,
            })
            .wait()
            .map_err(|e| BridgeError::zenoh("declare the publisher", e))?;
        let mut tokens = Vec::with_capacity(2);
        for t in [&node_token, &publisher_token] {
            let token = session
                .liveliness()
                .declare_token(t.clone())
                .wait()
                .map_err(|e| BridgeError::zenoh("declare a liveliness token", e))?;
            tokens.push(token);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let worker = Worker {
            consumer,
            publisher,
            frames,
            gid: gid(&publisher_token),
            frame_id: config.frame_id.clone(),
            stamp_clock: config.stamp_clock,
            next_message: 1,
            stop: stop.clone(),
            counters: counters.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("nvsci-zenoh-pub".into())
            .spawn(move || worker.run())
            .map_err(|e| BridgeError::Thread(e.kind()))?;
        log::info!("bridge consumer: publishing on {key_expr} as {publisher_token}");
        Ok(Self {
            stop,
            counters,
            thread: Some(thread),
            key_expr,
            publisher_token,
            node_token,
            zid,
            _tokens: tokens,
            _session: session,
        })
    }

    /// The counters so far.
    pub fn stats(&self) -> PublishStats {
        self.counters.snapshot()
    }

    /// The key expression the messages are published on.
    pub fn key_expr(&self) -> &str {
        &self.key_expr
    }

    /// The publisher's liveliness token.
    pub fn publisher_token(&self) -> &str {
        &self.publisher_token
    }

    /// The node's liveliness token.
    pub fn node_token(&self) -> &str {
        &self.node_token
    }

    /// The Zenoh session's id (lowercase hex).
    pub fn zid(&self) -> &str {
        &self.zid
    }

    /// Stops publishing and returns the final counters.
    pub fn stop(mut self) -> PublishStats {
        self.halt();
        self.stats()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                log::error!("bridge consumer: the publishing thread panicked");
            }
        }
    }
}

impl Drop for BridgeConsumer {
    fn drop(&mut self) {
        self.halt();
    }
}

struct Worker {
    consumer: Consumer,
    publisher: zenoh::pubsub::Publisher<'static>,
    frames: Frames,
    gid: [u8; 16],
    frame_id: String,
    stamp_clock: StampClock,
    next_message: i64,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
}

impl Worker {
    fn run(mut self) {
        while !self.stop.load(Ordering::Acquire) {
            let frame = match self.consumer.acquire() {
                Ok(f) => f,
                Err(nvsci::Error::Ring(nvsci::RingError::Timeout { .. })) => continue,
                Err(e) => {
                    self.counters.stream_errors.fetch_add(1, Ordering::AcqRel);
                    log::warn!("bridge consumer: acquire failed: {e}");
                    // Not a busy loop on a stream that fails at once every time.
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                }
            };
            self.counters.skipped.store(self.consumer.stats().skipped, Ordering::Release);
            let sequence = frame.sequence();
            let message = self.message(&frame);
            if let Err(e) = self.consumer.release(frame) {
                self.counters.stream_errors.fetch_add(1, Ordering::AcqRel);
                log::warn!("bridge consumer: release of frame {sequence} failed: {e}");
            }
            let Some(payload) = message else { continue };
            let attachment = Attachment {
                sequence: self.next_message,
                source_timestamp: realtime_ns() as i64,
                gid: self.gid,
            };
            match self.publisher.put(payload).attachment(attachment.to_bytes().to_vec()).wait() {
                Ok(()) => {
                    self.next_message += 1;
                    self.counters.published.fetch_add(1, Ordering::AcqRel);
                    self.counters.last.store(sequence + 1, Ordering::Release);
                }
                Err(e) => {
                    self.counters.publish_errors.fetch_add(1, Ordering::AcqRel);
                    log::warn!("bridge consumer: frame {sequence} not published: {e}");
                }
            }
        }
    }

    /// The message of a held frame: its rows copied once from the frame's mapping.
    fn message(&self, frame: &ConsumerFrame) -> Option<Vec<u8>> {
        let bytes = match self.consumer.cpu_read(frame) {
            Ok(b) => b,
            Err(e) => {
                self.counters.stream_errors.fetch_add(1, Ordering::AcqRel);
                log::warn!("bridge consumer: frame {} not readable: {e}", frame.sequence());
                return None;
            }
        };
        let f = &self.frames;
        let stamp_ns = match self.stamp_clock {
            StampClock::Monotonic => monotonic_to_realtime(frame.capture_time()),
            StampClock::AsIs => frame.capture_time(),
        };
        let (planes, row) = f.planes();
        let data_len: usize = planes.iter().map(|&(_, _, rows)| rows * row).sum();
        let img = Image {
            stamp: Time::from_nanos(stamp_ns).unwrap_or_default(),
            frame_id: &self.frame_id,
            height: f.height,
            width: f.width,
            encoding: f.encoding.ros_name(),
            is_bigendian: 0,
            step: row as u32,
            data: &[],
        };
        let mut out = Vec::with_capacity(img.encoded_len() + data_len);
        if let Err(e) = img.encode_prefix(data_len, &mut out) {
            self.counters.stream_errors.fetch_add(1, Ordering::AcqRel);
            log::warn!("bridge consumer: frame {} cannot be encoded: {e}", frame.sequence());
            return None;
        }
        for (offset, pitch, rows) in planes {
            for r in 0..rows {
                let at = offset + r * pitch;
                let Some(src) = bytes.get(at..at + row) else {
                    self.counters.stream_errors.fetch_add(1, Ordering::AcqRel);
                    log::warn!("bridge consumer: frame {} is shorter than its layout", frame.sequence());
                    return None;
                };
                out.extend_from_slice(src);
            }
        }
        Some(out)
    }
}
