//! The bridge consumer: a mailbox consumer of a stream that publishes each frame it reads as a
//! `sensor_msgs/msg/Image` on the topic's key expression, with rmw_zenoh's attachment, and
//! makes itself visible on the ROS graph with a node and a publisher token.

use crate::attachment::Attachment;
use crate::cdr::{Image, Time};
use crate::clock::{monotonic_to_realtime, realtime_ns};
use crate::config::{BridgeConfig, Congestion, StampClock};
use crate::error::BridgeError;
use crate::graph::{gid, EntityKind, NodeName, Reliability};
use crate::payload::HeldFrame;
use crate::rows::Plan;
use nvsci::pipeline::{Attacher, Consumer, ConsumerDesc, ConsumerFrame, Engine, QueueMode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use zenoh::bytes::ZBytes;
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
    /// The time those copies took, in total: from enqueueing them (on the consumer's stream,
    /// after the frame's present wait) until the CPU saw them done, in nanoseconds.
    pub readback_ns: u64,
    /// The part of `readback_ns` the device spent on the copies themselves (CUDA events
    /// recorded before and after them, after the present wait), in nanoseconds.
    pub readback_copy_ns: u64,
    /// The part of `readback_ns` the bridge's thread spent waiting for the copies, in
    /// nanoseconds. A frame's copies are enqueued before the previous frame's message is put
    /// (when the frame is there by then), so the rest of `readback_ns` overlapped that put.
    pub readback_wait_ns: u64,
    /// Planes of those frames copied by the bridge's copy kernel rather than a copy engine:
    /// frames in host memory mapped for the device (the mock NvSci's), where a copy engine's
    /// copy into page-locked memory would hold the bridge's thread until it completed.
    pub readback_kernel_planes: u64,
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
    readback_copy_ns: AtomicU64,
    readback_wait_ns: AtomicU64,
    readback_kernel_planes: AtomicU64,
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
            readback_copy_ns: self.readback_copy_ns.load(Ordering::Acquire),
            readback_wait_ns: self.readback_wait_ns.load(Ordering::Acquire),
            readback_kernel_planes: self.readback_kernel_planes.load(Ordering::Acquire),
        }
    }
}

/// A stream's frames on Zenoh, as ROS 2 (rmw_zenoh) sees a `sensor_msgs/msg/Image` publisher.
///
/// A thread acquires each frame from the bridge's mailbox consumer (the newest frame: a slow
/// link makes the bridge skip frames, never the camera wait) and publishes its rows as the
/// message, with no copy into a new allocation:
///
/// * a CPU frame is published from the frame's mapping, with no copy: its planes as they lie
///   in the frame ([`Rows::Stored`], or rows without padding), or one slice per row where the
///   rows are packed narrower than the pitch ([`Rows::Packed`]). The bridge holds the frame
///   until Zenoh drops the message (over the network, when `put` returns, having serialised it
///   into its batches; later if a subscriber in the same session keeps the sample), then
///   releases it. Meanwhile the stream offers the bridge newer frames up to its consumer's
///   limit, and skips it beyond that: the camera never waits for it;
/// * a CUDA frame is copied device -> pinned host memory on the consumer's stream, ordered by
///   the ring's fences (after the present wait that `acquire` enqueues, before the release
///   signal), straight into the buffers the message is published from (reused when Zenoh drops it);
///   block-linear frames from their planes' CUDA arrays, laid out as rows by the copy. The
///   frame is released as soon as its copies are enqueued (its release signal follows them on
///   the stream). The copies of the next frame, when the mailbox has one, are enqueued before
///   the current frame's message is put, so they run while it is published; a frame whose
///   copies are pending when the bridge stops is waited for and not published.
///
/// Dropping the bridge stops the thread (its waits for a frame are slices of
/// [`BridgeConfig::poll()`]; a put held by a congested link with blocking congestion control is
/// waited for) and undeclares its tokens and publisher; a frame a subscriber of the same session
/// still holds is released when that subscriber drops it.
///
/// [`Rows::Stored`]: crate::Rows::Stored
/// [`Rows::Packed`]: crate::Rows::Packed
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

