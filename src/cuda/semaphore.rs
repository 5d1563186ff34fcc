//! External semaphores: NvSciSync objects and opaque-fd (binary or timeline) semaphores.

use super::desc;
use super::device::CudaGpu;
use super::host::HostRegistration;
use super::memsync::{self, MemSync};
use super::result::{cu, semaphore as sem, CUDA_ERROR_NOT_SUPPORTED};
use super::teardown::succeeded;
use crate::error::{CudaError, Error, Result};
use crate::sync::{Fence, SyncObj};
use crate::GpuInterop;
use cudarc::driver::result::{event, stream as cu_stream};
use cudarc::driver::{sys, CudaStream};
use std::os::fd::OwnedFd;

/// Refuses counter (stream memory operation) imports on a driver without the `_v2` entry points
/// this build calls, instead of letting cudarc panic on the missing symbol at the first wait.
fn require_stream_mem_ops() -> Result<()> {
    #[cfg(not(any(feature = "cuda-11040", feature = "cuda-11050", feature = "cuda-11060")))]
    super::driver::require_driver("cuStreamWaitValue64_v2 / cuStreamWriteValue64_v2", 11070)?;
    Ok(())
}

struct Raw {
    raw: sys::CUexternalSemaphore,
    dev: CudaGpu,
    // The NvSciSync object an import refers to; leaked if the import cannot be destroyed.
    keep: Option<SyncObj>,
}

// SAFETY: a CUexternalSemaphore is usable from any thread that binds its context (done before
// every driver call).
unsafe impl Send for Raw {}
// SAFETY: shared access only passes the handle to thread-safe driver calls.
unsafe impl Sync for Raw {}

impl Drop for Raw {
    fn drop(&mut self) {
        let raw = self.raw as usize;
        let keep = self.keep.take();
        self.dev.destroy_after_work("cuDestroyExternalSemaphore", move || {
            // SAFETY: destroyed once, after the signals and waits queued on it finished and
            // before the NvSciSync object it came from is released.
            let r = unsafe { sem::destroy_external_semaphore(raw as sys::CUexternalSemaphore) };
            if succeeded("cuDestroyExternalSemaphore", r) {
                drop(keep);
            } else {
                // CUDA still refers to the sync object: keep it alive rather than free it.
                std::mem::forget(keep);
            }
        });
    }
}

fn import(dev: &CudaGpu, d: &sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC, nvsci: bool) -> Result<Raw> {
    dev.bind()?;
    // SAFETY: the descriptor is complete and its handle valid for the call (the caller keeps
    // an NvSciSync object alive with the import, and reclaims an fd the driver did not take).
    let raw = match unsafe { sem::import_external_semaphore(d) } {
        Err(Error::Cuda(CudaError::Call { code: CUDA_ERROR_NOT_SUPPORTED, .. })) if nvsci => {
            return Err(Error::Unsupported {
                what: "importing an NvSciSync object into CUDA",
                reason: crate::error::UnsupportedReason::CudaWithoutNvSciSync,
            })
        }
        r => r?,
    };
    Ok(Raw { raw, dev: dev.clone(), keep: None })
}

/// How a sync object reaches CUDA.
enum SyncHandle {
    /// `cuImportExternalSemaphore` with the NvSciSync handle type (Tegra).
    Imported(Raw),
    /// The object's 64-bit host counter, page-locked; waits and signals are stream memory
    /// operations on its device address.
    Counter(HostRegistration),
}

