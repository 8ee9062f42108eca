"""The frames a delivery writes, whichever way they are built: fresh messages of one size
in one strided pass, anything else one by one. Both give NSQ's message frame with the
attempts of this delivery, byte for byte."""
from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from nsq_protocol.frames import FRAME_MESSAGE
from nsqd.client_conn import ClientConn
from nsqd.message import Message, encode_payload


class Transport:
    def __init__(self) -> None:
        self.written = bytearray()

    def write(self, data: bytes) -> None:
        self.written += data

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 4150) if name == "peername" else default

    def close(self) -> None:
        pass


def expected_frame(payload: bytes, attempts: int) -> bytes:
    body = payload[:8] + struct.pack(">H", attempts) + payload[10:]
    return struct.pack(">Ii", len(body) + 4, FRAME_MESSAGE) + body


def deliver(items: list[bytes | Message], buffer_size: int = 16 * 1024) -> bytes:
    transport = Transport()
    client = ClientConn(1, transport, msg_timeout=60.0, heartbeat_interval=30.0,  # type: ignore[arg-type]
                        output_buffer_size=buffer_size, output_buffer_timeout=0.25)
    client.hold_flush()
    client.send_messages(items)
    client.release_flush()
    return bytes(transport.written)


def fresh(n: int, size: int, attempts: int = 0) -> bytes:
    return encode_payload(b"%016x" % n, b"x" * size, 1_700_000_000_000_000_000 + n, attempts)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["fresh", "redelivered", "message"]), st.sampled_from([0, 1, 200]),
                          st.integers(0, 0xFFFF)), min_size=1, max_size=40),
       st.sampled_from([64, 16 * 1024]))
def test_every_delivery_is_framed_as_nsq_frames_it(kinds: list[tuple[str, int, int]], buffer_size: int) -> None:
    items: list[bytes | Message] = []
    expected = b""
    for n, (kind, size, attempts) in enumerate(kinds):
        if kind == "fresh":  # never delivered: attempts 0, this delivery is the first
            items.append(fresh(n, size))
            expected += expected_frame(fresh(n, size), 1)
        elif kind == "redelivered":  # a bare payload read back with attempts of its own
            items.append(fresh(n, size, attempts))
            expected += expected_frame(fresh(n, size), min(attempts + 1, 0xFFFF))
        else:
            msg = Message(fresh(n, size), attempts)
            items.append(msg)
            expected += expected_frame(fresh(n, size), attempts)
    assert deliver(items, buffer_size) == expected


def test_a_run_of_equal_fresh_messages_gets_attempts_one_each() -> None:
    items = [fresh(n, 200) for n in range(500)]
    assert deliver(list(items)) == b"".join(expected_frame(p, 1) for p in items)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([0, 1, 200]), st.sampled_from([0, 1, 255, 256, 0x1234, 0xFFFE, 0xFFFF]), st.booleans())
def test_a_lone_delivery_is_framed_with_its_attempts_plus_one(size: int, attempts: int, buffered: bool) -> None:
    """``send_lone`` (RDY 1): attempts 0 gets its low byte set, any other count is packed."""
    transport = Transport()
    client = ClientConn(1, transport, msg_timeout=60.0, heartbeat_interval=30.0,  # type: ignore[arg-type]
                        output_buffer_size=16 * 1024, output_buffer_timeout=0.25)
    if buffered:
        client.hold_flush()
    payload = fresh(7, size, attempts)
    client.send_lone(payload)
    if buffered:
        client.release_flush()
    assert bytes(transport.written) == expected_frame(payload, min(attempts + 1, 0xFFFF))


def test_lone_deliveries_of_many_sizes_each_get_their_own_frame_size() -> None:
    """Frame headers are kept per payload size for the first sizes seen; sizes past those
    are framed as exactly."""
    transport = Transport()
    client = ClientConn(1, transport, msg_timeout=60.0, heartbeat_interval=30.0,  # type: ignore[arg-type]
                        output_buffer_size=16 * 1024, output_buffer_timeout=0.25)
    payloads = [fresh(n, size) for n, size in enumerate([*range(0, 600), *range(599, -1, -1)])]
    for payload in payloads:
        client.send_lone(payload)
    assert bytes(transport.written) == b"".join(expected_frame(p, 1) for p in payloads)
