//! Exportable buffers (dedicated `OPAQUE_FD` allocations, device-local or host-visible) and their
//! CUDA imports, plus the crate-internal host-visible and device-local helper buffers.

use super::context::{vk_err, VulkanContext};
use crate::cuda::{CudaGpu, ExternalMemory, MappedBuffer, ReadWrite};
use crate::error::{invalid, Error, Result, VulkanError};
use ash::vk;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

pub(crate) const OPAQUE_FD: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;

/// Where a dedicated allocation is bound.
pub(crate) enum Dedicated {
    Buffer(vk::Buffer),
    Image(vk::Image),
}

/// Allocates dedicated, `OPAQUE_FD`-exportable device-local memory for `reqs`.
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
    alloc_exportable_in(ctx, reqs, index, target)
}

/// The memory type for a host-visible exportable allocation: one of `type_bits` (the memory
/// requirements of a resource created for `OPAQUE_FD` export, which name exactly the types it
/// can be bound to) that is `HOST_VISIBLE | HOST_COHERENT`. Preferred, in this order: not
/// `DEVICE_LOCAL` (a device-local host-visible heap is a PCI BAR window: small, and uncached for
/// CPU reads), then `HOST_CACHED` (a CPU consumer reads the frames in place). Ties go to the lower
/// index (the spec orders memory types by the implementation's preference).
pub(crate) fn host_visible_type(types: &[vk::MemoryType], type_bits: u32) -> Option<u32> {
    let required = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    let score = |f: vk::MemoryPropertyFlags| {
        2 * u8::from(!f.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL))
            + u8::from(f.contains(vk::MemoryPropertyFlags::HOST_CACHED))
    };
    types
        .iter()
        .enumerate()
        .filter(|&(i, t)| i < 32 && type_bits & (1 << i) != 0 && t.property_flags.contains(required))
        // max_by_key keeps the last maximum: iterate from the highest index so the lowest wins.
        .rev()
        .max_by_key(|(_, t)| score(t.property_flags))
        .map(|(i, _)| i as u32)
}

/// Allocates dedicated, `OPAQUE_FD`-exportable memory of type `index` for `reqs`.
fn alloc_exportable_in(
    ctx: &VulkanContext,
    reqs: &vk::MemoryRequirements,
    index: u32,
    target: Dedicated,
) -> Result<vk::DeviceMemory> {
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
        return Err(Error::Vulkan(VulkanError::Call {
            function: "vkGetMemoryFdKHR",
            code: vk::Result::ERROR_UNKNOWN.as_raw(),
        }));
    }
    // SAFETY: vkGetMemoryFdKHR creates a new file descriptor owned by the application.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Where the memory of an [`ExportableBuffer`] lives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryPlacement {
    /// Device-local memory: fastest for the GPU, no host access.
    #[default]
    DeviceLocal,
    /// Host-visible, host-coherent memory, persistently mapped: the CPU reads and writes the
    /// bytes in place ([`ExportableBuffer::host_slice`], [`ExportableBuffer::host_slice_mut`])
    /// and CUDA reaches the same bytes through the import (over PCIe on a discrete GPU).
    HostVisible,
}

/// A `VK_BUFFER_USAGE_TRANSFER_SRC|DST` buffer whose memory can be exported as an `OPAQUE_FD`
/// and imported into CUDA.
///
/// The memory is a dedicated allocation (`VkMemoryDedicatedAllocateInfo`), so the CUDA import
/// must say so (`CUDA_EXTERNAL_MEMORY_DEDICATED`); [`import_into_cuda`](Self::import_into_cuda)
/// does. The buffer uses `VK_SHARING_MODE_EXCLUSIVE`: when a Vulkan queue writes it, hand it to
/// CUDA with a queue-family release to `VK_QUEUE_FAMILY_EXTERNAL` and take it back with an
/// acquire (the [`FrameProducer`](super::FrameProducer) does both).
///
/// A [`MemoryPlacement::HostVisible`] buffer is also mapped for the host for its whole life.
pub struct ExportableBuffer {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
    allocation_size: u64,
    placement: MemoryPlacement,
    /// The host mapping of a host-visible buffer (null otherwise); only dereferenced through
    /// [`HostRead`] / [`HostWrite`], whose `borrow` flag serialises host access.
    mapped: *mut u8,
    /// Host borrows of the mapping: the number of [`HostRead`]s, or -1 while a [`HostWrite`]
    /// lives.
    borrow: AtomicIsize,
    ctx: Arc<VulkanContext>,
}

// SAFETY: the Vulkan handles are plain identifiers, used from `&self` only in commands without a
// host-synchronisation requirement on them (vkGetMemoryFdKHR) and destroyed in `Drop` (`&mut`).
// The mapped pointer is dereferenced only through `HostRead`/`HostWrite`, whose atomic borrow flag
// makes host access shared-or-exclusive across threads, as a `RwLock` would.
unsafe impl Send for ExportableBuffer {}
// SAFETY: as for `Send`: shared references only read the handles and take host borrows through
// the atomic flag.
unsafe impl Sync for ExportableBuffer {}

