//! Timeline and binary semaphores, their `OPAQUE_FD` export, and the Vulkan <-> CUDA hand-off
//! pair built from them.
//!
//! Export support is probed first ([`semaphore_export_support`]): where timeline semaphores
//! cannot be exported, [`HandoffSemaphores::new`] falls back to two binary semaphores and says
//! so through [`HandoffSemaphores::mode`].

use super::context::{vk_err, VulkanContext, ONE_SHOT_TIMEOUT_NS};
use crate::cuda::{CudaGpu, CudaSemaphore, SemaphoreKind};
use crate::error::{invalid, Error, Result, VulkanError};
use ash::vk;
use cudarc::driver::CudaStream;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long [`TimelineSemaphore::wait`] reads the counter before it blocks.
const WAIT_SPIN: Duration = Duration::from_micros(20);

/// The longest single `vkWaitSemaphores` of [`TimelineSemaphore::wait`]: the counter is read
/// again after each. On NVIDIA's driver (H100, 580.159.04) a host wait for a value that a CUDA
/// stream signals through the imported semaphore, on a semaphore the Vulkan queue also signals,
/// returned about 10 ms after the value was reached, while the counter read it within
/// microseconds (`vulkan_cuda_bench`, raw reproduction in the same run).
const WAIT_SLICE: Duration = Duration::from_micros(250);

const SEMAPHORE_OPAQUE_FD: vk::ExternalSemaphoreHandleTypeFlags =
    vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD;

/// Which semaphore kinds the device can export as `OPAQUE_FD` (and CUDA can import).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SemaphoreExportSupport {
    /// Timeline semaphores are exportable.
    pub timeline: bool,
    /// Binary semaphores are exportable.
    pub binary: bool,
}

/// Probes `OPAQUE_FD` export of timeline and binary semaphores
/// (`vkGetPhysicalDeviceExternalSemaphoreProperties`); both are `false` when the device lacks
/// `VK_KHR_external_semaphore_fd`.
pub fn semaphore_export_support(ctx: &VulkanContext) -> SemaphoreExportSupport {
    if !ctx.has_semaphore_fd() {
        return SemaphoreExportSupport { timeline: false, binary: false };
    }
    let probe = |ty: vk::SemaphoreType| {
        let mut type_info = vk::SemaphoreTypeCreateInfo::default().semaphore_type(ty).initial_value(0);
        let info = vk::PhysicalDeviceExternalSemaphoreInfo::default()
            .handle_type(SEMAPHORE_OPAQUE_FD)
            .push_next(&mut type_info);
        let mut props = vk::ExternalSemaphoreProperties::default();
        // SAFETY: Vulkan 1.1 core query on the context's physical device;
        // VkSemaphoreTypeCreateInfo is an allowed pNext of VkPhysicalDeviceExternalSemaphoreInfo
        // (Vulkan 1.2, VUID-VkPhysicalDeviceExternalSemaphoreInfo-pNext-pNext).
        unsafe {
            ctx.ash_instance().get_physical_device_external_semaphore_properties(
                ctx.physical_device(),
                &info,
                &mut props,
            )
        };
        props.external_semaphore_features.contains(vk::ExternalSemaphoreFeatureFlags::EXPORTABLE)
    };
    SemaphoreExportSupport {
        timeline: probe(vk::SemaphoreType::TIMELINE),
        binary: probe(vk::SemaphoreType::BINARY),
    }
}

