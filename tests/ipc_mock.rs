//! Cross-process sharing on the mock: endpoints, export/import of lists, buffers, sync objects
//! and fences, the frame ring with consumers in other processes (one, and a multicast of
//! several processes beside an in-process consumer), and every bad input the IPC issue names.
//! The multi-process tests re-run this test binary as the peer processes
//! (`child_process_entry`), under `$NVSCI_CHILD_RUNNER` when set (qemu for cross-compiled
//! runs).
#![cfg(feature = "mock")]

mod common;

use nvsci::buf::{BufAttr, BufAttrList, BufModule, BufObj, BufType, Perm};
use nvsci::ipc::{BufObjDescriptor, FenceDescriptor, Ipc, IpcEndpoint};
use nvsci::pipeline::{Backend, Consumer, ConsumerDesc, Engine, FrameFormat, Producer, StreamBuilder};
use nvsci::sync::{SyncAttr, SyncAttrList, SyncModule, SyncObj, SyncPerm};
use nvsci::{Error, IpcError, NvSci, NvSciError, RingError, Wait};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

const T: Option<Duration> = Some(Duration::from_secs(10));
const RING_TIMEOUT: Duration = Duration::from_secs(10);
const FRAME: u64 = 64 * 1024;
const CHILD_ENV: &str = "NVSCI_IPC_TEST_CHILD";
/// The peer's endpoint name.
const CHILD_EP: &str = "NVSCI_IPC_TEST_EP";
/// How many frames the peer expects (`consumer` scenarios) or takes before it dies (`dies`).
const CHILD_FRAMES: &str = "NVSCI_IPC_TEST_FRAMES";
/// The ring index the peer expects the producer to give it.
const CHILD_INDEX: &str = "NVSCI_IPC_TEST_INDEX";
/// At most this many cross-process waits until one is ended by a wake (a signal that lands
/// between two of the wait's bounded sleeps is seen without one).
const WAKE_ROUNDS: u64 = 3;
/// The block-linear NV12 frames of the cross-process test.
const BL_W: usize = 128;
const BL_H: usize = 64;

use common::processes::{ledger_is_clean, pattern, use_dir, wait_child};

fn fill(bytes: &mut [u8], seq: u64) {
    common::processes::fill(bytes, seq, FRAME as usize)
}

fn check(bytes: &[u8], seq: u64, who: &str) {
    common::processes::check(bytes, seq, FRAME as usize, who)
}

/// A fresh directory with an nvsciipc.cfg declaring `pairs`.
fn ipc_dir(tag: &str, pairs: &[(&str, &str)]) -> PathBuf {
    common::processes::ipc_dir("ipc", tag, pairs)
}

/// As [`ipc_dir`], with channels of `nframes` frames of `frame_size` bytes.
fn ipc_dir_sized(tag: &str, pairs: &[(&str, &str)], nframes: u32, frame_size: u32) -> PathBuf {
    common::processes::ipc_dir_sized("ipc", tag, pairs, nframes, frame_size)
}

fn spawn_child(scenario: &str, dir: &Path) -> Child {
    spawn_child_with(scenario, dir, &[])
}

fn spawn_child_with(scenario: &str, dir: &Path, env: &[(&str, String)]) -> Child {
    common::processes::spawn_child(CHILD_ENV, scenario, dir, env).child
}

/// Luma and interleaved chroma (V, U) of block-linear frame `seq`, packed rows.
fn bl_planes(seq: u64) -> (Vec<u8>, Vec<u8>) {
    let luma = (0..BL_W * BL_H).map(|i| (seq as usize * 7 + (i % BL_W) * 3 + (i / BL_W) * 5) as u8).collect();
    let chroma =
        (0..BL_W * BL_H / 2).map(|i| (seq as usize * 11 + (i % BL_W) * 13 + (i / BL_W) * 17) as u8).collect();
    (luma, chroma)
}

/// A stream of `format` frames on `lib` over 4 frames with a CPU producer, no consumer yet.
fn stream(lib: &NvSci, format: FrameFormat, timeout: Duration) -> StreamBuilder {
    Backend::with_library(lib.clone()).stream(format).frames(4).timeout(timeout)
}

/// The consumer process's attach as `engine`, in FIFO mode with no limit.
fn attach(lib: &NvSci, ep: IpcEndpoint, format: FrameFormat, engine: Engine, timeout: Duration) -> Consumer {
    Consumer::connect_with(lib, ep, format, ConsumerDesc::new(engine), timeout).unwrap()
}

/// Presents `frames` frames with their patterns (each acquire waits until every consumer
/// released the slot).
fn produce(p: &mut Producer, frames: u64) {
    for seq in 0..frames {
        let f = p.acquire().unwrap();
        assert_eq!(f.sequence(), seq);
        fill(&mut p.cpu_write(&f).unwrap(), seq);
        p.present(f).unwrap();
    }
}

/// A CPU consumer's loop: takes and checks frames in order until the producer ends the stream;
/// returns how many it took.
fn consume(c: &mut Consumer, who: &str) -> u64 {
    let mut n = 0u64;
    loop {
        let f = match c.acquire() {
            Ok(f) => f,
            Err(Error::Ring(RingError::Ended { .. })) => return n,
            Err(e) => panic!("{who}: acquire failed after {n} frames: {e:?}"),
        };
        assert_eq!(f.sequence(), n, "{who}: frames arrive in order");
        check(&c.cpu_read(&f).unwrap(), f.sequence(), who);
        c.release(f).unwrap();
        n += 1;
    }
}

fn raw_list(m: &BufModule, perm: Perm) -> BufAttrList {
    let mut l = m.attr_list().unwrap();
    l.set(&[
        BufAttr::Types(&[BufType::RAW_BUFFER]),
        BufAttr::RawSize(FRAME),
        BufAttr::NeedCpuAccess(true),
        BufAttr::RequiredPerm(perm),
    ])
    .unwrap();
    l
}

/// The sync lists `lists` exported unreconciled over `from` and imported at `to` (a peer's lists
/// as the process at `to` receives them).
fn relay(m: &SyncModule, from: &IpcEndpoint, to: &IpcEndpoint, lists: &[&SyncAttrList]) -> SyncAttrList {
    m.import_unreconciled(to, &SyncAttrList::export_unreconciled(lists, from).unwrap()).unwrap()
}

/// Opens both ends of `pair` in this process and waits until they are connected.
fn pair(ipc: &Ipc, a: &str, b: &str) -> (IpcEndpoint, IpcEndpoint) {
    let x = IpcEndpoint::open(ipc, a).unwrap();
    let y = IpcEndpoint::open(ipc, b).unwrap();
    y.wait_connected(T).unwrap();
    x.wait_connected(T).unwrap();
    (x, y)
}

// ------------------------------------------------------------------------------------------
// The peer process.
// ------------------------------------------------------------------------------------------

