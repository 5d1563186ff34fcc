//! Choosing where frames come from: an NvSci library (NVIDIA's, or the mock) or the Vulkan
//! fallback. The choice is a [`Backend`]; the rings it builds hold one dynamic backend.

use super::backend::ipc::{RingConsumer, SeatLink};
use super::backend::nvsci::NvSciProvider;
use super::backend::Provider;
use super::config::ConsumerDesc;
use super::config::RingConfig;
use super::config::MAX_CONSUMERS;
use super::engine::Engine;
use super::format::FrameFormat;
use super::ring::Links;
use super::ring::{Consumer, FrameRing};
use crate::error::{invalid, Error, Result};
use crate::NvSci;
use std::sync::Arc;

/// A backend kind: where a ring's buffers and fences come from. The mock is not a kind of its
/// own: it is an NvSci library ([`NvSci::mock`]) served by the NvSci backend
/// ([`Backend::with_library`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// NvSciBuf/NvSciSync objects, on NVIDIA's libraries (Jetson, DRIVE OS) or the mock.
    NvSci,
    /// Vulkan exportable memory and timeline semaphores with CUDA consumers (desktop NVIDIA GPU).
    Vulkan,
}

impl std::str::FromStr for BackendKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "nvsci" => Ok(Self::NvSci),
            "vulkan" => Ok(Self::Vulkan),
            other => Err(invalid("backend", format!("`{other}`; expected nvsci or vulkan"))),
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NvSci => "nvsci",
            Self::Vulkan => "vulkan",
        })
    }
}

/// A usable backend and the reasons the better ones were skipped. It builds rings:
/// [`build_ring`](Self::build_ring).
#[derive(Clone)]
pub struct Backend {
    kind: BackendKind,
    provider: Arc<dyn Provider>,
    #[cfg(feature = "cuda")]
    cuda: Option<crate::cuda::CudaGpu>,
    skipped: Vec<(String, String)>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("kind", &self.kind)
            .field("source", &self.provider.describe())
            .field("skipped", &self.skipped)
            .finish()
    }
}

/// The CUDA device a backend is built on: the caller's, or device 0 opened on demand.
#[cfg(feature = "cuda")]
type GivenGpu<'a> = Option<&'a crate::cuda::CudaGpu>;
#[cfg(not(feature = "cuda"))]
type GivenGpu<'a> = Option<&'a core::convert::Infallible>;

#[cfg(feature = "cuda")]
fn gpu_or_open(given: GivenGpu<'_>) -> Result<crate::cuda::CudaGpu> {
    match given {
        Some(g) => Ok(g.clone()),
        None => crate::cuda::CudaGpu::open(0),
    }
}

/// What `auto` tries, best first.
#[derive(Clone, Copy)]
enum Candidate {
    Kind(BackendKind),
    MockLibrary,
}

impl std::fmt::Display for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Kind(k) => k.fmt(f),
            Self::MockLibrary => f.write_str("nvsci on the mock library"),
        }
    }
}

impl Backend {
    /// The best backend present: NvSci if NVIDIA's libraries load and CUDA accepts their
    /// buffers; else Vulkan if a CUDA GPU has a matching Vulkan device that can export
    /// semaphores (feature `vulkan`); else NvSci on the mock library (feature `mock`), with a
    /// CUDA GPU as its GPU engine when its objects reach one. CUDA device 0 is opened with its
    /// primary context; [`auto_on`](Self::auto_on) uses the caller's context instead.
    ///
    /// The choice and the reason each better backend was skipped are logged at info level
    /// (the text of [`explain`](Self::explain)).
    pub fn auto() -> Result<Self> {
        Self::auto_with(None)
    }

