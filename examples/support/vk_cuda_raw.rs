//! The smallest raw reproduction of the chained Vulkan -> CUDA -> Vulkan hand-off, written with
//! ash and the CUDA driver API directly (no `nvsci` type on the per-frame path): the floor that
//! `vulkan_cuda_bench` compares the crate's hand-off against, in the same process.
//!
//! Setup borrows the Vulkan instance, device and queue of a [`VulkanContext`]; everything else
//! (exportable buffer and timeline semaphore, command buffers, the CUDA imports, the submits and
//! waits) is made here with raw calls. Per frame, exactly the GPU work of the crate's
//! `FrameProducer` + `CudaHandoff`:
//!
//! 1. Vulkan: copy a device-local source into the exported buffer, release it to
//!    `VK_QUEUE_FAMILY_EXTERNAL`, signal timeline value `3k + 1`;
//! 2. CUDA: `cuWaitExternalSemaphoresAsync(3k + 1)`, the XOR kernel,
//!    `cuSignalExternalSemaphoresAsync(3k + 2)`;
//! 3. Vulkan: wait for `3k + 2`, acquire the buffer, copy 8 windows of 4 KiB to host-visible
//!    memory, signal `3k + 3` and a fence;
//! 4. the host waits for the fence.
//!
//! Relayed variants put a host wait between the steps, each with a different host-side call, to
//! find which host wait is slow.
#![allow(dead_code)]

use nvsci::cuda::cudarc::driver::{sys, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use nvsci::cuda::CudaGpu;
use nvsci::vulkan::ash::{self, vk};
use nvsci::vulkan::VulkanContext;
use std::sync::Arc;
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const TIMEOUT_NS: u64 = 10_000_000_000;

/// How the host sits between the steps of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relay {
    /// No host wait between the steps: the Vulkan queue and the CUDA stream wait on each
    /// other's timeline values.
    None,
    /// `vkWaitSemaphores` for the Vulkan-signalled value and for the CUDA-signalled value.
    VkWaitSemaphores,
    /// `vkWaitSemaphores` for the Vulkan-signalled value, `cuStreamSynchronize` for CUDA's.
    CudaSync,
    /// Spinning on `vkGetSemaphoreCounterValue` for both values.
    CounterSpin,
}

fn cu(what: &'static str, r: sys::CUresult) -> Res<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {r:?}").into())
    }
}

fn vkr(what: &'static str) -> impl FnOnce(vk::Result) -> Box<dyn std::error::Error> {
    move |e| format!("{what}: {e}").into()
}

struct RawBuffer {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
}

/// The raw chain: its own buffers, timeline semaphore, command buffers and CUDA imports.
pub struct RawChain {
    ctx: Arc<VulkanContext>,
    dev: CudaGpu,
    source: RawBuffer,
    target: RawBuffer,
    readback: RawBuffer,
    readback_ptr: *const u8,
    regions: Vec<(u64, u64)>,
    timeline: vk::Semaphore,
    pool: vk::CommandPool,
    produce_cmd: vk::CommandBuffer,
    return_cmd: vk::CommandBuffer,
    fence: vk::Fence,
    ext_mem: sys::CUexternalMemory,
    cuda_ptr: sys::CUdeviceptr,
    ext_sem: sys::CUexternalSemaphore,
    bytes: u64,
    frame: u64,
    /// Host-wait times of relayed frames: Vulkan-signalled value, CUDA-signalled value.
    pub relay_waits: [Vec<Duration>; 2],
}

fn memory_type(ctx: &VulkanContext, bits: u32, flags: vk::MemoryPropertyFlags) -> Res<u32> {
    // SAFETY: the physical device belongs to the context's instance.
    let props = unsafe { ctx.ash_instance().get_physical_device_memory_properties(ctx.physical_device()) };
    (0..props.memory_type_count)
        .find(|&i| bits & (1 << i) != 0 && props.memory_types[i as usize].property_flags.contains(flags))
        .ok_or_else(|| "no suitable memory type".into())
}

