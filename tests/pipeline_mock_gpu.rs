//! The mock NvSci on a real CUDA GPU, where it differs from the other backends: NvSciSync fences
//! that another engine signals late, imports of sync objects by hand, and every injected failure
//! on the CUDA path. The ring scenarios every backend shares (CPU and CUDA producers and
//! consumers, 1000 frames verified) run on the mock with a CUDA engine in `tests/ring`. Mock
//! buffers are page-locked host memory used in place; mock fences are counters the stream waits
//! on and writes.
#![cfg(all(feature = "mock", feature = "cuda"))]

mod common;

use common::sweep::sweep;
use common::{expected_pattern, gpu, open_fds, serial, settle};
use nvsci::cuda::cudarc::driver::CudaSlice;
use nvsci::cuda::{CudaGpu, CudaSyncObj, MemSync};
use nvsci::pipeline::{Backend, Consumer, ConsumerDesc, Engine, FrameFormat, StreamBuilder};
use nvsci::{Error, NvSci};
use std::time::Duration;

const N: usize = 64 * 1024;
const FRAMES: usize = 1000;

/// A stream of 4 `format` frames with a 10-second timeout on the mock library `lib` with `dev`
/// as its GPU engine, for a producer and consumers on these engines.
fn stream(
    lib: &NvSci,
    dev: &CudaGpu,
    format: FrameFormat,
    producer: &Engine,
    consumers: &[Engine],
) -> StreamBuilder {
    let b =
        Backend::with_library_on(lib.clone(), dev).stream(format).frames(4).timeout(Duration::from_secs(10));
    consumers.iter().fold(b.producer(producer.clone()), |b, e| b.consumer(ConsumerDesc::new(e.clone())))
}

/// Device memory in use and open fds, to compare before and after a run.
fn footprint() -> (usize, usize) {
    if let Some(dev) = gpu() {
        common::settle(&dev); // destroys queued by earlier drops have run
    }
    let (free, total) = nvsci::cuda::cudarc::driver::result::mem_get_info().unwrap();
    (total - free, open_fds())
}

fn assert_frames(results: &[u8], seeds: impl Fn(usize) -> u32) {
    for t in 0..FRAMES {
        let got = &results[t * N..(t + 1) * N];
        let want = expected_pattern(N, seeds(t));
        assert!(
            got == &want[..],
            "frame {t}: bytes differ from the pattern (first {} vs {})",
            got[0],
            want[0]
        );
    }
}

/// A CUDA consumer copying every frame into `results` on its stream.
fn consume_all(c: &mut Consumer, results: &mut CudaSlice<u8>) {
    for t in 0..FRAMES {
        c.process(|f| {
            let mut dst = results.slice_mut(t * N..(t + 1) * N);
            f.stream().memcpy_dtod(f.buffer(), &mut dst)?;
            Ok(())
        })
        .unwrap();
    }
}

/// CPU camera: writes pattern `t` after presenting with a fence it signals only once the bytes
/// are written (every 50th frame after a pause), so a consumer that did not wait would copy a
/// stale frame.
fn spawn_late_camera(mut p: nvsci::pipeline::Producer) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for t in 0..FRAMES {
            let f = p.acquire().unwrap();
            let buffer = p.buffer(&f).unwrap().dup().unwrap();
            let obj = p.present_sync().unwrap().clone();
            let fence = obj.generate_fence().unwrap();
            p.present_after(f, fence).unwrap();
            if t % 50 == 0 {
                std::thread::sleep(Duration::from_millis(3));
            }
            buffer.cpu_write().unwrap().copy_from_slice(&expected_pattern(N, t as u32));
            obj.signal().unwrap();
        }
    })
}

