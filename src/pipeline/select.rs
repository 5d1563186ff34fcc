//! Choosing where frames come from: an NvSci library (NVIDIA's, or the mock) or the Vulkan
//! fallback. The choice is a [`Backend`]; the streams it builds hold one dynamic backend.

use super::backend::nvsci::NvSciProvider;
use super::backend::Provider;
use super::engine::Engine;
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

/// A usable backend and the reasons the better ones were skipped. It builds streams:
/// [`stream`](Self::stream).
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

    /// A backend of `kind` on `provider`, with no CUDA device.
    #[cfg(all(test, feature = "vulkan"))]
    pub(crate) fn from_provider(kind: BackendKind, provider: Arc<dyn Provider>) -> Self {
        Self {
            kind,
            provider,
            #[cfg(feature = "cuda")]
            cuda: None,
            skipped: Vec::new(),
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
