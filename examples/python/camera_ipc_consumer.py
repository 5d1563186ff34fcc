"""A Python consumer process attached to the Rust camera of examples/camera_ipc.rs, through an
NvSciIpc endpoint (the mock's: Unix sockets in a temporary directory).

    cargo build --example camera_ipc && pip install ./python
    python examples/python/camera_ipc_consumer.py --camera target/debug/examples/camera_ipc \\
        [--frames 1000] [--width 640 --height 480] [--cuda]

It starts the camera (`camera_ipc --role producer`, with `--cuda` its consumer seat on the CUDA
engine; the camera waits for its consumer while it builds its stream), attaches with
`nvsci.Consumer.connect` and checks every byte of every frame against the camera's moving test
pattern (examples/support/nv12_pattern.rs, camera_pattern.py here): with numpy on the frames in
place, or with `--cuda` as a PyTorch consumer on the GPU (the mock's GPU mode): the frame's planes
through `torch.from_dlpack` (the present fence waited on torch's stream before it reads, the
release after its reads), converted to RGB with torch operations, the planes compared with the
pattern and the RGB image with the conversion of the pattern, all on the GPU (each frame's
verdict is kept on the GPU and read once at the end). Prints one line: frames verified,
mismatched and missing; exits non-zero on any mismatch, a missing frame, frames out of order or a
camera that failed. With `--camera` left out it attaches to a camera started by hand
(`NVSCI_MOCK_IPC_DIR` naming the directory of its `nvsciipc.cfg`, with the channel
`camera_ipc_0 camera_ipc_1`; start the camera with `--cuda` for a `--cuda` consumer).
"""

import argparse
import sys
import time

import numpy as np

import nvsci
from camera_pattern import CONSUMER_ENDPOINT, expected, start_camera, summary


def nv12_to_rgb(torch, y, uv):
    """BT.601 limited range, 8-bit integer arithmetic (nvsci::convert's rounding), with torch."""
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
    p.add_argument("--camera", help="camera_ipc built (started here with --role producer)")
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--width", type=int, default=640)
    p.add_argument("--height", type=int, default=480)
    p.add_argument("--cuda", action="store_true", help="a PyTorch consumer on the GPU (CUDA engine)")
    a = p.parse_args()

    backend = nvsci.Backend.mock()
    torch = None
    if a.cuda:
        if not backend.has_cuda:
            print("--cuda: no CUDA GPU (the mock's GPU mode needs one)", file=sys.stderr)
            return 2
        # torch's import and CUDA's start take seconds: before the camera waits for us.
        import torch

        torch.zeros(1, device="cuda")
    camera = start_camera(a.camera, a.frames, a.width, a.height, a.cuda) if a.camera else None
    fmt = nvsci.FrameFormat.nv12(a.width, a.height)
    desc = nvsci.ConsumerDesc(engine="cuda" if a.cuda else "cpu")
    consumer = nvsci.Consumer.connect(backend, CONSUMER_ENDPOINT, fmt, desc, timeout=10.0)
    seen, start = [], time.monotonic()
    if a.cuda:
        bad_frames = torch.zeros((), dtype=torch.int64, device="cuda")
        for frame in consumer:
            with frame:
                y, uv = torch.from_dlpack(frame.luma), torch.from_dlpack(frame.chroma)
                rgb = nv12_to_rgb(torch, y, uv)
                want_y, want_uv = expected(torch, frame.sequence, a.width, a.height, device="cuda")
                wrong = (y != want_y).sum() + (uv != want_uv).sum()
                wrong += (rgb != nv12_to_rgb(torch, want_y, want_uv)).sum()
                bad_frames += (wrong > 0).to(torch.int64)
            seen.append(frame.sequence)
        bad = int(bad_frames.item())
    else:
        bad = 0
        for frame in consumer:
            with frame:
                want_y, want_uv = expected(np, frame.sequence, a.width, a.height)
                y, uv = frame.luma.numpy(), frame.chroma.numpy()
                if not (np.array_equal(y, want_y) and np.array_equal(uv, want_uv)):
                    bad += 1
                    print(f"frame {frame.sequence}: differs from the camera's pattern", file=sys.stderr)
            seen.append(frame.sequence)
    elapsed = time.monotonic() - start
    consumer.close()
    ok = camera is None or camera.wait(timeout=60) == 0
    name = "camera_ipc_consumer (torch, CUDA)" if a.cuda else "camera_ipc_consumer (numpy, CPU)"
    return summary(name, seen, a.frames if a.camera else None, bad, a.width, a.height, ok, elapsed)


if __name__ == "__main__":
    sys.exit(main())
