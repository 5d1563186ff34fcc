"""Per-frame cost of Python consumers of an nvsci stream beside the Rust CUDA consumer doing the
same conversion, and beside the copy path between two processes, at 3840x2160 and 1920x1080
(one run per size, ratios; the mock NvSci library, in its GPU mode where a CUDA GPU is present).

    pip install ./python  # a release wheel: maturin build --release -m python/Cargo.toml
    cargo build --release --example cuda_consumer_bench  # or the GPU bundle's (BUNDLE_RELEASE=1)
    python examples/python/bench_torch_consumer.py [--frames 300] [--sizes 3840x2160,1920x1080]
        [--rust PATH] [--arrays auto|torch|cupy|numpy]

Every path moves the same frames: a CPU producer acquires a frame of a four-frame stream, writes
its marker into luma pixel (0, 0) and presents it (every other byte is 128, written once per
slot), and a consumer converts it. Measured after 20 warm-up frames (3 on the CPU), the GPU
drained before and after; "per frame" is wall time per frame, "CPU/frame" the CPU time of the
threads that produce and consume (both processes' where there are two). The paths:

1. rust: examples/cuda_consumer_bench.rs, the crate's NV12 -> RGBA kernel
   (`nvsci::convert::Nv12ToRgba`) launched through `Consumer::process`, one thread, in one
   process (its own line of output, parsed here). Its R + G + B of each frame goes to a
   counter of that frame.
2. python: a CUDA consumer in the producer's process (one thread); per frame `acquire`,
   `nvsci.nv12_to_rgba(frame, out, sum=...)`, the same kernel on the frame in place with the
   same arguments (the present fence waited on the caller's stream, here the legacy default
   stream, the release ordered after it), release. "python - rust" is the package's
   per-frame overhead over the Rust consumer doing the same conversion (goal: 50 us).
3. python torch ops: the same loop converting with some twenty torch operations
   (`camera_ipc_consumer.nv12_to_rgb`) on the planes from `torch.from_dlpack`, the
   conversion the examples use; kept to show what that conversion costs. Checked at pixel
   (0, 0) of each frame.
4. python 2 proc: the consumer of 2 in a second process, attached through an NvSciIpc
   endpoint (the mock's: Unix sockets, `nvsci.Consumer.connect`); frames in place there.
5. copy 2 proc: the copy path, "frame bytes through shared memory into a torch tensor":
   the producer writes the same frames into four slots of `multiprocessing.shared_memory`
   and notifies a second process through a pipe (`multiprocessing.Pipe`, slot and frame
   number); that process copies the slot's bytes into one device array (torch `copy_`, CuPy
   `set`: from pageable memory, so the slot is free when the call returns, and it says so
   through the pipe), then runs the same `nvsci.nv12_to_rgba` on that array. Same conversion
   as 2 and 4, so "copy / zero copy" compares the transport: against 4 (both between two
   processes, goal at 4K: 10x) and against 2.

Every frame of paths 1, 2, 4 and 5 is checked: the kernel adds the frame's R + G + B to the
frame's own counter, compared after the run with the BT.601 sum of a frame of that marker (a
frame converted before its marker was written, a stale slot or a missing frame shows).
"Conv. alone" is the conversion repeated on one frame already in place (paths 1 to 3: the
held frame, the same call); "hand-off" is per frame minus that. On the mock the frames are
page-locked host memory mapped into CUDA: the zero-copy consumers read them across the bus,
as a discrete GPU must; the copy path copies them across the bus, then reads device memory.

Arrays (`--arrays`): the output, the counters and the copy path's device array are torch
tensors (auto, where torch has CUDA), else CuPy arrays; path 3 needs torch. Without a CUDA
GPU (no GPU mode of the mock) it runs in CPU mode: paths 2, 4 and 5 with CPU consumers,
`nvsci.nv12_to_rgba` being the crate's CPU conversion into numpy arrays and the copy path's
copy a numpy copy. Those figures check the loops, the transport and every frame; they are no
figures of the goals, which are then not evaluated. Exits non-zero on a mismatching frame or a
path that failed; a path that cannot run here (no GPU, no torch, no Rust binary) is reported
as not run with the reason, and with a GPU and `--rust` not found that counts as failed.
"""

import argparse
import json
import multiprocessing
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from multiprocessing import shared_memory

import numpy as np

import nvsci

