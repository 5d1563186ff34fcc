"""`nvsci.nv12_to_rgba` on the CPU (a CPU consumer's frames in place, numpy images): every
pixel against an independent BT.601 reference, and each refusal naming its argument. The CUDA
kernel's tests (CUDA frames into torch and CuPy arrays, on the caller's stream) are in
test_cuda.py. The ledger fixture (conftest.py) checks after each test that the mock has no
live handle left."""

import numpy as np
import pytest

import nvsci
from fake_arrays import CudaArrayInterface, DlpackCuda

W, H = 64, 32
ROWS = H + H // 2


def bt601(img):
    """RGB of a packed NV12 image (luma rows, then U, V rows), BT.601 studio range in 8-bit
    integers as Microsoft documents it ("Converting 8-bit YUV to RGB888", learn.microsoft.com,
    Recommended 8-Bit YUV Formats for Video Rendering): C = Y - 16, D = U - 128, E = V - 128,
    R = clip((298 C + 409 E + 128) >> 8), G = clip((298 C - 100 D - 208 E + 128) >> 8),
    B = clip((298 C + 516 D + 128) >> 8); chroma shared by each 2x2 block of pixels."""
    h = img.shape[0] // 3 * 2
    y = img[:h].astype(np.int64)
    uv = img[h:].reshape(h // 2, -1, 2).astype(np.int64)
    up = lambda p: np.repeat(np.repeat(p, 2, 0), 2, 1)  # noqa: E731
    c, d, e = y - 16, up(uv[..., 0]) - 128, up(uv[..., 1]) - 128
    rgb = np.stack([298 * c + 409 * e + 128, 298 * c - 100 * d - 208 * e + 128, 298 * c + 516 * d + 128], -1)
    return np.clip(rgb >> 8, 0, 255).astype(np.uint8)


def image(seed, w=W, h=H):
    """A packed NV12 image whose luma runs through every value 0..255 (clipping both ways)
    and whose U and V vary independently of it and of each other."""
    yy, xx = np.mgrid[0 : h + h // 2, 0:w]
    img = (xx * 7 + yy * 13 + seed * 31) % 256
    img[h:, 1::2] = (xx[h:, 1::2] * 5 + yy[h:, 1::2] * 29 + seed * 11 + 100) % 256  # V
    return img.astype(np.uint8)


def rgba(w=W, h=H):
    return np.full((h, w, 4), 7, np.uint8)  # neither 255 nor a likely result: written or not shows


def check(out, img):
    np.testing.assert_array_equal(out[..., :3], bt601(img))
    assert (out[..., 3] == 255).all()


def test_the_reference_is_bt601():
    """The integer reference stays within 1 of BT.601's real-valued studio-range matrix
    (ITU-R BT.601: R = 1.164 (Y - 16) + 1.596 (V - 128), G = 1.164 (Y - 16) - 0.392 (U - 128)
    - 0.813 (V - 128), B = 1.164 (Y - 16) + 2.017 (U - 128)) on every pixel of the images the
    tests use."""
    for seed in range(3):
        img = image(seed)
        y = img[:H].astype(np.float64)
        uv = img[H:].reshape(H // 2, W // 2, 2).astype(np.float64)
        up = lambda p: np.repeat(np.repeat(p, 2, 0), 2, 1)  # noqa: E731
        c, d, e = y - 16, up(uv[..., 0]) - 128, up(uv[..., 1]) - 128
        real = np.stack([1.164 * c + 1.596 * e, 1.164 * c - 0.392 * d - 0.813 * e, 1.164 * c + 2.017 * d], -1)
        real = np.clip(np.round(real), 0, 255)
        assert np.abs(real - bt601(img).astype(np.float64)).max() <= 1


def test_a_cpu_frame_is_converted_in_place():
    """Every pixel of each frame of a CPU consumer (the mock's layout, its pitches and plane
    offsets), with the frame's R + G + B added to `sum`; the frame stays held and unchanged."""
    producer, (consumer,) = nvsci.Backend.mock().stream(nvsci.FrameFormat.nv12(W, H))
    for seed in range(5):
        img = image(seed)
        producer.send(img)
        with consumer.acquire() as f:
            out, total = rgba(), np.zeros((), np.uint64)
            total[...] = 1000
            assert nvsci.nv12_to_rgba(f, out, sum=total) is None
            check(out, img)
            assert int(total) == 1000 + int(bt601(img).astype(np.int64).sum())
            assert f.held
            np.testing.assert_array_equal(f.luma.numpy(), img[:H])


def test_numpy_images_are_converted():
    """A packed NV12 image, one whose rows are padded (a view of a wider array), an int64
    counter of shape (1,), and a non-numpy host array (DLPack, CPU device) as `out`."""
    img = image(7)
    out = rgba()
    nvsci.nv12_to_rgba(img, out)
    check(out, img)
    wide = np.zeros((ROWS, W + 40), np.uint8)
    wide[:, :W] = image(8)
    out, total = rgba(), np.zeros(1, np.int64)
    nvsci.nv12_to_rgba(wide[:, :W], out, sum=total)
    check(out, image(8))
    assert total[0] == bt601(image(8)).astype(np.int64).sum()
    # A tiny image whose width is no multiple of 4.
    small = image(3, w=6, h=2)
    out = rgba(6, 2)
    nvsci.nv12_to_rgba(small, out)
    check(out, small)


def _refused(name, call, cls=nvsci.InvalidArgument):
    with pytest.raises(cls) as e:
        call()
    assert e.value.name == name, (e.value.name, e.value.reason)
    assert isinstance(e.value, ValueError)
    return e.value


def test_refusals_name_the_argument():
    producer, (consumer,) = nvsci.Backend.mock().stream(nvsci.FrameFormat.nv12(W, H))
    img = image(1)
    producer.send(img)
    f = consumer.acquire()
    ro = rgba()
    ro.flags.writeable = False
    wide = np.zeros((H, W, 8), np.uint8)
    for name, kwargs in [
        ("out", {"out": np.zeros((H, W, 3), np.uint8)}),
        ("out", {"out": np.zeros((W, H, 4), np.uint8)}),
        ("out", {"out": np.zeros((H, W, 4), np.float32)}),
        ("out", {"out": wide[..., :4]}),  # pixels 8 bytes apart
        ("out", {"out": np.zeros((H, 2 * W, 4), np.uint8)[:, ::2]}),
        ("out", {"out": np.asfortranarray(rgba())}),
        ("out", {"out": ro}),
        ("out", {"out": [[0] * 4] * (W * H)}),
        ("out", {"out": CudaArrayInterface((H, W, 4))}),  # a CPU frame converts into host memory
        ("out", {"out": DlpackCuda()}),
        ("stream", {"out": rgba(), "stream": 1}),  # the CPU takes no stream
        ("sum", {"out": rgba(), "sum": np.zeros((), np.float64)}),
        ("sum", {"out": rgba(), "sum": np.zeros(2, np.uint64)}),
        ("sum", {"out": rgba(), "sum": np.zeros((), np.uint32)}),
        ("sum", {"out": rgba(), "sum": np.zeros((1, 1), np.uint64)}),
        ("sum", {"out": rgba(), "sum": CudaArrayInterface((), "<u8")}),
    ]:
        out = kwargs.pop("out")
        _refused(name, lambda: nvsci.nv12_to_rgba(f, out, **kwargs))
    # A read-only sum.
    total = np.zeros((), np.uint64)
    total.flags.writeable = False
    _refused("sum", lambda: nvsci.nv12_to_rgba(f, rgba(), sum=total))
    # The frame converts after the refusals.
    out = rgba()
    nvsci.nv12_to_rgba(f, out)
    check(out, img)
    # Released, or its consumer closed: FrameReleased (naming the frame).
    f.release()
    _refused("frame", lambda: nvsci.nv12_to_rgba(f, rgba()), nvsci.FrameReleased)
    producer.send(img)
    g = consumer.acquire()
    consumer.close()
    _refused("frame", lambda: nvsci.nv12_to_rgba(g, rgba()), nvsci.FrameReleased)
    # A producer's frame is no consumer's frame and no array.
    with producer.acquire() as p:
        _refused("src", lambda: nvsci.nv12_to_rgba(p, rgba()))


def test_frames_that_are_not_nv12_rows_are_refused():
    for fmt in (nvsci.FrameFormat.rgba(W, H), nvsci.FrameFormat.nv12_block_linear(W, H)):
        producer, (consumer,) = nvsci.Backend.mock().stream(fmt)
        with producer.acquire():
            pass
        with consumer.acquire() as f:
            _refused("src", lambda: nvsci.nv12_to_rgba(f, rgba()))


def test_images_that_are_not_nv12_are_refused():
    img = image(2)
    for bad in [
        img[:-1],  # rows not height * 3 / 2
        np.zeros((ROWS, W - 1), np.uint8),  # odd width
        np.zeros((3, W), np.uint8)[:0],  # empty
        img.astype(np.uint16),
        img[:, ::2],  # rows not contiguous
        img[::-1],  # rows backwards
        img.reshape(-1),
        "not an image",
        CudaArrayInterface((ROWS, W)).__cuda_array_interface__,  # a dict is no array
    ]:
        _refused("src", lambda: nvsci.nv12_to_rgba(bad, rgba()))
    _refused("out", lambda: nvsci.nv12_to_rgba(img, rgba(W, H + 2)))
    _refused("out", lambda: nvsci.nv12_to_rgba(img, CudaArrayInterface((H, W, 4))))
    _refused("stream", lambda: nvsci.nv12_to_rgba(img, rgba(), stream=0))
    # `out` over the image's own bytes.
    buf = np.zeros(ROWS * W + H * W * 4, np.uint8)
    src = buf[: ROWS * W].reshape(ROWS, W)
    _refused("out", lambda: nvsci.nv12_to_rgba(src, buf[ROWS * W - 4 : ROWS * W - 4 + H * W * 4].reshape(H, W, 4)))
