//! Finding a CUDA device without ever panicking.

use super::result::from_driver;
use crate::buf::GpuId;
use crate::error::{Error, Result};
use cudarc::driver::{sys, CudaContext, CudaStream};
use std::sync::Arc;

/// A CUDA device with its primary context.
#[derive(Clone, Debug)]
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    gpu_id: GpuId,
}

/// Whether the CUDA driver library can be opened, checked without touching cudarc's loader
/// (which panics when the library is missing).
pub fn driver_present() -> bool {
    // SAFETY: cudarc's presence check only tries to open and immediately closes the candidate
    // library names; it runs no CUDA code and cannot panic.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

impl CudaDevice {
    /// Opens device `ordinal`. No driver, no device or an invalid ordinal give
    /// [`Error::CudaUnavailable`] (never a panic).
    pub fn open(ordinal: usize) -> Result<Self> {
        if !driver_present() {
            return Err(Error::CudaUnavailable {
                reason: "libcuda.so (the NVIDIA driver's CUDA library) was not found; install the \
                         NVIDIA driver, or use the mock backend for CPU-only runs"
                    .into(),
            });
        }
        let count = CudaContext::device_count().map_err(|e| Error::CudaUnavailable {
            reason: format!("the CUDA driver found no usable device ({e}); use the mock backend"),
        })?;
        if count <= 0 || ordinal >= count as usize {
            return Err(Error::CudaUnavailable {
                reason: format!("CUDA device {ordinal} requested but {count} present; use the mock backend"),
            });
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| from_driver("cuDevicePrimaryCtxRetain", e))?;
        let uuid = ctx.uuid().map_err(|e| from_driver("cuDeviceGetUuid", e))?;
        let mut id = [0u8; 16];
        for (d, s) in id.iter_mut().zip(uuid.bytes.iter()) {
            *d = *s as u8;
        }
        Ok(Self { ctx, gpu_id: GpuId(id) })
    }

    /// The device UUID as an NvSci GPU id (what goes into `GpuId` attributes).
    pub fn gpu_id(&self) -> GpuId {
        self.gpu_id
    }

    /// The cudarc context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The context's default stream.
    pub fn default_stream(&self) -> Arc<CudaStream> {
        self.ctx.default_stream()
    }

    /// The device name.
    pub fn name(&self) -> Result<String> {
        self.ctx.name().map_err(|e| from_driver("cuDeviceGetName", e))
    }

    /// Runs a driver destroy/free call once all work queued on the context has finished, so
    /// nothing still in flight uses what is destroyed. Never panics: failures are logged.
    /// Returns whether the driver object was destroyed (callers then keep alive, by leaking,
    /// whatever the surviving driver object still refers to).
    pub(crate) fn destroy_when_idle(
        &self,
        what: &'static str,
        destroy: impl FnOnce() -> sys::CUresult,
    ) -> bool {
        if let Err(e) = self.bind() {
            log::warn!("cannot bind the CUDA context to run {what}: {e}; leaking it");
            return false;
        }
        if let Err(e) = self.ctx.synchronize() {
            log::warn!("context synchronise before {what} failed: {e}");
        }
        let r = destroy();
        if r != sys::CUresult::CUDA_SUCCESS {
            log::warn!("{what} failed: {r:?}");
            return false;
        }
        true
    }

    /// Makes the context current on this thread.
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| from_driver("cuCtxSetCurrent", e))
    }
}