SLOTS = 4
ENDPOINTS = ("nvsci_bench_0", "nvsci_bench_1")


def marker(t):
    """Frame t's marker (luma pixel (0, 0)): distinct across any four consecutive frames."""
    return 16 + t % 200


def rgb(y, u, v):
    """R, G, B of one pixel as nvsci::convert computes it (BT.601 studio range, integers)."""
    c, d, e = y - 16, u - 128, v - 128
    return [min(max(x >> 8, 0), 255) for x in (298 * c + 409 * e + 128, 298 * c - 100 * d - 208 * e + 128, 298 * c + 516 * d + 128)]


def frame_sum(pixels, m):
    """R + G + B of a frame whose bytes are all 128 but luma pixel (0, 0), which is `m`."""
    return (pixels - 1) * sum(rgb(128, 128, 128)) + sum(rgb(m, 128, 128))


def bad_sums(got, pixels, first, count, alone=None):
    """Counters (from frame `first` on) that differ from their frame's sum; `alone`: the last
    counter holds `alone[1]` conversions of frame `alone[0]`."""
    bad = sum(1 for i in range(count) if int(got[i]) != frame_sum(pixels, marker(first + i)))
    if alone is not None:
        t, reps = alone
        bad += int(got[count]) != reps * frame_sum(pixels, marker(t))
    return bad


# Arrays of the consumer: torch, CuPy, or numpy (CPU mode) ------------------------------------


class Torch:
    name, device = "torch", True

    def __init__(self):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch has no CUDA")
        self.torch = torch
        torch.zeros(1, device="cuda")

    def zeros(self, shape, dtype):
        return self.torch.zeros(shape, dtype=getattr(self.torch, dtype), device="cuda")

    def upload(self, dst, src):
        dst.copy_(self.torch.from_numpy(src))

    def sync(self):
        self.torch.cuda.synchronize()

    def host(self, a):
        return a.cpu().numpy()


class CuPy:
    name, device = "cupy", True

    def __init__(self):
        import cupy

        self.cupy = cupy
        cupy.zeros(1)

    def zeros(self, shape, dtype):
        return self.cupy.zeros(shape, dtype)

    def upload(self, dst, src):
        dst.set(src)

    def sync(self):
        self.cupy.cuda.Device().synchronize()

    def host(self, a):
        return self.cupy.asnumpy(a)


class Numpy:
    name, device = "numpy (CPU)", False

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype)

    def upload(self, dst, src):
        np.copyto(dst, src)

    def sync(self):
        pass

    def host(self, a):
        return a


def arrays(name):
    return {"torch": Torch, "cupy": CuPy, "numpy": Numpy}[name]()


def pick_arrays(wanted, gpu):
    """The array library (and None with the reason where none can run the GPU paths)."""
    if not gpu:
        if wanted not in ("auto", "numpy"):
            return None, f"--arrays {wanted} needs a CUDA GPU (the mock's GPU mode)"
        return Numpy(), None
    names = ["torch", "cupy"] if wanted == "auto" else [wanted]
    why = []
    for n in names:
        if n == "numpy":
            return None, "--arrays numpy is the CPU mode; a CUDA GPU is present"
        try:
            return arrays(n), None
        except Exception as e:  # ImportError, no CUDA
            why.append(f"{n}: {e}")
    return None, "no device array library (" + "; ".join(why) + ")"


# The loops -------------------------------------------------------------------------------------


def presenter(producer):
    """A function presenting frame t: marker at luma (0, 0), every other byte 128 (written the
    first time a slot comes round)."""
    filled = set()

    def present(t):
        with producer.acquire() as f:
            if f.index not in filled:
                f.luma.numpy()[:] = 128
                f.chroma.numpy()[:] = 128
                filled.add(f.index)
            f.luma.numpy()[0, 0] = marker(t)

    return present


def timed(lib, n, warm, step):
    """Wall and this thread's CPU time per call of `step(t)` over n calls after `warm`, in
    microseconds, with the GPU drained before and after."""
    for t in range(warm):
        step(t)
    lib.sync()
    w0, c0 = time.perf_counter(), time.thread_time()
    for t in range(warm, warm + n):
        step(t)
    lib.sync()
    return (time.perf_counter() - w0) * 1e6 / n, (time.thread_time() - c0) * 1e6 / n


