//! Choosing where frames come from: native NvSci, the Vulkan fallback, or the mock.

use super::{Engine, FrameFormat, FrameRing, RingConfig};
use crate::error::{invalid, Error, Result};
use crate::NvSci;

/// A backend kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// Native NvSciBuf/NvSciSync with CUDA consumers (Jetson, DRIVE OS).
    NvSci,
    /// Vulkan exportable memory and timeline semaphores with CUDA consumers (desktop NVIDIA GPU).
    Vulkan,
    /// The mock NvSci (any machine; with a CUDA GPU, its objects reach the GPU through host
    /// memory).
    Mock,
}

impl std::str::FromStr for BackendKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "nvsci" => Ok(Self::NvSci),
            "vulkan" => Ok(Self::Vulkan),
            "mock" => Ok(Self::Mock),
            other => Err(invalid("backend", format!("`{other}`; expected auto, nvsci, vulkan or mock"))),
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NvSci => "nvsci",
            Self::Vulkan => "vulkan",
            Self::Mock => "mock",
        })
    }
}

/// What a backend makes frames and fences from.
#[derive(Clone)]
enum Provider {
    NvSci(NvSci),
    #[cfg(feature = "vulkan")]
    Vulkan(std::sync::Arc<crate::vulkan::VulkanContext>),
}

/// A usable backend and the reasons the better ones were skipped. It builds rings:
/// [`build_ring`](Self::build_ring).
#[derive(Clone)]
pub struct Backend {
    kind: BackendKind,
    provider: Provider,
    #[cfg(feature = "cuda")]
    cuda: Option<crate::cuda::CudaGpu>,
    skipped: Vec<(BackendKind, String)>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend").field("kind", &self.kind).field("skipped", &self.skipped).finish()
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

impl Backend {
    /// The best backend present: NvSci if the libraries load and CUDA accepts their buffers;
    /// else Vulkan if a CUDA GPU has a matching Vulkan device that can export semaphores
    /// (feature `vulkan`); else the mock, with a CUDA GPU as its GPU engine when one is present
    /// (the mock's objects reach it through host memory). CUDA device 0 is opened with its
    /// primary context; [`auto_on`](Self::auto_on) uses the caller's context instead.
    ///
    /// The choice and the reason each better backend was skipped are logged at info level
    /// (the text of [`explain`](Self::explain)).
    pub fn auto() -> Result<Self> {
        Self::auto_with(None)
    }

    /// As [`auto`](Self::auto), on the caller's CUDA device and context (one adopted with
    /// [`CudaGpu::from_context`](crate::cuda::CudaGpu::from_context), say): the NvSci and
    /// Vulkan backends import into it, and the mock uses it as its GPU engine where its objects
    /// can reach a GPU.
    #[cfg(feature = "cuda")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    pub fn auto_on(gpu: &crate::cuda::CudaGpu) -> Result<Self> {
        Self::auto_with(Some(gpu))
    }

    fn auto_with(gpu: GivenGpu<'_>) -> Result<Self> {
        let mut skipped = Vec::new();
        for kind in [BackendKind::NvSci, BackendKind::Vulkan, BackendKind::Mock] {
            match Self::try_kind(kind, gpu) {
                Ok(mut b) => {
                    b.skipped = skipped;
                    log::info!("frame-ring {}", b.explain());
                    return Ok(b);
                }
                Err(e) => {
                    log::debug!("backend {kind} not usable: {e}");
                    skipped.push((kind, e.to_string()))
                }
            }
        }
        let why: Vec<String> = skipped.iter().map(|(k, e)| format!("{k}: {e}")).collect();
        log::info!("no frame-ring backend is usable: {}", why.join("; "));
        Err(Error::Unsupported {
            what: "every frame-ring backend",
            reason: "no NvSci, no CUDA+Vulkan GPU, and the mock feature is disabled",
        })
    }