fn create_semaphore(
    ctx: &VulkanContext,
    ty: vk::SemaphoreType,
    initial: u64,
    export: bool,
) -> Result<vk::Semaphore> {
    let mut type_info = vk::SemaphoreTypeCreateInfo::default().semaphore_type(ty).initial_value(initial);
    let mut export_info = vk::ExportSemaphoreCreateInfo::default().handle_types(SEMAPHORE_OPAQUE_FD);
    let mut info = vk::SemaphoreCreateInfo::default().push_next(&mut type_info);
    if export {
        let support = semaphore_export_support(ctx);
        let ok = if ty == vk::SemaphoreType::TIMELINE { support.timeline } else { support.binary };
        if !ok {
            return Err(Error::Unsupported {
                what: "exporting a Vulkan semaphore as an opaque fd",
                reason: crate::error::UnsupportedReason::VulkanSemaphoreExport,
            });
        }
        info = info.push_next(&mut export_info);
    }
    // SAFETY: VUID-VkSemaphoreTypeCreateInfo-timelineSemaphore-03252: the timelineSemaphore
    // feature is enabled on every context; VUID-VkExportSemaphoreCreateInfo-handleTypes-01124:
    // OPAQUE_FD export was reported for this semaphore type (checked above).
    unsafe { ctx.ash_device().create_semaphore(&info, None) }.map_err(vk_err("vkCreateSemaphore"))
}

fn export_semaphore_fd(ctx: &VulkanContext, semaphore: vk::Semaphore, exportable: bool) -> Result<OwnedFd> {
    let ext = match ctx.ext_semaphore_fd() {
        Some(e) if exportable => e,
        _ => {
            return Err(Error::Unsupported {
                what: "exporting this semaphore",
                reason: crate::error::UnsupportedReason::SemaphoreNotExportable,
            })
        }
    };
    let info = vk::SemaphoreGetFdInfoKHR::default().semaphore(semaphore).handle_type(SEMAPHORE_OPAQUE_FD);
    // SAFETY: VUID-VkSemaphoreGetFdInfoKHR-handleType-01132: OPAQUE_FD was included in
    // VkExportSemaphoreCreateInfo::handleTypes; OPAQUE_FD has no signal-state requirement (that
    // is SYNC_FD's, VUID-VkSemaphoreGetFdInfoKHR-handleType-01134).
    let fd = unsafe { ext.get_semaphore_fd(&info) }.map_err(vk_err("vkGetSemaphoreFdKHR"))?;
    if fd < 0 {
        return Err(Error::Vulkan(VulkanError::Call {
            function: "vkGetSemaphoreFdKHR",
            code: vk::Result::ERROR_UNKNOWN.as_raw(),
        }));
    }
    // SAFETY: vkGetSemaphoreFdKHR creates a new descriptor owned by the application.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn timeout_ns(t: Duration) -> u64 {
    u64::try_from(t.as_nanos()).unwrap_or(u64::MAX)
}

/// A timeline semaphore: a 64-bit counter that queues and the host signal and wait on.
pub struct TimelineSemaphore {
    raw: vk::Semaphore,
    exportable: bool,
    /// [`signal`](Self::signal) submits the signal on the context's queue (see
    /// `with_queue_signals`) instead of calling `vkSignalSemaphore`.
    queue_signals: bool,
    /// The highest value a queue signal was submitted for (0: none).
    queued: AtomicU64,
    ctx: Arc<VulkanContext>,
}

impl std::fmt::Debug for TimelineSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimelineSemaphore")
            .field("exportable", &self.exportable)
            .field("queue_signals", &self.queue_signals)
            .finish()
    }
}

impl TimelineSemaphore {
    /// A process-local timeline semaphore starting at `initial`.
    pub fn new(ctx: &Arc<VulkanContext>, initial: u64) -> Result<Arc<Self>> {
        Self::with_queue_signals(ctx, initial, false, false)
    }

    /// A timeline semaphore that can be exported as an `OPAQUE_FD` (for CUDA:
    /// `CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD`);
    /// [`Error::Unsupported`] where the device cannot export it.
    pub fn new_exportable(ctx: &Arc<VulkanContext>, initial: u64) -> Result<Arc<Self>> {
        Self::with_queue_signals(ctx, initial, true, false)
    }

