"""A CuPy consumer of an NV12 stream, every frame checked on the GPU (the mock's GPU mode: the
frames are host memory mapped into CUDA, the fences counters the streams wait on and signal).

    pip install ./python    # and CuPy
    python examples/python/cupy_consumer.py [--frames 1000] [--width 1920 --height 1080] [--producer cuda|cpu]
    python examples/python/cupy_consumer.py --camera target/debug/examples/camera_ipc [--frames 1000] \
        [--width 640 --height 480]

Without `--camera` the producer is in this process: with `--producer cuda` (the default) it renders each frame with
CuPy on the GPU and `send`s the CuPy array, copied into the frame on the producer's CUDA stream
(after the stream CuPy rendered it on); with `--producer cpu` it renders with numpy and writes
the frame on the CPU. The consumer is a CUDA consumer: `cupy.from_dlpack(frame.luma)` reads the
frame in place on CuPy's current stream, after the frame's present fence; the frame is released
after CuPy's reads. Each frame is compared on the GPU with what was rendered; exits non-zero on
any mismatch.

With `--camera` (camera_ipc built) the producer is the Rust camera of examples/camera_ipc.rs in
another process (`camera_ipc --role producer --cuda`, on the mock's NvSciIpc); this process
attaches with `nvsci.Consumer.connect` as a CUDA consumer and compares every frame on the GPU with
the camera's moving test pattern (camera_pattern.py), each frame's verdict kept on the GPU and read
once at the end. Prints frames verified, mismatched and missing; exits non-zero on any mismatch,
a missing frame, frames out of order or a camera that failed.
"""

import argparse
import sys
import time

import numpy as np

import nvsci

try:
    import cupy
except ImportError:
    cupy = None
from camera_pattern import CONSUMER_ENDPOINT, expected, start_camera, summary


def render(xp, seq, width, height):
    """The packed NV12 image of frame `seq` (luma rows, then interleaved U/V rows)."""
    rows = height + height // 2
    x = xp.arange(width, dtype=xp.uint32)[None, :]
    y = xp.arange(rows, dtype=xp.uint32)[:, None]
    return ((x + 3 * y + 5 * seq) % 256).astype(xp.uint8)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=1000)
    p.add_argument("--width", type=int, help="default 1920, 640 with --camera")
    p.add_argument("--height", type=int, help="default 1080, 480 with --camera")
    p.add_argument("--producer", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--camera", help="camera_ipc built: attach to it in another process instead")
    a = p.parse_args()
    a.width = a.width or (640 if a.camera else 1920)
    a.height = a.height or (480 if a.camera else 1080)

    backend = nvsci.Backend.mock()
    if cupy is None or not backend.has_cuda:
        print("needs CuPy and a CUDA GPU (the mock's GPU mode)", file=sys.stderr)
        return 2
    if a.camera:
        return from_camera(a, backend)
    producer, (consumer,) = backend.stream(
        nvsci.FrameFormat.nv12(a.width, a.height),
        consumers=[nvsci.ConsumerDesc(engine="cuda")],
        producer=a.producer,
        frames=4,
    )
    h, w = a.height, a.width
    mismatches = cupy.zeros((), dtype=cupy.int64)
    start = time.monotonic()
    for i in range(a.frames):
        if a.producer == "cuda":
            img = render(cupy, i, w, h)
        else:
            img = render(np, i, w, h)
        producer.send(img)
        want = img if a.producer == "cuda" else cupy.asarray(img)
        with consumer.acquire() as f:
            y = cupy.from_dlpack(f.luma)
            uv = cupy.from_dlpack(f.chroma)
            mismatches += (y != want[:h]).sum() + (uv.reshape(h // 2, w) != want[h:]).sum()
    bad = int(mismatches.get())
    elapsed = time.monotonic() - start
    producer.close()
    print(
        f"cupy_consumer: {a.frames} frames of {w}x{h} NV12 ({a.producer} producer) in {elapsed:.2f} s "
        f"({a.frames / elapsed:.1f} frames/s, rendering included), {bad} mismatching bytes"
    )
    return 0 if bad == 0 and consumer.delivered == a.frames else 1


def from_camera(a, backend):
    """A CUDA consumer process attached to camera_ipc's producer, every frame checked with CuPy."""
    cupy.zeros(1)  # CUDA's start takes a while: before the camera waits for us
    camera = start_camera(a.camera, a.frames, a.width, a.height, cuda=True)
    fmt = nvsci.FrameFormat.nv12(a.width, a.height)
    consumer = nvsci.Consumer.connect(backend, CONSUMER_ENDPOINT, fmt, nvsci.ConsumerDesc(engine="cuda"), timeout=10.0)
    bad_frames = cupy.zeros((), dtype=cupy.int64)
    seen, start = [], time.monotonic()
    for frame in consumer:
        with frame:
            # CuPy's current stream reads the frame: the present fence is waited on it first,
            # and the release is ordered after it.
            y, uv = cupy.from_dlpack(frame.luma), cupy.from_dlpack(frame.chroma)
            want_y, want_uv = expected(cupy, frame.sequence, a.width, a.height)
            bad_frames += ((y != want_y).sum() + (uv != want_uv).sum() > 0).astype(cupy.int64)
        seen.append(frame.sequence)
    bad = int(bad_frames.get())
    elapsed = time.monotonic() - start
    consumer.close()
    ok = camera.wait(timeout=60) == 0
    return summary("cupy_consumer (CuPy, CUDA)", seen, a.frames, bad, a.width, a.height, ok, elapsed)


if __name__ == "__main__":
    sys.exit(main())
