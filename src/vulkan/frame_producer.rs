//! A Vulkan hand-off helper: writes frames into an exported buffer and hands them to CUDA and
//! back (the shape of the Vulkan -> CUDA -> Vulkan benchmark). It is not a frame ring party; the
//! frame ring's Vulkan backend is [`Backend::vulkan`](crate::pipeline::Backend::vulkan).
//!
//! One frame, in timeline mode (values from [`FrameValues`]):
//!
//! 1. [`FrameProducer::submit_produce`]: copy the frame (from a host-visible staging buffer, or
//!    from a device-local source buffer) into the exported buffer, release the buffer to
//!    `VK_QUEUE_FAMILY_EXTERNAL`, signal `produced`.
//! 2. CUDA: [`CudaHandoff::wait_produced`](crate::vulkan::CudaHandoff::wait_produced), kernels on
//!    the imported buffer, [`CudaHandoff::signal_done`](crate::vulkan::CudaHandoff::signal_done).
//! 3. [`FrameProducer::submit_return`]: wait for `cuda_done`, acquire the buffer from
//!    `VK_QUEUE_FAMILY_EXTERNAL` (the queue-family ownership transfer the Vulkan spec requires
//!    for an `EXCLUSIVE` resource shared with an external API), optionally copy (parts of) it to
//!    a host-visible readback buffer, signal `returned`.
//! 4. [`FrameProducer::wait_returned`]: the host waits; the buffer may be reused.
//!
//! Command buffers are recorded once at construction and submit-info structures live on the
//! stack, so a steady-state frame allocates nothing on the heap.

use super::ash::vk;
use super::buffer::RawBuffer;
use super::context::vk_err;
use super::semaphore::HandoffInner;
use super::{ExportableBuffer, FrameValues, HandoffMode, HandoffSemaphores, VulkanContext};
use crate::error::{invalid, Error, Result};
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::Duration;

/// Most readback windows a producer can copy per frame.
pub const MAX_READBACK_WINDOWS: usize = 16;

/// How long dropping a producer waits for its frames in flight before leaking its objects
/// rather than destroying objects the GPU may still use.
const DROP_TIMEOUT_NS: u64 = 10_000_000_000;

/// Where each frame's bytes come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FrameSource {
    /// A host-visible staging buffer ([`FrameProducer::staging_mut`]) uploaded every frame
    /// (`vkCmdCopyBuffer` staging -> exported buffer).
    #[default]
    Staging,
    /// A device-local source buffer, filled from the staging buffer by
    /// [`FrameProducer::commit_source`] and copied on the GPU every frame (what a renderer
    /// producing frames on the GPU costs, without host uploads).
    Device,
}

/// What the return step copies back to the host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Readback {
    /// Nothing: the return step only takes the buffer back.
    None,
    /// The whole buffer.
    #[default]
    Full,
    /// `count` windows of `len` bytes spread evenly from the start to the end of the buffer
    /// (offsets rounded down to 4 bytes), see [`FrameProducer::readback_regions`].
    Windows {
        /// Number of windows (1 to [`MAX_READBACK_WINDOWS`]).
        count: u32,
        /// Bytes per window.
        len: u64,
    },
}

/// Producer configuration: start from [`ProducerConfig::default`] and change what differs with
/// the `with_*` methods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProducerConfig {
    /// Where frames come from.
    pub source: FrameSource,
    /// What comes back to the host after CUDA.
    pub readback: Readback,
}

impl ProducerConfig {
    /// Sets [`source`](Self::source).
    pub fn with_source(mut self, source: FrameSource) -> Self {
        self.source = source;
        self
    }