    /// Exactly the backend asked for, or the error that rules it out. CUDA device 0 is opened
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
                    Ok(Self { kind, provider: Provider::NvSci(lib), cuda: Some(dev), skipped: Vec::new() })
                }
                #[cfg(not(feature = "cuda"))]
                {
                    let _ = lib;
                    Err(Error::Unsupported {
                        what: "the NvSci backend",
                        reason: "built without the `cuda` feature",
                    })
                }
            }
            BackendKind::Vulkan => {
                #[cfg(feature = "vulkan")]
                {
                    let dev = gpu_or_open(gpu)?;
                    let ctx = crate::vulkan::VulkanContext::for_cuda(&dev)?;
                    if !crate::vulkan::semaphore_export_support(&ctx).timeline {
                        return Err(Error::Unsupported {
                            what: "the Vulkan backend",
                            reason: "the Vulkan device cannot export timeline semaphores to CUDA",
                        });
                    }
                    Ok(Self { kind, provider: Provider::Vulkan(ctx), cuda: Some(dev), skipped: Vec::new() })
                }
                #[cfg(not(feature = "vulkan"))]
                {
                    Err(Error::Unsupported {
                        what: "the Vulkan backend",
                        reason: "built without the `vulkan` feature (cargo run --features vulkan)",
                    })
                }
            }
            BackendKind::Mock => {
                #[cfg(feature = "mock")]
                {
                    let lib = NvSci::mock();
                    #[cfg(feature = "cuda")]
                    let cuda = if lib.gpu_interop() == crate::GpuInterop::HostMemory {
                        gpu_or_open(gpu).ok()
                    } else {
                        None
                    };
                    Ok(Self {
                        kind,
                        provider: Provider::NvSci(lib),
                        #[cfg(feature = "cuda")]
                        cuda,
                        skipped: Vec::new(),
                    })
                }
                #[cfg(not(feature = "mock"))]
                {
                    Err(Error::Unsupported {
                        what: "the mock backend",
                        reason: "built without the `mock` feature",
                    })
                }
            }
        }
    }

    /// What was chosen.
    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    /// Each backend tried before the chosen one, with why it was skipped.
    pub fn skipped(&self) -> &[(BackendKind, String)] {
        &self.skipped
    }

    /// The NvSci implementation (NVIDIA's or the mock) of the NvSci and mock backends.
    pub fn nvsci(&self) -> Option<&NvSci> {
        match &self.provider {
            Provider::NvSci(l) => Some(l),
            #[cfg(feature = "vulkan")]
            Provider::Vulkan(_) => None,
        }
    }

    /// The Vulkan context of the Vulkan backend.
    #[cfg(feature = "vulkan")]
    #[cfg_attr(docsrs, doc(cfg(feature = "vulkan")))]
    pub fn vulkan(&self) -> Option<&std::sync::Arc<crate::vulkan::VulkanContext>> {
        match &self.provider {
            Provider::Vulkan(c) => Some(c),
            Provider::NvSci(_) => None,
        }
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
        match &self.provider {
            Provider::NvSci(lib) => FrameRing::with_engines(lib, format, config, producer, consumers),
            #[cfg(feature = "vulkan")]
            Provider::Vulkan(ctx) => super::vulkan::ring(ctx, format, config, producer, consumers),
        }
    }

    /// A one-paragraph account of the choice, for logs and examples.
    pub fn explain(&self) -> String {
        let mut s = format!("backend: {}", self.kind);
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.cuda {
            let name = d.name().unwrap_or_else(|_| "CUDA device".into());
            s.push_str(&format!(" with CUDA engine {name}"));
            if self.kind == BackendKind::Mock {
                s.push_str(" (mock buffers page-locked in host memory, fences as stream-waited counters)");
            }
        }
        if self.kind == BackendKind::Mock && self.gpu_engine().is_cpu() {
            s.push_str(" (CPU engines only)");
        }
        for (k, why) in &self.skipped {
            s.push_str(&format!("\n  skipped {k}: {why}"));
        }
        s
    }
}
