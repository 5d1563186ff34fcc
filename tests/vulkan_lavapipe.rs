//! The Vulkan parts that need no CUDA and no semaphore export, run on any Vulkan driver; CI
//! runs them on Mesa's CPU driver (lavapipe):
//!
//! ```text
//! VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json NVSCI_REQUIRE_VULKAN=1 \
//!     cargo test --features vulkan --test vulkan_lavapipe
//! ```
//!
//! Without a Vulkan device the tests skip with a message, unless `NVSCI_REQUIRE_VULKAN=1`.
#![cfg(feature = "vulkan")]

mod common;

use common::open_fds;
use common::own_vulkan::OwnVulkan;
use nvsci::cuda::cudarc::driver::sys::{self, CUarray_format};
use nvsci::vulkan::ash::vk;
use nvsci::vulkan::*;
use nvsci::{CudaError, Error, VulkanError};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

/// Counts heap allocations of threads that opted in (see `count_allocations`).
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the bookkeeping touches only
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap allocations made by `f` on this thread.
fn count_allocations(f: impl FnOnce()) -> u64 {
    ALLOCATIONS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(|a| a.get())
}

const WAIT: Duration = Duration::from_secs(20);

/// The Vulkan context for these tests: the process's shared one, or with
/// `NVSCI_TEST_PRIVATE_VULKAN=1` a private one per test, destroyed at its end (CI sets it on
/// lavapipe under the validation layer, which reports objects left on a device only when the
/// device is destroyed; on the NVIDIA driver 580, destroying devices while test threads end can
/// hang, docs/vulkan.md). `None` (skip) without a device unless `NVSCI_REQUIRE_VULKAN=1`. Tests run
/// in parallel under `common::vulkan_shared()`; those that count the process's descriptors or
/// destroy a device take `common::vulkan_exclusive()`.
fn vk_ctx() -> Option<Arc<VulkanContext>> {
    let private = std::env::var("NVSCI_TEST_PRIVATE_VULKAN").is_ok_and(|v| v == "1");
    match VulkanContext::with_options(ContextOptions::default().with_private(private)) {
        Ok(c) => Some(c),
        Err(e) => {
            common::require::unavailable(&[common::Capability::Vulkan], format!("no Vulkan device: {e}"))
        }
    }
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n).map(|i| ((i as u32).wrapping_mul(31).wrapping_add(seed.wrapping_mul(7)) >> 1) as u8).collect()
}

#[test]
fn missing_loader_is_a_typed_error() {
    let r = VulkanContext::with_options(ContextOptions::default().with_loader("/nonexistent/libvulkan.so.1"));
    match r {
        Err(Error::Vulkan(VulkanError::Unavailable { reason })) => {
            assert!(reason.contains("/nonexistent/libvulkan.so.1"), "{reason}");
            assert!(reason.contains("libvulkan1"), "the message says what to install: {reason}");
        }
        other => panic!("expected VulkanError::Unavailable, got {other:?}"),
    }
}

#[test]
fn context_reports_its_device() {
    let _vk = common::vulkan_shared();
    let Some(ctx) = vk_ctx() else { return };
    let info = ctx.info();
    eprintln!("{info:?}");
    assert!(!info.name.is_empty());
    assert!(info.api_version >= vk::API_VERSION_1_2, "{}", info.api_version_string());
    assert_eq!(info.device_group_size, 1);
    assert_ne!(info.uuid.0, [0; 16], "VkPhysicalDeviceIDProperties::deviceUUID was not read");
    assert_eq!(info.uuid_string().len(), 36);
    assert_eq!(ctx.uuid(), info.uuid);
    let families = {
        // SAFETY: the physical device belongs to this instance.
        unsafe { ctx.ash_instance().get_physical_device_queue_family_properties(ctx.physical_device()) }
    };
    assert!((ctx.queue_family() as usize) < families.len());
}

#[test]
fn selection_by_uuid_matches_and_a_mismatch_explains_itself() {
    let _vk = common::vulkan_shared();
    let Some(ctx) = vk_ctx() else { return };
    let again = VulkanContext::new(DeviceSelection::Uuid(ctx.uuid())).unwrap();
    assert_eq!(again.info(), ctx.info());
    let wrong = nvsci::buf::GpuId([0xab; 16]);
    match VulkanContext::new(DeviceSelection::Uuid(wrong)) {
        Err(Error::Vulkan(VulkanError::Unavailable { reason })) => {
            assert!(reason.contains("abababab-abab-abab-abab-abababababab"), "{reason}");
            assert!(reason.contains(&ctx.info().name), "the devices found are listed: {reason}");
        }
        other => panic!("expected VulkanError::Unavailable, got {other:?}"),
    }
}