def python_kernel(backend, lib, w, h, n, warm):
    """Path 2: a consumer in this process, the crate's conversion on each frame in place."""
    fmt = nvsci.FrameFormat.nv12(w, h)
    engine = "cuda" if lib.device else "cpu"
    producer, (consumer,) = backend.stream(fmt, consumers=[nvsci.ConsumerDesc(engine=engine)], frames=SLOTS, timeout=10.0)
    total = warm + n
    present = presenter(producer)
    out = lib.zeros((h, w, 4), "uint8")
    sums = lib.zeros(total + 1, "int64")
    views = [sums[t : t + 1] for t in range(total + 1)]

    def step(t):
        present(t)
        with consumer.acquire() as f:
            nvsci.nv12_to_rgba(f, out, sum=views[t])

    per_frame, cpu = timed(lib, n, warm, step)
    # The conversion alone: n calls on one held frame (its marker the next one).
    present(total)
    with consumer.acquire() as f:
        nvsci.nv12_to_rgba(f, out, sum=views[total])
        lib.sync()
        w0 = time.perf_counter()
        for _ in range(1, n):
            nvsci.nv12_to_rgba(f, out, sum=views[total])
        lib.sync()
        floor = (time.perf_counter() - w0) * 1e6 / max(n - 1, 1)
    producer.close()
    consumer.close()
    bad = bad_sums(lib.host(sums), w * h, 0, total, alone=(total, n))
    return {"per_frame": per_frame, "cpu": cpu, "alone": floor, "frames": total + 1, "bad": bad}


def python_torch_ops(backend, lib, w, h, n, warm):
    """Path 3: a consumer in this process converting with torch operations."""
    torch = lib.torch
    from camera_ipc_consumer import nv12_to_rgb

    producer, (consumer,) = backend.stream(
        nvsci.FrameFormat.nv12(w, h), consumers=[nvsci.ConsumerDesc(engine="cuda")], frames=SLOTS, timeout=10.0
    )
    total = warm + n
    present = presenter(producer)
    kept = torch.zeros(total + 1, 3, dtype=torch.uint8, device="cuda")

    def step(t):
        present(t)
        with consumer.acquire() as f:
            kept[t] = nv12_to_rgb(torch, torch.from_dlpack(f.luma), torch.from_dlpack(f.chroma))[0, 0]

    per_frame, cpu = timed(lib, n, warm, step)
    present(total)
    with consumer.acquire() as f:
        y, uv = torch.from_dlpack(f.luma), torch.from_dlpack(f.chroma)
        for _ in range(warm):
            kept[total] = nv12_to_rgb(torch, y, uv)[0, 0]
        lib.sync()
        w0 = time.perf_counter()
        for _ in range(n):
            kept[total] = nv12_to_rgb(torch, y, uv)[0, 0]
        lib.sync()
        floor = (time.perf_counter() - w0) * 1e6 / n
    producer.close()
    consumer.close()
    got = kept.cpu().tolist()
    bad = sum(1 for t, px in enumerate(got) if px != rgb(marker(t), 128, 128))
    return {"per_frame": per_frame, "cpu": cpu, "alone": floor, "frames": total + 1, "bad": bad}


def recv(conn, proc, timeout=120.0):
    """The next message from a consumer process (RuntimeError if it died or went quiet)."""
    until = time.monotonic() + timeout
    while not conn.poll(0.5):
        if not proc.is_alive():
            raise RuntimeError(f"the consumer process exited ({proc.exitcode})")
        if time.monotonic() > until:
            raise RuntimeError(f"no word from the consumer process in {timeout:.0f} s")
    return conn.recv_bytes()


def report(lib, conn, sums, total, w, h, c0):
    """A consumer process's last word: its CPU time since `c0` and its counters checked."""
    lib.sync()
    cpu = time.thread_time() - c0
    conn.send_bytes(b"D" + json.dumps({"cpu": cpu, "bad": bad_sums(lib.host(sums), w * h, 0, total)}).encode())


