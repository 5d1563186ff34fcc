"""A consumer process for test_ipc.py: attaches to a stream through an endpoint with
`nvsci.Consumer.connect`, takes frames, checks every byte of each against `pattern`, and prints
one JSON line: the sequences taken, the ones whose bytes differ, the error that ended the attach
(its class and typed fields) and the mock's ledger once everything is closed.

    python ipc_consumer.py ENDPOINT FORMAT [--mode fifo|mailbox] [--limit N] [--engine cpu|cuda]
                           [--frames N] [--every-ms MS] [--timeout S]

FORMAT is `raw:SIZE` or `nv12:WxH`. The mock's endpoints come from $NVSCI_MOCK_IPC_DIR.
"""

import argparse
import gc
import json
import sys
import time

import numpy as np

import nvsci


def pattern(seq, n):
    """Frame `seq`'s bytes (the packed image of an NV12 frame: luma rows, then chroma rows): byte
    i is (31 i + 7 seq) mod 256, as examples/stream_ipc.rs fills and checks its frames."""
    return ((np.arange(n, dtype=np.uint64) * 31 + seq * 7) % 256).astype(np.uint8)


def parse_format(text):
    kind, _, size = text.partition(":")
    if kind == "raw":
        return nvsci.FrameFormat.raw(int(size))
    w, h = (int(v) for v in size.split("x"))
    return nvsci.FrameFormat.nv12(w, h)


def frame_bytes(frame, fmt, engine):
    """The frame's bytes, packed, as a numpy array (read on the GPU for a CUDA consumer)."""
    if engine == "cuda":
        import torch

        planes = [torch.from_dlpack(p) for p in frame.planes]
        return np.concatenate([p.reshape(p.shape[0], -1).cpu().numpy().ravel() for p in planes])
    if fmt.kind == "raw":
        return frame.data.numpy()
    return np.concatenate([frame.luma.numpy().ravel(), frame.chroma.numpy().ravel()])


def consume(a, out):
    """Attaches and takes frames into `out` (its locals, frames included, go at its return)."""
    fmt = parse_format(a.format)
    if a.engine == "cuda":
        # torch's import and CUDA's start take seconds: before attaching, not inside the first
        # frame, which the producer waits for within its stream's timeout.
        import torch

        torch.zeros(1, device="cuda")
    backend = nvsci.Backend.mock()
    desc = nvsci.ConsumerDesc(engine=a.engine, mode=a.mode, limit=a.limit)
    consumer = nvsci.Consumer.connect(backend, a.endpoint, fmt, desc, timeout=a.timeout)
    out["consumer"] = consumer.id
    with consumer:
        out["delivered_at_attach"] = consumer.delivered
        for frame in consumer:
            with frame:
                got = frame_bytes(frame, fmt, a.engine)
                if not np.array_equal(got, pattern(frame.sequence, got.size)):
                    out["bad"].append(frame.sequence)
                out["taken"].append(frame.sequence)
            if a.frames is not None and len(out["taken"]) >= a.frames:
                break
            time.sleep(a.every_ms / 1000)
        out["delivered"] = consumer.delivered


def main():
    p = argparse.ArgumentParser()
    p.add_argument("endpoint")
    p.add_argument("format")
    p.add_argument("--mode", default="fifo")
    p.add_argument("--limit", type=int)
    p.add_argument("--engine", default="cpu")
    p.add_argument("--frames", type=int, help="leave after this many frames (default: to the end)")
    p.add_argument("--every-ms", type=float, default=0.0)
    p.add_argument("--timeout", type=float, default=30.0)
    a = p.parse_args()

    out = {"taken": [], "bad": [], "error": None}
    try:
        consume(a, out)
    except nvsci.Error as e:
        fields = {k: v for k, v in vars(e).items() if k != "message"}
        out["error"] = {"type": type(e).__name__, "fields": fields}
    gc.collect()
    out["ledger"] = {k: v for k, v in nvsci.mock_handle_counts().items() if v}
    print(json.dumps(out))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