/// Contexts are shared per loader and selection unless asked for privately; a private context
/// is a device of its own, destroyed with its last reference.
#[test]
fn contexts_are_shared_unless_private() {
    let _vk = common::vulkan_exclusive();
    let Some(_) = vk_ctx() else { return };
    let ctx = VulkanContext::new(DeviceSelection::Any).unwrap();
    let again = std::thread::spawn(|| VulkanContext::new(DeviceSelection::Any).unwrap()).join().unwrap();
    assert!(Arc::ptr_eq(&ctx, &again), "the same shared context from another thread");
    let by_uuid = VulkanContext::new(DeviceSelection::Uuid(ctx.uuid())).unwrap();
    assert!(Arc::ptr_eq(&ctx, &by_uuid), "the same device selected by UUID shares the context");
    let private = VulkanContext::with_options(ContextOptions::default().with_private(true)).unwrap();
    assert!(!Arc::ptr_eq(&ctx, &private));
    assert_ne!(private.ash_device().handle(), ctx.ash_device().handle());
    assert_eq!(private.uuid(), ctx.uuid(), "the same physical device");
    let buffer = ExportableBuffer::new(&private, 4096, vk::BufferUsageFlags::empty()).unwrap();
    drop(buffer.export_fd().unwrap());
    drop((buffer, private));
}

#[test]
fn objects_keep_the_context_alive() {
    // A private context, destroyed once its last object is gone.
    let _vk = common::vulkan_exclusive();
    let Some(_) = vk_ctx() else { return };
    let ctx = VulkanContext::with_options(ContextOptions::default().with_private(true)).unwrap();
    let weak = Arc::downgrade(&ctx);
    let buffer = ExportableBuffer::new(&ctx, 4096, vk::BufferUsageFlags::empty()).unwrap();
    let sem = TimelineSemaphore::new(&ctx, 0).unwrap();
    drop(ctx);
    // The context lives on in the objects' Arcs.
    let _fd = buffer.export_fd().unwrap();
    sem.signal(1).unwrap();
    assert_eq!(sem.value().unwrap(), 1);
    assert!(weak.upgrade().is_some());
    drop((buffer, sem));
    assert!(weak.upgrade().is_none(), "the context went with its last object");
}

#[test]
fn exportable_buffer_exports_fresh_fds_and_leaks_none() {
    let _vk = common::vulkan_exclusive();
    let Some(ctx) = vk_ctx() else { return };
    let buffer = ExportableBuffer::new(&ctx, (1 << 20) + 3, vk::BufferUsageFlags::STORAGE_BUFFER).unwrap();
    assert_eq!(buffer.size(), (1 << 20) + 3);
    assert!(buffer.allocation_size() >= buffer.size());
    let a = buffer.export_fd().unwrap();
    let b = buffer.export_fd().unwrap();
    use std::os::fd::AsRawFd;
    assert_ne!(a.as_raw_fd(), b.as_raw_fd());
    // Each is an open file.
    let meta = std::fs::File::from(a).metadata().unwrap();
    eprintln!("exported fd: {:?}, {} bytes", meta.file_type(), meta.len());
    drop(b);
    assert!(matches!(
        ExportableBuffer::new(&ctx, 0, vk::BufferUsageFlags::empty()),
        Err(Error::InvalidArgument { .. })
    ));

    let cycle = || {
        let buf = ExportableBuffer::new(&ctx, 256 << 10, vk::BufferUsageFlags::empty()).unwrap();
        let fd = buf.export_fd().unwrap();
        drop(buf);
        drop(fd);
    };
    for _ in 0..3 {
        cycle();
    }
    let before = open_fds();
    for _ in 0..100 {
        cycle();
    }
    assert_eq!(open_fds(), before, "fds leaked over 100 create/export/drop cycles");
}

