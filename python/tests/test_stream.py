"""Streams on the mock NvSci library, CPU engines: every frame's bytes and metadata read back
in Python, the consumers' counters, and the lifetime rules of frames and planes."""

import threading

import numpy as np
import pytest

import nvsci

W, H = 64, 32


def nv12_image(seed, w=W, h=H):
    """A packed NV12 image (luma rows, then interleaved chroma rows) unique to `seed`."""
    rows = h + h // 2
    return ((np.arange(rows * w, dtype=np.uint32).reshape(rows, w) * 7 + seed * 31) % 251).astype(np.uint8)


def mock_stream(fmt=None, **kw):
    return nvsci.Backend.mock().stream(fmt or nvsci.FrameFormat.nv12(W, H), **kw)


def test_mock_backend_has_cpu_engines():
    b = nvsci.Backend.mock()
    assert b.kind == "nvsci"
    assert "Mock NvSci library" in b.explain()


def test_nv12_frames_read_back_in_place():
    producer, (consumer,) = mock_stream(frames=3)
    sent = []
    for i in range(10):
        img = nv12_image(i)
        header = bytes([i, 0xA5]) + b"frame"
        seq = producer.send(img, capture_time=1000 + i, user_header=header)
        sent.append((seq, img, header))
        frame = consumer.acquire()
        with frame:
            assert frame.sequence == seq == i
            assert frame.capture_time == 1000 + i
            assert frame.user_header == header + bytes(nvsci.USER_HEADER_SIZE - len(header))
            assert frame.consumer == consumer.id == 0
            luma, chroma = frame.luma.numpy(), frame.chroma.numpy()
            assert luma.shape == (H, W) and luma.dtype == np.uint8
            assert chroma.shape == (H // 2, W // 2, 2)
            np.testing.assert_array_equal(luma, img[:H])
            np.testing.assert_array_equal(chroma.reshape(H // 2, W), img[H:])
        assert not frame.held
    assert consumer.delivered == 10
    assert consumer.skipped == 0
    assert consumer.last_sequence == 9
    assert producer.presented == 10


def test_views_are_the_frame_in_place():
    producer, (consumer,) = mock_stream(frames=2)
    with producer.acquire() as f:
        y = f.luma.numpy()
        assert y.flags.writeable
        y[:] = 17
        f.chroma.numpy()[:] = (90, 200)
    frame = consumer.acquire()
    luma = frame.luma.numpy()
    # The view points at the frame's own memory: one pitch apart per row, read-only.
    assert not luma.flags.writeable
    assert luma.strides[1] == 1 and luma.strides[0] >= W
    assert frame.luma.strides == luma.strides
    with pytest.raises(ValueError):
        luma[0, 0] = 1
    assert (luma == 17).all()
    assert (frame.chroma.numpy()[..., 0] == 90).all() and (frame.chroma.numpy()[..., 1] == 200).all()
    frame.release()


def test_luma_and_chroma_arguments():
    producer, (consumer,) = mock_stream()
    y = np.full((H, W), 3, np.uint8)
    uv = np.zeros((H // 2, W // 2, 2), np.uint8)
    uv[..., 1] = 250
    producer.send(luma=y, chroma=uv)
    with consumer.acquire() as f:
        np.testing.assert_array_equal(f.luma.numpy(), y)
        np.testing.assert_array_equal(f.chroma.numpy(), uv)


@pytest.mark.parametrize(
    "fmt,shape,plane",
    [(nvsci.FrameFormat.rgba(40, 20), (20, 40, 4), "rgba"), (nvsci.FrameFormat.raw(1000), (1000,), "data")],
)
def test_rgba_and_raw_frames(fmt, shape, plane):
    producer, (consumer,) = mock_stream(fmt)
    a = (np.arange(np.prod(shape)) % 253).astype(np.uint8).reshape(shape)
    producer.send(a)
    with consumer.acquire() as f:
        view = getattr(f, plane).numpy()
        assert view.shape == shape
        np.testing.assert_array_equal(view, a)
        assert [p.name for p in f.planes] == [plane]


def test_dlpack_cpu_export_is_read_only_and_in_place():
    producer, (consumer,) = mock_stream()
    img = nv12_image(5)
    producer.send(img)
    with consumer.acquire() as f:
        assert f.luma.__dlpack_device__() == (1, 0)
        a = np.from_dlpack(f.luma)
        assert not a.flags.writeable
        np.testing.assert_array_equal(a, img[:H])
        assert a.__array_interface__["data"][0] == f.luma.__array_interface__["data"][0]


def test_mailbox_consumer_gets_the_newest_frame():
    producer, (fifo, mailbox) = mock_stream(
        frames=4, consumers=[nvsci.ConsumerDesc(), nvsci.ConsumerDesc(mode="mailbox")]
    )
    assert (fifo.mode, mailbox.mode) == ("fifo", "mailbox")
    for i in range(3):
        producer.send(nv12_image(i))
    with mailbox.acquire() as f:
        assert f.sequence == 2
        np.testing.assert_array_equal(f.luma.numpy(), nv12_image(2)[:H])
    assert mailbox.skipped == 2 and mailbox.delivered == 1
    assert [f.sequence for f in _take(fifo, 3)] == [0, 1, 2]
    assert fifo.skipped == 0


def _take(consumer, n):
    out = []
    for _ in range(n):
        f = consumer.acquire()
        out.append(f)
        f.release()
    return out


def test_late_consumer_attaches_to_a_reserved_seat():
    producer, consumers = mock_stream(consumers=[nvsci.ConsumerDesc()], reserve=[nvsci.ConsumerDesc()])
    (first,) = consumers
    producer.send(nv12_image(0))
    late = producer.attach(nvsci.ConsumerDesc(mode="mailbox"))
    assert late.mode == "mailbox" and late.id == 1
    producer.send(nv12_image(1))
    with late.acquire() as f:
        assert f.sequence == 1  # from the next present on
    with pytest.raises(nvsci.NoSeat) as e:
        producer.attach(nvsci.ConsumerDesc())
    assert e.value.fitting == 2
    _take(first, 2)


def test_iteration_ends_after_the_producer_closes():
    producer, (consumer,) = mock_stream(frames=4)
    for i in range(3):
        producer.send(nv12_image(i))
    producer.close()
    seen = []
    for frame in consumer:
        with frame:
            seen.append(frame.sequence)
            np.testing.assert_array_equal(frame.luma.numpy(), nv12_image(frame.sequence)[:H])
    assert seen == [0, 1, 2]
    assert consumer.acquire() is None


def test_producer_thread_and_consumer_loop():
    producer, (consumer,) = mock_stream(frames=3, timeout=5.0)
    n = 60

    def produce():
        for i in range(n):
            producer.send(nv12_image(i), capture_time=i)
        producer.close()

    t = threading.Thread(target=produce)
    t.start()
    got = 0
    for frame in consumer:
        with frame:
            assert frame.sequence == got and frame.capture_time == got
            np.testing.assert_array_equal(frame.luma.numpy(), nv12_image(got)[:H])
            got += 1
    t.join()
    assert got == n and consumer.delivered == n


def test_timeouts_name_what_was_waited_for():
    producer, (consumer,) = mock_stream(frames=2, timeout=0.05)
    with pytest.raises(nvsci.RingTimeout) as e:
        consumer.acquire()
    assert e.value.waited_for == "frame" and isinstance(e.value, TimeoutError)
    held = [None, None]
    producer.send(nv12_image(0))
    producer.send(nv12_image(1))
    held[0] = consumer.acquire()
    held[1] = consumer.acquire()
    with pytest.raises(nvsci.RingTimeout) as e:
        producer.send(nv12_image(2))
    assert e.value.waited_for == "free_slot"
    assert e.value.holders == [0]
    assert e.value.sequence == 0
    assert e.value.timeout == pytest.approx(0.05)
    for f in held:
        f.release()
    assert producer.send(nv12_image(2)) == 2


def test_a_dropped_frame_is_released():
    producer, (consumer,) = mock_stream(frames=2, timeout=0.5)
    for i in range(6):
        producer.send(nv12_image(i))
        f = consumer.acquire()
        assert f.sequence == i
        del f  # released when dropped: the producer never runs out of frames


def test_a_view_keeps_the_memory_after_everything_closed():
    producer, (consumer,) = mock_stream()
    producer.send(nv12_image(3))
    frame = consumer.acquire()
    view = frame.luma.numpy()
    producer.close()
    consumer.close()
    del frame, producer, consumer
    # The stream is gone; the view still reads the frame's last bytes (not a dangling pointer).
    np.testing.assert_array_equal(view, nv12_image(3)[:H])