    /// A timeline semaphore (exportable or not) whose [`signal`](Self::signal) is, with
    /// `queue_signals`, a queue submission rather than `vkSignalSemaphore`: a batch with no
    /// command buffers that signals the value. `signal` does not wait for the batch: waiters, on
    /// the device or the host, wait for the value, and dropping the semaphore waits for the last
    /// batch.
    ///
    /// Why: only a queue submission makes the host's earlier writes to mapped memory visible to
    /// the device ("Host Write Ordering Guarantees": a queue submission "defines a memory
    /// dependency with prior host operations", whose first access scope is the host writes to
    /// mappable memory and whose second is all memory access performed by the device); a host
    /// signal (`vkSignalSemaphore`) has no such access scope. A device-side waiter of the signalled
    /// value (a CUDA stream that imported the semaphore) then sees what the host wrote before
    /// `signal`. Measured on an NVIDIA H100 (driver 580): after a host signal and a CUDA wait,
    /// CUDA read stale bytes of host-visible memory it had read before (its L2 kept them); after
    /// a signal-only queue batch it read the new ones.
    pub(crate) fn with_queue_signals(
        ctx: &Arc<VulkanContext>,
        initial: u64,
        exportable: bool,
        queue_signals: bool,
    ) -> Result<Arc<Self>> {
        let raw = create_semaphore(ctx, vk::SemaphoreType::TIMELINE, initial, exportable)?;
        Ok(Arc::new(Self { raw, exportable, queue_signals, queued: AtomicU64::new(0), ctx: ctx.clone() }))
    }

    /// The current counter value.
    pub fn value(&self) -> Result<u64> {
        // SAFETY: VUID-vkGetSemaphoreCounterValue-semaphore-03255: a timeline semaphore.
        unsafe { self.ctx.ash_device().get_semaphore_counter_value(self.raw) }
            .map_err(vk_err("vkGetSemaphoreCounterValue"))
    }

    /// Sets the counter to `value` from the host. `value` must be greater than the current value
    /// (checked) and less than any pending signal of the semaphore (a queue or CUDA signal
    /// already submitted with a lower value must have executed first: wait for it).
    ///
    /// The semaphores a frame ring makes for frames the CPU writes and a GPU reads signal
    /// through the context's queue instead (a signal-only batch, not waited for: `value` must
    /// then also exceed the last value signalled that way), which also makes the host's earlier
    /// writes to mapped memory visible to the device.
    pub fn signal(&self, value: u64) -> Result<()> {
        // The counter, or the value of a queue signal not executed yet if that is higher.
        let current = self.value()?.max(self.queued.load(Ordering::Acquire));
        if value <= current {
            return Err(invalid(
                "value",
                format!("{value} is not greater than the current (or last queued) value {current}"),
            ));
        }
        if self.queue_signals {
            return self.signal_on_queue(value);
        }
        let info = vk::SemaphoreSignalInfo::default().semaphore(self.raw).value(value);
        // SAFETY: VUID-VkSemaphoreSignalInfo-semaphore-03257: a timeline semaphore;
        // VUID-VkSemaphoreSignalInfo-value-03258: greater than the current value (checked above;
        // the counter only grows, so it still holds). -03259 (less than every pending signal)
        // cannot be checked here, as pending signals may be enqueued by CUDA: it is stated in
        // this function's documentation and concerns the order of counter values, not the
        // lifetime of any object or memory.
        unsafe { self.ctx.ash_device().signal_semaphore(&info) }.map_err(vk_err("vkSignalSemaphore"))
    }

