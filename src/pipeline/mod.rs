//! Frame-ring pipelines: one producer, several consumers, zero copies.
//!
//! ```
//! # #[cfg(feature = "mock")] {
//! use nvsci::pipeline::{FrameFormat, FrameRing, RingConfig};
//! let ring = FrameRing::new(
//!     &nvsci::NvSci::mock(),
//!     FrameFormat::Nv12 { width: 64, height: 32 },
//!     RingConfig { frames: 3, consumers: 1, ..Default::default() },
//! )
//! .unwrap();
//! let (mut producer, mut consumers) = ring.split().unwrap();
//! let frame = producer.acquire().unwrap();
//! producer.cpu_write(&frame).unwrap().fill(7);
//! producer.present(frame).unwrap();
//! let c = &mut consumers[0];
//! let frame = c.acquire().unwrap();
//! assert!(c.cpu_read(&frame).unwrap().iter().all(|&b| b == 7));
//! c.release(frame).unwrap();
//! # }
//! ```

mod backend;
mod config;
#[cfg(feature = "cuda")]
mod cuda;
mod engine;
mod fence;
mod format;
pub mod ipc;
mod memory;
mod nvsci;
mod ring;
#[cfg(feature = "vulkan")]
mod vulkan;
#[cfg(feature = "vulkan")]
mod vulkan_producer;

pub use backend::{Backend, BackendKind};
pub use config::{RingConfig, MAX_CONSUMERS, MAX_FRAMES};
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub use cuda::{CudaConsumer, CudaFrame, CudaFrameMut, CudaProducer};
pub use engine::Engine;
pub use fence::RingFence;
pub use format::{FrameFormat, FrameLayout};
pub use memory::{FrameRead, FrameWrite};
pub use ring::{Consumer, ConsumerFrame, FrameRing, Producer, ProducerFrame};
#[cfg(feature = "vulkan")]
#[cfg_attr(docsrs, doc(cfg(feature = "vulkan")))]
pub use vulkan_producer::{FrameProducer, FrameSource, ProducerConfig, Readback, MAX_READBACK_WINDOWS};
