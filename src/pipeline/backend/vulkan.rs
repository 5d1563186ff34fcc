//! The Vulkan backend of the ring (desktop NVIDIA GPUs): every slot an exportable Vulkan buffer,
//! the present and release sync objects exportable timeline semaphores. CUDA parties import both
//! once (a CUDA party of the ring imports them when the ring is split) and wait and signal on
//! their streams; CPU parties touch the bytes in place, wait on the host
//! (`vkWaitSemaphores`) and signal on the host (`vkSignalSemaphore`), except a CPU producer whose
//! frames a GPU reads, which signals through the queue (below). No Vulkan command touches the
//! frames: Vulkan allocates memory and semaphores CUDA can import, which is why the layout is
//! fixed here ([`FrameLayout::packed`](crate::pipeline::FrameLayout::packed) with 256-byte row pitches and 4096-byte planes) instead of
//! reconciled.
//!
//! Memory placement follows the parties:
//!
//! * a CPU party (a camera thread writing frames, a recorder reading them): host-visible,
//!   host-coherent memory, mapped for the buffer's life, so the CPU writes and reads the frame in
//!   place and CUDA reads the same bytes through its import (no staging copy);
//! * GPU parties only: device-local memory.
//!
//! How a CPU producer's writes reach a CUDA consumer: the producer writes through the mapping,
//! then [`Producer::present`](crate::pipeline::Producer::present) signals the present semaphore. Where a GPU
//! party reads the frames, that signal is a queue submission (a batch with no command buffers
//! that signals the value), not a host `vkSignalSemaphore`: a queue submission "defines a memory
//! dependency with prior host operations" whose first access scope is the host's writes to
//! mappable memory and whose second is all memory access performed by the device (Vulkan spec,
//! "Host Write Ordering Guarantees", #synchronization-submission-host-writes), and the batch's
//! semaphore signal follows it; `vkSignalSemaphore` only orders execution ("Semaphore
//! Signaling": its first synchronization scope is "execution of vkSignalSemaphore on the host and
//! anything that happened-before it", and it defines no access scope that would make host writes
//! available to the device). The memory is `HOST_COHERENT`, so no `vkFlushMappedMemoryRanges` is needed. The
//! CUDA stream waits for the signalled value (`cuWaitExternalSemaphoresAsync`) before it reads.
//! This is not only the letter of the spec: on an NVIDIA H100 (driver 580) a CUDA reader of
//! host-visible memory it had read before saw stale bytes after a host signal and a CUDA wait (the
//! GPU's L2 kept the old lines), and the new bytes after a signal-only queue batch. The present
//! does not wait for the batch: the consumers wait for its value (a CUDA stream on the device, a
//! CPU consumer on the host).
//!
//! In the other direction, a CUDA producer's writes are ordered before its stream's signal, and
//! a CPU consumer reads only once the present value was reached (`vkWaitSemaphores`).

