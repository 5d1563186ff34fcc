//! Device memory allocated with CUDA's virtual-memory API and exported as a POSIX fd, so CUDA
//! can be the producer for another API or process (and so the fd import path can be exercised
//! on any CUDA GPU).

use super::device::CudaGpu;
use super::result::vmm as cu;
use super::teardown::succeeded;
use crate::error::{invalid, Result};
use cudarc::driver::{sys, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Arc;

/// Device memory that can be exported as an fd. Mapped read-write on its own device.
pub struct ExportableAllocation {
    dev: CudaGpu,
    stream: Arc<CudaStream>,
    handle: Option<sys::CUmemGenericAllocationHandle>,
    ptr: sys::CUdeviceptr,
    reserved: usize,
    mapped: bool,
    size: usize,
}

// SAFETY: the allocation handle and address are usable from any thread that binds the context
// (done before every driver call).
unsafe impl Send for ExportableAllocation {}
// SAFETY: shared access only reads the address.
unsafe impl Sync for ExportableAllocation {}

/// The location of device `id`'s memory. From CUDA 13.2 on, `id` is a member of an anonymous
/// union in `CUmemLocation` (same layout, the union's other member is new).
#[cfg(not(any(feature = "cuda-13020", feature = "cuda-13030", feature = "cuda-13040")))]
fn device_location(id: sys::CUdevice) -> sys::CUmemLocation {
    sys::CUmemLocation { type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, id }
}

/// The location of device `id`'s memory. From CUDA 13.2 on, `id` is a member of an anonymous
/// union in `CUmemLocation` (same layout, the union's other member is new).
#[cfg(any(feature = "cuda-13020", feature = "cuda-13030", feature = "cuda-13040"))]
fn device_location(id: sys::CUdevice) -> sys::CUmemLocation {
    sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        __bindgen_anon_1: sys::CUmemLocation_st__bindgen_ty_1 { id },
    }
}

fn prop(dev: &CudaGpu) -> sys::CUmemAllocationProp {
    sys::CUmemAllocationProp {
        type_: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        requestedHandleTypes: sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        location: device_location(dev.context().cu_device()),
        win32HandleMetaData: core::ptr::null_mut(),
        allocFlags: sys::CUmemAllocationProp_st__bindgen_ty_1 {
            compressionType: 0,
            gpuDirectRDMACapable: 0,
            usage: 0,
            reserved: [0; 4],
        },
    }
}

impl ExportableAllocation {
    /// Allocates at least `size` bytes (rounded up to the allocation granularity), maps them and
    /// grants the device read-write access.
    pub fn new(dev: &CudaGpu, size: usize) -> Result<Self> {
        if size == 0 {
            return Err(invalid("size", "0 bytes"));
        }
        dev.bind()?;
        let p = prop(dev);
        let minimum = sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM;
        // SAFETY: `p` is a complete property block for the bound context's device.
        let gran = unsafe { cu::get_allocation_granularity(&p, minimum) }?.max(1);
        let rounded = size.div_ceil(gran).checked_mul(gran).ok_or_else(|| {
            invalid("size", format!("{size} bytes cannot be rounded to the {gran}-byte granularity"))
        })?;
        let mut me = Self {
            dev: dev.clone(),
            stream: dev.default_stream(),
            handle: None,
            ptr: 0,
            reserved: 0,
            mapped: false,
            size: rounded,
        };
        // Each step records what it created so Drop undoes exactly that on a later failure.
        // SAFETY: a complete property block; size is a granularity multiple.
        let h = unsafe { cu::create(rounded, &p) }?;
        me.handle = Some(h);
        // SAFETY: reserves a fresh address range of the allocation's size (a granularity multiple).
        let ptr = unsafe { cu::address_reserve(rounded) }?;
        me.ptr = ptr;
        me.reserved = rounded;
        // SAFETY: maps the whole live allocation at the start of the fresh reserved range.
        unsafe { cu::map(ptr, rounded, h) }?;
        me.mapped = true;
        let access = sys::CUmemAccessDesc {
            location: p.location,
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: the range is mapped; the descriptor names the allocation's device.
        unsafe { cu::set_access(ptr, rounded, &access) }?;
        Ok(me)
    }

    /// Exports the allocation as a new POSIX fd (each call gives a new descriptor).
    pub fn export_fd(&self) -> Result<OwnedFd> {
        let h = self.handle.ok_or_else(|| invalid("allocation", "not created"))?;
        self.dev.bind()?;
        // SAFETY: a live allocation (released only by Drop), created with the POSIX fd handle
        // type requested (`prop`).
        let fd = unsafe { cu::export_to_posix_fd(h) }?;
        if fd < 0 {
            return Err(invalid("fd", "the driver returned no descriptor"));
        }
        // SAFETY: the driver just created this descriptor and nobody else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Allocated size in bytes (a multiple of the granularity, >= the requested size).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The device address (valid while `self` lives; the release waits, off the dropping
    /// thread, for the work queued on the context before the drop).
    pub fn device_address(&self) -> sys::CUdeviceptr {
        self.ptr
    }
}

impl Drop for ExportableAllocation {
    fn drop(&mut self) {
        let (ptr, reserved, mapped, handle) = (self.ptr, self.reserved, self.mapped, self.handle);
        let what = "releasing an exportable allocation";
        self.dev.destroy_after_work(what, move || {
            // SAFETY: (all three calls) each undoes a step that succeeded in `new`, once, in
            // reverse order, after the work that used the allocation finished. Exported fds keep
            // the physical memory alive on their own, as the driver documents.
            unsafe {
                let unmap = if mapped { cu::unmap(ptr, reserved) } else { Ok(()) };
                // A range still mapped is not freed (the address range leaks with the mapping).
                let free =
                    if reserved != 0 && unmap.is_ok() { cu::address_free(ptr, reserved) } else { Ok(()) };
                let release = handle.map_or(Ok(()), |h| cu::release(h));
                for r in [unmap, free, release] {
                    succeeded(what, r);
                }
            }
        });
    }
}

impl DeviceSlice<u8> for ExportableAllocation {
    fn len(&self) -> usize {
        self.size
    }
    fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl DevicePtr<u8> for ExportableAllocation {
    fn device_ptr<'a>(&'a self, _stream: &'a CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
        (self.ptr, SyncOnDrop::Sync(None))
    }
}

impl DevicePtrMut<u8> for ExportableAllocation {
    fn device_ptr_mut<'a>(&'a mut self, _stream: &'a CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
        (self.ptr, SyncOnDrop::Sync(None))
    }
}
