"""A Python consumer process attached to the Rust camera of examples/camera_ipc.rs, through an
NvSciIpc endpoint (the mock's: Unix sockets in a temporary directory).

    cargo build --example camera_ipc && pip install ./python
    python examples/python/camera_ipc_consumer.py --camera target/debug/examples/camera_ipc \\
        [--frames 300] [--width 640 --height 480] [--cuda]

It starts the camera (`camera_ipc --role producer`, which waits for its consumer while it builds
its stream), attaches with `nvsci.Consumer.connect` and checks every byte of every frame against
the camera's moving test pattern (examples/support/nv12_pattern.rs), with numpy on the frames in
place, or with `--cuda` on the GPU through CuPy (a CUDA consumer: the mock's GPU mode). Exits
non-zero on any mismatch, a missing frame, or a camera that failed. With `--camera` left out it
attaches to a camera started by hand (`NVSCI_MOCK_IPC_DIR` naming the directory of its
`nvsciipc.cfg`, with the channel `camera_ipc_0 camera_ipc_1`).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import nvsci


def expected(xp, seq, width, height):
    """Frame `seq` of camera_ipc's pattern as the planes (luma, chroma) of `xp` (numpy or CuPy):
    y = 16 + ((x + 3t) ^ (row + t)) mod 256 mod 220; per 2x2 block u = 2 bx + t, v = 3 by + 2t,
    all mod 256."""
    x = xp.arange(width, dtype=xp.uint32)[None, :]
    row = xp.arange(height, dtype=xp.uint32)[:, None]
    luma = (16 + (((x + 3 * seq) ^ (row + seq)) & 0xFF) % 220).astype(xp.uint8)
    bx = xp.arange(width // 2, dtype=xp.uint32)[None, :]
    by = xp.arange(height // 2, dtype=xp.uint32)[:, None]
    u = xp.broadcast_to((2 * bx + seq) & 0xFF, (height // 2, width // 2))
    v = xp.broadcast_to((3 * by + 2 * seq) & 0xFF, (height // 2, width // 2))
    return luma, xp.stack([u, v], -1).astype(xp.uint8)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--camera", help="camera_ipc built (started here with --role producer)")
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--width", type=int, default=640)
    p.add_argument("--height", type=int, default=480)
    p.add_argument("--cuda", action="store_true", help="a CUDA consumer, checked on the GPU with CuPy")
    a = p.parse_args()

    backend = nvsci.Backend.mock()
    if a.cuda and not backend.has_cuda:
        print("--cuda: no CUDA GPU (the mock's GPU mode needs one)", file=sys.stderr)
        return 2
    if a.cuda:
        import cupy as xp
    else:
        xp = np
    camera = None
    if a.camera:
        d = tempfile.mkdtemp(prefix="nvsci-camera-ipc-py-")
        with open(os.path.join(d, "nvsciipc.cfg"), "w") as f:
            f.write("INTER_PROCESS camera_ipc_0 camera_ipc_1 16 4096\n")
        os.environ["NVSCI_MOCK_IPC_DIR"] = d
        args = ["--role", "producer", "--frames", str(a.frames), "--width", str(a.width), "--height", str(a.height)]
        camera = subprocess.Popen([a.camera, *args])
    fmt = nvsci.FrameFormat.nv12(a.width, a.height)
    desc = nvsci.ConsumerDesc(engine="cuda" if a.cuda else "cpu")
    consumer = nvsci.Consumer.connect(backend, "camera_ipc_1", fmt, desc, timeout=10.0)
    bad, seen, start = 0, [], time.monotonic()
    for frame in consumer:
        with frame:
            want_y, want_uv = expected(xp, frame.sequence, a.width, a.height)
            if a.cuda:
                y, uv = xp.from_dlpack(frame.luma), xp.from_dlpack(frame.chroma)
            else:
                y, uv = frame.luma.numpy(), frame.chroma.numpy()
            if not (bool((y == want_y).all()) and bool((uv == want_uv).all())):
                bad += 1
                print(f"frame {frame.sequence}: differs from the camera's pattern", file=sys.stderr)
            seen.append(frame.sequence)
    elapsed = time.monotonic() - start
    consumer.close()
    ok = camera is None or camera.wait(timeout=60) == 0
    missing = a.frames - len(seen) if a.camera else 0
    print(
        f"camera_ipc_consumer: {len(seen)} frames of {a.width}x{a.height} NV12 from the camera process "
        f"in {elapsed:.2f} s, {bad} differ from the pattern, {missing} missing"
        + ("" if ok else "; the camera process failed")
    )
    in_order = seen == list(range(seen[0], seen[0] + len(seen))) if seen else False
    return 0 if ok and bad == 0 and missing == 0 and in_order else 1


if __name__ == "__main__":
    sys.exit(main())