def ipc_consumer(conn, lib_name, w, h, n, warm):
    """Path 4's consumer process: attaches through the mock's endpoint, converts every frame in
    place, says when the warm-up frames are done, and reports at the end."""
    lib = arrays(lib_name)
    desc = nvsci.ConsumerDesc(engine="cuda" if lib.device else "cpu")
    consumer = nvsci.Consumer.connect(nvsci.Backend.mock(), ENDPOINTS[1], nvsci.FrameFormat.nv12(w, h), desc, timeout=60.0)
    total = warm + n
    out = lib.zeros((h, w, 4), "uint8")
    sums = lib.zeros(total, "int64")
    views = [sums[t : t + 1] for t in range(total)]
    c0 = 0.0
    for t in range(total):
        f = consumer.acquire()
        if f is None or f.sequence != t:
            raise RuntimeError(f"frame {t}: got {f and f.sequence}")
        nvsci.nv12_to_rgba(f, out, sum=views[t])
        f.release()
        if t == warm - 1:
            lib.sync()
            c0 = time.thread_time()
            conn.send_bytes(b"W")
    report(lib, conn, sums, total, w, h, c0)
    consumer.close()


def two_processes(n, warm, child, args, start, produce, other=None):
    """Runs a consumer process (`child(conn, *args)`), `start(conn, proc)` once it is up,
    produces the warm-up frames, waits for the process's word that it converted them, then
    produces n frames timed until its report (after it drained its GPU work). Messages other
    than those go to `other`. Returns the figures of both processes."""
    ctx = multiprocessing.get_context("spawn")
    conn, theirs = ctx.Pipe()
    proc = ctx.Process(target=child, args=(theirs, *args))
    proc.start()
    theirs.close()

    def until(tag):
        while True:
            m = recv(conn, proc)
            if m[:1] == tag:
                return m
            if other is None:
                raise RuntimeError(f"unexpected message {m[:20]!r}")
            other(m)

    try:
        start(conn, proc)
        for t in range(warm):
            produce(t)
        until(b"W")
        w0, c0 = time.perf_counter(), time.thread_time()
        for t in range(warm, warm + n):
            produce(t)
        msg = until(b"D")
        wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
        got = json.loads(msg[1:])
        proc.join(60)
        if proc.exitcode != 0:
            raise RuntimeError(f"the consumer process exited {proc.exitcode}")
        return {
            "per_frame": wall * 1e6 / n,
            "cpu": (cpu + got["cpu"]) * 1e6 / n,
            "alone": None,
            "frames": warm + n,
            "bad": got["bad"],
        }
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()


def python_two_processes(backend, lib, w, h, n, warm):
    """Path 4: the consumer process attached through an NvSciIpc endpoint (the mock's)."""
    d = tempfile.mkdtemp(prefix="nvsci-bench-")
    with open(os.path.join(d, "nvsciipc.cfg"), "w") as cfg:
        cfg.write(f"INTER_PROCESS {ENDPOINTS[0]} {ENDPOINTS[1]} 16 4096\n")
    old = os.environ.get("NVSCI_MOCK_IPC_DIR")
    os.environ["NVSCI_MOCK_IPC_DIR"] = d  # this process's endpoint, and the child's (inherited)
    engine = "cuda" if lib.device else "cpu"
    producer = None
    try:
        producer, _ = backend.stream(
            nvsci.FrameFormat.nv12(w, h),
            consumers=[],
            reserve=[nvsci.ConsumerDesc(engine=engine, endpoint=ENDPOINTS[0])],
            frames=SLOTS,
            timeout=60.0,
        )

        def attached(conn, proc):
            until = time.monotonic() + 120
            while not producer.remote_seats[0].attached:
                if not proc.is_alive() or time.monotonic() > until:
                    raise RuntimeError("the consumer process did not attach")
                time.sleep(0.01)

        args = (lib.name.split()[0], w, h, n, warm)
        return two_processes(n, warm, ipc_consumer, args, attached, presenter(producer))
    finally:
        if producer is not None:
            producer.close()
        if old is None:
            os.environ.pop("NVSCI_MOCK_IPC_DIR", None)
        else:
            os.environ["NVSCI_MOCK_IPC_DIR"] = old