/// Host-visible exportable memory: created, exported, written and read in place through the
/// mapping, with host borrows checked like a `RwLock`.
#[test]
fn host_visible_buffer_round_trips_in_place() {
    let _vk = common::vulkan_exclusive();
    let Some(ctx) = vk_ctx() else { return };
    let size = (256 << 10) + 5;
    let buffer = ExportableBuffer::new_host_visible(&ctx, size, vk::BufferUsageFlags::empty()).unwrap();
    assert_eq!(buffer.placement(), MemoryPlacement::HostVisible);
    assert_eq!(buffer.size(), size);
    assert!(buffer.allocation_size() >= size);
    drop(buffer.export_fd().unwrap());
    for seed in 0..3u32 {
        let content = pattern(size as usize, seed);
        {
            let mut w = buffer.host_slice_mut().unwrap();
            assert_eq!(w.len(), size as usize);
            // A write is exclusive: no second writer, no reader.
            assert!(matches!(
                buffer.host_slice_mut(),
                Err(Error::InvalidArgument { name: "host access", .. })
            ));
            assert!(matches!(buffer.host_slice(), Err(Error::InvalidArgument { name: "host access", .. })));
            w.copy_from_slice(&content);
        }
        let a = buffer.host_slice().unwrap();
        let b = buffer.host_slice().unwrap();
        assert!(a[..] == content[..], "round {seed}");
        assert!(b[..] == content[..], "round {seed}");
        assert!(matches!(buffer.host_slice_mut(), Err(Error::InvalidArgument { name: "host access", .. })));
        drop((a, b));
    }
    // The bytes are the buffer's memory, not a copy: a Vulkan copy out of it sees them.
    let other = ExportableBuffer::new_host_visible(&ctx, size, vk::BufferUsageFlags::empty()).unwrap();
    let content = pattern(size as usize, 42);
    buffer.host_slice_mut().unwrap().copy_from_slice(&content);
    copy_buffer(&ctx, &buffer, &other);
    assert!(other.host_slice().unwrap()[..] == content[..], "the GPU copy did not see the host writes");

    // Device-local buffers have no host view.
    let local = ExportableBuffer::new(&ctx, 4096, vk::BufferUsageFlags::empty()).unwrap();
    assert_eq!(local.placement(), MemoryPlacement::DeviceLocal);
    let local_buffer = nvsci::UnsupportedReason::DeviceLocalBuffer;
    assert!(matches!(local.host_slice(), Err(Error::Unsupported { reason, .. }) if reason == local_buffer));
    assert!(
        matches!(local.host_slice_mut(), Err(Error::Unsupported { reason, .. }) if reason == local_buffer)
    );
    assert!(matches!(
        ExportableBuffer::new_host_visible(&ctx, 0, vk::BufferUsageFlags::empty()),
        Err(Error::InvalidArgument { .. })
    ));

    let cycle = || {
        let buf = ExportableBuffer::new_host_visible(&ctx, 64 << 10, vk::BufferUsageFlags::empty()).unwrap();
        buf.host_slice_mut().unwrap().fill(1);
        drop(buf.export_fd().unwrap());
    };
    cycle();
    let before = open_fds();
    for _ in 0..50 {
        cycle();
    }
    assert_eq!(open_fds(), before, "fds leaked over 50 host-visible create/map/export/drop cycles");
}

/// Copies `src` into `dst` on the queue and waits (both host-visible, so the host sees the
/// result once the submission completed: its fence wait makes the transfer writes visible).
fn copy_buffer(ctx: &Arc<VulkanContext>, src: &ExportableBuffer, dst: &ExportableBuffer) {
    let d = ctx.ash_device();
    let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(ctx.queue_family());
    // SAFETY: the context's queue family; destroyed below after the submission completed.
    let pool = unsafe { d.create_command_pool(&pool_info, None) }.unwrap();
    let alloc = vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(1);
    // SAFETY: one primary buffer from a pool of this device.
    let cmd = unsafe { d.allocate_command_buffers(&alloc) }.unwrap()[0];
    let region = [vk::BufferCopy { src_offset: 0, dst_offset: 0, size: src.size().min(dst.size()) }];
    let host_read = [vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(vk::AccessFlags::HOST_READ)];
    // SAFETY: a new command buffer in the initial state; both buffers carry TRANSFER_SRC/DST
    // usage and hold the copied range; the barrier makes the copy available to host reads
    // (VUID-vkCmdCopyBuffer-size-00115/00116).
    unsafe {
        d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default()).unwrap();
        d.cmd_copy_buffer(cmd, src.raw(), dst.raw(), &region);
        d.cmd_pipeline_barrier(
            cmd,
            vk::PipelineStageFlags::TRANSFER,
            vk::PipelineStageFlags::HOST,
            vk::DependencyFlags::empty(),
            &host_read,
            &[],
            &[],
        );
        d.end_command_buffer(cmd).unwrap();
    }
    // SAFETY: a plain fence of this device.
    let fence = unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) }.unwrap();
    let cmds = [cmd];
    let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
    // SAFETY: the queue of this device (queue 0 of the context's family); this test is the only
    // user of the context, so the queue is not used concurrently (vkQueueSubmit's external
    // synchronisation); the command buffer is executable. Host writes made before the submit are
    // visible to it (Vulkan spec, "Host Write Ordering Guarantees").
    unsafe {
        let queue = d.get_device_queue(ctx.queue_family(), 0);
        d.queue_submit(queue, &submit, fence).unwrap();
        d.wait_for_fences(&[fence], true, WAIT.as_nanos() as u64).unwrap();
        d.destroy_fence(fence, None);
        d.destroy_command_pool(pool, None);
    }
}

