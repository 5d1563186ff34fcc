"""A numpy consumer of an NV12 stream on the mock NvSci library (CPU engines).

    pip install ./python
    python examples/python/numpy_consumer.py [--frames 300] [--width 640 --height 360]

A producer thread renders a moving gradient into each frame with numpy and presents it with
its capture time and a user header; the consumer iterates the stream, reads every frame in
place (read-only numpy views of the frame's memory) and checks it against what was sent; a
mailbox consumer beside it samples the newest frame. Exits non-zero on any mismatch.
"""

import argparse
import struct
import sys
import threading
import time

import numpy as np

import nvsci


def render(seq, width, height):
    """The packed NV12 image of frame `seq`: luma rows, then interleaved U/V rows."""
    rows = height + height // 2
    x = np.arange(width, dtype=np.uint32)
    y = np.arange(rows, dtype=np.uint32)[:, None]
    return ((x + 3 * y + 5 * seq) % 256).astype(np.uint8)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--width", type=int, default=640)
    p.add_argument("--height", type=int, default=360)
    a = p.parse_args()

    backend = nvsci.Backend.mock()
    producer, (fifo, mailbox) = backend.stream(
        nvsci.FrameFormat.nv12(a.width, a.height),
        consumers=[nvsci.ConsumerDesc(), nvsci.ConsumerDesc(mode="mailbox")],
        frames=4,
    )

    def camera():
        with producer:
            for seq in range(a.frames):
                producer.send(
                    render(seq, a.width, a.height),
                    capture_time=time.monotonic_ns(),
                    user_header=struct.pack("<IH", 0xCA3E, a.width),
                )

    t = threading.Thread(target=camera)
    start = time.perf_counter()
    t.start()
    bad = 0
    latency = []
    h = a.height
    for frame in fifo:
        with frame:
            want = render(frame.sequence, a.width, a.height)
            luma = frame.luma.numpy()  # the frame's memory, read-only
            chroma = frame.chroma.numpy()  # (height / 2, width / 2, 2): U, V
            if not (np.array_equal(luma, want[:h]) and np.array_equal(chroma.reshape(h // 2, -1), want[h:])):
                bad += 1
            if struct.unpack_from("<IH", frame.user_header) != (0xCA3E, a.width):
                bad += 1
            latency.append(time.monotonic_ns() - frame.capture_time)
        # A mailbox consumer takes the newest frame when it looks; it never holds the camera.
        if frame.sequence % 50 == 0:
            newest = mailbox.acquire()
            if newest is not None:
                newest.release()
    t.join()
    elapsed = time.perf_counter() - start
    print(
        f"{fifo.delivered} frames of {a.width}x{a.height} in {elapsed:.2f} s "
        f"({fifo.delivered / elapsed:.0f} frames/s), {bad} mismatches; "
        f"median latency {np.median(latency) / 1e3:.0f} us"
    )
    print(f"mailbox consumer: {mailbox.delivered} delivered, {mailbox.skipped} skipped")
    return 0 if bad == 0 and fifo.delivered == a.frames else 1


if __name__ == "__main__":
    sys.exit(main())