    /// As [`auto`](Self::auto), on the caller's CUDA device and context (one adopted with
    /// [`CudaGpu::from_context`](crate::cuda::CudaGpu::from_context), say): the NvSci and
    /// Vulkan backends import into it, and the mock library uses it as its GPU engine where its
    /// objects can reach a GPU.
    #[cfg(feature = "cuda")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    pub fn auto_on(gpu: &crate::cuda::CudaGpu) -> Result<Self> {
        Self::auto_with(Some(gpu))
    }

    fn auto_with(gpu: GivenGpu<'_>) -> Result<Self> {
        let mut skipped = Vec::new();
        for c in [
            Candidate::Kind(BackendKind::NvSci),
            Candidate::Kind(BackendKind::Vulkan),
            Candidate::MockLibrary,
        ] {
            let tried = match c {
                Candidate::Kind(kind) => Self::try_kind(kind, gpu),
                Candidate::MockLibrary => Self::mock_library(gpu),
            };
            match tried {
                Ok(mut b) => {
                    b.skipped = skipped;
                    log::info!("frame-ring {}", b.explain());
                    return Ok(b);
                }
                Err(e) => {
                    log::debug!("backend {c} not usable: {e}");
                    skipped.push((c.to_string(), e.to_string()))
                }
            }
        }
        let why: Vec<String> = skipped.iter().map(|(k, e)| format!("{k}: {e}")).collect();
        log::info!("no frame-ring backend is usable: {}", why.join("; "));
        Err(Error::Unsupported {
            what: "every frame-ring backend",
            reason: crate::error::UnsupportedReason::NoBackend,
        })
    }

    #[cfg(feature = "mock")]
    fn mock_library(gpu: GivenGpu<'_>) -> Result<Self> {
        Ok(Self::library_with(NvSci::mock(), gpu))
    }

    #[cfg(not(feature = "mock"))]
    fn mock_library(_gpu: GivenGpu<'_>) -> Result<Self> {
        Err(Error::Unsupported {
            what: "the mock NvSci library",
            reason: crate::error::UnsupportedReason::FeatureDisabled("mock"),
        })
    }

    /// Exactly the backend asked for, or the error that rules it out: [`BackendKind::NvSci`]
    /// loads NVIDIA's libraries and needs CUDA to accept their buffers. CUDA device 0 is opened
    /// with its primary context where the backend needs one; [`new_on`](Self::new_on) uses the
    /// caller's. The outcome is logged at info level.
    pub fn new(kind: BackendKind) -> Result<Self> {
        Self::new_with(kind, None)
    }

    /// As [`new`](Self::new), on the caller's CUDA device and context.
    #[cfg(feature = "cuda")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    pub fn new_on(kind: BackendKind, gpu: &crate::cuda::CudaGpu) -> Result<Self> {
        Self::new_with(kind, Some(gpu))
    }

    fn new_with(kind: BackendKind, gpu: GivenGpu<'_>) -> Result<Self> {
        let b = Self::try_kind(kind, gpu);
        match &b {
            Ok(b) => log::info!("frame-ring {} (asked for by name)", b.explain()),
            Err(e) => log::info!("frame-ring backend {kind} asked for by name is not usable: {e}"),
        }
        b
    }

    /// The backend named `name`: `auto`, `nvsci`, `vulkan`, or `mock` (the NvSci backend on the
    /// mock library), as command lines spell it.
    pub fn by_name(name: &str) -> Result<Self> {
        Self::by_name_with(name, None)
    }

    /// As [`by_name`](Self::by_name), on the caller's CUDA device and context.
    #[cfg(feature = "cuda")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    pub fn by_name_on(name: &str, gpu: &crate::cuda::CudaGpu) -> Result<Self> {
        Self::by_name_with(name, Some(gpu))
    }

    fn by_name_with(name: &str, gpu: GivenGpu<'_>) -> Result<Self> {
        match name {
            "auto" => Self::auto_with(gpu),
            "mock" => {
                let b = Self::mock_library(gpu)?;
                log::info!("frame-ring {} (asked for by name)", b.explain());
                Ok(b)
            }
            other => match other.parse::<BackendKind>() {
                Ok(kind) => Self::new_with(kind, gpu),
                Err(_) => Err(invalid("backend", format!("`{other}`; expected auto, nvsci, vulkan or mock"))),
            },
        }
    }

    /// The NvSci backend on `lib` (NVIDIA's libraries, or [`NvSci::mock`]), with a CUDA GPU
    /// (device 0) as its GPU engine where the library's objects reach one, else CPU engines
    /// only.
    pub fn with_library(lib: NvSci) -> Self {
        Self::library_with(lib, None)
    }

    /// As [`with_library`](Self::with_library), on the caller's CUDA device and context.
    #[cfg(feature = "cuda")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    pub fn with_library_on(lib: NvSci, gpu: &crate::cuda::CudaGpu) -> Self {
        Self::library_with(lib, Some(gpu))
    }

    fn library_with(lib: NvSci, gpu: GivenGpu<'_>) -> Self {
        #[cfg(not(feature = "cuda"))]
        let _ = gpu;
        #[cfg(feature = "cuda")]
        let cuda = match lib.gpu_interop() {
            crate::GpuInterop::HostMemory => gpu_or_open(gpu).ok(),
            crate::GpuInterop::NvSciImport => gpu_or_open(gpu)
                .and_then(|dev| crate::cuda::probe_nvscibuf_import(&dev, &lib).map(|()| dev))
                .ok(),
        };
        Self {
            kind: BackendKind::NvSci,
            provider: Arc::new(NvSciProvider { lib }),
            #[cfg(feature = "cuda")]
            cuda,
            skipped: Vec::new(),
        }
    }

    fn try_kind(kind: BackendKind, gpu: GivenGpu<'_>) -> Result<Self> {
        #[cfg(not(feature = "cuda"))]
        let _ = gpu;
        match kind {
            BackendKind::NvSci => {
                let lib = NvSci::load()?;
                #[cfg(feature = "cuda")]
                {
                    let dev = gpu_or_open(gpu)?;
                    crate::cuda::probe_nvscibuf_import(&dev, &lib)?;
                    Ok(Self {
                        kind,
                        provider: Arc::new(NvSciProvider { lib }),
                        cuda: Some(dev),
                        skipped: Vec::new(),
                    })
                }
                #[cfg(not(feature = "cuda"))]
                {
                    let _ = lib;
                    Err(Error::Unsupported {
                        what: "the NvSci backend",
                        reason: crate::error::UnsupportedReason::FeatureDisabled("cuda"),
                    })
                }
            }
            BackendKind::Vulkan => {
                #[cfg(feature = "vulkan")]
                {
                    let dev = gpu_or_open(gpu)?;
                    let provider = super::backend::vulkan::open(&dev)?;
                    Ok(Self { kind, provider: Arc::new(provider), cuda: Some(dev), skipped: Vec::new() })
                }
                #[cfg(not(feature = "vulkan"))]
                {
                    Err(Error::Unsupported {
                        what: "the Vulkan backend",
                        reason: crate::error::UnsupportedReason::FeatureDisabled("vulkan"),
                    })
                }
            }
        }
    }

    /// The source of buffers and fences, for the stream builder.
    pub(crate) fn provider(&self) -> Arc<dyn Provider> {
        self.provider.clone()
    }

    /// What was chosen.
    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    /// Each backend tried before the chosen one (`nvsci`, `vulkan`, `nvsci on the mock
    /// library`), with why it was skipped.
    pub fn skipped(&self) -> &[(String, String)] {
        &self.skipped
    }

    /// The NvSci library (NVIDIA's or the mock) of the NvSci backend.
    pub fn nvsci(&self) -> Option<&NvSci> {
        self.provider.nvsci()
    }

    /// The Vulkan context of the Vulkan backend.
    #[cfg(feature = "vulkan")]
    #[cfg_attr(docsrs, doc(cfg(feature = "vulkan")))]
    pub fn vulkan(&self) -> Option<&Arc<crate::vulkan::VulkanContext>> {
        self.provider.vulkan()
    }

    /// The CUDA device frames can be imported into (`None`: CPU engines only).
    #[cfg(feature = "cuda")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    pub fn cuda(&self) -> Option<&crate::cuda::CudaGpu> {
        self.cuda.as_ref()
    }

    /// The GPU engine of this backend, or the CPU where there is none.
    pub fn gpu_engine(&self) -> Engine {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.cuda {
            return Engine::Cuda(d.clone());
        }
        Engine::Cpu
    }

    /// Builds a ring of `format` frames whose producer and consumers work on the given engines
    /// (one engine per consumer; a CUDA engine must be this backend's device).
    pub fn build_ring(
        &self,
        format: FrameFormat,
        config: RingConfig,
        producer: &Engine,
        consumers: &[Engine],
    ) -> Result<FrameRing> {
        build(self.provider.as_ref(), format, config, producer, consumers)
    }

    /// A one-paragraph account of the choice, for logs and examples.
    pub fn explain(&self) -> String {
        let mut s = format!("backend: {} ({})", self.kind, self.provider.describe());
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.cuda {
            let name = d.name().unwrap_or_else(|_| "CUDA device".into());
            s.push_str(&format!(" with CUDA engine {name}"));
            if self.nvsci().is_some_and(|l| l.gpu_interop() == crate::GpuInterop::HostMemory) {
                s.push_str(" (buffers page-locked in host memory, fences as stream-waited counters)");
            }
        }
        if self.gpu_engine().is_cpu() {
            s.push_str(" (CPU engines only)");
        }
        for (k, why) in &self.skipped {
            s.push_str(&format!("\n  skipped {k}: {why}"));
        }
        s
    }
}