    /// Submits a batch without command buffers that signals `value`, without waiting for it
    /// (measured on an H100, driver 580: waiting for such a batch costs a CPU camera's present
    /// about 0.2 ms; a CUDA stream that waits for the value needs no host wait before it).
    /// `queued` keeps the highest value submitted, which the drop waits for.
    fn signal_on_queue(&self, value: u64) -> Result<()> {
        let sems = [self.raw];
        let values = [value];
        let mut timeline = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&values);
        let submit = vk::SubmitInfo::default().signal_semaphores(&sems).push_next(&mut timeline);
        // VUID-VkSubmitInfo-pSignalSemaphores-03242 (the value exceeds the current value) was
        // checked by the caller; VUID-VkSubmitInfo-pNext-03241: one value per signalled
        // semaphore (above). No command buffer: the batch only signals.
        self.ctx.submit(core::slice::from_ref(&submit), vk::Fence::null())?;
        self.queued.fetch_max(value, Ordering::AcqRel);
        Ok(())
    }

    /// Waits on the host until the counter reaches `value`, or [`Error::Timeout`].
    ///
    /// Reads the counter for up to 20 us, then blocks in `vkWaitSemaphores` of at most 250 us
    /// each, reading the counter after each: NVIDIA's driver can wake a host wait for a value
    /// signalled by CUDA (an imported semaphore) about 10 ms late, while the counter already
    /// holds it (measured on an H100, driver 580.159.04, with a raw reproduction:
    /// BENCHMARKS.md). A 10 ms wait costs at most 40 short waits of CPU time.
    pub fn wait(&self, value: u64, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            if self.value()? >= value {
                return Ok(());
            }
            if start.elapsed() >= WAIT_SPIN.min(timeout) {
                break;
            }
            std::hint::spin_loop();
        }
        let sems = [self.raw];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&sems).values(&values);
        loop {
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(Error::Timeout {
                    waited_for: crate::error::Wait::Fence { function: "vkWaitSemaphores" },
                    timeout,
                });
            }
            // SAFETY: VUID-VkSemaphoreWaitInfo-pSemaphores-03256: a timeline semaphore; one value
            // per semaphore.
            match unsafe { self.ctx.ash_device().wait_semaphores(&info, timeout_ns(left.min(WAIT_SLICE))) } {
                Ok(()) => return Ok(()),
                Err(vk::Result::TIMEOUT) => {
                    if self.value()? >= value {
                        return Ok(());
                    }
                }
                Err(e) => return Err(vk_err("vkWaitSemaphores")(e)),
            }
        }
    }

    /// Exports a new `OPAQUE_FD` for the semaphore.
    pub fn export_fd(&self) -> Result<OwnedFd> {
        export_semaphore_fd(&self.ctx, self.raw, self.exportable)
    }

    /// Whether [`export_fd`](Self::export_fd) can work.
    pub fn is_exportable(&self) -> bool {
        self.exportable
    }

    /// The semaphore handle.
    pub fn raw(&self) -> vk::Semaphore {
        self.raw
    }
}

impl Drop for TimelineSemaphore {
    fn drop(&mut self) {
        let queued = self.queued.load(Ordering::Acquire);
        if queued > 0 && self.wait(queued, Duration::from_nanos(ONE_SHOT_TIMEOUT_NS)).is_err() {
            // A queue signal whose wait timed out is still pending: leak the semaphore rather
            // than destroy one a batch still uses.
            log::error!("a queue signal of a timeline semaphore did not execute; leaking the semaphore");
            return;
        }
        // SAFETY: VUID-vkDestroySemaphore-semaphore-01137: batches of this module that wait on or
        // signal the semaphore have completed (FrameProducer holds an Arc and waits for its
        // frames when dropped; `signal`'s queue signals have executed: waited for above). CUDA
        // imports of it are dropped before the Vulkan semaphore they hold an Arc of; their
        // destroy, queued until the CUDA work that used them completed, refers to the shared
        // payload, not to this handle.
        unsafe { self.ctx.ash_device().destroy_semaphore(self.raw, None) };
    }
}

/// An exportable binary semaphore (the fallback where timeline export is unsupported).
pub struct BinarySemaphore {
    raw: vk::Semaphore,
    ctx: Arc<VulkanContext>,
}

impl std::fmt::Debug for BinarySemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BinarySemaphore").finish()
    }
}

impl BinarySemaphore {
    /// An `OPAQUE_FD`-exportable binary semaphore ([`Error::Unsupported`] where the device
    /// cannot export one).
    pub fn new_exportable(ctx: &Arc<VulkanContext>) -> Result<Arc<Self>> {
        let raw = create_semaphore(ctx, vk::SemaphoreType::BINARY, 0, true)?;
        Ok(Arc::new(Self { raw, ctx: ctx.clone() }))
    }

    /// Exports a new `OPAQUE_FD` for the semaphore.
    pub fn export_fd(&self) -> Result<OwnedFd> {
        export_semaphore_fd(&self.ctx, self.raw, true)
    }

