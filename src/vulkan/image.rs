//! Exportable 2D images and their import into CUDA as mipmapped arrays.

use super::buffer::{alloc_exportable, check_same_gpu, export_memory_fd, Dedicated, RawBuffer, OPAQUE_FD};
use super::context::{vk_err, VulkanContext};
use super::format::{cuda_array_flags, cuda_array_format, format_name, CudaFormat};
use crate::cuda::{ArrayDesc, CudaGpu, ExternalMemory, MappedArray, ReadWrite};
use crate::error::{invalid, Error, Result};
use ash::vk;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

/// What to create: a single-sample, optimally tiled 2D image.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ImageDesc {
    /// Width in texels.
    pub width: u32,
    /// Height in texels.
    pub height: u32,
    /// One of [`SUPPORTED_FORMATS`](super::SUPPORTED_FORMATS).
    pub format: vk::Format,
    /// Usage; transfer source and destination are always added.
    pub usage: vk::ImageUsageFlags,
    /// Mip levels: 1 up to the full chain for the extent, `floor(log2(max(width, height))) + 1`.
    /// [`ExportableImage::import_into_cuda`] maps a CUDA mipmapped array of the same level
    /// count ([`MappedArray::level`] reaches each level). [`ExportableImage::upload`] and
    /// [`ExportableImage::download`] move level 0 only; the other levels hold undefined
    /// contents until written (e.g. by CUDA through their surface objects).
    pub mip_levels: u32,
}

impl std::fmt::Debug for ImageDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageDesc")
            .field("width", &self.width)
            .field("height", &self.height)
            .field("format", &format_name(self.format))
            .field("usage", &format_args!("{:#x}", self.usage.as_raw()))
            .field("mip_levels", &self.mip_levels)
            .finish()
    }
}

impl ImageDesc {
    /// A `width` x `height` image of `format` with transfer and sampled usage and one level.
    pub fn new(width: u32, height: u32, format: vk::Format) -> Self {
        Self { width, height, format, usage: vk::ImageUsageFlags::SAMPLED, mip_levels: 1 }
    }

    /// Adds color-attachment usage (the CUDA array then gets `CUDA_ARRAY3D_COLOR_ATTACHMENT`).
    pub fn color_attachment(mut self) -> Self {
        self.usage |= vk::ImageUsageFlags::COLOR_ATTACHMENT;
        self
    }

    /// Bytes of tightly packed texel data of level 0 for [`ExportableImage::upload`], or `None`
    /// for an unsupported format.
    pub fn packed_size(&self) -> Option<usize> {
        let f = cuda_array_format(self.format)?;
        Some(self.width as usize * self.height as usize * f.bytes_per_texel as usize)
    }
}

/// Layout and owner of the image between operations.
#[derive(Clone, Copy, Debug)]
struct State {
    /// The image holds defined contents in `GENERAL` layout.
    defined: bool,
    /// It was released to `VK_QUEUE_FAMILY_EXTERNAL` (CUDA may use it).
    external: bool,
}

/// An optimally tiled 2D image in dedicated, `OPAQUE_FD`-exportable memory, importable into
/// CUDA as a mipmapped array.
pub struct ExportableImage {
    image: vk::Image,
    memory: vk::DeviceMemory,
    desc: ImageDesc,
    cuda: CudaFormat,
    allocation_size: u64,
    state: Mutex<State>,
    ctx: Arc<VulkanContext>,
}

impl std::fmt::Debug for ExportableImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportableImage")
            .field("desc", &self.desc)
            .field("allocation_size", &self.allocation_size)
            .finish()
    }
}

/// The color aspect of every one of `levels` mip levels (the only layer).
fn all_levels(levels: u32) -> vk::ImageSubresourceRange {
    vk::ImageSubresourceRange {
        aspect_mask: vk::ImageAspectFlags::COLOR,
        base_mip_level: 0,
        level_count: levels,
        base_array_layer: 0,
        layer_count: 1,
    }
}

