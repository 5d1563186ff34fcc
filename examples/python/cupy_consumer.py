"""A CuPy consumer of an NV12 stream, every frame checked on the GPU (the mock's GPU mode: the
frames are host memory mapped into CUDA, the fences counters the streams wait on and signal).

    pip install ./python    # and CuPy
    python examples/python/cupy_consumer.py [--frames 1000] [--width 1920 --height 1080] [--producer cuda|cpu]

The producer is in this process: with `--producer cuda` (the default) it renders each frame with
CuPy on the GPU and `send`s the CuPy array, copied into the frame on the producer's CUDA stream
(after the stream CuPy rendered it on); with `--producer cpu` it renders with numpy and writes
the frame on the CPU. The consumer is a CUDA consumer: `cupy.from_dlpack(frame.luma)` reads the
frame in place on CuPy's current stream, after the frame's present fence; the frame is released
after CuPy's reads. Each frame is compared on the GPU with what was rendered; exits non-zero on
any mismatch. For a Rust producer in another process, see camera_ipc_consumer.py --cuda.
"""

import argparse
import sys
import time

import cupy
import numpy as np

import nvsci


def render(xp, seq, width, height):
    """The packed NV12 image of frame `seq` (luma rows, then interleaved U/V rows)."""
    rows = height + height // 2
    x = xp.arange(width, dtype=xp.uint32)[None, :]
    y = xp.arange(rows, dtype=xp.uint32)[:, None]
    return ((x + 3 * y + 5 * seq) % 256).astype(xp.uint8)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=1000)
    p.add_argument("--width", type=int, default=1920)
    p.add_argument("--height", type=int, default=1080)
    p.add_argument("--producer", choices=["cuda", "cpu"], default="cuda")
    a = p.parse_args()

    backend = nvsci.Backend.mock()
    if not backend.has_cuda:
        print("no CUDA GPU: the mock's GPU mode needs one", file=sys.stderr)
        return 2
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


if __name__ == "__main__":
    sys.exit(main())
