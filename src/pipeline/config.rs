//! Ring parameters and the fixed capacities behind them.

use crate::error::{invalid, Result};
use std::time::Duration;

/// Most frames a ring holds.
pub const MAX_FRAMES: usize = 16;
/// Most consumers a ring serves.
pub const MAX_CONSUMERS: usize = 16;

/// Ring parameters: start from [`RingConfig::default`] and change what differs with the `with_*`
/// methods, e.g. `RingConfig::default().with_frames(2).with_consumers(2)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RingConfig {
    /// Frame buffers in the ring (2 to [`MAX_FRAMES`]).
    pub frames: usize,
    /// Consumers (1 to [`MAX_CONSUMERS`]).
    pub consumers: usize,
    /// How long an acquire waits (for a free frame, a presented one, or a fence) before it fails
    /// with [`RingError::Timeout`](crate::RingError::Timeout); also how long teardown waits for
    /// outstanding fences.
    pub timeout: Duration,
    /// Whether GPU parties may cache the frames (NvSci backends; default `true`). On a Tegra
    /// iGPU with CPU access, cached frames need GPU software cache coherency
    /// (`GpuSwNeedCacheCoherency`), which CUDA maintains in every fence wait and signal that
    /// does not skip NvSciBuf memory synchronisation. `false` sets `EnableGpuCache = false` for
    /// each GPU in the buffer lists (as the CUDA Programming Guide's NvSci example does): the
    /// frames then need no coherency, and waits and signals may skip the synchronisation (see
    /// [`MemSync`](crate::cuda::MemSync)).
    pub gpu_cache: bool,
}

impl Default for RingConfig {
    fn default() -> Self {
        Self { frames: 4, consumers: 1, timeout: Duration::from_secs(2), gpu_cache: true }
    }
}

impl RingConfig {
    /// Sets [`frames`](Self::frames).
    pub fn with_frames(mut self, frames: usize) -> Self {
        self.frames = frames;
        self
    }

    /// Sets [`consumers`](Self::consumers).
    pub fn with_consumers(mut self, consumers: usize) -> Self {
        self.consumers = consumers;
        self
    }

    /// Sets [`timeout`](Self::timeout).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets [`gpu_cache`](Self::gpu_cache).
    pub fn with_gpu_cache(mut self, gpu_cache: bool) -> Self {
        self.gpu_cache = gpu_cache;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if !(2..=MAX_FRAMES).contains(&self.frames) {
            return Err(invalid(
                "config.frames",
                format!("{} frames; 2 to {MAX_FRAMES} allowed", self.frames),
            ));
        }
        if !(1..=MAX_CONSUMERS).contains(&self.consumers) {
            return Err(invalid(
                "config.consumers",
                format!("{} consumers; 1 to {MAX_CONSUMERS} allowed", self.consumers),
            ));
        }
        Ok(())
    }
}

/// Checks what every backend checks before it allocates: the format, the configuration, and
/// one engine per consumer.
pub(crate) fn validate_ring(
    format: &super::format::FrameFormat,
    config: &RingConfig,
    consumers: &[super::engine::Engine],
) -> Result<()> {
    format.validate()?;
    config.validate()?;
    if consumers.len() != config.consumers {
        return Err(invalid(
            "consumers",
            format!("{} engines for {} consumers", consumers.len(), config.consumers),
        ));
    }
    Ok(())
}

/// One consumer of a stream: the engine it works on, its queue mode and its limit. Start from
/// [`ConsumerDesc::new`] (or [`cpu`](Self::cpu)) and change what differs:
/// `ConsumerDesc::cpu().mailbox().with_limit(1)`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConsumerDesc {
    /// The engine its waits and signals run on.
    pub engine: super::engine::Engine,
    /// FIFO (every frame, pacing the producer) or mailbox (the newest frame only).
    pub mode: super::state::QueueMode,
    /// Most frames it may hold and have queued at once (1 or more; `None`: the ring's frames);
    /// frames presented beyond it are skipped for this consumer.
    pub limit: Option<usize>,
}

impl ConsumerDesc {
    /// A FIFO consumer on `engine` with no limit below the ring's frames.
    pub fn new(engine: super::engine::Engine) -> Self {
        Self { engine, mode: super::state::QueueMode::Fifo, limit: None }
    }

    /// A FIFO consumer on the CPU.
    pub fn cpu() -> Self {
        Self::new(super::engine::Engine::Cpu)
    }

    /// Sets [`mode`](Self::mode) to mailbox.
    pub fn mailbox(mut self) -> Self {
        self.mode = super::state::QueueMode::Mailbox;
        self
    }

    /// Sets [`mode`](Self::mode).
    pub fn with_mode(mut self, mode: super::state::QueueMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets [`limit`](Self::limit).
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Refuses a limit of 0.
    pub(crate) fn check(&self) -> Result<()> {
        if self.limit == Some(0) {
            return Err(invalid("limit", "0 frames: a consumer must be able to hold one frame"));
        }
        Ok(())
    }
}