/// The frame ring's Vulkan backend needs CUDA (`Backend::new(BackendKind::Vulkan)` opens the
/// CUDA device first): without one the refusal is a typed error, never a panic. (The ring itself
/// refusing a device that cannot export timeline semaphores, as lavapipe cannot, is a unit test
/// of `pipeline::backend::vulkan`, which CI runs on lavapipe with `--lib`.)
#[test]
fn vulkan_backend_without_cuda_is_a_typed_error() {
    let _vk = common::vulkan_shared();
    match nvsci::pipeline::Backend::new(nvsci::pipeline::BackendKind::Vulkan) {
        Ok(b) => {
            // A GPU host: the backend is usable; its device exports timeline semaphores.
            let ctx = b.vulkan().expect("the Vulkan backend has a Vulkan context");
            assert!(semaphore_export_support(ctx).timeline, "{:?}", ctx.info());
        }
        Err(
            e @ (Error::Cuda(CudaError::Unavailable { .. })
            | Error::Cuda(CudaError::Call { .. })
            | Error::Vulkan(VulkanError::Unavailable { .. })),
        ) => {
            eprintln!("refused as expected: {e}")
        }
        Err(Error::Unsupported { what, reason }) => {
            assert!(what.contains("Vulkan"), "{what}: {reason}")
        }
        Err(e) => panic!("unexpected error kind: {e:?}"),
    }
}

#[test]
fn format_mapping_table() {
    use CUarray_format::*;
    let expect = [
        (vk::Format::R8_UINT, CU_AD_FORMAT_UNSIGNED_INT8, 1, 1, false),
        (vk::Format::R8_UNORM, CU_AD_FORMAT_UNSIGNED_INT8, 1, 1, true),
        (vk::Format::R8G8_UINT, CU_AD_FORMAT_UNSIGNED_INT8, 2, 2, false),
        (vk::Format::R8G8_UNORM, CU_AD_FORMAT_UNSIGNED_INT8, 2, 2, true),
        (vk::Format::R8G8B8A8_UINT, CU_AD_FORMAT_UNSIGNED_INT8, 4, 4, false),
        (vk::Format::R8G8B8A8_UNORM, CU_AD_FORMAT_UNSIGNED_INT8, 4, 4, true),
        (vk::Format::R8G8B8A8_SNORM, CU_AD_FORMAT_SIGNED_INT8, 4, 4, true),
        (vk::Format::R16G16B16A16_SFLOAT, CU_AD_FORMAT_HALF, 4, 8, false),
        (vk::Format::R32_SFLOAT, CU_AD_FORMAT_FLOAT, 1, 4, false),
        (vk::Format::R32_UINT, CU_AD_FORMAT_UNSIGNED_INT32, 1, 4, false),
        (vk::Format::R32G32B32A32_SFLOAT, CU_AD_FORMAT_FLOAT, 4, 16, false),
    ];
    for (f, format, channels, bytes, normalized) in expect {
        let c = cuda_array_format(f).unwrap_or_else(|| panic!("{} unmapped", format_name(f)));
        assert_eq!(
            c,
            CudaFormat { format, channels, bytes_per_texel: bytes, normalized },
            "{}",
            format_name(f)
        );
        assert!(SUPPORTED_FORMATS.contains(&f));
    }
    for f in
        [vk::Format::R8G8B8_UNORM, vk::Format::D32_SFLOAT, vk::Format::R8G8B8A8_SRGB, vk::Format::UNDEFINED]
    {
        assert_eq!(cuda_array_format(f), None, "{}", format_name(f));
    }
    assert_eq!(cuda_array_flags(vk::ImageUsageFlags::SAMPLED), sys::CUDA_ARRAY3D_SURFACE_LDST);
    assert_eq!(
        cuda_array_flags(vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::SAMPLED),
        sys::CUDA_ARRAY3D_SURFACE_LDST | sys::CUDA_ARRAY3D_COLOR_ATTACHMENT
    );
}

