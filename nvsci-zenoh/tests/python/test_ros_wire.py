"""The bridge against clients nobody here wrote: Zenoh's Python API (eclipse-zenoh, the same
Zenoh version as the crate) and rosbags' ROS 2 CDR (de)serializer for sensor_msgs/msg/Image
(Kilted's message definitions), with no ROS installation.

The Rust side runs as the examples `zenoh_camera` and `zenoh_receiver` (built beforehand; their
folder is NVSCI_ZENOH_EXAMPLES, by default target/debug/examples of the repository). Every
session is a Zenoh peer on TCP over the loopback interface, multicast scouting off, explicit
endpoints.
"""

import os
import pathlib
import socket
import subprocess
import time

import numpy as np
import pytest
import xxhash
import zenoh
from rosbags.typesys import Stores, get_typestore
from zenoh.ext import Int64, UInt8, z_deserialize, z_serialize

REPO = pathlib.Path(__file__).resolve().parents[3]
EXAMPLES = pathlib.Path(os.environ.get("NVSCI_ZENOH_EXAMPLES", REPO / "target" / "debug" / "examples"))
TYPESTORE = get_typestore(Stores.ROS2_KILTED)
IMAGE = "sensor_msgs/msg/Image"
STAMP_BASE = 1_700_000_000_000_000_000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def session(listen):
    conf = zenoh.Config()
    conf.insert_json5("mode", '"peer"')
    conf.insert_json5("listen/endpoints", f'["{listen}"]')
    conf.insert_json5("scouting/multicast/enabled", "false")
    return zenoh.open(conf)


def key_expr(topic, domain=0):
    """rmw_zenoh's key expression, the type hash computed by rosbags from Kilted's definitions."""
    return f"{domain}/{topic.strip('/')}/sensor_msgs::msg::dds_::Image_/{TYPESTORE.hash_rihs01(IMAGE)}"