/// An NvSciSync object imported into CUDA. Signals fill a [`Fence`]; waits take one, so a
/// wait can only be issued for a fence that exists.
///
/// On NVIDIA's libraries (Tegra) this is `cuImportExternalSemaphore` and
/// `cuSignalExternalSemaphoresAsync` / `cuWaitExternalSemaphoresAsync`, with the NvSciBuf
/// memory-sync flags chosen by [`MemSync`]. On an implementation whose sync objects are host
/// counters ([`GpuInterop::HostMemory`], the mock on a desktop GPU) the counter is page-locked
/// and a wait is `cuStreamWaitValue64` (greater or equal), a signal `cuStreamWriteValue64` of
/// the fence's value after the work queued before it (with the driver's default memory
/// barrier); the memory-sync decision is still made and logged, and has nothing to act on.
///
/// Both directions between a CUDA stream and the CPU (NvSciSync imports need a Tegra driver):
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use nvsci::cuda::{fill_sync_attrs, CudaGpu, CudaSyncObj, MemSync};
/// use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
/// use std::time::Duration;
///
/// let gpu = CudaGpu::open(0)?;
/// let stream = gpu.context().new_stream()?; // or the application's own stream
/// let module = SyncModule::open(&nvsci::NvSci::load()?)?;
/// let cpu = |perm| -> nvsci::Result<SyncAttrList> {
///     let mut list = module.attr_list()?;
///     list.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(perm)])?;
///     Ok(list)
/// };
///
/// // CUDA signals, the CPU waits.
/// let mut cuda_signals = module.attr_list()?;
/// fill_sync_attrs(&gpu, &mut cuda_signals, true, false)?;
/// let done = SyncObj::alloc(&SyncAttrList::reconcile(&[&cuda_signals, &cpu(SyncPerm::WaitOnly)?])?)?;
/// let done_in_cuda = CudaSyncObj::import(&gpu, &done)?;
/// // ... kernels on `stream` ...
/// let fence = done_in_cuda.signal(&stream, MemSync::Auto)?; // expires after that work
/// let mut ctx = module.cpu_wait_context()?;
/// fence.wait(&mut ctx, Some(Duration::from_secs(1)))?;
///
/// // The CPU signals, CUDA waits.
/// let mut cuda_waits = module.attr_list()?;
/// fill_sync_attrs(&gpu, &mut cuda_waits, false, true)?;
/// let ready = SyncObj::alloc(&SyncAttrList::reconcile(&[&cpu(SyncPerm::SignalOnly)?, &cuda_waits])?)?;
/// let ready_in_cuda = CudaSyncObj::import(&gpu, &ready)?;
/// let fence = ready.generate_fence()?;
/// ready_in_cuda.wait(&stream, &fence, MemSync::Auto)?; // work queued after this waits for...
/// ready.signal()?; // ...this CPU signal
/// stream.synchronize()?;
/// # Ok(()) }
/// ```
pub struct CudaSyncObj {
    handle: SyncHandle,
    dev: CudaGpu,
    obj: SyncObj,
    /// For objects whose waiters require timestamps: an event recorded after the last signal
    /// from CUDA (the driver allows one outstanding timestamp fence per object, so the next
    /// signal's stream waits for it). An event, not a
    /// CPU wait on the fence: the signalling process need not be a CPU waiter of the object
    /// (`NvSciSyncFenceWait` needs CPU wait permission, which a remote CPU waiter does not give
    /// this process).
    timestamps: Option<cudarc::driver::CudaEvent>,
    /// Serialises the wait for and the re-record of `timestamps`.
    timestamp_lock: std::sync::Mutex<()>,
    /// Host-memory objects whose implementation offers `SyncCounterNotify`: how a signal wakes
    /// sleeping CPU waiters.
    notifier: Option<Notifier>,
}

/// Wakes the CPU waiters of a host counter after a stream's store, without holding up the
/// stream: the store's stream records `event`, the object's own `stream` waits for it and runs
/// the implementation's `SyncCounterNotify` as a host function (`cuLaunchHostFunc`), so the
/// signalling stream never waits for the host function.
struct Notifier {
    stream: sys::CUstream,
    event: sys::CUevent,
    notify: nvsci_sys::emulation::SyncCounterNotifyFn,
    /// Serialises record / wait / launch (the event is re-recorded by each signal).
    order: std::sync::Mutex<()>,
}

// SAFETY: plain driver handles, used only after binding their context; the function pointer is
// thread-safe by its contract.
unsafe impl Send for Notifier {}
// SAFETY: as above; the calls that use the event are serialised by `order`.
unsafe impl Sync for Notifier {}

