//! The bridge producer: subscribes to a topic's `sensor_msgs/msg/Image` messages (from a bridge
//! consumer or from any ROS 2 publisher on rmw_zenoh), checks each one, and presents it into a
//! local stream, whose consumers then run as they would on the camera's machine.

use crate::attachment::Attachment;
use crate::cdr::{CdrError, Image};
use crate::clock::realtime_to_monotonic;
use crate::config::{BridgeConfig, StampClock};
use crate::encoding::{check_fits, check_image, Encoding, ImageError};
use crate::error::BridgeError;
use crate::graph::{EntityKind, NodeName};
use nvsci::pipeline::{FrameLayout, Producer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use zenoh::sample::Sample;
use zenoh::Wait;

/// A received message the bridge did not present: what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejected {
    /// The payload is not a well-formed `sensor_msgs/msg/Image` in CDR.
    #[error(transparent)]
    Cdr(#[from] CdrError),
    /// The attachment is not rmw_zenoh's.
    #[error(transparent)]
    Attachment(#[from] crate::attachment::AttachmentError),
    /// The image is inconsistent or does not fit the stream.
    #[error(transparent)]
    Image(#[from] ImageError),
}

/// The bridge producer's counters. Every message received is either presented, replaced
/// before the bridge got to it, rejected (one counter per reason), or lost to a stream error.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReceiveStats {
    /// Messages received from Zenoh.
    pub received: u64,
    /// Frames presented into the stream.
    pub presented: u64,
    /// Messages replaced by a newer one before the bridge took them (the bridge keeps only the
    /// newest: a slow stream drops messages here, never stalls Zenoh).
    pub replaced: u64,
    /// Messages whose CDR is malformed.
    pub malformed: u64,
    /// Messages whose attachment is malformed (one without an attachment is accepted).
    pub bad_attachment: u64,
    /// Messages without an attachment (accepted; rmw_zenoh subscribers would drop them).
    pub without_attachment: u64,
    /// Images of an encoding the bridge does not know.
    pub unknown_encoding: u64,
    /// Images whose data size does not match their width, height, step and encoding.
    pub bad_size: u64,
    /// Images of another encoding, or other (smaller) dimensions, than the stream's frames.
    pub mismatched: u64,
    /// Images larger than the stream's frames.
    pub too_large: u64,
    /// Frames the stream could not take (its acquire, write or present failed).
    pub stream_errors: u64,
    /// The last reason a message was rejected.
    pub last_rejected: Option<Rejected>,
}

#[derive(Default)]
struct Mailbox {
    slot: Mutex<MailboxState>,
    ready: Condvar,
}

#[derive(Default)]
struct MailboxState {
    sample: Option<Sample>,
    stats: ReceiveStats,
}

impl Mailbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, MailboxState> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A topic's images presented into a local stream.
///
/// Zenoh's callback puts each message into a one-message mailbox (replacing, and counting,
/// one the bridge has not taken yet); the bridge's thread takes it, checks it, acquires a
/// frame from the stream's producer, copies the rows in, sets the capture time from the
/// stamp and writes the publisher's sequence number and source timestamp into the user header
/// (bytes 0..8 and 8..16, little-endian; zeros without an attachment), and presents it. A
/// message that fails a check is counted ([`ReceiveStats`]) and logged; the bridge goes on.
pub struct BridgeProducer {
    stop: Arc<AtomicBool>,
    mailbox: Arc<Mailbox>,
    thread: Option<JoinHandle<Producer>>,
    producer: Option<Producer>,
    key_expr: String,
    subscription_token: String,
    zid: String,
    // Dropped after the thread ended (Drop joins it first).
    _subscriber: zenoh::pubsub::Subscriber<()>,
    _tokens: Vec<zenoh::liveliness::LivelinessToken>,
    _session: zenoh::Session,
}

impl std::fmt::Debug for BridgeProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BridgeProducer")
            .field("key_expr", &self.key_expr)
            .field("zid", &self.zid)
            .field("stats", &self.stats())
            .finish()
    }
}

impl BridgeProducer {
    /// Subscribes to `config`'s topic and presents its images through `producer` (a CPU
    /// producer of a stream of pitch-linear NV12 or RGBA frames). Opens a Zenoh session from
    /// `config`.
    pub fn spawn(producer: Producer, config: &BridgeConfig) -> Result<Self, BridgeError> {
        let session = zenoh::open(config.zenoh_config()?)
            .wait()
            .map_err(|e| BridgeError::zenoh("open a session", e))?;
        Self::spawn_on(session, producer, config)
    }