    /// The semaphore handle.
    pub fn raw(&self) -> vk::Semaphore {
        self.raw
    }
}

impl Drop for BinarySemaphore {
    fn drop(&mut self) {
        // SAFETY: as for TimelineSemaphore (VUID-vkDestroySemaphore-semaphore-01137).
        unsafe { self.ctx.ash_device().destroy_semaphore(self.raw, None) };
    }
}

/// How Vulkan and CUDA hand frames to each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoffMode {
    /// One timeline semaphore; each step of a frame signals the next value.
    Timeline,
    /// Two binary semaphores (Vulkan -> CUDA and CUDA -> Vulkan): the fallback where timeline
    /// semaphores cannot be exported. Every signal must be submitted before its wait.
    BinaryPair,
}

/// The timeline values of one frame (binary mode ignores them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameValues {
    /// Frame number, from 0.
    pub frame: u64,
    /// Signalled by Vulkan when the frame is written and released to CUDA.
    pub produced: u64,
    /// Signalled by CUDA when it is done with the frame.
    pub cuda_done: u64,
    /// Signalled by Vulkan when it has taken the frame back.
    pub returned: u64,
}

impl FrameValues {
    /// The values of frame `frame` on a timeline that started at `base`: three per frame.
    pub fn new(base: u64, frame: u64) -> Self {
        let v = base + 3 * frame;
        Self { frame, produced: v + 1, cuda_done: v + 2, returned: v + 3 }
    }
}

#[derive(Clone)]
pub(crate) enum HandoffInner {
    Timeline(Arc<TimelineSemaphore>),
    BinaryPair { to_cuda: Arc<BinarySemaphore>, from_cuda: Arc<BinarySemaphore> },
}

/// The semaphores of a Vulkan <-> CUDA hand-off (cheap to clone: the semaphores are shared).
#[derive(Clone)]
pub struct HandoffSemaphores {
    pub(crate) inner: HandoffInner,
}

impl std::fmt::Debug for HandoffSemaphores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandoffSemaphores").field("mode", &self.mode()).finish()
    }
}

impl HandoffSemaphores {
    /// A timeline semaphore where the device can export one, else a binary pair; check
    /// [`mode`](Self::mode). [`Error::Unsupported`] where no semaphore can be exported.
    pub fn new(ctx: &Arc<VulkanContext>) -> Result<Self> {
        let support = semaphore_export_support(ctx);
        if support.timeline {
            Self::with_mode(ctx, HandoffMode::Timeline)
        } else if support.binary {
            log::info!(
                "timeline semaphore export unsupported on {}: using a binary semaphore pair",
                ctx.info().name
            );
            Self::with_mode(ctx, HandoffMode::BinaryPair)
        } else {
            Err(Error::Unsupported {
                what: "exporting Vulkan semaphores to CUDA",
                reason: crate::error::UnsupportedReason::VulkanSemaphoreExport,
            })
        }
    }

    /// Exportable semaphores of the given mode.
    pub fn with_mode(ctx: &Arc<VulkanContext>, mode: HandoffMode) -> Result<Self> {
        let inner = match mode {
            HandoffMode::Timeline => HandoffInner::Timeline(TimelineSemaphore::new_exportable(ctx, 0)?),
            HandoffMode::BinaryPair => HandoffInner::BinaryPair {
                to_cuda: BinarySemaphore::new_exportable(ctx)?,
                from_cuda: BinarySemaphore::new_exportable(ctx)?,
            },
        };
        Ok(Self { inner })
    }

    /// Wraps an existing timeline semaphore, exportable or not (a process-local one lets the
    /// host play CUDA's part, e.g. in tests on drivers that cannot export semaphores).
    pub fn from_timeline(semaphore: Arc<TimelineSemaphore>) -> Self {
        Self { inner: HandoffInner::Timeline(semaphore) }
    }

    /// Timeline or binary pair.
    pub fn mode(&self) -> HandoffMode {
        match self.inner {
            HandoffInner::Timeline(_) => HandoffMode::Timeline,
            HandoffInner::BinaryPair { .. } => HandoffMode::BinaryPair,
        }
    }

