"""A read holding exactly one PUB or MPUB (a publisher that waits for each answer) takes
``V2Protocol._publish_lone``; every other read takes the command loop. Both must answer
alike and publish alike: the same stream is fed once a command per read (the lone path
where it applies) and once a byte per read (never the lone path), in process, and the
answers and the topic's messages compared."""
from __future__ import annotations

import asyncio
import importlib.util
import json
import struct
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsq_protocol import MAGIC_V2, commands
from nsqd.nsqd import NSQD
from nsqd.options import NsqdOptions
from nsqd.protocol_v2 import V2Protocol

# bench/inproc.py's in-process transport, loaded from its file as tests/bench does
_spec = importlib.util.spec_from_file_location("bench_inproc", Path(__file__).resolve().parents[2] / "bench" / "inproc.py")
assert _spec is not None and _spec.loader is not None
_inproc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_inproc)

TOPIC = "lone"
MAX_MSG = 64
MAX_BODY = 400


def _size(n: int) -> bytes:
    return struct.pack(">i", n)


def _mpub_raw(topic: str, body: bytes) -> bytes:
    return f"MPUB {topic}\n".encode() + _size(len(body)) + body


bodies = st.binary(min_size=1, max_size=MAX_MSG + 4)
good_topic = st.sampled_from([TOPIC, TOPIC + "-b"])
command = st.one_of(
    st.builds(lambda t, b: commands.pub(t, b), good_topic, bodies),
    st.builds(lambda t, bs: commands.mpub(t, bs), good_topic, st.lists(bodies, min_size=1, max_size=6)),
    st.builds(lambda t, n, b: _mpub_raw(t, b"".join((_size(n), _size(len(b)), b))), good_topic,
              st.integers(-1, 3), bodies),  # a count that may not match
    st.builds(lambda t, s, b: _mpub_raw(t, b"".join((_size(1), _size(s), b))), good_topic,
              st.integers(-2, MAX_MSG + 2), bodies),  # a size that may not match
    st.builds(lambda t, b: f"PUB {t}\n".encode() + _size(len(b) + 1) + b, good_topic, bodies),  # short by one
    st.builds(lambda b: commands.pub("bad!topic", b), bodies),
    st.builds(lambda b: f"PUB {TOPIC}\r\n".encode() + _size(len(b)) + b, bodies),
    st.builds(lambda b: commands.mpub(TOPIC, [b"y" * MAX_MSG] * 7) + b[:3], bodies),  # too big, or a tail
    st.just(b"NOP\n"),
)


async def _run(reads: list[bytes]) -> tuple[bytes, bool, list[bytes]]:
    with tempfile.TemporaryDirectory(prefix="lone-") as data_path:
        nsqd = NSQD(NsqdOptions(data_path=data_path, tcp_address="127.0.0.1:0", http_address="127.0.0.1:0",
                                max_msg_size=MAX_MSG, max_body_size=MAX_BODY, mem_queue_size=100000))
        await nsqd.start()
        try:
            proto, transport = V2Protocol(nsqd), _inproc.NullTransport(keep=True)
            proto.connection_made(transport)  # type: ignore[arg-type]
            identify = json.dumps({"client_id": "lone"}).encode()
            proto.data_received(MAGIC_V2 + b"IDENTIFY\n" + _size(len(identify)) + identify)
            await asyncio.sleep(0)
            for read in reads:
                if transport.closed:
                    break
                proto.data_received(read)
                await asyncio.sleep(0)
            await asyncio.sleep(0)
            topics = {name: [bytes(p)[26:] for p in topic.memory] for name, topic in nsqd.topics.items()}
            published = [body for name in sorted(topics) for body in [name.encode()] + topics[name]]
            return b"".join(transport.written), transport.closed, published
        finally:
            for name in list(nsqd.topics):
                nsqd.delete_topic(name)
            await nsqd.stop()


def _each_byte(stream: bytes) -> list[bytes]:
    return [stream[i:i + 1] for i in range(len(stream))]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(command, min_size=1, max_size=8))
def test_one_publish_per_read_answers_and_publishes_as_the_command_loop(stream: list[bytes]) -> None:
    whole = asyncio.run(_run(stream))
    by_byte = asyncio.run(_run(_each_byte(b"".join(stream))))
    assert whole == by_byte


def test_the_lone_path_takes_a_repeated_publish_and_answers_it() -> None:
    stream = [commands.mpub(TOPIC, [b"a"]), commands.mpub(TOPIC, [b"b"]), commands.pub(TOPIC, b"c"),
              commands.mpub(TOPIC, [b"d", b"e"]), commands.mpub(TOPIC, [b"f" * 3] * 9)]
    calls = []
    original = V2Protocol._publish_lone

    def spy(self: V2Protocol, client: object, data: bytes) -> bool:
        taken = original(self, client, data)  # type: ignore[arg-type]
        calls.append(taken)
        return taken
    V2Protocol._publish_lone = spy  # type: ignore[method-assign]
    try:
        written, closed, published = asyncio.run(_run(stream))
    finally:
        V2Protocol._publish_lone = original  # type: ignore[method-assign]
    assert calls == [False, True, True, True, True]  # the first publish checks the topic name
    assert not closed and written.count(b"OK") == 1 + 5  # IDENTIFY's, then one per publish
    assert published == [TOPIC.encode(), b"a", b"b", b"c", b"d", b"e"] + [b"fff"] * 9


async def test_a_lone_publish_behind_an_owed_answer_is_answered_after_it() -> None:
    """Answers leave in command order: with an earlier publish's answer still owed (a
    replicated topic waiting for its quorum), a lone PUB takes the command loop, whose
    answer queues behind the owed one."""
    with tempfile.TemporaryDirectory(prefix="lone-") as data_path:
        nsqd = NSQD(NsqdOptions(data_path=data_path, tcp_address="127.0.0.1:0", http_address="127.0.0.1:0"))
        await nsqd.start()
        try:
            proto, transport = V2Protocol(nsqd), _inproc.NullTransport(keep=True)
            proto.connection_made(transport)  # type: ignore[arg-type]
            proto.data_received(MAGIC_V2 + commands.pub(TOPIC, b"first"))
            await asyncio.sleep(0)
            ok = b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
            assert b"".join(transport.written) == ok
            owed: asyncio.Future[object] = asyncio.get_running_loop().create_future()
            proto._owe("PUB", owed, 1)  # as a replicated publish leaves it
            proto.data_received(commands.pub(TOPIC, b"second"))
            await asyncio.sleep(0)
            assert b"".join(transport.written) == ok  # nothing may pass the owed answer
            owed.set_result(None)
            for _ in range(3):  # the future's callback, then the flush it schedules
                await asyncio.sleep(0)
            assert b"".join(transport.written) == ok * 3
            assert [bytes(p)[26:] for p in nsqd.topics[TOPIC].memory] == [b"first", b"second"]
        finally:
            nsqd.delete_topic(TOPIC)
            await nsqd.stop()
