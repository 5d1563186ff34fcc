//! The memory of a ring slot, per backend, and CPU access to it.

use super::config::MAX_CONSUMERS;
use crate::buf::{BufObj, CpuRead, CpuWrite};
use crate::error::{Error, Result};

#[cfg(feature = "vulkan")]
use crate::vulkan::{ExportableBuffer, HostRead, HostWrite};
#[cfg(feature = "vulkan")]
use std::sync::Arc;

/// One slot's buffer: an NvSciBuf object with a read-only duplicate per consumer, or a Vulkan
/// buffer whose memory CUDA imports.
pub(crate) enum SlotMemory {
    NvSci {
        buffer: BufObj,
        views: heapless::Vec<BufObj, MAX_CONSUMERS>,
    },
    #[cfg(feature = "vulkan")]
    Vulkan {
        buffer: Arc<ExportableBuffer>,
    },
}

impl SlotMemory {
    pub(crate) fn buffer(&self) -> Result<&BufObj> {
        match self {
            Self::NvSci { buffer, .. } => Ok(buffer),
            #[cfg(feature = "vulkan")]
            Self::Vulkan { .. } => Err(not_nvsci()),
        }
    }

    pub(crate) fn view(&self, consumer: usize) -> Result<&BufObj> {
        match self {
            Self::NvSci { views, .. } => views.get(consumer).ok_or(Error::Unsupported {
                what: "a consumer view",
                reason: "no such consumer in this ring",
            }),
            #[cfg(feature = "vulkan")]
            Self::Vulkan { .. } => Err(not_nvsci()),
        }
    }

    pub(crate) fn cpu_write(&self) -> Result<FrameWrite<'_>> {
        match self {
            Self::NvSci { buffer, .. } => Ok(FrameWrite(WriteInner::NvSci(buffer.cpu_write()?))),
            // Host access is borrow-checked by the buffer (one writer or many readers); the
            // ring's tokens order it against the engines (the producer holds the frame, every
            // release fence of the slot expired before a CPU acquire hands it out).
            #[cfg(feature = "vulkan")]
            Self::Vulkan { buffer } => Ok(FrameWrite(WriteInner::Host(buffer.host_slice_mut()?))),
        }
    }

    pub(crate) fn cpu_read(&self, consumer: usize) -> Result<FrameRead<'_>> {
        match self {
            Self::NvSci { .. } => Ok(FrameRead(ReadInner::NvSci(self.view(consumer)?.cpu_read()?))),
            #[cfg(feature = "vulkan")]
            Self::Vulkan { buffer } => Ok(FrameRead(ReadInner::Host(buffer.host_slice()?))),
        }
    }
}

#[cfg(feature = "vulkan")]
fn not_nvsci() -> Error {
    Error::Unsupported {
        what: "NvSciBuf access to a frame",
        reason: "the Vulkan backend's frames are Vulkan buffers; use cpu_read/cpu_write or CUDA",
    }
}

enum WriteInner<'a> {
    NvSci(CpuWrite<'a>),
    #[cfg(feature = "vulkan")]
    Host(HostWrite<'a>),
}

/// Write access to a held frame's bytes from the CPU (producer side).
pub struct FrameWrite<'a>(WriteInner<'a>);

impl core::ops::Deref for FrameWrite<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            WriteInner::NvSci(w) => w,
            #[cfg(feature = "vulkan")]
            WriteInner::Host(s) => s,
        }
    }
}

impl core::ops::DerefMut for FrameWrite<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            WriteInner::NvSci(w) => w,
            #[cfg(feature = "vulkan")]
            WriteInner::Host(s) => s,
        }
    }
}

enum ReadInner<'a> {
    NvSci(CpuRead<'a>),
    #[cfg(feature = "vulkan")]
    Host(HostRead<'a>),
}

/// Read access to a held frame's bytes from the CPU (consumer side).
pub struct FrameRead<'a>(ReadInner<'a>);

impl core::ops::Deref for FrameRead<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            ReadInner::NvSci(r) => r,
            #[cfg(feature = "vulkan")]
            ReadInner::Host(s) => s,
        }
    }
}
