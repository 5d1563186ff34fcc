//! Errors of starting a bridge.

use crate::config::ConfigError;
use nvsci::pipeline::{FrameFormat, QueueMode};

/// Why a bridge could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BridgeError {
    /// The configuration is not valid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A Zenoh call failed.
    #[error("Zenoh: could not {what}: {reason}")]
    Zenoh {
        /// What the bridge tried.
        what: &'static str,
        /// Zenoh's error.
        reason: String,
    },
    /// The stream refused (attaching the consumer, ...).
    #[error("stream: {0}")]
    Stream(nvsci::Error),
    /// The consumer is not in mailbox mode: a FIFO consumer would make a slow link hold the
    /// camera back.
    #[error("the bridge needs a mailbox consumer, not {mode:?}")]
    NotMailbox {
        /// The consumer's mode.
        mode: QueueMode,
    },
    /// The stream's frames are not pitch-linear NV12 or RGBA, or their layout does not hold
    /// their rows.
    #[error("frames of {format:?} cannot be published as a sensor_msgs/msg/Image")]
    Format {
        /// The stream's format.
        format: FrameFormat,
    },
    /// The producer is not a CPU producer (the bridge writes the frames from the CPU).
    #[error("the bridge needs a CPU producer")]
    NotCpuProducer,
    /// The bridge's thread could not be started.
    #[error("could not start the bridge's thread: {0}")]
    Thread(std::io::ErrorKind),
}

impl BridgeError {
    pub(crate) fn zenoh(what: &'static str, e: impl std::fmt::Display) -> Self {
        Self::Zenoh { what, reason: e.to_string() }
    }
}
