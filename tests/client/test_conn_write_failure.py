"""A write that fails while nsqd's answers are still unread in the socket: the connection
reads them before closing, so a publish nsqd accepted is reported as accepted, only the
commands nsqd never answered fail, and a consumer drops (never handles) messages it could
no longer FIN. Against a scripted nsqd (tests/client/scripted.py) that answers and resets
while the client's event loop is held, so that the race is provoked every time; each over
plain TCP and over TLS (what is left in the socket is then decrypted with the session)."""
from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from dataclasses import dataclass
from typing import Any

import pytest

from nsq_client import (
    Config,
    Connection,
    ConnectionClosedError,
    ConnectionDelegate,
    Consumer,
    Message,
    NotConnectedError,
    Producer,
    ServerError,
)
from nsq_client.conn import _TlsSession
from nsq_protocol.frames import FRAME_ERROR, encode_frame
from nsq_protocol.message import WireMessage, decode_message
from tests.broker.certs import Pki, make_pki
from tests.client.helpers import eventually
from tests.client.scripted import (
    OK_FRAME,
    TCP_CLOSE,
    Peer,
    ScriptedNsqd,
    client_socket,
    message_frame,
    tcp_state,
    unread_bytes,
)
from tests.servers import wait_for


@dataclass(frozen=True)
class Wire:
    """Plain TCP, or TLS as IDENTIFY negotiates it (``tls_v1``)."""
    server: ssl.SSLContext | None = None
    client: ssl.SSLContext | None = None

    def config(self, **settings: Any) -> Config:
        if self.client is not None:
            settings.update(tls_v1=True, tls_context=self.client)
        return Config(**settings)

    def unread(self, plaintext: int) -> int | None:
        """What the socket holds once ``plaintext`` bytes were sent: under TLS, records
        of a size not known here (None: some)."""
        return plaintext if self.server is None else None


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_wire(pki: Pki) -> Wire:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pki.server.cert, pki.server.key)
    return Wire(server, pki.client_context())


@pytest.fixture(params=["plain", "tls"])
def wire(request: pytest.FixtureRequest) -> Wire:
    return Wire() if request.param == "plain" else tls_wire(request.getfixturevalue("pki"))


def wait_for_reset_with_unread(conn: Connection, unread: int | None) -> None:
    """Block (the event loop with it) until the connection was reset by the peer with
    ``unread`` bytes it sent still in the socket (None: some)."""
    sock = client_socket(conn)
    wait_for(lambda: tcp_state(sock) == TCP_CLOSE and (unread_bytes(sock) == unread if unread is not None
                                                       else unread_bytes(sock) > 0),
             message=f"a reset with {unread or 'some'} bytes unread")


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def test_answers_read_before_a_failed_write_settle_their_publishes(
        wire: Wire, caplog: pytest.LogCaptureFixture) -> None:
    written = threading.Event()

    def script(peer: Peer) -> None:
        assert written.wait(10)
        peer.expect(b"PUB", b"PUB")
        peer.send(OK_FRAME * 2)
        peer.reset()  # the two PUBs behind them are not read: never answered

    with ScriptedNsqd(script, wire.server) as fake:
        async with Producer(fake.address, wire.config()) as producer:
            await producer.connect()
            conn = producer._conn
            assert conn is not None
            sent = [producer.publish_nowait("t", b"m%d" % i) for i in range(4)]
            # the loop is held from here to the last publish: nothing is read meanwhile
            written.set()
            fake.wait_done()
            wait_for_reset_with_unread(conn, wire.unread(2 * len(OK_FRAME)))
            refused = producer.publish_nowait("t", b"late")  # its write fails on the reset
            results = await asyncio.gather(*sent, refused, return_exceptions=True)
            await conn.wait_closed()
    assert results[:2] == [None, None]
    assert [type(r) for r in results[2:4]] == [ConnectionClosedError, ConnectionClosedError]
    assert "before nsqd answered" in str(results[2])
    assert isinstance(results[4], NotConnectedError)  # nsqd got none of it
    assert isinstance(conn.close_reason, ConnectionClosedError)
    assert "connection lost" in str(conn.close_reason)
    assert not errors_logged(caplog)