fn build(
    provider: &dyn Provider,
    format: FrameFormat,
    config: RingConfig,
    producer: &Engine,
    consumers: &[Engine],
) -> Result<FrameRing> {
    super::config::validate_ring(&format, &config, consumers)?;
    let backend = provider.build(format, config, producer, consumers)?;
    FrameRing::from_backend(config, backend, producer, consumers)
}

impl FrameRing {
    /// Allocates `config.frames` buffers of `format` and the sync objects on `lib` (the NvSci
    /// backend), with the CPU as producer and as every consumer.
    pub fn new(lib: &NvSci, format: FrameFormat, config: RingConfig) -> Result<Self> {
        let consumers = [const { Engine::Cpu }; MAX_CONSUMERS];
        Self::with_engines(
            lib,
            format,
            config,
            &Engine::Cpu,
            consumers.get(..config.consumers).unwrap_or(&[]),
        )
    }

    /// As [`new`](Self::new), with the engine of every party: each attribute list names its
    /// engine (CPU access, or the GPU id and, for sync objects, what CUDA needs to signal or
    /// wait), so CUDA parties can import the frames and fences. `consumers` has one engine per
    /// consumer.
    pub fn with_engines(
        lib: &NvSci,
        format: FrameFormat,
        config: RingConfig,
        producer: &Engine,
        consumers: &[Engine],
    ) -> Result<Self> {
        build(&NvSciProvider { lib: lib.clone() }, format, config, producer, consumers)
    }
}