fn make_buffer(
    ctx: &VulkanContext,
    size: u64,
    usage: vk::BufferUsageFlags,
    flags: vk::MemoryPropertyFlags,
    export: bool,
) -> Res<RawBuffer> {
    let d = ctx.ash_device();
    let mut ext = vk::ExternalMemoryBufferCreateInfo::default()
        .handle_types(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
    let mut info = vk::BufferCreateInfo::default().size(size).usage(usage);
    if export {
        info = info.push_next(&mut ext);
    }
    // SAFETY: a valid create info with a non-zero size.
    let buffer = unsafe { d.create_buffer(&info, None) }.map_err(vkr("vkCreateBuffer"))?;
    // SAFETY: the buffer was created above on this device.
    let reqs = unsafe { d.get_buffer_memory_requirements(buffer) };
    let index = memory_type(ctx, reqs.memory_type_bits, flags)?;
    let mut export_info =
        vk::ExportMemoryAllocateInfo::default().handle_types(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
    let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
    let mut alloc = vk::MemoryAllocateInfo::default().allocation_size(reqs.size).memory_type_index(index);
    if export {
        alloc = alloc.push_next(&mut export_info).push_next(&mut dedicated);
    }
    // SAFETY: the type index comes from the buffer's requirements; the dedicated info names the
    // buffer the memory is bound to below.
    let memory = unsafe { d.allocate_memory(&alloc, None) }.map_err(vkr("vkAllocateMemory"))?;
    // SAFETY: unbound buffer, fresh memory of its requirements' size, offset 0.
    unsafe { d.bind_buffer_memory(buffer, memory, 0) }.map_err(vkr("vkBindBufferMemory"))?;
    Ok(RawBuffer { buffer, memory, size: reqs.size })
}

impl RawChain {
    /// Builds the chain for frames of `source.len()` bytes on `ctx`'s device and `dev`.
    pub fn new(ctx: &Arc<VulkanContext>, dev: &CudaGpu, source_bytes: &[u8]) -> Res<Self> {
        let d = ctx.ash_device();
        let size = source_bytes.len() as u64;
        let copy = vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let local = vk::MemoryPropertyFlags::DEVICE_LOCAL;
        let source = make_buffer(ctx, size, copy, local, false)?;
        let target = make_buffer(ctx, size, copy, local, true)?;
        let staging = make_buffer(ctx, size, copy, host, false)?;
        let len = 4096u64;
        let regions: Vec<(u64, u64)> = (0..8u64).map(|k| (((size - len) * k / 7) & !3, len)).collect();
        let readback = make_buffer(ctx, len * 8, copy, host, false)?;
        // SAFETY: host-visible memory of at least `size` / `len * 8` bytes, mapped whole, not
        // mapped elsewhere.
        let (staging_ptr, readback_ptr) = unsafe {
            (
                d.map_memory(staging.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                    .map_err(vkr("vkMapMemory"))?,
                d.map_memory(readback.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                    .map_err(vkr("vkMapMemory"))?,
            )
        };
        // SAFETY: the staging mapping holds at least `size` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(source_bytes.as_ptr(), staging_ptr.cast(), source_bytes.len())
        };

        let mut type_info = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let mut export = vk::ExportSemaphoreCreateInfo::default()
            .handle_types(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
        let sem_info = vk::SemaphoreCreateInfo::default().push_next(&mut type_info).push_next(&mut export);
        // SAFETY: a timeline semaphore exportable as an opaque fd (the context enabled the
        // extensions).
        let timeline = unsafe { d.create_semaphore(&sem_info, None) }.map_err(vkr("vkCreateSemaphore"))?;

        let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(ctx.queue_family());
        // SAFETY: the family exists on the device.
        let pool = unsafe { d.create_command_pool(&pool_info, None) }.map_err(vkr("vkCreateCommandPool"))?;
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(3);
        // SAFETY: the pool belongs to the device.
        let cmds = unsafe { d.allocate_command_buffers(&alloc) }.map_err(vkr("vkAllocateCommandBuffers"))?;
        let (upload_cmd, produce_cmd, return_cmd) = (cmds[0], cmds[1], cmds[2]);
        // SAFETY: a default fence on the device.
        let fence =
            unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) }.map_err(vkr("vkCreateFence"))?;

        let family = ctx.queue_family();
        let whole = [vk::BufferCopy { src_offset: 0, dst_offset: 0, size }];
        let begin = vk::CommandBufferBeginInfo::default();
        let release = [vk::BufferMemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
            .src_queue_family_index(family)
            .dst_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)
            .buffer(target.buffer)
            .size(vk::WHOLE_SIZE)];
        let acquire = [vk::BufferMemoryBarrier::default()
            .dst_access_mask(vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE)
            .src_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)
            .dst_queue_family_index(family)
            .buffer(target.buffer)
            .size(vk::WHOLE_SIZE)];
        let to_host = [vk::BufferMemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ)
            .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .buffer(readback.buffer)
            .size(vk::WHOLE_SIZE)];
        let windows: Vec<vk::BufferCopy> = regions
            .iter()
            .enumerate()
            .map(|(i, &(off, len))| vk::BufferCopy { src_offset: off, dst_offset: i as u64 * len, size: len })
            .collect();
        let stage = vk::PipelineStageFlags::TRANSFER;
        // SAFETY: fresh command buffers of this device; every copy lies inside both buffers,
        // which carry TRANSFER_SRC | TRANSFER_DST; the release/acquire pair names this family
        // and VK_QUEUE_FAMILY_EXTERNAL for an EXCLUSIVE buffer.
        unsafe {
            d.begin_command_buffer(upload_cmd, &begin).map_err(vkr("vkBeginCommandBuffer"))?;
            d.cmd_copy_buffer(upload_cmd, staging.buffer, source.buffer, &whole);
            d.end_command_buffer(upload_cmd).map_err(vkr("vkEndCommandBuffer"))?;

            d.begin_command_buffer(produce_cmd, &begin).map_err(vkr("vkBeginCommandBuffer"))?;
            d.cmd_copy_buffer(produce_cmd, source.buffer, target.buffer, &whole);
            d.cmd_pipeline_barrier(
                produce_cmd,
                stage,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                vk::DependencyFlags::empty(),
                &[],
                &release,
                &[],
            );
            d.end_command_buffer(produce_cmd).map_err(vkr("vkEndCommandBuffer"))?;

            d.begin_command_buffer(return_cmd, &begin).map_err(vkr("vkBeginCommandBuffer"))?;
            d.cmd_pipeline_barrier(
                return_cmd,
                stage,
                stage,
                vk::DependencyFlags::empty(),
                &[],
                &acquire,
                &[],
            );
            d.cmd_copy_buffer(return_cmd, target.buffer, readback.buffer, &windows);
            d.cmd_pipeline_barrier(
                return_cmd,
                stage,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &[],
                &to_host,
                &[],
            );
            d.end_command_buffer(return_cmd).map_err(vkr("vkEndCommandBuffer"))?;

            let cmds = [upload_cmd];
            let submit = vk::SubmitInfo::default().command_buffers(&cmds);
            let q = ctx.lock_queue();
            d.queue_submit(*q, &[submit], fence).map_err(vkr("vkQueueSubmit"))?;
            drop(q);
            d.wait_for_fences(&[fence], true, TIMEOUT_NS).map_err(vkr("vkWaitForFences"))?;
            d.reset_fences(&[fence]).map_err(vkr("vkResetFences"))?;
            d.unmap_memory(staging.memory);
            d.destroy_buffer(staging.buffer, None);
            d.free_memory(staging.memory, None);
        }

        // CUDA imports of the buffer and the timeline semaphore.
        let mem_fd_ext = ash::khr::external_memory_fd::Device::new(ctx.ash_instance(), d);
        let sem_fd_ext = ash::khr::external_semaphore_fd::Device::new(ctx.ash_instance(), d);
        let mem_info = vk::MemoryGetFdInfoKHR::default()
            .memory(target.memory)
            .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
        // SAFETY: the memory was allocated exportable as an opaque fd.
        let mem_fd = unsafe { mem_fd_ext.get_memory_fd(&mem_info) }.map_err(vkr("vkGetMemoryFdKHR"))?;
        let sem_info = vk::SemaphoreGetFdInfoKHR::default()
            .semaphore(timeline)
            .handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
        // SAFETY: the semaphore was created exportable as an opaque fd.
        let sem_fd = unsafe { sem_fd_ext.get_semaphore_fd(&sem_info) }.map_err(vkr("vkGetSemaphoreFdKHR"))?;
        dev.context().bind_to_thread()?;
        let mem_desc = nvsci::cuda::opaque_fd_memory_desc(mem_fd, target.size, true);
        let mut ext_mem = std::ptr::null_mut();
        // SAFETY: a complete descriptor; on success CUDA owns the fd.
        cu("cuImportExternalMemory", unsafe { sys::cuImportExternalMemory(&mut ext_mem, &mem_desc) })?;
        let buf_desc = nvsci::cuda::buffer_desc(0, size);
        let mut cuda_ptr = 0;
        // SAFETY: the range lies inside the imported allocation.
        cu("cuExternalMemoryGetMappedBuffer", unsafe {
            sys::cuExternalMemoryGetMappedBuffer(&mut cuda_ptr, ext_mem, &buf_desc)
        })?;
        let sem_desc = nvsci::cuda::fd_semaphore_desc(sem_fd, true);
        let mut ext_sem = std::ptr::null_mut();
        // SAFETY: a complete descriptor; on success CUDA owns the fd.
        cu("cuImportExternalSemaphore", unsafe { sys::cuImportExternalSemaphore(&mut ext_sem, &sem_desc) })?;

        Ok(Self {
            ctx: ctx.clone(),
            dev: dev.clone(),
            source,
            target,
            readback,
            readback_ptr: readback_ptr.cast(),
            regions,
            timeline,
            pool,
            produce_cmd,
            return_cmd,
            fence,
            ext_mem,
            cuda_ptr,
            ext_sem,
            bytes: size,
            frame: 0,
            relay_waits: Default::default(),
        })
    }

    /// `(offset, length)` of each readback window.
    pub fn regions(&self) -> &[(u64, u64)] {
        &self.regions
    }

    /// The readback windows of the last frame, back to back.
    pub fn readback(&self) -> &[u8] {
        // SAFETY: the mapping holds 8 windows and stays mapped while `self` lives; the last
        // frame's fence was waited, so no copy is writing it.
        unsafe { std::slice::from_raw_parts(self.readback_ptr, self.regions.len() * 4096) }
    }

    fn host_wait(&self, value: u64) -> Res<()> {
        let sems = [self.timeline];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&sems).values(&values);
        // SAFETY: a timeline semaphore of this device, one value.
        unsafe { self.ctx.ash_device().wait_semaphores(&info, TIMEOUT_NS) }
            .map_err(vkr("vkWaitSemaphores"))?;
        Ok(())
    }

    fn spin(&self, value: u64) -> Res<()> {
        let t0 = Instant::now();
        loop {
            // SAFETY: a timeline semaphore of this device.
            let v = unsafe { self.ctx.ash_device().get_semaphore_counter_value(self.timeline) }
                .map_err(vkr("vkGetSemaphoreCounterValue"))?;
            if v >= value {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err("timeline value not reached in 10 s".into());
            }
            std::hint::spin_loop();
        }
    }

    /// One frame through the chain with XOR `key`, the host relaying as `relay` says.
    pub fn frame(&mut self, stream: &Arc<CudaStream>, xor: &CudaFunction, key: u32, relay: Relay) -> Res<()> {
        let d = self.ctx.ash_device();
        let base = self.frame * 3;
        let (produced, cuda_done, returned) = (base + 1, base + 2, base + 3);
        {
            let cmds = [self.produce_cmd];
            let sems = [self.timeline];
            let values = [produced];
            let mut tl = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&values);
            let submit =
                vk::SubmitInfo::default().command_buffers(&cmds).signal_semaphores(&sems).push_next(&mut tl);
            let q = self.ctx.lock_queue();
            // SAFETY: the command buffer is executable and not pending (the previous frame's
            // fence was waited); the value exceeds every earlier signal.
            unsafe { d.queue_submit(*q, &[submit], vk::Fence::null()) }.map_err(vkr("vkQueueSubmit"))?;
        }
        let t = Instant::now();
        match relay {
            Relay::None => {}
            Relay::VkWaitSemaphores | Relay::CudaSync => self.host_wait(produced)?,
            Relay::CounterSpin => self.spin(produced)?,
        }
        if relay != Relay::None {
            self.relay_waits[0].push(t.elapsed());
        }
        self.dev.context().bind_to_thread()?;
        let wait = nvsci::cuda::wait_params(std::ptr::null(), produced, false);
        // SAFETY: the semaphore and parameters are alive for the call.
        cu("cuWaitExternalSemaphoresAsync", unsafe {
            sys::cuWaitExternalSemaphoresAsync(&self.ext_sem, &wait, 1, stream.cu_stream())
        })?;
        let words = self.bytes / 4;
        let mut b = stream.launch_builder(xor);
        b.arg(&self.cuda_ptr).arg(&words).arg(&key);
        let cfg = LaunchConfig {
            grid_dim: (words.div_ceil(256) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the kernel touches `words` words of the mapped buffer, which holds them.
        unsafe { b.launch(cfg) }?;
        let signal = nvsci::cuda::signal_params(std::ptr::null_mut(), cuda_done, false);
        // SAFETY: the semaphore and parameters are alive for the call.
        cu("cuSignalExternalSemaphoresAsync", unsafe {
            sys::cuSignalExternalSemaphoresAsync(&self.ext_sem, &signal, 1, stream.cu_stream())
        })?;
        let t = Instant::now();
        match relay {
            Relay::None => {}
            Relay::VkWaitSemaphores => self.host_wait(cuda_done)?,
            Relay::CudaSync => stream.synchronize()?,
            Relay::CounterSpin => self.spin(cuda_done)?,
        }
        if relay != Relay::None {
            self.relay_waits[1].push(t.elapsed());
        }
        {
            let cmds = [self.return_cmd];
            let sems = [self.timeline];
            let wait_values = [cuda_done];
            let signal_values = [returned];
            let stages = [vk::PipelineStageFlags::TRANSFER];
            let mut tl = vk::TimelineSemaphoreSubmitInfo::default()
                .wait_semaphore_values(&wait_values)
                .signal_semaphore_values(&signal_values);
            let submit = vk::SubmitInfo::default()
                .wait_semaphores(&sems)
                .wait_dst_stage_mask(&stages)
                .command_buffers(&cmds)
                .signal_semaphores(&sems)
                .push_next(&mut tl);
            let q = self.ctx.lock_queue();
            // SAFETY: as for the produce submit; the wait value is signalled by the CUDA
            // stream (already enqueued).
            unsafe { d.queue_submit(*q, &[submit], self.fence) }.map_err(vkr("vkQueueSubmit"))?;
        }
        // SAFETY: the fence was submitted above.
        unsafe {
            d.wait_for_fences(&[self.fence], true, TIMEOUT_NS).map_err(vkr("vkWaitForFences"))?;
            d.reset_fences(&[self.fence]).map_err(vkr("vkResetFences"))?;
        }
        self.frame += 1;
        Ok(())
    }
}

