//! External memory (its import and the mipmapped arrays mapped from it), CUDA arrays, the 2D
//! copies between arrays and host memory, surface objects, and page-locked host memory.
//! `cuDestroyExternalMemory`, `cuExternalMemoryGetMappedBuffer` and `cuMemFree` are cudarc's
//! `result::{external_memory, memory_free}`.
//!
//! Contract common to every function here (cuda.h): the context the objects belong to is
//! current on the calling thread, and every handle passed is live (not yet destroyed).

use super::check;
use crate::error::Result;
use core::ffi::c_void;
use cudarc::driver::sys;

/// `cuImportExternalMemory`: a new external-memory handle, to be destroyed once with cudarc's
/// `external_memory::destroy_external_memory` after every mapping of it is released.
///
/// # Safety
/// `desc` is complete, its size the size of the memory object, and its handle (an NvSciBuf
/// object, an fd) valid for the call. An fd handle is the driver's on success ("ownership of
/// the file descriptor is transferred to the CUDA driver"), the caller's still on failure; an
/// NvSciBuf object must outlive the import.
pub(crate) unsafe fn import_external_memory(
    desc: &sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC,
) -> Result<sys::CUexternalMemory> {
    let mut raw = core::ptr::null_mut();
    // SAFETY: caller contract; `raw` is a valid out-pointer.
    check("cuImportExternalMemory", unsafe { sys::cuImportExternalMemory(&mut raw, desc) })?;
    Ok(raw)
}

/// `cuExternalMemoryGetMappedMipmappedArray`: a mipmapped array over part of `mem`, to be
/// destroyed once with [`mipmapped_array_destroy`] before `mem` is.
///
/// # Safety
/// `mem` is live; `desc` is complete, the array lies inside the imported size, and its level
/// count is within the extent's chain (exactly 1 for NvSciBuf imports).
pub(crate) unsafe fn external_memory_get_mapped_mipmapped_array(
    mem: sys::CUexternalMemory,
    desc: &sys::CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC,
) -> Result<sys::CUmipmappedArray> {
    let mut raw = core::ptr::null_mut();
    // SAFETY: caller contract; `raw` is a valid out-pointer.
    check("cuExternalMemoryGetMappedMipmappedArray", unsafe {
        sys::cuExternalMemoryGetMappedMipmappedArray(&mut raw, mem, desc)
    })?;
    Ok(raw)
}

/// `cuMipmappedArrayCreate`: a new mipmapped array of `levels` levels, to be destroyed once with
/// [`mipmapped_array_destroy`]. With `CUDA_ARRAY3D_DEFERRED_MAPPING` in the flags the driver
/// allocates no memory for it, only its handle.
///
/// # Safety
/// `desc` is complete; a context is current.
#[cfg(not(any(feature = "cuda-11040", feature = "cuda-11050")))]
pub(crate) unsafe fn mipmapped_array_create(
    desc: &sys::CUDA_ARRAY3D_DESCRIPTOR,
    levels: u32,
) -> Result<sys::CUmipmappedArray> {
    let mut raw = core::ptr::null_mut();
    // SAFETY: caller contract; `raw` is a valid out-pointer.
    check("cuMipmappedArrayCreate", unsafe { sys::cuMipmappedArrayCreate(&mut raw, desc, levels) })?;
    Ok(raw)
}

/// `cuMipmappedArrayGetMemoryRequirements` (CUDA 11.6): the size and alignment the array needs
/// on `device`.
///
/// # Safety
/// `array` is a live deferred-mapping array (`CUDA_ARRAY3D_DEFERRED_MAPPING`) and `device` the
/// current context's device; the driver is 11.6 or newer (cudarc panics on a missing symbol).
#[cfg(not(any(feature = "cuda-11040", feature = "cuda-11050")))]
pub(crate) unsafe fn mipmapped_array_get_memory_requirements(
    array: sys::CUmipmappedArray,
    device: sys::CUdevice,
) -> Result<sys::CUDA_ARRAY_MEMORY_REQUIREMENTS> {
    let mut req = sys::CUDA_ARRAY_MEMORY_REQUIREMENTS { size: 0, alignment: 0, reserved: [0; 4] };
    // SAFETY: caller contract; `req` is a valid out-pointer.
    check("cuMipmappedArrayGetMemoryRequirements", unsafe {
        sys::cuMipmappedArrayGetMemoryRequirements(&mut req, array, device)
    })?;
    Ok(req)
}

/// `cuMipmappedArrayGetLevel`: level `level` of `array`, owned by the mipmapped array (valid
/// while it lives, never destroyed on its own).
///
/// # Safety
/// `array` is live and `level` below its level count.
pub(crate) unsafe fn mipmapped_array_get_level(
    array: sys::CUmipmappedArray,
    level: u32,
) -> Result<sys::CUarray> {
    let mut raw = core::ptr::null_mut();
    // SAFETY: caller contract; `raw` is a valid out-pointer.
    check("cuMipmappedArrayGetLevel", unsafe { sys::cuMipmappedArrayGetLevel(&mut raw, array, level) })?;
    Ok(raw)
}

/// `cuMipmappedArrayDestroy`, also for arrays from
/// [`external_memory_get_mapped_mipmapped_array`] (as cuda.h documents).
///
/// # Safety
/// `array` is destroyed once, no work that uses it (or one of its levels, or a surface over
/// one) is pending, and no surface or texture object over it is used afterwards.
pub(crate) unsafe fn mipmapped_array_destroy(array: sys::CUmipmappedArray) -> Result<()> {
    // SAFETY: caller contract.
    check("cuMipmappedArrayDestroy", unsafe { sys::cuMipmappedArrayDestroy(array) })
}

