//! The one way to build a stream: a [`StreamBuilder`] from a [`Backend`], with the producer's
//! engine and one description per consumer (its engine, where it lives, its queue mode and
//! limit), and seats reserved for consumers that attach later; and the one way to attach to a
//! stream from another process ([`Consumer::connect_with`]). Every field is validated here,
//! before anything is allocated or sent.

use super::backend::ipc::SeatLink;
use super::backend::Provider;
use super::config::{ConsumerDesc, RingConfig, MAX_CONSUMERS, MAX_FRAMES};
use super::engine::Engine;
use super::format::FrameFormat;
use super::ring::{Consumer, FrameRing, Links, SeatPlan};
use super::select::Backend;
use crate::error::{invalid, Error, IpcError, Result, UnsupportedReason};
use crate::ipc::IpcEndpoint;
use crate::NvSci;
use std::sync::Arc;
use std::time::Duration;

/// Where a declared consumer lives.
#[derive(Debug)]
enum Place {
    /// In this process ([`FrameRing::split`] hands it out).
    Here,
    /// Reserved: nobody yet; a consumer attaches later ([`Producer::attacher`](super::Producer::attacher)).
    Reserved,
    /// In the process at the other end of the endpoint (it connects with
    /// [`Consumer::connect_with`]).
    There(IpcEndpoint),
    /// Reserved for a consumer in the process at the other end of the endpoint, which attaches
    /// while the stream runs.
    ThereLater(IpcEndpoint),
}

/// Builds a stream ([`FrameRing`]): `backend.stream(format)`, then the parties, then
/// [`build`](Self::build).
///
/// ```
/// # #[cfg(feature = "mock")] {
/// use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat};
/// let backend = Backend::with_library(nvsci::NvSci::mock());
/// let ring = backend
///     .stream(FrameFormat::nv12(64, 32))
///     .frames(3)
///     .consumer(ConsumerDesc::cpu())
///     .consumer(ConsumerDesc::cpu().mailbox())
///     .reserve(ConsumerDesc::cpu(), 2)
///     .build()
///     .unwrap();
/// let (mut producer, consumers) = ring.split().unwrap();
/// assert_eq!(consumers.len(), 2);
/// let late = producer.attacher().attach(ConsumerDesc::cpu().mailbox()).unwrap();
/// # drop(late);
/// # }
/// ```
#[must_use = "a builder does nothing until built"]
pub struct StreamBuilder {
    provider: Arc<dyn Provider>,
    format: FrameFormat,
    config: RingConfig,
    producer: Engine,
    seats: Vec<(ConsumerDesc, Place)>,
}

impl std::fmt::Debug for StreamBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamBuilder")
            .field("source", &self.provider.describe())
            .field("format", &self.format)
            .field("config", &self.config)
            .field("producer", &self.producer)
            .field("seats", &self.seats)
            .finish()
    }
}

impl Backend {
    /// Starts building a stream of `format` frames on this backend: by default 4 frames, a
    /// 2-second timeout, cached GPU frames and a CPU producer, and no consumer yet.
    pub fn stream(&self, format: FrameFormat) -> StreamBuilder {
        StreamBuilder {
            provider: self.provider(),
            format,
            config: RingConfig::default(),
            producer: Engine::Cpu,
            seats: Vec::new(),
        }
    }
}

impl StreamBuilder {
    /// Frame buffers in the ring (2 to [`MAX_FRAMES`](super::MAX_FRAMES); default 4).
    pub fn frames(mut self, frames: usize) -> Self {
        self.config.frames = frames;
        self
    }

