//! The Vulkan frame ring on a real GPU: bad input, every frame converted by CUDA in place and
//! verified, and no descriptor or device-memory growth across rings.
#![cfg(feature = "vulkan")]

mod common;

use common::{gpu, open_fds, serial};
use nvsci::cuda::cudarc::driver::{DevicePtr, LaunchConfig, PushKernelArg};
use nvsci::cuda::cudarc::nvrtc::Ptx;
use nvsci::pipeline::color::{fill_test_pattern, test_pattern_statistic, NV12_TO_RGBA_PTX};
use nvsci::pipeline::{FrameFormat, VulkanFrameRing};
use nvsci::vulkan::VulkanContext;
use nvsci::Error;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

#[test]
#[ignore = "needs a CUDA GPU"]
fn vulkan_ring_refuses_bad_input() {
    let _serial = serial();
    let Some(dev) = gpu() else { return };
    let vk = VulkanContext::for_cuda(&dev).unwrap();
    for frames in [0usize, 1, 17] {
        let r = VulkanFrameRing::new(&vk, &dev, FrameFormat::Rgba { width: 64, height: 64 }, frames, T);
        assert!(matches!(r, Err(Error::InvalidArgument { name: "frames", .. })), "{frames}: {r:?}");
    }
    for fmt in [FrameFormat::Nv12 { width: 63, height: 64 }, FrameFormat::Nv12 { width: 64, height: 0 }] {
        let r = VulkanFrameRing::new(&vk, &dev, fmt, 3, T);
        assert!(matches!(r, Err(Error::InvalidArgument { name: "format", .. })), "{fmt:?}: {r:?}");
    }
    let mut ring = VulkanFrameRing::new(&vk, &dev, FrameFormat::Raw { size: 4096 }, 2, T).unwrap();
    let f = ring.acquire().unwrap();
    assert!(matches!(ring.acquire(), Err(Error::InvalidArgument { name: "ring", .. })));
    let s = dev.default_stream();
    let p = ring.present(f, &s).unwrap();
    ring.release(p, &s).unwrap();
    ring.drain().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn vulkan_ring_frames_are_converted_in_place_and_verified() {
    let _serial = serial();
    let Some(dev) = gpu() else { return };
    let vk = VulkanContext::for_cuda(&dev).unwrap();
    let (w, h) = (640u32, 360u32);
    let module = dev.context().load_module(Ptx::from_src(NV12_TO_RGBA_PTX)).unwrap();
    let kernel = module.load_function("nv12_to_rgba").unwrap();
    let stream = dev.default_stream();
    let rgba = stream.alloc_zeros::<u8>((w * h * 4) as usize).unwrap();
    let mut sum = stream.alloc_zeros::<u64>(1).unwrap();
    let mut run_ring = |frames: u64| {
        let mut ring =
            VulkanFrameRing::new(&vk, &dev, FrameFormat::Nv12 { width: w, height: h }, 3, T).unwrap();
        let layout = ring.layout().clone();
        let patterns: Vec<Vec<u8>> = (0..4)
            .map(|t| {
                let mut f = vec![0u8; layout.size as usize];
                fill_test_pattern(&layout, t, &mut f).unwrap();
                f
            })
            .collect();
        let expected: Vec<u64> = (0..4).map(|t| test_pattern_statistic(w, h, t)).collect();
        for t in 0..frames {
            let f = ring.acquire().unwrap();
            assert_eq!(f.sequence(), t);
            ring.staging_mut(&f).unwrap().copy_from_slice(&patterns[(t % 4) as usize]);
            let p = ring.present(f, &stream).unwrap();
            stream.memset_zeros(&mut sum).unwrap();
            {
                let (dst, _a) = rgba.device_ptr(&stream);
                let (s, _b) = sum.device_ptr(&stream);
                let src = p.device_address();
                let (yp, uvo, uvp) =
                    (layout.planes[0].pitch, layout.planes[1].offset, layout.planes[1].pitch);
                let mut b = stream.launch_builder(&kernel);
                b.arg(&src).arg(&yp).arg(&uvo).arg(&uvp).arg(&w).arg(&h).arg(&dst).arg(&s);
                let cfg = LaunchConfig {
                    grid_dim: (w / 16, h.div_ceil(16), 1),
                    block_dim: (16, 16, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: the frame is a whole NV12 image of this layout; dst and sum match.
                unsafe { b.launch(cfg) }.unwrap();
            }
            ring.release(p, &stream).unwrap();
            let mut host = [0u64; 1];
            stream.memcpy_dtoh(&sum, &mut host).unwrap();
            stream.synchronize().unwrap();
            assert_eq!(host[0], expected[(t % 4) as usize], "frame {t}");
        }
        ring.drain().unwrap();
    };
    run_ring(4);
    let fds = open_fds();
    let free = dev.context().mem_get_info().unwrap().0;
    for _ in 0..3 {
        run_ring(100);
    }
    assert_eq!(open_fds(), fds, "descriptors leaked across rings");
    let free_now = dev.context().mem_get_info().unwrap().0;
    assert!(free_now + (8 << 20) >= free, "device memory shrank by {} bytes", free.saturating_sub(free_now));
}