impl ExportableImage {
    /// Creates the image, checking first that the device can export it.
    pub fn new(ctx: &Arc<VulkanContext>, desc: ImageDesc) -> Result<Arc<Self>> {
        let cuda = cuda_array_format(desc.format).ok_or_else(|| {
            invalid("desc.format", format!("{} has no CUDA array format", format_name(desc.format)))
        })?;
        if desc.width == 0 || desc.height == 0 {
            return Err(invalid("desc", format!("{}x{} image", desc.width, desc.height)));
        }
        let full_chain = crate::cuda::full_mip_chain(desc.width as usize, desc.height as usize);
        if desc.mip_levels == 0 || desc.mip_levels > full_chain {
            return Err(invalid(
                "desc.mip_levels",
                format!(
                    "{} levels; a {}x{} image has 1 to {full_chain}",
                    desc.mip_levels, desc.width, desc.height
                ),
            ));
        }
        let usage = desc.usage | vk::ImageUsageFlags::TRANSFER_SRC | vk::ImageUsageFlags::TRANSFER_DST;
        let mut external_info = vk::PhysicalDeviceExternalImageFormatInfo::default().handle_type(OPAQUE_FD);
        let query = vk::PhysicalDeviceImageFormatInfo2::default()
            .format(desc.format)
            .ty(vk::ImageType::TYPE_2D)
            .tiling(vk::ImageTiling::OPTIMAL)
            .usage(usage)
            .push_next(&mut external_info);
        let mut external_props = vk::ExternalImageFormatProperties::default();
        let mut props = vk::ImageFormatProperties2::default().push_next(&mut external_props);
        // SAFETY: Vulkan 1.1 core query on the context's physical device; the pNext chains hold
        // the external-format structures the spec allows there
        // (VUID-VkPhysicalDeviceImageFormatInfo2-pNext-pNext, VUID-VkImageFormatProperties2-pNext-pNext).
        let r = unsafe {
            ctx.ash_instance().get_physical_device_image_format_properties2(
                ctx.physical_device(),
                &query,
                &mut props,
            )
        };
        match r {
            Ok(()) => {}
            Err(vk::Result::ERROR_FORMAT_NOT_SUPPORTED) => {
                return Err(Error::Unsupported {
                    what: "this exportable image format/usage",
                    reason: crate::error::UnsupportedReason::VulkanImageExport,
                })
            }
            Err(e) => return Err(vk_err("vkGetPhysicalDeviceImageFormatProperties2")(e)),
        }
        let limits = props.image_format_properties.max_extent;
        if desc.width > limits.width || desc.height > limits.height {
            return Err(invalid(
                "desc",
                format!(
                    "{}x{} exceeds the device's {}x{}",
                    desc.width, desc.height, limits.width, limits.height
                ),
            ));
        }
        let max_levels = props.image_format_properties.max_mip_levels;
        if desc.mip_levels > max_levels {
            return Err(invalid(
                "desc.mip_levels",
                format!("{} levels; the device allows {max_levels} for this format", desc.mip_levels),
            ));
        }
        let features = external_props.external_memory_properties.external_memory_features;
        if !features.contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE) {
            return Err(Error::Unsupported {
                what: "exporting Vulkan image memory as an opaque fd",
                reason: crate::error::UnsupportedReason::VulkanImageExport,
            });
        }
        let mut external = vk::ExternalMemoryImageCreateInfo::default().handle_types(OPAQUE_FD);
        let info = vk::ImageCreateInfo::default()
            .image_type(vk::ImageType::TYPE_2D)
            .format(desc.format)
            .extent(vk::Extent3D { width: desc.width, height: desc.height, depth: 1 })
            .mip_levels(desc.mip_levels)
            .array_layers(1)
            .samples(vk::SampleCountFlags::TYPE_1)
            .tiling(vk::ImageTiling::OPTIMAL)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .initial_layout(vk::ImageLayout::UNDEFINED)
            .push_next(&mut external);
        let d = ctx.ash_device();
        // SAFETY: VUID-VkImageCreateInfo-pNext-00990: the format/usage/tiling combination was
        // reported exportable with OPAQUE_FD above; the extent is within maxExtent
        // (VUID-VkImageCreateInfo-extent-02252/02253); mipLevels is at least 1 and within the
        // extent's full chain and maxMipLevels (VUID-VkImageCreateInfo-mipLevels-00947/00958/02255).
        let image = unsafe { d.create_image(&info, None) }.map_err(vk_err("vkCreateImage"))?;
        let mut me = Self {
            image,
            memory: vk::DeviceMemory::null(),
            desc: ImageDesc { usage, ..desc },
            cuda,
            allocation_size: 0,
            state: Mutex::new(State { defined: false, external: false }),
            ctx: ctx.clone(),
        };
        // SAFETY: `image` is a valid image of this device.
        let reqs = unsafe { d.get_image_memory_requirements(image) };
        me.memory = alloc_exportable(ctx, &reqs, Dedicated::Image(image))?;
        me.allocation_size = reqs.size;
        // SAFETY: VUID-vkBindImageMemory-image-07460: not yet bound; -memory-02628: the
        // dedicated allocation names this image and memoryOffset is 0.
        unsafe { d.bind_image_memory(image, me.memory, 0) }.map_err(vk_err("vkBindImageMemory"))?;
        Ok(Arc::new(me))
    }

    /// What the image was created with (usage includes the added transfer bits).
    pub fn desc(&self) -> &ImageDesc {
        &self.desc
    }

    /// How CUDA sees a texel.
    pub fn cuda_format(&self) -> CudaFormat {
        self.cuda
    }

    /// Size of the dedicated allocation: the size to import.
    pub fn allocation_size(&self) -> u64 {
        self.allocation_size
    }

    /// The image handle.
    pub fn raw(&self) -> vk::Image {
        self.image
    }

    /// Exports the memory as a new `OPAQUE_FD`.
    pub fn export_fd(&self) -> Result<OwnedFd> {
        export_memory_fd(&self.ctx, self.memory)
    }

    /// The CUDA array description matching this image: same extent, format, channel count and
    /// level count; surface load/store, and the color-attachment flag for color attachments.
    pub fn array_desc(&self) -> ArrayDesc {
        ArrayDesc {
            offset: 0,
            width: self.desc.width as usize,
            height: self.desc.height as usize,
            format: self.cuda.format,
            channels: self.cuda.channels,
            bytes_per_texel: self.cuda.bytes_per_texel,
            flags: cuda_array_flags(self.desc.usage),
            levels: self.desc.mip_levels,
        }
    }

    /// Imports the memory into CUDA (opaque fd, dedicated) as a mipmapped array described by
    /// [`array_desc`](Self::array_desc), with as many levels as the image. The result keeps this
    /// image alive.
    ///
    /// Upload contents first ([`upload`](Self::upload) releases the image to
    /// `VK_QUEUE_FAMILY_EXTERNAL` in `GENERAL` layout).
    pub fn import_into_cuda(self: &Arc<Self>, cuda: &CudaGpu) -> Result<CudaImportedImage> {
        check_same_gpu(&self.ctx, cuda)?;
        let memory =
            ExternalMemory::<ReadWrite>::from_opaque_fd(cuda, self.export_fd()?, self.allocation_size, true)?;
        let array = memory.map_array(self.array_desc())?;
        Ok(CudaImportedImage { array, memory, vulkan: self.clone() })
    }

    /// Writes tightly packed texels of level 0 (row-major, `width * bytes_per_texel` bytes per
    /// row) through a staging buffer and `vkCmdCopyBufferToImage`, leaves the image in `GENERAL`
    /// layout released to `VK_QUEUE_FAMILY_EXTERNAL`, and waits for completion.
    ///
    /// Only level 0 is written. The other levels of a multi-level image keep what they hold
    /// (the barriers cover every level and discard none): undefined contents until written,
    /// e.g. by CUDA through [`MappedArray::level`]. CUDA work using the image must be complete
    /// (e.g. its stream synchronised) first.
    pub fn upload(&self, texels: &[u8]) -> Result<()> {
        let expected = self.packed_len();
        if texels.len() != expected {
            return Err(invalid(
                "texels",
                format!("{} bytes given, the image holds {expected}", texels.len()),
            ));
        }
        let mut staging =
            RawBuffer::host(&self.ctx, expected as u64, vk::BufferUsageFlags::TRANSFER_SRC, false)?;
        staging.bytes_mut().copy_from_slice(texels);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let family = self.ctx.queue_family();
        let image = self.image;
        let (w, h, levels) = (self.desc.width, self.desc.height, self.desc.mip_levels);
        self.ctx.one_shot(|d, cmd| {
            // Every level into GENERAL, owned by this family: acquired back from
            // VK_QUEUE_FAMILY_EXTERNAL once released there (keeping what CUDA wrote to the
            // levels this upload does not touch), else out of the initial UNDEFINED layout.
            let first = if state.external {
                acquire_barrier(image, family, levels, vk::AccessFlags::TRANSFER_WRITE)
            } else {
                vk::ImageMemoryBarrier::default()
                    .src_access_mask(vk::AccessFlags::empty())
                    .dst_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                    .old_layout(vk::ImageLayout::UNDEFINED)
                    .new_layout(vk::ImageLayout::GENERAL)
                    .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .image(image)
                    .subresource_range(all_levels(levels))
            };
            let region = copy_region(w, h);
            let release = release_barrier(image, family, levels);
            // SAFETY: `cmd` is recording (one_shot); the acquire barrier mirrors the release
            // of the previous upload/download (EXTERNAL -> this family, GENERAL -> GENERAL, every
            // level; VUID-VkImageMemoryBarrier-image-04071 for an EXCLUSIVE image), the other
            // first barrier leaves the initial UNDEFINED layout; VUID-vkCmdCopyBufferToImage-
            // dstImageLayout-01396: GENERAL is an allowed destination layout; -pRegions-06218:
            // the region is level 0's extent and the staging buffer holds width*height texels;
            // the release barrier has srcQueueFamilyIndex = this family and dstQueueFamilyIndex
            // = VK_QUEUE_FAMILY_EXTERNAL with oldLayout == newLayout over every level.
            unsafe {
                d.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::TOP_OF_PIPE,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::DependencyFlags::empty(),
                    &[],
                    &[],
                    &[first],
                );
                d.cmd_copy_buffer_to_image(cmd, staging.buffer, image, vk::ImageLayout::GENERAL, &[region]);
                d.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                    vk::DependencyFlags::empty(),
                    &[],
                    &[],
                    &[release],
                );
            }
        })?;
        *state = State { defined: true, external: true };
        Ok(())
    }

    /// Reads level 0 back as tightly packed texels: acquires every level from
    /// `VK_QUEUE_FAMILY_EXTERNAL` (so writes made through CUDA are visible), copies level 0 out
    /// with `vkCmdCopyImageToBuffer` in `GENERAL` layout, and releases every level to CUDA again.
    ///
    /// CUDA work writing the image must be complete (e.g. its stream synchronised) first.
    pub fn download(&self) -> Result<Vec<u8>> {
        let len = self.packed_len();
        let readback = RawBuffer::host(&self.ctx, len as u64, vk::BufferUsageFlags::TRANSFER_DST, true)?;
        let state = *self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !state.defined {
            return Err(invalid("image", "nothing was uploaded yet: the contents are undefined"));
        }
        let family = self.ctx.queue_family();
        let image = self.image;
        let (w, h, levels) = (self.desc.width, self.desc.height, self.desc.mip_levels);
        self.ctx.one_shot(|d, cmd| {
            let acquire = acquire_barrier(image, family, levels, vk::AccessFlags::TRANSFER_READ);
            let local = vk::ImageMemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(vk::AccessFlags::TRANSFER_READ)
                .old_layout(vk::ImageLayout::GENERAL)
                .new_layout(vk::ImageLayout::GENERAL)
                .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .image(image)
                .subresource_range(all_levels(levels));
            let first = if state.external { acquire } else { local };
            let region = copy_region(w, h);
            let host = vk::BufferMemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(vk::AccessFlags::HOST_READ)
                .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .buffer(readback.buffer)
                .offset(0)
                .size(vk::WHOLE_SIZE);
            let release = release_barrier(image, family, levels);
            // SAFETY: `cmd` is recording; the acquire barrier mirrors the release done by
            // `upload` (EXTERNAL -> this family, GENERAL -> GENERAL, every level;
            // VUID-VkImageMemoryBarrier-image-04071 for an EXCLUSIVE image);
            // VUID-vkCmdCopyImageToBuffer-srcImageLayout-00189: GENERAL is an allowed source
            // layout; the region is level 0's extent and the buffer holds width*height texels.
            unsafe {
                d.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::DependencyFlags::empty(),
                    &[],
                    &[],
                    &[first],
                );
                d.cmd_copy_image_to_buffer(cmd, image, vk::ImageLayout::GENERAL, readback.buffer, &[region]);
                d.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::HOST,
                    vk::DependencyFlags::empty(),
                    &[],
                    &[host],
                    &[],
                );
                d.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                    vk::DependencyFlags::empty(),
                    &[],
                    &[],
                    &[release],
                );
            }
        })?;
        self.state.lock().unwrap_or_else(|e| e.into_inner()).external = true;
        Ok(readback.bytes()[..len].to_vec())
    }

    fn packed_len(&self) -> usize {
        self.desc.width as usize * self.desc.height as usize * self.cuda.bytes_per_texel as usize
    }
}

