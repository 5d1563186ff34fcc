//! Exportable buffers (dedicated `OPAQUE_FD` allocations) and their CUDA imports, plus the
//! crate-internal host-visible and device-local helper buffers.

use super::context::{vk_err, VulkanContext};
use crate::cuda::{CudaDevice, ExternalMemory, MappedBuffer, ReadWrite};
use crate::error::{invalid, Error, Result};
use ash::vk;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Arc;

pub(crate) const OPAQUE_FD: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;

/// Where a dedicated allocation is bound.
pub(crate) enum Dedicated {
    Buffer(vk::Buffer),
    Image(vk::Image),
}

/// Allocates dedicated, `OPAQUE_FD`-exportable device memory for `reqs`.
pub(crate) fn alloc_exportable(
    ctx: &VulkanContext,
    reqs: &vk::MemoryRequirements,
    target: Dedicated,
) -> Result<vk::DeviceMemory> {
    let index = ctx.memory_type(
        reqs.memory_type_bits,
        vk::MemoryPropertyFlags::DEVICE_LOCAL,
        vk::MemoryPropertyFlags::empty(),
    )?;
    let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(OPAQUE_FD);
    let mut dedicated = match target {
        Dedicated::Buffer(b) => vk::MemoryDedicatedAllocateInfo::default().buffer(b),
        Dedicated::Image(i) => vk::MemoryDedicatedAllocateInfo::default().image(i),
    };
    let info = vk::MemoryAllocateInfo::default()
        .allocation_size(reqs.size)
        .memory_type_index(index)
        .push_next(&mut export)
        .push_next(&mut dedicated);
    // SAFETY: VUID-VkMemoryAllocateInfo-pNext-00639: the export handle type was reported as
    // exportable for this resource (checked by the caller with
    // vkGetPhysicalDeviceExternal{Buffer,Image}Properties); VUID-VkMemoryDedicatedAllocateInfo-
    // buffer-02965/image-02964: allocationSize equals the resource's memory requirements and
    // exactly one of buffer/image is set; the memory type index comes from its memoryTypeBits.
    unsafe { ctx.ash_device().allocate_memory(&info, None) }.map_err(vk_err("vkAllocateMemory"))
}

/// Exports `memory` (allocated with `OPAQUE_FD` export) as a new fd.
pub(crate) fn export_memory_fd(ctx: &VulkanContext, memory: vk::DeviceMemory) -> Result<OwnedFd> {
    let info = vk::MemoryGetFdInfoKHR::default().memory(memory).handle_type(OPAQUE_FD);
    // SAFETY: VUID-VkMemoryGetFdInfoKHR-handleType-00671: OPAQUE_FD was included in
    // VkExportMemoryAllocateInfo::handleTypes when `memory` was allocated; the extension is
    // enabled on every context.
    let fd = unsafe { ctx.ext_memory_fd().get_memory_fd(&info) }.map_err(vk_err("vkGetMemoryFdKHR"))?;
    if fd < 0 {
        return Err(Error::Vulkan { function: "vkGetMemoryFdKHR", code: vk::Result::ERROR_UNKNOWN.as_raw() });
    }
    // SAFETY: vkGetMemoryFdKHR creates a new file descriptor owned by the application.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A `VK_BUFFER_USAGE_TRANSFER_SRC|DST` buffer whose device memory can be exported as an
/// `OPAQUE_FD` and imported into CUDA.
///
/// The memory is a dedicated allocation (`VkMemoryDedicatedAllocateInfo`), so the CUDA import
/// must say so (`CUDA_EXTERNAL_MEMORY_DEDICATED`); [`import_into_cuda`](Self::import_into_cuda)
/// does. The buffer uses `VK_SHARING_MODE_EXCLUSIVE`: hand it to CUDA with a queue-family
/// release to `VK_QUEUE_FAMILY_EXTERNAL` and take it back with an acquire (the
/// [`FrameProducer`](super::FrameProducer) does both).
pub struct ExportableBuffer {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
    allocation_size: u64,
    ctx: Arc<VulkanContext>,
}

impl std::fmt::Debug for ExportableBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportableBuffer")
            .field("size", &self.size)
            .field("allocation_size", &self.allocation_size)
            .finish()
    }
}

