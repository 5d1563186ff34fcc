"""What the Python consumers of examples/camera_ipc.rs share: the camera's moving NV12 test pattern
(examples/support/nv12_pattern.rs) computed with numpy, CuPy or torch, and the camera process
itself (`camera_ipc --role producer`, on the mock's NvSciIpc: Unix sockets in a fresh directory)."""

import os
import subprocess
import tempfile

# camera_ipc's endpoints on the mock (its `endpoints`): the camera serves the first, a consumer
# process attaches with the second.
CAMERA_ENDPOINT, CONSUMER_ENDPOINT = "camera_ipc_0", "camera_ipc_1"


def expected(xp, seq, width, height, device=None):
    """Frame `seq` of camera_ipc's pattern as the planes (luma (h, w), chroma (h/2, w/2, 2)) of
    `xp` (numpy, cupy or torch; `device` for torch): y = 16 + ((x + 3t) ^ (row + t)) mod 256 mod 220;
    per 2x2 block u = 2 bx + t, v = 3 by + 2t, both mod 256."""

    def arange(n):
        return xp.arange(n, device=device) if device is not None else xp.arange(n)

    def u8(a):
        return a.to(xp.uint8) if hasattr(a, "to") else a.astype(xp.uint8)

    x, row = arange(width)[None, :], arange(height)[:, None]
    luma = 16 + (((x + 3 * seq) ^ (row + seq)) & 0xFF) % 220
    bx, by = arange(width // 2)[None, :], arange(height // 2)[:, None]
    u = xp.broadcast_to((2 * bx + seq) & 0xFF, (height // 2, width // 2))
    v = xp.broadcast_to((3 * by + 2 * seq) & 0xFF, (height // 2, width // 2))
    return u8(luma), u8(xp.stack([u, v], -1))


def start_camera(camera, frames, width, height, cuda):
    """Starts `camera` (camera_ipc built) as the producer of `frames` frames, its stream's
    consumer seat on the CUDA engine with `cuda` (else the CPU), on a fresh directory of the
    mock's endpoints, which this process then uses too (NVSCI_MOCK_IPC_DIR). The camera waits
    for its consumer while it builds its stream (10 s): attach soon after."""
    d = tempfile.mkdtemp(prefix="nvsci-camera-ipc-py-")
    with open(os.path.join(d, "nvsciipc.cfg"), "w") as f:
        f.write(f"INTER_PROCESS {CAMERA_ENDPOINT} {CONSUMER_ENDPOINT} 16 4096\n")
    os.environ["NVSCI_MOCK_IPC_DIR"] = d
    args = ["--role", "producer", "--frames", str(frames), "--width", str(width), "--height", str(height)]
    if cuda:
        args.append("--cuda")
    return subprocess.Popen([camera, *args])


def summary(name, seen, frames, bad, width, height, camera_ok, elapsed):
    """Prints the run's one-line account and returns the exit status: 0 when every frame the
    camera presented came in order and matched, else 1."""
    missing = frames - len(seen) if frames is not None else 0
    in_order = seen == list(range(seen[0], seen[0] + len(seen))) if seen else False
    print(
        f"{name}: {len(seen)} frames of {width}x{height} NV12 from the camera process in {elapsed:.2f} s: "
        f"{len(seen) - bad} verified, {bad} mismatched, {missing} missing, "
        + ("in order" if in_order else "NOT in order")
        + ("" if camera_ok else "; the camera process failed")
    )
    return 0 if camera_ok and bad == 0 and missing == 0 and in_order else 1
