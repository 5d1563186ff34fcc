//! Host memory page-locked for CUDA and used in place (the [`GpuInterop::HostMemory`] path).
//!
//! `cuMemHostRegister` registers a range once per process (`CU_MEMHOSTREGISTER_PORTABLE` makes
//! it usable from every context); registering an overlapping range again fails with
//! `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`. A buffer and its duplicates share their memory
//! and may be imported several times, so registrations are counted here per range and the
//! range is unregistered when the last user is gone.
//!
//! [`GpuInterop::HostMemory`]: crate::GpuInterop::HostMemory

use super::device::CudaGpu;
use super::result::memory as mem;
use super::teardown::succeeded;
use crate::error::{invalid, Result};
use cudarc::driver::sys;
use std::sync::Mutex;

/// Registered ranges: (base, length, users).
static REGISTERED: Mutex<Vec<(usize, usize, usize)>> = Mutex::new(Vec::new());

fn table() -> std::sync::MutexGuard<'static, Vec<(usize, usize, usize)>> {
    REGISTERED.lock().unwrap_or_else(|e| e.into_inner())
}

/// One user of a registered host range, with the device address of its start in one context.
/// It holds the object that owns the memory; if the range cannot be unregistered, that object is
/// leaked rather than freed under the driver.
pub(crate) struct HostRegistration {
    base: usize,
    device_ptr: sys::CUdeviceptr,
    dev: CudaGpu,
    owner: Option<Box<dyn std::any::Any + Send + Sync>>,
}

// SAFETY: the registration is an address range and a device address; the driver calls made with
// them are thread-safe once the context is bound (done before each).
unsafe impl Send for HostRegistration {}
// SAFETY: shared access only reads the addresses.
unsafe impl Sync for HostRegistration {}

impl HostRegistration {
    /// Registers (or adds a user to) the range `base..base + len` and looks up its device
    /// address in `dev`'s context.
    ///
    /// # Safety
    /// `base..base + len` must be host memory owned by `owner` (or by objects sharing it), so
    /// that it stays allocated while `owner` lives.
    pub(crate) unsafe fn new(
        dev: &CudaGpu,
        base: *mut core::ffi::c_void,
        len: usize,
        owner: Box<dyn std::any::Any + Send + Sync>,
    ) -> Result<Self> {
        if base.is_null() || len == 0 {
            return Err(invalid("host memory", "a NULL or empty range cannot be registered"));
        }
        dev.bind()?;
        let key = base as usize;
        {
            let mut t = table();
            if let Some(e) = t.iter_mut().find(|e| e.0 == key) {
                if e.1 != len {
                    return Err(invalid(
                        "host memory",
                        format!("{len} bytes at {base:?}, registered before with {} bytes", e.1),
                    ));
                }
                e.2 += 1;
            } else {
                let flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
                // SAFETY: the caller guarantees the range is allocated host memory that outlives
                // the registration; it is not registered yet (the table holds every range this
                // crate registered).
                unsafe { mem::mem_host_register(base, len, flags) }?;
                t.push((key, len, 1));
            }
        }
        let mut me = Self { base: key, device_ptr: 0, dev: dev.clone(), owner: Some(owner) };
        // SAFETY: the range is registered with DEVICEMAP. On failure `me` drops and removes its
        // user.
        me.device_ptr = unsafe { mem::mem_host_get_device_pointer(base) }?;
        Ok(me)
    }

    /// The host address of the range's first byte.
    pub(crate) fn host_ptr(&self) -> *mut core::ffi::c_void {
        self.base as *mut core::ffi::c_void
    }

    /// The device address of the range's first byte in the registering device's context.
    pub(crate) fn device_ptr(&self) -> sys::CUdeviceptr {
        self.device_ptr
    }
}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        let base = self.base;
        let owner = self.owner.take();
        // Unregistered on the teardown thread once the work queued before the drop finished.
        self.dev.destroy_after_work("cuMemHostUnregister", move || {
            // The table stays locked through the unregistration, so no other import registers
            // the range while it is being unregistered.
            let mut t = table();
            let Some(i) = t.iter().position(|e| e.0 == base) else { return };
            t[i].2 -= 1;
            if t[i].2 > 0 {
                drop(owner); // another user keeps the range (and its own owner) registered
                return;
            }
            // SAFETY: the range was registered by this table and its last user is gone; work
            // that used it has finished (the teardown queue waited for it).
            let r = unsafe { mem::mem_host_unregister(base as *mut core::ffi::c_void) };
            if succeeded("cuMemHostUnregister", r) {
                t.swap_remove(i);
                drop(t);
                drop(owner);
            } else {
                // The driver still has the pages locked: never free memory under it. The range
                // stays in the table, registered for good, so a later import of it is counted,
                // not registered twice.
                t[i].2 = 1;
                std::mem::forget(owner);
            }
        });
    }
}