use super::{CpuWaiter, FrameRead, FrameWrite, Point, Provider, RingBackend};
use crate::error::{invalid, Error, Result};
use crate::pipeline::config::{RingConfig, MAX_CONSUMERS};
use crate::pipeline::engine::Engine;
use crate::pipeline::format::{FrameFormat, FrameLayout};
use crate::vulkan::ash::vk;
use crate::vulkan::{
    semaphore_export_support, ExportableBuffer, MemoryPlacement, TimelineSemaphore, VulkanContext,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Row pitch alignment of the ring's frames.
const PITCH_ALIGN: u32 = 256;
/// Plane alignment of the ring's frames.
const PLANE_ALIGN: u64 = 4096;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Finds the Vulkan device of `dev` and checks that it can export timeline semaphores.
#[cfg(feature = "cuda")]
pub(crate) fn open(dev: &crate::cuda::CudaGpu) -> Result<VulkanProvider> {
    let ctx = VulkanContext::for_cuda(dev)?;
    if !semaphore_export_support(&ctx).timeline {
        return Err(Error::Unsupported {
            what: "the Vulkan backend",
            reason: crate::error::UnsupportedReason::VulkanSemaphoreExport,
        });
    }
    Ok(VulkanProvider { ctx })
}

/// A Vulkan device as a ring backend.
pub(crate) struct VulkanProvider {
    pub(crate) ctx: Arc<VulkanContext>,
}

impl Provider for VulkanProvider {
    fn build(
        &self,
        format: FrameFormat,
        config: RingConfig,
        producer: &Engine,
        consumers: &[Engine],
    ) -> Result<Arc<dyn RingBackend>> {
        if format.image_layout().is_some_and(|l| l != crate::buf::ImageLayout::PitchLinear) {
            return Err(Error::Unsupported {
                what: "block-linear frames on the Vulkan backend",
                reason: crate::error::UnsupportedReason::BlockLinearWithoutNvSci,
            });
        }
        Ok(Arc::new(VulkanRing::new(&self.ctx, format, config, producer, consumers)?))
    }

    fn vulkan(&self) -> Option<&Arc<VulkanContext>> {
        Some(&self.ctx)
    }

    fn describe(&self) -> String {
        format!("Vulkan device {}", self.ctx.info().name)
    }
}

/// Checks that a CUDA engine is the Vulkan device (`name`/`party` say which party it is).
fn check_engine(ctx: &VulkanContext, engine: &Engine, name: &'static str, party: &str) -> Result<()> {
    match engine {
        Engine::Cpu => Ok(()),
        #[cfg(feature = "cuda")]
        Engine::Cuda(dev) => crate::vulkan::check_same_gpu(ctx, dev).map_err(|e| match e {
            Error::InvalidArgument { reason, .. } => invalid(
                name,
                format!(
                    "{party}: {reason}; every CUDA party of a Vulkan ring must be the Vulkan device's GPU"
                ),
            ),
            e => e,
        }),
    }
}

/// The memory placement for these parties: host-visible where the CPU reads or writes frames,
/// device-local where only GPU engines do.
fn placement(producer: &Engine, consumers: &[Engine]) -> MemoryPlacement {
    if producer.is_cpu() || consumers.iter().any(Engine::is_cpu) {
        MemoryPlacement::HostVisible
    } else {
        MemoryPlacement::DeviceLocal
    }
}

/// A timeline semaphore of the ring and the last value handed out for a signal.
struct Timeline {
    semaphore: Arc<TimelineSemaphore>,
    next: AtomicU64,
}

impl Timeline {
    fn new(semaphore: Arc<TimelineSemaphore>) -> Result<Self> {
        let current = semaphore.value()?;
        Ok(Self { semaphore, next: AtomicU64::new(current) })
    }

    /// The next value for a signal (engine or CPU).
    fn reserve(&self) -> Result<u64> {
        let prev = self.next.fetch_add(1, Ordering::AcqRel);
        prev.checked_add(1).ok_or_else(|| invalid("timeline", "the semaphore's 64-bit counter is exhausted"))
    }
}

/// One slot: the buffer and its fences (the timeline value that expires each; `None`: expired).
struct Slot {
    buffer: Arc<ExportableBuffer>,
    present: Mutex<Option<u64>>,
    releases: heapless::Vec<Mutex<Option<u64>>, MAX_CONSUMERS>,
}

/// One ring's exportable buffers and timeline semaphores.
struct VulkanRing {
    layout: FrameLayout,
    slots: Vec<Slot>,
    present: Timeline,
    releases: heapless::Vec<Timeline, MAX_CONSUMERS>,
}

impl VulkanRing {
    /// Builds a ring of `config.frames` exportable Vulkan buffers of `format` on `ctx`, with an
    /// exportable timeline semaphore for presents and one per consumer for releases. `consumers`
    /// has one engine per consumer; every CUDA engine must be the Vulkan device's GPU.
    fn new(
        ctx: &Arc<VulkanContext>,
        format: FrameFormat,
        config: RingConfig,
        producer: &Engine,
        consumers: &[Engine],
    ) -> Result<Self> {
        check_engine(ctx, producer, "producer", "the producer")?;
        for (i, c) in consumers.iter().enumerate() {
            check_engine(ctx, c, "consumers", &format!("consumer {i}"))?;
        }
        if !semaphore_export_support(ctx).timeline {
            return Err(Error::Unsupported {
                what: "the Vulkan frame ring",
                reason: crate::error::UnsupportedReason::VulkanSemaphoreExport,
            });
        }
        let layout = FrameLayout::packed(format, PITCH_ALIGN, PLANE_ALIGN)?;
        let placement = placement(producer, consumers);
        log::debug!("Vulkan frame ring on {}: {placement:?} memory", ctx.info().name);

        // No Vulkan command ever accesses these buffers (the CPU reaches them through the mapping,
        // CUDA through its import; the queue only carries signal-only batches), so no queue-family
        // ownership transfer is recorded for them: an
        // EXCLUSIVE resource "is not owned by any queue family; ownership is implicitly acquired upon
        // first use within a queue" (Vulkan spec, "Resource Sharing Mode", #resources-sharing), and
        // with external memory "the first entity to access the resource implicitly acquires
        // ownership" ("External Resource Sharing", #resources-external-sharing): here that is CUDA,
        // and no Vulkan queue ever needs the contents after it.
        let mut slots = Vec::with_capacity(config.frames);
        for _ in 0..config.frames {
            let buffer =
                ExportableBuffer::with_placement(ctx, layout.size, vk::BufferUsageFlags::empty(), placement)?;
            let mut releases = heapless::Vec::new();
            for _ in 0..config.consumers {
                let _ = releases.push(Mutex::new(None));
            }
            slots.push(Slot { buffer, present: Mutex::new(None), releases });
        }
        // A CPU producer's present must make its writes visible to GPU readers: signal it through
        // the queue (see the module documentation). CPU consumers only read, so their releases are
        // host signals.
        let queue_present = producer.is_cpu() && consumers.iter().any(|c| !c.is_cpu());
        let present = Timeline::new(TimelineSemaphore::with_queue_signals(ctx, 0, true, queue_present)?)?;
        let mut releases = heapless::Vec::<Timeline, MAX_CONSUMERS>::new();
        for _ in 0..config.consumers {
            // Cannot fail: config.consumers <= MAX_CONSUMERS (validated by the builder).
            let _ = releases.push(Timeline::new(TimelineSemaphore::new_exportable(ctx, 0)?)?);
        }
        // Every buffer and semaphore holds an Arc of the context, so nothing else needs keeping.
        Ok(Self { layout, slots, present, releases })
    }

    fn slot(&self, slot: usize) -> Result<&Slot> {
        self.slots.get(slot).ok_or_else(|| invalid("slot", format!("no slot {slot} in this ring")))
    }

    fn fence(&self, slot: usize, point: Point) -> Result<&Mutex<Option<u64>>> {
        let s = self.slot(slot)?;
        match point {
            Point::Present => Ok(&s.present),
            Point::Release(c) => s.releases.get(c).ok_or_else(no_consumer),
        }
    }

    fn timeline(&self, point: Point) -> Result<&Timeline> {
        match point {
            Point::Present => Ok(&self.present),
            Point::Release(c) => self.releases.get(c).ok_or_else(no_consumer),
        }
    }
}

fn no_consumer() -> Error {
    Error::Unsupported { what: "a consumer view", reason: crate::error::UnsupportedReason::NoSuchConsumer }
}

impl RingBackend for VulkanRing {
    fn layout(&self) -> &FrameLayout {
        &self.layout
    }

    fn cpu_waiter(self: Arc<Self>) -> Result<Box<dyn CpuWaiter>> {
        // Timeline semaphores need no wait context: the ring is all a party needs.
        Ok(Box::new(VulkanCpuWaiter { ring: self }))
    }

    fn cpu_signal(&self, slot: usize, point: Point) -> Result<()> {
        let t = self.timeline(point)?;
        let value = t.reserve()?;
        t.semaphore.signal(value)?;
        *lock(self.fence(slot, point)?) = Some(value);
        Ok(())
    }

    fn clear(&self, slot: usize, point: Point) {
        if let Ok(f) = self.fence(slot, point) {
            *lock(f) = None;
        }
    }

    // Host access is borrow-checked by the buffer (one writer or many readers); the ring's
    // tokens order it against the engines (the producer holds the frame, every release fence
    // of the slot expired before a CPU acquire hands it out).
    fn cpu_write(&self, slot: usize) -> Result<FrameWrite<'_>> {
        Ok(self.slot(slot)?.buffer.host_slice_mut()?.into())
    }

    fn cpu_read(&self, slot: usize, _consumer: usize) -> Result<FrameRead<'_>> {
        Ok(self.slot(slot)?.buffer.host_slice()?.into())
    }

    #[cfg(feature = "cuda")]
    fn cuda_import_rw(
        &self,
        dev: &crate::cuda::CudaGpu,
        slot: usize,
    ) -> Result<crate::cuda::ExternalMemory<crate::cuda::ReadWrite>> {
        import_buffer(dev, &self.slot(slot)?.buffer)
    }

    #[cfg(feature = "cuda")]
    fn cuda_import_ro(
        &self,
        dev: &crate::cuda::CudaGpu,
        slot: usize,
        _consumer: usize,
    ) -> Result<crate::cuda::ExternalMemory<crate::cuda::ReadOnly>> {
        import_buffer(dev, &self.slot(slot)?.buffer)
    }

    #[cfg(feature = "cuda")]
    fn cuda_import_sync(
        self: Arc<Self>,
        dev: &crate::cuda::CudaGpu,
        point: Point,
    ) -> Result<Box<dyn super::CudaSync>> {
        let semaphore = &self.timeline(point)?.semaphore;
        let imported = crate::cuda::CudaSemaphore::import(
            dev,
            semaphore.export_fd()?,
            crate::cuda::SemaphoreKind::Timeline,
        )?;
        Ok(Box::new(VulkanCudaSync { ring: self, point, imported }))
    }
}