    /// Sets [`readback`](Self::readback).
    pub fn with_readback(mut self, readback: Readback) -> Self {
        self.readback = readback;
        self
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Idle,
    Produced,
    Returning,
}

enum Sync {
    Handoff(HandoffInner),
    HostOnly,
}

/// Everything that must only be released once the GPU is done with it.
struct Parts {
    staging: RawBuffer,
    source: Option<RawBuffer>,
    readback: Option<RawBuffer>,
    target: Arc<ExportableBuffer>,
    sync: Sync,
    ctx: Arc<VulkanContext>,
}

/// Writes frames into an [`ExportableBuffer`] and hands them to CUDA and back (see the module
/// documentation for one frame's steps).
pub struct FrameProducer {
    pool: vk::CommandPool,
    produce_cmd: vk::CommandBuffer,
    return_cmd: vk::CommandBuffer,
    produce_fence: vk::Fence,
    return_fence: vk::Fence,
    produce_pending: bool,
    return_pending: bool,
    regions: heapless::Vec<(u64, u64), MAX_READBACK_WINDOWS>,
    config: ProducerConfig,
    base: u64,
    next_frame: u64,
    stage: Stage,
    current: FrameValues,
    parts: ManuallyDrop<Parts>,
}

impl std::fmt::Debug for FrameProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameProducer")
            .field("mode", &self.mode())
            .field("config", &self.config)
            .field("next_frame", &self.next_frame)
            .field("stage", &self.stage)
            .finish()
    }
}

fn regions_for(size: u64, readback: Readback) -> Result<heapless::Vec<(u64, u64), MAX_READBACK_WINDOWS>> {
    let mut v = heapless::Vec::new();
    match readback {
        Readback::None => {}
        Readback::Full => {
            let _ = v.push((0, size));
        }
        Readback::Windows { count, len } => {
            if count == 0 || count as usize > MAX_READBACK_WINDOWS {
                return Err(invalid("readback.count", format!("{count}; 1 to {MAX_READBACK_WINDOWS}")));
            }
            if len == 0 || len > size {
                return Err(invalid("readback.len", format!("{len} bytes in a {size}-byte buffer")));
            }
            let span = size - len;
            for k in 0..count as u64 {
                let off = if count == 1 { 0 } else { span * k / (count as u64 - 1) } & !3;
                let _ = v.push((off, len));
            }
        }
    }
    Ok(v)
}

impl FrameProducer {
    /// A producer handing `target` to CUDA through `sync` (timeline or binary pair).
    pub fn new(
        ctx: &Arc<VulkanContext>,
        target: &Arc<ExportableBuffer>,
        sync: &HandoffSemaphores,
        config: ProducerConfig,
    ) -> Result<Self> {
        Self::create(ctx, target, Sync::Handoff(sync.inner.clone()), config)
    }

    /// A producer without CUDA: the return step follows the produce step directly and no
    /// queue-family ownership transfer is recorded (the copy path of benchmarks, and tests on
    /// drivers that cannot export semaphores).
    pub fn host_only(
        ctx: &Arc<VulkanContext>,
        target: &Arc<ExportableBuffer>,
        config: ProducerConfig,
    ) -> Result<Self> {
        Self::create(ctx, target, Sync::HostOnly, config)
    }