#[test]
fn exportable_images_upload_download_and_describe_their_cuda_array() {
    let _vk = common::vulkan_shared();
    let Some(ctx) = vk_ctx() else { return };
    let formats = [
        (vk::Format::R8_UINT, false),
        (vk::Format::R8_UNORM, false),
        (vk::Format::R8G8_UINT, false),
        (vk::Format::R8G8_UNORM, true),
        (vk::Format::R8G8B8A8_UINT, false),
        (vk::Format::R8G8B8A8_UNORM, true),
        (vk::Format::R32_SFLOAT, false),
    ];
    for (i, (format, attachment)) in formats.into_iter().enumerate() {
        let mut desc = ImageDesc::new(67, 45, format);
        if attachment {
            desc = desc.color_attachment();
        }
        let image =
            ExportableImage::new(&ctx, desc).unwrap_or_else(|e| panic!("{}: {e}", format_name(format)));
        let cuda = cuda_array_format(format).unwrap();
        let a = image.array_desc();
        assert_eq!((a.width, a.height, a.offset, a.levels), (67, 45, 0, 1));
        assert_eq!(
            (a.format, a.channels, a.bytes_per_texel),
            (cuda.format, cuda.channels, cuda.bytes_per_texel)
        );
        assert_eq!(a.flags & sys::CUDA_ARRAY3D_COLOR_ATTACHMENT != 0, attachment, "{}", format_name(format));
        assert!(image.allocation_size() >= (67 * 45 * cuda.bytes_per_texel) as u64);
        drop(image.export_fd().unwrap());
        assert!(
            matches!(image.download(), Err(Error::InvalidArgument { name: "image", .. })),
            "contents are undefined before an upload"
        );
        let texels = pattern(desc.packed_size().unwrap(), i as u32 + 1);
        image.upload(&texels).unwrap();
        assert_eq!(image.download().unwrap(), texels, "{}", format_name(format));
        // A second round (the image is now owned by the external queue family).
        let again = pattern(texels.len(), 99);
        image.upload(&again).unwrap();
        assert_eq!(image.download().unwrap(), again, "{}", format_name(format));
        assert!(matches!(image.upload(&texels[1..]), Err(Error::InvalidArgument { .. })));
    }
    let bad = ImageDesc::new(16, 16, vk::Format::R8G8B8_UNORM);
    assert!(matches!(ExportableImage::new(&ctx, bad), Err(Error::InvalidArgument { .. })));
}

#[test]
fn mipmapped_image_moves_level_0_and_describes_every_level() {
    let _vk = common::vulkan_shared();
    let Some(ctx) = vk_ctx() else { return };
    let desc = ImageDesc { mip_levels: 4, ..ImageDesc::new(64, 32, vk::Format::R8G8B8A8_UNORM) };
    let image = ExportableImage::new(&ctx, desc).unwrap();
    assert_eq!(image.desc().mip_levels, 4);
    let a = image.array_desc();
    assert_eq!((a.width, a.height, a.offset, a.levels), (64, 32, 0, 4));
    assert_eq!((a.channels, a.bytes_per_texel), (4, 4));
    // The allocation holds the whole chain: more than level 0 alone.
    assert!(image.allocation_size() > 64 * 32 * 4, "{}", image.allocation_size());
    assert_eq!(desc.packed_size(), Some(64 * 32 * 4), "uploads are level 0");
    assert!(
        matches!(image.download(), Err(Error::InvalidArgument { name: "image", .. })),
        "contents are undefined before an upload"
    );
    let texels = pattern(64 * 32 * 4, 11);
    image.upload(&texels).unwrap();
    assert_eq!(image.download().unwrap(), texels);
    let again = pattern(texels.len(), 12);
    image.upload(&again).unwrap();
    assert_eq!(image.download().unwrap(), again);
    assert!(matches!(image.upload(&texels[..64 * 32]), Err(Error::InvalidArgument { .. })));

    // The full chain of 64x32 is 7 levels (64, 32, 16, 8, 4, 2, 1 texels wide).
    let full = ImageDesc { mip_levels: 7, ..desc };
    let image = ExportableImage::new(&ctx, full).unwrap();
    assert_eq!(image.array_desc().levels, 7);
    image.upload(&texels).unwrap();
    assert_eq!(image.download().unwrap(), texels);

    for (levels, w, h) in [(0, 64, 32), (8, 64, 32), (2, 1, 1), (6, 16, 31)] {
        let bad = ImageDesc { mip_levels: levels, ..ImageDesc::new(w, h, vk::Format::R8G8B8A8_UNORM) };
        match ExportableImage::new(&ctx, bad) {
            Err(Error::InvalidArgument { name, .. }) => assert_eq!(name, "desc.mip_levels", "{bad:?}"),
            other => panic!("{bad:?}: expected InvalidArgument, got {other:?}"),
        }
    }
}