    /// The timeline semaphore, in timeline mode.
    pub fn timeline(&self) -> Option<&Arc<TimelineSemaphore>> {
        match &self.inner {
            HandoffInner::Timeline(t) => Some(t),
            HandoffInner::BinaryPair { .. } => None,
        }
    }

    /// Exports the semaphores and imports them into CUDA (timeline-semaphore fd, or two
    /// opaque-fd binary semaphores).
    pub fn import_into_cuda(&self, cuda: &CudaGpu) -> Result<CudaHandoff> {
        let (wait, signal) = match &self.inner {
            HandoffInner::Timeline(t) => {
                (CudaSemaphore::import(cuda, t.export_fd()?, SemaphoreKind::Timeline)?, None)
            }
            HandoffInner::BinaryPair { to_cuda, from_cuda } => (
                CudaSemaphore::import(cuda, to_cuda.export_fd()?, SemaphoreKind::Binary)?,
                Some(CudaSemaphore::import(cuda, from_cuda.export_fd()?, SemaphoreKind::Binary)?),
            ),
        };
        Ok(CudaHandoff { wait, signal, vulkan: self.clone() })
    }
}

/// CUDA's side of a hand-off: wait for Vulkan's frame, signal when done.
///
/// Field order is the teardown order: the CUDA semaphores (whose drop synchronises the CUDA
/// context) before the Vulkan semaphores they were exported from.
pub struct CudaHandoff {
    wait: CudaSemaphore,
    signal: Option<CudaSemaphore>,
    vulkan: HandoffSemaphores,
}

impl std::fmt::Debug for CudaHandoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaHandoff").field("mode", &self.vulkan.mode()).finish()
    }
}

impl CudaHandoff {
    /// Timeline or binary pair.
    pub fn mode(&self) -> HandoffMode {
        self.vulkan.mode()
    }

    /// Enqueues on `stream` a wait for Vulkan's `produced` signal of the frame.
    pub fn wait_produced(&self, stream: &CudaStream, frame: &FrameValues) -> Result<()> {
        self.wait.wait(stream, frame.produced)
    }

    /// Enqueues on `stream` the `cuda_done` signal of the frame.
    pub fn signal_done(&self, stream: &CudaStream, frame: &FrameValues) -> Result<()> {
        match &self.signal {
            Some(s) => s.signal(stream, frame.cuda_done),
            None => self.wait.signal(stream, frame.cuda_done),
        }
    }

    /// The Vulkan semaphores.
    pub fn vulkan(&self) -> &HandoffSemaphores {
        &self.vulkan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vulkan::test_support::context;

    /// Queue-signalled semaphores: `signal` submits without waiting, a wait reaches the value,
    /// and a value not above the last one queued is refused even before its batch ran.
    #[test]
    fn queue_signals_reach_their_value_and_order_by_the_last_queued() {
        let Some(ctx) = context() else { return };
        let buffer =
            crate::vulkan::ExportableBuffer::new_host_visible(&ctx, 4096, vk::BufferUsageFlags::empty())
                .unwrap();
        let sem = TimelineSemaphore::with_queue_signals(&ctx, 3, false, true).unwrap();
        assert!(format!("{sem:?}").contains("queue_signals: true"));
        for v in 4..20u64 {
            buffer.host_slice_mut().unwrap().fill(v as u8);
            sem.signal(v).unwrap();
            sem.wait(v, Duration::from_secs(10)).unwrap();
            assert_eq!(sem.value().unwrap(), v);
        }
        sem.signal(24).unwrap();
        assert!(matches!(sem.signal(24), Err(Error::InvalidArgument { name: "value", .. })));
        sem.signal(25).unwrap();
        sem.wait(25, Duration::from_secs(10)).unwrap();
        assert!(matches!(sem.signal(25), Err(Error::InvalidArgument { name: "value", .. })));
        assert!(matches!(sem.signal(2), Err(Error::InvalidArgument { .. })));
    }
}
