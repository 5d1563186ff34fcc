//! A stream's parameters, its consumers' descriptions and the fixed capacities behind them.

use crate::error::{invalid, Result};
use std::time::Duration;

/// Most frames a ring holds.
pub const MAX_FRAMES: usize = 16;
/// Most consumers a ring serves.
pub const MAX_CONSUMERS: usize = 16;

/// A stream's parameters, as [`StreamBuilder`](super::StreamBuilder) set and validated them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RingConfig {
    /// Frame buffers in the ring (2 to [`MAX_FRAMES`]).
    pub(crate) frames: usize,
    /// Consumer seats (1 to [`MAX_CONSUMERS`]).
    pub(crate) consumers: usize,
    /// How long an acquire waits (for a free frame, a presented one, or a fence) before it
    /// fails with a timeout; also how long teardown waits for outstanding fences.
    pub(crate) timeout: Duration,
    /// Whether GPU parties may cache the frames ([`StreamBuilder::gpu_cache`](super::StreamBuilder::gpu_cache)).
    pub(crate) gpu_cache: bool,
}

impl Default for RingConfig {
    fn default() -> Self {
        Self { frames: 4, consumers: 1, timeout: Duration::from_secs(2), gpu_cache: true }
    }
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