/// One party's CPU waits on a Vulkan ring's timeline semaphores.
struct VulkanCpuWaiter {
    ring: Arc<VulkanRing>,
}

impl CpuWaiter for VulkanCpuWaiter {
    fn wait(&mut self, slot: usize, point: Point, timeout: Duration) -> Result<()> {
        let value = *lock(self.ring.fence(slot, point)?);
        match value {
            None => Ok(()),
            Some(v) => self.ring.timeline(point)?.semaphore.wait(v, timeout),
        }
    }
}

/// One point's timeline semaphore of a Vulkan ring, imported into a CUDA context.
#[cfg(feature = "cuda")]
struct VulkanCudaSync {
    ring: Arc<VulkanRing>,
    point: Point,
    imported: crate::cuda::CudaSemaphore,
}

#[cfg(feature = "cuda")]
impl super::CudaSync for VulkanCudaSync {
    fn wait(
        &self,
        stream: &crate::cuda::cudarc::driver::CudaStream,
        slot: usize,
        _policy: crate::cuda::MemSync,
        _reads: bool,
    ) -> Result<()> {
        match *lock(self.ring.fence(slot, self.point)?) {
            None => Ok(()),
            Some(value) => self.imported.wait(stream, value),
        }
    }

    fn signal(
        &self,
        stream: &crate::cuda::cudarc::driver::CudaStream,
        slot: usize,
        _policy: crate::cuda::MemSync,
    ) -> Result<()> {
        let value = self.ring.timeline(self.point)?.reserve()?;
        self.imported.signal(stream, value)?;
        *lock(self.ring.fence(slot, self.point)?) = Some(value);
        Ok(())
    }
}