fn copy_region(width: u32, height: u32) -> vk::BufferImageCopy {
    vk::BufferImageCopy {
        buffer_offset: 0,
        buffer_row_length: 0,
        buffer_image_height: 0,
        image_subresource: vk::ImageSubresourceLayers {
            aspect_mask: vk::ImageAspectFlags::COLOR,
            mip_level: 0,
            base_array_layer: 0,
            layer_count: 1,
        },
        image_offset: vk::Offset3D { x: 0, y: 0, z: 0 },
        image_extent: vk::Extent3D { width, height, depth: 1 },
    }
}

/// Queue-family release of the whole image (all `levels`) to `VK_QUEUE_FAMILY_EXTERNAL`,
/// staying in `GENERAL`.
fn release_barrier(image: vk::Image, family: u32, levels: u32) -> vk::ImageMemoryBarrier<'static> {
    vk::ImageMemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(vk::AccessFlags::empty())
        .old_layout(vk::ImageLayout::GENERAL)
        .new_layout(vk::ImageLayout::GENERAL)
        .src_queue_family_index(family)
        .dst_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)
        .image(image)
        .subresource_range(all_levels(levels))
}

/// Queue-family acquire of the whole image (all `levels`) from `VK_QUEUE_FAMILY_EXTERNAL`,
/// staying in `GENERAL`: the counterpart of [`release_barrier`].
fn acquire_barrier(
    image: vk::Image,
    family: u32,
    levels: u32,
    dst_access: vk::AccessFlags,
) -> vk::ImageMemoryBarrier<'static> {
    vk::ImageMemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::empty())
        .dst_access_mask(dst_access)
        .old_layout(vk::ImageLayout::GENERAL)
        .new_layout(vk::ImageLayout::GENERAL)
        .src_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)
        .dst_queue_family_index(family)
        .image(image)
        .subresource_range(all_levels(levels))
}

