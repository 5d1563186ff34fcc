"""A PyTorch consumer converting NV12 frames to RGB on the GPU, in place (the mock's GPU mode:
the frames are page-locked host memory mapped into CUDA, the fences counters the stream
waits on).

    pip install ./python    # and torch with CUDA
    python examples/python/torch_nv12_to_rgb.py [--frames 600] [--width 1920 --height 1080]

`torch.from_dlpack(frame.luma)` hands torch the frame's mapping on its current stream: the
frame's present fence is waited before torch's kernels read it, and the release is signalled
after them. Each frame's RGB result is checked on the GPU against the conversion of what the
producer wrote; exits non-zero on any mismatch.
"""

import argparse
import sys
import threading
import time

import numpy as np
import torch

import nvsci


def render(seq, width, height):
    rows = height + height // 2
    x = np.arange(width, dtype=np.uint32)
    y = np.arange(rows, dtype=np.uint32)[:, None]
    return ((x + 3 * y + 5 * seq) % 256).astype(np.uint8)


def nv12_to_rgb(y, uv):
    """BT.601 limited range, 8-bit integer arithmetic (what nvsci::convert implements)."""
    y = y.to(torch.int32)
    uv = uv.to(torch.int32).repeat_interleave(2, 0).repeat_interleave(2, 1)
    u, v = uv[..., 0] - 128, uv[..., 1] - 128
    c = 298 * (y - 16)
    r = (c + 409 * v + 128) >> 8
    g = (c - 100 * u - 208 * v + 128) >> 8
    b = (c + 516 * u + 128) >> 8
    return torch.stack([r, g, b], -1).clamp(0, 255).to(torch.uint8)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=600)
    p.add_argument("--width", type=int, default=1920)
    p.add_argument("--height", type=int, default=1080)
    a = p.parse_args()

    backend = nvsci.Backend.mock()
    if not backend.has_cuda:
        print("no CUDA GPU: the mock's GPU mode needs one", file=sys.stderr)
        return 2
    producer, (consumer,) = backend.stream(
        nvsci.FrameFormat.nv12(a.width, a.height), consumers=[nvsci.ConsumerDesc(engine="cuda")], frames=4
    )
    h = a.height
    # The expected output of every frame, from the producer's own images (on the GPU).
    expected = {}

    def camera():
        with producer:
            for seq in range(a.frames):
                producer.send(render(seq, a.width, a.height))

    t = threading.Thread(target=camera)
    t.start()
    bad = torch.zeros((), dtype=torch.int64, device="cuda")
    start = time.perf_counter()
    for frame in consumer:
        with frame:
            rgb = nv12_to_rgb(torch.from_dlpack(frame.luma), torch.from_dlpack(frame.chroma))
        key = frame.sequence % 256  # render() repeats every 256 frames
        if key not in expected:
            img = torch.from_numpy(render(frame.sequence, a.width, a.height)).cuda()
            expected[key] = nv12_to_rgb(img[:h], img[h:].reshape(h // 2, a.width // 2, 2))
        bad += (rgb != expected[key]).any()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    t.join()
    print(
        f"{consumer.delivered} frames of {a.width}x{a.height} converted on {torch.cuda.get_device_name()} "
        f"in {elapsed:.2f} s ({consumer.delivered / elapsed:.0f} frames/s); {bad.item()} mismatching frames"
    )
    return 0 if bad.item() == 0 and consumer.delivered == a.frames else 1


if __name__ == "__main__":
    sys.exit(main())