/// Entry point of the peer process of the two-process tests: not a test of its own (ignored, so
/// it is not counted as a pass; run with `--include-ignored`, it is reported as not run) unless started
/// by one of them (with `NVSCI_IPC_TEST_CHILD` set), in which case it runs that scenario and
/// panics (a non-zero exit) on any mismatch.
#[test]
#[ignore = "the peer process of the two-process tests, which start it"]
fn child_process_entry() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else {
        return common::require::not_a_test("only runs as the peer process the two-process tests start");
    };
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let ep_name = std::env::var(CHILD_EP).unwrap_or_else(|_| "ring_1".into());
    let frames: u64 = std::env::var(CHILD_FRAMES).map_or(200, |v| v.parse().unwrap());
    let index: Option<usize> = std::env::var(CHILD_INDEX).ok().map(|v| v.parse().unwrap());
    let connect = |engine: Engine| {
        let ep = IpcEndpoint::open(&ipc, &ep_name).unwrap();
        let c = attach(&lib, ep, FrameFormat::Raw { size: FRAME }, engine, RING_TIMEOUT);
        if let Some(i) = index {
            assert_eq!(c.ring_index(), i, "the producer's index for this consumer");
        }
        assert_eq!(c.id(), 0);
        c
    };
    match scenario.as_str() {
        "consumer" => {
            let mut c = connect(Engine::Cpu);
            assert_eq!(consume(&mut c, &ep_name), frames);
            drop(c);
            ledger_is_clean();
        }
        #[cfg(feature = "cuda")]
        "cuda_consumer" => {
            use nvsci::cuda::cudarc::driver::CudaSlice;
            let dev = common::gpu().expect("the parent found a GPU");
            let mut c = connect(Engine::Cuda(dev));
            let stream = c.stream().unwrap().context().new_stream().unwrap();
            c.set_stream(stream.clone()).unwrap();
            let n = FRAME as usize;
            let mut copies: CudaSlice<u8> = stream.alloc_zeros(n * frames as usize).unwrap();
            for t in 0..frames as usize {
                // Stream wait on the present fence, a copy of the frame, stream signal of the
                // release fence: the CPU waits on no fence.
                c.process(|f| {
                    assert_eq!(f.sequence(), t as u64);
                    let mut dst = copies.slice_mut(t * n..(t + 1) * n);
                    f.stream().memcpy_dtod(f.buffer(), &mut dst).map_err(Error::from)
                })
                .unwrap();
            }
            assert!(
                matches!(c.acquire(), Err(Error::Ring(RingError::Ended { .. }))),
                "the producer ended the stream"
            );
            let host = stream.clone_dtoh(&copies).unwrap();
            for t in 0..frames as usize {
                check(&host[t * n..(t + 1) * n], t as u64, &ep_name);
            }
            drop((copies, c));
        }
        "bl_cpu_consumer" => {
            use nvsci::buf::{PlaneDst, SplitChroma};
            let ep = IpcEndpoint::open(&ipc, &ep_name).unwrap();
            let format = FrameFormat::nv12_block_linear(BL_W as u32, BL_H as u32);
            let mut c = attach(&lib, ep, format, Engine::Cpu, RING_TIMEOUT);
            for seq in 0..frames {
                let f = c.acquire().unwrap();
                assert_eq!(f.sequence(), seq);
                let (mut luma, mut chroma) = (vec![0u8; BL_W * BL_H], vec![0u8; BL_W * BL_H / 2]);
                // Y, U and V user planes (nvscibuf.h); the chroma interleaved afterwards.
                let mut split = SplitChroma::new(BL_W as u32 / 2, BL_H as u32 / 2, 1);
                {
                    let [u, v] = split.planes_mut();
                    let mut planes = [PlaneDst { data: &mut luma, pitch: BL_W as u32 }, u, v];
                    c.get_pixels(&f, None, &mut planes).unwrap();
                }
                split.interleave_into(PlaneDst { data: &mut chroma, pitch: BL_W as u32 }).unwrap();
                let (want_luma, want_chroma) = bl_planes(seq);
                assert!(
                    luma == want_luma && chroma == want_chroma,
                    "frame {seq} differs from what the producer put"
                );
                c.release(f).unwrap();
            }
            assert!(matches!(c.acquire(), Err(Error::Ring(RingError::Ended { .. }))));
            drop(c);
            ledger_is_clean();
        }
        #[cfg(feature = "cuda")]
        "bl_cuda_consumer" => {
            use nvsci::cuda::ArrayRegion;
            let dev = common::gpu().expect("the parent found a GPU");
            let ep = IpcEndpoint::open(&ipc, &ep_name).unwrap();
            let format = FrameFormat::nv12_block_linear(BL_W as u32, BL_H as u32);
            let mut c = attach(&lib, ep, format, Engine::Cuda(dev), RING_TIMEOUT);
            let stream = c.stream().unwrap().clone();
            for seq in 0..frames {
                let f = c.acquire().unwrap();
                assert_eq!(f.sequence(), seq);
                let planes = c.cuda_planes(&f).unwrap();
                assert_eq!(planes.len(), 2, "luma and chroma arrays");
                // Copies on the consumer's stream, after its wait for the present fence.
                let mut luma = vec![0u8; BL_W * BL_H];
                planes[0]
                    .array()
                    .copy_to_host_async(&stream, 0, ArrayRegion::new(0, 0, BL_W, BL_H), &mut luma)
                    .unwrap();
                let mut chroma = vec![0u8; BL_W * BL_H / 2];
                let half = ArrayRegion::new(0, 0, BL_W / 2, BL_H / 2);
                planes[1].array().copy_to_host_async(&stream, 0, half, &mut chroma).unwrap();
                let (want_luma, want_chroma) = bl_planes(seq);
                assert!(luma == want_luma, "frame {seq}: the luma array differs from what the producer put");
                assert!(
                    chroma == want_chroma,
                    "frame {seq}: the chroma array differs from what the producer put"
                );
                c.release(f).unwrap();
            }
            assert!(matches!(c.acquire(), Err(Error::Ring(RingError::Ended { .. }))));
            drop(c);
        }
        "dies" => {
            let mut c = connect(Engine::Cpu);
            for _ in 0..frames {
                let f = c.acquire().unwrap();
                c.release(f).unwrap();
            }
            // Dies mid-stream, holding everything: no destructor, no exit handler runs (and,
            // unlike an abort, no core file is written).
            // SAFETY: `_exit` ends the process at once; nothing runs after it.
            unsafe { libc::_exit(3) };
        }
        "permissions" => {
            let ep = IpcEndpoint::open(&ipc, "perm_1").unwrap();
            ep.wait_connected(T).unwrap();
            let m = BufModule::open(&lib).unwrap();
            let own = raw_list(&m, Perm::ReadOnly);
            ep.send_message(BufAttrList::export_unreconciled(&[&own], &ep).unwrap().as_bytes(), T).unwrap();
            let rec = ep.recv_message(T).unwrap();
            let rec = m
                .import_reconciled(&ep, &nvsci::ipc::AttrListDescriptor::from_bytes(&rec).unwrap(), &[&own])
                .unwrap();
            let d = BufObjDescriptor::from_bytes(&ep.recv_message(T).unwrap()).unwrap();
            // A read-only export asked for read-write: typed error, nothing imported.
            match BufObj::import(&ep, &d, &rec, T) {
                Err(Error::ImportPermission { requested, .. }) => assert_eq!(requested, "read-write access"),
                other => panic!("expected ImportPermission, got {other:?}"),
            }
            let ro = BufObj::import_read_only(&ep, &d, &rec, T).unwrap();
            assert_eq!(ro.as_buf_obj().perm(), Perm::ReadOnly);
            assert!(
                matches!(ro.as_buf_obj().cpu_write(), Err(Error::PermissionDenied(_))),
                "a read-only import cannot be written"
            );
            let bytes = ro.cpu_read().unwrap();
            assert!(bytes.iter().take(FRAME as usize).enumerate().all(|(i, b)| *b == pattern(99, i)));
            drop(bytes);
            ep.send_message(b"ok", T).unwrap();
            drop((ro, rec, own, m, ep, ipc));
            ledger_is_clean();
        }
        "fence_waiter" => {
            // Waits on fences of an object the parent signals; reports after each wait whether
            // a wake from the parent's signal ended a sleep of it.
            let ep = IpcEndpoint::open(&ipc, "wake_1").unwrap();
            ep.wait_connected(T).unwrap();
            let m = SyncModule::open(&lib).unwrap();
            let waiter = sync_list(&m, SyncPerm::WaitOnly);
            ep.send_message(SyncAttrList::export_unreconciled(&[&waiter], &ep).unwrap().as_bytes(), T)
                .unwrap();
            let d = nvsci::ipc::AttrListDescriptor::from_bytes(&ep.recv_message(T).unwrap()).unwrap();
            let obj = m.import_attr_list_and_obj(&ep, &d, &[&waiter], SyncPerm::WaitOnly, T).unwrap();
            let mut ctx = m.cpu_wait_context().unwrap();
            let mut woken = false;
            for value in 1..=WAKE_ROUNDS {
                let fd = FenceDescriptor::from_bytes(&ep.recv_message(T).unwrap()).unwrap();
                let f = obj.import_fence(&fd).unwrap();
                assert_eq!(f.id_value().unwrap().1, value);
                let before = nvsci_mock::cpu_wait_stats();
                ep.send_message(b"waiting", T).unwrap();
                f.wait(&mut ctx, T).unwrap();
                let after = nvsci_mock::cpu_wait_stats();
                assert!(
                    after.sleeps > before.sleeps,
                    "the wait slept (round {value}): {before:?} -> {after:?}"
                );
                let this = after.woken > before.woken;
                ep.send_message(&[u8::from(this)], T).unwrap();
                woken |= this;
                if woken {
                    break;
                }
            }
            assert!(woken, "no wait of {WAKE_ROUNDS} was woken by the other process's signal");
            drop((obj, ctx, waiter, m, ep, ipc));
            ledger_is_clean();
        }
        other => panic!("unknown scenario {other}"),
    }
}

// ------------------------------------------------------------------------------------------
// Two processes.
// ------------------------------------------------------------------------------------------

/// A ring whose consumers are all in other processes (CPU consumers at the other ends of
/// `endpoints`).
fn remote_ring(lib: &NvSci, ipc: &Ipc, endpoints: &[&str], timeout: Duration) -> Producer {
    let ring = endpoints
        .iter()
        .fold(stream(lib, FrameFormat::Raw { size: FRAME }, timeout), |b, n| {
            b.remote_consumer(IpcEndpoint::open(ipc, n).unwrap(), ConsumerDesc::cpu())
        })
        .build()
        .unwrap();
    let (p, local) = ring.split().unwrap();
    assert!(local.is_empty(), "every consumer is in another process");
    p
}