impl ExportableBuffer {
    /// Creates a buffer of `size` bytes with `usage` (transfer source and destination are always
    /// added) in dedicated, exportable, device-local memory.
    pub fn new(ctx: &Arc<VulkanContext>, size: u64, usage: vk::BufferUsageFlags) -> Result<Arc<Self>> {
        if size == 0 {
            return Err(invalid("size", "a buffer of 0 bytes"));
        }
        let usage = usage | vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
        let query = vk::PhysicalDeviceExternalBufferInfo::default().usage(usage).handle_type(OPAQUE_FD);
        let mut props = vk::ExternalBufferProperties::default();
        // SAFETY: Vulkan 1.1 core query on the context's physical device with a valid
        // VkPhysicalDeviceExternalBufferInfo (VUID-VkPhysicalDeviceExternalBufferInfo-handleType-parameter).
        unsafe {
            ctx.ash_instance().get_physical_device_external_buffer_properties(
                ctx.physical_device(),
                &query,
                &mut props,
            )
        };
        let features = props.external_memory_properties.external_memory_features;
        if !features.contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE) {
            return Err(Error::Unsupported {
                what: "exporting Vulkan buffer memory as an opaque fd",
                reason: "the device does not report OPAQUE_FD as exportable for this buffer usage",
            });
        }
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(OPAQUE_FD);
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        let d = ctx.ash_device();
        // SAFETY: VUID-VkBufferCreateInfo-size-00912: size > 0 (checked);
        // VUID-VkBufferCreateInfo-pNext-00920: OPAQUE_FD is supported for this usage (checked
        // above).
        let buffer = unsafe { d.create_buffer(&info, None) }.map_err(vk_err("vkCreateBuffer"))?;
        let mut me =
            Self { buffer, memory: vk::DeviceMemory::null(), size, allocation_size: 0, ctx: ctx.clone() };
        // SAFETY: `buffer` is a valid buffer of this device.
        let reqs = unsafe { d.get_buffer_memory_requirements(buffer) };
        me.memory = alloc_exportable(ctx, &reqs, Dedicated::Buffer(buffer))?;
        me.allocation_size = reqs.size;
        // SAFETY: VUID-vkBindBufferMemory-buffer-07459: not yet bound; -memory-01508: the
        // dedicated allocation names this buffer and memoryOffset is 0.
        unsafe { d.bind_buffer_memory(buffer, me.memory, 0) }.map_err(vk_err("vkBindBufferMemory"))?;
        Ok(Arc::new(me))
    }

    /// Exports the memory as a new `OPAQUE_FD` (each call gives a new descriptor that holds a
    /// reference to the allocation).
    pub fn export_fd(&self) -> Result<OwnedFd> {
        export_memory_fd(&self.ctx, self.memory)
    }

    /// Buffer size in bytes (what was asked for).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Size of the dedicated allocation (`VkMemoryRequirements::size`): the size to import.
    pub fn allocation_size(&self) -> u64 {
        self.allocation_size
    }

    /// The buffer handle (for recording one's own commands).
    pub fn raw(&self) -> vk::Buffer {
        self.buffer
    }

    /// The context the buffer belongs to.
    pub fn context(&self) -> &Arc<VulkanContext> {
        &self.ctx
    }

    /// Imports the memory into CUDA (opaque fd, dedicated) and maps the buffer's bytes.
    ///
    /// `cuda` must be the same GPU as the Vulkan device (same UUID); the result keeps this
    /// buffer alive and unmaps and releases the import before it.
    pub fn import_into_cuda(self: &Arc<Self>, cuda: &CudaDevice) -> Result<CudaImportedBuffer> {
        check_same_gpu(&self.ctx, cuda)?;
        let memory =
            ExternalMemory::<ReadWrite>::from_opaque_fd(cuda, self.export_fd()?, self.allocation_size, true)?;
        let mapped = memory.map_buffer(0, self.size)?;
        Ok(CudaImportedBuffer { mapped, memory, vulkan: self.clone() })
    }
}