impl Drop for ExportableImage {
    fn drop(&mut self) {
        let d = self.ctx.ash_device();
        // SAFETY: VUID-vkDestroyImage-image-01000 / VUID-vkFreeMemory-memory-00677: every
        // submission of this module that used the image completed before `upload`/`download`
        // returned (one-shot fence wait); CUDA imports hold their own reference to the exported
        // payload, and CudaImportedImage drops its mapping before this Arc.
        unsafe {
            d.destroy_image(self.image, None);
            d.free_memory(self.memory, None);
        }
    }
}

/// A Vulkan image imported into CUDA as a mipmapped array.
///
/// Field order is the teardown order: the CUDA array, the CUDA import, then the Vulkan image.
pub struct CudaImportedImage {
    array: MappedArray<ReadWrite>,
    memory: ExternalMemory<ReadWrite>,
    vulkan: Arc<ExportableImage>,
}

impl std::fmt::Debug for CudaImportedImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaImportedImage").field("array", &self.array).field("vulkan", &self.vulkan).finish()
    }
}

impl CudaImportedImage {
    /// The CUDA mipmapped array, with the image's level count (`level0()` / `level(i)` for
    /// surface and texture objects).
    pub fn array(&self) -> &MappedArray<ReadWrite> {
        &self.array
    }

    /// The CUDA import.
    pub fn memory(&self) -> &ExternalMemory<ReadWrite> {
        &self.memory
    }

    /// The Vulkan image.
    pub fn vulkan(&self) -> &Arc<ExportableImage> {
        &self.vulkan
    }
}