impl std::fmt::Debug for ExportableBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportableBuffer")
            .field("size", &self.size)
            .field("allocation_size", &self.allocation_size)
            .field("placement", &self.placement)
            .finish()
    }
}

impl ExportableBuffer {
    /// Creates a buffer of `size` bytes with `usage` (transfer source and destination are always
    /// added) in dedicated, exportable, device-local memory.
    pub fn new(ctx: &Arc<VulkanContext>, size: u64, usage: vk::BufferUsageFlags) -> Result<Arc<Self>> {
        Self::with_placement(ctx, size, usage, MemoryPlacement::DeviceLocal)
    }

    /// As [`new`](Self::new), in host-visible, host-coherent memory that stays mapped: the
    /// CPU writes and reads it in place ([`host_slice_mut`](Self::host_slice_mut),
    /// [`host_slice`](Self::host_slice)) while CUDA imports the same memory.
    /// [`Error::Unsupported`] where no memory type allowed for an exportable buffer is
    /// host-visible and host-coherent.
    pub fn new_host_visible(
        ctx: &Arc<VulkanContext>,
        size: u64,
        usage: vk::BufferUsageFlags,
    ) -> Result<Arc<Self>> {
        Self::with_placement(ctx, size, usage, MemoryPlacement::HostVisible)
    }

    /// A buffer of `size` bytes with `usage` (plus transfer source and destination) in
    /// dedicated, exportable memory placed as `placement` says.
    pub fn with_placement(
        ctx: &Arc<VulkanContext>,
        size: u64,
        usage: vk::BufferUsageFlags,
        placement: MemoryPlacement,
    ) -> Result<Arc<Self>> {
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
                reason: crate::error::UnsupportedReason::VulkanBufferExport,
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
        let mut me = Self {
            buffer,
            memory: vk::DeviceMemory::null(),
            size,
            allocation_size: 0,
            placement,
            mapped: core::ptr::null_mut(),
            borrow: AtomicIsize::new(0),
            ctx: ctx.clone(),
        };
        // SAFETY: `buffer` is a valid buffer of this device. Created with
        // VkExternalMemoryBufferCreateInfo, its memoryTypeBits name the memory types an
        // OPAQUE_FD-exportable buffer of this usage can be bound to (VkMemoryRequirements: they
        // depend on the create flags, usage and external handle types).
        let reqs = unsafe { d.get_buffer_memory_requirements(buffer) };
        me.memory = match placement {
            MemoryPlacement::DeviceLocal => alloc_exportable(ctx, &reqs, Dedicated::Buffer(buffer))?,
            MemoryPlacement::HostVisible => {
                let index = host_visible_type(ctx.memory_types(), reqs.memory_type_bits).ok_or(
                    Error::Unsupported {
                        what: "host-visible exportable Vulkan memory",
                        reason: crate::error::UnsupportedReason::VulkanHostVisibleExport,
                    },
                )?;
                alloc_exportable_in(ctx, &reqs, index, Dedicated::Buffer(buffer))?
            }
        };
        me.allocation_size = reqs.size;
        // SAFETY: VUID-vkBindBufferMemory-buffer-07459: not yet bound; -memory-01508: the
        // dedicated allocation names this buffer and memoryOffset is 0.
        unsafe { d.bind_buffer_memory(buffer, me.memory, 0) }.map_err(vk_err("vkBindBufferMemory"))?;
        if placement == MemoryPlacement::HostVisible {
            // SAFETY: VUID-vkMapMemory-memory-00682: the memory type is HOST_VISIBLE (chosen
            // above); -00678: not mapped yet; offset 0 and VK_WHOLE_SIZE map the whole
            // allocation, which is at least `size` bytes. The mapping stays valid until the
            // memory is freed (vkFreeMemory unmaps it implicitly).
            let p = unsafe { d.map_memory(me.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
                .map_err(vk_err("vkMapMemory"))?;
            if p.is_null() {
                return Err(Error::Vulkan(VulkanError::Call {
                    function: "vkMapMemory",
                    code: vk::Result::ERROR_MEMORY_MAP_FAILED.as_raw(),
                }));
            }
            me.mapped = p.cast();
        }
        Ok(Arc::new(me))
    }

    /// Where the memory lives.
    pub fn placement(&self) -> MemoryPlacement {
        self.placement
    }

    /// Reads the bytes of a [host-visible](MemoryPlacement::HostVisible) buffer in place.
    ///
    /// Host access is checked like a `RwLock`: any number of reads, or one write
    /// ([`host_slice_mut`](Self::host_slice_mut)); a conflicting borrow is
    /// [`Error::InvalidArgument`] (`host access`), never a wait. Device access is not tracked:
    /// order CUDA or Vulkan writes before the read with a fence or semaphore wait (the memory is
    /// `HOST_COHERENT`, so no `vkInvalidateMappedMemoryRanges` is needed after it). A device-local
    /// buffer is [`Error::Unsupported`].
    pub fn host_slice(&self) -> Result<HostRead<'_>> {
        self.host_mapped()?;
        let mut cur = self.borrow.load(Ordering::Relaxed);
        loop {
            if cur < 0 {
                return Err(host_busy());
            }
            match self.borrow.compare_exchange_weak(cur, cur + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Ok(HostRead { buffer: self }),
                Err(v) => cur = v,
            }
        }
    }

    /// Writes the bytes of a [host-visible](MemoryPlacement::HostVisible) buffer in place.
    ///
    /// The only host view while it lives (any other host borrow is [`Error::InvalidArgument`],
    /// `host access`). Device access is not tracked: write only once device work reading or
    /// writing the buffer has completed, and have the device (or CUDA) wait for a signal that a
    /// queue submission made after the write. The submission is what makes host writes visible
    /// to the device ("Host Write Ordering Guarantees"); a host `vkSignalSemaphore` is not enough
    /// (on NVIDIA GPUs, CUDA then reads stale bytes the GPU cached earlier). The memory is
    /// `HOST_COHERENT`, so no `vkFlushMappedMemoryRanges` is needed. A device-local buffer is
    /// [`Error::Unsupported`].
    pub fn host_slice_mut(&self) -> Result<HostWrite<'_>> {
        self.host_mapped()?;
        self.borrow.compare_exchange(0, -1, Ordering::Acquire, Ordering::Relaxed).map_err(|_| host_busy())?;
        Ok(HostWrite { buffer: self })
    }