fn run_cpu_camera(dev: &CudaGpu) {
    let lib = NvSci::mock();
    assert_eq!(lib.gpu_interop(), nvsci::GpuInterop::HostMemory);
    let engines = [Engine::Cuda(dev.clone())];
    let ring =
        stream(&lib, dev, FrameFormat::Raw { size: N as u64 }, &Engine::Cpu, &engines).build().unwrap();
    let (p, cs) = ring.split().unwrap();
    let mut cs = cs.into_iter();
    let stream = dev.context().new_stream().unwrap();
    let mut results = stream.alloc_zeros::<u8>(N * FRAMES).unwrap();
    let mut cuda = cs.next().unwrap();
    cuda.set_stream(stream.clone()).unwrap();
    let camera = spawn_late_camera(p);
    consume_all(&mut cuda, &mut results);
    camera.join().unwrap();
    let host = stream.clone_dtoh(&results).unwrap();
    assert_frames(&host, |t| t as u32);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_consumer_waits_on_its_stream_for_late_cpu_presents_1000_frames() {
    let Some(dev) = gpu() else { return };
    let _s = serial();
    let ledger = nvsci_mock::global_ledger();
    run_cpu_camera(&dev); // warm-up: module loading and first-use allocations
    settle(&dev);
    let (mem0, fds0) = footprint();
    let handles0 = ledger.counts();
    run_cpu_camera(&dev);
    settle(&dev);
    assert_eq!(ledger.counts(), handles0, "mock handles leaked");
    let (mem1, fds1) = footprint();
    assert_eq!(fds1, fds0, "fds leaked");
    assert_eq!(mem1, mem0, "device memory leaked");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cuda_wait_on_a_fence_of_an_object_not_imported_is_refused() {
    let Some(dev) = gpu() else { return };
    let _s = serial();
    let lib = NvSci::mock();
    let ring =
        stream(&lib, &dev, FrameFormat::Raw { size: 4096 }, &Engine::Cpu, &[Engine::Cuda(dev.clone())])
            .build()
            .unwrap();
    let (mut p, cs) = ring.split().unwrap();
    let present = CudaSyncObj::import(&dev, cs[0].present_sync().unwrap()).unwrap();
    let f = p.acquire().unwrap();
    p.present(f).unwrap();
    // A fence of the release object (not imported here) handed to the present import.
    let release = cs[0].release_sync().unwrap();
    // A cleared fence enqueues nothing: fine when memory synchronisation is skipped, refused when
    // the wait would have to invalidate GPU caches (Auto without the process-wide promise).
    let cleared = nvsci::sync::Fence::cleared();
    assert!(present.wait(&dev.default_stream(), &cleared, MemSync::Skip).is_ok());
    assert!(matches!(
        present.wait(&dev.default_stream(), &cleared, MemSync::Auto),
        Err(Error::InvalidArgument { name: "fence", .. })
    ));
    let other = p.present_sync().unwrap().generate_fence().unwrap();
    p.present_sync().unwrap().signal().unwrap();
    let rel_import = CudaSyncObj::import(&dev, release).unwrap();
    match rel_import.wait(&dev.default_stream(), &other, MemSync::Auto) {
        Err(Error::InvalidArgument { name: "fence", .. }) => {}
        r => panic!("expected a refusal, got {r:?}"),
    }
    // The GPU wait on an imported counter really holds the stream until the CPU signals.
    let late = p.present_sync().unwrap().generate_fence().unwrap();
    let s = dev.context().new_stream().unwrap();
    present.wait(&s, &late, MemSync::Auto).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    // SAFETY: querying a stream this test created.
    let busy = unsafe { nvsci::cuda::cudarc::driver::sys::cuStreamQuery(s.cu_stream()) };
    assert_eq!(
        busy,
        nvsci::cuda::cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_READY,
        "the stream did not wait"
    );
    p.present_sync().unwrap().signal().unwrap();
    s.synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn dropping_the_cuda_consumer_while_its_stream_waits_returns_and_frees_after_the_work() {
    let Some(dev) = gpu() else { return };
    let _s = serial();
    let ledger = nvsci_mock::global_ledger();
    settle(&dev); // destroys queued by earlier tests have run
    let before = ledger.counts();
    {
        let lib = NvSci::mock();
        let ring = stream(
            &lib,
            &dev,
            FrameFormat::Raw { size: N as u64 },
            &Engine::Cpu,
            &[Engine::Cuda(dev.clone())],
        )
        .build()
        .unwrap();
        let (mut p, cs) = ring.split().unwrap();
        let stream = dev.context().new_stream().unwrap();
        let mut results = stream.alloc_zeros::<u8>(N).unwrap();
        let mut c = cs.into_iter().next().unwrap();
        c.set_stream(stream.clone()).unwrap();
        // Present with a fence the CPU signals only after the consumer is being dropped.
        let f = p.acquire().unwrap();
        let buffer = p.buffer(&f).unwrap().dup().unwrap();
        let obj = p.present_sync().unwrap().clone();
        p.present_after(f, obj.generate_fence().unwrap()).unwrap();
        c.process(|f| {
            let mut dst = results.slice_mut(..);
            f.stream().memcpy_dtod(f.buffer(), &mut dst).map_err(Error::from)
        })
        .unwrap();
        let (go, wait_go) = std::sync::mpsc::channel::<()>();
        let late = std::thread::spawn(move || {
            wait_go.recv().unwrap();
            buffer.cpu_write().unwrap().copy_from_slice(&expected_pattern(N, 9));
            obj.signal().unwrap();
        });
        let t = std::time::Instant::now();
        drop(c); // returns at once: the unmapping waits for the queued copy on the teardown thread
        eprintln!("drop of the consumer took {:?} while its stream waited", t.elapsed());
        // The stream cannot have run the copy yet (its fence is signalled only below), so what
        // it uses is still queued for destruction, not destroyed.
        assert!(dev.pending_teardown() > 0, "destroyed while a queued copy may still use it");
        go.send(()).unwrap();
        late.join().unwrap();
        assert_eq!(stream.clone_dtoh(&results).unwrap(), expected_pattern(N, 9));
        drop(p);
    }
    settle(&dev);
    assert_eq!(ledger.counts(), before, "mock handles leaked");
}

/// The ring with a CUDA consumer on the mock in its GPU mode, for the fault sweep.
fn cuda_ring_flow(dev: &CudaGpu) -> nvsci::Result<()> {
    let lib = NvSci::mock();
    let ring = stream(&lib, dev, FrameFormat::Raw { size: 4096 }, &Engine::Cpu, &[Engine::Cuda(dev.clone())])
        .frames(2)
        .timeout(Duration::from_millis(500))
        .build()?;
    let (mut p, cs) = ring.split()?;
    let stream = dev.context().new_stream()?;
    let mut c = cs.into_iter().next().unwrap();
    c.set_stream(stream.clone())?;
    c.set_mem_sync(MemSync::Perform)?;
    for t in 0..3u8 {
        let f = p.acquire()?;
        p.cpu_write(&f)?[0] = t;
        p.present(f)?;
        c.process(|_| Ok(()))?;
    }
    stream.synchronize()?;
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_injected_failure_on_the_cuda_path_surfaces_typed_and_leaks_nothing() {
    let Some(dev) = gpu() else { return };
    let _s = serial();
    // Absorbed by design: teardown waits (the ring leaks rather than frees), and the import's
    // GpuSwNeedCacheCoherency query, whose failure means "coherency needed" (as for NvSciBuf
    // before 2.8, which has no such key).
    let absorbable = [
        "NvSciSyncFenceWait",
        // The duplicate a teardown wait waits on.
        "NvSciSyncFenceDup",
        "NvSciSyncCpuWaitContextAlloc",
        "NvSciBufObjGetAttrList",
        "NvSciBufAttrListSlotGetAttrs",
    ];
    let s = sweep("CUDA ring", 1, || cuda_ring_flow(&dev), || settle(&dev), &absorbable, |_, _, _| {});
    eprintln!(
        "CUDA ring flow: {} injection points, {} typed errors naming the function, {} absorbed by \
         teardown ({})",
        s.points,
        s.surfaced,
        s.absorbed.len(),
        s.absorbed.join(", ")
    );
    let calls = s.calls;
    assert!(calls.contains(&"SyncObjGenerateEngineFence") && calls.contains(&"BufObjGetHostMemory"));
}

#[path = "../examples/support/nv12_pattern.rs"]
mod nv12_pattern;

/// A block-linear NV12 ring on the mock with a CUDA consumer: the CPU camera puts every frame
/// with `put_pixels`; the consumer converts it through the planes' arrays (mapped read-only with
/// flags 0, read through texture objects) on its stream, with the token calls (no linear mapping); every frame's RGBA matches the CPU converter's, byte for byte, and its statistic
/// the pattern's own.
#[test]
#[ignore = "needs a CUDA GPU"]
fn block_linear_ring_converts_on_cuda_as_the_cpu_converter_does() {
    use nvsci::buf::{ImageLayout, PlaneSrc};
    use nvsci::convert::{nv12_to_rgba, Nv12ToRgba};
    use nvsci::cuda::cudarc::driver::DevicePtrMut;
    use nvsci::pipeline::FrameLayout;
    let _serial = serial();
    let Some(dev) = gpu() else { return };
    let (w, h) = (1000u32, 562u32);
    let frames = 64u64;
    let engines = [Engine::Cuda(dev.clone())];
    let ring = stream(&NvSci::mock(), &dev, FrameFormat::nv12_block_linear(w, h), &Engine::Cpu, &engines)
        .build()
        .unwrap();
    assert_eq!(ring.layout().format.image_layout(), Some(ImageLayout::BlockLinear));
    let (mut p, mut cs) = ring.split().unwrap();
    let mut c = cs.remove(0);
    let stream = dev.context().new_stream().unwrap();
    c.set_stream(stream.clone()).unwrap();
    let kernel = Nv12ToRgba::load(&dev).unwrap();
    let px = (w * h * 4) as usize;
    let mut rgba = stream.alloc_zeros::<u8>(px * frames as usize).unwrap();
    let mut sums = stream.alloc_zeros::<u64>(frames as usize).unwrap();
    let packed = FrameLayout::packed(FrameFormat::nv12(w, h), 1, 1).unwrap();
    let pattern = move |t: u64| {
        let packed = FrameLayout::packed(FrameFormat::nv12(w, h), 1, 1).unwrap();
        let mut f = vec![0u8; packed.size as usize];
        nv12_pattern::fill_test_pattern(&packed, t, &mut f).unwrap();
        f
    };
    let camera = std::thread::spawn({
        let packed = packed.clone();
        move || {
            for t in 0..frames {
                let f = p.acquire().unwrap();
                let frame = pattern(t);
                let (y, uv) = frame.split_at(packed.planes[1].offset as usize);
                // Y, U and V user planes (nvscibuf.h): the interleaved chroma split first.
                let mut split = nvsci::buf::SplitChroma::new(w / 2, h / 2, 1);
                split.split_from(PlaneSrc { data: uv, pitch: w }).unwrap();
                let [u, v] = split.planes();
                p.put_pixels(&f, None, &[PlaneSrc { data: y, pitch: w }, u, v]).unwrap();
                p.present(f).unwrap();
            }
        }
    });
    for t in 0..frames as usize {
        // The token calls: the planes' textures, and no linear mapping of the tiled frame.
        let f = c.acquire().unwrap();
        let planes = c.cuda_planes(&f).unwrap();
        assert_eq!(planes.len(), 2, "a block-linear frame's planes as arrays");
        for plane in planes {
            // A read-only import asks for no load/store access and is read through a texture.
            assert_eq!(plane.array().desc().flags, 0);
            assert_eq!(plane.options(), nvsci::cuda::TextureOptions::default());
        }
        let (dst, _g) = rgba.device_ptr_mut(&stream);
        let (sum, _s) = sums.device_ptr_mut(&stream);
        // SAFETY: `rgba` holds `frames` RGBA images and `sums` one u64 per frame, alive until
        // the stream is synchronised below.
        unsafe {
            kernel.enqueue_planes(&stream, c.layout(), planes, dst + (t * px) as u64, sum + 8 * t as u64)
        }
        .unwrap();
        drop((_g, _s));
        c.release(f).unwrap();
    }
    camera.join().unwrap();
    stream.synchronize().unwrap();
    let (host, host_sums) = (stream.clone_dtoh(&rgba).unwrap(), stream.clone_dtoh(&sums).unwrap());
    let mut want = vec![0u8; px];
    for t in 0..frames {
        let s = nv12_to_rgba(&packed, &pattern(t), &mut want).unwrap();
        let got = &host[t as usize * px..][..px];
        let bad = got.iter().zip(&want).position(|(a, b)| a != b);
        assert!(bad.is_none(), "frame {t}: first byte that differs from the CPU converter: {bad:?}");
        assert_eq!(host_sums[t as usize], s, "frame {t}: statistic");
        assert_eq!(s, nv12_pattern::test_pattern_statistic(w, h, t), "frame {t}: CPU statistic");
    }
}

/// The production path for a CPU that makes block-linear frames (nvscibuf.h restricts
/// `NvSciBufObjPutPixels` to debug software): the CPU writes pitch-linear NV12, a CUDA producer
/// has the GPU lay it out (`upload_planes`: a `cuMemcpy2DAsync` per plane into its array,
/// between the ring's release waits and present signal), and a CPU consumer reads back, through
/// the library's own layout (`get_pixels`), exactly the pixels written, frame after frame.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cuda_producer_lays_out_pitch_linear_pixels_into_block_linear_frames() {
    use nvsci::buf::{PlaneDst, SplitChroma};
    use nvsci::pipeline::FrameLayout;
    let _serial = serial();
    let Some(dev) = gpu() else { return };
    let (w, h) = (1000u32, 562u32);
    let ring = stream(
        &NvSci::mock(),
        &dev,
        FrameFormat::nv12_block_linear(w, h),
        &Engine::Cuda(dev.clone()),
        &[Engine::Cpu],
    )
    .build()
    .unwrap();
    let (mut p, mut cs) = ring.split().unwrap();
    let c = &mut cs[0];
    let packed = FrameLayout::packed(FrameFormat::nv12(w, h), 1, 1).unwrap();
    let split_at = packed.planes[1].offset as usize;
    let (cw, ch) = ((w / 2) as usize, (h / 2) as usize);
    // A bad request first: one buffer for two planes.
    let f = p.acquire().unwrap();
    match p.upload_planes(&f, &[&vec![0u8; 16][..]]) {
        Err(Error::InvalidArgument { name: "src", .. }) => {}
        r => panic!("expected a refusal naming src, got {r:?}"),
    }
    drop(f);
    for t in 0..8u64 {
        let mut frame = vec![0u8; packed.size as usize];
        nv12_pattern::fill_test_pattern(&packed, t, &mut frame).unwrap();
        let (y, uv) = frame.split_at(split_at);
        if t % 2 == 0 {
            let f = p.acquire().unwrap();
            p.upload_planes(&f, &[y, uv]).unwrap();
            p.present(f).unwrap();
        } else {
            p.produce(|f| f.upload_planes(&[y, uv])).unwrap();
        }
        let g = c.acquire().unwrap();
        let (mut gy, mut gu, mut gv) = (vec![0u8; split_at], vec![0u8; cw * ch], vec![0u8; cw * ch]);
        c.get_pixels(
            &g,
            None,
            &mut [
                PlaneDst { data: &mut gy, pitch: w },
                PlaneDst { data: &mut gu, pitch: w / 2 },
                PlaneDst { data: &mut gv, pitch: w / 2 },
            ],
        )
        .unwrap();
        c.release(g).unwrap();
        assert!(gy == y, "frame {t}: luma differs");
        let mut split = SplitChroma::new(w / 2, h / 2, 1);
        split.split_from(nvsci::buf::PlaneSrc { data: &uv[..cw * 2 * ch], pitch: w }).unwrap();
        let [u, v] = split.planes();
        assert!(gu[..] == u.data[..cw * ch] && gv[..] == v.data[..cw * ch], "frame {t}: chroma differs");
    }
}
