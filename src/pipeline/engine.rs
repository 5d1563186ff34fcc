//! The engines the parties of a ring work on.

use crate::GpuId;

/// Where a producer or consumer does its work, which decides how its fences are waited and
/// signalled: the CPU waits and signals at once; a CUDA device does both on a stream.
#[derive(Clone, Debug, Default)]
pub enum Engine {
    /// The CPU (fences waited with a CPU wait, signalled at once).
    #[default]
    Cpu,
    /// A CUDA device (fences waited and signalled on a stream).
    #[cfg(feature = "cuda")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    Cuda(crate::cuda::CudaGpu),
}

impl Engine {
    /// Whether this is the CPU.
    pub fn is_cpu(&self) -> bool {
        matches!(self, Self::Cpu)
    }

    /// The GPU id of a GPU engine.
    pub fn gpu_id(&self) -> Option<GpuId> {
        match self {
            Self::Cpu => None,
            #[cfg(feature = "cuda")]
            Self::Cuda(d) => Some(d.gpu_id()),
        }
    }
}
