"""Bad input: each case a Python exception naming the argument, never a crash; the ledger
fixture (conftest.py) checks after each that the mock has no live handle left."""

import numpy as np
import pytest

import nvsci
from fake_arrays import CudaArrayInterface, DlpackCuda

W, H = 64, 32


def mock_stream(**kw):
    return nvsci.Backend.mock().stream(nvsci.FrameFormat.nv12(W, H), **kw)


def frame_with(producer, consumer, value=1):
    producer.send(np.full((H + H // 2, W), value, np.uint8))
    return consumer.acquire()


def test_frame_used_after_release():
    producer, (consumer,) = mock_stream()
    frame = frame_with(producer, consumer)
    plane = frame.luma
    frame.release()
    for use in (
        lambda: frame.luma,
        lambda: frame.planes,
        lambda: frame.release(),
        lambda: plane.numpy(),
        lambda: plane.__dlpack__(max_version=(1, 0)),
        lambda: plane.__dlpack_device__(),
    ):
        with pytest.raises(nvsci.FrameReleased) as e:
            use()
        assert e.value.name == "frame"
        assert isinstance(e.value, ValueError)
    # Leaving a `with` block of a released frame does nothing more.
    with frame:
        pass


def test_frame_used_after_its_consumer_closed():
    producer, (consumer,) = mock_stream()
    frame = frame_with(producer, consumer)
    consumer.close()
    assert not frame.held and consumer.closed
    with pytest.raises(nvsci.FrameReleased) as e:
        frame.luma.numpy()
    assert e.value.name == "frame"
    with pytest.raises(nvsci.StreamClosed) as e:
        consumer.acquire()
    assert e.value.name == "consumer"
    with pytest.raises(nvsci.StreamClosed):
        consumer.delivered
    # The producer goes on without the closed consumer's frames.
    producer.send(np.zeros((H + H // 2, W), np.uint8))


def test_producer_used_after_close():
    producer, (consumer,) = mock_stream()
    held = producer.acquire()
    producer.close()
    assert not held.held
    for use in (producer.acquire, lambda: producer.send(np.zeros((H + H // 2, W), np.uint8))):
        with pytest.raises(nvsci.StreamClosed) as e:
            use()
        assert e.value.name == "producer"
    with pytest.raises(nvsci.FrameReleased):
        held.luma
    with pytest.raises(nvsci.StreamClosed):
        producer.attach(nvsci.ConsumerDesc())
    assert list(consumer) == []


def test_producer_frame_used_after_present():
    producer, (consumer,) = mock_stream()
    f = producer.acquire()
    f.present()
    with pytest.raises(nvsci.FrameReleased):
        f.present()
    with pytest.raises(nvsci.FrameReleased):
        f.write(np.zeros((H + H // 2, W), np.uint8))
    with pytest.raises(nvsci.FrameReleased):
        f.capture_time = 5
    consumer.acquire().release()


def test_dlpack_export_requested_twice():
    producer, (consumer,) = mock_stream()
    with frame_with(producer, consumer) as f:
        np.from_dlpack(f.luma)
        with pytest.raises(nvsci.ExportError) as e:
            np.from_dlpack(f.luma)
        assert e.value.name == "plane"
        assert isinstance(e.value, BufferError) and isinstance(e.value, ValueError)
        np.from_dlpack(f.chroma)  # another plane exports once too


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"stream": 5, "max_version": (1, 0)}, "stream"),
        ({"dl_device": (2, 0), "max_version": (1, 0)}, "dl_device"),
        ({"copy": True, "max_version": (1, 0)}, "copy"),
        ({}, "max_version"),  # the legacy ABI cannot mark a read-only frame
    ],
)
def test_dlpack_export_refusals(kwargs, name):
    producer, (consumer,) = mock_stream()
    with frame_with(producer, consumer) as f:
        with pytest.raises(nvsci.ExportError) as e:
            f.luma.__dlpack__(**kwargs)
        assert e.value.name == name
        # A refused request does not count as the plane's export.
        assert np.from_dlpack(f.luma).shape == (H, W)


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"array": np.zeros((H, W), np.uint8)}, "array"),  # luma rows only
        ({"array": np.zeros((H + H // 2, W), np.uint16)}, "array"),
        ({"array": np.zeros((H + H // 2, W), np.float32)}, "array"),
        ({"array": [[0] * W] * (H + H // 2)}, "array"),  # not an ndarray
        ({"luma": np.zeros((H, W), np.uint8), "chroma": np.zeros((H // 2, W), np.uint8)}, "chroma"),
        ({"luma": np.zeros((W, H), np.uint8), "chroma": np.zeros((H // 2, W // 2, 2), np.uint8)}, "luma"),
        ({"luma": np.zeros((H, W), np.uint8)}, "chroma"),
        ({}, "array"),
    ],
)
def test_send_with_a_wrong_array(kwargs, name):
    producer, (consumer,) = mock_stream(timeout=0.05)
    with pytest.raises(nvsci.InvalidArgument) as e:
        producer.send(**kwargs)
    assert e.value.name == name
    # Nothing was presented, and no frame stays taken.
    assert producer.presented == 0
    with pytest.raises(nvsci.RingTimeout):
        consumer.acquire()
    assert producer.send(np.zeros((H + H // 2, W), np.uint8)) == 0


def test_write_with_a_wrong_array_keeps_the_frame():
    producer, (consumer,) = mock_stream()
    f = producer.acquire()
    with pytest.raises(nvsci.InvalidArgument) as e:
        f.write(np.zeros((H + H // 2, W + 1), np.uint8))
    assert e.value.name == "array"
    f.write(np.full((H + H // 2, W), 4, np.uint8))
    f.present()
    with consumer.acquire() as c:
        assert (c.luma.numpy() == 4).all()


def test_a_block_that_raises_discards_the_frame():
    producer, (consumer,) = mock_stream(timeout=0.05)
    with pytest.raises(KeyError):
        with producer.acquire() as f:
            raise KeyError("camera failed")
    assert not f.held and producer.presented == 0
    with producer.acquire() as f:
        assert f.sequence == 0  # the discarded frame's sequence is handed out again
    consumer.acquire().release()


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"consumers": [nvsci.ConsumerDesc(engine="gpu")]}, "engine"),
        ({"consumers": [nvsci.ConsumerDesc(mode="lifo")]}, "mode"),
        ({"consumers": [nvsci.ConsumerDesc(limit=0)]}, "limit"),
        ({"consumers": []}, "consumers"),
        ({"frames": 1}, "frames"),
        ({"timeout": -1.0}, "timeout"),
    ],
)
def test_bad_stream_descriptions(kwargs, name):
    with pytest.raises(nvsci.InvalidArgument) as e:
        mock_stream(**kwargs)
    assert e.value.name == name


def test_cuda_engine_without_a_gpu():
    b = nvsci.Backend.mock()
    if b.has_cuda:
        pytest.skip("a CUDA GPU is present: the mock's GPU mode gives CUDA engines")
    with pytest.raises(nvsci.InvalidArgument) as e:
        b.stream(nvsci.FrameFormat.nv12(W, H), consumers=[nvsci.ConsumerDesc(engine="cuda")])
    assert e.value.name == "engine"


def test_bad_metadata():
    producer, (consumer,) = mock_stream()
    with pytest.raises(nvsci.InvalidArgument) as e:
        producer.send(np.zeros((H + H // 2, W), np.uint8), user_header=bytes(nvsci.USER_HEADER_SIZE + 1))
    assert e.value.name == "user_header"
    with producer.acquire() as f:
        with pytest.raises(nvsci.InvalidArgument) as e:
            f.user_header = bytes(nvsci.USER_HEADER_SIZE + 1)
        assert e.value.name == "user_header"
        f.user_header = b"ok"
        f.capture_time = 42
    with consumer.acquire() as c:
        assert c.user_header[:3] == b"ok\0" and c.capture_time == 42


def test_block_linear_frames_have_no_array_views():
    producer, (consumer,) = nvsci.Backend.mock().stream(nvsci.FrameFormat.nv12_block_linear(W, H))
    with producer.acquire() as f:
        with pytest.raises(nvsci.InvalidArgument) as e:
            f.luma
        assert e.value.name == "frame"
    with consumer.acquire() as c:
        with pytest.raises(nvsci.InvalidArgument) as e:
            c.luma
        assert e.value.name == "frame"


@pytest.mark.parametrize("array", [CudaArrayInterface((H + H // 2, W)), DlpackCuda()])
def test_a_cpu_producer_refuses_cuda_arrays(array):
    producer, (consumer,) = mock_stream(timeout=0.05)
    assert producer.engine == "cpu"
    with pytest.raises(nvsci.InvalidArgument) as e:
        producer.send(array)
    assert e.value.name == "array"
    assert producer.presented == 0


def test_producer_engines():
    b = nvsci.Backend.mock()
    with pytest.raises(nvsci.InvalidArgument) as e:
        b.stream(nvsci.FrameFormat.nv12(W, H), producer="gpu")
    assert e.value.name == "producer"
    if b.has_cuda:
        return
    with pytest.raises(nvsci.InvalidArgument) as e:
        b.stream(nvsci.FrameFormat.nv12(W, H), producer="cuda")
    assert e.value.name == "producer"
