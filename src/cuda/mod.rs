//! CUDA interop through cudarc (feature `cuda`).
//!
//! * [`CudaDevice::open`] never panics: no driver, no device and bad ordinals are typed errors.
//! * [`ExternalMemory`] imports NvSciBuf objects (Jetson/DRIVE only; desktop drivers answer
//!   `CUDA_ERROR_NOT_SUPPORTED`, reported as [`Error::Unsupported`](crate::Error::Unsupported))
//!   or opaque fds (Vulkan, [`ExportableAllocation`]); mappings are cudarc `DevicePtr`s, and
//!   `DevicePtrMut` only for [`ReadWrite`] imports.
//! * [`CudaSyncObj`] signals into and waits on NvSciSync [`Fence`](crate::sync::Fence)s with an
//!   automatic, explainable [`MemSync`] policy; [`CudaSemaphore`] handles fd semaphores.
//!
//! What runs where: the NvSciBuf/NvSciSync imports only work on Tegra drivers. Everything
//! else (fd import, mapping, arrays, timeline semaphores, VMM export) works on any CUDA GPU.

mod desc;
mod device;
mod fd;
mod host;
mod memory;
pub mod memsync;
mod result;
mod semaphore;
mod sync_attrs;
mod vmm;

pub use desc::{
    buffer as buffer_desc, fd_semaphore as fd_semaphore_desc, mipmapped_array as mipmapped_array_desc,
};
pub use desc::{nvscibuf_memory as nvscibuf_memory_desc, nvscisync_semaphore as nvscisync_semaphore_desc};
pub use desc::{opaque_fd_memory as opaque_fd_memory_desc, signal as signal_params, wait as wait_params};
pub use device::{driver_present, CudaDevice, DESTROY_TIMEOUT};
pub use memory::{
    array_format, probe_nvscibuf_import, Access, ArrayDesc, ExternalMemory, MappedArray, MappedBuffer,
    ReadOnly, ReadWrite,
};
pub use memsync::MemSync;
pub use result::CUDA_ERROR_NOT_SUPPORTED;
pub use semaphore::{CudaSemaphore, CudaSyncObj, SemaphoreKind};
pub use sync_attrs::{
    fill_sync_attrs, nvsci_sync_attrs_available, probe_sync_attrs_entry, CUDA_NVSCISYNC_ATTR_SIGNAL,
    CUDA_NVSCISYNC_ATTR_WAIT,
};
pub use vmm::ExportableAllocation;

/// The cudarc crate this module is built on (same version).
pub use cudarc;
