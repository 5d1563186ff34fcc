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
//! producer.buffer(&frame).unwrap().cpu_write().unwrap().fill(7);
//! producer.present(frame).unwrap();
//! let c = &mut consumers[0];
//! let frame = c.acquire().unwrap();
//! assert!(c.view(&frame).unwrap().cpu_read().unwrap().iter().all(|&b| b == 7));
//! c.release(frame).unwrap();
//! # }
//! ```

mod backend;
pub mod color;
mod format;
mod ring;
#[cfg(feature = "vulkan")]
mod vulkan_ring;

pub use backend::{Backend, BackendKind};
pub use format::{FrameFormat, FrameLayout};
pub use ring::{
    Consumer, ConsumerFrame, FrameRing, Producer, ProducerFrame, RingConfig, MAX_CONSUMERS, MAX_FRAMES,
};
#[cfg(feature = "vulkan")]
pub use vulkan_ring::{PresentedFrame, VulkanFrame, VulkanFrameRing, VULKAN_PITCH_ALIGN, VULKAN_PLANE_ALIGN};
