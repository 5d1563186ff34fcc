//! The engine state of each party, made when a ring is split: a CPU wait state for a CPU
//! party; for a CUDA party, every slot and the sync objects it uses imported into its device,
//! and the stream its waits and signals are enqueued on.

use super::backend::CpuWaiter;
use super::engine::Engine;
use super::ring::Inner;
use crate::error::Result;
use std::sync::Arc;

#[cfg(feature = "cuda")]
use super::cuda::CudaParty;
#[cfg(feature = "cuda")]
use crate::cuda::{ReadOnly, ReadWrite};

/// The producer's engine.
pub(crate) enum ProducerEngine {
    Cpu(CpuWaiter),
    #[cfg(feature = "cuda")]
    Cuda(Box<CudaParty<ReadWrite>>),
}

impl ProducerEngine {
    pub(crate) fn new(inner: &Arc<Inner>, engine: &Engine) -> Result<Self> {
        match engine {
            Engine::Cpu => Ok(Self::Cpu(inner.waiter()?)),
            #[cfg(feature = "cuda")]
            Engine::Cuda(dev) => Ok(Self::Cuda(Box::new(CudaParty::producer(inner, dev)?))),
        }
    }
}

impl std::fmt::Debug for ProducerEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cpu(_) => f.write_str("Cpu"),
            #[cfg(feature = "cuda")]
            Self::Cuda(p) => p.fmt(f),
        }
    }
}

/// A consumer's engine.
pub(crate) enum ConsumerEngine {
    Cpu(CpuWaiter),
    #[cfg(feature = "cuda")]
    Cuda(Box<CudaParty<ReadOnly>>),
}

impl ConsumerEngine {
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    pub(crate) fn new(inner: &Arc<Inner>, engine: &Engine, id: usize) -> Result<Self> {
        match engine {
            Engine::Cpu => Ok(Self::Cpu(inner.waiter()?)),
            #[cfg(feature = "cuda")]
            Engine::Cuda(dev) => Ok(Self::Cuda(Box::new(CudaParty::consumer(inner, dev, id)?))),
        }
    }
}

impl std::fmt::Debug for ConsumerEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cpu(_) => f.write_str("Cpu"),
            #[cfg(feature = "cuda")]
            Self::Cuda(p) => p.fmt(f),
        }
    }
}