#[test]
fn two_processes_share_frames_and_fences() {
    let dir = ipc_dir("ring", &[("ring_0", "ring_1")]);
    let _g = use_dir(&dir);
    let child = spawn_child("consumer", &dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let mut p = remote_ring(&lib, &ipc, &["ring_0"], RING_TIMEOUT);
    produce(&mut p, 200);
    // Dropping the producer ends the stream and takes the frames back.
    drop(p);
    let status = wait_child(child, Duration::from_secs(60));
    assert!(status.success(), "consumer process failed: {status}");
    drop(ipc);
    ledger_is_clean();
}

#[test]
fn a_peer_that_dies_is_a_typed_error_and_the_survivor_frees_everything() {
    let dir = ipc_dir("death", &[("ring_0", "ring_1")]);
    let _g = use_dir(&dir);
    let child = spawn_child_with("dies", &dir, &[(CHILD_FRAMES, "3".into())]);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let mut p = remote_ring(&lib, &ipc, &["ring_0"], Duration::from_secs(5));
    let started = Instant::now();
    let err = loop {
        let f = match p.acquire() {
            Ok(f) => f,
            Err(e) => break e,
        };
        p.cpu_write(&f).unwrap()[0] = 1;
        p.present(f).unwrap();
    };
    assert!(
        matches!(err, Error::Ipc(IpcError::PeerGone { ref endpoint, .. }) if endpoint == "ring_0"),
        "expected IpcError::PeerGone naming ring_0, got {err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5), "noticed within the timeout");
    let _ = wait_child(child, Duration::from_secs(30));
    drop(p);
    drop(ipc);
    ledger_is_clean();
}

/// Frames of the multicast scenarios: 1000, or 200 under an emulator (`NVSCI_CHILD_RUNNER`, which
/// toolchain/cargo-aarch64.toml sets for qemu), where a frame costs some 50 times more.
fn multicast_frames() -> u64 {
    if std::env::var("NVSCI_CHILD_RUNNER").is_ok_and(|r| !r.is_empty()) {
        200
    } else {
        1000
    }
}

/// Starts the two consumer processes of the multicast tests (ring indices 1 and 2): `a` runs
/// scenario `a` with `a_frames`, `b` a CPU consumer of `b_frames`.
fn spawn_pair(dir: &Path, a: &str, a_frames: u64, b: &str, b_frames: u64) -> (Child, Child) {
    let env = |ep: &str, frames: u64, index: usize| {
        [(CHILD_EP, ep.to_owned()), (CHILD_FRAMES, frames.to_string()), (CHILD_INDEX, index.to_string())]
    };
    (
        spawn_child_with(a, dir, &env("mc_a_1", a_frames, 1)),
        spawn_child_with(b, dir, &env("mc_b_1", b_frames, 2)),
    )
}

/// A ring of three consumers on `engine`: consumer 0 in this process, consumers 1 and 2 in the
/// processes at the other ends of `mc_a_0` and `mc_b_0`.
fn multicast_ring(lib: &NvSci, ipc: &Ipc, engine: Engine, timeout: Duration) -> (Producer, Consumer) {
    let ring = stream(lib, FrameFormat::Raw { size: FRAME }, timeout)
        .consumer(ConsumerDesc::new(engine.clone()))
        .remote_consumer(IpcEndpoint::open(ipc, "mc_a_0").unwrap(), ConsumerDesc::new(engine.clone()))
        .remote_consumer(IpcEndpoint::open(ipc, "mc_b_0").unwrap(), ConsumerDesc::new(engine))
        .build()
        .unwrap();
    let (p, mut local) = ring.split().unwrap();
    assert_eq!(local.len(), 1, "one consumer in this process");
    let c = local.pop().unwrap();
    assert_eq!((c.id(), c.ring_index()), (0, 0));
    (p, c)
}

/// Takes `frames` frames on a CPU consumer, checking each.
fn take_cpu(c: &mut Consumer, frames: u64) {
    for seq in 0..frames {
        let f = c.acquire().unwrap();
        assert_eq!(f.sequence(), seq, "in-process consumer: frames arrive in order");
        check(&c.cpu_read(&f).unwrap(), seq, "in-process consumer");
        c.release(f).unwrap();
    }
}

/// One producer, one consumer in this process and two in other processes: every consumer
/// reads every one of 1000 frames (200 under an emulator), checked byte by byte against the frame's pattern, and a slot
/// is rewritten only after all three released it (a consumer that read a slot the producer had
/// already rewritten would see another frame's pattern).
#[test]
fn two_consumer_processes_and_one_in_process_consumer_each_verify_a_thousand_frames() {
    let dir = ipc_dir("multicast", &[("mc_a_0", "mc_a_1"), ("mc_b_0", "mc_b_1")]);
    let _g = use_dir(&dir);
    let (a, b) = spawn_pair(&dir, "consumer", multicast_frames(), "consumer", multicast_frames());
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let (mut p, mut c) = multicast_ring(&lib, &ipc, Engine::Cpu, RING_TIMEOUT);
    let local = std::thread::spawn(move || {
        take_cpu(&mut c, multicast_frames());
        c
    });
    produce(&mut p, multicast_frames());
    let c = local.join().unwrap();
    drop(p);
    for (name, child) in [("a", a), ("b", b)] {
        let status = wait_child(child, Duration::from_secs(120));
        assert!(status.success(), "consumer process {name} failed: {status}");
    }
    drop((c, ipc));
    ledger_is_clean();
}

/// A consumer process that dies mid-stream does not hang the producer: its next acquire
/// reports `IpcError::PeerGone` naming that consumer's endpoint once, the consumer is dropped from the
/// multicast, and the other process and the in-process consumer receive every frame.
#[test]
fn a_consumer_process_that_dies_mid_stream_is_dropped_from_the_multicast() {
    let dir = ipc_dir("multicast-death", &[("mc_a_0", "mc_a_1"), ("mc_b_0", "mc_b_1")]);
    let _g = use_dir(&dir);
    let frames = 200;
    let (a, b) = spawn_pair(&dir, "dies", 5, "consumer", frames);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let (mut p, mut c) = multicast_ring(&lib, &ipc, Engine::Cpu, RING_TIMEOUT);
    let local = std::thread::spawn(move || {
        take_cpu(&mut c, frames);
        c
    });
    let mut errors = Vec::new();
    let mut seq = 0;
    while seq < frames {
        match p.acquire() {
            Ok(f) => {
                assert_eq!(f.sequence(), seq);
                fill(&mut p.cpu_write(&f).unwrap(), seq);
                p.present(f).unwrap();
                seq += 1;
            }
            Err(e) => {
                errors.push(e);
                assert!(errors.len() < 10, "the producer keeps failing: {errors:?}");
            }
        }
    }
    assert_eq!(errors.len(), 1, "one error, once: {errors:?}");
    assert!(
        matches!(&errors[0], Error::Ipc(IpcError::PeerGone { endpoint, .. }) if endpoint == "mc_a_0"),
        "expected IpcError::PeerGone naming mc_a_0, got {errors:?}"
    );
    let c = local.join().unwrap();
    drop(p);
    let _ = wait_child(a, Duration::from_secs(30));
    let status = wait_child(b, Duration::from_secs(120));
    assert!(status.success(), "surviving consumer process failed: {status}");
    drop((c, ipc));
    ledger_is_clean();
}

/// The multicast with CUDA consumers (the mock in GPU mode): two consumer processes and one
/// in-process consumer each copy every one of 1000 frames on their streams (a stream wait on
/// the present fence, a stream signal of the release fence) and check the copies.
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA GPU"]
fn two_cuda_consumer_processes_and_one_in_process_cuda_consumer_each_verify_a_thousand_frames() {
    use nvsci::cuda::cudarc::driver::CudaSlice;
    let dir = ipc_dir("multicast-cuda", &[("mc_a_0", "mc_a_1"), ("mc_b_0", "mc_b_1")]);
    // Serialised before CUDA starts: the driver opens descriptors, which other tests count.
    let _g = use_dir(&dir);
    let Some(dev) = common::gpu() else { return };
    let frames = multicast_frames();
    let (a, b) = spawn_pair(&dir, "cuda_consumer", frames, "cuda_consumer", frames);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let (mut p, mut c) = multicast_ring(&lib, &ipc, Engine::Cuda(dev.clone()), RING_TIMEOUT);
    let local = std::thread::spawn(move || {
        let stream = c.stream().unwrap().context().new_stream().unwrap();
        c.set_stream(stream.clone()).unwrap();
        let n = FRAME as usize;
        let mut copies: CudaSlice<u8> = stream.alloc_zeros(n * frames as usize).unwrap();
        for t in 0..frames as usize {
            c.process(|f| {
                assert_eq!(f.sequence(), t as u64);
                let mut dst = copies.slice_mut(t * n..(t + 1) * n);
                f.stream().memcpy_dtod(f.buffer(), &mut dst).map_err(Error::from)
            })
            .unwrap();
        }
        let host = stream.clone_dtoh(&copies).unwrap();
        for t in 0..frames as usize {
            check(&host[t * n..(t + 1) * n], t as u64, "in-process CUDA consumer");
        }
        drop(copies);
        c
    });
    produce(&mut p, frames);
    let c = local.join().unwrap();
    drop(p);
    for (name, child) in [("a", a), ("b", b)] {
        let status = wait_child(child, Duration::from_secs(300));
        assert!(status.success(), "CUDA consumer process {name} failed: {status}");
    }
    drop((c, ipc));
    // The imports' destroys (and the descriptors they hold) finish before the next test counts
    // descriptors.
    assert_eq!(dev.flush_teardown(Duration::from_secs(10)), 0, "teardown finished");
}

/// Block-linear frames across processes on the mock in GPU mode: the producer (the CPU, in this
/// process) puts each frame with `put_pixels` into images the mock backs with CUDA virtual memory
/// (see docs/mock.md); the consumer process imports them (the allocation's fd travels over the
/// endpoint), maps both planes as CUDA arrays and reads them back on its stream after its wait
/// for the present fence: every byte as put.
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA GPU"]
fn block_linear_frames_cross_processes_to_a_cuda_consumer_reading_arrays() {
    let dir = ipc_dir("bl-cuda", &[("bl_0", "bl_1")]);
    let _g = use_dir(&dir);
    let Some(dev) = common::gpu() else { return };
    block_linear_frames_to_a_consumer_process(&dir, "bl_cuda_consumer", Engine::Cuda(dev.clone()));
    assert_eq!(dev.flush_teardown(Duration::from_secs(10)), 0, "teardown finished");
}

/// The same with a CPU consumer reading each frame with `get_pixels` (host pages, no GPU).
#[test]
fn block_linear_frames_cross_processes_to_a_cpu_consumer_reading_pixels() {
    let dir = ipc_dir("bl-cpu", &[("bl_0", "bl_1")]);
    let _g = use_dir(&dir);
    block_linear_frames_to_a_consumer_process(&dir, "bl_cpu_consumer", Engine::Cpu);
    ledger_is_clean();
}

/// Puts 30 block-linear NV12 frames (`bl_planes`) with a CPU producer for a consumer process
/// running `scenario` (a consumer on `engine`) at the other end of `bl_0` / `bl_1`, and checks
/// the process succeeded.
fn block_linear_frames_to_a_consumer_process(dir: &Path, scenario: &str, engine: Engine) {
    use nvsci::buf::{PlaneSrc, SplitChroma};
    let frames = 30u64;
    let child =
        spawn_child_with(scenario, dir, &[(CHILD_EP, "bl_1".into()), (CHILD_FRAMES, frames.to_string())]);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let ep = IpcEndpoint::open(&ipc, "bl_0").unwrap();
    let format = FrameFormat::nv12_block_linear(BL_W as u32, BL_H as u32);
    let ring =
        stream(&lib, format, RING_TIMEOUT).remote_consumer(ep, ConsumerDesc::new(engine)).build().unwrap();
    let (mut p, _) = ring.split().unwrap();
    for seq in 0..frames {
        let f = p.acquire().unwrap();
        let (luma, chroma) = bl_planes(seq);
        // Y, U and V user planes (nvscibuf.h): the interleaved chroma split first.
        let mut split = SplitChroma::new(BL_W as u32 / 2, BL_H as u32 / 2, 1);
        split.split_from(PlaneSrc { data: &chroma, pitch: BL_W as u32 }).unwrap();
        let [u, v] = split.planes();
        p.put_pixels(&f, None, &[PlaneSrc { data: &luma, pitch: BL_W as u32 }, u, v]).unwrap();
        p.present(f).unwrap();
    }
    drop(p);
    let status = wait_child(child, Duration::from_secs(120));
    assert!(status.success(), "{scenario} process failed: {status}");
    drop(ipc);
}

/// A CPU wait in another process on a fence this process signals later sleeps (the blocking
/// path, not a spin) and is woken by the signal: the importer maps the same counter page and
/// sleeps on a futex in it that is not private to one process, and the signal's wake crosses the
/// process boundary. The child counts its sleeps and the wakes that ended them
/// (`nvsci_mock::cpu_wait_stats`); a futex private to each process would only ever end the
/// child's sleeps by their 2 ms bound.
#[test]
fn a_wait_in_another_process_sleeps_until_the_signal_wakes_it() {
    let dir = ipc_dir("wake", &[("wake_0", "wake_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let child = spawn_child("fence_waiter", &dir);
    let ep = IpcEndpoint::open(&ipc, "wake_0").unwrap();
    ep.wait_connected(T).unwrap();
    let m = SyncModule::open(&lib).unwrap();
    let theirs = m
        .import_unreconciled(
            &ep,
            &nvsci::ipc::AttrListDescriptor::from_bytes(&ep.recv_message(T).unwrap()).unwrap(),
        )
        .unwrap();
    let signaler = sync_list(&m, SyncPerm::SignalOnly);
    let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&signaler, &theirs]).unwrap()).unwrap();
    ep.send_message(obj.export_with_attr_list(SyncPerm::WaitOnly, &ep).unwrap().as_bytes(), T).unwrap();
    let mut woken = false;
    for _ in 0..WAKE_ROUNDS {
        let f = obj.generate_fence().unwrap();
        ep.send_message(f.export(&ep).unwrap().as_bytes(), T).unwrap();
        assert_eq!(ep.recv_message(T).unwrap(), b"waiting");
        // Long enough for the child's 30 us spin to end: it is asleep when the signal comes.
        std::thread::sleep(Duration::from_millis(50));
        obj.signal().unwrap();
        woken = ep.recv_message(T).unwrap() == [1];
        if woken {
            break;
        }
    }
    assert!(woken, "no wait of {WAKE_ROUNDS} in the child was woken by this process's signal");
    assert!(wait_child(child, Duration::from_secs(30)).success());
    drop((obj, signaler, theirs, m, ep, ipc));
    ledger_is_clean();
}

#[test]
fn permissions_hold_across_processes() {
    let dir = ipc_dir("perm", &[("perm_0", "perm_1")]);
    let _g = use_dir(&dir);
    let child = spawn_child("permissions", &dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let ep = IpcEndpoint::open(&ipc, "perm_0").unwrap();
    ep.wait_connected(T).unwrap();
    let m = BufModule::open(&lib).unwrap();
    let theirs = m
        .import_unreconciled(
            &ep,
            &nvsci::ipc::AttrListDescriptor::from_bytes(&ep.recv_message(T).unwrap()).unwrap(),
        )
        .unwrap();
    let own = raw_list(&m, Perm::ReadWrite);
    let rec = BufAttrList::reconcile(&[&own, &theirs]).unwrap();
    let obj = BufObj::alloc(&rec).unwrap();
    obj.cpu_write()
        .unwrap()
        .iter_mut()
        .take(FRAME as usize)
        .enumerate()
        .for_each(|(i, b)| *b = pattern(99, i));
    ep.send_message(rec.export_reconciled(&ep).unwrap().as_bytes(), T).unwrap();
    ep.send_message(obj.export(Perm::ReadOnly, &ep).unwrap().as_bytes(), T).unwrap();
    assert_eq!(ep.recv_message(T).unwrap(), b"ok");
    let status = wait_child(child, Duration::from_secs(60));
    assert!(status.success(), "importing process failed: {status}");
    drop((obj, rec, own, theirs, m, ep, ipc));
    ledger_is_clean();
}

// ------------------------------------------------------------------------------------------
// One process, both ends.
// ------------------------------------------------------------------------------------------

#[test]
fn endpoint_names_are_checked() {
    let dir = ipc_dir("names", &[("known_0", "known_1")]);
    let _g = use_dir(&dir);
    let ipc = Ipc::mock().unwrap();
    match IpcEndpoint::open(&ipc, "not_there") {
        Err(Error::Ipc(IpcError::Endpoint { endpoint, code, .. })) => {
            assert_eq!(endpoint, "not_there");
            assert_eq!(code, Some(NvSciError(nvsci::sys::NvSciError_NoSuchEntry)), "not configured");
        }
        other => panic!("expected Ipc error, got {other:?}"),
    }
    let a = IpcEndpoint::open(&ipc, "known_0").unwrap();
    match IpcEndpoint::open(&ipc, "known_0") {
        Err(Error::Ipc(IpcError::Endpoint { endpoint, code, .. })) => {
            assert_eq!(endpoint, "known_0");
            assert_eq!(code, Some(NvSciError(nvsci::sys::NvSciError_Busy)), "already open");
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    // Names the library would not take are refused before the call (no status code).
    let long = "x".repeat(64);
    assert!(matches!(IpcEndpoint::open(&ipc, &long), Err(Error::Ipc(IpcError::Endpoint { code: None, .. }))));
    assert!(matches!(
        IpcEndpoint::open(&ipc, "a\0b"),
        Err(Error::Ipc(IpcError::Endpoint { code: None, .. }))
    ));
    assert_eq!(a.info().frame_size, 4096);
    assert_eq!(a.info().frames, 16);
    // Nobody at the other end: connecting times out with a typed error.
    let t = Some(Duration::from_millis(50));
    assert!(
        matches!(a.wait_connected(t), Err(Error::Timeout { waited_for: Wait::Endpoint { ref endpoint, .. }, .. })
            if endpoint == "known_0")
    );
    drop(a);
    drop(ipc);
    ledger_is_clean();
}

#[test]
fn frames_and_messages_round_trip_and_oversize_frames_are_refused() {
    let dir = ipc_dir("msgs", &[("m_0", "m_1")]);
    let _g = use_dir(&dir);
    let ipc = Ipc::mock().unwrap();
    let (a, b) = pair(&ipc, "m_0", "m_1");
    a.write(b"hello", T).unwrap();
    let mut buf = [0u8; 4096];
    // Frames carry no length (nvsciipc.h: NvSciIpcReadSafe copies the size asked for;
    // NvSciIpcWriteSafe fills "the remaining bytes of the frame" "with zero"): the read reports
    // the whole buffer, zeros after what was written.
    buf.fill(0xee);
    let n = b.read(&mut buf, T).unwrap();
    assert_eq!(n, 4096);
    assert_eq!(&buf[..5], b"hello");
    assert!(buf[5..].iter().all(|&x| x == 0), "the rest of the frame reads as zero");
    // A smaller buffer gets exactly its size.
    a.write(b"hello again", T).unwrap();
    let mut small = [0u8; 8];
    assert_eq!(b.read(&mut small, T).unwrap(), 8);
    assert_eq!(&small, b"hello ag");
    let big: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    b.send_message(&big, T).unwrap();
    assert_eq!(a.recv_message(T).unwrap(), big);
    assert!(matches!(a.write(&vec![0u8; 4097], T), Err(Error::Ipc(IpcError::Endpoint { .. }))));
    // Nothing to read: a typed timeout.
    assert!(matches!(
        a.read(&mut buf, Some(Duration::from_millis(20))),
        Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. })
    ));
    // The event descriptor reports readable data.
    b.write(b"x", T).unwrap();
    let mut p =
        libc::pollfd { fd: std::os::fd::AsRawFd::as_raw_fd(&a.event_fd()), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    assert_eq!(unsafe { libc::poll(&mut p, 1, 5000) }, 1);
    assert!(a.events().unwrap().readable());
    drop((a, b, ipc));
    ledger_is_clean();
}

#[test]
fn descriptors_from_another_endpoint_or_corrupted_are_refused() {
    let dir = ipc_dir("foreign", &[("a_0", "a_1"), ("b_0", "b_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let (a0, a1) = pair(&ipc, "a_0", "a_1");
    let (_b0, b1) = pair(&ipc, "b_0", "b_1");
    let m = BufModule::open(&lib).unwrap();
    let l = raw_list(&m, Perm::ReadWrite);
    let d = BufAttrList::export_unreconciled(&[&l], &a0).unwrap();
    assert!(m.import_unreconciled(&a1, &d).is_ok());
    assert!(
        matches!(m.import_unreconciled(&b1, &d), Err(Error::InvalidDescriptor { .. })),
        "another endpoint's"
    );
    let mut bytes = d.as_bytes().to_vec();
    bytes.truncate(bytes.len() - 3);
    let truncated = nvsci::ipc::AttrListDescriptor::from_bytes(&bytes).unwrap();
    assert!(matches!(m.import_unreconciled(&a1, &truncated), Err(Error::InvalidDescriptor { .. })));
    let mut flipped = d.as_bytes().to_vec();
    flipped[20] ^= 0x40;
    let flipped = nvsci::ipc::AttrListDescriptor::from_bytes(&flipped).unwrap();
    assert!(matches!(m.import_unreconciled(&a1, &flipped), Err(Error::InvalidDescriptor { .. })));
    assert!(matches!(
        BufObjDescriptor::from_bytes(&[0u8; 255]),
        Err(Error::InvalidDescriptor { what: "NvSciBuf object", .. })
    ));
    assert!(matches!(FenceDescriptor::from_bytes(&[0u8; 57]), Err(Error::InvalidDescriptor { .. })));

    // An object descriptor imported with a list it was not allocated from.
    let rec = BufAttrList::reconcile(&[&l]).unwrap();
    let obj = BufObj::alloc(&rec).unwrap();
    let od = obj.export(Perm::ReadWrite, &a0).unwrap();
    let rec_d = rec.export_reconciled(&a0).unwrap();
    let rec_in = m.import_reconciled(&a1, &rec_d, &[]).unwrap();
    let mut other = m.attr_list().unwrap();
    other
        .set(&[
            BufAttr::Types(&[BufType::RAW_BUFFER]),
            BufAttr::RawSize(2 * FRAME),
            BufAttr::NeedCpuAccess(true),
        ])
        .unwrap();
    let other_rec = BufAttrList::reconcile(&[&other]).unwrap();
    assert!(matches!(BufObj::import(&a1, &od, &other_rec, T), Err(Error::InvalidDescriptor { .. })));
    let mut bad = *od.as_bytes();
    bad[40] ^= 1;
    let bad = BufObjDescriptor::from_bytes(&bad).unwrap();
    assert!(matches!(BufObj::import(&a1, &bad, &rec_in, T), Err(Error::InvalidDescriptor { .. })));
    let imported = BufObj::import(&a1, &od, &rec_in, T).unwrap();
    // Same memory: a write through one is read through the other.
    obj.cpu_write().unwrap()[5] = 0xab;
    assert_eq!(imported.cpu_read().unwrap()[5], 0xab);
    // Granting more than the exporting reference holds.
    let ro = obj.dup_with_reduced_perm(Perm::ReadOnly).unwrap();
    assert!(matches!(ro.export(Perm::ReadWrite, &a0), Err(Error::PermissionDenied(_))));
    drop((imported, ro, obj, rec_in, rec, other_rec, other, l, m, a0, a1, _b0, b1, ipc));
    ledger_is_clean();
}

fn sync_list(m: &SyncModule, perm: SyncPerm) -> SyncAttrList {
    let mut l = m.attr_list().unwrap();
    l.set(&[SyncAttr::NeedCpuAccess(true), SyncAttr::RequiredPerm(perm)]).unwrap();
    l
}

#[test]
fn sync_objects_and_fences_cross_and_foreign_fences_are_refused() {
    let dir = ipc_dir("sync", &[("s_0", "s_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let (s0, s1) = pair(&ipc, "s_0", "s_1");
    let m = SyncModule::open(&lib).unwrap();
    let waiter = sync_list(&m, SyncPerm::WaitOnly);
    let waiter_in = relay(&m, &s1, &s0, &[&waiter]);
    let signaler = sync_list(&m, SyncPerm::SignalOnly);
    let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&signaler, &waiter_in]).unwrap()).unwrap();
    let pair_d = obj.export_with_attr_list(SyncPerm::WaitOnly, &s0).unwrap();
    let theirs = m.import_attr_list_and_obj(&s1, &pair_d, &[&waiter], SyncPerm::WaitOnly, T).unwrap();
    let mut ctx = m.cpu_wait_context().unwrap();
    let f = obj.generate_fence().unwrap();
    let fd = f.export(&s0).unwrap();
    let imported = theirs.import_fence(&fd).unwrap();
    // Not yet signalled: the importer's wait times out.
    assert!(matches!(
        imported.wait(&mut ctx, Some(Duration::from_millis(20))),
        Err(Error::Timeout { waited_for: Wait::Fence { .. }, .. })
    ));
    obj.signal().unwrap();
    imported.wait(&mut ctx, T).unwrap();
    // A fence of another object.
    let obj2 = SyncObj::alloc(
        &SyncAttrList::reconcile(&[&sync_list(&m, SyncPerm::SignalOnly), &sync_list(&m, SyncPerm::WaitOnly)])
            .unwrap(),
    )
    .unwrap();
    let f2 = obj2.generate_fence().unwrap();
    let fd2 = f2.export(&s0).unwrap();
    assert!(matches!(theirs.import_fence(&fd2), Err(Error::InvalidDescriptor { .. })));
    // A cleared fence round-trips cleared.
    let cleared = nvsci::sync::Fence::cleared().export(&s0).unwrap();
    assert!(theirs.import_fence(&cleared).unwrap().is_cleared());
    obj2.signal().unwrap();
    drop((f, f2, imported, obj, obj2, theirs, ctx, waiter, waiter_in, signaler, m, s0, s1, ipc));
    ledger_is_clean();
}

/// A sync object imported with more permission than its export granted: nvscisync.h (DRIVE OS
/// 6.0.10) documents no `AccessDenied` for NvSciSync imports; `NvSciSyncObjIpcImport` answers
/// `BadParameter` ("@a permissions is invalid"), as does `NvSciSyncIpcImportAttrListAndObj`
/// (`minPermissions` "Valid value: NvSciSyncAccessPerm_WaitOnly and NvSciSyncAccessPerm_Auto"). So
/// the refusal is an invalid sync-object descriptor (whose explanation names the permission beside
/// another endpoint, truncation and corruption), through either import; the same descriptors
/// asked for what was granted import.
#[test]
fn a_sync_import_asking_for_more_than_was_granted_is_an_invalid_descriptor() {
    let dir = ipc_dir("syncperm", &[("sp_0", "sp_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let (s0, s1) = pair(&ipc, "sp_0", "sp_1");
    let m = SyncModule::open(&lib).unwrap();
    let waiter = sync_list(&m, SyncPerm::WaitOnly);
    let waiter_in = relay(&m, &s1, &s0, &[&waiter]);
    let signaler = sync_list(&m, SyncPerm::SignalOnly);
    let rec = SyncAttrList::reconcile(&[&signaler, &waiter_in]).unwrap();
    let obj = SyncObj::alloc(&rec).unwrap();
    let refused = |r: nvsci::Result<SyncObj>| match r {
        Err(Error::InvalidDescriptor { what, .. }) => assert_eq!(what, "NvSciSync object"),
        other => panic!("expected an invalid NvSciSync object descriptor, got {other:?}"),
    };
    // NvSciSyncIpcImportAttrListAndObj: wait-only granted, wait and signal asked for.
    let pair_d = obj.export_with_attr_list(SyncPerm::WaitOnly, &s0).unwrap();
    refused(m.import_attr_list_and_obj(&s1, &pair_d, &[&waiter], SyncPerm::WaitSignal, T));
    let pair_d = obj.export_with_attr_list(SyncPerm::WaitOnly, &s0).unwrap();
    let ok = m.import_attr_list_and_obj(&s1, &pair_d, &[&waiter], SyncPerm::WaitOnly, T).unwrap();
    drop(ok);
    // NvSciSyncObjIpcImport, with the reconciled list imported on its own.
    let rec_in = m.import_reconciled(&s1, &rec.export_reconciled(&s0).unwrap(), &[&waiter]).unwrap();
    let d = obj.export(SyncPerm::WaitOnly, &s0).unwrap();
    refused(SyncObj::import(&s1, &d, &rec_in, SyncPerm::WaitSignal, T));
    refused(SyncObj::import(&s1, &d, &rec_in, SyncPerm::SignalOnly, T));
    let d = obj.export(SyncPerm::WaitOnly, &s0).unwrap();
    let ok = SyncObj::import(&s1, &d, &rec_in, SyncPerm::WaitOnly, T).unwrap();
    drop((ok, rec_in, rec, obj, signaler, waiter_in, waiter, m, s0, s1, ipc));
    ledger_is_clean();
}

/// NvSciSync reconciles CPU access per peer: "When importing the reconciled NvSciSyncAttrList
/// NvSciSync will set the key to OR of values of this key in unreconciled NvSciSyncAttrList(s)
/// relayed by the peer" (`NvSciSyncAttrKey_NeedCpuAccess`, nvscisync.h, DRIVE OS 6.0.10), and
/// `NvSciSyncFenceWait` answers BadParameter "if caller doesn't have CPU wait permissions in
/// NvSciSyncObj associated with syncFence". A process whose own waiter lists are an engine's
/// (`NeedCpuAccess` false, as CUDA's) may not CPU-wait, although the reconciler's CPU waits; a
/// process that sent the CPU's waiter list beside the engine's may.
#[test]
fn cpu_wait_permission_is_reconciled_per_peer() {
    let dir = ipc_dir("percpu", &[("p_0", "p_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let (p0, p1) = pair(&ipc, "p_0", "p_1");
    let m = SyncModule::open(&lib).unwrap();
    let mut engine_waiter = m.attr_list().unwrap();
    engine_waiter.set(&[SyncAttr::NeedCpuAccess(false), SyncAttr::RequiredPerm(SyncPerm::WaitOnly)]).unwrap();
    let cpu_waiter = sync_list(&m, SyncPerm::WaitOnly);
    // The reconciler (p0's side) signals and waits on the CPU itself.
    let signaler = sync_list(&m, SyncPerm::SignalOnly);
    let own_cpu_waiter = sync_list(&m, SyncPerm::WaitOnly);
    let mut ctx = m.cpu_wait_context().unwrap();

    for (theirs, cpu_may_wait) in [(vec![&engine_waiter], false), (vec![&engine_waiter, &cpu_waiter], true)] {
        let relayed = relay(&m, &p1, &p0, &theirs);
        let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&signaler, &own_cpu_waiter, &relayed]).unwrap())
            .unwrap();
        let pair_d = obj.export_with_attr_list(SyncPerm::WaitOnly, &p0).unwrap();
        let imported = m.import_attr_list_and_obj(&p1, &pair_d, &theirs, SyncPerm::WaitOnly, T).unwrap();
        let f = obj.generate_fence().unwrap();
        let fd = f.export(&p0).unwrap();
        obj.signal().unwrap();
        // The reconciler's CPU asked to wait, so it may.
        f.wait(&mut ctx, T).unwrap();
        let fence_in = imported.import_fence(&fd).unwrap();
        match fence_in.wait(&mut ctx, T) {
            Ok(()) => assert!(cpu_may_wait, "a CPU wait without this process's CPU waiter list succeeded"),
            Err(Error::Refused { culprit, .. }) => {
                assert!(!cpu_may_wait, "the CPU waiter list was sent, yet the wait was refused");
                assert_eq!(culprit, nvsci::Culprit::NotCpuWaiter);
            }
            Err(e) => panic!("unexpected error: {e:?}"),
        }
        drop((fence_in, f, imported, obj, relayed));
    }
    drop((ctx, engine_waiter, cpu_waiter, signaler, own_cpu_waiter, m, p0, p1, ipc));
    ledger_is_clean();
}

/// The reconciler's side of the same rule: "reconciler sets value of this key to true in the
/// reconciled NvSciSyncAttrList if any of the unreconciled NvSciSyncAttrList(s) involved in
/// reconciliation that is owned by the reconciler has this key set to true"
/// (`NvSciSyncAttrKey_NeedCpuAccess`, nvscisync.h, DRIVE OS 6.0.10). A CPU waiter list relayed by
/// a peer gives the reconciling process no CPU wait permission; its own CPU waiter list does.
#[test]
fn the_reconcilers_cpu_waits_only_on_the_strength_of_its_own_lists() {
    let dir = ipc_dir("reccpu", &[("r_0", "r_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let (r0, r1) = pair(&ipc, "r_0", "r_1");
    let m = SyncModule::open(&lib).unwrap();
    let signaler = sync_list(&m, SyncPerm::SignalOnly);
    let peer_cpu_waiter = sync_list(&m, SyncPerm::WaitOnly);
    let own_cpu_waiter = sync_list(&m, SyncPerm::WaitOnly);
    let mut ctx = m.cpu_wait_context().unwrap();
    let relayed = relay(&m, &r1, &r0, &[&peer_cpu_waiter]);
    for (own, cpu_may_wait) in
        [(vec![&signaler, &relayed], false), (vec![&signaler, &own_cpu_waiter, &relayed], true)]
    {
        let obj = SyncObj::alloc(&SyncAttrList::reconcile(&own).unwrap()).unwrap();
        let f = obj.generate_fence().unwrap();
        obj.signal().unwrap();
        match f.wait(&mut ctx, T) {
            Ok(()) => {
                assert!(cpu_may_wait, "the reconciler waited on the strength of a peer's CPU waiter list")
            }
            Err(Error::Refused { culprit, .. }) => {
                assert!(
                    !cpu_may_wait,
                    "the reconciler's own CPU waiter list was given, yet the wait was refused"
                );
                assert_eq!(culprit, nvsci::Culprit::NotCpuWaiter);
            }
            Err(e) => panic!("unexpected error: {e:?}"),
        }
        drop((f, obj));
    }
    drop((ctx, relayed, signaler, peer_cpu_waiter, own_cpu_waiter, m, r0, r1, ipc));
    ledger_is_clean();
}

/// The signal side of the rule: a CPU signaler list relayed by a peer does not make the
/// reconciling process's CPU the signaler (its reconciled `NeedCpuAccess` comes from its own
/// lists), so its `NvSciSyncObjSignal` answers "syncObj is not a CPU Signaler".
#[test]
fn a_peers_cpu_signaler_list_does_not_let_the_reconciler_signal() {
    let dir = ipc_dir("recsig", &[("s_0", "s_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let (s0, s1) = pair(&ipc, "s_0", "s_1");
    let m = SyncModule::open(&lib).unwrap();
    let peer_signaler = sync_list(&m, SyncPerm::SignalOnly);
    let own_waiter = sync_list(&m, SyncPerm::WaitOnly);
    let relayed = relay(&m, &s1, &s0, &[&peer_signaler]);
    let obj = SyncObj::alloc(&SyncAttrList::reconcile(&[&own_waiter, &relayed]).unwrap()).unwrap();
    match obj.signal() {
        Err(Error::Refused { culprit, .. }) => assert_eq!(culprit, nvsci::Culprit::NotCpuSignaler),
        other => panic!("the reconciler signalled on the strength of a peer's list: {other:?}"),
    }
    // Its own signaler list does.
    let own_signaler = sync_list(&m, SyncPerm::SignalOnly);
    let mine = SyncObj::alloc(&SyncAttrList::reconcile(&[&own_signaler, &own_waiter]).unwrap()).unwrap();
    let f = mine.generate_fence().unwrap();
    mine.signal().unwrap();
    drop((f, mine, obj, relayed, own_signaler, own_waiter, peer_signaler, m, s0, s1, ipc));
    ledger_is_clean();
}

#[test]
fn a_thousand_export_import_cycles_leak_no_fd_and_no_handle() {
    let dir = ipc_dir("fds", &[("f_0", "f_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let (f0, f1) = pair(&ipc, "f_0", "f_1");
    let m = BufModule::open(&lib).unwrap();
    let l = raw_list(&m, Perm::ReadWrite);
    let rec = BufAttrList::reconcile(&[&l]).unwrap();
    let rec_in = m.import_reconciled(&f1, &rec.export_reconciled(&f0).unwrap(), &[]).unwrap();
    let obj = BufObj::alloc(&rec).unwrap();
    let sm = SyncModule::open(&lib).unwrap();
    let sobj = SyncObj::alloc(
        &SyncAttrList::reconcile(&[
            &sync_list(&sm, SyncPerm::SignalOnly),
            &sync_list(&sm, SyncPerm::WaitOnly),
        ])
        .unwrap(),
    )
    .unwrap();
    let cycle = || {
        let d = obj.export(Perm::ReadOnly, &f0).unwrap();
        let ro = BufObj::import_read_only(&f1, &d, &rec_in, T).unwrap();
        assert_eq!(ro.size(), FRAME);
        let sd = sobj.export_with_attr_list(SyncPerm::WaitOnly, &f0).unwrap();
        let so = sm.import_attr_list_and_obj(&f1, &sd, &[], SyncPerm::WaitOnly, T).unwrap();
        drop((ro, so));
    };
    cycle();
    let before = common::open_fds();
    let handles = nvsci_mock::global_ledger().counts();
    for _ in 0..1000 {
        cycle();
    }
    assert_eq!(common::open_fds(), before, "fds leaked over 1000 export/import cycles");
    assert_eq!(nvsci_mock::global_ledger().counts(), handles, "handles leaked");
    drop((obj, sobj, rec_in, rec, l, m, sm, f0, f1, ipc));
    ledger_is_clean();
}

#[test]
fn the_ring_runs_between_two_threads_and_rejects_bad_consumer_lists() {
    let dir = ipc_dir("threads", &[("t_0", "t_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let raw = FrameFormat::Raw { size: FRAME };
    let ep = IpcEndpoint::open(&ipc, "t_0").unwrap();
    // One frame is no ring; a consumer limit of 0 holds no frame: both refused before anything
    // is sent.
    assert!(matches!(
        stream(&lib, raw, RING_TIMEOUT).frames(1).remote_consumer(ep, ConsumerDesc::cpu()).build(),
        Err(Error::InvalidArgument { name: "frames", .. })
    ));
    let ep = IpcEndpoint::open(&ipc, "t_0").unwrap();
    assert!(matches!(
        stream(&lib, raw, RING_TIMEOUT).remote_consumer(ep, ConsumerDesc::cpu().with_limit(0)).build(),
        Err(Error::InvalidArgument { name: "limit", .. })
    ));
    let (lib2, ipc2) = (lib.clone(), ipc.clone());
    let consumer = std::thread::spawn(move || {
        let ep = IpcEndpoint::open(&ipc2, "t_1").unwrap();
        let mut c = attach(&lib2, ep, raw, Engine::Cpu, RING_TIMEOUT);
        assert_eq!(c.frames(), 3, "the producer's frame count");
        consume(&mut c, "thread")
    });
    let ep = IpcEndpoint::open(&ipc, "t_0").unwrap();
    let ring =
        stream(&lib, raw, RING_TIMEOUT).frames(3).remote_consumer(ep, ConsumerDesc::cpu()).build().unwrap();
    let (mut p, _) = ring.split().unwrap();
    produce(&mut p, 50);
    drop(p);
    assert_eq!(consumer.join().unwrap(), 50);
    drop(ipc);
    ledger_is_clean();
}

/// `StreamBuilder::gpu_cache` holds for a CUDA consumer at the other end of an endpoint (here a
/// thread with its own endpoint) as for one in the producer's process, although the producer (a
/// CPU) names no GPU in its own lists: on an integrated GPU, frames with CPU access need GPU cache
/// coherency when cached (the `EnableGpuCache` default for an iGPU on system memory, nvscibuf.h)
/// and none when the consumer's list sets `EnableGpuCache = false`.
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_rings_gpu_cache_setting_reaches_a_remote_cuda_consumer() {
    let dir = ipc_dir("gpucache", &[("g_0", "g_1")]);
    let _g = use_dir(&dir);
    let Some(dev) = common::gpu() else { return };
    nvsci_mock::set_gpu_integrated(dev.gpu_id().0, true);
    let raw = FrameFormat::Raw { size: FRAME };
    for gpu_cache in [true, false] {
        let lib = NvSci::mock();
        let ipc = Ipc::mock().unwrap();
        let (lib2, ipc2, dev2) = (lib.clone(), ipc.clone(), dev.clone());
        let consumer = std::thread::spawn(move || {
            let ep = IpcEndpoint::open(&ipc2, "g_1").unwrap();
            let mut c = attach(&lib2, ep, raw, Engine::Cuda(dev2.clone()), RING_TIMEOUT);
            let needs = c.slot_view(0).unwrap().gpu_sw_need_cache_coherency(dev2.gpu_id()).unwrap();
            for _ in 0..3 {
                c.process(|_| Ok(())).unwrap();
            }
            assert!(matches!(c.acquire(), Err(Error::Ring(RingError::Ended { .. }))));
            needs
        });
        let ep = IpcEndpoint::open(&ipc, "g_0").unwrap();
        let ring = stream(&lib, raw, RING_TIMEOUT)
            .gpu_cache(gpu_cache)
            .remote_consumer(ep, ConsumerDesc::new(Engine::Cuda(dev.clone())))
            .build()
            .unwrap();
        let (mut p, _) = ring.split().unwrap();
        produce(&mut p, 3);
        drop(p);
        assert_eq!(consumer.join().unwrap(), Some(gpu_cache), "gpu_cache = {gpu_cache}");
        drop(ipc);
    }
    nvsci_mock::set_gpu_integrated(dev.gpu_id().0, false);
    assert_eq!(dev.flush_teardown(Duration::from_secs(10)), 0, "teardown finished");
}

/// nvsciipc.h (DRIVE OS 6.0.10, `NvSciIpcDeinit`): no reference counting, and "before calling
/// this API, the user shall ensure all existing opened endpoints are closed". Two `Ipc` values in
/// one process share one initialisation: dropping the first while the second has connected
/// endpoints must not de-initialise the library under them (the mock forgets every endpoint on
/// `NvSciIpcDeinit`, as the library does, and counts a Deinit with endpoints still open).
#[test]
fn two_ipc_values_share_one_initialisation() {
    let dir = ipc_dir("init", &[("i_0", "i_1")]);
    let _g = use_dir(&dir);
    let first = Ipc::mock().unwrap();
    let second = Ipc::mock().unwrap();
    let (a, b) = pair(&second, "i_0", "i_1");
    drop(first);
    a.write(b"still here", T).unwrap();
    let mut buf = [0u8; 4096];
    assert_eq!(b.read(&mut buf, T).unwrap(), buf.len());
    assert_eq!(&buf[..10], b"still here");
    // A third value made and dropped meanwhile changes nothing either.
    drop(Ipc::mock().unwrap());
    b.write(b"x", T).unwrap();
    assert!(a.read(&mut buf, T).is_ok());
    drop((a, b, second));
    assert_eq!(nvsci_mock::ipc::deinit_with_open_endpoints(), 0);
    // Once the last user is gone the library is de-initialised and can start again.
    let ipc = Ipc::mock().unwrap();
    let (a, b) = pair(&ipc, "i_0", "i_1");
    drop((a, b, ipc));
    ledger_is_clean();
}

/// DRIVE OS safety builds keep only `NvSciIpcCloseEndpointSafe` working (the deprecated
/// `NvSciIpcCloseEndpoint` does nothing there; nvsciipc.h names the Safe call as the one that
/// closes endpoints before `NvSciIpcDeinit`). With the mock in safety-build mode, an endpoint
/// the crate dropped must be closed: opening the same name again succeeds instead of answering
/// `NvSciError_Busy` ("the endpoint is already in use"), and nothing is left in the ledger.
#[test]
fn dropped_endpoints_are_closed_with_the_safe_call() {
    let dir = ipc_dir("close", &[("c_0", "c_1")]);
    let _g = use_dir(&dir);
    nvsci_mock::ipc::set_safety_build(true);
    let ipc = Ipc::mock().unwrap();
    let a = IpcEndpoint::open(&ipc, "c_0").unwrap();
    drop(a);
    let again = IpcEndpoint::open(&ipc, "c_0");
    nvsci_mock::ipc::set_safety_build(false);
    let again = again.expect("the dropped endpoint is still open: closed with the deprecated call");
    drop((again, ipc));
    ledger_is_clean();
}

/// The closes of the endpoints named `names`, in the order they happened.
fn closes_of(names: &[&str]) -> Vec<nvsci_mock::ipc::EndpointClose> {
    nvsci_mock::ipc::endpoint_closes().into_iter().filter(|c| names.contains(&c.endpoint.as_str())).collect()
}

/// Teardown order: a ring's endpoints close after the frames, sync objects and fences exported
/// or imported through them are freed, on the producer's side and on a consumer's. NVIDIA's
/// rawstream sample frees its objects before it closes its endpoints, and nvsciipc.h requires it
/// of inter-chip endpoints (`NvSciIpcCloseEndpointSafe`, "@pre Closing Inter-Chip Endpoint": "the
/// user must ensure all fences submitted to NvIpc for Inter-Chip communication for signaling are
/// expired and also all NvSciBufObjs and NvSciSyncObjs mappings registered, exported and imported
/// with NvIpc for Inter-Chip communication are un-registered and released"). The mock records,
/// per close, the objects of that endpoint still alive.
#[test]
fn a_rings_endpoints_close_after_every_object_exported_through_them_is_freed() {
    let dir = ipc_dir("order", &[("order_0", "order_1"), ("order_2", "order_3")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let (lib2, ipc2) = (lib.clone(), ipc.clone());
    let consumer = std::thread::spawn(move || {
        let mut c = connect_on(&lib2, &ipc2, "order_1", RING_TIMEOUT);
        let n = consume(&mut c, "thread");
        drop(c);
        n
    });
    let mut p = endpoint_ring(&lib, &ipc, &["order_0"], 3, RING_TIMEOUT);
    produce(&mut p, 10);
    drop(p);
    assert_eq!(consumer.join().unwrap(), 10);
    let closes = closes_of(&["order_0", "order_1"]);
    assert_eq!(closes.len(), 2, "both ends closed once: {closes:?}");
    for c in &closes {
        assert_eq!(
            (c.live_buf_objects, c.live_sync_objects),
            (0, 0),
            "endpoint {} closed before what was exported or imported through it was freed",
            c.endpoint
        );
    }

    // The record itself: an endpoint closed while a frame and a sync object exported through it
    // (the sync object also held by a fence alone) are alive is reported with both.
    let (a, b) = pair(&ipc, "order_2", "order_3");
    let m = BufModule::open(&lib).unwrap();
    let own = raw_list(&m, Perm::ReadWrite);
    let obj = BufObj::alloc(&BufAttrList::reconcile(&[&own]).unwrap()).unwrap();
    let _ = obj.export(Perm::ReadOnly, &a).unwrap();
    let sm = SyncModule::open(&lib).unwrap();
    let sync = SyncObj::alloc(
        &SyncAttrList::reconcile(&[
            &sync_list(&sm, SyncPerm::SignalOnly),
            &sync_list(&sm, SyncPerm::WaitOnly),
        ])
        .unwrap(),
    )
    .unwrap();
    let fence = sync.generate_fence().unwrap();
    let _ = fence.export(&a).unwrap();
    drop(sync);
    drop(a);
    assert_eq!(
        closes_of(&["order_2"]).iter().map(|c| (c.live_buf_objects, c.live_sync_objects)).collect::<Vec<_>>(),
        [(1, 1)]
    );
    drop((fence, obj, own, m, sm, b, ipc));
    ledger_is_clean();
}

/// nvsciipc.h: `NvSciIpcWriteSafe` / `NvSciIpcReadSafe` answer `NvSciError_InvalidState` for "an
/// invalid operation state" (an endpoint not connected, or being reset). That is an error to
/// report, not a transient to retry: a write without a timeout on an endpoint nobody connects to
/// must come back, not loop for ever.
#[test]
fn reads_and_writes_on_an_unconnected_endpoint_fail_instead_of_retrying() {
    let dir = ipc_dir("unconnected", &[("u_0", "u_1")]);
    let _g = use_dir(&dir);
    let ipc = Ipc::mock().unwrap();
    let a = std::sync::Arc::new(IpcEndpoint::open(&ipc, "u_0").unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = {
        let a = a.clone();
        std::thread::spawn(move || {
            let w = a.write(b"nobody there", None);
            let mut buf = [0u8; 16];
            let r = a.read(&mut buf, None).map(drop);
            let _ = tx.send((w, r));
        })
    };
    let (w, r) =
        rx.recv_timeout(Duration::from_secs(10)).expect("a write or read on an unconnected endpoint hung");
    worker.join().unwrap();
    let invalid_state = nvsci::NvSciError(nvsci::sys::NvSciError_InvalidState);
    assert!(
        matches!(w, Err(Error::Ipc(IpcError::Endpoint { code: Some(c), .. })) if c == invalid_state),
        "{w:?}"
    );
    assert!(
        matches!(r, Err(Error::Ipc(IpcError::Endpoint { code: Some(c), .. })) if c == invalid_state),
        "{r:?}"
    );
    drop(a);
    drop(ipc);
    ledger_is_clean();
}

/// Calls `events` until `want` holds for one of its answers (or panics after 10 s); returns
/// that answer.
fn events_until(ep: &IpcEndpoint, want: impl Fn(nvsci::ipc::IpcEvents) -> bool) -> nvsci::ipc::IpcEvents {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let ev = ep.events().unwrap();
        if want(ev) {
            return ev;
        }
        assert!(Instant::now() < until, "{} never reported the event", ep.name());
        fd_ready(ep, 10);
    }
}

/// nvsciipc.h (DRIVE OS 6.0.10, `NvSciIpcGetEventSafe`): "NV_SCI_IPC_EVENT_CONN_EST and
/// NV_SCI_IPC_EVENT_CONN_RESET events are connection event. They're edge-triggered events and
/// once they're read by user, events are cleared", while READ and WRITE are FIFO status events
/// reported "as long as free buffer is available on write FIFO or data are available in read
/// FIFO".
#[test]
fn connection_events_are_reported_once_and_fifo_events_while_they_hold() {
    let dir = ipc_dir("edges", &[("e_0", "e_1")]);
    let _g = use_dir(&dir);
    let ipc = Ipc::mock().unwrap();
    let a = IpcEndpoint::open(&ipc, "e_0").unwrap();
    let b = IpcEndpoint::open(&ipc, "e_1").unwrap();
    b.wait_connected(T).unwrap();
    let first = events_until(&a, |e| e.connected());
    assert!(first.writable() && !first.reset());
    let again = a.events().unwrap();
    assert!(!again.connected(), "CONN_EST reported twice");
    assert!(again.writable(), "WRITE is reported as long as the FIFO has room");
    b.write(b"x", T).unwrap();
    events_until(&a, |e| e.readable());
    assert!(a.events().unwrap().readable(), "READ is reported as long as a frame waits");
    drop(b);
    // What the peer wrote before it closed is read first; the reset follows.
    let mut one = [0u8; 1];
    a.read(&mut one, T).unwrap();
    assert_eq!(one, *b"x");
    let gone = events_until(&a, |e| e.reset());
    assert!(!gone.writable());
    assert!(!a.events().unwrap().reset(), "CONN_RESET reported twice");
    drop((a, ipc));
    ledger_is_clean();
}

/// Whether `ep`'s event descriptor is readable within `ms` milliseconds.
fn fd_ready(ep: &IpcEndpoint, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(&ep.event_fd()),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) == 1 }
}

/// The event descriptor is readable exactly while something waits to be collected: a frame to
/// read, or room in a FIFO that was full (nvsciipc.h, NvSciIpcGetEventSafe: a WRITE event occurs
/// "each time the endpoint's sending FIFO ceases to be full"), and quiet once the events said so.
/// Then 20,000 frames each way between two threads that sleep only in `poll` on the descriptor:
/// a wake-up lost between the peer's write and the reader's last look would leave a reader
/// asleep with a frame waiting, which the 5 s poll turns into a failure.
#[test]
fn the_event_descriptor_is_readable_exactly_while_something_waits() {
    let dir = ipc_dir_sized("ready", &[("r_0", "r_1")], 4, 64);
    let _g = use_dir(&dir);
    let ipc = Ipc::mock().unwrap();
    let a = IpcEndpoint::open(&ipc, "r_0").unwrap();
    let b = IpcEndpoint::open(&ipc, "r_1").unwrap();
    b.wait_connected(T).unwrap();
    events_until(&a, |e| e.connected());
    b.events().unwrap();
    assert!(!fd_ready(&a, 0) && !fd_ready(&b, 0), "nothing waits, yet a descriptor is readable");
    b.write(b"one", T).unwrap();
    assert!(fd_ready(&a, 5000), "a frame waits, the reader's descriptor stays quiet");
    assert!(!fd_ready(&b, 0), "the writer's descriptor is readable after a write into room");
    let mut got = [0u8; 3];
    a.read(&mut got, T).unwrap();
    assert_eq!(&got, b"one");
    a.events().unwrap();
    assert!(!fd_ready(&a, 0), "the only frame was read, the descriptor is still readable");
    // Fill the FIFO from `a` to `b` (4 frames): `a` is told only once `b` makes room.
    for i in 0..4u8 {
        a.write(&[i], T).unwrap();
    }
    assert!(!a.events().unwrap().writable(), "a full FIFO reports WRITE");
    assert!(!fd_ready(&a, 0), "the full writer's descriptor is readable before the reader read");
    let mut one = [0u8; 1];
    b.read(&mut one, T).unwrap();
    assert_eq!(one, [0]);
    assert!(fd_ready(&a, 5000), "room was made, the writer's descriptor stays quiet");
    assert!(a.events().unwrap().writable());
    assert!(!fd_ready(&a, 0), "room was reported, the descriptor is still readable");
    for i in 1..4u8 {
        b.read(&mut one, T).unwrap();
        assert_eq!(one, [i]);
    }
    b.events().unwrap();
    assert!(!fd_ready(&b, 0));

    const N: u32 = 20_000;
    // Each side writes N numbered frames and reads the peer's N, sleeping only in poll.
    let run = |ep: &IpcEndpoint| {
        let (mut sent, mut seen) = (0u32, 0u32);
        while sent < N || seen < N {
            let ev = ep.events().unwrap();
            let mut progressed = false;
            if ev.readable() {
                let mut f = [0u8; 4];
                ep.read(&mut f, T).unwrap();
                assert_eq!(u32::from_le_bytes(f), seen, "{}: frames out of order", ep.name());
                seen += 1;
                progressed = true;
            }
            if sent < N && ev.writable() {
                ep.write(&sent.to_le_bytes(), T).unwrap();
                sent += 1;
                progressed = true;
            }
            if !progressed {
                assert!(fd_ready(ep, 5000), "{}: asleep with sent {sent}, seen {seen}", ep.name());
            }
        }
    };
    std::thread::scope(|s| {
        s.spawn(|| run(&a));
        run(&b);
    });
    drop((a, b, ipc));
    ledger_is_clean();
}

/// A peer that connected, wrote and closed before this endpoint first looked at its events: the
/// connection is reported (CONN_EST), what the peer wrote reads back, and the reset follows, as
/// for a peer that goes away after this endpoint saw it (nvsciipc.h: CONN_EST and CONN_RESET are
/// edge-triggered; READ is reported "as long as ... data are available in read FIFO").
#[test]
fn a_peer_that_wrote_and_left_before_the_first_look_is_read_then_reset() {
    let dir = ipc_dir("early", &[("e_0", "e_1")]);
    let _g = use_dir(&dir);
    let ipc = Ipc::mock().unwrap();
    let a = IpcEndpoint::open(&ipc, "e_0").unwrap();
    let b = IpcEndpoint::open(&ipc, "e_1").unwrap();
    b.wait_connected(T).unwrap();
    b.write(b"early", T).unwrap();
    drop(b);
    // `a` has not polled its events once until here.
    let first = events_until(&a, |e| e.connected() || e.reset());
    assert!(first.connected() && !first.reset(), "{first:?}");
    let mut got = [0u8; 5];
    a.read(&mut got, T).unwrap();
    assert_eq!(&got, b"early");
    let gone = events_until(&a, |e| e.reset());
    assert!(!gone.connected());
    drop((a, ipc));
    ledger_is_clean();
}

/// nvsciipc.h: "Before using any Read/Write APIs, the user must check if NV_SCI_IPC_EVENT_READ
/// or NV_SCI_IPC_EVENT_WRITE event is available through NvSciIpcGetEventSafe()", and the
/// connection is established through it ("NvSciIpcGetEventSafe() has additional support to
/// establish connection"). The mock refuses a read or write on an endpoint whose events never
/// reported the connection; the crate polls the events before each attempt, so a write without
/// an explicit `wait_connected` works once the peer is there.
#[test]
fn reads_and_writes_poll_events_first() {
    let dir = ipc_dir("getevent", &[("g_0", "g_1")]);
    let _g = use_dir(&dir);
    let ipc = Ipc::mock().unwrap();
    let a = IpcEndpoint::open(&ipc, "g_0").unwrap();
    let b = IpcEndpoint::open(&ipc, "g_1").unwrap();
    b.wait_connected(T).unwrap();
    a.write(b"no wait_connected", T).unwrap();
    let mut buf = [0u8; 17];
    assert_eq!(b.read(&mut buf, T).unwrap(), 17);
    assert_eq!(&buf, b"no wait_connected");
    b.write(b"back", T).unwrap();
    let mut buf = [0u8; 4];
    a.read(&mut buf, T).unwrap();
    assert_eq!(&buf, b"back");
    drop((a, b, ipc));
    ledger_is_clean();
}

/// A peer that closes its endpoint and opens it again (a restarted process) is a new session:
/// the channel is re-established and NvSciIpc reports CONN_RESET, then CONN_EST, each once. An
/// endpoint that saw the reset, whoever collected the event, keeps failing with `IpcError::PeerGone`
/// instead of writing the old session's frames to the new peer.
#[test]
fn a_restarted_peer_is_not_the_old_session() {
    let dir = ipc_dir("restart", &[("r_0", "r_1")]);
    let _g = use_dir(&dir);
    let ipc = Ipc::mock().unwrap();
    let (a, b) = pair(&ipc, "r_0", "r_1");
    a.write(b"one", T).unwrap();
    let mut buf = [0u8; 3];
    b.read(&mut buf, T).unwrap();
    drop(b);
    // The application's own event loop collects the reset edge ...
    events_until(&a, |e| e.reset());
    // ... and the peer comes back on the same channel.
    let ipc2 = ipc.clone();
    let restarted = std::thread::spawn(move || {
        let b = IpcEndpoint::open(&ipc2, "r_1").unwrap();
        b.wait_connected(T).unwrap();
        b
    });
    events_until(&a, |e| e.connected());
    let b = restarted.join().unwrap();
    let peer_gone = |r: &nvsci::Result<()>| match r {
        Err(Error::Ipc(IpcError::PeerGone { endpoint, .. })) => endpoint == "r_0",
        _ => false,
    };
    let w = a.write(b"two", T);
    assert!(peer_gone(&w), "a write after a reset reached the restarted peer: {w:?}");
    let r = a.read(&mut buf, Some(Duration::from_millis(50))).map(drop);
    assert!(peer_gone(&r), "{r:?}");
    let c = a.wait_connected(T);
    assert!(peer_gone(&c), "{c:?}");
    drop((a, b, ipc));
    ledger_is_clean();
}

/// The same, with nobody looking at the events in between: the reset and the new connection
/// are both pending when the endpoint is next used, and the write must not go to the new peer.
#[test]
fn a_reset_collected_by_a_write_is_not_lost() {
    let dir = ipc_dir("restart2", &[("s_0", "s_1")]);
    let _g = use_dir(&dir);
    let ipc = Ipc::mock().unwrap();
    let (a, b) = pair(&ipc, "s_0", "s_1");
    drop(b);
    let b = IpcEndpoint::open(&ipc, "s_1").unwrap();
    // The peer opened again and connects as soon as `a` listens again, which it does once it is
    // used: a write on the old session must come back as IpcError::PeerGone.
    let w = a.write(b"stale", T);
    assert!(matches!(w, Err(Error::Ipc(IpcError::PeerGone { .. }))), "{w:?}");
    drop((a, b, ipc));
    ledger_is_clean();
}

/// nvsciipc.h: a channel holds `nframes` frames per direction (`NvSciIpcEndpointInfo`), and
/// `NvSciIpcWriteSafe` on a full one answers `InsufficientMemory` ("write channel is full and
/// the write operation aborted"); a WRITE event follows "each time the endpoint's sending FIFO
/// ceases to be full". The mock enforces it; a write waits for room up to its timeout.
#[test]
fn a_full_channel_holds_nframes_and_a_write_waits_for_room() {
    let dir = ipc_dir_sized("full", &[("f_0", "f_1")], 4, 64);
    let _g = use_dir(&dir);
    let ipc = Ipc::mock().unwrap();
    let (a, b) = pair(&ipc, "f_0", "f_1");
    assert_eq!(a.info().frames, 4);
    for i in 0..4u8 {
        a.write(&[i], T).unwrap();
    }
    let full = a.write(&[4], Some(Duration::from_millis(50)));
    assert!(
        matches!(full, Err(Error::Timeout { waited_for: Wait::Endpoint { during: "write", ref endpoint, .. }, .. })
            if endpoint == "f_0"),
        "a fifth frame fit in a channel of four: {full:?}"
    );
    let mut one = [0u8; 1];
    b.read(&mut one, T).unwrap();
    assert_eq!(one, [0]);
    // The read made room for exactly one more.
    a.write(&[4], T).unwrap();
    assert!(matches!(
        a.write(&[5], Some(Duration::from_millis(50))),
        Err(Error::Timeout { waited_for: Wait::Endpoint { .. }, .. })
    ));
    for want in 1..=4u8 {
        b.read(&mut one, T).unwrap();
        assert_eq!(one, [want]);
    }
    drop((a, b, ipc));
    ledger_is_clean();
}

/// A ring with more frames in flight than the channel holds could leave producer and consumer
/// both waiting to write: set-up refuses it with a typed error naming the frame count and
/// `nframes`. A ring that fits runs over a channel of four frames (its set-up messages span
/// many frames, so writes wait for room on the way).
#[test]
fn a_ring_larger_than_the_channel_is_refused_and_one_that_fits_runs() {
    let dir = ipc_dir_sized("nframes", &[("n_0", "n_1")], 4, 4096);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let ep = IpcEndpoint::open(&ipc, "n_0").unwrap();
    let raw = FrameFormat::Raw { size: FRAME };
    let ring = |frames: usize, ep: IpcEndpoint, timeout: Duration| {
        stream(&lib, raw, timeout).frames(frames).remote_consumer(ep, ConsumerDesc::cpu()).build()
    };
    match ring(4, ep, Duration::from_millis(200)) {
        Err(Error::InvalidArgument { name: "frames", reason }) => {
            assert!(reason.contains("nframes = 4") && reason.contains("4 frames"), "{reason}")
        }
        other => panic!("expected InvalidArgument naming frames and nframes, got {:?}", other.err()),
    }
    let ep = IpcEndpoint::open(&ipc, "n_0").unwrap();
    let (lib2, ipc2) = (lib.clone(), ipc.clone());
    let consumer = std::thread::spawn(move || {
        let ep = IpcEndpoint::open(&ipc2, "n_1").unwrap();
        let mut c = attach(&lib2, ep, raw, Engine::Cpu, RING_TIMEOUT);
        consume(&mut c, "thread")
    });
    let (mut p, _) = ring(3, ep, RING_TIMEOUT).unwrap().split().unwrap();
    produce(&mut p, 30);
    drop(p);
    assert_eq!(consumer.join().unwrap(), 30);
    drop(ipc);
    ledger_is_clean();
}

// ------------------------------------------------------------------------------------------
// Failures on the per-frame path (consumers in other threads through endpoints; faults are
// injected on the thread that makes the call).
// ------------------------------------------------------------------------------------------

/// A ring of `frames` frames whose consumers are at the other ends of `endpoints`.
fn endpoint_ring(lib: &NvSci, ipc: &Ipc, endpoints: &[&str], frames: usize, timeout: Duration) -> Producer {
    let ring = endpoints
        .iter()
        .fold(stream(lib, FrameFormat::Raw { size: FRAME }, timeout).frames(frames), |b, n| {
            b.remote_consumer(IpcEndpoint::open(ipc, n).unwrap(), ConsumerDesc::cpu())
        })
        .build()
        .unwrap();
    ring.split().unwrap().0
}

/// A consumer at the end `name` of an endpoint pair, connected on its own thread.
fn connect_on(lib: &NvSci, ipc: &Ipc, name: &str, timeout: Duration) -> Consumer {
    let ep = IpcEndpoint::open(ipc, name).unwrap();
    attach(lib, ep, FrameFormat::Raw { size: FRAME }, Engine::Cpu, timeout)
}

/// A present whose fence export for a live consumer process fails (not a gone peer) does not
/// drop that consumer: it misses that frame, the error is reported by the producer's next
/// acquire, and the slot the consumer still reads is not handed out again while it holds it.
/// (frames = 2, the consumer holding frame 0 while frame 1's export fails: frame 2 goes into
/// slot 1, which frame 1 left free, never into slot 0, and the consumer receives it.)
#[test]
fn a_failed_send_keeps_a_live_consumer_process_and_its_held_slot() {
    use std::sync::mpsc;
    let dir = ipc_dir("send-fail", &[("sf_0", "sf_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let timeout = Duration::from_secs(5);
    let (held_tx, held_rx) = mpsc::channel();
    let (lib2, ipc2) = (lib.clone(), ipc.clone());
    let consumer = std::thread::spawn(move || {
        let mut c = connect_on(&lib2, &ipc2, "sf_1", timeout);
        let f0 = c.acquire().unwrap();
        assert_eq!((f0.sequence(), f0.index()), (0, 0));
        held_tx.send(()).unwrap();
        // Time for a producer that reused slot 0 to rewrite it (this only widens the window;
        // the frames received below decide the test).
        std::thread::sleep(Duration::from_millis(300));
        check(&c.cpu_read(&f0).unwrap(), 0, "frame 0, still held");
        c.release(f0).unwrap();
        // Frame 1 never came; frame 2 does, in slot 1.
        let f2 = c.acquire().unwrap();
        assert_eq!((f2.sequence(), f2.index()), (2, 1));
        check(&c.cpu_read(&f2).unwrap(), 2, "frame 2");
        c.release(f2).unwrap();
        assert!(
            matches!(c.acquire(), Err(Error::Ring(RingError::Ended { .. }))),
            "the producer ended the stream"
        );
    });
    let mut p = endpoint_ring(&lib, &ipc, &["sf_0"], 2, timeout);
    produce(&mut p, 1);
    held_rx.recv().unwrap();
    let f1 = p.acquire().unwrap();
    assert_eq!((f1.sequence(), f1.index()), (1, 1));
    fill(&mut p.cpu_write(&f1).unwrap(), 1);
    nvsci_mock::faults::inject("NvSciSyncIpcExportFence", 0, nvsci_sys::NvSciError_InsufficientMemory);
    p.present(f1).unwrap();
    assert!(!nvsci_mock::faults::clear(), "frame 1's fence export failed");
    match p.acquire() {
        Err(Error::NvSci { function, code }) => {
            assert_eq!(
                (function, code.0),
                ("NvSciSyncIpcExportFence", nvsci_sys::NvSciError_InsufficientMemory)
            )
        }
        other => panic!("expected the export failure, got {other:?}"),
    }
    let f2 = p.acquire().unwrap();
    assert_eq!((f2.sequence(), f2.index()), (2, 1));
    fill(&mut p.cpu_write(&f2).unwrap(), 2);
    p.present(f2).unwrap();
    drop(p);
    consumer.join().unwrap();
    drop(ipc);
    ledger_is_clean();
}

/// A consumer process whose acquire fails after it received a frame (the present fence cannot
/// be imported) hands that frame straight back: the producer reuses the slot and the stream
/// goes on, the consumer missing only that frame.
#[test]
fn a_frame_a_consumer_process_fails_to_take_is_handed_back() {
    let dir = ipc_dir("take-fail", &[("tf_0", "tf_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let timeout = Duration::from_secs(5);
    let frames = 6;
    let (lib2, ipc2) = (lib.clone(), ipc.clone());
    let consumer = std::thread::spawn(move || {
        let mut c = connect_on(&lib2, &ipc2, "tf_1", timeout);
        nvsci_mock::faults::inject("NvSciSyncIpcImportFence", 0, nvsci_sys::NvSciError_InsufficientMemory);
        match c.acquire() {
            Err(Error::NvSci { function, .. }) => assert_eq!(function, "NvSciSyncIpcImportFence"),
            other => panic!("expected the import failure, got {other:?}"),
        }
        assert!(!nvsci_mock::faults::clear(), "frame 0's fence import failed");
        let mut seen = Vec::new();
        loop {
            let f = match c.acquire() {
                Ok(f) => f,
                Err(Error::Ring(RingError::Ended { .. })) => break,
                Err(e) => panic!("acquire failed after frames {seen:?}: {e:?}"),
            };
            check(&c.cpu_read(&f).unwrap(), f.sequence(), "consumer");
            seen.push(f.sequence());
            c.release(f).unwrap();
        }
        seen
    });
    let mut p = endpoint_ring(&lib, &ipc, &["tf_0"], 2, timeout);
    produce(&mut p, frames);
    drop(p);
    assert_eq!(consumer.join().unwrap(), (1..frames).collect::<Vec<_>>(), "every frame but the first");
    drop(ipc);
    ledger_is_clean();
}

/// Ending the stream with two consumer processes tells both before waiting for either: one
/// that keeps its newest frame until the next comes (or the stream ends) learns of the end at
/// once, not after the producer gave up waiting for it, and its last release is taken.
#[test]
fn ending_the_stream_tells_every_consumer_process_before_waiting_for_their_frames() {
    use std::sync::mpsc;
    let dir = ipc_dir("end-all", &[("ea_0", "ea_1"), ("eb_0", "eb_1")]);
    let _g = use_dir(&dir);
    let lib = NvSci::mock();
    let ipc = Ipc::mock().unwrap();
    let timeout = Duration::from_secs(3);
    let frames = 20;
    let (lib2, ipc2) = (lib.clone(), ipc.clone());
    let a = std::thread::spawn(move || {
        let mut c = connect_on(&lib2, &ipc2, "ea_1", timeout);
        consume(&mut c, "a")
    });
    let (held_tx, held_rx) = mpsc::channel();
    let (lib3, ipc3) = (lib.clone(), ipc.clone());
    let b = std::thread::spawn(move || {
        let mut c = connect_on(&lib3, &ipc3, "eb_1", timeout);
        let mut held = c.acquire().unwrap();
        for seq in 1..frames {
            let next = c.acquire().unwrap();
            assert_eq!(next.sequence(), seq);
            c.release(std::mem::replace(&mut held, next)).unwrap();
        }
        check(&c.cpu_read(&held).unwrap(), frames - 1, "b");
        held_tx.send(()).unwrap();
        // Holds the newest frame until the end comes: an end sent only after the producer's
        // wait for this frame timed out comes after this acquire's own timeout.
        let end = c.acquire().map(|f| f.sequence());
        let released = c.release(held);
        (end, released)
    });
    let mut p = endpoint_ring(&lib, &ipc, &["ea_0", "eb_0"], 4, timeout);
    produce(&mut p, frames);
    held_rx.recv().unwrap();
    // Consumer b is waiting for the next frame.
    std::thread::sleep(Duration::from_millis(100));
    drop(p);
    assert_eq!(a.join().unwrap(), frames, "consumer a took every frame");
    let (end, released) = b.join().unwrap();
    assert!(matches!(end, Err(Error::Ring(RingError::Ended { .. }))), "consumer b was told the end: {end:?}");
    assert!(released.is_ok(), "the producer took b's last frame back: {released:?}");
    drop(ipc);
    ledger_is_clean();
}
