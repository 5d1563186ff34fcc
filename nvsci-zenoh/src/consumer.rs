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
use nvsci::pipeline::{Attacher, Consumer, ConsumerDesc, ConsumerFrame, Engine, FrameLayout, QueueMode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
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
    /// CUDA frames copied device -> pinned host memory (0 for a CPU consumer).
    pub readbacks: u64,
    /// The time those copies took, in total: from enqueueing each (on the consumer's stream,
    /// after the frame's present wait) until the CPU saw it done, in nanoseconds.
    pub readback_ns: u64,
}

#[derive(Default)]
struct Counters {
    published: AtomicU64,
    skipped: AtomicU64,
    publish_errors: AtomicU64,
    stream_errors: AtomicU64,
    /// Last sequence + 1 (0: none yet).
    last: AtomicU64,
    readbacks: AtomicU64,
    readback_ns: AtomicU64,
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
            readbacks: self.readbacks.load(Ordering::Acquire),
            readback_ns: self.readback_ns.load(Ordering::Acquire),
        }
    }
}

/// A stream's frames on Zenoh, as ROS 2 (rmw_zenoh) sees a `sensor_msgs/msg/Image` publisher.
///
/// A thread acquires each frame from the bridge's mailbox consumer (the newest frame: a slow
/// link makes the bridge skip frames, never the camera wait), reads it, releases it, and
/// publishes its rows as the message. A CPU consumer's rows are copied once from the frame's
/// mapping; a CUDA consumer's frame is first copied device -> pinned host memory on its stream,
/// ordered by the ring's fences (after the present wait that `acquire` enqueues, before the
/// release signal). Dropping the bridge stops the thread (its waits for a frame are slices of
/// [`BridgeConfig::poll()`]; a put held by a congested link with blocking congestion control is
/// waited for) and undeclares its tokens and publisher.
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

    /// Starts publishing the frames of `consumer`: a consumer in mailbox mode of a stream of
    /// pitch-linear NV12 or RGBA frames, on the CPU or (feature `cuda`) on a CUDA engine, whose
    /// frames are copied device -> pinned host memory on [`Consumer::stream`]. Opens a Zenoh
    /// session from `config`.
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
        let reader = match consumer.engine() {
            Engine::Cpu => Reader::Cpu,
            #[cfg(feature = "cuda")]
            Engine::Cuda(_) => Reader::Cuda(crate::readback::Readback::default()),
        };
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
            reader,
            publisher,
            encoder: Encoder { frames, frame_id: config.frame_id.clone(), stamp_clock: config.stamp_clock },
            gid: gid(&publisher_token),
            poll: config.poll,
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

/// How the thread reads a frame's bytes.
enum Reader {
    /// A CPU consumer: from the frame's mapping, after the CPU waited for its present fence.
    Cpu,
    /// A CUDA consumer: copied device -> pinned host memory on its stream.
    #[cfg(feature = "cuda")]
    Cuda(crate::readback::Readback),
}

/// Why a frame was not turned into a message.
#[derive(Debug)]
enum Unread {
    /// The stream refused (a read, a map, a CUDA copy).
    Stream(nvsci::Error),
    /// The frame's bytes are shorter than its layout.
    Short,
    /// The message could not be encoded.
    Encode(crate::cdr::CdrError),
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stream(e) => write!(f, "not readable: {e}"),
            Self::Short => f.write_str("shorter than its layout"),
            Self::Encode(e) => write!(f, "cannot be encoded: {e}"),
        }
    }
}

/// Turns a frame's bytes into a message.
struct Encoder {
    frames: Frames,
    frame_id: String,
    stamp_clock: StampClock,
}

impl Encoder {
    /// The message of a frame captured at `capture_time` whose bytes (the whole frame, as its
    /// layout describes it) are `bytes`: its rows copied once.
    fn message(&self, bytes: &[u8], capture_time: u64) -> Result<Vec<u8>, Unread> {
        let f = &self.frames;
        let stamp_ns = match self.stamp_clock {
            StampClock::Monotonic => monotonic_to_realtime(capture_time),
            StampClock::AsIs => capture_time,
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
        img.encode_prefix(data_len, &mut out).map_err(Unread::Encode)?;
        for (offset, pitch, rows) in planes {
            for r in 0..rows {
                let at = offset + r * pitch;
                out.extend_from_slice(bytes.get(at..at + row).ok_or(Unread::Short)?);
            }
        }
        Ok(out)
    }
}

struct Worker {
    consumer: Consumer,
    reader: Reader,
    publisher: zenoh::pubsub::Publisher<'static>,
    encoder: Encoder,
    gid: [u8; 16],
    poll: Duration,
    next_message: i64,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
}

impl Worker {
    fn run(mut self) {
        while !self.stop.load(Ordering::Acquire) {
            // Short slices, so a stop request is seen within one of them.
            let frame = match self.consumer.acquire_within(self.poll) {
                Ok(f) => f,
                Err(nvsci::Error::Timeout { .. }) => continue,
                Err(e) => {
                    self.counters.stream_errors.fetch_add(1, Ordering::AcqRel);
                    log::warn!("bridge consumer: acquire failed: {e}");
                    // Not a busy loop on a stream that fails at once every time.
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            self.counters.skipped.store(self.consumer.stats().skipped, Ordering::Release);
            let sequence = frame.sequence();
            let message = self.read(frame);
            let payload = match message {
                Ok(p) => p,
                Err(e) => {
                    self.counters.stream_errors.fetch_add(1, Ordering::AcqRel);
                    log::warn!("bridge consumer: frame {sequence} {e}");
                    continue;
                }
            };
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

    /// Reads a held frame into its message and releases it (a failed release is counted and
    /// logged; the message still goes out).
    fn read(&mut self, frame: ConsumerFrame) -> Result<Vec<u8>, Unread> {
        let capture_time = frame.capture_time();
        let (consumer, counters, encoder) = (&mut self.consumer, &*self.counters, &self.encoder);
        #[cfg(feature = "cuda")]
        let (stop, poll) = (&*self.stop, self.poll);
        match &mut self.reader {
            Reader::Cpu => {
                let message = match consumer.cpu_read(&frame) {
                    Ok(bytes) => encoder.message(&bytes, capture_time),
                    Err(e) => Err(Unread::Stream(e)),
                };
                release(consumer, counters, frame);
                message
            }
            #[cfg(feature = "cuda")]
            Reader::Cuda(readback) => {
                let start = std::time::Instant::now();
                // The copy goes on the stream after the present wait; the release signal
                // follows it there; then the CPU waits for the copy and encodes from host
                // memory.
                let enqueued = readback.enqueue(consumer, &frame);
                release(consumer, counters, frame);
                let timeout = consumer.timeout();
                let bytes =
                    enqueued.and_then(|()| readback.finish(stop, poll, timeout)).map_err(Unread::Stream)?;
                counters.readback_ns.fetch_add(start.elapsed().as_nanos() as u64, Ordering::AcqRel);
                counters.readbacks.fetch_add(1, Ordering::AcqRel);
                encoder.message(bytes, capture_time)
            }
        }
    }
}

/// Releases a frame; a failure is counted and logged.
fn release(consumer: &mut Consumer, counters: &Counters, frame: ConsumerFrame) {
    let sequence = frame.sequence();
    if let Err(e) = consumer.release(frame) {
        counters.stream_errors.fetch_add(1, Ordering::AcqRel);
        log::warn!("bridge consumer: release of frame {sequence} failed: {e}");
    }
}
