//! A Zenoh bridge for nvsci frame streams that ROS 2 nodes on `rmw_zenoh` can subscribe to.
//!
//! * [`BridgeConsumer`]: a mailbox consumer of a stream that publishes each frame it reads as a
//!   `sensor_msgs/msg/Image` (CDR) on the topic's key expression, with the attachment and the
//!   liveliness tokens rmw_zenoh uses, so `ros2 topic list` / `echo` and rviz see it.
//! * [`BridgeProducer`]: subscribes to a topic's images (from a bridge consumer or any ROS 2
//!   publisher on rmw_zenoh) and presents each into a local stream; messages that are
//!   malformed, inconsistent or do not fit the stream are counted and logged, and the bridge
//!   goes on.
//!
//! The wire format targets ROS 2 **Kilted** (rmw_zenoh 0.6): `nv12` is one of its image
//! encodings (from Kilted and Rolling on; Jazzy has none for NV12). The building blocks are
//! public and tested against hand-computed bytes: [`cdr`] (the message), [`attachment`],
//! [`graph`] (key expressions, tokens, QoS, GID) and [`encoding`] (sizes and checks).
//!
//! ```no_run
//! use nvsci::pipeline::{Backend, ConsumerDesc, FrameFormat};
//! use nvsci_zenoh::{BridgeConfig, BridgeConsumer};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ring = Backend::with_library(nvsci::NvSci::mock())
//!     .stream(FrameFormat::nv12(1920, 1080))
//!     .consumer(ConsumerDesc::cpu().mailbox())
//!     .build()?;
//! let (mut camera, mut consumers) = ring.split()?;
//! let config = BridgeConfig::new("/camera/image_raw").frame_id("camera").connect("tcp/10.0.0.2:7447");
//! let bridge = BridgeConsumer::spawn(consumers.remove(0), &config)?;
//! // the camera acquires, writes and presents frames as usual; the bridge publishes the newest
//! # drop((bridge, camera));
//! # Ok(()) }
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod attachment;
pub mod cdr;
mod clock;
pub mod config;
mod consumer;
#[cfg(feature = "cuda")]
mod copy_kernel;
pub mod encoding;
mod error;
pub mod graph;
mod payload;
#[cfg(feature = "cuda")]
mod pool;
mod producer;
#[cfg(feature = "cuda")]
mod readback;
mod rows;

pub use config::{BridgeConfig, ConfigError, Congestion, Mode, Rows, StampClock};
pub use consumer::{BridgeConsumer, PublishStats};
pub use error::BridgeError;
pub use graph::Reliability;
pub use producer::{BridgeProducer, ReceiveStats, Rejected};
