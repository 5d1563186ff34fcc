//! CUDA interop through cudarc (feature `cuda`).
//!
//! * [`CudaGpu::open`] never panics: no driver, no device and bad ordinals are typed errors.
//!   An application that already has a cudarc context keeps it: [`CudaGpu::from_context`]
//!   adopts its `Arc<CudaContext>`, and every call that enqueues work takes the application's
//!   own `&CudaStream` (a stream of another context is refused, naming `stream`).
//! * [`ExternalMemory`] imports NvSciBuf objects (Jetson/DRIVE only; desktop drivers answer
//!   `CUDA_ERROR_NOT_SUPPORTED`, reported as [`Error::Unsupported`](crate::Error::Unsupported))
//!   or opaque fds (Vulkan, [`ExportableAllocation`]); mappings are cudarc `DevicePtr`s, and
//!   `DevicePtrMut` only for [`ReadWrite`] imports.
//! * [`CudaSyncObj`] signals into and waits on NvSciSync [`Fence`](crate::sync::Fence)s with an
//!   automatic, explainable [`MemSync`] policy; [`CudaSemaphore`] handles fd semaphores.
//!
//! What runs where: the NvSciBuf/NvSciSync imports only work on Tegra drivers. Everything
//! else (fd import, mapping, arrays, timeline semaphores, VMM export) works on any CUDA GPU.
//!
//! # CUDA versions
//!
//! The CUDA version whose driver API cudarc binds is chosen with one `cuda-*` feature of this
//! crate, named as cudarc names it (`cuda-11040` for CUDA 11.4, ... `cuda-13040`); each implies
//! `cuda`. The default features include `cuda-12060`. Exactly one may be on, because cudarc
//! cannot bind two versions at once, so another version needs `default-features = false`:
//!
//! ```toml
//! nvsci = { version = "0.1", default-features = false, features = ["mock", "cuda", "cuda-13000"] }
//! ```
//!
//! Building needs no CUDA toolkit whatever the version: `libcuda` is opened at run time, and
//! cudarc (0.19.5 and newer) resolves each entry point when it is first called, so a build only
//! needs the driver to have the entry points that are actually called. Pick the CUDA version of
//! the oldest driver the program will run on (on Jetson, the JetPack's CUDA: `cuda-11040` for
//! JetPack 5 and DRIVE OS 6, `cuda-12020` for JetPack 6.0, `cuda-12060` for JetPack 6.1 and
//! 6.2, `cuda-13000` for JetPack 7). A newer driver runs an older version's calls unchanged.
//!
//! What this module calls that some versions lack, and what it does instead:
//!
//! | entry point or type | versions without it | instead |
//! |---|---|---|
//! | `cuGetProcAddress_v2` (resolves `cuDeviceGetNvSciSyncAttributes`) | before 12.0 | `cuGetProcAddress` (11.x form, no symbol status) |
//! | `cuStreamWaitValue64_v2`, `cuStreamWriteValue64_v2` (fences of host-memory implementations, the mock on a GPU) | before 11.7 | `cuStreamWaitValue64`, `cuStreamWriteValue64`; drivers before 11.7 may keep these disabled (`CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS`), and the call then fails with an error |
//! | `CUmemLocation::id` as a plain field ([`ExportableAllocation`]) | from 13.2 on it is a union member | the same value through the union |
//! | `cuMipmappedArrayGetMemoryRequirements` (the real footprint of a CUDA array, [`CudaGpu::array_footprint`]) | before 11.6 (builds for 11.4 and 11.5, and older drivers) | footprint unknown: [`ExternalMemory::map_array`] checks the packed size of level 0 only |
//!
//! When a build for a newer version runs on an older driver, the crate checks the driver version
//! (`cuDriverGetVersion`) before these calls and returns [`Error::Unsupported`](crate::Error::Unsupported)
//! naming the feature to build with, rather than letting cudarc panic on the missing symbol:
//! `cuDeviceGetNvSciSyncAttributes` needs a 12.0 driver from builds for 12.0 and newer, and
//! importing host-memory sync objects ([`CudaSyncObj::import`]) a 11.7 driver from builds for
//! 11.7 and newer. Calls made through cudarc's own API (contexts, streams, modules, copies) are
//! cudarc's; which of those a version needs is documented by cudarc.

mod array;
mod desc;
mod device;
mod driver;
mod fd;
mod host;
mod memory;
pub mod memsync;
mod result;
mod sampling;
mod semaphore;
mod sync_attrs;
mod teardown;
mod vmm;

#[cfg(feature = "vulkan")]
pub(crate) use memory::full_mip_chain;

pub use array::ArrayDesc;
pub use array::{ArrayFootprint, ArrayRegion};
pub use desc::{
    buffer as buffer_desc, fd_semaphore as fd_semaphore_desc, mipmapped_array as mipmapped_array_desc,
};
pub use desc::{nvscibuf_memory as nvscibuf_memory_desc, nvscisync_semaphore as nvscisync_semaphore_desc};
pub use desc::{opaque_fd_memory as opaque_fd_memory_desc, signal as signal_params, wait as wait_params};
pub use device::CudaGpu;
pub use driver::driver_present;
pub use memory::{
    array_format, probe_nvscibuf_import, Access, ExternalMemory, MappedArray, MappedBuffer, ReadOnly,
    ReadWrite,
};
pub use memsync::MemSync;
pub(crate) use result::from_driver;
pub use result::CUDA_ERROR_NOT_SUPPORTED;
pub use sampling::{ArraySurface, ArrayTexture, TextureAddress, TextureFilter, TextureOptions, TextureRead};
pub use semaphore::{CudaSemaphore, CudaSyncObj, SemaphoreKind};
pub use sync_attrs::{
    fill_sync_attrs, nvsci_sync_attrs_available, probe_sync_attrs_entry, CUDA_NVSCISYNC_ATTR_SIGNAL,
    CUDA_NVSCISYNC_ATTR_WAIT,
};
pub use teardown::DESTROY_TIMEOUT;
pub use vmm::ExportableAllocation;

/// The cudarc crate this module is built on (same version).
pub use cudarc;