    /// As [`spawn`](Self::spawn), on a session the caller opened.
    pub fn spawn_on(
        session: zenoh::Session,
        producer: Producer,
        config: &BridgeConfig,
    ) -> Result<Self, BridgeError> {
        config.validate()?;
        if !producer.engine().is_cpu() {
            return Err(BridgeError::NotCpuProducer);
        }
        let layout = producer.layout().clone();
        let format = layout.format;
        let fits = match Encoding::of_format(&format) {
            Some((Encoding::Nv12, ..)) => layout.nv12_fits(layout.size as usize, "frame").is_ok(),
            Some((e, w, h)) => {
                format.image_layout() == Some(nvsci::buf::ImageLayout::PitchLinear)
                    && layout.planes.first().is_some_and(|p| {
                        p.pitch as u64 >= e.min_step(w)
                            && p.offset + p.pitch as u64 * (h as u64 - 1) + e.min_step(w) <= layout.size
                    })
            }
            None => false,
        };
        if !fits {
            return Err(BridgeError::Format { format });
        }
        let zid = session.zid().to_string();
        let node = NodeName {
            domain: config.domain,
            zid: zid.clone(),
            nid: 0,
            enclave: config.enclave.clone(),
            namespace: config.namespace.clone(),
            name: config.node.clone(),
        };
        let subscription_token = node.entity_token(EntityKind::Subscription, 1, &config.topic, &config.qos());
        let key_expr = config.key_expr();
        let mailbox = Arc::new(Mailbox::default());
        let mb = mailbox.clone();
        let subscriber = session
            .declare_subscriber(key_expr.clone())
            .callback(move |sample| {
                let mut st = mb.lock();
                st.stats.received += 1;
                if st.sample.replace(sample).is_some() {
                    st.stats.replaced += 1;
                }
                drop(st);
                mb.ready.notify_one();
            })
            .wait()
            .map_err(|e| BridgeError::zenoh("declare the subscriber", e))?;
        let mut tokens = Vec::with_capacity(2);
        for t in [node.token(), subscription_token.clone()] {
            let token = session
                .liveliness()
                .declare_token(t)
                .wait()
                .map_err(|e| BridgeError::zenoh("declare a liveliness token", e))?;
            tokens.push(token);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            producer,
            layout,
            stamp_clock: config.stamp_clock,
            poll: config.poll,
            stop: stop.clone(),
            mailbox: mailbox.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("nvsci-zenoh-sub".into())
            .spawn(move || worker.run())
            .map_err(|e| BridgeError::Thread(e.kind()))?;
        log::info!("bridge producer: subscribed to {key_expr} as {subscription_token}");
        Ok(Self {
            stop,
            mailbox,
            thread: Some(thread),
            producer: None,
            key_expr,
            subscription_token,
            zid,
            _subscriber: subscriber,
            _tokens: tokens,
            _session: session,
        })
    }

    /// The counters so far.
    pub fn stats(&self) -> ReceiveStats {
        self.mailbox.lock().stats.clone()
    }

    /// The key expression subscribed to.
    pub fn key_expr(&self) -> &str {
        &self.key_expr
    }

    /// The subscription's liveliness token.
    pub fn subscription_token(&self) -> &str {
        &self.subscription_token
    }

    /// The Zenoh session's id (lowercase hex).
    pub fn zid(&self) -> &str {
        &self.zid
    }

    /// Stops the bridge (after the message it is presenting, if any) and returns the stream's
    /// producer, with the final counters. Dropping the producer ends the stream.
    pub fn stop(mut self) -> (Option<Producer>, ReceiveStats) {
        self.halt();
        (self.producer.take(), self.stats())
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.mailbox.ready.notify_all();
        if let Some(t) = self.thread.take() {
            match t.join() {
                Ok(p) => self.producer = Some(p),
                Err(_) => log::error!("bridge producer: the presenting thread panicked"),
            }
        }
    }
}

impl Drop for BridgeProducer {
    fn drop(&mut self) {
        self.halt();
    }
}

struct Worker {
    producer: Producer,
    layout: FrameLayout,
    stamp_clock: StampClock,
    poll: std::time::Duration,
    stop: Arc<AtomicBool>,
    mailbox: Arc<Mailbox>,
}

/// What became of one message.
enum Outcome {
    Presented,
    Rejected(Rejected),
    StreamError,
}

impl Worker {
    fn run(mut self) -> Producer {
        loop {
            let sample = {
                let mut st = self.mailbox.lock();
                loop {
                    if self.stop.load(Ordering::Acquire) {
                        return self.producer;
                    }
                    if let Some(s) = st.sample.take() {
                        break s;
                    }
                    st = self
                        .mailbox
                        .ready
                        .wait_timeout(st, self.poll)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            };
            let outcome = self.present(&sample);
            let mut st = self.mailbox.lock();
            let s = &mut st.stats;
            match outcome {
                Outcome::Presented => s.presented += 1,
                Outcome::StreamError => s.stream_errors += 1,
                Outcome::Rejected(r) => {
                    log::warn!("bridge producer: message on {} rejected: {r}", sample.key_expr());
                    match &r {
                        Rejected::Cdr(_) => s.malformed += 1,
                        Rejected::Attachment(_) => s.bad_attachment += 1,
                        Rejected::Image(ImageError::UnknownEncoding { .. }) => s.unknown_encoding += 1,
                        Rejected::Image(ImageError::TooLarge { .. }) => s.too_large += 1,
                        Rejected::Image(
                            ImageError::EncodingMismatch { .. } | ImageError::Dimensions { .. },
                        ) => s.mismatched += 1,
                        Rejected::Image(_) => s.bad_size += 1,
                    }
                    s.last_rejected = Some(r);
                }
            }
        }
    }

    fn present(&mut self, sample: &Sample) -> Outcome {
        let attachment = match sample.attachment().map(|a| Attachment::parse(&a.to_bytes())) {
            Some(Ok(a)) => Some(a),
            Some(Err(e)) => return Outcome::Rejected(e.into()),
            None => {
                self.mailbox.lock().stats.without_attachment += 1;
                None
            }
        };
        let payload = sample.payload().to_bytes();
        let img = match Image::decode(&payload) {
            Ok(i) => i,
            Err(e) => return Outcome::Rejected(e.into()),
        };
        let checked =
            check_image(&img).and_then(|enc| check_fits(&img, enc, &self.layout.format).map(|()| enc));
        let encoding = match checked {
            Ok(e) => e,
            Err(e) => return Outcome::Rejected(e.into()),
        };
        match self.write(&img, encoding, attachment) {
            Ok(()) => Outcome::Presented,
            Err(e) => {
                log::warn!("bridge producer: the stream did not take the frame: {e}");
                Outcome::StreamError
            }
        }
    }

    fn write(
        &mut self,
        img: &Image<'_>,
        encoding: Encoding,
        attachment: Option<Attachment>,
    ) -> nvsci::Result<()> {
        let mut frame = self.producer.acquire()?;
        {
            let mut dst = self.producer.cpu_write(&frame)?;
            let step = img.step as usize;
            let row = encoding.min_step(img.width) as usize;
            let h = img.height as usize;
            let p = &self.layout.planes;
            let mut plane_rows = [(p[0].offset as usize, p[0].pitch as usize, h, 0usize), (0, 0, 0, 0)];
            if encoding == Encoding::Nv12 {
                plane_rows[1] = (p[1].offset as usize, p[1].pitch as usize, h / 2, h * step);
            }
            for (offset, pitch, rows, src_start) in plane_rows {
                for r in 0..rows {
                    let src = &img.data[src_start + r * step..][..row];
                    let at = offset + r * pitch;
                    let Some(d) = dst.get_mut(at..at + row) else {
                        return Err(nvsci::Error::InvalidArgument {
                            name: "frame",
                            reason: "shorter than its layout".into(),
                        });
                    };
                    d.copy_from_slice(src);
                }
            }
        }
        let stamp_ns = img.stamp.to_nanos().unwrap_or(0);
        frame.set_capture_time(match self.stamp_clock {
            StampClock::Monotonic => realtime_to_monotonic(stamp_ns),
            StampClock::AsIs => stamp_ns,
        });
        if let Some(a) = attachment {
            let h = frame.user_header_mut();
            h[..8].copy_from_slice(&a.sequence.to_le_bytes());
            h[8..16].copy_from_slice(&a.source_timestamp.to_le_bytes());
        }
        self.producer.present(frame)
    }
}