#[test]
fn timeline_semaphore_signal_and_wait_on_the_host() {
    let _vk = common::vulkan_shared();
    let Some(ctx) = vk_ctx() else { return };
    let sem = TimelineSemaphore::new(&ctx, 2).unwrap();
    assert_eq!(sem.value().unwrap(), 2);
    sem.signal(5).unwrap();
    assert_eq!(sem.value().unwrap(), 5);
    sem.wait(5, Duration::ZERO).unwrap();
    sem.wait(3, Duration::ZERO).unwrap();
    match sem.wait(6, Duration::from_millis(20)) {
        Err(Error::Timeout { waited_for, timeout }) => {
            assert_eq!(waited_for, nvsci::Wait::Fence { function: "vkWaitSemaphores" });
            assert_eq!(timeout, Duration::from_millis(20));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(matches!(sem.signal(5), Err(Error::InvalidArgument { .. })));
    let other = sem.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        other.signal(9).unwrap();
    });
    sem.wait(9, WAIT).unwrap();
    t.join().unwrap();
    assert_eq!(sem.value().unwrap(), 9);
    assert!(!sem.is_exportable());
    assert!(matches!(
        sem.export_fd(),
        Err(Error::Unsupported { reason: nvsci::UnsupportedReason::SemaphoreNotExportable, .. })
    ));
}

#[test]
fn semaphore_export_probe_is_consistent() {
    let _vk = common::vulkan_shared();
    let Some(ctx) = vk_ctx() else { return };
    let support = semaphore_export_support(&ctx);
    eprintln!("{}: {support:?}", ctx.info().name);
    match TimelineSemaphore::new_exportable(&ctx, 0) {
        Ok(t) => {
            assert!(support.timeline);
            drop(t.export_fd().unwrap());
        }
        Err(e) => {
            assert!(!support.timeline);
            assert!(
                matches!(
                    e,
                    Error::Unsupported { reason: nvsci::UnsupportedReason::VulkanSemaphoreExport, .. }
                ),
                "{e}"
            );
        }
    }
    match HandoffSemaphores::new(&ctx) {
        Ok(h) => {
            let expected = if support.timeline { HandoffMode::Timeline } else { HandoffMode::BinaryPair };
            assert_eq!(h.mode(), expected);
        }
        Err(e) => {
            assert!(!support.timeline && !support.binary);
            assert!(
                matches!(
                    e,
                    Error::Unsupported { reason: nvsci::UnsupportedReason::VulkanSemaphoreExport, .. }
                ),
                "{e}"
            );
        }
    }
}

#[test]
fn host_only_producer_round_trips_every_frame() {
    let _vk = common::vulkan_shared();
    let Some(ctx) = vk_ctx() else { return };
    let buffer = ExportableBuffer::new(&ctx, 64 << 10, vk::BufferUsageFlags::empty()).unwrap();
    let mut p = FrameProducer::host_only(&ctx, &buffer, ProducerConfig::default()).unwrap();
    assert_eq!(p.mode(), None);
    for frame in 0..20u32 {
        let content = pattern(64 << 10, frame);
        p.staging_mut().unwrap().copy_from_slice(&content);
        let v = p.submit_produce().unwrap();
        assert_eq!(v.frame, frame as u64);
        p.submit_return().unwrap();
        assert_eq!(p.wait_returned(WAIT).unwrap(), &content[..], "frame {frame}");
    }
    assert_eq!(p.frames_returned(), 20);
}

/// The full hand-off protocol with the host standing in for CUDA (a process-local timeline
/// semaphore: lavapipe cannot export semaphores).
#[test]
fn timeline_producer_hands_frames_over_and_back() {
    let _vk = common::vulkan_shared();
    let Some(ctx) = vk_ctx() else { return };
    let size = 48 << 10;
    let buffer = ExportableBuffer::new(&ctx, size, vk::BufferUsageFlags::empty()).unwrap();
    let sem = TimelineSemaphore::new(&ctx, 10).unwrap();
    let sems = HandoffSemaphores::from_timeline(sem.clone());
    assert_eq!(sems.mode(), HandoffMode::Timeline);
    let mut p = FrameProducer::new(&ctx, &buffer, &sems, ProducerConfig::default()).unwrap();
    assert_eq!(p.mode(), Some(HandoffMode::Timeline));
    for frame in 0..50u32 {
        let content = pattern(size as usize, frame);
        p.staging_mut().unwrap().copy_from_slice(&content);
        let v = p.submit_produce().unwrap();
        assert_eq!(v, FrameValues::new(10, frame as u64));
        // "CUDA": wait for the frame, then hand it back.
        sem.wait(v.produced, WAIT).unwrap();
        sem.signal(v.cuda_done).unwrap();
        p.submit_return().unwrap();
        assert_eq!(p.wait_returned(WAIT).unwrap(), &content[..], "frame {frame}");
        sem.wait(v.returned, WAIT).unwrap();
    }
}

