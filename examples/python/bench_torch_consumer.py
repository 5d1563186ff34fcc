"""Per-frame cost of a PyTorch consumer of an nvsci stream (acquire, NV12 -> RGB with torch on the
frame in place, release) beside a Rust CUDA consumer doing the conversion and beside the Python
copy path, at 3840x2160 and 1920x1080 (one run, ratios; the mock NvSci library in its GPU mode).

    pip install ./python  # a release wheel: maturin build --release -m python/Cargo.toml
    cargo build --release --example cuda_consumer_bench  # or the GPU bundle's (BUNDLE_RELEASE=1)
    python examples/python/bench_torch_consumer.py [--frames 300] [--sizes 3840x2160,1920x1080] [--rust PATH]

Three paths, each the same loop on one thread over the same frames: a CPU producer acquires a
frame of a four-frame stream, writes its marker into luma pixel (0, 0) and presents it (every
other byte is 128, written once per slot); the consumer converts it and keeps pixel (0, 0) of
the RGB result on the GPU, compared after the run with the BT.601 conversion of the marker (a
frame read before its marker was written, or a stale slot, shows). Measured after 20 warm-up
frames, the GPU drained at the end:

* python zero copy: a CUDA consumer; `torch.from_dlpack` of both planes (the present fence
  waited on torch's stream), the torch conversion on the frame's memory, release on exit.
* rust zero copy: examples/cuda_consumer_bench.rs, the crate's fused NV12 -> RGBA kernel through
  `Consumer::process` (its own line of output, parsed here).
* python copy: the producer writes the same marker into a `multiprocessing.shared_memory` frame;
  the consumer copies the frame's bytes into a torch CUDA tensor (`copy_` from the shared
  memory, as a process that receives frames through shared memory does), then the same torch
  conversion. In one process, so no notification between processes is counted: a lower bound
  of a copy path between processes.

Beside each: the conversion alone, the same work repeated on one frame already in place (the
held frame's memory, the Rust kernel on it, the device tensor), and the difference, which is
what the hand-off costs per frame. The mock's frames are page-locked host memory mapped into
CUDA: both zero-copy consumers read them across the bus, as a discrete GPU must. Goals: zero
copy at least 10x faster than the copy path at 4K; the Python consumer within 50 us per frame
of the Rust one. Exits non-zero on a mismatching frame or a path that could not run.
"""

import argparse
import os
import re
import subprocess
import sys
import time
from multiprocessing import shared_memory

import numpy as np

import nvsci

try:
    import torch
except ImportError:
    torch = None
from camera_ipc_consumer import nv12_to_rgb

WARM_UP = 20
SLOTS = 4


def marker(t):
    """Frame t's marker (luma pixel (0, 0)): distinct across any four consecutive frames."""
    return 16 + t % 200


def want_rgb(m):
    """R, G, B of Y = m, U = V = 128, as nvsci::convert computes it (BT.601, integers)."""
    c = 298 * (m - 16)
    return [min(max((c + 128) >> 8, 0), 255)] * 3


def check(out, first):
    """Frames whose kept pixel differs from the conversion of their marker."""
    got = out.cpu().tolist()
    return sum(1 for i, px in enumerate(got) if px != want_rgb(marker(first + i)))


def timed(n, step):
    """Wall and this thread's CPU time per call of `step(t)` over n calls (after the warm-up),
    in microseconds, with the GPU drained before and after."""
    for t in range(WARM_UP):
        step(t)
    torch.cuda.synchronize()
    w0, c0 = time.perf_counter(), time.thread_time()
    for t in range(WARM_UP, WARM_UP + n):
        step(t)
    torch.cuda.synchronize()
    return (time.perf_counter() - w0) * 1e6 / n, (time.thread_time() - c0) * 1e6 / n


def alone(n, y, uv, out):
    """The conversion alone, n times on the same planes, per call in microseconds."""
    for _ in range(WARM_UP):
        out[0] = nv12_to_rgb(torch, y, uv)[0, 0]
    torch.cuda.synchronize()
    w0 = time.perf_counter()
    for _ in range(n):
        out[0] = nv12_to_rgb(torch, y, uv)[0, 0]
    torch.cuda.synchronize()
    return (time.perf_counter() - w0) * 1e6 / n


def python_zero_copy(backend, w, h, n):
    producer, (consumer,) = backend.stream(
        nvsci.FrameFormat.nv12(w, h), consumers=[nvsci.ConsumerDesc(engine="cuda")], frames=SLOTS, timeout=10.0
    )
    out = torch.zeros(WARM_UP + n, 3, dtype=torch.uint8, device="cuda")
    filled = set()

    def present(t):
        with producer.acquire() as f:
            if f.index not in filled:
                f.luma.numpy()[:] = 128
                f.chroma.numpy()[:] = 128
                filled.add(f.index)
            f.luma.numpy()[0, 0] = marker(t)

    def step(t):
        present(t)
        with consumer.acquire() as f:
            out[t] = nv12_to_rgb(torch, torch.from_dlpack(f.luma), torch.from_dlpack(f.chroma))[0, 0]

    per_frame, cpu = timed(n, step)
    bad = check(out, 0)
    t = WARM_UP + n
    present(t)
    with consumer.acquire() as f:
        one = torch.zeros(1, 3, dtype=torch.uint8, device="cuda")
        floor = alone(n, torch.from_dlpack(f.luma), torch.from_dlpack(f.chroma), one)
        bad += check(one, t)
    producer.close()
    consumer.close()
    return {"per_frame": per_frame, "cpu": cpu, "alone": floor, "frames": WARM_UP + n + 1, "bad": bad}