impl Notifier {
    fn new(notify: nvsci_sys::emulation::SyncCounterNotifyFn) -> Result<Self> {
        // The context is bound by the caller.
        let stream = cu_stream::create(cu_stream::StreamKind::NonBlocking).map_err(cu("cuStreamCreate"))?;
        let event = match event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING) {
            Ok(event) => event,
            Err(e) => {
                // SAFETY: created above, unused, destroyed once.
                let _ = unsafe { cu_stream::destroy(stream) };
                return Err(cu("cuEventCreate")(e));
            }
        };
        Ok(Self { stream, event, notify, order: std::sync::Mutex::new(()) })
    }

    /// Enqueues the wake-up of `counter`'s waiters after the work queued on `after` so far.
    fn enqueue(&self, after: sys::CUstream, counter: *mut core::ffi::c_void) -> Result<()> {
        let _g = self.order.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the event and both streams are alive and belong to the bound context.
        unsafe { event::record(self.event, after) }.map_err(cu("cuEventRecord"))?;
        let default = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
        // SAFETY: as above.
        unsafe { cu_stream::wait_event(self.stream, self.event, default) }
            .map_err(cu("cuStreamWaitEvent"))?;
        // SAFETY: `notify` has CUDA's host-function signature and makes no CUDA call; `counter`
        // is the object's counter, which stays allocated until the work on `self.stream` has
        // completed (the registration's destroy waits for the context's work queued before it).
        unsafe { cu_stream::launch_host_function(self.stream, self.notify, counter) }
            .map_err(cu("cuLaunchHostFunc"))?;
        Ok(())
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        // SAFETY: destroyed once; the driver releases a stream or event with pending work once
        // that work completes, without blocking.
        unsafe {
            let _ = event::destroy(self.event);
            let _ = cu_stream::destroy(self.stream);
        }
    }
}

impl std::fmt::Debug for CudaSyncObj {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaSyncObj").field("obj", &self.obj).finish()
    }
}

impl CudaSyncObj {
    /// Imports a sync object whose list was filled with CUDA's attributes
    /// ([`fill_sync_attrs`](super::fill_sync_attrs)). The import holds the object.
    pub fn import(dev: &CudaGpu, obj: &SyncObj) -> Result<Self> {
        let mut notifier = None;
        let handle = if obj.module().library().gpu_interop() == GpuInterop::HostMemory {
            require_stream_mem_ops()?;
            let counter = obj.host_counter()?.ok_or(Error::Unsupported {
                what: "SyncObjGetCounter",
                reason: crate::error::UnsupportedReason::MissingHostGpuEntryPoint,
            })?;
            // SAFETY: the counter lives as long as any clone of the object; the registration
            // owns one.
            let reg = unsafe { HostRegistration::new(dev, counter.cast(), 8, Box::new(obj.clone())) }?;
            notifier = match obj.module().library().host_gpu().SyncCounterNotify {
                Some(f) => Some(Notifier::new(f)?),
                None => None,
            };
            SyncHandle::Counter(reg)
        } else {
            let mut raw = import(dev, &desc::nvscisync_semaphore(obj.as_raw() as *const _), true)?;
            raw.keep = Some(obj.clone());
            SyncHandle::Imported(raw)
        };
        let timestamps =
            if obj.attr_list()?.get_one(crate::sync::key::WAITER_REQUIRE_TIMESTAMPS)? == Some(true) {
                Some(dev.context().new_event(None).map_err(|e| super::from_driver("cuEventCreate", e))?)
            } else {
                None
            };
        Ok(Self {
            handle,
            dev: dev.clone(),
            obj: obj.clone(),
            timestamps,
            timestamp_lock: std::sync::Mutex::new(()),
            notifier,
        })
    }

    /// With timestamps, orders the new signal after the previous CUDA signal of this object
    /// (whatever stream that was on), and remembers the new one once `signal` filled it.
    fn one_timestamp_fence(
        &self,
        stream: &CudaStream,
        signal: impl FnOnce(&mut Fence) -> Result<()>,
        fence: &mut Fence,
    ) -> Result<()> {
        let Some(last) = &self.timestamps else { return signal(fence) };
        // The event follows the previous signal on its stream: complete once that signal ran
        // (a never-recorded event counts as complete). While it is not, `stream` waits for it
        // before the new signal, so the object's timestamp fences expire one after another and
        // never two at once. Under the timestamp lock, so the wait and the re-record of two
        // threads' signals cannot interleave.
        let _g = self.timestamp_lock.lock().unwrap_or_else(|e| e.into_inner());
        if !last.try_is_complete().map_err(|e| super::from_driver("cuEventQuery", e))? {
            stream.wait(last).map_err(|e| super::from_driver("cuStreamWaitEvent", e))?;
        }
        signal(fence)?;
        last.record(stream).map_err(|e| super::from_driver("cuEventRecord", e))
    }

