//! The virtual-memory API (`cuMem*` of CUDA 10.2): physical allocations, address ranges, their
//! mappings and access, and the export of an allocation as a shareable handle.
//!
//! Contract common to every function here (cuda.h): the context of the allocation's device is
//! current on the calling thread, and every handle or address passed was made by these calls
//! in that context and is not yet released.

use super::check;
use crate::error::Result;
use core::ffi::c_void;
use cudarc::driver::sys;

/// `cuMemGetAllocationGranularity`: the granularity `option` of allocations described by `prop`.
///
/// # Safety
/// `prop` is a complete property block (its location a valid device of the current context).
pub(crate) unsafe fn get_allocation_granularity(
    prop: &sys::CUmemAllocationProp,
    option: sys::CUmemAllocationGranularity_flags,
) -> Result<usize> {
    let mut gran = 0usize;
    // SAFETY: caller contract; `gran` is a valid out-pointer.
    check("cuMemGetAllocationGranularity", unsafe {
        sys::cuMemGetAllocationGranularity(&mut gran, prop, option)
    })?;
    Ok(gran)
}

/// `cuMemCreate` (flags 0): a physical allocation of `size` bytes, to be released once with
/// [`release`].
///
/// # Safety
/// `prop` is a complete property block and `size` a multiple of its granularity
/// ([`get_allocation_granularity`]).
pub(crate) unsafe fn create(
    size: usize,
    prop: &sys::CUmemAllocationProp,
) -> Result<sys::CUmemGenericAllocationHandle> {
    let mut h = 0;
    // SAFETY: caller contract; `h` is a valid out-pointer.
    check("cuMemCreate", unsafe { sys::cuMemCreate(&mut h, size, prop, 0) })?;
    Ok(h)
}

/// `cuMemAddressReserve` (alignment, address hint and flags 0): a fresh virtual address range
/// of `size` bytes, to be freed once with [`address_free`].
///
/// # Safety
/// `size` is a multiple of the allocation granularity; a context is current.
pub(crate) unsafe fn address_reserve(size: usize) -> Result<sys::CUdeviceptr> {
    let mut ptr = 0;
    // SAFETY: caller contract; `ptr` is a valid out-pointer.
    check("cuMemAddressReserve", unsafe { sys::cuMemAddressReserve(&mut ptr, size, 0, 0, 0) })?;
    Ok(ptr)
}

/// `cuMemMap` (offset and flags 0): maps the whole of allocation `handle` at `ptr`, to be
/// unmapped once with [`unmap`].
///
/// # Safety
/// `ptr..ptr + size` lies in a reserved range and is not mapped; `size` is the allocation's
/// size; `handle` is a live allocation.
pub(crate) unsafe fn map(
    ptr: sys::CUdeviceptr,
    size: usize,
    handle: sys::CUmemGenericAllocationHandle,
) -> Result<()> {
    // SAFETY: caller contract.
    check("cuMemMap", unsafe { sys::cuMemMap(ptr, size, 0, handle, 0) })
}

/// `cuMemSetAccess` with one access descriptor.
///
/// # Safety
/// `ptr..ptr + size` is mapped; `access` names a valid location.
pub(crate) unsafe fn set_access(
    ptr: sys::CUdeviceptr,
    size: usize,
    access: &sys::CUmemAccessDesc,
) -> Result<()> {
    // SAFETY: caller contract; one descriptor is passed.
    check("cuMemSetAccess", unsafe { sys::cuMemSetAccess(ptr, size, access, 1) })
}

/// `cuMemExportToShareableHandle` as a POSIX file descriptor (flags 0): a new descriptor the
/// caller owns (a negative value is returned as it came).
///
/// # Safety
/// `handle` is a live allocation created with `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR` among
/// its requested handle types.
pub(crate) unsafe fn export_to_posix_fd(handle: sys::CUmemGenericAllocationHandle) -> Result<i32> {
    let mut fd: i32 = -1;
    // SAFETY: for POSIX_FILE_DESCRIPTOR the driver writes an int through the pointer; caller
    // contract otherwise.
    check("cuMemExportToShareableHandle", unsafe {
        sys::cuMemExportToShareableHandle(
            &mut fd as *mut i32 as *mut c_void,
            handle,
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            0,
        )
    })?;
    Ok(fd)
}

/// `cuMemUnmap`.
///
/// # Safety
/// `ptr..ptr + size` is exactly a range mapped with [`map`], unmapped once, and no work that uses
/// it is pending.
pub(crate) unsafe fn unmap(ptr: sys::CUdeviceptr, size: usize) -> Result<()> {
    // SAFETY: caller contract.
    check("cuMemUnmap", unsafe { sys::cuMemUnmap(ptr, size) })
}

/// `cuMemAddressFree`.
///
/// # Safety
/// `ptr..ptr + size` is exactly a range from [`address_reserve`], freed once, with nothing
/// mapped in it.
pub(crate) unsafe fn address_free(ptr: sys::CUdeviceptr, size: usize) -> Result<()> {
    // SAFETY: caller contract.
    check("cuMemAddressFree", unsafe { sys::cuMemAddressFree(ptr, size) })
}

/// `cuMemRelease`. The memory itself lives on while a mapping or an exported handle refers to
/// it, as the driver documents.
///
/// # Safety
/// `handle` came from [`create`] and is released once.
pub(crate) unsafe fn release(handle: sys::CUmemGenericAllocationHandle) -> Result<()> {
    // SAFETY: caller contract.
    check("cuMemRelease", unsafe { sys::cuMemRelease(handle) })
}
