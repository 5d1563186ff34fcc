//! Choosing where frames come from: native NvSci, the Vulkan fallback, or the mock.

use crate::error::{invalid, Error, Result};
use crate::NvSci;

/// A backend kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// Native NvSciBuf/NvSciSync with CUDA consumers (Jetson, DRIVE OS).
    NvSci,
    /// Vulkan exportable memory and timeline semaphores with CUDA consumers (desktop NVIDIA GPU).
    Vulkan,
    /// The mock NvSci with CPU consumers (any machine).
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

/// A usable backend and the reasons the better ones were skipped.
pub struct Backend {
    /// What was chosen.
    pub kind: BackendKind,
    /// The NvSci implementation (native or mock) for the NvSci and mock backends.
    pub nvsci: Option<NvSci>,
    /// The CUDA device for the NvSci and Vulkan backends.
    #[cfg(feature = "cuda")]
    pub cuda: Option<crate::cuda::CudaDevice>,
    /// The Vulkan context matching the CUDA device, for the Vulkan backend.
    #[cfg(feature = "vulkan")]
    pub vulkan: Option<std::sync::Arc<crate::vulkan::VulkanContext>>,
    /// Each backend tried before the chosen one, with why it was skipped.
    pub skipped: Vec<(BackendKind, String)>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend").field("kind", &self.kind).field("skipped", &self.skipped).finish()
    }
}

impl Backend {
    /// The best backend present: NvSci if the libraries load and CUDA accepts their buffers,
    /// else Vulkan if a CUDA GPU with a matching Vulkan device exists, else the mock.
    pub fn auto() -> Result<Self> {
        let mut skipped = Vec::new();
        for kind in [BackendKind::NvSci, BackendKind::Vulkan, BackendKind::Mock] {
            match Self::try_kind(kind) {
                Ok(mut b) => {
                    b.skipped = skipped;
                    return Ok(b);
                }
                Err(e) => skipped.push((kind, e.to_string())),
            }
        }
        Err(Error::Unsupported {
            what: "every frame-ring backend",
            reason: "no NvSci, no CUDA+Vulkan GPU, and the mock feature is disabled",
        })
    }

    /// Exactly the backend asked for, or the error that rules it out.
    pub fn new(kind: BackendKind) -> Result<Self> {
        Self::try_kind(kind)
    }

    fn empty(kind: BackendKind) -> Self {
        Self {
            kind,
            nvsci: None,
            #[cfg(feature = "cuda")]
            cuda: None,
            #[cfg(feature = "vulkan")]
            vulkan: None,
            skipped: Vec::new(),
        }
    }

    // Which arms can succeed depends on the enabled features; `b` is unused in the others.
    #[cfg_attr(not(all(feature = "cuda", feature = "mock")), allow(unused_mut, unused_variables))]
    fn try_kind(kind: BackendKind) -> Result<Self> {
        let mut b = Self::empty(kind);
        match kind {
            BackendKind::NvSci => {
                let lib = NvSci::load()?;
                #[cfg(feature = "cuda")]
                {
                    let dev = crate::cuda::CudaDevice::open(0)?;
                    crate::cuda::probe_nvscibuf_import(&dev, &lib)?;
                    b.cuda = Some(dev);
                    b.nvsci = Some(lib);
                    Ok(b)
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
                    let dev = crate::cuda::CudaDevice::open(0)?;
                    let ctx = crate::vulkan::VulkanContext::for_cuda(&dev)?;
                    if !ctx.has_semaphore_fd() {
                        return Err(Error::Unsupported {
                            what: "the Vulkan backend",
                            reason: "the Vulkan device cannot export semaphores to CUDA",
                        });
                    }
                    b.cuda = Some(dev);
                    b.vulkan = Some(ctx);
                    Ok(b)
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
                    b.nvsci = Some(NvSci::mock());
                    Ok(b)
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

    /// A one-paragraph account of the choice, for logs and examples.
    pub fn explain(&self) -> String {
        let mut s = format!("backend: {}", self.kind);
        for (k, why) in &self.skipped {
            s.push_str(&format!("\n  skipped {k}: {why}"));
        }
        s
    }
}
