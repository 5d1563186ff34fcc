//! Vulkan -> CUDA -> Vulkan on a real NVIDIA GPU: UUID matching, zero-copy buffers, the frame
//! ping-pong with per-frame verification (timeline and binary-pair hand-off), Vulkan images read
//! through CUDA surface objects, and leak checks. Run with `--include-ignored` on a GPU host
//! (`NVSCI_REQUIRE_GPU=1` turns a missing GPU or Vulkan driver into a failure).
#![cfg(feature = "vulkan")]

mod common;

use common::kernels::{checksum, frame_key, xor_expected, SURFACE_READ_PTX, XOR_WORDS_PTX};
use common::{expected_pattern, gpu, open_fds, FILL_PATTERN_PTX};
use nvsci::cuda::cudarc::driver::{sys, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use nvsci::cuda::cudarc::nvrtc::Ptx;
use nvsci::cuda::CudaGpu;
use nvsci::vulkan::ash::vk;
use nvsci::vulkan::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);

/// Tests that measure process-wide fds and device memory, or destroy a device of their own, run
/// one at a time, each after the threads of the tests before it ended.
fn serial() -> common::VulkanGuard<std::sync::RwLockWriteGuard<'static, ()>> {
    common::vulkan_exclusive()
}

/// The CUDA device and the Vulkan device that is the same GPU.
fn setup() -> Option<(CudaGpu, Arc<VulkanContext>)> {
    let dev = gpu()?;
    match VulkanContext::for_cuda(&dev) {
        Ok(vk) => Some((dev, vk)),
        Err(e) => common::require::unavailable(
            &[common::Capability::Gpu],
            format!("no Vulkan device for the CUDA GPU: {e}"),
        ),
    }
}

fn function(dev: &CudaGpu, ptx: &str, name: &str) -> CudaFunction {
    let module = dev.context().load_module(Ptx::from_src(ptx)).expect("load PTX");
    module.load_function(name).expect("kernel")
}