    fn host_mapped(&self) -> Result<()> {
        if self.mapped.is_null() {
            return Err(Error::Unsupported {
                what: "host access to a Vulkan buffer",
                reason: crate::error::UnsupportedReason::DeviceLocalBuffer,
            });
        }
        Ok(())
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
    pub fn import_into_cuda(self: &Arc<Self>, cuda: &CudaGpu) -> Result<CudaImportedBuffer> {
        check_same_gpu(&self.ctx, cuda)?;
        let memory =
            ExternalMemory::<ReadWrite>::from_opaque_fd(cuda, self.export_fd()?, self.allocation_size, true)?;
        let mapped = memory.map_buffer(0, self.size)?;
        Ok(CudaImportedBuffer { mapped, memory, vulkan: self.clone() })
    }
}

fn host_busy() -> Error {
    invalid("host access", "the buffer is already borrowed for host write (or, for a write, read) access")
}

/// Shared host access to a host-visible [`ExportableBuffer`]: derefs to its `size()` bytes.
pub struct HostRead<'a> {
    buffer: &'a ExportableBuffer,
}

impl std::fmt::Debug for HostRead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostRead").field("len", &self.buffer.size).finish()
    }
}

impl Drop for HostRead<'_> {
    fn drop(&mut self) {
        self.buffer.borrow.fetch_sub(1, Ordering::Release);
    }
}

impl core::ops::Deref for HostRead<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let b = self.buffer;
        // SAFETY: `mapped` is non-null (checked before the guard was made) and maps the whole
        // allocation, at least `size` bytes (which fit in the address space: they are mapped),
        // valid until the memory is freed, which `&'a ExportableBuffer` postpones. The borrow flag
        // is > 0 while this guard lives, so no host `&mut` to the bytes exists. Device writes are
        // ordered by the caller's fences (documented on `host_slice`); any byte value is a valid
        // `u8`.
        unsafe { core::slice::from_raw_parts(b.mapped, b.size as usize) }
    }
}

/// Exclusive host access to a host-visible [`ExportableBuffer`]: derefs to its `size()` bytes.
pub struct HostWrite<'a> {
    buffer: &'a ExportableBuffer,
}

impl std::fmt::Debug for HostWrite<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostWrite").field("len", &self.buffer.size).finish()
    }
}

impl Drop for HostWrite<'_> {
    fn drop(&mut self) {
        self.buffer.borrow.store(0, Ordering::Release);
    }
}

impl core::ops::Deref for HostWrite<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let b = self.buffer;
        // SAFETY: as in `HostRead::deref`; the flag is -1 while this guard lives, so the only
        // host references to the bytes come from this guard, and `&self` borrows it.
        unsafe { core::slice::from_raw_parts(b.mapped, b.size as usize) }
    }
}

impl core::ops::DerefMut for HostWrite<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        let b = self.buffer;
        // SAFETY: as in `HostRead::deref`; the flag is -1 while this guard lives (no other host
        // guard exists) and `&mut self` makes this the only reference derived from the guard.
        unsafe { core::slice::from_raw_parts_mut(b.mapped, b.size as usize) }
    }
}

pub(crate) fn check_same_gpu(ctx: &VulkanContext, cuda: &CudaGpu) -> Result<()> {
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
        // and waits for its frames when dropped; a frame ring waits for every fence of its slots).
        // CUDA imports hold their own reference to the exported payload. No host guard exists
        // (they borrow `self`); freeing mapped memory unmaps it implicitly. Null handles (a failed
        // `new`) are ignored by both calls.
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