def copy_consumer(conn, shm_name, lib_name, w, h, n, warm):
    """Path 5's consumer process: per notified frame, copies the slot's bytes into its device
    array, frees the slot, and converts the array."""
    lib = arrays(lib_name)
    shm = shared_memory.SharedMemory(name=shm_name)
    try:
        rows = h + h // 2
        host = np.ndarray((SLOTS, rows, w), np.uint8, buffer=shm.buf)
        total = warm + n
        dev = lib.zeros((rows, w), "uint8")
        out = lib.zeros((h, w, 4), "uint8")
        sums = lib.zeros(total, "int64")
        views = [sums[t : t + 1] for t in range(total)]
        conn.send_bytes(b"ready")
        c0 = 0.0
        for expect in range(total):
            slot, t = struct.unpack("<QQ", conn.recv_bytes())
            if t != expect:
                raise RuntimeError(f"frame {expect}: got {t}")
            lib.upload(dev, host[slot])  # the frame's bytes into the consumer's array
            conn.send_bytes(b"R")  # the slot is free
            nvsci.nv12_to_rgba(dev, out, sum=views[t])
            if t == warm - 1:
                lib.sync()
                c0 = time.thread_time()
                conn.send_bytes(b"W")
        report(lib, conn, sums, total, w, h, c0)
    finally:
        host = None  # the last view of the shared memory, which cannot close under one
        shm.close()


def copy_two_processes(lib, w, h, n, warm):
    """Path 5: frames through shared memory and a pipe into the consumer process's array."""
    rows = h + h // 2
    shm = shared_memory.SharedMemory(create=True, size=SLOTS * rows * w)
    try:
        host = np.ndarray((SLOTS, rows, w), np.uint8, buffer=shm.buf)
        host[:] = 128
        state = {"free": SLOTS}

        def released(m):
            if m != b"R":
                raise RuntimeError(f"unexpected message {m[:20]!r}")
            state["free"] += 1

        def start(conn, proc):
            state["conn"], state["proc"] = conn, proc
            if recv(conn, proc) != b"ready":
                raise RuntimeError("the consumer process did not start")

        def produce(t):
            while state["free"] == 0:
                released(recv(state["conn"], state["proc"]))
            slot = t % SLOTS
            host[slot, 0, 0] = marker(t)  # the producer's write
            state["conn"].send_bytes(struct.pack("<QQ", slot, t))  # the notification
            state["free"] -= 1

        args = (shm.name, lib.name.split()[0], w, h, n, warm)
        return two_processes(n, warm, copy_consumer, args, start, produce, other=released)
    finally:
        host = None  # the last view of the shared memory, which cannot close under one
        shm.close()
        shm.unlink()


LINE = re.compile(
    r"cuda_consumer_bench (\d+)x(\d+) frames=(\d+) per_frame_us=([\d.]+) cpu_us=([\d.]+) "
    r"kernel_alone_us=([\d.]+) verified=(\d+) mismatched=(\d+)"
)


def rust(path, w, h, n):
    """Path 1: the Rust consumer's line of output."""
    r = subprocess.run(
        [path, "--width", str(w), "--height", str(h), "--frames", str(n)], capture_output=True, text=True, timeout=300
    )
    m = LINE.search(r.stdout)
    if not m:
        raise RuntimeError(f"{path} exited {r.returncode}: {r.stdout.strip()} {r.stderr.strip()}")
    v = m.groups()
    return {"per_frame": float(v[3]), "cpu": float(v[4]), "alone": float(v[5]), "frames": int(v[6]) + int(v[7]), "bad": int(v[7])}


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


PATHS = ["rust", "python", "python torch ops", "python 2 proc", "copy 2 proc"]


def run_size(backend, lib, why_no_lib, rust_path, w, h, n, warm):
    """Every path at one size: name -> figures, or the reason it did not run (a string), and
    the names of the paths that failed."""
    gpu = backend.has_cuda
    res, failed = {}, []

    def attempt(name, why_not, call):
        if why_not:
            res[name] = why_not
            return
        try:
            res[name] = call()
        except Exception as e:  # a path that broke: reported, and the run fails
            res[name] = f"FAILED: {type(e).__name__}: {e}"
            failed.append(name)

    no_gpu = None if gpu else "needs a CUDA GPU (the mock's GPU mode)"
    attempt(
        "rust",
        no_gpu or (None if rust_path else "cuda_consumer_bench NOT FOUND (cargo build --release --example cuda_consumer_bench)"),
        lambda: rust(rust_path, w, h, n),
    )
    if gpu and not rust_path:
        failed.append("rust")
    attempt("python", why_no_lib, lambda: python_kernel(backend, lib, w, h, n, warm))
    attempt(
        "python torch ops",
        no_gpu or (None if isinstance(lib, Torch) else "needs torch with CUDA"),
        lambda: python_torch_ops(backend, lib, w, h, n, warm),
    )
    attempt("python 2 proc", why_no_lib, lambda: python_two_processes(backend, lib, w, h, n, warm))
    attempt("copy 2 proc", why_no_lib, lambda: copy_two_processes(lib, w, h, n, warm))
    return res, failed


