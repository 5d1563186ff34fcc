//! Vulkan as the buffer and semaphore source on desktop GPUs (feature `vulkan`).
//!
//! Desktop NVIDIA drivers have no NvSci, so on a desktop the CUDA import, map, signal and wait
//! machinery of [`crate::cuda`] is fed by Vulkan instead: exportable memory and semaphores,
//! handed over as opaque POSIX fds.
//!
//! * [`VulkanContext`]: the loader is opened at run time (nothing is linked); the device is
//!   matched to a CUDA device by UUID ([`VulkanContext::for_cuda`]), and a physical device in a
//!   device group of more than one is refused. No loader, no driver or no match is
//!   [`Error::VulkanUnavailable`](crate::Error::VulkanUnavailable), never a panic.
//! * [`ExportableBuffer`] / [`ExportableImage`]: dedicated `OPAQUE_FD` allocations, imported
//!   into CUDA as a linear mapping ([`CudaImportedBuffer`]) or a mipmapped array
//!   ([`CudaImportedImage`], format mapping in [`cuda_array_format`]).
//! * [`TimelineSemaphore`], [`BinarySemaphore`], [`HandoffSemaphores`]: export support is probed
//!   ([`semaphore_export_support`]); without timeline export the hand-off falls back to a
//!   binary pair, visible through [`HandoffSemaphores::mode`].
//! * [`FrameProducer`]: Vulkan writes a frame, CUDA processes it, Vulkan takes it back, with
//!   the queue-family ownership transfers to and from `VK_QUEUE_FAMILY_EXTERNAL`; no heap
//!   allocation per frame.
//!
//! Teardown order is carried by ownership: every object holds an `Arc<VulkanContext>` (whose
//! drop waits for the device to go idle), and the CUDA-side wrappers ([`CudaImportedBuffer`],
//! [`CudaImportedImage`], [`CudaHandoff`]) drop their CUDA mappings and imports before the
//! Vulkan objects they hold.
//!
//! ```no_run
//! # fn main() -> nvsci::Result<()> {
//! use nvsci::cuda::CudaDevice;
//! use nvsci::vulkan::*;
//! use std::time::Duration;
//!
//! let cuda = CudaDevice::open(0)?;
//! let vk = VulkanContext::for_cuda(&cuda)?;
//! let buffer = ExportableBuffer::new(&vk, 1 << 20, Default::default())?;
//! let imported = buffer.import_into_cuda(&cuda)?;
//! let sems = HandoffSemaphores::new(&vk)?;
//! let handoff = sems.import_into_cuda(&cuda)?;
//! let mut producer = FrameProducer::new(&vk, &buffer, &sems, ProducerConfig::default())?;
//! let stream = cuda.default_stream();
//!
//! producer.staging_mut()?.fill(7);
//! let frame = producer.submit_produce()?;
//! handoff.wait_produced(&stream, &frame)?;
//! // ... kernels on imported.device_address() ...
//! handoff.signal_done(&stream, &frame)?;
//! producer.submit_return()?;
//! let bytes = producer.wait_returned(Duration::from_secs(5))?;
//! # let _ = bytes;
//! # Ok(()) }
//! ```

mod buffer;
mod context;
mod format;
mod image;
mod producer;
mod semaphore;

pub use buffer::{CudaImportedBuffer, ExportableBuffer};
pub use context::{uuid_string, ContextOptions, DeviceInfo, DeviceSelection, VulkanContext, LOADER_NAME};
pub use format::{cuda_array_flags, cuda_array_format, format_name, CudaFormat, SUPPORTED_FORMATS};
pub use image::{CudaImportedImage, ExportableImage, ImageDesc};
pub use producer::{FrameProducer, FrameSource, ProducerConfig, Readback, MAX_READBACK_WINDOWS};
pub use semaphore::{
    semaphore_export_support, BinarySemaphore, CudaHandoff, FrameValues, HandoffMode, HandoffSemaphores,
    SemaphoreExportSupport, TimelineSemaphore,
};

/// The ash crate this module is built on (same version), for raw handles and flags.
pub use ash;