impl FrameRing {
    /// As [`with_engines`](Self::with_engines), with consumers in this process and in others:
    /// each [`RingConsumer::Remote`] endpoint leads to a process that connects with
    /// [`Consumer::connect`]. Every consumer's lists take part in one reconciliation; the frames
    /// and sync objects are exported to each consumer process (read-only, wait-only), and each
    /// exports its release object back. `consumers` has `config.consumers` entries, consumer
    /// `i` at index `i`; [`split`](Self::split) hands out the consumers of this process, and the
    /// producer serves the others through their endpoints: its
    /// [`present`](crate::pipeline::Producer::present) sends them the frame and its present fence, and its
    /// [`acquire`](crate::pipeline::Producer::acquire) reuses a slot only once every consumer, here or there,
    /// released it (a remote release fence arrives over the endpoint).
    ///
    /// A consumer process that goes away (its endpoint reset or closed) is dropped from the
    /// multicast; the producer's next acquire reports it once
    /// ([`IpcError::PeerGone`](crate::IpcError::PeerGone) naming its endpoint), and the ring
    /// serves the others. Any other error of a consumer process (a release that does not fit
    /// the ring's state, a fence that cannot be imported) is returned by the producer's acquire
    /// and the consumer stays attached. Dropping the producer ends the stream for every
    /// consumer process ([`RingError::Ended`](crate::RingError::Ended) from their next acquire)
    /// and takes back the frames they hold.
    /// Connecting waits up to `config.timeout` for each peer.
    pub fn with_consumers(
        lib: &NvSci,
        format: FrameFormat,
        config: RingConfig,
        producer: &Engine,
        consumers: Vec<RingConsumer>,
    ) -> Result<Self> {
        format.validate()?;
        config.validate()?;
        if consumers.len() != config.consumers {
            return Err(invalid(
                "consumers",
                format!("{} consumers for config.consumers = {}", consumers.len(), config.consumers),
            ));
        }
        let seats = consumers
            .into_iter()
            .map(|c| match c {
                RingConsumer::Local(e) => SeatLink::Local(e),
                RingConsumer::Remote(ep) => SeatLink::Remote(ep, None),
            })
            .collect();
        let side = super::backend::ipc::build_producer(lib, format, config, producer, seats)?;
        let links = Links { remotes: side.remotes, upstream: None, hub: Some(side.hub) };
        FrameRing::with_links(config, side.ring, producer, &side.engines, links)
    }
}