    fn create(
        ctx: &Arc<VulkanContext>,
        target: &Arc<ExportableBuffer>,
        sync: Sync,
        config: ProducerConfig,
    ) -> Result<Self> {
        if !Arc::ptr_eq(target.context(), ctx) {
            return Err(invalid("target", "the buffer belongs to another Vulkan context"));
        }
        let size = target.size();
        let regions = regions_for(size, config.readback)?;
        let readback_len: u64 = regions.iter().map(|r| r.1).sum();
        let base = match &sync {
            Sync::Handoff(HandoffInner::Timeline(t)) => t.value()?,
            _ => 0,
        };
        let staging_usage = vk::BufferUsageFlags::TRANSFER_SRC;
        let staging = RawBuffer::host(ctx, size, staging_usage, false)?;
        let source = match config.source {
            FrameSource::Staging => None,
            FrameSource::Device => Some(RawBuffer::device_local(
                ctx,
                size,
                vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
            )?),
        };
        let readback = if readback_len > 0 {
            Some(RawBuffer::host(ctx, readback_len, vk::BufferUsageFlags::TRANSFER_DST, true)?)
        } else {
            None
        };
        let parts = Parts { staging, source, readback, target: target.clone(), sync, ctx: ctx.clone() };
        let d = ctx.ash_device();
        let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(ctx.queue_family());
        // SAFETY: VUID-vkCreateCommandPool-queueFamilyIndex-01937: the context's family.
        let pool =
            unsafe { d.create_command_pool(&pool_info, None) }.map_err(vk_err("vkCreateCommandPool"))?;
        let mut me = Self {
            pool,
            produce_cmd: vk::CommandBuffer::null(),
            return_cmd: vk::CommandBuffer::null(),
            produce_fence: vk::Fence::null(),
            return_fence: vk::Fence::null(),
            produce_pending: false,
            return_pending: false,
            regions,
            config,
            base,
            next_frame: 0,
            stage: Stage::Idle,
            current: FrameValues::new(base, 0),
            parts: ManuallyDrop::new(parts),
        };
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(2);
        // SAFETY: the pool belongs to this device; two primary buffers are allocated (freed with
        // the pool).
        let cmds =
            unsafe { d.allocate_command_buffers(&alloc) }.map_err(vk_err("vkAllocateCommandBuffers"))?;
        me.produce_cmd = cmds[0];
        me.return_cmd = cmds[1];
        // SAFETY: plain, unsignalled fences of this device.
        me.produce_fence = unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) }
            .map_err(vk_err("vkCreateFence"))?;
        // SAFETY: as above.
        me.return_fence = unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) }
            .map_err(vk_err("vkCreateFence"))?;
        me.record()?;
        Ok(me)
    }

    fn record(&self) -> Result<()> {
        let p = &*self.parts;
        let d = p.ctx.ash_device();
        let family = p.ctx.queue_family();
        let external = matches!(p.sync, Sync::Handoff(_));
        let target = p.target.raw();
        let size = p.target.size();
        let src = p.source.as_ref().map_or(p.staging.buffer, |s| s.buffer);
        let begin = vk::CommandBufferBeginInfo::default();
        let whole = [vk::BufferCopy { src_offset: 0, dst_offset: 0, size }];
        let release = [vk::BufferMemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(vk::AccessFlags::empty())
            .src_queue_family_index(family)
            .dst_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)
            .buffer(target)
            .offset(0)
            .size(vk::WHOLE_SIZE)];
        // SAFETY: VUID-vkBeginCommandBuffer-commandBuffer-00049: freshly allocated, not in use.
        // VUID-vkCmdCopyBuffer-size-00115/00116: both buffers hold `size` bytes and carry
        // TRANSFER_SRC / TRANSFER_DST usage. The release barrier names this family as source and
        // VK_QUEUE_FAMILY_EXTERNAL as destination for an EXCLUSIVE buffer
        // (VUID-VkBufferMemoryBarrier-buffer-04088); its dstAccessMask is ignored for a release.
        unsafe {
            d.begin_command_buffer(self.produce_cmd, &begin).map_err(vk_err("vkBeginCommandBuffer"))?;
            d.cmd_copy_buffer(self.produce_cmd, src, target, &whole);
            if external {
                d.cmd_pipeline_barrier(
                    self.produce_cmd,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                    vk::DependencyFlags::empty(),
                    &[],
                    &release,
                    &[],
                );
            }
            d.end_command_buffer(self.produce_cmd).map_err(vk_err("vkEndCommandBuffer"))?;
        }
        let acquire = [vk::BufferMemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::empty())
            .dst_access_mask(vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE)
            .src_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)
            .dst_queue_family_index(family)
            .buffer(target)
            .offset(0)
            .size(vk::WHOLE_SIZE)];
        let local = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE)];
        let mut copies: heapless::Vec<vk::BufferCopy, MAX_READBACK_WINDOWS> = heapless::Vec::new();
        let mut at = 0;
        for &(offset, len) in &self.regions {
            let _ = copies.push(vk::BufferCopy { src_offset: offset, dst_offset: at, size: len });
            at += len;
        }
        // SAFETY: as above; the acquire barrier mirrors the release (EXTERNAL -> this family,
        // VUID-VkBufferMemoryBarrier-buffer-04089); its srcAccessMask is ignored for an acquire.
        // Every copy region lies inside the target (regions_for) and inside the readback buffer,
        // which is the sum of the region lengths long.
        unsafe {
            d.begin_command_buffer(self.return_cmd, &begin).map_err(vk_err("vkBeginCommandBuffer"))?;
            if external {
                d.cmd_pipeline_barrier(
                    self.return_cmd,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::DependencyFlags::empty(),
                    &[],
                    &acquire,
                    &[],
                );
            } else {
                d.cmd_pipeline_barrier(
                    self.return_cmd,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::DependencyFlags::empty(),
                    &local,
                    &[],
                    &[],
                );
            }
            if let Some(rb) = &p.readback {
                d.cmd_copy_buffer(self.return_cmd, target, rb.buffer, &copies);
                let host = [vk::BufferMemoryBarrier::default()
                    .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                    .dst_access_mask(vk::AccessFlags::HOST_READ)
                    .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .buffer(rb.buffer)
                    .offset(0)
                    .size(vk::WHOLE_SIZE)];
                d.cmd_pipeline_barrier(
                    self.return_cmd,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::HOST,
                    vk::DependencyFlags::empty(),
                    &[],
                    &host,
                    &[],
                );
            }
            d.end_command_buffer(self.return_cmd).map_err(vk_err("vkEndCommandBuffer"))?;
        }
        Ok(())
    }

    fn expect(&self, stage: Stage, what: &'static str) -> Result<()> {
        if self.stage != stage {
            return Err(invalid(
                "producer",
                format!("{what} called while the producer is {:?} (expected {stage:?})", self.stage),
            ));
        }
        Ok(())
    }

    /// The hand-off mode, or `None` for a [`host_only`](Self::host_only) producer.
    pub fn mode(&self) -> Option<HandoffMode> {
        match &self.parts.sync {
            Sync::Handoff(HandoffInner::Timeline(_)) => Some(HandoffMode::Timeline),
            Sync::Handoff(HandoffInner::BinaryPair { .. }) => Some(HandoffMode::BinaryPair),
            Sync::HostOnly => None,
        }
    }

    /// The exported buffer frames are written into.
    pub fn target(&self) -> &Arc<ExportableBuffer> {
        &self.parts.target
    }

    /// The host-visible staging buffer (the frame for [`FrameSource::Staging`], the source
    /// contents for [`FrameSource::Device`]). Only between frames.
    pub fn staging_mut(&mut self) -> Result<&mut [u8]> {
        self.expect(Stage::Idle, "staging_mut")?;
        Ok(self.parts.staging.bytes_mut())
    }

    /// [`FrameSource::Device`]: copies the staging buffer into the device-local source buffer
    /// (once, or whenever the source should change) and waits for the copy.
    pub fn commit_source(&mut self) -> Result<()> {
        self.expect(Stage::Idle, "commit_source")?;
        let p = &*self.parts;
        let Some(source) = &p.source else {
            return Err(invalid("config.source", "commit_source needs FrameSource::Device"));
        };
        let (src, dst, size) = (p.staging.buffer, source.buffer, p.staging.size);
        p.ctx.one_shot(|d, cmd| {
            let whole = [vk::BufferCopy { src_offset: 0, dst_offset: 0, size }];
            let visible = [vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(vk::AccessFlags::TRANSFER_READ)];
            // SAFETY: `cmd` is recording; both buffers hold `size` bytes with TRANSFER_SRC /
            // TRANSFER_DST usage (VUID-vkCmdCopyBuffer-size-00115/00116). The barrier makes the
            // copy visible to the transfer reads of later submissions (its second scope covers
            // commands later in submission order).
            unsafe {
                d.cmd_copy_buffer(cmd, src, dst, &whole);
                d.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::DependencyFlags::empty(),
                    &visible,
                    &[],
                    &[],
                );
            }
        })
    }

    /// Step 1: writes the next frame into the exported buffer, releases it to CUDA and signals
    /// `produced` (binary mode: the Vulkan -> CUDA semaphore). Returns the frame's values.
    pub fn submit_produce(&mut self) -> Result<FrameValues> {
        self.expect(Stage::Idle, "submit_produce")?;
        let v = FrameValues::new(self.base, self.next_frame);
        let p = &*self.parts;
        let cmds = [self.produce_cmd];
        let values = [v.produced];
        let r = match &p.sync {
            Sync::Handoff(HandoffInner::Timeline(t)) => {
                let sems = [t.raw()];
                let mut timeline =
                    vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&values);
                let submit = vk::SubmitInfo::default()
                    .command_buffers(&cmds)
                    .signal_semaphores(&sems)
                    .push_next(&mut timeline);
                p.ctx.submit(core::slice::from_ref(&submit), self.produce_fence)
            }
            Sync::Handoff(HandoffInner::BinaryPair { to_cuda, .. }) => {
                let sems = [to_cuda.raw()];
                let submit = vk::SubmitInfo::default().command_buffers(&cmds).signal_semaphores(&sems);
                p.ctx.submit(core::slice::from_ref(&submit), self.produce_fence)
            }
            Sync::HostOnly => {
                let submit = vk::SubmitInfo::default().command_buffers(&cmds);
                p.ctx.submit(core::slice::from_ref(&submit), self.produce_fence)
            }
        };
        r?;
        self.produce_pending = true;
        self.current = v;
        self.stage = Stage::Produced;
        Ok(v)
    }

    /// Step 3: waits (on the GPU) for `cuda_done` (binary mode: the CUDA -> Vulkan semaphore,
    /// whose signal must already be enqueued on the CUDA stream), takes the buffer back, copies
    /// the readback windows and signals `returned`.
    pub fn submit_return(&mut self) -> Result<()> {
        self.expect(Stage::Produced, "submit_return")?;
        let v = self.current;
        let p = &*self.parts;
        let cmds = [self.return_cmd];
        let stages = [vk::PipelineStageFlags::TRANSFER];
        let r = match &p.sync {
            Sync::Handoff(HandoffInner::Timeline(t)) => {
                let sems = [t.raw()];
                let wait_values = [v.cuda_done];
                let signal_values = [v.returned];
                let mut timeline = vk::TimelineSemaphoreSubmitInfo::default()
                    .wait_semaphore_values(&wait_values)
                    .signal_semaphore_values(&signal_values);
                let submit = vk::SubmitInfo::default()
                    .wait_semaphores(&sems)
                    .wait_dst_stage_mask(&stages)
                    .command_buffers(&cmds)
                    .signal_semaphores(&sems)
                    .push_next(&mut timeline);
                p.ctx.submit(core::slice::from_ref(&submit), self.return_fence)
            }
            Sync::Handoff(HandoffInner::BinaryPair { from_cuda, .. }) => {
                let sems = [from_cuda.raw()];
                let submit = vk::SubmitInfo::default()
                    .wait_semaphores(&sems)
                    .wait_dst_stage_mask(&stages)
                    .command_buffers(&cmds);
                p.ctx.submit(core::slice::from_ref(&submit), self.return_fence)
            }
            Sync::HostOnly => {
                let submit = vk::SubmitInfo::default().command_buffers(&cmds);
                p.ctx.submit(core::slice::from_ref(&submit), self.return_fence)
            }
        };
        r?;
        self.return_pending = true;
        self.stage = Stage::Returning;
        Ok(())
    }

    /// Step 4: waits on the host until the frame is back (or [`Error::Timeout`], after which it
    /// may be called again) and returns the readback bytes (empty for [`Readback::None`]).
    pub fn wait_returned(&mut self, timeout: Duration) -> Result<&[u8]> {
        self.expect(Stage::Returning, "wait_returned")?;
        let d = self.parts.ctx.ash_device();
        let fences = [self.produce_fence, self.return_fence];
        let ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: both fences belong to this device and were submitted by this frame
        // (VUID-vkWaitForFences-pFences-parameter).
        match unsafe { d.wait_for_fences(&fences, true, ns) } {
            Ok(()) => {}
            Err(vk::Result::TIMEOUT) => {
                return Err(Error::Timeout {
                    waited_for: crate::error::Wait::Fence { function: "vkWaitForFences" },
                    timeout,
                })
            }
            Err(e) => return Err(vk_err("vkWaitForFences")(e)),
        }
        // SAFETY: VUID-vkResetFences-pFences-01123: both fences signalled (waited above), so no
        // queue submission refers to them.
        unsafe { d.reset_fences(&fences) }.map_err(vk_err("vkResetFences"))?;
        self.produce_pending = false;
        self.return_pending = false;
        self.stage = Stage::Idle;
        self.next_frame += 1;
        Ok(self.readback())
    }

    /// The readback bytes of the last returned frame: the windows of
    /// [`readback_regions`](Self::readback_regions), back to back.
    pub fn readback(&self) -> &[u8] {
        if self.stage != Stage::Idle {
            return &[];
        }
        self.parts.readback.as_ref().map_or(&[], |r| r.bytes())
    }

    /// `(offset in the buffer, length)` of each readback window, in readback order.
    pub fn readback_regions(&self) -> &[(u64, u64)] {
        &self.regions
    }

    /// Frames fully returned so far.
    pub fn frames_returned(&self) -> u64 {
        self.next_frame
    }

    /// Waits up to [`DROP_TIMEOUT_NS`] for submitted work; `false` if it is still pending.
    fn quiesce(&self) -> bool {
        let mut fences: heapless::Vec<vk::Fence, 2> = heapless::Vec::new();
        if self.produce_pending {
            let _ = fences.push(self.produce_fence);
        }
        if self.return_pending {
            let _ = fences.push(self.return_fence);
        }
        if fences.is_empty() {
            return true;
        }
        // SAFETY: the fences belong to this device and were submitted.
        match unsafe { self.parts.ctx.ash_device().wait_for_fences(&fences, true, DROP_TIMEOUT_NS) } {
            Ok(()) => true,
            Err(vk::Result::TIMEOUT) => false,
            Err(e) => {
                // Device loss: nothing will execute any more, so destroying is allowed.
                log::warn!("waiting for a producer's frames failed: {e}");
                true
            }
        }
    }
}

