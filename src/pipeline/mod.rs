//! Frame-ring pipelines: one producer, several consumers, zero copies.
//!
//! One stream ([`FrameRing`], split into one [`Producer`] and its [`Consumer`]s) over any
//! backend (an NvSci library, NVIDIA's or the mock; Vulkan with the `vulkan` feature), built
//! one way ([`Backend::stream`] -> [`StreamBuilder`]), and one vocabulary for every party:
//! acquire, present and release tokens that wait and signal on the party's [`Engine`] (the
//! CPU, or a CUDA stream).
//!
//! ```
//! # #[cfg(feature = "mock")] {
//! use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat};
//! let ring = Backend::with_library(nvsci::NvSci::mock())
//!     .stream(FrameFormat::nv12(64, 32))
//!     .frames(3)
//!     .consumer(ConsumerDesc::cpu())
//!     .build()
//!     .unwrap();
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
mod builder;
mod config;
#[cfg(feature = "cuda")]
mod cuda;
mod engine;
mod format;
mod party;
mod ring;
mod select;
mod state;

pub use backend::ipc::RemoteSeat;
pub use backend::{FrameRead, FrameWrite};
pub use builder::StreamBuilder;
pub use config::{ConsumerDesc, MAX_CONSUMERS, MAX_FRAMES};
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub use cuda::{CudaFrame, CudaFrameMut};
pub use engine::Engine;
pub use format::{FrameFormat, FrameLayout, Nv12Image};
pub use ring::{Attacher, Consumer, ConsumerFrame, FrameRing, Producer, ProducerFrame};
pub use select::{Backend, BackendKind};
pub use state::{ConsumerSet, ConsumerStats, QueueMode, USER_HEADER_SIZE};