    /// How long an acquire waits (for a free frame, a presented one, or a fence) before it
    /// fails with a timeout; also how long teardown waits for outstanding fences (default 2 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.config.timeout = timeout;
        self
    }

    /// Whether GPU parties may cache the frames (NvSci backends; default `true`). On a Tegra
    /// iGPU with CPU access, cached frames need GPU software cache coherency
    /// (`GpuSwNeedCacheCoherency`), which CUDA maintains in every fence wait and signal that
    /// does not skip NvSciBuf memory synchronisation. `false` sets `EnableGpuCache = false` for
    /// each GPU in the buffer lists (as the CUDA Programming Guide's NvSci example does): the
    /// frames then need no coherency, and waits and signals may skip the synchronisation (see
    /// [`MemSync`](crate::cuda::MemSync)). A consumer in another process follows the
    /// producer's setting.
    pub fn gpu_cache(mut self, gpu_cache: bool) -> Self {
        self.config.gpu_cache = gpu_cache;
        self
    }

    /// The engine the producer works on (default the CPU).
    pub fn producer(mut self, engine: Engine) -> Self {
        self.producer = engine;
        self
    }

    /// A consumer in this process, attached from the start.
    pub fn consumer(mut self, desc: ConsumerDesc) -> Self {
        self.seats.push((desc, Place::Here));
        self
    }

    /// `count` consumers in this process as `desc` describes, attached from the start.
    pub fn consumers(mut self, desc: ConsumerDesc, count: usize) -> Self {
        for _ in 0..count {
            self.seats.push((desc.clone(), Place::Here));
        }
        self
    }

    /// A consumer in the process at the other end of `endpoint` (NvSci backends), which
    /// connects with [`Consumer::connect_with`] while the stream is built; its frames
    /// are sent to it and its releases come back over the endpoint. `desc`'s engine is the
    /// one the consumer's must be; its queue mode and limit are the consumer's own (it says
    /// them as it attaches). When it leaves or dies, the seat takes the next consumer on that
    /// endpoint while the stream runs (a CPU producer; a CUDA producer's seat stays vacant).
    pub fn remote_consumer(mut self, endpoint: IpcEndpoint, desc: ConsumerDesc) -> Self {
        self.seats.push((desc, Place::There(endpoint)));
        self
    }

    /// A seat for a consumer in the process at the other end of `endpoint` (NvSci backends,
    /// CPU producer) that attaches while the stream runs, with
    /// [`Consumer::connect_with`]: the frames and sync objects
    /// are made now for `desc`'s engine, exported to the consumer as it attaches, and it gets
    /// frames from the next present on. Its queue mode and limit are the consumer's own. When
    /// it leaves or dies the seat takes the next one.
    pub fn reserve_remote(mut self, endpoint: IpcEndpoint, desc: ConsumerDesc) -> Self {
        self.seats.push((desc, Place::ThereLater(endpoint)));
        self
    }

    /// `count` seats for consumers in this process on `desc`'s engine that attach later
    /// ([`Producer::attacher`](super::Producer::attacher)); their buffers and sync objects are
    /// made now, with everyone else's. The mode and limit are the attaching consumer's own.
    pub fn reserve(mut self, desc: ConsumerDesc, count: usize) -> Self {
        for _ in 0..count {
            self.seats.push((desc.clone(), Place::Reserved));
        }
        self
    }

    /// Validates every field, allocates the frames and sync objects for every seat, runs the
    /// set-up with each consumer in another process, and returns the stream.
    ///
    /// Refused before anything is allocated or sent, each with [`Error::InvalidArgument`]
    /// naming the field: `frames` outside 2 to [`MAX_FRAMES`], `consumers` (no seat, or more
    /// than [`MAX_CONSUMERS`]), `format` (and `format.size`) for a format with no frames in it,
    /// `limit` for a consumer whose limit is 0. A seat in another process for a consumer that
    /// attaches later with a CUDA producer, or any seat in another process on a backend without
    /// NvSci objects, is [`Error::Unsupported`]; an engine the backend cannot serve is the
    /// backend's typed error.
    pub fn build(self) -> Result<FrameRing> {
        let Self { provider, format, mut config, producer, seats } = self;
        if !(2..=MAX_FRAMES).contains(&config.frames) {
            return Err(invalid("frames", format!("{} frames; 2 to {MAX_FRAMES} allowed", config.frames)));
        }
        if !(1..=MAX_CONSUMERS).contains(&seats.len()) {
            return Err(invalid(
                "consumers",
                format!("{} consumer seats; 1 to {MAX_CONSUMERS} allowed", seats.len()),
            ));
        }
        config.consumers = seats.len();
        format.validate()?;
        let mut plan = Vec::with_capacity(seats.len());
        let mut engines = Vec::with_capacity(seats.len());
        let mut any_remote = false;
        for (desc, place) in &seats {
            desc.check()?;
            match place {
                Place::There(_) => any_remote = true,
                Place::ThereLater(_) if !producer.is_cpu() => {
                    return Err(Error::Unsupported {
                        what: "a seat for a consumer in another process that attaches later",
                        reason: UnsupportedReason::RemoteAttachWithCudaProducer,
                    });
                }
                Place::ThereLater(_) => any_remote = true,
                _ => {}
            }
            plan.push(SeatPlan {
                attached: matches!(place, Place::Here),
                mode: desc.mode,
                limit: desc.limit,
            });
            engines.push(desc.engine.clone());
        }
        if !any_remote {
            let backend = provider.build(format, config, &producer, &engines)?;
            return FrameRing::with_plan(config, backend, &producer, &engines, Some(&plan), Links::default());
        }
        let Some(lib) = provider.nvsci() else {
            return Err(Error::Unsupported {
                what: "a consumer in another process",
                reason: UnsupportedReason::NoNvSciObjects,
            });
        };
        let lib = lib.clone();
        let links = seats
            .into_iter()
            .map(|(desc, place)| match place {
                Place::There(ep) => SeatLink::Remote(ep, desc.engine),
                Place::ThereLater(ep) => SeatLink::Reserved(ep, desc.engine),
                _ => SeatLink::Local(desc.engine),
            })
            .collect();
        let side = super::backend::ipc::build_producer(&lib, format, config, &producer, links)?;
        // Consumers in other processes attached with their own mode and limit.
        for (p, a) in plan.iter_mut().zip(&side.attached) {
            if let Some((mode, limit)) = *a {
                *p = SeatPlan { attached: true, mode, limit };
            }
        }
        let links = Links { remotes: side.remotes, upstream: None, hub: Some(side.hub) };
        FrameRing::with_plan(config, side.ring, &producer, &side.engines, Some(&plan), links)
    }
}

