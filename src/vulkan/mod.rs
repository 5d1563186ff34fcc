//! Vulkan as the buffer and semaphore source on desktop GPUs (feature `vulkan`).
//!
//! Desktop NVIDIA drivers have no NvSci, so on a desktop the CUDA import, map, signal and wait
//! machinery of [`crate::cuda`] is fed by Vulkan instead: exportable memory and semaphores,
//! handed over as opaque POSIX fds.
//!
//! * [`VulkanContext`]: the loader is opened at run time (nothing is linked); the device is
//!   matched to a CUDA device by UUID ([`VulkanContext::for_cuda`]), and a physical device in a
//!   device group of more than one is refused. No loader, no driver or no match is
//!   [`VulkanError::Unavailable`](crate::VulkanError::Unavailable), never a panic. A renderer
//!   that already has an instance, device and queue hands them over with the `unsafe`
//!   [`VulkanContext::adopt`] ([`ExistingDevice`]); the context then never destroys them.
//! * [`ExportableBuffer`] / [`ExportableImage`]: dedicated `OPAQUE_FD` allocations, imported
//!   into CUDA as a linear mapping ([`CudaImportedBuffer`]) or a mipmapped array
//!   ([`CudaImportedImage`], format mapping in [`cuda_array_format`]). Buffers are device-local,
//!   or host-visible and mapped ([`MemoryPlacement`], [`ExportableBuffer::host_slice`]).
//! * [`TimelineSemaphore`], [`BinarySemaphore`], [`HandoffSemaphores`]: export support is probed
//!   ([`semaphore_export_support`]); without timeline export the hand-off falls back to a
//!   binary pair, visible through [`HandoffSemaphores::mode`].
//!
//! [`FrameProducer`] is a hand-off helper built on these (Vulkan writes a frame, CUDA processes
//! it, Vulkan takes it back, with the queue-family ownership transfers to and from
//! `VK_QUEUE_FAMILY_EXTERNAL`). The frame ring's Vulkan backend lives in [`crate::pipeline`]
//! ([`Backend::vulkan`](crate::pipeline::Backend::vulkan)).
//!
//! Teardown order is carried by ownership: every object holds an `Arc<VulkanContext>` (whose
//! drop waits for the device to go idle), and the CUDA-side wrappers ([`CudaImportedBuffer`],
//! [`CudaImportedImage`], [`CudaHandoff`]) drop their CUDA mappings and imports before the
//! Vulkan objects they hold.
//!
//! ```no_run
//! # fn main() -> nvsci::Result<()> {
//! use nvsci::cuda::CudaGpu;
//! use nvsci::vulkan::*;
//! use std::time::Duration;
//!
//! let cuda = CudaGpu::open(0)?;
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
mod frame_producer;
mod image;
mod semaphore;

pub use buffer::{CudaImportedBuffer, ExportableBuffer, HostRead, HostWrite, MemoryPlacement};
pub use context::{
    uuid_string, ContextOptions, DeviceInfo, DeviceSelection, ExistingDevice, VulkanContext, LOADER_NAME,
};
pub use format::{cuda_array_flags, cuda_array_format, format_name, CudaFormat, SUPPORTED_FORMATS};
pub use frame_producer::{FrameProducer, FrameSource, ProducerConfig, Readback, MAX_READBACK_WINDOWS};
pub use image::{CudaImportedImage, ExportableImage, ImageDesc};
pub use semaphore::{
    semaphore_export_support, BinarySemaphore, CudaHandoff, FrameValues, HandoffMode, HandoffSemaphores,
    SemaphoreExportSupport, TimelineSemaphore,
};

/// The ash crate this module is built on (same version), for raw handles and flags.
pub use ash;

// For the ring's Vulkan backend in the pipeline module.
pub(crate) use buffer::check_same_gpu;

/// Vulkan contexts for unit tests (lavapipe in CI).
#[cfg(test)]
pub(crate) mod test_support {
    use super::{DeviceSelection, VulkanContext};
    use std::sync::Arc;

    /// The process's shared context for any Vulkan device: `None` (a recorded skip) without a
    /// device, unless one is required (`NVSCI_REQUIRE=vulkan`, `NVSCI_REQUIRE_VULKAN=1`). Tests
    /// use it from parallel threads.
    pub(crate) fn context() -> Option<Arc<VulkanContext>> {
        use crate::test_require::{unavailable, Capability};
        match VulkanContext::new(DeviceSelection::Any) {
            Ok(c) => Some(c),
            Err(e) => unavailable(&[Capability::Vulkan], format!("no Vulkan device: {e}")),
        }
    }
}
