"""A connection with ``raw_messages``: message frames handed over as they came, answered
later in bulk by ID (FIN, REQ, TOUCH), with the in-flight count kept as for single answers."""
from __future__ import annotations

from nsq_client import Config, Connection, ConnectionDelegate, Producer
from nsq_protocol.message import WireMessage, decode_message
from tests.client.conftest import StartNsqd
from tests.client.helpers import channel_stats, eventually


class Frames(ConnectionDelegate):
    def __init__(self) -> None:
        self.messages: list[WireMessage] = []

    def on_message_frames(self, conn: Connection, payloads: list[bytes]) -> None:
        self.messages += map(decode_message, payloads)


async def test_frames_answered_in_bulk_by_id(start_nsqd: StartNsqd, topic: str) -> None:
    nsqd = start_nsqd(msg_timeout="2s")
    async with Producer(nsqd.tcp_address) as producer:
        await producer.multi_publish(topic, [b"m%d" % i for i in range(5)])
    frames = Frames()
    conn = Connection(nsqd.tcp_address, Config(), frames, raw_messages=True)
    await conn.connect()
    try:
        await conn.subscribe(topic, "ch")
        conn.send_rdy(10)
        await eventually(lambda: len(frames.messages) == 5, message="five frames")
        first = frames.messages[:]
        assert sorted(m.body for m in first) == [b"m%d" % i for i in range(5)]
        assert conn.in_flight == 5

        conn.touch_ids([m.id for m in first])
        conn.finish_ids([m.id for m in first[:3]])
        conn.requeue_ids([m.id for m in first[3:]])
        assert conn.in_flight == 0
        await eventually(lambda: len(frames.messages) == 7, message="the two requeued, again")
        again = frames.messages[5:]
        assert sorted(m.id for m in again) == sorted(m.id for m in first[3:])
        assert {m.attempts for m in again} == {2}
        conn.finish_ids([m.id for m in again])

        async def settled() -> bool:
            stats = await channel_stats(nsqd, topic, "ch")
            return bool(stats) and (stats["requeue_count"], stats["in_flight_count"], stats["depth"],
                                    stats["timeout_count"]) == (2, 0, 0, 0)
        await eventually(settled, message="two requeued, every message finished, none timed out")
    finally:
        conn.close()


async def test_a_delegate_that_takes_no_frames_hands_them_back(start_nsqd: StartNsqd, topic: str) -> None:
    nsqd = start_nsqd(msg_timeout="60s")
    async with Producer(nsqd.tcp_address) as producer:
        await producer.multi_publish(topic, [b"a", b"b", b"c"])
    conn = Connection(nsqd.tcp_address, Config(), ConnectionDelegate(), raw_messages=True)
    await conn.connect()
    try:
        await conn.subscribe(topic, "ch")
        conn.send_rdy(1)

        async def requeued() -> bool:  # each delivery is REQed at once: nothing waits for its timeout
            stats = await channel_stats(nsqd, topic, "ch")
            return bool(stats) and stats["requeue_count"] >= 3 and stats["timeout_count"] == 0
        await eventually(requeued, message="the frames requeued by the default delegate")
        assert conn.in_flight <= 1
    finally:
        conn.close()
