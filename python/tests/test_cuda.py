"""CUDA consumers on the mock's GPU mode: PyTorch and CuPy read the frames in place through
DLPack and the CUDA array interface, with the array API's stream semantics. Skipped (with the
reason) without a CUDA GPU, torch or CuPy; with NVSCI_REQUIRE_GPU=1 a missing GPU or torch
fails instead."""

import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import nvsci

W, H = 256, 128
ROWS = H + H // 2


def _gpu_reason():
    if not nvsci.Backend.mock().has_cuda:
        return "needs a CUDA GPU (the mock's GPU mode)"
    return None


def _skip_or_fail(reason):
    if os.environ.get("NVSCI_REQUIRE_GPU") == "1":
        pytest.fail(f"NVSCI_REQUIRE_GPU=1: {reason}")
    pytest.skip(reason)


@pytest.fixture
def gpu():
    reason = _gpu_reason()
    if reason:
        _skip_or_fail(reason)
    return nvsci.Backend.mock()


@pytest.fixture
def torch(gpu):
    try:
        import torch
    except ImportError:
        _skip_or_fail("needs torch")
    if not torch.cuda.is_available():
        _skip_or_fail("needs torch with CUDA")
    return torch


@pytest.fixture
def cupy(gpu):
    try:
        import cupy
    except ImportError:
        _skip_or_fail("needs CuPy")
    return cupy


def pattern(seed):
    """The packed NV12 image of frame `seed` (as in test_stream.py, at this size)."""
    return ((np.arange(ROWS * W, dtype=np.uint32).reshape(ROWS, W) * 7 + seed * 31) % 251).astype(np.uint8)


def cuda_stream(backend, frames=4, **kw):
    return backend.stream(
        nvsci.FrameFormat.nv12(W, H), consumers=[nvsci.ConsumerDesc(engine="cuda")], frames=frames, **kw
    )


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Versioned(ctypes.Structure):
    """DLManagedTensorVersioned, as dlpack.h (1.x) lays it out."""

    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


def _tensor(capsule):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return _Versioned.from_address(get(capsule, b"dltensor_versioned"))


def _check(what, r):
    assert r == 0, f"{what} failed: CUresult {r}"