impl BridgeConsumer {
    /// Attaches a CPU mailbox consumer to a running stream (a seat reserved with
    /// `StreamBuilder::reserve(ConsumerDesc::cpu(), 1)`) and starts publishing it.
    pub fn attach(attacher: &Attacher, config: &BridgeConfig) -> Result<Self, BridgeError> {
        let consumer = attacher.attach(ConsumerDesc::cpu().mailbox()).map_err(BridgeError::Stream)?;
        Self::spawn(consumer, config)
    }

    /// Starts publishing the frames of `consumer`: a consumer in mailbox mode of a stream of
    /// pitch-linear NV12 or RGBA frames, on the CPU or (feature `cuda`) on a CUDA engine, whose
    /// frames are copied device -> pinned host memory on [`Consumer::stream`]; a CUDA consumer
    /// also takes block-linear NV12 frames. Opens a Zenoh session from `config`.
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
        // A CUDA consumer reads a block-linear frame's planes from their CUDA arrays.
        let arrays = !matches!(reader, Reader::Cpu);
        let plan = Plan::new(consumer.layout(), config.rows, arrays)?;
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
        let (back, returned) = mpsc::channel();
        let worker = Worker {
            consumer,
            reader,
            publisher,
            encoder: Encoder { plan, frame_id: config.frame_id.clone(), stamp_clock: config.stamp_clock },
            back,
            returned,
            lent: 0,
            gid: gid(&publisher_token),
            poll: config.poll,
            next_message: 1,
            stop: stop.clone(),
            counters: counters.clone(),
            #[cfg(feature = "cuda")]
            enqueued: None,
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

/// Turns a frame's pixels into a message.
struct Encoder {
    plan: Plan,
    frame_id: String,
    stamp_clock: StampClock,
}

impl Encoder {
    /// The message of a frame captured at `capture_time` whose pixels (the message's `data`,
    /// as the plan lays them out) are `pixels`: the CDR prefix, then the pixels' slices as
    /// they are.
    fn message(&self, pixels: impl IntoIterator<Item = ZBytes>, capture_time: u64) -> Result<ZBytes, Unread> {
        let p = &self.plan;
        let stamp_ns = match self.stamp_clock {
            StampClock::Monotonic => monotonic_to_realtime(capture_time),
            StampClock::AsIs => capture_time,
        };
        let img = Image {
            stamp: Time::from_nanos(stamp_ns).unwrap_or_default(),
            frame_id: &self.frame_id,
            height: p.height,
            width: p.width,
            encoding: p.encoding.ros_name(),
            is_bigendian: 0,
            step: p.step,
            data: &[],
        };
        let mut prefix = Vec::with_capacity(img.encoded_len());
        img.encode_prefix(p.data_len(), &mut prefix).map_err(Unread::Encode)?;
        let mut w = ZBytes::writer();
        w.append(ZBytes::from(prefix));
        for z in pixels {
            w.append(z);
        }
        Ok(w.finish())
    }
}

struct Worker {
    consumer: Consumer,
    reader: Reader,
    publisher: zenoh::pubsub::Publisher<'static>,
    encoder: Encoder,
    /// Frames published from their mapping come back here when Zenoh drops them.
    back: Sender<ConsumerFrame>,
    returned: Receiver<ConsumerFrame>,
    /// Frames published from their mapping and not back yet.
    lent: usize,
    gid: [u8; 16],
    poll: Duration,
    next_message: i64,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    /// A CUDA frame whose copies were enqueued before the last put: the next to publish.
    #[cfg(feature = "cuda")]
    enqueued: Option<Enqueued>,
}

/// A CUDA frame whose device -> host copies are enqueued (the frame released behind them on the
/// stream) and not waited for yet.
#[cfg(feature = "cuda")]
struct Enqueued {
    sequence: u64,
    capture_time: u64,
    /// When the copies were enqueued.
    at: std::time::Instant,
}

impl Worker {
    fn run(mut self) {
        while !self.stop.load(Ordering::Acquire) {
            self.reclaim();
            let Some((sequence, payload)) = self.next_payload() else { continue };
            // A CUDA frame's successor starts its copies now, so they run while this one is
            // published.
            #[cfg(feature = "cuda")]
            self.prefetch();
            self.publish(sequence, payload);
        }
        #[cfg(feature = "cuda")]
        self.drain();
        self.reclaim();
        if self.lent > 0 {
            // Held by a subscriber of this session: released when it drops them (`HeldFrame`).
            log::debug!("bridge consumer: stopped with {} frames still in Zenoh", self.lent);
        }
    }

    /// The next frame's message and stream sequence: the CUDA frame whose copies the previous
    /// round enqueued, else the newest frame of the mailbox (waited for one poll slice, so a
    /// stop request is seen within one of them). `None`: no frame came, or it could not be read
    /// (counted and logged).
    fn next_payload(&mut self) -> Option<(u64, ZBytes)> {
        #[cfg(feature = "cuda")]
        if let Some(e) = self.enqueued.take() {
            let sequence = e.sequence;
            return self.finish(e).map_err(|e| self.unread(sequence, &e)).ok().map(|p| (sequence, p));
        }
        let frame = match self.consumer.acquire_within(self.poll) {
            Ok(f) => f,
            Err(nvsci::Error::Timeout { .. }) => return None,
            Err(e) => {
                self.counters.stream_errors.fetch_add(1, Ordering::AcqRel);
                log::warn!("bridge consumer: acquire failed: {e}");
                // Not a busy loop on a stream that fails at once every time.
                std::thread::sleep(Duration::from_millis(10));
                return None;
            }
        };
        self.counters.skipped.store(self.consumer.stats().skipped, Ordering::Release);
        let sequence = frame.sequence();
        self.read(frame).map_err(|e| self.unread(sequence, &e)).ok().map(|p| (sequence, p))
    }

    /// Counts and logs a frame that was not turned into a message.
    fn unread(&self, sequence: u64, e: &Unread) {
        self.counters.stream_errors.fetch_add(1, Ordering::AcqRel);
        log::warn!("bridge consumer: frame {sequence} {e}");
    }

    /// Puts a frame's message, with the attachment of the next message number.
    fn publish(&mut self, sequence: u64, payload: ZBytes) {
        let attachment =
            Attachment { sequence: self.next_message, source_timestamp: realtime_ns() as i64, gid: self.gid };
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

    /// Releases the frames Zenoh dropped.
    fn reclaim(&mut self) {
        while let Ok(frame) = self.returned.try_recv() {
            self.lent -= 1;
            release(&mut self.consumer, &self.counters, frame);
        }
    }

    /// Turns a held frame into its message. A CPU frame published from its mapping stays held
    /// (until Zenoh drops the message); a CUDA frame, and a frame that could not be read, is
    /// released here (a failed release is counted and logged; the message still goes out).
    fn read(&mut self, frame: ConsumerFrame) -> Result<ZBytes, Unread> {
        let capture_time = frame.capture_time();
        let (consumer, counters, encoder) = (&mut self.consumer, &*self.counters, &self.encoder);
        let plan = &encoder.plan;
        match &mut self.reader {
            Reader::Cpu => {
                let mapped = match consumer.cpu_read(&frame) {
                    Ok(bytes) if bytes.len() >= plan.frame_bytes() => Ok((bytes.as_ptr(), bytes.len())),
                    Ok(_) => Err(Unread::Short),
                    Err(e) => Err(Unread::Stream(e)),
                };
                let (ptr, len) = match mapped {
                    Ok(m) => m,
                    Err(e) => {
                        release(consumer, counters, frame);
                        return Err(e);
                    }
                };
                // SAFETY: `ptr` and `len` are this frame's CPU mapping, just read through
                // `cpu_read`; the mapping is the ring's (made once per slot, kept while any
                // handle of the ring lives, the frame included), and the producer does not write
                // the slot while the frame is held, which it is until Zenoh drops the last slice
                // of it.
                let frame = unsafe { HeldFrame::lend(frame, ptr, len, self.back.clone()) };
                self.lent += 1;
                // The message's rows as they lie in the mapping: one slice per plane where its
                // rows are back to back, else one per row (`Plan::ranges`, inside `len`: checked
                // against `frame_bytes` above).
                encoder.message(plan.ranges().map(|r| ZBytes::from(frame.slice(r))), capture_time)
            }
            #[cfg(feature = "cuda")]
            Reader::Cuda(_) => {
                let e = self.enqueue(frame)?;
                self.finish(e)
            }
        }
    }
}

/// The CUDA reader's pipeline: a frame's copies are enqueued before the previous frame's put,
/// and waited for after it.
#[cfg(feature = "cuda")]
impl Worker {
    /// Enqueues the copies of a held CUDA frame's rows on the consumer's stream (after the
    /// present wait that `acquire` enqueued there), then releases the frame (its release signal
    /// follows the copies on the stream). Either way the frame is released here.
    fn enqueue(&mut self, frame: ConsumerFrame) -> Result<Enqueued, Unread> {
        let e = Enqueued {
            sequence: frame.sequence(),
            capture_time: frame.capture_time(),
            at: std::time::Instant::now(),
        };
        let Reader::Cuda(readback) = &mut self.reader else {
            release(&mut self.consumer, &self.counters, frame);
            return Err(Unread::Stream(crate::readback::no_stream()));
        };
        let enqueued = readback.enqueue(&self.consumer, &frame, &self.encoder.plan);
        release(&mut self.consumer, &self.counters, frame);
        let by_kernel = enqueued.map_err(Unread::Stream)?;
        self.counters.readback_kernel_planes.fetch_add(by_kernel, Ordering::AcqRel);
        Ok(e)
    }

    /// Waits for the copies of `e` (bounded: `Readback::finish`) and returns its message.
    fn finish(&mut self, e: Enqueued) -> Result<ZBytes, Unread> {
        let (stop, poll, timeout) = (&*self.stop, self.poll, self.consumer.timeout());
        let counters = &*self.counters;
        let Reader::Cuda(readback) = &mut self.reader else {
            return Err(Unread::Stream(crate::readback::no_stream()));
        };
        let waiting = std::time::Instant::now();
        let copied = readback.finish(stop, poll, timeout).map_err(Unread::Stream)?;
        counters.readback_wait_ns.fetch_add(waiting.elapsed().as_nanos() as u64, Ordering::AcqRel);
        counters.readback_ns.fetch_add(e.at.elapsed().as_nanos() as u64, Ordering::AcqRel);
        counters.readback_copy_ns.fetch_add(copied.copy_ns, Ordering::AcqRel);
        counters.readbacks.fetch_add(1, Ordering::AcqRel);
        self.encoder.message(copied.planes, e.capture_time)
    }

    /// A CUDA consumer: takes the newest frame if one is there now (no wait: the message in
    /// hand goes out first) and enqueues its copies, to be waited for after that message's put.
    /// The frame is released at once (behind its copies), so the camera never waits for the
    /// bridge; a newer frame replaces it in the mailbox as before.
    fn prefetch(&mut self) {
        if matches!(self.reader, Reader::Cpu) || self.enqueued.is_some() {
            return;
        }
        let frame = match self.consumer.acquire_within(Duration::ZERO) {
            Ok(f) => f,
            Err(nvsci::Error::Timeout { .. }) => return,
            Err(e) => {
                self.counters.stream_errors.fetch_add(1, Ordering::AcqRel);
                log::warn!("bridge consumer: acquire failed: {e}");
                return;
            }
        };
        self.counters.skipped.store(self.consumer.stats().skipped, Ordering::Release);
        let sequence = frame.sequence();
        match self.enqueue(frame) {
            Ok(e) => self.enqueued = Some(e),
            Err(e) => self.unread(sequence, &e),
        }
    }

    /// On stop: the frame whose copies were enqueued is not published; its copies are waited
    /// for (within the stop's grace, `Readback::finish`), so its buffers go back to the pool and
    /// are freed with it, not freed under a pending copy.
    fn drain(&mut self) {
        let (stop, poll, timeout) = (&*self.stop, self.poll, self.consumer.timeout());
        let Some(e) = self.enqueued.take() else { return };
        let Reader::Cuda(readback) = &mut self.reader else { return };
        match readback.finish(stop, poll, timeout) {
            Ok(copied) => {
                drop(copied);
                log::debug!("bridge consumer: stopped; frame {} copied, not published", e.sequence);
            }
            Err(err) => {
                self.counters.stream_errors.fetch_add(1, Ordering::AcqRel);
                log::warn!("bridge consumer: frame {} at the stop: {err}", e.sequence);
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