pub(crate) fn check_same_gpu(ctx: &VulkanContext, cuda: &CudaDevice) -> Result<()> {
    if cuda.gpu_id() != ctx.uuid() {
        return Err(invalid(
            "cuda",
            format!(
                "CUDA device {} is not the Vulkan device {} ({})",
                super::context::uuid_string(&cuda.gpu_id().0),
                ctx.info().uuid_string(),
                ctx.info().name
            ),
        ));
    }
    Ok(())
}

impl Drop for ExportableBuffer {
    fn drop(&mut self) {
        let d = self.ctx.ash_device();
        // SAFETY: VUID-vkDestroyBuffer-buffer-00922 / VUID-vkFreeMemory-memory-00677: every
        // submission of this module that uses the buffer has completed before its owner let go
        // (one-shot submissions wait for their fence; a FrameProducer holds an Arc of the buffer
        // and waits for its frames when dropped). CUDA imports hold their own reference to the
        // exported payload. Null handles (a failed `new`) are ignored by both calls.
        unsafe {
            d.destroy_buffer(self.buffer, None);
            d.free_memory(self.memory, None);
        }
    }
}

/// A Vulkan buffer imported into CUDA and mapped as linear device memory.
///
/// Field order is the teardown order: the CUDA mapping, then the CUDA import, then (last
/// reference permitting) the Vulkan buffer and its memory.
pub struct CudaImportedBuffer {
    mapped: MappedBuffer<ReadWrite>,
    memory: ExternalMemory<ReadWrite>,
    vulkan: Arc<ExportableBuffer>,
}

impl std::fmt::Debug for CudaImportedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaImportedBuffer")
            .field("mapped", &self.mapped)
            .field("vulkan", &self.vulkan)
            .finish()
    }
}

impl CudaImportedBuffer {
    /// The CUDA device address of the buffer's first byte.
    pub fn device_address(&self) -> u64 {
        self.mapped.device_address()
    }

    /// The CUDA mapping (a cudarc `DevicePtr`/`DevicePtrMut`).
    pub fn mapped(&self) -> &MappedBuffer<ReadWrite> {
        &self.mapped
    }

    /// The CUDA mapping, mutably (for cudarc copies into it).
    pub fn mapped_mut(&mut self) -> &mut MappedBuffer<ReadWrite> {
        &mut self.mapped
    }

    /// The CUDA import the mapping belongs to.
    pub fn memory(&self) -> &ExternalMemory<ReadWrite> {
        &self.memory
    }

    /// The Vulkan buffer.
    pub fn vulkan(&self) -> &Arc<ExportableBuffer> {
        &self.vulkan
    }
}

/// A non-exported buffer with its own memory; host-visible ones stay mapped.
pub(crate) struct RawBuffer {
    pub(crate) buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    ptr: *mut u8,
    pub(crate) size: u64,
    ctx: Arc<VulkanContext>,
}

// SAFETY: the mapped pointer is only dereferenced through `&self`/`&mut self` methods, so Rust's
// borrow rules serialise host access; the Vulkan handles are plain identifiers.
unsafe impl Send for RawBuffer {}
// SAFETY: shared access only reads through the mapping (`bytes`).
unsafe impl Sync for RawBuffer {}

impl RawBuffer {
    /// Host-visible, host-coherent memory, persistently mapped (`cached` prefers
    /// HOST_CACHED, for reading back).
    pub(crate) fn host(
        ctx: &Arc<VulkanContext>,
        size: u64,
        usage: vk::BufferUsageFlags,
        cached: bool,
    ) -> Result<Self> {
        let preferred =
            if cached { vk::MemoryPropertyFlags::HOST_CACHED } else { vk::MemoryPropertyFlags::empty() };
        Self::create(
            ctx,
            size,
            usage,
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
            preferred,
            true,
        )
    }