async def test_an_error_frame_read_after_a_failed_write_answers_its_command(wire: Wire) -> None:
    bad = encode_frame(FRAME_ERROR, b"E_BAD_MESSAGE PUB message too big 101 > 100")

    def script(peer: Peer) -> None:
        peer.expect(b"PUB", b"PUB")
        peer.send(OK_FRAME + bad)
        peer.reset()

    with ScriptedNsqd(script, wire.server) as fake:
        async with Producer(fake.address, wire.config()) as producer:
            await producer.connect()
            conn = producer._conn
            assert conn is not None
            sent = [producer.publish_nowait("t", b"fine"), producer.publish_nowait("t", b"too big")]
            fake.wait_done()
            wait_for_reset_with_unread(conn, wire.unread(len(OK_FRAME) + len(bad)))
            refused = producer.publish_nowait("t", b"late")
            results = await asyncio.gather(*sent, refused, return_exceptions=True)
    assert results[0] is None
    assert isinstance(results[1], ServerError) and results[1].code == "E_BAD_MESSAGE"
    assert isinstance(results[2], NotConnectedError)


async def test_answers_sent_after_a_write_timed_out_still_settle_their_publishes(wire: Wire) -> None:
    timed_out = threading.Event()

    def script(peer: Peer) -> None:
        peer.expect(b"PUB")  # and nothing more: the large PUB fills the socket's buffers
        assert timed_out.wait(10)
        peer.send(OK_FRAME)
        peer.reset()

    with ScriptedNsqd(script, wire.server) as fake:
        async with Producer(fake.address, wire.config(write_timeout=0.2)) as producer:
            await producer.connect()
            conn = producer._conn
            assert conn is not None
            small = producer.publish_nowait("t", b"small")
            # two: asyncio's SSL transport hands a write to the socket's transport whole,
            # and holds back (drain() waits) only the writes after it
            large = [producer.publish_nowait("t", b"x" * (16 << 20)) for _ in range(2)]
            with pytest.raises(ConnectionClosedError, match="write failed"):
                await producer.ping()
            assert not conn.is_connected and not conn.is_closed  # reading what is left
            timed_out.set()
            results = await asyncio.gather(small, *large, return_exceptions=True)
            await conn.wait_closed()
            fake.wait_done()
    assert results[0] is None
    assert [type(r) for r in results[1:]] == [ConnectionClosedError, ConnectionClosedError]
    assert "TimeoutError" in str(conn.close_reason)


class RecordingConsumer(Consumer):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.delivered_on: list[Connection] = []
        self.closed: list[tuple[Connection, BaseException | None]] = []

    def _on_message(self, conn: Connection, message: Message) -> None:
        self.delivered_on.append(conn)
        super()._on_message(conn, message)

    def _on_close(self, conn: Connection, reason: BaseException | None) -> None:
        self.closed.append((conn, reason))
        super()._on_close(conn, reason)


async def test_a_consumer_whose_fin_fails_drops_the_messages_read_after_it(
        wire: Wire, caplog: pytest.LogCaptureFixture) -> None:
    handling = threading.Event()
    behind = message_frame(2, b"b") + message_frame(3, b"c")

    def script(peer: Peer) -> None:
        peer.expect(b"SUB")
        peer.send(OK_FRAME)
        peer.expect(b"RDY")
        peer.send(message_frame(1, b"a"))
        assert handling.wait(10)
        peer.send(behind)
        peer.reset()  # before the client's FIN for "a"

    handled: list[bytes] = []
    with ScriptedNsqd(script, wire.server) as fake:
        async def handler(message: Message) -> None:
            # synchronous to the end: the FIN is written with b and c still unread
            handled.append(message.body)
            handling.set()
            fake.wait_done()
            wait_for_reset_with_unread(consumer.delivered_on[0], wire.unread(len(behind)))

        consumer = RecordingConsumer("t", "c", wire.config(max_in_flight=10), handler=handler)
        await consumer.connect_to_nsqd(fake.address)
        try:
            await eventually(lambda: consumer.closed, message="the connection closed")
        finally:
            await consumer.stop(timeout=5)
    (conn, reason), = consumer.closed
    assert handled == [b"a"]
    assert conn.messages_discarded == 2 and conn.messages_received == 1 and conn.in_flight == 0
    stats = consumer.stats()
    assert (stats.messages_received, stats.messages_finished, stats.messages_requeued) == (1, 1, 0)
    assert isinstance(reason, ConnectionClosedError) and "connection lost" in str(reason)
    assert not errors_logged(caplog)