def python_copy(w, h, n):
    shm = shared_memory.SharedMemory(create=True, size=(h + h // 2) * w)
    try:
        return copy_through(shm, w, h, n)
    finally:
        shm.close()  # every view of it went with copy_through's locals
        shm.unlink()


def copy_through(shm, w, h, n):
    rows = h + h // 2
    host = np.ndarray((rows, w), np.uint8, buffer=shm.buf)
    host[:] = 128
    src = torch.from_numpy(host)
    dev = torch.empty((rows, w), dtype=torch.uint8, device="cuda")
    y, uv = dev[:h], dev[h:].view(h // 2, w // 2, 2)
    out = torch.zeros(WARM_UP + n, 3, dtype=torch.uint8, device="cuda")

    def step(t):
        host[0, 0] = marker(t)  # the producer's write
        dev.copy_(src)  # the frame's bytes into the consumer's tensor
        out[t] = nv12_to_rgb(torch, y, uv)[0, 0]

    per_frame, cpu = timed(n, step)
    bad = check(out, 0)
    one = torch.zeros(1, 3, dtype=torch.uint8, device="cuda")
    floor = alone(n, y, uv, one)
    bad += check(one, WARM_UP + n - 1)
    return {"per_frame": per_frame, "cpu": cpu, "alone": floor, "frames": WARM_UP + n + 1, "bad": bad}


LINE = re.compile(
    r"cuda_consumer_bench (\d+)x(\d+) frames=(\d+) per_frame_us=([\d.]+) cpu_us=([\d.]+) "
    r"kernel_alone_us=([\d.]+) verified=(\d+) mismatched=(\d+)"
)


def rust(path, w, h, n):
    r = subprocess.run(
        [path, "--width", str(w), "--height", str(h), "--frames", str(n)], capture_output=True, text=True, timeout=120
    )
    m = LINE.search(r.stdout)
    if not m:
        raise RuntimeError(f"{path} exited {r.returncode}: {r.stdout.strip()} {r.stderr.strip()}")
    v = m.groups()
    return {
        "per_frame": float(v[3]),
        "cpu": float(v[4]),
        "alone": float(v[5]),
        "frames": int(v[6]) + int(v[7]),
        "bad": int(v[7]),
    }


def find_rust(given):
    if given:
        return given
    for p in (
        os.path.join(os.environ.get("GPU_BUNDLE_DIR", ".gpu"), "examples", "cuda_consumer_bench"),
        "target/release/examples/cuda_consumer_bench",
    ):
        if os.access(p, os.X_OK):
            return p
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--sizes", default="3840x2160,1920x1080")
    p.add_argument("--rust", help="cuda_consumer_bench built (default: .gpu/examples, target/release/examples)")
    a = p.parse_args()
    backend = nvsci.Backend.mock()
    if torch is None or not backend.has_cuda or not torch.cuda.is_available():
        print("needs a CUDA GPU (the mock's GPU mode) and torch with CUDA", file=sys.stderr)
        return 2
    torch.zeros(1, device="cuda")
    rust_path = find_rust(a.rust)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; {a.frames} frames per path")
    print(f"rust consumer: {rust_path or 'NOT FOUND (cargo build --release --example cuda_consumer_bench)'}")
    failed = rust_path is None
    rows, goals = [], []
    for size in a.sizes.split(","):
        w, h = (int(v) for v in size.split("x"))
        res = {"python zero copy": python_zero_copy(backend, w, h, a.frames)}
        try:
            res["rust zero copy"] = rust(rust_path, w, h, a.frames) if rust_path else None
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"rust consumer {size}: {e}", file=sys.stderr)
            res["rust zero copy"], failed = None, True
        res["python copy"] = python_copy(w, h, a.frames)
        for name, r in res.items():
            rows.append((size, name, r))
        zc, cp, rs = res["python zero copy"], res["python copy"], res["rust zero copy"]
        ratio = cp["per_frame"] / zc["per_frame"]
        line = f"{size}: copy / zero copy {ratio:.1f}x"
        if w * h >= 3840 * 2160:
            line += f" (goal >= 10x: {'met' if ratio >= 10 else 'NOT met'})"
        if rs:
            d_total = zc["per_frame"] - rs["per_frame"]
            d_hand = (zc["per_frame"] - zc["alone"]) - (rs["per_frame"] - rs["alone"])
            line += (
                f"; python - rust per frame {d_total:+.1f} us, hand-off (per frame - conversion alone) "
                f"{d_hand:+.1f} us (goal <= 50 us: per frame {'met' if d_total <= 50 else 'NOT met'}, "
                f"hand-off {'met' if d_hand <= 50 else 'NOT met'})"
            )
        goals.append(line)
    print()
    print(f"{'size':<10} {'path':<17} {'per frame':>10} {'conv. alone':>12} {'hand-off':>9} {'CPU/frame':>10}  frames ok/bad")
    for size, name, r in rows:
        if r is None:
            print(f"{size:<10} {name:<17} {'not run':>10}")
            continue
        failed |= r["bad"] > 0
        print(
            f"{size:<10} {name:<17} {r['per_frame']:>7.1f} us {r['alone']:>9.1f} us {r['per_frame'] - r['alone']:>6.1f} us "
            f"{r['cpu']:>7.1f} us  {r['frames'] - r['bad']}/{r['bad']}"
        )
    print()
    for g in goals:
        print(g)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