    /// Device-local memory, not mapped.
    pub(crate) fn device_local(
        ctx: &Arc<VulkanContext>,
        size: u64,
        usage: vk::BufferUsageFlags,
    ) -> Result<Self> {
        Self::create(
            ctx,
            size,
            usage,
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
            vk::MemoryPropertyFlags::empty(),
            false,
        )
    }

    fn create(
        ctx: &Arc<VulkanContext>,
        size: u64,
        usage: vk::BufferUsageFlags,
        required: vk::MemoryPropertyFlags,
        preferred: vk::MemoryPropertyFlags,
        map: bool,
    ) -> Result<Self> {
        if size == 0 {
            return Err(invalid("size", "a buffer of 0 bytes"));
        }
        let d = ctx.ash_device();
        let info =
            vk::BufferCreateInfo::default().size(size).usage(usage).sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: VUID-VkBufferCreateInfo-size-00912: size > 0.
        let buffer = unsafe { d.create_buffer(&info, None) }.map_err(vk_err("vkCreateBuffer"))?;
        let mut me = Self {
            buffer,
            memory: vk::DeviceMemory::null(),
            ptr: core::ptr::null_mut(),
            size,
            ctx: ctx.clone(),
        };
        // SAFETY: `buffer` is a valid buffer of this device.
        let reqs = unsafe { d.get_buffer_memory_requirements(buffer) };
        let index = ctx.memory_type(reqs.memory_type_bits, required, preferred)?;
        let alloc = vk::MemoryAllocateInfo::default().allocation_size(reqs.size).memory_type_index(index);
        // SAFETY: VUID-vkAllocateMemory-pAllocateInfo-01714: the index is below memoryTypeCount
        // and allowed by the buffer's memoryTypeBits.
        me.memory = unsafe { d.allocate_memory(&alloc, None) }.map_err(vk_err("vkAllocateMemory"))?;
        // SAFETY: VUID-vkBindBufferMemory-buffer-07459: not yet bound; offset 0 satisfies the
        // alignment; the type comes from memoryTypeBits.
        unsafe { d.bind_buffer_memory(buffer, me.memory, 0) }.map_err(vk_err("vkBindBufferMemory"))?;
        if map {
            // SAFETY: VUID-vkMapMemory-memory-00678: HOST_VISIBLE memory (required above), not
            // yet mapped; the whole allocation is mapped.
            let p = unsafe { d.map_memory(me.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
                .map_err(vk_err("vkMapMemory"))?;
            me.ptr = p.cast();
        }
        Ok(me)
    }

    /// The mapped bytes (empty for device-local buffers).
    pub(crate) fn bytes(&self) -> &[u8] {
        if self.ptr.is_null() {
            return &[];
        }
        // SAFETY: the mapping covers at least `size` bytes (the allocation is at least the
        // buffer's size) and stays valid while the memory lives; callers only read while no
        // submitted command writes the buffer (they wait for the producing submission first).
        unsafe { core::slice::from_raw_parts(self.ptr, self.size as usize) }
    }

    /// The mapped bytes, writable (empty for device-local buffers).
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        if self.ptr.is_null() {
            return &mut [];
        }
        // SAFETY: as in `bytes`; `&mut self` makes this the only host view, and callers only
        // write while no submitted command reads the buffer.
        unsafe { core::slice::from_raw_parts_mut(self.ptr, self.size as usize) }
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        let d = self.ctx.ash_device();
        // SAFETY: VUID-vkDestroyBuffer-buffer-00922 / VUID-vkFreeMemory-memory-00677: owners
        // drop these buffers only after the submissions using them completed (one-shot waits, or
        // the producer's fences). Freeing mapped memory unmaps it implicitly.
        unsafe {
            d.destroy_buffer(self.buffer, None);
            d.free_memory(self.memory, None);
        }
    }
}