fn launch_xor(stream: &Arc<CudaStream>, f: &CudaFunction, ptr: u64, bytes: u64, key: u32) {
    let words = bytes / 4;
    let mut b = stream.launch_builder(f);
    b.arg(&ptr).arg(&words).arg(&key);
    let cfg = LaunchConfig {
        grid_dim: (words.div_ceil(256) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the kernel touches `words` 4-byte words at `ptr`, a live mapping of `bytes` bytes.
    unsafe { b.launch(cfg) }.expect("launch xor_words");
}

fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn vulkan_device_is_the_cuda_device() {
    let _serial = serial();
    let Some((dev, vk)) = setup() else { return };
    eprintln!("{:?}", vk.info());
    assert_eq!(vk.uuid(), dev.gpu_id(), "UUIDs differ");
    assert_eq!(vk.info().vendor_id, 0x10de, "not an NVIDIA device");
    assert_eq!(vk.info().device_group_size, 1);
    let support = semaphore_export_support(&vk);
    assert!(support.timeline && support.binary, "{support:?}");
    assert_eq!(HandoffSemaphores::new(&vk).unwrap().mode(), HandoffMode::Timeline);
}

/// One frame both ways: CUDA reads what Vulkan wrote, then writes what Vulkan reads back.
#[test]
#[ignore = "needs a CUDA GPU"]
fn buffer_is_shared_zero_copy_in_both_directions() {
    let _serial = serial();
    let Some((dev, vk)) = setup() else { return };
    let size = (1 << 20) + 4096;
    let buffer = ExportableBuffer::new(&vk, size, vk::BufferUsageFlags::empty()).unwrap();
    let imported = buffer.import_into_cuda(&dev).unwrap();
    assert_eq!(imported.memory().size(), buffer.allocation_size());
    let sems = HandoffSemaphores::new(&vk).unwrap();
    let handoff = sems.import_into_cuda(&dev).unwrap();
    let mut producer = FrameProducer::new(&vk, &buffer, &sems, ProducerConfig::default()).unwrap();
    let fill = function(&dev, FILL_PATTERN_PTX, "fill_pattern");
    let stream = dev.context().new_stream().unwrap();

    let written = pattern(size as usize, 1);
    producer.staging_mut().unwrap().copy_from_slice(&written);
    let frame = producer.submit_produce().unwrap();
    handoff.wait_produced(&stream, &frame).unwrap();
    let seen_by_cuda = stream.clone_dtoh(imported.mapped()).unwrap();
    let (ptr, n, seed) = (imported.device_address(), size, 77u32);
    let mut b = stream.launch_builder(&fill);
    b.arg(&ptr).arg(&n).arg(&seed);
    // SAFETY: fill_pattern writes `n` bytes at `ptr`, the mapping of the `n`-byte buffer.
    unsafe { b.launch(LaunchConfig::for_num_elems(n as u32)) }.unwrap();
    handoff.signal_done(&stream, &frame).unwrap();
    producer.submit_return().unwrap();
    let back = producer.wait_returned(WAIT).unwrap();
    assert!(seen_by_cuda == written, "CUDA did not see the bytes Vulkan wrote");
    assert!(
        back == expected_pattern(size as usize, 77).as_slice(),
        "Vulkan did not see the bytes CUDA wrote"
    );
}

fn ping_pong(mode: HandoffMode, frames: u64) {
    let _serial = serial();
    let Some((dev, vk)) = setup() else { return };
    let (w, h) = (256usize, 256usize);
    let size = (w * h * 4) as u64;
    let buffer = ExportableBuffer::new(&vk, size, vk::BufferUsageFlags::STORAGE_BUFFER).unwrap();
    let imported = buffer.import_into_cuda(&dev).unwrap();
    let sems = HandoffSemaphores::with_mode(&vk, mode).unwrap();
    let handoff = sems.import_into_cuda(&dev).unwrap();
    assert_eq!(handoff.mode(), mode);
    let mut producer = FrameProducer::new(&vk, &buffer, &sems, ProducerConfig::default()).unwrap();
    assert_eq!(producer.mode(), Some(mode));
    let xor = function(&dev, XOR_WORDS_PTX, "xor_words");
    let stream = dev.context().new_stream().unwrap();
    let ptr = imported.device_address();

    let mut baseline = None;
    let start = Instant::now();
    for frame in 0..frames {
        if frame == 10 {
            common::settle(&dev);
            baseline = Some((open_fds(), dev.context().mem_get_info().unwrap().0));
        }
        let content = pattern(size as usize, frame);
        producer.staging_mut().unwrap().copy_from_slice(&content);
        let v = producer.submit_produce().unwrap();
        assert_eq!(v.frame, frame);
        handoff.wait_produced(&stream, &v).unwrap();
        launch_xor(&stream, &xor, ptr, size, frame_key(frame));
        handoff.signal_done(&stream, &v).unwrap();
        producer.submit_return().unwrap();
        let back = producer.wait_returned(WAIT).unwrap();
        let expected = xor_expected(&content, frame_key(frame));
        assert_eq!(
            checksum(back),
            checksum(&expected),
            "frame {frame}: checksum of what came back differs from Vulkan's frame transformed by CUDA"
        );
        assert!(back == expected.as_slice(), "frame {frame}: contents differ");
    }
    let elapsed = start.elapsed();
    stream.synchronize().unwrap();
    common::settle(&dev);
    if let Some((fds, free)) = baseline {
        assert_eq!(open_fds(), fds, "open fds changed during the run");
        let free_now = dev.context().mem_get_info().unwrap().0;
        assert!(
            free_now + (4 << 20) >= free,
            "device memory shrank by {} bytes during the run",
            free - free_now
        );
    }
    eprintln!(
        "{mode:?}: {frames} frames of {w}x{h} RGBA8 in {elapsed:?} ({:.0} frames/s, host checks included)",
        frames as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(producer.frames_returned(), frames);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ping_pong_1000_frames_timeline_verified_every_frame() {
    ping_pong(HandoffMode::Timeline, 1000);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ping_pong_200_frames_binary_pair_fallback() {
    ping_pong(HandoffMode::BinaryPair, 200);
}

/// Reads every texel of `array` through a surface object into host memory.
fn read_through_surface(
    dev: &CudaGpu,
    array: sys::CUarray,
    width: usize,
    height: usize,
    bpt: u32,
) -> Vec<u8> {
    let f = function(dev, SURFACE_READ_PTX, "surface_read");
    let stream = dev.default_stream();
    dev.context().bind_to_thread().unwrap();
    let desc = sys::CUDA_RESOURCE_DESC {
        resType: sys::CUresourcetype::CU_RESOURCE_TYPE_ARRAY,
        res: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1 {
            array: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_1 { hArray: array },
        },
        flags: 0,
    };
    let mut surf: sys::CUsurfObject = 0;
    // SAFETY: the array is level 0 of a live mipmapped array mapped with SURFACE_LDST; the
    // descriptor is complete.
    let r = unsafe { sys::cuSurfObjectCreate(&mut surf, &desc) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuSurfObjectCreate");
    let mut out = stream.alloc_zeros::<u8>(width * height * bpt as usize).unwrap();
    let (w, h) = (width as u32, height as u32);
    let mut b = stream.launch_builder(&f);
    b.arg(&surf).arg(&mut out).arg(&w).arg(&h).arg(&bpt);
    let cfg = LaunchConfig {
        grid_dim: (w.div_ceil(16), h.div_ceil(16), 1),
        block_dim: (16, 16, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the kernel reads texels inside the surface's width x height and writes
    // width * height * bpt bytes into `out`, which is that long.
    unsafe { b.launch(cfg) }.unwrap();
    let host = stream.clone_dtoh(&out).unwrap();
    stream.synchronize().unwrap();
    // SAFETY: created above; no queued work uses it any more (synchronised).
    unsafe { sys::cuSurfObjectDestroy(surf) };
    host
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn vulkan_images_read_back_through_cuda_surfaces() {
    let _serial = serial();
    let Some((dev, vk)) = setup() else { return };
    let formats = [
        (vk::Format::R8_UINT, false),
        (vk::Format::R8_UNORM, false),
        (vk::Format::R8G8_UINT, false),
        (vk::Format::R8G8_UNORM, false),
        (vk::Format::R8G8B8A8_UINT, false),
        (vk::Format::R8G8B8A8_UNORM, true),
        (vk::Format::R32_SFLOAT, false),
    ];
    for (i, (format, attachment)) in formats.into_iter().enumerate() {
        let name = format_name(format);
        let mut desc = ImageDesc::new(257, 131, format);
        if attachment {
            desc = desc.color_attachment();
        }
        let image = ExportableImage::new(&vk, desc).unwrap_or_else(|e| panic!("{name}: {e}"));
        let texels = pattern(desc.packed_size().unwrap(), 100 + i as u64);
        image.upload(&texels).unwrap();
        let imported = image.import_into_cuda(&dev).unwrap_or_else(|e| panic!("{name}: {e}"));
        let a = imported.array().desc();
        let cuda = cuda_array_format(format).unwrap();
        assert_eq!(
            (a.width, a.height, a.format, a.channels),
            (257, 131, cuda.format, cuda.channels),
            "{name}"
        );
        assert_eq!(a.flags & sys::CUDA_ARRAY3D_COLOR_ATTACHMENT != 0, attachment, "{name}");
        let seen = read_through_surface(&dev, imported.array().level0(), 257, 131, cuda.bytes_per_texel);
        if seen != texels {
            let first = seen.iter().zip(&texels).position(|(a, b)| a != b).unwrap_or(0);
            panic!("{name}: CUDA read different texels (first difference at byte {first})");
        }
        // Vulkan takes the image back (acquire from the external queue family) unchanged.
        assert!(image.download().unwrap() == texels, "{name}: download after the CUDA read differs");
    }
}

/// A Vulkan image of 4 mip levels maps into CUDA as a mipmapped array of 4 levels whose
/// level `i` has the image's level-`i` extent; level 0 holds what Vulkan uploaded.
#[test]
#[ignore = "needs a CUDA GPU"]
fn mipmapped_vulkan_image_imports_with_its_level_count() {
    let _serial = serial();
    let Some((dev, vk)) = setup() else { return };
    let (w, h) = (64usize, 32usize);
    let desc = ImageDesc { mip_levels: 4, ..ImageDesc::new(w as u32, h as u32, vk::Format::R8G8B8A8_UNORM) };
    let image = ExportableImage::new(&vk, desc).unwrap();
    let texels = pattern(desc.packed_size().unwrap(), 404);
    image.upload(&texels).unwrap();
    let imported = image.import_into_cuda(&dev).unwrap();
    let array = imported.array();
    assert_eq!(array.levels(), 4);
    assert_eq!(array.desc().levels, 4);
    assert_eq!(array.level(0).unwrap(), array.level0());
    for i in 0..4u32 {
        let level = array.level(i).unwrap_or_else(|e| panic!("level {i}: {e}"));
        assert!(!level.is_null(), "level {i}");
        let mut d = sys::CUDA_ARRAY3D_DESCRIPTOR {
            Width: 0,
            Height: 0,
            Depth: 0,
            Format: sys::CUarray_format::CU_AD_FORMAT_FLOAT,
            NumChannels: 0,
            Flags: 0,
        };
        dev.context().bind_to_thread().unwrap();
        // SAFETY: `level` is a live level of the mapped array; `d` is a valid out-pointer.
        let r = unsafe { sys::cuArray3DGetDescriptor_v2(&mut d, level) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuArray3DGetDescriptor level {i}");
        assert_eq!(
            (d.Width, d.Height, d.Format, d.NumChannels),
            ((w >> i).max(1), (h >> i).max(1), sys::CUarray_format::CU_AD_FORMAT_UNSIGNED_INT8, 4),
            "level {i}"
        );
    }
    assert!(!array.level(3).unwrap().is_null());
    match array.level(4) {
        Err(nvsci::Error::InvalidArgument { name, .. }) => assert_eq!(name, "level"),
        other => panic!("level 4 of 4: expected InvalidArgument, got {other:?}"),
    }
    // map_array refuses a level count outside 1..=7 (the full chain of 64x32).
    for levels in [0, 8] {
        match imported.memory().map_array(nvsci::cuda::ArrayDesc { levels, ..image.array_desc() }) {
            Err(nvsci::Error::InvalidArgument { name, .. }) => assert_eq!(name, "array.levels"),
            other => panic!("{levels} levels: expected InvalidArgument, got {other:?}"),
        }
    }
    let seen = read_through_surface(&dev, array.level0(), w, h, 4);
    assert!(seen == texels, "CUDA read different texels from level 0");
    assert!(image.download().unwrap() == texels, "download after the CUDA read differs");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn import_cycles_leak_no_fds_or_memory() {
    let _serial = serial();
    let Some((dev, vk)) = setup() else { return };
    let cycle = || {
        let buffer = ExportableBuffer::new(&vk, 1 << 20, vk::BufferUsageFlags::empty()).unwrap();
        let imported = buffer.import_into_cuda(&dev).unwrap();
        assert_ne!(imported.device_address(), 0);
        let image = ExportableImage::new(&vk, ImageDesc::new(64, 64, vk::Format::R8G8B8A8_UNORM)).unwrap();
        let array = image.import_into_cuda(&dev).unwrap();
        assert!(!array.array().level0().is_null());
        let sems = HandoffSemaphores::new(&vk).unwrap();
        let handoff = sems.import_into_cuda(&dev).unwrap();
        drop(handoff);
        // The Vulkan objects outlive the imports by construction; dropping the originals first
        // is fine.
        drop(buffer);
        drop(imported);
        drop(array);
    };
    for _ in 0..5 {
        cycle();
    }
    common::settle(&dev);
    let fds = open_fds();
    let free = dev.context().mem_get_info().unwrap().0;
    for _ in 0..200 {
        cycle();
    }
    common::settle(&dev);
    assert_eq!(open_fds(), fds, "open fds changed over 200 import cycles");
    let free_now = dev.context().mem_get_info().unwrap().0;
    assert!(
        free_now + (4 << 20) >= free,
        "device memory shrank by {} bytes over 200 cycles",
        free - free_now
    );
}

/// The application's own cudarc context (a non-primary one, so nothing can fall back to the
/// primary context unnoticed) and stream, and its own Vulkan instance and device made with ash,
/// are adopted: a host-visible buffer of the adopted Vulkan device is imported into the adopted
/// CUDA context, read and written on the application's stream, and everything the application
/// made is still its own to destroy afterwards. A stream of another context is refused.
#[cfg(not(any(feature = "cuda-13020", feature = "cuda-13030", feature = "cuda-13040")))]
#[test]
#[ignore = "needs a CUDA GPU"]
fn adopted_cudarc_context_and_vulkan_device_share_memory() {
    use nvsci::cuda::cudarc::driver::CudaContext;
    let _serial = serial();
    let Some(primary) = gpu() else { return };
    let ctx = CudaContext::new_non_primary(0, 0).unwrap();
    let stream = ctx.new_stream().unwrap();
    let cuda = CudaGpu::from_context(ctx.clone()).unwrap();
    assert!(Arc::ptr_eq(cuda.context(), &ctx));
    assert_eq!(cuda.gpu_id(), primary.gpu_id());
    assert!(cuda.owns_stream(&stream));
    assert!(!cuda.owns_stream(&primary.default_stream()));
    let cuda2 = CudaGpu::try_from(ctx.clone()).unwrap();
    assert_eq!(cuda2.gpu_id(), cuda.gpu_id());

    let Some(own) = common::own_vulkan::OwnVulkan::new(true, Some(cuda.gpu_id())) else { return };
    // SAFETY: the instance was created at API 1.2 from `entry`, the device on the physical
    // device with VK_KHR_external_memory_fd (and the semaphore extension where `semaphore_fd`
    // says so) and timeline semaphores, the queue is of `family`; they are destroyed only after
    // the context and its objects (below), and the test uses the queue only through the context.
    let vk = unsafe { VulkanContext::adopt(own.existing()) }.unwrap();
    assert_eq!(vk.uuid(), cuda.gpu_id());
    let size = (1 << 20) + 4096;
    let buffer = ExportableBuffer::new_host_visible(&vk, size, vk::BufferUsageFlags::empty()).unwrap();
    let written = pattern(size as usize, 3);
    buffer.host_slice_mut().unwrap().copy_from_slice(&written);
    let imported = buffer.import_into_cuda(&cuda).unwrap();
    let seen = stream.clone_dtoh(imported.mapped()).unwrap();
    assert!(seen == written, "the adopted CUDA context did not see the adopted Vulkan device's bytes");
    let fill = function(&cuda, FILL_PATTERN_PTX, "fill_pattern");
    let (ptr, n, seed) = (imported.device_address(), size, 21u32);
    let mut b = stream.launch_builder(&fill);
    b.arg(&ptr).arg(&n).arg(&seed);
    // SAFETY: fill_pattern writes `n` bytes at `ptr`, the mapping of the `n`-byte buffer.
    unsafe { b.launch(LaunchConfig::for_num_elems(n as u32)) }.unwrap();
    stream.synchronize().unwrap();
    assert!(
        buffer.host_slice().unwrap()[..] == expected_pattern(size as usize, 21)[..],
        "the adopted Vulkan device did not see what the kernel wrote on the application's stream"
    );

    // Semaphores of the adopted device signal and wait on the application's stream; another
    // context's stream is refused.
    if vk.has_semaphore_fd() {
        let sem = TimelineSemaphore::new_exportable(&vk, 0).unwrap();
        let imported_sem = nvsci::cuda::CudaSemaphore::import(
            &cuda,
            sem.export_fd().unwrap(),
            nvsci::cuda::SemaphoreKind::Timeline,
        )
        .unwrap();
        imported_sem.signal(&stream, 5).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(sem.value().unwrap(), 5);
        match imported_sem.signal(&primary.default_stream(), 6) {
            Err(nvsci::Error::InvalidArgument { name: "stream", .. }) => {}
            r => panic!("expected a refusal of the primary context's stream, got {r:?}"),
        }
    }
    drop((imported, buffer));
    assert_eq!(Arc::strong_count(&vk), 1);
    drop(vk);
    own.destroy();
    drop(cuda);
    drop(cuda2);
    // The application's context is still its own and usable.
    let back = stream.clone_dtoh(&stream.clone_htod(&[1u8, 2, 3]).unwrap()).unwrap();
    assert_eq!(back, [1, 2, 3]);
}