def test_capsules_read_back_through_the_driver(gpu):
    """Without torch or CuPy: the capsule's tensor (read with ctypes, as dlpack.h lays it
    out) names the frame's mapping on the device, and the bytes copied from it on a stream of
    the caller's, ordered by `__dlpack__(stream=...)`, are the frame's."""
    cu = ctypes.CDLL("libcuda.so.1")
    ctx, stream = ctypes.c_void_p(), ctypes.c_void_p()
    _check("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0))
    _check("cuCtxSetCurrent", cu.cuCtxSetCurrent(ctx))
    _check("cuStreamCreate", cu.cuStreamCreate(ctypes.byref(stream), 1))  # non-blocking
    cu.cuMemcpyDtoHAsync_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
    producer, (consumer,) = cuda_stream(gpu, frames=2)
    try:
        for i in range(200):
            img = pattern(i)
            producer.send(img)
            f = consumer.acquire()
            for plane, want in ((f.luma, img[:H]), (f.chroma, img[H:].reshape(H // 2, W // 2, 2))):
                capsule = plane.__dlpack__(stream=stream.value, max_version=(1, 0))
                t = _tensor(capsule)
                assert (t.major, t.flags & 1) == (1, 1)  # versioned, read-only
                d = t.dl_tensor
                assert (d.device_type, d.device_id) == (2, 0)
                assert (d.code, d.bits, d.lanes) == (1, 8, 1)  # uint8
                shape = tuple(d.shape[k] for k in range(d.ndim))
                strides = tuple(d.strides[k] for k in range(d.ndim))
                assert shape == want.shape and strides == plane.strides
                span = (shape[0] - 1) * strides[0] + shape[1] * (strides[1] if d.ndim == 2 else 2)
                host = np.empty(span, np.uint8)
                _check(
                    "cuMemcpyDtoHAsync",
                    cu.cuMemcpyDtoHAsync_v2(host.ctypes.data, d.data + d.byte_offset, span, stream),
                )
                _check("cuStreamSynchronize", cu.cuStreamSynchronize(stream))
                got = np.lib.stride_tricks.as_strided(host, shape, strides)
                np.testing.assert_array_equal(got, want)
                del capsule
            f.release()
    finally:
        consumer.close()
        producer.close()
        cu.cuStreamDestroy_v2(stream)


def test_torch_reads_every_frame_in_place(gpu, torch):
    producer, (consumer,) = cuda_stream(gpu)
    assert consumer.engine == "cuda"
    n = 1000
    base = torch.arange(ROWS * W, device="cuda", dtype=torch.int64).reshape(ROWS, W) * 7
    bad = torch.zeros((), dtype=torch.int64, device="cuda")
    for i in range(n):
        producer.send(pattern(i))
        with consumer.acquire() as f:
            assert f.luma.__dlpack_device__() == (2, torch.cuda.current_device())
            y = torch.from_dlpack(f.luma)
            uv = torch.from_dlpack(f.chroma)
            assert y.shape == (H, W) and uv.shape == (H // 2, W // 2, 2)
            want = ((base + i * 31) % 251).to(torch.uint8)
            bad += (y != want[:H]).sum() + (uv.reshape(H // 2, W) != want[H:]).sum()
    assert bad.item() == 0
    assert consumer.delivered == n


def test_release_waits_for_the_readers_stream(gpu, torch):
    """A frame is released only after the kernels on torch's stream that read it: the
    producer, which reuses the slot at once (two frames), must not overwrite it first."""
    producer, (consumer,) = cuda_stream(gpu, frames=2)
    stream = torch.cuda.Stream()
    n = 50
    seen = torch.zeros(n, dtype=torch.int64, device="cuda")
    with torch.cuda.stream(stream):
        for i in range(n):
            producer.send(np.full((ROWS, W), i, np.uint8))
            with consumer.acquire() as f:
                y = torch.from_dlpack(f.luma)  # torch passes its current stream
                torch.cuda._sleep(2_000_000)  # the read below runs late on the stream
                seen[i] = (y == i).sum()
    stream.synchronize()
    assert seen.tolist() == [H * W] * n


# A frame presented just before is read fresh on the caller's stream ------------------------------

# GPU clock cycles the producer's side waits before each frame's bytes are written: long against the
# host's trip from `send` through `acquire` to the reader's kernel launch, so a read that is not
# ordered after the present fence runs before the write and sees the slot's old bytes.
LATE_WRITE_CYCLES = 4_000_000


def distinct(torch, base, i):
    """Frame `i`'s packed NV12 image on the GPU: every byte differs from the same byte of frames
    i - 1 .. i - 8 (the step 31 i mod 251 is never 0 there), so a slot's old contents never pass
    for a new frame's."""
    return ((base + i * 31) % 251 + 1).to(torch.uint8)


class _Unordered:
    """A plane exported with `stream=-1` (the array API's "no synchronization"): torch reads it
    on its stream without waiting for the frame's present fence."""

    def __init__(self, plane):
        self.plane = plane

    def __dlpack__(self, stream=None, **kw):
        return self.plane.__dlpack__(stream=-1, **kw)

    def __dlpack_device__(self):
        return self.plane.__dlpack_device__()


def late_write_stream(gpu, torch):
    """What the stale-frame tests share: a CUDA producer and a CUDA consumer of NV12 frames
    (three slots), torch streams to write and to read on, and the base image that `distinct`
    varies per frame (made on the reader's stream)."""
    producer, (consumer,) = gpu.stream(
        nvsci.FrameFormat.nv12(W, H),
        consumers=[nvsci.ConsumerDesc(engine="cuda")],
        producer="cuda",
        frames=3,
    )
    writer, reader = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(reader):
        base = torch.arange(ROWS * W, device="cuda", dtype=torch.int64).reshape(ROWS, W) * 7
    reader.synchronize()
    return producer, consumer, writer, reader, base


@pytest.mark.parametrize("write", ["send", "in_place"])
def test_a_frame_presented_just_before_is_read_fresh_on_torchs_stream(gpu, torch, write):
    """The producer writes each frame on a CUDA stream just before presenting it, behind a long
    kernel on that stream (`send` of a tensor made there, or in place through DLPack); the
    consumer, right after `acquire` and with no host synchronisation, runs torch kernels on its
    own non-default stream that compare the frame with that frame's bytes. Every frame must
    compare equal: the present fence is waited before torch's stream reads. The last frames
    read the luma plane unordered (`stream=-1`) beside the ordered chroma plane: the unordered
    reads see old bytes, which shows the late write is late enough for a missing wait to show."""
    producer, consumer, writer, reader, base = late_write_stream(gpu, torch)
    n, controls = 200, 20
    wrong = torch.zeros(n + controls, 2, dtype=torch.int64, device="cuda")

    def produce(i):
        with torch.cuda.stream(writer):
            torch.cuda._sleep(LATE_WRITE_CYCLES)
            img = distinct(torch, base, i)
            if write == "send":
                assert producer.send(img) == i
            else:
                with producer.acquire() as f:
                    torch.from_dlpack(f.luma).copy_(img[:H])
                    torch.from_dlpack(f.chroma).copy_(img[H:].reshape(H // 2, W // 2, 2))
            del img

    with torch.cuda.stream(reader):
        for i in range(n + controls):
            produce(i)
            with consumer.acquire() as f:
                assert f.sequence == i
                luma = _Unordered(f.luma) if i >= n else f.luma
                y = torch.from_dlpack(luma)
                wrong[i, 0] = (y != distinct(torch, base, i)[:H]).sum()
                uv = torch.from_dlpack(f.chroma)
                wrong[i, 1] = (uv.reshape(H // 2, W) != distinct(torch, base, i)[H:]).sum()
    torch.cuda.synchronize()
    got = wrong.tolist()
    assert got[:n] == [[0, 0]] * n, [(i, w) for i, w in enumerate(got[:n]) if w != [0, 0]][:10]
    assert [w[1] for w in got[n:]] == [0] * controls
    stale = sum(1 for w in got[n:] if w[0] > 0)
    assert stale > 0, "no unordered read saw old bytes: the late write is not late enough to test the wait"
    assert consumer.delivered == n + controls


def test_cupy_reads_through_dlpack_and_the_array_interface(gpu, cupy):
    producer, (consumer,) = cuda_stream(gpu)
    for i in range(1000):
        producer.send(pattern(i))
        f = consumer.acquire()
        y = cupy.from_dlpack(f.luma)
        iface = f.chroma.__cuda_array_interface__
        assert iface["version"] == 3 and iface["data"][1] is True and iface["stream"] != 0
        uv = cupy.asarray(f.chroma)
        want = cupy.asarray(pattern(i))
        assert bool((y == want[:H]).all()) and bool((uv.reshape(H // 2, W) == want[H:]).all())
        # The interface's reader is on CuPy's stream: name it for the release.
        f.release(stream=cupy.cuda.get_current_stream().ptr)


def test_nv12_to_rgb_on_the_gpu(gpu, torch):
    producer, (consumer,) = cuda_stream(gpu)
    img = pattern(3)
    producer.send(img)
    with consumer.acquire() as f:
        rgb = nv12_to_rgb_torch(torch, torch.from_dlpack(f.luma), torch.from_dlpack(f.chroma))
    np.testing.assert_array_equal(rgb.cpu().numpy(), nv12_to_rgb_numpy(img[:H], img[H:].reshape(H // 2, W // 2, 2)))


def test_cuda_export_refusals(gpu, torch):
    producer, (consumer,) = cuda_stream(gpu)
    producer.send(pattern(0))
    with consumer.acquire() as f:
        torch.from_dlpack(f.luma)
        with pytest.raises(nvsci.ExportError) as e:
            torch.from_dlpack(f.luma)
        assert e.value.name == "plane"
        with pytest.raises(nvsci.ExportError) as e:
            f.chroma.__dlpack__(stream=1, dl_device=(1, 0))
        assert e.value.name == "dl_device"
        with pytest.raises(AttributeError):
            f.luma.__array_interface__


def test_cuda_export_refuses_a_stream_of_another_device(gpu, torch):
    # Skipped before anything is made: a skip raised later would keep this frame's objects
    # (and the mock's handles) alive in its traceback past the ledger check.
    if torch.cuda.device_count() < 2:
        pytest.skip("a stream of another device needs a second GPU")
    producer, (consumer,) = cuda_stream(gpu)
    producer.send(pattern(1))
    with consumer.acquire() as f:
        other = torch.cuda.Stream(device=1)
        with pytest.raises(nvsci.ExportError) as e:
            f.luma.__dlpack__(stream=other.cuda_stream)
        assert e.value.name == "stream"


def nv12_to_rgb_numpy(y, uv):
    """BT.601 limited range, 8-bit integer arithmetic (nvsci::convert's rounding)."""
    y = y.astype(np.int32)
    u = np.repeat(np.repeat(uv[..., 0].astype(np.int32), 2, 0), 2, 1) - 128
    v = np.repeat(np.repeat(uv[..., 1].astype(np.int32), 2, 0), 2, 1) - 128
    c = 298 * (y - 16)
    r = (c + 409 * v + 128) >> 8
    g = (c - 100 * u - 208 * v + 128) >> 8
    b = (c + 516 * u + 128) >> 8
    return np.clip(np.stack([r, g, b], -1), 0, 255).astype(np.uint8)


def nv12_to_rgb_torch(torch, y, uv):
    y = y.to(torch.int32)
    uv = uv.to(torch.int32).repeat_interleave(2, 0).repeat_interleave(2, 1)
    u, v = uv[..., 0] - 128, uv[..., 1] - 128
    c = 298 * (y - 16)
    r = (c + 409 * v + 128) >> 8
    g = (c - 100 * u - 208 * v + 128) >> 8
    b = (c + 516 * u + 128) >> 8
    return torch.stack([r, g, b], -1).clamp(0, 255).to(torch.uint8)


# CUDA producers: frames written on the producer's stream from CUDA arrays ----------------------


def cuda_producer(backend, frames=4, **kw):
    """A CUDA producer with a CPU consumer (which reads every byte) and a CUDA one."""
    return backend.stream(
        nvsci.FrameFormat.nv12(W, H),
        consumers=[nvsci.ConsumerDesc(), nvsci.ConsumerDesc(engine="cuda")],
        producer="cuda",
        frames=frames,
        **kw,
    )


def packed(frame):
    return np.concatenate([frame.luma.numpy(), frame.chroma.numpy().reshape(H // 2, W)])


def test_cuda_producer_writes_from_torch_tensors_on_its_stream(gpu, torch):
    """Each image is made on a torch stream behind a long kernel and dropped right after
    `send`: the copy waits for torch's stream (DLPack's stream handshake) and keeps the tensor
    until it ran; both consumers see every frame's bytes."""
    producer, (cpu, dev) = cuda_producer(gpu)
    assert producer.engine == "cuda"
    base = torch.arange(ROWS * W, device="cuda", dtype=torch.int64).reshape(ROWS, W) * 7
    side = torch.cuda.Stream()
    bad = torch.zeros((), dtype=torch.int64, device="cuda")
    for i in range(200):
        with torch.cuda.stream(side):
            torch.cuda._sleep(1_000_000)
            img = ((base + i * 31) % 251).to(torch.uint8)
            assert producer.send(img) == i
            del img
        with cpu.acquire() as f:
            np.testing.assert_array_equal(packed(f), pattern(i))
        with dev.acquire() as f:
            want = ((base + i * 31) % 251).to(torch.uint8)
            bad += (torch.from_dlpack(f.luma) != want[:H]).sum()
    assert bad.item() == 0


def test_cuda_producer_writes_planes_from_cupy_and_the_array_interface(gpu, cupy):
    class InterfaceOnly:
        def __init__(self, a):
            self.__cuda_array_interface__ = a.__cuda_array_interface__

    producer, (cpu, dev) = cuda_producer(gpu)
    for i in range(50):
        img = cupy.asarray(pattern(i))
        y, uv = img[:H], img[H:].reshape(H // 2, W // 2, 2)
        if i % 2:
            producer.send(luma=y, chroma=uv)  # DLPack
        else:
            producer.send(luma=InterfaceOnly(y), chroma=InterfaceOnly(uv))
        with cpu.acquire() as f:
            np.testing.assert_array_equal(packed(f), pattern(i))
        dev.acquire().release()


def test_cuda_producer_frames_are_written_in_place_by_torch(gpu, torch):
    producer, (cpu, dev) = cuda_producer(gpu)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for i in range(50):
            img = torch.from_numpy(pattern(i)).cuda()
            with producer.acquire() as f:
                assert f.luma.device == "cuda" and f.luma.writable
                torch.cuda._sleep(1_000_000)  # the writes below run late on torch's stream
                torch.from_dlpack(f.luma).copy_(img[:H])
                torch.from_dlpack(f.chroma).copy_(img[H:].reshape(H // 2, W // 2, 2))
            with cpu.acquire() as c:
                np.testing.assert_array_equal(packed(c), pattern(i))
            dev.acquire().release()


def test_cuda_producer_writes_numpy_arrays(gpu):
    producer, (cpu, dev) = cuda_producer(gpu)
    for i in range(20):
        producer.send(pattern(i)[:, ::1])
        with cpu.acquire() as f:
            np.testing.assert_array_equal(packed(f), pattern(i))
        dev.acquire().release()


def test_cuda_producer_refuses_tensors_that_do_not_fit(gpu, torch):
    producer, (cpu, dev) = cuda_producer(gpu, timeout=0.05)
    img = torch.zeros((ROWS, W), dtype=torch.uint8, device="cuda")
    wide = torch.zeros((ROWS, 2 * W), dtype=torch.uint8, device="cuda")
    for kwargs, name in [
        ({"array": img[:H]}, "array"),
        ({"array": img.to(torch.float32)}, "array"),
        ({"array": wide[:, ::2]}, "array"),  # rows not contiguous
        ({"array": img.cpu()}, "array"),  # a CPU tensor is no numpy array
        ({"luma": img[:H], "chroma": img[H:]}, "chroma"),
    ]:
        with pytest.raises(nvsci.InvalidArgument) as e:
            producer.send(**kwargs)
        assert e.value.name == name, kwargs
    assert producer.presented == 0
    with pytest.raises(nvsci.RingTimeout):
        cpu.acquire()


def test_cuda_consumer_process(gpu, torch, tmp_path, monkeypatch):
    """A CUDA consumer in another process (the mock's GPU mode there too) reading every frame
    with torch through DLPack."""
    (tmp_path / "nvsciipc.cfg").write_text("INTER_PROCESS gpu_0 gpu_1 16 4096\n")
    monkeypatch.setenv("NVSCI_MOCK_IPC_DIR", str(tmp_path))
    from ipc_consumer import pattern as flat

    producer, _ = gpu.stream(
        nvsci.FrameFormat.nv12(W, H),
        consumers=[],
        reserve=[nvsci.ConsumerDesc(engine="cuda", endpoint="gpu_0")],
        timeout=30.0,
    )
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "ipc_consumer.py"), "gpu_1", f"nv12:{W}x{H}", "--engine", "cuda"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    until = time.monotonic() + 60
    while not producer.remote_seats[0].attached:
        assert time.monotonic() < until, "the CUDA consumer process did not attach"
        time.sleep(0.01)
    n = 200
    for i in range(n):
        producer.send(flat(i, ROWS * W).reshape(ROWS, W))
    producer.close()
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    got = json.loads(out.strip().splitlines()[-1])
    assert got["error"] is None and got["bad"] == [] and got["taken"] == list(range(n)), got
    assert got["ledger"] == {}


# The crate's NV12 -> RGBA kernel on a frame in place (nvsci.nv12_to_rgba) ---------------------


def rgba_numpy(img, h):
    """RGBA of a packed NV12 image of height `h`: the BT.601 reference, alpha 255."""
    w = img.shape[1]
    rgb = nv12_to_rgb_numpy(img[:h], img[h:].reshape(h // 2, w // 2, 2))
    return np.concatenate([rgb, np.full((h, w, 1), 255, np.uint8)], -1)


@pytest.mark.parametrize("size", [(W, H), (66, 34)])  # 66: rows of no multiple of 4 bytes
def test_the_crate_kernel_converts_a_cuda_frame_into_torch(gpu, torch, size):
    """Every pixel of each frame, converted in place by the crate's kernel into a torch
    tensor on torch's (non-default) stream, against the BT.601 reference; `sum` gets each
    frame's R + G + B."""
    w, h = size
    producer, (consumer,) = gpu.stream(
        nvsci.FrameFormat.nv12(w, h), consumers=[nvsci.ConsumerDesc(engine="cuda")], frames=3
    )
    n = 12
    side = torch.cuda.Stream()
    outs = torch.zeros(n, h, w, 4, dtype=torch.uint8, device="cuda")
    sums = torch.zeros(n, dtype=torch.int64, device="cuda")
    imgs = []
    with torch.cuda.stream(side):
        for i in range(n):
            img = ((np.arange((h + h // 2) * w).reshape(-1, w) * 7 + i * 31) % 256).astype(np.uint8)
            imgs.append(img)
            producer.send(img)
            with consumer.acquire() as f:
                nvsci.nv12_to_rgba(f, outs[i], stream=torch.cuda.current_stream(), sum=sums[i])
    side.synchronize()
    got, got_sums = outs.cpu().numpy(), sums.cpu().tolist()
    for i, img in enumerate(imgs):
        want = rgba_numpy(img, h)
        np.testing.assert_array_equal(got[i], want)
        assert got_sums[i] == int(want[..., :3].astype(np.int64).sum())


def test_the_crate_kernel_reads_a_frame_presented_just_before(gpu, torch):
    """As the stale-frame test above, with the crate's kernel: a CUDA producer writes each
    frame behind a long kernel on its stream; right after `acquire`, with no host
    synchronisation, the conversion is enqueued on torch's reader stream and compared there
    with the frame's reference. Every frame must match: the present fence is waited on the
    caller's stream before the kernel."""
    producer, consumer, writer, reader, base = late_write_stream(gpu, torch)
    n = 100
    wrong = torch.zeros(n, dtype=torch.int64, device="cuda")
    out = torch.empty(H, W, 4, dtype=torch.uint8, device="cuda")
    with torch.cuda.stream(reader):
        for i in range(n):
            with torch.cuda.stream(writer):
                torch.cuda._sleep(LATE_WRITE_CYCLES)
                img = distinct(torch, base, i)
                assert producer.send(img) == i
                del img
            with consumer.acquire() as f:
                nvsci.nv12_to_rgba(f, out, stream=reader)
            want = distinct(torch, base, i)
            rgb = nv12_to_rgb_torch(torch, want[:H], want[H:].reshape(H // 2, W // 2, 2))
            wrong[i] = (out[..., :3] != rgb).sum()
    torch.cuda.synchronize()
    got = wrong.tolist()
    assert got == [0] * n, [(i, v) for i, v in enumerate(got) if v][:10]


def test_the_crate_kernel_is_done_before_the_release(gpu, torch):
    """The conversion runs late on torch's stream (behind a long kernel) and the frame is
    released at once; the producer, which reuses the slot at once (two frames), must not
    overwrite it before the kernel read it: the release is ordered after the caller's
    stream."""
    producer, (consumer,) = cuda_stream(gpu, frames=2)
    stream = torch.cuda.Stream()
    n = 40
    sums = torch.zeros(n, dtype=torch.int64, device="cuda")
    out = torch.empty(H, W, 4, dtype=torch.uint8, device="cuda")
    with torch.cuda.stream(stream):
        for i in range(n):
            producer.send(np.full((ROWS, W), 16 + i, np.uint8))
            with consumer.acquire() as f:
                torch.cuda._sleep(2_000_000)
                nvsci.nv12_to_rgba(f, out, stream=stream, sum=sums[i])
    stream.synchronize()
    want = [int(rgba_numpy(np.full((ROWS, W), 16 + i, np.uint8), H)[..., :3].astype(np.int64).sum()) for i in range(n)]
    assert sums.tolist() == want


def test_the_crate_kernel_converts_into_cupy_and_the_array_interface(gpu, cupy):
    class InterfaceOnly:
        def __init__(self, a):
            self.__cuda_array_interface__ = a.__cuda_array_interface__

    producer, (consumer,) = cuda_stream(gpu)
    for i in range(6):
        img = pattern(i)
        producer.send(img)
        out = cupy.zeros((H, W, 4), cupy.uint8)
        total = cupy.zeros((1,), cupy.uint64)
        s = cupy.cuda.get_current_stream().ptr
        with consumer.acquire() as f:
            if i % 2:
                nvsci.nv12_to_rgba(f, out, stream=s, sum=total)  # DLPack
            else:
                nvsci.nv12_to_rgba(f, InterfaceOnly(out), stream=s, sum=InterfaceOnly(total))
        want = rgba_numpy(img, H)
        np.testing.assert_array_equal(cupy.asnumpy(out), want)
        assert int(total[0]) == int(want[..., :3].astype(np.int64).sum())


def test_the_crate_kernel_converts_torch_images(gpu, torch):
    """An NV12 image in a torch tensor (the copy path's destination), packed and with padded
    rows, on the default stream (stream=None)."""
    img = pattern(5)
    dev = torch.from_numpy(img).cuda()
    out = torch.zeros(H, W, 4, dtype=torch.uint8, device="cuda")
    nvsci.nv12_to_rgba(dev, out)
    np.testing.assert_array_equal(out.cpu().numpy(), rgba_numpy(img, H))
    wide = torch.zeros(ROWS, W + 64, dtype=torch.uint8, device="cuda")
    wide[:, :W] = dev
    out.zero_()
    total = torch.zeros((), dtype=torch.int64, device="cuda")
    nvsci.nv12_to_rgba(wide[:, :W], out, sum=total)
    want = rgba_numpy(img, H)
    np.testing.assert_array_equal(out.cpu().numpy(), want)
    assert total.item() == int(want[..., :3].astype(np.int64).sum())


def test_the_crate_kernel_refusals(gpu, torch):
    producer, (consumer,) = cuda_stream(gpu)
    producer.send(pattern(0))
    out = torch.zeros(H, W, 4, dtype=torch.uint8, device="cuda")
    with consumer.acquire() as f:
        for name, kwargs in [
            ("out", {"out": np.zeros((H, W, 4), np.uint8)}),  # host memory for a CUDA frame
            ("out", {"out": out.cpu()}),
            ("out", {"out": out.to(torch.int32)}),
            ("out", {"out": out[:, :, :3]}),
            ("out", {"out": out.permute(1, 0, 2)}),
            ("out", {"out": torch.zeros(H, 2 * W, 4, dtype=torch.uint8, device="cuda")[:, ::2]}),
            ("sum", {"out": out, "sum": torch.zeros((), dtype=torch.int64)}),  # on the CPU
            ("sum", {"out": out, "sum": torch.zeros(2, dtype=torch.int64, device="cuda")}),
            ("sum", {"out": out, "sum": torch.zeros((), dtype=torch.float64, device="cuda")}),
            ("stream", {"out": out, "stream": "default"}),
        ]:
            o = kwargs.pop("out")
            with pytest.raises(nvsci.InvalidArgument) as e:
                nvsci.nv12_to_rgba(f, o, **kwargs)
            assert e.value.name == name, (name, e.value.reason)
        # A read-only `out`: a consumer's plane exported through DLPack carries the flag.
        producer2, (consumer2,) = gpu.stream(
            nvsci.FrameFormat.rgba(W, H), consumers=[nvsci.ConsumerDesc(engine="cuda")]
        )
        with producer2.acquire():
            pass
        with consumer2.acquire() as g:
            with pytest.raises(nvsci.InvalidArgument) as e:
                nvsci.nv12_to_rgba(f, g.rgba)
            assert e.value.name == "out"
        nvsci.nv12_to_rgba(f, out)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), rgba_numpy(pattern(0), H))
    # A CUDA image with a numpy `out`.
    with pytest.raises(nvsci.InvalidArgument) as e:
        nvsci.nv12_to_rgba(torch.from_numpy(pattern(0)).cuda(), np.zeros((H, W, 4), np.uint8))
    assert e.value.name == "out"