def nv12_pattern(w, h, t):
    """Frame t of examples/support/nv12_pattern.rs, packed (luma rows, then U/V rows)."""
    x = np.arange(w, dtype=np.uint32)[None, :]
    row = np.arange(h, dtype=np.uint32)[:, None]
    yv = ((x + np.uint32(t * 3)) ^ (row + np.uint32(t))) & 0xFF
    y = (16 + yv % 220).astype(np.uint8)
    bx = np.arange(w // 2, dtype=np.uint32)[None, :]
    by = np.arange(h // 2, dtype=np.uint32)[:, None]
    u = ((bx * 2 + t) & 0xFF).astype(np.uint8) + np.zeros((h // 2, 1), np.uint8)
    v = ((by * 3 + t * 2) & 0xFF).astype(np.uint8) + np.zeros((1, w // 2), np.uint8)
    uv = np.stack([u, v], axis=2).reshape(h // 2, w)
    return np.concatenate([y, uv]).tobytes()


def gid(token):
    """rmw_zenoh's GID of an entity: XXH3-128 of its token, low then high 64 bits, little-endian."""
    h = xxhash.xxh3_128_intdigest(token.encode())
    return (h & (2**64 - 1)).to_bytes(8, "little") + (h >> 64).to_bytes(8, "little")


def tokens(s, prefix):
    found = []
    for reply in s.liveliness().get(f"{prefix}/**"):
        if reply.ok is not None:
            found.append(str(reply.ok.key_expr))
    return sorted(found)


def example(name):
    path = EXAMPLES / name
    if not path.exists():
        pytest.fail(f"{path} not built (cargo build --manifest-path nvsci-zenoh/Cargo.toml --examples)")
    return str(path)


def rows_of(msg, w, h):
    """The pixels of an nv12 message, its rows cut to `w` bytes (`step` may be wider)."""
    data = np.asarray(msg.data, dtype=np.uint8)
    assert data.size == msg.step * h * 3 // 2
    return data.reshape(h * 3 // 2, msg.step)[:, :w].tobytes()


@pytest.mark.parametrize("rows", ["stored", "packed"])
def test_a_ros_subscriber_reads_the_bridge(rows):
    w, h, frames = 64, 48, 20
    port = free_port()
    s = session(f"tcp/127.0.0.1:{port}")
    topic = "/camera/image_raw"
    received = []
    sub = s.declare_subscriber(key_expr(topic), lambda sample: received.append(
        (bytes(sample.payload.to_bytes()), sample.attachment)))
    cam = subprocess.run(
        [example("zenoh_camera"), "--connect", f"tcp/127.0.0.1:{port}", "--scouting", "0", "--reliable", "1",
         "--width", str(w), "--height", str(h), "--frames", str(frames), "--period-ms", "30",
         "--stamp-base", str(STAMP_BASE), "--topic", topic, "--frame-id", "cam0", "--settle-ms", "1000",
         "--linger-ms", "1500", "--rows", rows],
        capture_output=True, text=True, timeout=60, check=False,
        stdin=subprocess.DEVNULL,
    )
    out = dict(line.split(" ", 1) for line in cam.stdout.splitlines() if " " in line)
    assert cam.returncode == 0, cam.stderr
    sub.undeclare()
    assert received, f"no message; camera said {cam.stdout}"

    # The tokens the camera declared, rebuilt here from the peer's id and rmw_zenoh's format.
    zid = out["NODE"].split("/")[2]
    node = f"@ros2_lv/0/{zid}/0/0/NN/%/%/nvsci_bridge"
    publisher = (f"@ros2_lv/0/{zid}/0/1/MP/%/%/nvsci_bridge/%camera%image_raw/"
                 f"sensor_msgs::msg::dds_::Image_/{TYPESTORE.hash_rihs01(IMAGE)}/::,1:,:,:,,")
    assert out["NODE"] == node
    assert out["PUBLISHER"] == publisher
    assert out["KEY"] == key_expr(topic)

    # The camera's frames have rows wider than 64 bytes (the mock pads them to 256): as stored,
    # they are published with their padding; packed, in rows of `w` bytes.
    stats = dict(kv.split("=") for kv in out["STATS"].split())
    published = int(stats["published"])
    assert 0 < len(received) <= published
    sequences = []
    for payload, attachment in received:
        msg = TYPESTORE.deserialize_cdr(payload, IMAGE)
        assert (msg.width, msg.height, msg.encoding, msg.is_bigendian) == (w, h, "nv12", 0)
        assert msg.step > w if rows == "stored" else msg.step == w
        assert msg.header.frame_id == "cam0"
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        t, rest = divmod(stamp - STAMP_BASE, 1_000_000)
        assert rest == 0 and 0 <= t < frames
        assert rows_of(msg, w, h) == nv12_pattern(w, h, t), f"frame {t}"
        # The attachment, read with Zenoh's own deserializer: sequence, timestamp, GID.
        assert attachment is not None
        seq, ts, g = z_deserialize(tuple[Int64, Int64, list[UInt8]], attachment)
        assert bytes(g) == gid(publisher)
        assert abs(ts - time.time_ns()) < 120 * 1_000_000_000
        sequences.append(seq)
    # The publisher's message count: consecutive (reliable, nothing lost), from 1 when the
    # subscription was there before the first.
    assert sequences == list(range(sequences[0], sequences[0] + len(sequences)))
    s.close()


def test_the_bridge_tokens_are_on_the_graph():
    port = free_port()
    s = session(f"tcp/127.0.0.1:{port}")
    cam = subprocess.Popen(
        [example("zenoh_camera"), "--connect", f"tcp/127.0.0.1:{port}", "--scouting", "0",
         "--width", "64", "--height", "48", "--frames", "1", "--settle-ms", "3000", "--topic", "/a/b"],
        stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )
    try:
        printed = [cam.stdout.readline() for _ in range(3)]  # KEY, NODE, PUBLISHER
        deadline = time.time() + 20
        found, zids = [], []
        while time.time() < deadline:
            zids = [str(z) for z in s.info.peers_zid()]
            if zids:
                found = tokens(s, f"@ros2_lv/0/{zids[0]}")
                if len(found) == 2:
                    break
            time.sleep(0.1)
        zid = zids[0]
        assert found == sorted([
            f"@ros2_lv/0/{zid}/0/0/NN/%/%/nvsci_bridge",
            f"@ros2_lv/0/{zid}/0/1/MP/%/%/nvsci_bridge/%a%b/sensor_msgs::msg::dds_::Image_/"
            f"{TYPESTORE.hash_rihs01(IMAGE)}/2::,1:,:,:,,",
        ]), (found, printed)
    finally:
        cam.wait(timeout=30)
        s.close()


def test_the_bridge_presents_what_a_ros_publisher_sends(tmp_path):
    w, h = 32, 16
    port = free_port()
    s = session(f"tcp/127.0.0.1:{port}")
    rx = subprocess.Popen(
        [example("zenoh_receiver"), "--connect", f"tcp/127.0.0.1:{port}", "--scouting", "0",
         "--width", str(w), "--height", str(h), "--frames", "3", "--seconds", "30", "--out", str(tmp_path),
         "--topic", "/cam/front"],
        stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )
    try:
        sub_line = rx.stdout.readline()
        assert sub_line.startswith("SUBSCRIPTION @ros2_lv/0/")
        deadline = time.time() + 20
        while time.time() < deadline and not any("/MS/" in t for t in tokens(s, "@ros2_lv/0")):
            time.sleep(0.1)
        pub = s.declare_publisher(key_expr("/cam/front"))
        Image = TYPESTORE.types[IMAGE]
        Header = TYPESTORE.types["std_msgs/msg/Header"]
        Time = TYPESTORE.types["builtin_interfaces/msg/Time"]
        rng = np.random.default_rng(7)
        sent = []

        def send(seq, stamp_ns, encoding, data, width=w, height=h, step=w):
            msg = Image(header=Header(stamp=Time(sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9), frame_id="f"),
                        height=height, width=width, encoding=encoding, is_bigendian=0, step=step,
                        data=np.frombuffer(data, dtype=np.uint8))
            payload = bytes(TYPESTORE.serialize_cdr(msg, IMAGE))
            attachment = z_serialize((Int64(seq), Int64(time.time_ns()), [UInt8(b) for b in range(16)]))
            pub.put(payload, attachment=attachment)
            time.sleep(0.2)

        # One message the bridge must reject (its data is a row short), then three good ones.
        send(1, 1_000, "nv12", bytes(w * h * 3 // 2 - w))
        for i in range(3):
            data = rng.integers(0, 256, w * h * 3 // 2, dtype=np.uint8).tobytes()
            stamp = 1_800_000_000_123_456_789 + i
            send(2 + i, stamp, "nv12", data)
            sent.append((2 + i, stamp, data))
        out, _ = rx.communicate(timeout=30)
    finally:
        if rx.poll() is None:
            rx.kill()
        s.close()
    assert rx.returncode == 0
    frames = [line.split() for line in out.splitlines() if line.startswith("FRAME ")]
    assert len(frames) == 3, out
    for (_, n, _seq, capture, message), (seq, stamp, data) in zip(frames, sent):
        assert capture == f"capture={stamp}"
        assert message == f"message={seq}"
        assert (tmp_path / f"frame_{n}.bin").read_bytes() == data
    stats = dict(kv.split("=") for kv in out.splitlines()[-1].split()[1:])
    assert (stats["received"], stats["presented"], stats["bad_size"]) == ("4", "3", "1"), out
