//! The identity of a GPU, shared by NvSciBuf and NvSciSync attributes, CUDA and the pipeline.

use crate::attr::pod_elem;
use nvsci_sys as sys;

/// A GPU identity: the 16 bytes of the device UUID (`NvSciRmGpuId`), as CUDA reports it
/// (`cuDeviceGetUuid`) and as NvSciBuf/NvSciSync attributes name a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct GpuId(pub [u8; 16]);
pod_elem!(GpuId);

// The layout of the C struct (16 bytes, checked against the documented value).
const _: () = assert!(core::mem::size_of::<GpuId>() == core::mem::size_of::<sys::NvSciRmGpuId>());