impl Drop for RawChain {
    fn drop(&mut self) {
        let d = self.ctx.ash_device();
        let _ = self.dev.context().bind_to_thread();
        // SAFETY: every frame's fence was waited, so neither API has work on these objects;
        // CUDA's imports are destroyed before Vulkan frees what they refer to.
        unsafe {
            let _ = sys::cuCtxSynchronize();
            let _ = sys::cuDestroyExternalSemaphore(self.ext_sem);
            let _ = sys::cuMemFree_v2(self.cuda_ptr);
            let _ = sys::cuDestroyExternalMemory(self.ext_mem);
            let _ = d.device_wait_idle();
            d.destroy_fence(self.fence, None);
            d.destroy_command_pool(self.pool, None);
            d.destroy_semaphore(self.timeline, None);
            d.unmap_memory(self.readback.memory);
            for b in [&self.source, &self.target, &self.readback] {
                d.destroy_buffer(b.buffer, None);
                d.free_memory(b.memory, None);
            }
        }
    }
}

/// An exportable timeline semaphore starting at 0 and a CUDA import of it.
fn exported_timeline(ctx: &VulkanContext, dev: &CudaGpu) -> Res<(vk::Semaphore, sys::CUexternalSemaphore)> {
    let d = ctx.ash_device();
    let mut type_info =
        vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(0);
    let mut export = vk::ExportSemaphoreCreateInfo::default()
        .handle_types(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
    let info = vk::SemaphoreCreateInfo::default().push_next(&mut type_info).push_next(&mut export);
    // SAFETY: a timeline semaphore exportable as an opaque fd (the context enabled the extensions).
    let sem = unsafe { d.create_semaphore(&info, None) }.map_err(vkr("vkCreateSemaphore"))?;
    let ext = ash::khr::external_semaphore_fd::Device::new(ctx.ash_instance(), d);
    let fd_info = vk::SemaphoreGetFdInfoKHR::default()
        .semaphore(sem)
        .handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
    let imported = (|| -> Res<sys::CUexternalSemaphore> {
        // SAFETY: the semaphore was created exportable as an opaque fd.
        let fd = unsafe { ext.get_semaphore_fd(&fd_info) }.map_err(vkr("vkGetSemaphoreFdKHR"))?;
        dev.context().bind_to_thread()?;
        let desc = nvsci::cuda::fd_semaphore_desc(fd, true);
        let mut out = std::ptr::null_mut();
        // SAFETY: a complete descriptor; on success CUDA owns the fd.
        cu("cuImportExternalSemaphore", unsafe { sys::cuImportExternalSemaphore(&mut out, &desc) })?;
        Ok(out)
    })();
    match imported {
        Ok(s) => Ok((sem, s)),
        Err(err) => {
            // SAFETY: created above, never submitted.
            unsafe { d.destroy_semaphore(sem, None) };
            Err(err)
        }
    }
}

/// Enqueues a consumer's work on a stream, given the frame's device address.
pub type ConsumerKernel<'a> = dyn FnMut(&Arc<CudaStream>, u64) -> Result<(), String> + 'a;

/// The raw floor of a CPU camera presenting to a CUDA consumer through Vulkan objects (the
/// Vulkan backend's path for a CPU producer), with ash and the CUDA driver API only. Frame `n`:
///
/// 1. the host writes `n` into host-visible, host-coherent exported memory;
/// 2. a queue batch with no command buffers signals the present timeline to `n` (only a queue
///    submission makes host writes visible to the device: Vulkan spec, "Host Write Ordering
///    Guarantees"); with `wait_present`, the host then waits until the counter reads `n`;
/// 3. the CUDA stream waits for the present value (`cuWaitExternalSemaphoresAsync`), runs the
///    caller's kernel on the imported memory and signals `n` on the release timeline
///    (`cuSignalExternalSemaphoresAsync`);
/// 4. the host spins on `vkGetSemaphoreCounterValue` of the release timeline until it reads `n`.
pub struct RawCamera {
    ctx: Arc<VulkanContext>,
    dev: CudaGpu,
    stream: Arc<CudaStream>,
    buffer: RawBuffer,
    host: *mut u64,
    ext_mem: sys::CUexternalMemory,
    cuda_ptr: sys::CUdeviceptr,
    present: (vk::Semaphore, sys::CUexternalSemaphore),
    release: (vk::Semaphore, sys::CUexternalSemaphore),
    next: u64,
}

impl RawCamera {
    /// A camera frame of `bytes` bytes on `ctx`'s device, consumed by a new stream of `dev`.
    pub fn new(ctx: &Arc<VulkanContext>, dev: &CudaGpu, bytes: u64) -> Res<Self> {
        let d = ctx.ash_device();
        let host_flags = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let buffer = make_buffer(ctx, bytes, vk::BufferUsageFlags::TRANSFER_SRC, host_flags, true)?;
        // SAFETY: host-visible memory of at least `bytes` bytes, mapped whole, not mapped elsewhere.
        let host = unsafe { d.map_memory(buffer.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
            .map_err(vkr("vkMapMemory"))?
            .cast::<u64>();
        let mem_fd_ext = ash::khr::external_memory_fd::Device::new(ctx.ash_instance(), d);
        let mem_info = vk::MemoryGetFdInfoKHR::default()
            .memory(buffer.memory)
            .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
        // SAFETY: the memory was allocated exportable as an opaque fd.
        let mem_fd = unsafe { mem_fd_ext.get_memory_fd(&mem_info) }.map_err(vkr("vkGetMemoryFdKHR"))?;
        dev.context().bind_to_thread()?;
        let mem_desc = nvsci::cuda::opaque_fd_memory_desc(mem_fd, buffer.size, true);
        let mut ext_mem = std::ptr::null_mut();
        // SAFETY: a complete descriptor; on success CUDA owns the fd.
        cu("cuImportExternalMemory", unsafe { sys::cuImportExternalMemory(&mut ext_mem, &mem_desc) })?;
        let mut cuda_ptr = 0;
        let buf_desc = nvsci::cuda::buffer_desc(0, bytes);
        // SAFETY: the range lies inside the imported allocation.
        cu("cuExternalMemoryGetMappedBuffer", unsafe {
            sys::cuExternalMemoryGetMappedBuffer(&mut cuda_ptr, ext_mem, &buf_desc)
        })?;
        let present = exported_timeline(ctx, dev)?;
        let release = exported_timeline(ctx, dev)?;
        let stream = dev.context().new_stream()?;
        Ok(Self {
            ctx: ctx.clone(),
            dev: dev.clone(),
            stream,
            buffer,
            host,
            ext_mem,
            cuda_ptr,
            present,
            release,
            next: 1,
        })
    }

    /// The CUDA stream of the consumer side.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    fn spin(&self, sem: vk::Semaphore, value: u64, deadline: Instant) -> Res<()> {
        loop {
            // SAFETY: a timeline semaphore of this device.
            let v = unsafe { self.ctx.ash_device().get_semaphore_counter_value(sem) }
                .map_err(vkr("vkGetSemaphoreCounterValue"))?;
            if v >= value {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("timeline value {value} not reached in 10 s").into());
            }
            std::hint::spin_loop();
        }
    }

    /// One round trip; `kernel` enqueues the consumer's work on the stream, given the frame's
    /// device address. Returns its wall time in microseconds.
    pub fn frame(&mut self, wait_present: bool, kernel: &mut ConsumerKernel<'_>) -> Res<f64> {
        let n = self.next;
        self.next += 1;
        let t = Instant::now();
        let deadline = t + Duration::from_secs(10);
        // SAFETY: an aligned u64 at the start of the live mapping; the device reads it only after
        // the present value below.
        unsafe { self.host.write_volatile(n) };
        {
            let sems = [self.present.0];
            let values = [n];
            let mut tl = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&values);
            let submit = vk::SubmitInfo::default().signal_semaphores(&sems).push_next(&mut tl);
            let q = self.ctx.lock_queue();
            // SAFETY: a batch without command buffers; `n` exceeds every earlier signal of the
            // semaphore (the values count up from 1).
            unsafe { self.ctx.ash_device().queue_submit(*q, &[submit], vk::Fence::null()) }
                .map_err(vkr("vkQueueSubmit"))?;
        }
        if wait_present {
            self.spin(self.present.0, n, deadline)?;
        }
        self.dev.context().bind_to_thread()?;
        let wait = nvsci::cuda::wait_params(std::ptr::null(), n, false);
        // SAFETY: the semaphore and parameters are alive for the call.
        cu("cuWaitExternalSemaphoresAsync", unsafe {
            sys::cuWaitExternalSemaphoresAsync(&self.present.1, &wait, 1, self.stream.cu_stream())
        })?;
        kernel(&self.stream, self.cuda_ptr)?;
        let signal = nvsci::cuda::signal_params(std::ptr::null_mut(), n, false);
        // SAFETY: as above.
        cu("cuSignalExternalSemaphoresAsync", unsafe {
            sys::cuSignalExternalSemaphoresAsync(&self.release.1, &signal, 1, self.stream.cu_stream())
        })?;
        self.spin(self.release.0, n, deadline)?;
        Ok(t.elapsed().as_secs_f64() * 1e6)
    }
}

