"""A real nsqd started on a data directory with damaged disk queues: it starts, names
every file it sets aside in its log, and still delivers every good message.

The files are built from NSQ's published layout with the disk queue tests' helpers: a
channel queue whose first segment has an impossible entry length and whose second ends
in the middle of an entry, and a topic queue whose metadata file is garbage."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.broker.load import Consumer
from tests.broker.test_diskqueue import entry, payload, segment
from tests.servers import Nsqd, wait_for

pytestmark = pytest.mark.timeout(60)

TOPIC, CHANNEL = "orders", "archive"
CHANNEL_QUEUE = f"{TOPIC}:{CHANNEL}"


def message_id(number: int) -> bytes:
    return f"{number:016x}".encode()  # the ID payload(number) carries


def entries(*numbers: int) -> bytes:
    return b"".join(entry(payload(n)) for n in numbers)


def write_damaged_data_path(data: Path) -> dict[str, Path]:
    """Good messages 1-6 in the channel's queue and 10-11 in the topic's; returns the
    damaged files by kind."""
    data.mkdir(parents=True)
    (data / "nsqd.dat").write_text(json.dumps({
        "topics": [{"channels": [{"name": CHANNEL, "paused": False}], "name": TOPIC, "paused": False}],
        "version": "1.3.0"}))

    bad_length = segment(data, CHANNEL_QUEUE, 0)
    bad_length.write_bytes(entries(1, 2) + struct.pack(">i", 1 << 30) + b"x" * 40)
    truncated = segment(data, CHANNEL_QUEUE, 1)
    truncated.write_bytes(entries(3, 4) + entry(payload(99))[:20])  # the last entry is cut short
    last = entries(5, 6)
    segment(data, CHANNEL_QUEUE, 2).write_bytes(last)
    (data / f"{CHANNEL_QUEUE}.diskqueue.meta.dat").write_text(f"6\n0,0\n2,{len(last)}\n")

    segment(data, TOPIC, 0).write_bytes(entries(10, 11))
    garbage_meta = data / f"{TOPIC}.diskqueue.meta.dat"
    garbage_meta.write_bytes(b"\xff\xfenot metadata\x00\n")
    return {"bad length": bad_length, "truncated": truncated, "garbage metadata": garbage_meta}


def full_log(nsqd: Nsqd) -> str:
    return nsqd.log_path.read_text(errors="replace")


async def test_nsqd_sets_damaged_files_aside_and_serves_the_good_messages(servers) -> None:
    nsqd = servers.nsqd(start=False)
    data = Path(nsqd.workdir) / "data"
    damaged = write_damaged_data_path(data)
    nsqd.start()

    consumer = await Consumer(nsqd.tcp_address, TOPIC, CHANNEL, rdy=50).start()
    good = {message_id(n) for n in (1, 2, 3, 4, 5, 6, 10, 11)}
    await consumer.wait_until(lambda: good <= {d.msg_id for d in consumer.deliveries}, 20,
                              "every good message delivered")
    await consumer.quiesce()
    await consumer.stop()
    assert sorted(d.msg_id for d in consumer.deliveries) == sorted(good)
    for d in consumer.deliveries:
        assert d.body == bytes([int(d.msg_id, 16)]) * 4

    for kind, path in damaged.items():
        set_aside = path.with_name(path.name + ".bad")
        wait_for(lambda: str(set_aside) in full_log(nsqd), 10, message=f"a log line naming {set_aside} ({kind})")
        assert set_aside.exists(), kind
    assert not damaged["bad length"].exists() and not damaged["truncated"].exists()
    assert (data / f"{TOPIC}.diskqueue.meta.dat.bad").read_bytes() == b"\xff\xfenot metadata\x00\n"

    # still a working broker on that directory
    answer = nsqd.post(f"/pub?topic={TOPIC}", b"after")
    assert answer.status == 200
    again = await Consumer(nsqd.tcp_address, TOPIC, CHANNEL).start()
    await again.wait_until(lambda: b"after" in again.bodies(), 10, "a new message delivered")
    await again.stop()
    assert nsqd.stop() == 0