/// Imports an exported buffer into `dev` (which must be the Vulkan device's GPU).
#[cfg(feature = "cuda")]
fn import_buffer<A: crate::cuda::Access>(
    dev: &crate::cuda::CudaGpu,
    buffer: &ExportableBuffer,
) -> Result<crate::cuda::ExternalMemory<A>> {
    crate::vulkan::check_same_gpu(buffer.context(), dev)?;
    crate::cuda::ExternalMemory::from_opaque_fd(dev, buffer.export_fd()?, buffer.allocation_size(), true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vulkan::test_support::context;
    use std::time::Duration;

    use crate::pipeline::{Backend, BackendKind, ConsumerDesc, StreamBuilder};

    /// A stream builder on the Vulkan backend of `ctx`, with a CPU producer and `consumers`
    /// CPU consumers.
    fn stream(
        ctx: &Arc<VulkanContext>,
        format: FrameFormat,
        frames: usize,
        consumers: usize,
    ) -> StreamBuilder {
        let b = Backend::from_provider(BackendKind::Vulkan, Arc::new(VulkanProvider { ctx: ctx.clone() }));
        (0..consumers).fold(b.stream(format).frames(frames).timeout(Duration::from_secs(5)), |s, _| {
            s.consumer(ConsumerDesc::cpu())
        })
    }

    #[test]
    fn placement_follows_the_parties() {
        assert_eq!(placement(&Engine::Cpu, &[Engine::Cpu]), MemoryPlacement::HostVisible);
        assert_eq!(placement(&Engine::Cpu, &[]), MemoryPlacement::HostVisible);
    }

    #[test]
    fn bad_input_is_refused_before_anything_is_allocated() {
        let Some(ctx) = context() else { return };
        let raw = FrameFormat::Raw { size: 4096 };
        for frames in [0, 1, 17] {
            let r = stream(&ctx, raw, frames, 1).build();
            assert!(matches!(r, Err(Error::InvalidArgument { name: "frames", .. })), "{frames}: {r:?}");
        }
        let r = stream(&ctx, raw, 2, 0).build();
        assert!(matches!(r, Err(Error::InvalidArgument { name: "consumers", .. })), "{r:?}");
        let r = stream(&ctx, FrameFormat::nv12(63, 64), 2, 1).build();
        assert!(matches!(r, Err(Error::InvalidArgument { name: "format", .. })), "{r:?}");
    }

    /// Block-linear frames are NvSci-only: the Vulkan backend refuses them before allocating
    /// anything, with a typed reason.
    #[test]
    fn block_linear_frames_are_refused() {
        let Some(ctx) = context() else { return };
        let r = stream(&ctx, FrameFormat::nv12_block_linear(64, 64), 2, 1).build();
        match r {
            Err(Error::Unsupported { reason, .. }) => {
                assert_eq!(reason, crate::UnsupportedReason::BlockLinearWithoutNvSci)
            }
            other => panic!("expected Unsupported, got {:?}", other.err()),
        }
    }

    /// Lavapipe cannot export semaphores: the ring is refused with a typed error that says so.
    /// Where timeline export works (a GPU host), a CPU-only ring runs frames instead.
    #[test]
    fn ring_needs_timeline_semaphore_export() {
        let Some(ctx) = context() else { return };
        let r = stream(&ctx, FrameFormat::Raw { size: 4096 }, 3, 2).build();
        if !semaphore_export_support(&ctx).timeline {
            match r {
                Err(Error::Unsupported { what, reason }) => {
                    assert_eq!(what, "the Vulkan frame ring");
                    assert_eq!(reason, crate::UnsupportedReason::VulkanSemaphoreExport);
                }
                other => panic!("expected Unsupported, got {other:?}"),
            }
            return;
        }
        let (mut p, mut cs) = r.unwrap().split().unwrap();
        for t in 0..20u8 {
            let f = p.acquire().unwrap();
            p.cpu_write(&f).unwrap().fill(t);
            p.present(f).unwrap();
            for c in cs.iter_mut() {
                let f = c.acquire().unwrap();
                assert!(c.cpu_read(&f).unwrap().iter().all(|&b| b == t), "frame {t}");
                c.release(f).unwrap();
            }
        }
    }
}