def goals(size, w, h, res, gpu):
    """The goal lines of one size."""
    ok = {k: v for k, v in res.items() if isinstance(v, dict)}
    four_k = w * h >= 3840 * 2160
    lines = []

    def verdict(met):
        return "met" if met else "NOT met"

    if "python" in ok and "rust" in ok:
        d = ok["python"]["per_frame"] - ok["rust"]["per_frame"]
        line = f"{size}: python (the crate's kernel) - rust: {d:+.1f} us per frame"
        if four_k:
            line += f" (goal <= 50 us: {verdict(d <= 50)})"
        lines.append(line)
    if "python torch ops" in ok and "rust" in ok:
        d = ok["python torch ops"]["per_frame"] - ok["rust"]["per_frame"]
        lines.append(f"{size}: python torch ops - rust: {d:+.1f} us per frame (another conversion)")
    if "copy 2 proc" in ok:
        cp = ok["copy 2 proc"]["per_frame"]
        if "python 2 proc" in ok:
            r = cp / ok["python 2 proc"]["per_frame"]
            line = f"{size}: copy / zero copy, both between two processes: {r:.1f}x"
            if four_k and gpu:
                line += f" (goal >= 10x: {verdict(r >= 10)})"
            lines.append(line)
        if "python" in ok:
            lines.append(f"{size}: copy (two processes) / zero copy (one process): {cp / ok['python']['per_frame']:.1f}x")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, help="timed frames per path (default 300; 20 in CPU mode)")
    p.add_argument("--sizes", default="3840x2160,1920x1080")
    p.add_argument("--rust", help="cuda_consumer_bench built (default: .gpu/examples, target/release/examples)")
    p.add_argument("--arrays", default="auto", choices=["auto", "torch", "cupy", "numpy"])
    a = p.parse_args()
    backend = nvsci.Backend.mock()
    gpu = backend.has_cuda
    lib, why_no_lib = pick_arrays(a.arrays, gpu)
    n = a.frames or (300 if gpu else 20)
    warm = 20 if gpu else 3
    rust_path = find_rust(a.rust) if gpu else None
    if gpu:
        print(f"GPU mode (the mock's frames mapped into CUDA); arrays: {lib.name if lib else why_no_lib}")
    else:
        print(
            "CPU mode: no CUDA GPU, so the CPU consumers and the crate's CPU conversion into numpy; "
            "these figures check the loops and every frame, and are no figures of the goals"
        )
    if lib is not None and isinstance(lib, Torch):
        print(f"device: {lib.torch.cuda.get_device_name()}; torch {lib.torch.__version__}")
    print(f"{n} timed frames per path after {warm} warm-up frames; rust consumer: {rust_path or 'not used'}")
    failed, rows, lines = [], [], []
    if lib is None:
        failed.append(why_no_lib)  # the Python paths cannot run
    for size in a.sizes.split(","):
        w, h = (int(v) for v in size.split("x"))
        res, f = run_size(backend, lib, why_no_lib, rust_path, w, h, n, warm)
        failed += [f"{size} {x}" for x in f]
        rows += [(size, name, res[name]) for name in PATHS]
        lines += goals(size, w, h, res, gpu)
    print()
    print(f"{'size':<10} {'path':<17} {'per frame':>10} {'conv. alone':>12} {'hand-off':>9} {'CPU/frame':>10}  frames ok/bad")
    for size, name, r in rows:
        if not isinstance(r, dict):
            print(f"{size:<10} {name:<17} not run: {r}")
            continue
        if r["bad"]:
            failed.append(f"{size} {name}: {r['bad']} frames mismatched")
        alone = f"{r['alone']:>9.1f} us" if r["alone"] is not None else f"{'-':>12}"
        hand = f"{r['per_frame'] - r['alone']:>6.1f} us" if r["alone"] is not None else f"{'-':>9}"
        print(
            f"{size:<10} {name:<17} {r['per_frame']:>7.1f} us {alone} {hand} {r['cpu']:>7.1f} us  {r['frames'] - r['bad']}/{r['bad']}"
        )
    print()
    for line in lines:
        print(line)
    if failed:
        print("failed: " + "; ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