impl Drop for RawCamera {
    fn drop(&mut self) {
        let d = self.ctx.ash_device();
        let _ = self.dev.context().bind_to_thread();
        // SAFETY: after the synchronisations neither API has work on these objects (a present
        // value no batch signalled is signalled from the host first, so a stream wait still
        // queued after a failed frame passes); CUDA's imports are destroyed before Vulkan
        // destroys what they refer to.
        unsafe {
            let info = vk::SemaphoreSignalInfo::default().semaphore(self.present.0).value(u64::MAX >> 1);
            let _ = d.queue_wait_idle(*self.ctx.lock_queue());
            let _ = d.signal_semaphore(&info);
            let _ = self.stream.synchronize();
            let _ = sys::cuDestroyExternalSemaphore(self.present.1);
            let _ = sys::cuDestroyExternalSemaphore(self.release.1);
            let _ = sys::cuMemFree_v2(self.cuda_ptr);
            let _ = sys::cuDestroyExternalMemory(self.ext_mem);
            let _ = d.device_wait_idle();
            d.destroy_semaphore(self.present.0, None);
            d.destroy_semaphore(self.release.0, None);
            d.unmap_memory(self.buffer.memory);
            d.destroy_buffer(self.buffer.buffer, None);
            d.free_memory(self.buffer.memory, None);
        }
    }
}