class Frames(ConnectionDelegate):
    def __init__(self) -> None:
        self.messages: list[WireMessage] = []

    def on_message_frames(self, conn: Connection, payloads: list[bytes]) -> None:
        self.messages += map(decode_message, payloads)


@pytest.mark.parametrize(("answer", "left_in_flight"), [("finish_ids", 0), ("requeue_ids", 0), ("touch_ids", 2)])
async def test_a_raw_connection_whose_answers_fail_drops_the_frames_read_after_them(
        answer: str, left_in_flight: int, wire: Wire, caplog: pytest.LogCaptureFixture) -> None:
    delivered = threading.Event()
    behind = message_frame(3, b"c") + message_frame(4, b"d") + message_frame(5, b"e")

    def script(peer: Peer) -> None:
        peer.expect(b"SUB")
        peer.send(OK_FRAME)
        peer.expect(b"RDY")
        peer.send(message_frame(1, b"a") + message_frame(2, b"b"))
        assert delivered.wait(10)
        peer.send(behind)
        peer.reset()

    frames = Frames()
    with ScriptedNsqd(script, wire.server) as fake:
        conn = Connection(fake.address, wire.config(), frames, raw_messages=True)
        await conn.connect()
        try:
            await conn.subscribe("t", "c")
            conn.send_rdy(10)
            await eventually(lambda: len(frames.messages) == 2, message="two frames")
            delivered.set()
            fake.wait_done()
            wait_for_reset_with_unread(conn, wire.unread(len(behind)))
            getattr(conn, answer)([m.id for m in frames.messages])  # fails: no exception, no count lost
            assert conn.in_flight == left_in_flight and not conn.is_connected
            await asyncio.wait_for(conn.wait_closed(), 5)
        finally:
            conn.close()
    assert [m.body for m in frames.messages] == [b"a", b"b"]
    assert conn.messages_discarded == 3 and conn.messages_received == 2
    assert "connection lost" in str(conn.close_reason)
    assert not errors_logged(caplog)



async def test_without_the_tls_session_a_failed_write_fails_what_is_pending(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, pki: Pki) -> None:
    """Where asyncio's SSL transport lacks the private attributes the session is taken from,
    the connection behaves as before issue 36 under TLS, and says so once, at debug."""
    caplog.set_level(logging.DEBUG, logger="nsq_client")
    monkeypatch.setattr(_TlsSession, "_missing_logged", False)
    of = _TlsSession.of
    monkeypatch.setattr(_TlsSession, "of", classmethod(lambda cls, transport: of(asyncio.Transport())))
    wire = tls_wire(pki)

    def script(peer: Peer) -> None:
        peer.expect(b"PUB")
        peer.send(OK_FRAME)
        peer.reset()

    with ScriptedNsqd(script, wire.server) as fake:
        async with Producer(fake.address, wire.config()) as producer:
            await producer.connect()
            conn = producer._conn
            assert conn is not None
            sent = producer.publish_nowait("t", b"m")
            fake.wait_done()
            wait_for_reset_with_unread(conn, None)
            producer.publish_nowait("t", b"late")
            with pytest.raises(ConnectionClosedError, match="before nsqd answered"):
                await sent
    assert of(asyncio.Transport()) is None
    missing = [r for r in caplog.records if "_sslobj" in r.getMessage()]
    assert [r.levelno for r in missing] == [logging.DEBUG]