#[test]
fn device_source_and_readback_windows() {
    let _vk = common::vulkan_shared();
    let Some(ctx) = vk_ctx() else { return };
    let size = 100_000u64;
    let buffer = ExportableBuffer::new(&ctx, size, vk::BufferUsageFlags::empty()).unwrap();
    let sem = TimelineSemaphore::new(&ctx, 0).unwrap();
    let sems = HandoffSemaphores::from_timeline(sem.clone());
    let config = ProducerConfig::default()
        .with_source(FrameSource::Device)
        .with_readback(Readback::Windows { count: 5, len: 1000 });
    let mut p = FrameProducer::new(&ctx, &buffer, &sems, config).unwrap();
    assert!(matches!(
        FrameProducer::host_only(&ctx, &buffer, ProducerConfig::default()).map(|mut q| q.commit_source()),
        Ok(Err(Error::InvalidArgument { .. }))
    ));
    let content = pattern(size as usize, 5);
    p.staging_mut().unwrap().copy_from_slice(&content);
    p.commit_source().unwrap();
    // Later staging writes do not change the frames: they come from the device source.
    p.staging_mut().unwrap().fill(0);
    let regions = p.readback_regions().to_vec();
    assert_eq!(regions.len(), 5);
    assert_eq!(regions[0], (0, 1000));
    assert_eq!(regions[4].0 + regions[4].1, size);
    for _ in 0..3 {
        let v = p.submit_produce().unwrap();
        // A host signal must not overtake a pending queue signal of a lower value.
        sem.wait(v.produced, WAIT).unwrap();
        sem.signal(v.cuda_done).unwrap();
        p.submit_return().unwrap();
        let back = p.wait_returned(WAIT).unwrap();
        assert_eq!(back.len(), 5000);
        for (k, &(off, len)) in regions.iter().enumerate() {
            let got = &back[k * 1000..k * 1000 + len as usize];
            assert_eq!(got, &content[off as usize..(off + len) as usize], "window {k}");
        }
    }
}