impl Consumer {
    /// Attaches to the producer at the other end of `ep`, in another process (a stream with a
    /// seat of [`StreamBuilder::remote_consumer`] or [`StreamBuilder::reserve_remote`] there),
    /// as the consumer `desc` describes: its engine (which must be the seat's), its queue mode
    /// and its limit; its frames must be `format`. Imports the frames read-only and the present
    /// object, allocates and exports this consumer's release object. Attaches to a stream that
    /// is being built or one that runs (a vacant seat), and gets frames from the producer's
    /// next present on. The consumer acquires, reads and releases as any other (its
    /// [`id`](Self::id) is 0, the only consumer of this process's view;
    /// [`ring_index`](Self::ring_index) is its seat in the producer's stream); an acquire after
    /// the producer ended the stream fails with [`RingError::Ended`](crate::RingError::Ended).
    /// Every wait (attaching, a frame, a fence) is bounded by `timeout`. The endpoint is closed
    /// last, after the imported objects are freed.
    ///
    /// A mailbox consumer's mailbox is in the producer's process: each acquire asks for the
    /// newest frame and gets it at once, or the next one presented; the producer never waits
    /// for it beyond the frames it holds.
    ///
    /// A limit of 0 or a format with no frames in it is refused before anything is sent
    /// ([`Error::InvalidArgument`] naming `limit` or `format`). A producer that refuses the
    /// attach answers [`RingError::AttachRefused`](crate::RingError::AttachRefused) naming what
    /// did not fit (the engine, the format, the mode, a stale offer); a session the producer's
    /// side ends during the attach (it reopens a seat whose consumer left) is attached again on
    /// a new endpoint session, until `timeout` passes. Dropping the consumer detaches it once
    /// its fences expired: the seat is free for the next one.
    pub fn connect_with(
        lib: &NvSci,
        ep: IpcEndpoint,
        format: FrameFormat,
        desc: ConsumerDesc,
        timeout: Duration,
    ) -> Result<Self> {
        format.validate()?;
        desc.check()?;
        let deadline = std::time::Instant::now() + timeout;
        let (ipc, name) = (ep.ipc().clone(), ep.name().to_owned());
        let mut ep = Some(ep);
        let (ring, frames, upstream) = loop {
            let e = match ep.take() {
                Some(e) => e,
                None => IpcEndpoint::open(&ipc, &name)?,
            };
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match super::backend::ipc::connect_consumer(lib, e, format, &desc, left) {
                Err(Error::Ipc(IpcError::PeerGone { .. })) if std::time::Instant::now() < deadline => {
                    // The producer's side ended the session: a new one, on a new handle.
                    std::thread::sleep(Duration::from_millis(5));
                }
                r => break r?,
            }
        };
        let config = RingConfig { frames, consumers: 1, timeout, ..RingConfig::default() };
        let links = Links { remotes: Vec::new(), upstream: Some(upstream), hub: None };
        let ring = FrameRing::with_links(config, Arc::new(ring), &Engine::Cpu, &[desc.engine], links)?;
        ring.into_consumer()
    }
}