impl Drop for FrameProducer {
    fn drop(&mut self) {
        if !self.quiesce() {
            log::error!(
                "a Vulkan frame is still waiting for CUDA after {} s (was the CUDA signal for frame \
                 {} never enqueued?); leaking the producer's Vulkan objects instead of destroying \
                 objects the GPU may still use",
                DROP_TIMEOUT_NS / 1_000_000_000,
                self.current.frame
            );
            return;
        }
        let d = self.parts.ctx.ash_device();
        // SAFETY: VUID-vkDestroyFence-fence-01120 / VUID-vkDestroyCommandPool-commandPool-00041:
        // every submission of this producer completed (quiesce), so neither the fences nor the
        // pool's command buffers are in use. Null handles (a failed constructor) are ignored.
        unsafe {
            d.destroy_fence(self.produce_fence, None);
            d.destroy_fence(self.return_fence, None);
            d.destroy_command_pool(self.pool, None);
        }
        // SAFETY: `parts` is dropped exactly once, here, after the GPU finished with it; it is not
        // used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.parts) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_spread_from_start_to_end() {
        let r = regions_for(1000, Readback::Windows { count: 3, len: 100 }).unwrap();
        assert_eq!(r.as_slice(), &[(0, 100), (448, 100), (900, 100)]);
        let one = regions_for(1000, Readback::Windows { count: 1, len: 10 }).unwrap();
        assert_eq!(one.as_slice(), &[(0, 10)]);
        assert_eq!(regions_for(64, Readback::Full).unwrap().as_slice(), &[(0, 64)]);
        assert!(regions_for(64, Readback::None).unwrap().is_empty());
        for (readback, field) in [
            (Readback::Windows { count: 0, len: 1 }, "readback.count"),
            (Readback::Windows { count: 17, len: 1 }, "readback.count"),
            (Readback::Windows { count: 2, len: 65 }, "readback.len"),
            (Readback::Windows { count: 2, len: 0 }, "readback.len"),
        ] {
            match regions_for(64, readback) {
                Err(crate::Error::InvalidArgument { name, .. }) => assert_eq!(name, field, "{readback:?}"),
                other => panic!("{readback:?}: expected InvalidArgument naming {field}, got {other:?}"),
            }
        }
    }
}