impl Consumer {
    /// Connects to the producer at the other end of `ep` (in another process: a ring built with
    /// [`FrameRing::with_consumers`], or a stream with a seat of
    /// [`StreamBuilder::remote_consumer`](crate::pipeline::StreamBuilder::remote_consumer) or
    /// [`reserve_remote`](crate::pipeline::StreamBuilder::reserve_remote)) as a consumer of
    /// `format` frames working on `engine`: imports the frames read-only and the present object, allocates and
    /// exports this consumer's release object. The consumer acquires, reads and releases as
    /// any other (its [`id`](Self::id) is 0, the only consumer of this process's view); an
    /// acquire after the producer ended the stream fails with
    /// [`RingError::Ended`](crate::RingError::Ended). Every wait (connecting, a frame, a fence)
    /// is bounded by `timeout`. The endpoint is closed last,
    /// after the imported objects are freed.
    pub fn connect(
        lib: &NvSci,
        ep: crate::ipc::IpcEndpoint,
        format: FrameFormat,
        engine: Engine,
        timeout: std::time::Duration,
    ) -> Result<Self> {
        Self::connect_with(lib, ep, format, ConsumerDesc::new(engine), timeout)
    }

    /// As [`connect`](Self::connect), as the consumer `desc` describes: its engine (which must
    /// be the seat's), its queue mode and its limit. Attaches to a stream that is being built
    /// or one that runs (a seat the producer declared with
    /// [`StreamBuilder::remote_consumer`](super::StreamBuilder::remote_consumer) or
    /// [`reserve_remote`](super::StreamBuilder::reserve_remote), vacant), and gets frames from
    /// the producer's next present on. A mailbox consumer's mailbox is in the producer's
    /// process: each acquire asks for the newest frame and gets it at once, or the next one
    /// presented; the producer never waits for it beyond the frames it holds.
    ///
    /// A producer that refuses the attach answers
    /// [`RingError::AttachRefused`](crate::RingError::AttachRefused) naming what
    /// did not fit (the engine, the format, a limit of 0, a stale offer); a session the
    /// producer's side ends during the attach (it reopens a seat whose consumer left) is
    /// attached again on a new endpoint session, until `timeout` passes. Dropping the consumer
    /// detaches it once its fences expired: the seat is free for the next one.
    pub fn connect_with(
        lib: &NvSci,
        ep: crate::ipc::IpcEndpoint,
        format: FrameFormat,
        desc: ConsumerDesc,
        timeout: std::time::Duration,
    ) -> Result<Self> {
        let deadline = std::time::Instant::now() + timeout;
        let (ipc, name) = (ep.ipc().clone(), ep.name().to_owned());
        let mut ep = Some(ep);
        let (ring, frames, upstream) = loop {
            let e = match ep.take() {
                Some(e) => e,
                None => crate::ipc::IpcEndpoint::open(&ipc, &name)?,
            };
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match super::backend::ipc::connect_consumer(lib, e, format, &desc, left) {
                Err(Error::Ipc(crate::IpcError::PeerGone { .. })) if std::time::Instant::now() < deadline => {
                    // The producer's side ended the session: a new one, on a new handle.
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                r => break r?,
            }
        };
        let config = RingConfig::default().with_frames(frames).with_consumers(1).with_timeout(timeout);
        let links = Links { remotes: Vec::new(), upstream: Some(upstream), hub: None };
        let ring = FrameRing::with_links(config, Arc::new(ring), &Engine::Cpu, &[desc.engine], links)?;
        ring.into_consumer()
    }
}