    /// Enqueues a signal on `stream` (of the import's context, else `InvalidArgument` naming
    /// `stream`) and returns the fence that expires with it.
    pub fn signal(&self, stream: &CudaStream, policy: MemSync) -> Result<Fence> {
        let mut fence = Fence::cleared();
        self.signal_into(stream, policy, &mut fence)?;
        Ok(fence)
    }

    /// As [`signal`](Self::signal), reusing `fence`'s storage (it is cleared first). Allocates
    /// nothing.
    ///
    /// For an object whose waiters require timestamps (`WaiterRequireTimestamps`; DRIVE OS
    /// 6.0.10's reconciler sets it for every object with a CPU waiter), CUDA allows one
    /// outstanding timestamp fence per object: while the previous CUDA-signalled fence may still
    /// be outstanding (the stream it was signalled on has not passed an event recorded right
    /// after it), `stream` first waits for that event (`cuStreamWaitEvent`), so the new signal
    /// runs only after the previous one did. Nothing blocks the calling thread, and the event,
    /// not a CPU wait on the fence, keeps this working where this process is no CPU waiter of
    /// the object.
    pub fn signal_into(&self, stream: &CudaStream, policy: MemSync, fence: &mut Fence) -> Result<()> {
        self.dev.check_stream(stream)?;
        self.one_timestamp_fence(stream, |fence| self.enqueue_signal(stream, policy, fence), fence)
    }

    fn enqueue_signal(&self, stream: &CudaStream, policy: MemSync, fence: &mut Fence) -> Result<()> {
        let skip = memsync::skip_for(policy, "signal");
        match &self.handle {
            SyncHandle::Imported(raw) => {
                fence.reset_for(&self.obj);
                let params = desc::signal(fence.as_raw_mut() as *mut _, 0, skip);
                self.dev.bind()?;
                // SAFETY: one semaphore and one parameter block, both alive for the call; CUDA
                // writes the new fence into the storage `params` points to before returning.
                unsafe { sem::signal_external_semaphore_async(raw.raw, &params, stream.cu_stream()) }?;
                memsync::count_signal(&params);
                Ok(())
            }
            SyncHandle::Counter(reg) => {
                self.obj.generate_engine_fence_into(fence)?;
                let (_, value) = fence.id_value()?;
                // The counter write below takes no memory-sync flag: counted is the block an
                // import would be given (memsync::counts).
                let params = desc::signal(fence.as_raw_mut() as *mut _, 0, skip);
                self.dev.bind()?;
                // SAFETY: the counter is page-locked and mapped (the registration is alive while
                // `self` is, and its destroy waits for the work queued before it); flags 0 keep
                // the memory barrier that orders earlier work before the write.
                let r = unsafe { sem::stream_write_value64(stream.cu_stream(), reg.device_ptr(), value, 0) };
                if r.is_err() {
                    fence.clear(); // never hand out a fence nothing will signal
                    return r;
                }
                memsync::count_signal(&params);
                if let Some(n) = &self.notifier {
                    // Without the wake-up, CPU waits still see the store at their next look.
                    if let Err(e) = n.enqueue(stream.cu_stream(), reg.host_ptr()) {
                        log::warn!("cannot enqueue the CPU waiters' wake-up after a signal: {e}");
                    }
                }
                Ok(())
            }
        }
    }

