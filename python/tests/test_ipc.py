"""Streams across processes on the mock: a numpy producer in this process, consumers in other
processes (Python's `Consumer.connect`, and examples/stream_ipc.rs's Rust consumer) attached
through NvSciIpc endpoints (the mock's: Unix sockets in a temporary directory), every frame's
bytes checked on the consumer's side; attaches that do not fit, each a typed exception. The
ledger fixture (conftest.py) checks this process's mock after each test; each consumer process
checks its own before it exits."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import nvsci
from ipc_consumer import pattern

HERE = Path(__file__).resolve().parent
CHILD = HERE / "ipc_consumer.py"
ROOT = HERE.parent.parent
SIZE = 16 * 1024
RAW = nvsci.FrameFormat.raw(SIZE)


@pytest.fixture
def channels(tmp_path, monkeypatch):
    """Declares NvSciIpc channels (`name_0` for the producer, `name_1` for a consumer) in a fresh
    mock directory, for this process and the processes it starts."""

    def declare(*names):
        lines = [f"INTER_PROCESS {n}_0 {n}_1 16 4096" for n in names]
        (tmp_path / "nvsciipc.cfg").write_text("# test channels\n" + "\n".join(lines) + "\n")
        return tmp_path

    monkeypatch.setenv("NVSCI_MOCK_IPC_DIR", str(tmp_path))
    return declare


def start_consumer(endpoint, fmt, *args):
    return subprocess.Popen(
        [sys.executable, str(CHILD), endpoint, fmt, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(child, within=60):
    out, err = child.communicate(timeout=within)
    assert child.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def rust_consumer():
    """examples/stream_ipc.rs, built: `$NVSCI_STREAM_IPC`, else the debug build of this checkout
    (`cargo build --example stream_ipc`)."""
    given = os.environ.get("NVSCI_STREAM_IPC")
    if given:
        assert Path(given).is_file(), f"NVSCI_STREAM_IPC={given}: no such file"
        return given
    built = ROOT / "target" / "debug" / "examples" / "stream_ipc"
    if not built.is_file():
        pytest.skip("needs examples/stream_ipc built (cargo build --example stream_ipc) or $NVSCI_STREAM_IPC")
    return str(built)


def wait_for(cond, what, within=30.0):
    until = time.monotonic() + within
    while not cond():
        assert time.monotonic() < until, f"not within {within} s: {what}"
        time.sleep(0.005)


def seat(producer, endpoint):
    (s,) = [s for s in producer.remote_seats if s.endpoint == endpoint]
    return s


def test_numpy_producer_to_python_and_rust_consumer_processes(channels):
    """One stream, three consumers: one in this process, a Rust consumer process attached while
    the stream is built, a Python consumer process attached while it runs. Each gets every
    frame and checks every byte."""
    channels("rust", "py")
    n = 120
    # The Rust consumer connects while the stream is built: started first.
    rust = subprocess.Popen(
        [rust_consumer(), "--role", "fast", "--size", str(SIZE), "--endpoints", "rust_0,rust_1,a_0,a_1,b_0,b_1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    producer, (local,) = nvsci.Backend.mock().stream(
        RAW,
        consumers=[nvsci.ConsumerDesc(), nvsci.ConsumerDesc(endpoint="rust_0")],
        reserve=[nvsci.ConsumerDesc(endpoint="py_0")],
        frames=4,
        timeout=10.0,
    )
    py = start_consumer("py_1", f"raw:{SIZE}")
    assert [s.endpoint for s in producer.remote_seats] == ["rust_0", "py_0"]
    assert seat(producer, "rust_0").attached
    wait_for(lambda: seat(producer, "py_0").attached, "the Python consumer process attached")
    for i in range(n):
        assert producer.send(pattern(i, SIZE)) == i
        with local.acquire() as f:
            np.testing.assert_array_equal(f.data.numpy(), pattern(i, SIZE))
    for s in producer.remote_seats:
        assert producer.consumer_stats(s.consumer) == {"delivered": n, "skipped": 0, "last_sequence": n - 1}
        assert (s.attaches, s.refused, s.lost) == (1, 0, 0)
    producer.close()  # ends the stream: each consumer process's iteration stops

    got = finish(py)
    assert got["error"] is None
    assert got["taken"] == list(range(n)) and got["bad"] == []
    assert got["delivered"] == n and got["consumer"] == 2
    assert got["ledger"] == {}, "the consumer process left live handles of the mock"
    out, err = rust.communicate(timeout=60)
    assert rust.returncode == 0, err
    assert f"fast: attach 1: {n} frames (sequences 0..={n - 1}), 0 sequences skipped, 0 bad" in out, out
    del local, producer


def test_mailbox_consumer_process_takes_the_newest_frames(channels):
    """An NV12 stream presented every 2 ms and a slow mailbox consumer process taking a frame
    every 20 ms: it gets newer frames each time, each one's bytes its own sequence's."""
    channels("viewer")
    w, h = 64, 32
    rows = h + h // 2
    producer, consumers = nvsci.Backend.mock().stream(
        nvsci.FrameFormat.nv12(w, h), consumers=[], reserve=[nvsci.ConsumerDesc(endpoint="viewer_0")], timeout=10.0
    )
    assert consumers == []
    stop = threading.Event()

    def camera():
        i = 0
        while not stop.is_set():
            producer.send(pattern(i, rows * w).reshape(rows, w))
            i += 1
            time.sleep(0.002)

    t = threading.Thread(target=camera)
    t.start()
    try:
        viewer = start_consumer("viewer_1", f"nv12:{w}x{h}", "--mode", "mailbox", "--frames", 10, "--every-ms", 20)
        got = finish(viewer)
    finally:
        stop.set()
        t.join()
    assert got["error"] is None and got["bad"] == []
    taken = got["taken"]
    assert len(taken) == 10 and all(a < b for a, b in zip(taken, taken[1:])), taken
    assert taken[-1] - taken[0] > 9, "the mailbox skipped no frame in 180 ms of a 2 ms camera"
    assert got["ledger"] == {}
    s = seat(producer, "viewer_0")
    assert (s.attaches, s.left, s.lost) == (1, 1, 0)
    producer.close()


@pytest.fixture
def running(channels):
    """A stream with one in-process consumer and a seat for a consumer process at `seat_0`,
    presenting frames on a thread (the in-process consumer takes each)."""
    channels("seat", "spare")
    producer, (local,) = nvsci.Backend.mock().stream(
        RAW, consumers=[nvsci.ConsumerDesc()], reserve=[nvsci.ConsumerDesc(endpoint="seat_0")], timeout=5.0
    )
    stop = threading.Event()
    errors = []

    def camera():
        i = 0
        try:
            while not stop.is_set():
                producer.send(pattern(i, SIZE))
                local.acquire().release()
                i += 1
                time.sleep(0.001)
        except nvsci.Error as e:
            errors.append(e)

    t = threading.Thread(target=camera)
    t.start()
    yield producer
    stop.set()
    t.join()
    producer.close()
    local.close()
    assert errors == [], "the camera thread failed"


def test_attach_with_another_format_is_refused_naming_it(running):
    producer = running
    backend = nvsci.Backend.mock()
    with pytest.raises(nvsci.AttachRefused) as e:
        nvsci.Consumer.connect(backend, "seat_1", nvsci.FrameFormat.raw(2 * SIZE), timeout=5.0)
    assert (e.value.endpoint, e.value.field) == ("seat_1", "format")
    assert isinstance(e.value, nvsci.RingError)
    wait_for(lambda: seat(producer, "seat_0").refused == 1, "the producer's record of the refusal")
    assert seat(producer, "seat_0").last_refusal == "format"
    # The seat takes a consumer that fits: in another process, every byte checked.
    got = finish(start_consumer("seat_1", f"raw:{SIZE}", "--frames", 20))
    assert got["error"] is None and got["bad"] == [] and len(got["taken"]) == 20
    assert got["ledger"] == {}
    s = seat(producer, "seat_0")
    assert (s.attaches, s.refused) == (1, 1)


def test_attach_beyond_the_reserved_seats(running):
    """The stream reserved one seat for other processes: a second consumer for it is refused
    while the first is attached (its endpoint is open in this process: `EndpointError`; from
    another process nobody answers it: `IpcTimeout`), and an endpoint with no seat behind it
    never answers (`IpcTimeout`)."""
    producer = running
    backend = nvsci.Backend.mock()
    # A mailbox consumer: it holds the producer back by nothing while it takes no frame.
    first = nvsci.Consumer.connect(backend, "seat_1", RAW, nvsci.ConsumerDesc(mode="mailbox"), timeout=5.0)
    with first.acquire() as f:
        np.testing.assert_array_equal(f.data.numpy(), pattern(f.sequence, SIZE))
    with pytest.raises(nvsci.EndpointError) as e:
        nvsci.Consumer.connect(backend, "seat_1", RAW, timeout=1.0)
    assert e.value.endpoint == "seat_1" and e.value.code is not None
    other = finish(start_consumer("seat_1", f"raw:{SIZE}", "--timeout", 1.0))
    assert other["error"]["type"] == "IpcTimeout", other
    assert other["error"]["fields"]["endpoint"] == "seat_1"
    assert other["taken"] == [] and other["ledger"] == {}
    with pytest.raises(nvsci.IpcTimeout) as e:
        nvsci.Consumer.connect(backend, "spare_1", RAW, timeout=0.5)
    assert e.value.endpoint == "spare_1" and 0 < e.value.timeout_us <= 500_000
    assert isinstance(e.value, TimeoutError)
    first.close()
    wait_for(lambda: seat(producer, "seat_0").left == 1, "the first consumer's departure")
    assert seat(producer, "seat_0").attaches == 1


def test_connect_refusals_before_anything_is_sent(channels):
    channels("idle")
    backend = nvsci.Backend.mock()
    cases = [
        (lambda: nvsci.Consumer.connect(backend, "idle_1", RAW, nvsci.ConsumerDesc(limit=0)), "limit"),
        (lambda: nvsci.Consumer.connect(backend, "idle_1", RAW, nvsci.ConsumerDesc(endpoint="x")), "desc"),
        (lambda: nvsci.Consumer.connect(backend, "idle_1", RAW, nvsci.ConsumerDesc(mode="lifo")), "mode"),
        (lambda: nvsci.Consumer.connect(backend, "idle_1", RAW, timeout=-1.0), "timeout"),
    ]
    if not backend.has_cuda:
        cases.append(
            (lambda: nvsci.Consumer.connect(backend, "idle_1", RAW, nvsci.ConsumerDesc(engine="cuda")), "engine")
        )
    for call, name in cases:
        with pytest.raises(nvsci.InvalidArgument) as e:
            call()
        assert e.value.name == name
    with pytest.raises(nvsci.EndpointError) as e:
        nvsci.Consumer.connect(backend, "nowhere_1", RAW, timeout=0.5)
    assert e.value.endpoint == "nowhere_1"
    with pytest.raises(nvsci.EndpointError) as e:
        backend.stream(RAW, reserve=[nvsci.ConsumerDesc(endpoint="nowhere_0")])
    assert e.value.endpoint == "nowhere_0"