/// `cuMemcpy2D` (synchronous for host memory).
///
/// # Safety
/// Every array, device and host address `copy` names is live and covers the rows and bytes the
/// copy touches; host memory written is not read or written elsewhere during the call.
pub(crate) unsafe fn memcpy_2d(copy: &sys::CUDA_MEMCPY2D) -> Result<()> {
    // SAFETY: caller contract.
    check("cuMemcpy2D", unsafe { sys::cuMemcpy2D_v2(copy) })
}

/// `cuMemcpy2DAsync` on `stream`.
///
/// # Safety
/// As for [`memcpy_2d`], for as long as the copy runs: the memory `copy` names stays allocated,
/// and host memory is neither freed nor touched elsewhere, until the copy has completed on
/// `stream` (a live stream of the current context).
pub(crate) unsafe fn memcpy_2d_async(copy: &sys::CUDA_MEMCPY2D, stream: sys::CUstream) -> Result<()> {
    // SAFETY: caller contract.
    check("cuMemcpy2DAsync", unsafe { sys::cuMemcpy2DAsync_v2(copy, stream) })
}

/// `cuSurfObjectCreate`: a surface object over the resource `desc` names, to be destroyed once
/// with [`surf_object_destroy`] before that resource is.
///
/// # Safety
/// `desc` is complete and names a live array (created with `CUDA_ARRAY3D_SURFACE_LDST`, else the
/// driver refuses it) that outlives the surface.
pub(crate) unsafe fn surf_object_create(desc: &sys::CUDA_RESOURCE_DESC) -> Result<sys::CUsurfObject> {
    let mut obj: sys::CUsurfObject = 0;
    // SAFETY: caller contract; `obj` is a valid out-pointer.
    check("cuSurfObjectCreate", unsafe { sys::cuSurfObjectCreate(&mut obj, desc) })?;
    Ok(obj)
}

/// `cuSurfObjectDestroy`.
///
/// # Safety
/// `obj` came from [`surf_object_create`], is destroyed once, and no work that uses it is
/// pending.
pub(crate) unsafe fn surf_object_destroy(obj: sys::CUsurfObject) -> Result<()> {
    // SAFETY: caller contract.
    check("cuSurfObjectDestroy", unsafe { sys::cuSurfObjectDestroy(obj) })
}

/// `cuTexObjectCreate`: a texture object over the resource `res` names, sampled as `tex` says,
/// to be destroyed once with [`tex_object_destroy`] before that resource is.
///
/// # Safety
/// `res` and `tex` are complete and `res` names a live array that outlives the texture.
pub(crate) unsafe fn tex_object_create(
    res: &sys::CUDA_RESOURCE_DESC,
    tex: &sys::CUDA_TEXTURE_DESC,
) -> Result<sys::CUtexObject> {
    let mut obj: sys::CUtexObject = 0;
    // SAFETY: caller contract; `obj` is a valid out-pointer; no resource view is given.
    check("cuTexObjectCreate", unsafe { sys::cuTexObjectCreate(&mut obj, res, tex, core::ptr::null()) })?;
    Ok(obj)
}

/// `cuTexObjectDestroy`.
///
/// # Safety
/// `obj` came from [`tex_object_create`], is destroyed once, and no work that uses it is
/// pending.
pub(crate) unsafe fn tex_object_destroy(obj: sys::CUtexObject) -> Result<()> {
    // SAFETY: caller contract.
    check("cuTexObjectDestroy", unsafe { sys::cuTexObjectDestroy(obj) })
}

/// `cuMemHostRegister`: page-locks `len` bytes at `base` with `flags`, to be unregistered once
/// with [`mem_host_unregister`].
///
/// # Safety
/// `base..base + len` is allocated host memory that stays allocated until it is unregistered.
/// (A range overlapping one registered already is refused by the driver with
/// `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`, an error, not undefined behaviour.)
pub(crate) unsafe fn mem_host_register(base: *mut c_void, len: usize, flags: u32) -> Result<()> {
    // SAFETY: caller contract.
    check("cuMemHostRegister", unsafe { sys::cuMemHostRegister_v2(base, len, flags) })
}

/// `cuMemHostGetDevicePointer` (flags 0): the device address of registered host memory in the
/// current context, valid while the memory stays registered.
///
/// # Safety
/// `host` lies in a range registered with `CU_MEMHOSTREGISTER_DEVICEMAP`.
pub(crate) unsafe fn mem_host_get_device_pointer(host: *mut c_void) -> Result<sys::CUdeviceptr> {
    let mut ptr = 0;
    // SAFETY: caller contract; `ptr` is a valid out-pointer.
    check("cuMemHostGetDevicePointer", unsafe { sys::cuMemHostGetDevicePointer_v2(&mut ptr, host, 0) })?;
    Ok(ptr)
}

/// `cuMemHostUnregister`.
///
/// # Safety
/// `base` is the first byte of a range registered with [`mem_host_register`], unregistered
/// once, and no work that uses the range (through its device address) is pending.
pub(crate) unsafe fn mem_host_unregister(base: *mut c_void) -> Result<()> {
    // SAFETY: caller contract.
    check("cuMemHostUnregister", unsafe { sys::cuMemHostUnregister(base) })
}