    /// Enqueues a wait for `fence` on `stream`. The fence may be dropped or cleared afterwards.
    ///
    /// The fence must come from this sync object (`InvalidArgument` otherwise). A cleared fence
    /// is already expired, so nothing is enqueued; but the wait is also where CUDA invalidates
    /// the GPU caches of NvSciBuf imports, and without a fence it cannot: when `policy` decides
    /// to perform memory synchronisation, a cleared fence is refused (`InvalidArgument` naming
    /// `fence`) rather than letting kernels read stale cache lines. With [`MemSync::Skip`] (or
    /// `Auto` where skipping is proven safe) a cleared fence enqueues nothing.
    pub fn wait(&self, stream: &CudaStream, fence: &Fence, policy: MemSync) -> Result<()> {
        self.dev.check_stream(stream)?;
        if fence.is_cleared() {
            if memsync::skip_for(policy, "wait on a cleared fence") {
                return Ok(());
            }
            return Err(crate::error::invalid(
                "fence",
                "cleared: a wait that must synchronise NvSciBuf memory (invalidate GPU caches) needs \
                 the fence of the engine that wrote the buffer; pass that fence, or MemSync::Skip if \
                 no imported buffer needs GPU cache coherency",
            ));
        }
        if !fence.object().is_some_and(|o| std::sync::Arc::ptr_eq(&o.0, &self.obj.0)) {
            return Err(crate::error::invalid(
                "fence",
                "the fence does not belong to this imported sync object",
            ));
        }
        let skip = memsync::skip_for(policy, "wait");
        match &self.handle {
            SyncHandle::Imported(raw) => {
                let params = desc::wait(fence.as_raw() as *const _, 0, skip);
                self.dev.bind()?;
                // SAFETY: the fence and the parameter block are alive for the call; CUDA copies
                // what it needs from the fence before returning.
                unsafe { sem::wait_external_semaphore_async(raw.raw, &params, stream.cu_stream()) }?;
                memsync::count_wait(&params);
                Ok(())
            }
            SyncHandle::Counter(reg) => {
                let (_, value) = fence.id_value()?;
                self.dev.bind()?;
                let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
                // SAFETY: the counter is page-locked and mapped while `self` lives, and the
                // unregistration waits for the work queued before the drop.
                unsafe { sem::stream_wait_value64(stream.cu_stream(), reg.device_ptr(), value, geq) }?;
                // The counter wait takes no memory-sync flag: counted is the block an import
                // would be given (memsync::counts).
                memsync::count_wait(&desc::wait(fence.as_raw() as *const _, 0, skip));
                Ok(())
            }
        }
    }

    /// The sync object.
    pub fn sync_obj(&self) -> &SyncObj {
        &self.obj
    }
}

/// Kind of an fd semaphore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SemaphoreKind {
    /// A binary semaphore (`OPAQUE_FD`): signal/wait values are ignored.
    Binary,
    /// A timeline semaphore: signal sets the value, wait waits for at least the value.
    Timeline,
}

/// An opaque-fd semaphore (e.g. exported by Vulkan) imported into CUDA.
pub struct CudaSemaphore {
    raw: Raw,
    kind: SemaphoreKind,
}

impl std::fmt::Debug for CudaSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaSemaphore").field("kind", &self.kind).finish()
    }
}

impl CudaSemaphore {
    /// Imports an fd. The driver gets a duplicate (its own from then on); `fd` is closed here
    /// exactly once, whatever the outcome.
    pub fn import(dev: &CudaGpu, fd: OwnedFd, kind: SemaphoreKind) -> Result<Self> {
        dev.bind()?; // before duplicating: a duplicate is only made when the driver will see it
        let dup = super::fd::for_driver(&fd)
            .map_err(|e| crate::error::invalid("fd", format!("cannot duplicate: {e}")))?;
        let d = desc::fd_semaphore(dup, kind == SemaphoreKind::Timeline);
        let raw = import(dev, &d, false);
        if raw.is_err() {
            super::fd::reclaim_if_unconsumed(dup, &fd);
        }
        drop(fd); // ours, closed once; the driver owns the duplicate (or it was reclaimed above)
        Ok(Self { raw: raw?, kind })
    }

    /// Binary or timeline.
    pub fn kind(&self) -> SemaphoreKind {
        self.kind
    }

    /// Enqueues a signal (timeline: sets `value`). `stream` must belong to the import's context.
    pub fn signal(&self, stream: &CudaStream, value: u64) -> Result<()> {
        self.raw.dev.check_stream(stream)?;
        let params = desc::signal(core::ptr::null_mut(), value, false);
        self.raw.dev.bind()?;
        // SAFETY: the semaphore and parameters are alive for the call.
        unsafe { sem::signal_external_semaphore_async(self.raw.raw, &params, stream.cu_stream()) }
    }

    /// Enqueues a wait (timeline: until the value is at least `value`). `stream` must belong
    /// to the import's context.
    pub fn wait(&self, stream: &CudaStream, value: u64) -> Result<()> {
        self.raw.dev.check_stream(stream)?;
        let params = desc::wait(core::ptr::null(), value, false);
        self.raw.dev.bind()?;
        // SAFETY: the semaphore and parameters are alive for the call.
        unsafe { sem::wait_external_semaphore_async(self.raw.raw, &params, stream.cu_stream()) }
    }
}
