//! Finding a CUDA device without ever panicking.

use super::driver::driver_present;
use super::result::from_driver;
use crate::buf::GpuId;
use crate::error::{CudaError, Error, Result};
use cudarc::driver::{CudaContext, CudaStream};
use std::sync::Arc;
use std::time::Duration;

/// A CUDA GPU as this crate uses it: a cudarc [`CudaContext`] (the device's primary context
/// when opened here, or the caller's own, adopted with [`from_context`](Self::from_context)),
/// and the device's UUID as an NvSci [`GpuId`]. Imports made with it are destroyed after the
/// work that used them, off the dropping thread (see [`flush_teardown`](Self::flush_teardown)).
///
/// This is not cudarc's `CudaDevice` (cudarc before 0.12): cudarc now splits that into
/// [`CudaContext`] and [`CudaStream`], and both are used as they are. Work is enqueued on the
/// caller's `Arc<CudaStream>` (any stream of the context), and the context is reached with
/// [`context`](Self::context). Cloning is cheap (reference counted).
///
/// ```no_run
/// # fn main() -> nvsci::Result<()> {
/// use nvsci::cuda::cudarc::driver::CudaContext;
/// use nvsci::cuda::CudaGpu;
///
/// let ctx = CudaContext::new(0).expect("CUDA context"); // the application's own context
/// let stream = ctx.new_stream().expect("stream");       // and its own stream
/// let gpu = CudaGpu::from_context(ctx.clone())?;        // adopted, not replaced
/// assert!(std::sync::Arc::ptr_eq(gpu.context(), &ctx));
/// // Imports made with `gpu` take `&stream` wherever they enqueue work.
/// # let _ = stream;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct CudaGpu {
    ctx: Arc<CudaContext>,
    gpu_id: GpuId,
}

impl CudaGpu {
    /// Opens device `ordinal` with its primary context (cudarc's `CudaContext::new`, which is
    /// also the context the CUDA runtime uses). No driver, no device or an invalid ordinal give
    /// [`CudaError::Unavailable`] (never a panic).
    pub fn open(ordinal: usize) -> Result<Self> {
        if !driver_present() {
            return Err(Error::Cuda(CudaError::Unavailable {
                reason: "libcuda.so (the NVIDIA driver's CUDA library) was not found; install the \
                         NVIDIA driver, or use the mock backend for CPU-only runs"
                    .into(),
            }));
        }
        let count = CudaContext::device_count().map_err(|e| {
            Error::Cuda(CudaError::Unavailable {
                reason: format!("the CUDA driver found no usable device ({e}); use the mock backend"),
            })
        })?;
        if count <= 0 || ordinal >= count as usize {
            return Err(Error::Cuda(CudaError::Unavailable {
                reason: format!("CUDA device {ordinal} requested but {count} present; use the mock backend"),
            }));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| from_driver("cuDevicePrimaryCtxRetain", e))?;
        Self::from_context(ctx)
    }

    /// Adopts a context the application already holds (its own `CudaContext::new`, or the one a
    /// framework built on cudarc uses): imports, semaphores and frame-ring parties made with the
    /// returned value live in that context, and streams of that context (the application's own
    /// `Arc<CudaStream>`s) are accepted wherever work is enqueued. Streams of any other context
    /// are refused with [`Error::InvalidArgument`] naming `stream`.
    ///
    /// Nothing is created: the context is shared (the `Arc` is kept, so it lives at least as
    /// long as the returned value and everything made with it). Fails only when the device's
    /// UUID cannot be read (`cuDeviceGetUuid`), as [`CudaError::Call`].
    pub fn from_context(ctx: Arc<CudaContext>) -> Result<Self> {
        let uuid = ctx.uuid().map_err(|e| from_driver("cuDeviceGetUuid", e))?;
        let mut id = [0u8; 16];
        for (d, s) in id.iter_mut().zip(uuid.bytes.iter()) {
            *d = *s as u8;
        }
        log::debug!("CUDA device {} adopted for interop (context {:?})", ctx.ordinal(), ctx.cu_ctx());
        Ok(Self { ctx, gpu_id: GpuId(id) })
    }

    /// The device UUID as an NvSci GPU id (what goes into `GpuId` attributes).
    pub fn gpu_id(&self) -> GpuId {
        self.gpu_id
    }

    /// The cudarc context (the adopted one, or the device's primary context).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The context's default stream. Any other stream of the context (the application's own,
    /// or one from `context().new_stream()`) may be used instead wherever a stream is taken.
    pub fn default_stream(&self) -> Arc<CudaStream> {
        self.ctx.default_stream()
    }

    /// The device name.
    pub fn name(&self) -> Result<String> {
        self.ctx.name().map_err(|e| from_driver("cuDeviceGetName", e))
    }

    /// Queues `destroy` (a driver destroy/free call and whatever must outlive it) to run once the
    /// work queued on the context before this call has finished; see the `teardown` module.
    /// Never blocks.
    pub(crate) fn destroy_after_work(&self, what: &'static str, destroy: impl FnOnce() + Send + 'static) {
        super::teardown::destroy_after_work(&self.ctx, what, destroy);
    }

    /// Destroys of this context's imports, mappings and semaphores that were dropped and are
    /// still waiting for the work that used them (or for the teardown thread).
    pub fn pending_teardown(&self) -> usize {
        super::teardown::pending(&self.ctx)
    }

    /// Waits until every dropped import, mapping and semaphore of this context has been
    /// destroyed (or leaked past [`DESTROY_TIMEOUT`](super::DESTROY_TIMEOUT)), at most `timeout`, and returns how many
    /// are still queued (0 once flushed). Call it before tearing a context down when nothing of
    /// it may outlive that point; `Drop` never waits.
    pub fn flush_teardown(&self, timeout: Duration) -> usize {
        super::teardown::flush(&self.ctx, timeout)
    }

    /// Whether `stream` belongs to this GPU's context (and so may be passed to the calls that
    /// enqueue work on a stream).
    pub fn owns_stream(&self, stream: &CudaStream) -> bool {
        stream.context().cu_ctx() == self.ctx.cu_ctx()
    }

    /// Fails with `InvalidArgument` naming `stream` unless the stream belongs to this device's
    /// context (a stream of another GPU's context would make the driver fail or misbehave).
    pub(crate) fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        if !self.owns_stream(stream) {
            return Err(crate::error::invalid(
                "stream",
                format!(
                    "belongs to the context of CUDA device {}, the import to device {}",
                    stream.context().ordinal(),
                    self.ctx.ordinal()
                ),
            ));
        }
        Ok(())
    }

    /// Makes the context current on this thread.
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| from_driver("cuCtxSetCurrent", e))
    }
}

impl TryFrom<Arc<CudaContext>> for CudaGpu {
    type Error = Error;

    /// [`CudaGpu::from_context`].
    fn try_from(ctx: Arc<CudaContext>) -> Result<Self> {
        Self::from_context(ctx)
    }
}