#[test]
fn producer_steps_out_of_order_are_rejected() {
    let _vk = common::vulkan_exclusive(); // destroys a private context
    let Some(ctx) = vk_ctx() else { return };
    let buffer = ExportableBuffer::new(&ctx, 4096, vk::BufferUsageFlags::empty()).unwrap();
    let mut p = FrameProducer::host_only(&ctx, &buffer, ProducerConfig::default()).unwrap();
    assert!(matches!(p.submit_return(), Err(Error::InvalidArgument { .. })));
    assert!(matches!(p.wait_returned(WAIT), Err(Error::InvalidArgument { .. })));
    p.submit_produce().unwrap();
    assert!(matches!(p.staging_mut(), Err(Error::InvalidArgument { .. })));
    assert!(matches!(p.submit_produce(), Err(Error::InvalidArgument { .. })));
    assert!(p.readback().is_empty());
    // Dropped with a frame in flight: the producer waits for it before destroying anything.
    drop(p);
    let other_ctx = VulkanContext::with_options(ContextOptions::default().with_private(true)).unwrap();
    assert!(!Arc::ptr_eq(&other_ctx, &ctx));
    assert!(matches!(
        FrameProducer::host_only(&other_ctx, &buffer, ProducerConfig::default()),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn steady_state_frames_do_not_allocate() {
    let _vk = common::vulkan_shared();
    let Some(ctx) = vk_ctx() else { return };
    let buffer = ExportableBuffer::new(&ctx, 16 << 10, vk::BufferUsageFlags::empty()).unwrap();
    let sem = TimelineSemaphore::new(&ctx, 0).unwrap();
    let sems = HandoffSemaphores::from_timeline(sem.clone());
    let mut p = FrameProducer::new(&ctx, &buffer, &sems, ProducerConfig::default()).unwrap();
    let frame = |p: &mut FrameProducer| {
        let staging = p.staging_mut().unwrap();
        staging[0] = staging[0].wrapping_add(1);
        let v = p.submit_produce().unwrap();
        sem.wait(v.produced, WAIT).unwrap();
        sem.signal(v.cuda_done).unwrap();
        p.submit_return().unwrap();
        let back = p.wait_returned(WAIT).unwrap();
        assert_eq!(back.len(), 16 << 10);
    };
    for _ in 0..5 {
        frame(&mut p);
    }
    let n = count_allocations(|| {
        for _ in 0..100 {
            frame(&mut p);
        }
    });
    assert_eq!(n, 0, "{n} heap allocations over 100 steady-state frames");
}

#[test]
fn handles_can_move_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<VulkanContext>();
    send_sync::<ExportableBuffer>();
    send_sync::<HostRead<'static>>();
    send_sync::<HostWrite<'static>>();
    send_sync::<ExportableImage>();
    send_sync::<TimelineSemaphore>();
    send_sync::<BinarySemaphore>();
    send_sync::<HandoffSemaphores>();
    send_sync::<CudaImportedBuffer>();
    send_sync::<CudaImportedImage>();
    send::<FrameProducer>();
    send::<CudaHandoff>();
}

/// An application's own instance and device are adopted, used for exportable buffers, images
/// and queue work, and survive the context: the owner keeps using and then destroys them (the
/// validation run in CI reports any object left on the device or any use after destruction).
#[test]
fn adopted_device_is_used_and_left_to_its_owner() {
    let _vk = common::vulkan_exclusive();
    let Some(own) = OwnVulkan::new(true, None) else { return };
    // SAFETY: the instance was created at API 1.2 from `entry`, the device on `physical` with
    // VK_KHR_external_memory_fd (and the semaphore extension where `semaphore_fd` says so) and
    // timeline semaphores, the queue is of `family`; they are destroyed only after the context
    // (below), and this test uses the queue only under `lock_queue`.
    let ctx = unsafe { VulkanContext::adopt(own.existing()) }.unwrap();
    assert!(ctx.is_adopted());
    assert_eq!(ctx.ash_device().handle(), own.device.handle());
    assert_eq!(ctx.ash_instance().handle(), own.instance.handle());
    assert_eq!(ctx.physical_device(), own.physical);
    assert_eq!(ctx.queue_family(), own.family);
    assert_eq!(ctx.has_semaphore_fd(), own.semaphore_fd);
    assert_eq!(*ctx.lock_queue(), own.queue);
    assert!(!ctx.info().name.is_empty());
    assert!(format!("{ctx:?}").contains("adopted: true"));

    // Exportable memory on the adopted device, written in place, copied by a submission on the
    // shared queue, and exported.
    let size = 64 << 10;
    let a = ExportableBuffer::new_host_visible(&ctx, size, vk::BufferUsageFlags::empty()).unwrap();
    let b = ExportableBuffer::new_host_visible(&ctx, size, vk::BufferUsageFlags::empty()).unwrap();
    let content = pattern(size as usize, 5);
    a.host_slice_mut().unwrap().copy_from_slice(&content);
    copy_buffer(&ctx, &a, &b);
    assert!(b.host_slice().unwrap()[..] == content[..]);
    drop(a.export_fd().unwrap());
    let image = ExportableImage::new(&ctx, ImageDesc::new(33, 17, vk::Format::R8G8B8A8_UNORM)).unwrap();
    let texels = pattern(image.desc().packed_size().unwrap(), 8);
    image.upload(&texels).unwrap();
    assert_eq!(image.download().unwrap(), texels);

    // The owner shares the queue under the context's lock.
    {
        let queue = ctx.lock_queue();
        // SAFETY: host access to the queue is synchronised by the held lock.
        unsafe { own.device.queue_wait_idle(*queue) }.unwrap();
    }
    drop((a, b, image));
    assert_eq!(Arc::strong_count(&ctx), 1, "no object holds the context any more");
    drop(ctx);

    // The device and instance are still the owner's, alive and usable.
    // SAFETY: a plain fence of the owner's live device, destroyed right away.
    unsafe {
        let fence = own.device.create_fence(&vk::FenceCreateInfo::default(), None).unwrap();
        own.device.destroy_fence(fence, None);
    }
    own.destroy();
}

/// What the crate cannot use is refused with a message naming it, and nothing is destroyed:
/// a queue family the device lacks, and a device created without VK_KHR_external_memory_fd.
#[test]
fn adopt_refuses_what_it_cannot_use() {
    let _vk = common::vulkan_exclusive();
    let Some(own) = OwnVulkan::new(true, None) else { return };
    let mut bad = own.existing();
    bad.queue_family = 99;
    // SAFETY: as in `adopted_device_is_used_and_left_to_its_owner`; the refused adoption keeps
    // nothing.
    match unsafe { VulkanContext::adopt(bad) } {
        Err(Error::Vulkan(VulkanError::Unavailable { reason })) => {
            assert!(reason.contains("queue family 99"), "{reason}")
        }
        other => panic!("expected a refusal naming the queue family, got {other:?}"),
    }
    own.destroy();

    let Some(own) = OwnVulkan::new(false, None) else { return };
    let mut existing = own.existing();
    existing.semaphore_fd = false;
    // SAFETY: as above, except that the device lacks VK_KHR_external_memory_fd: what the check
    // must find (the entry point does not resolve on a device that did not enable it).
    match unsafe { VulkanContext::adopt(existing) } {
        Err(Error::Vulkan(VulkanError::Unavailable { reason })) => {
            assert!(reason.contains("vkGetMemoryFdKHR"), "{reason}")
        }
        other => panic!("expected a refusal naming VK_KHR_external_memory_fd, got {other:?}"),
    }
    own.destroy();
}
