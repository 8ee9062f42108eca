"""One connection to one nsqd: the handshake (magic, IDENTIFY with feature negotiation, TLS,
snappy/deflate, AUTH), V2 framing in both directions, heartbeat answers, responses matched
to commands in the order they were sent, and the in-flight bookkeeping a consumer needs
for a clean close (CLS -> CLOSE_WAIT -> every in-flight message answered -> close).

When a write fails (nsqd closed, typically after a fatal error), answers nsqd sent before
closing may still sit unread in the socket: the connection stops writing, reads them until
EOF (at most ``LEFTOVER_READ_TIMEOUT``) and only then fails the commands nsqd never
answered. Under TLS they are decrypted with the session of asyncio's SSL transport
(:class:`_TlsSession`); compression is undone above that, as for any read. Messages read
in that phase are not handed over: they could not be FINed, and nsqd delivers them again."""
from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
import time
from collections import deque
from typing import Any, Sequence

from nsq_protocol import CLOSE_WAIT, HEARTBEAT, MAGIC_V2, OK, Frame, FrameDecoder, ProtocolError
from nsq_protocol import commands as cmd
from nsq_protocol.compression import StreamCodec, codec_for
from nsq_protocol.errors import NON_FATAL_CODES
from nsq_protocol.host_port import split_dial_address, split_host_port
from nsq_protocol.message import MESSAGE_HEADER, MESSAGE_HEADER_SIZE, decode_message

from .config import Config
from .errors import ConnectionClosedError, IdentifyError, NotConnectedError, ServerError
from .message import Message
from .tls import client_context

log = logging.getLogger("nsq_client")

READ_CHUNK = 256 * 1024
LEFTOVER_READ_TIMEOUT = 1.0  # seconds to read what nsqd sent before a write failed


def _local_address(local_addr: str | None) -> tuple[str, int] | None:
    """``local_addr`` as ``host`` or ``host:port``, for binding the outgoing socket."""
    if not local_addr:
        return None
    try:
        return split_host_port(local_addr)
    except ValueError:
        return local_addr, 0


class _Reader(asyncio.StreamReader):
    """A StreamReader that, when the transport fails, hands out the bytes it holds and
    then EOF, keeping the error in ``lost`` (StreamReader raises at once, dropping them)."""

    lost: BaseException | None = None

    def set_exception(self, exc: BaseException) -> None:
        self.lost = exc
        self.feed_eof()


class _TlsSession:
    """The TLS session of asyncio's SSL transport, to decrypt what is read from the spare
    descriptor after the transport closed. Taken from private attributes (the same in
    CPython 3.11 to 3.13: ``_SSLProtocolTransport._ssl_protocol``, and its ``_sslobj``,
    ``_incoming`` and ``_transport``); :meth:`of` gives None where they are missing."""

    _missing_logged = False

    def __init__(self, sslobj: ssl.SSLObject, incoming: ssl.MemoryBIO,
                 socket_transport: asyncio.WriteTransport) -> None:
        self._sslobj = sslobj
        self._incoming = incoming
        self.socket_transport = socket_transport

    @classmethod
    def of(cls, transport: asyncio.BaseTransport) -> _TlsSession | None:
        protocol = getattr(transport, "_ssl_protocol", None)
        sslobj = getattr(protocol, "_sslobj", None)
        incoming = getattr(protocol, "_incoming", None)
        socket_transport = getattr(protocol, "_transport", None)
        if (isinstance(sslobj, ssl.SSLObject) and isinstance(incoming, ssl.MemoryBIO)
                and isinstance(socket_transport, asyncio.WriteTransport)):
            return cls(sslobj, incoming, socket_transport)
        if not cls._missing_logged:
            cls._missing_logged = True
            log.debug("asyncio's SSL transport has no _ssl_protocol._sslobj/_incoming/_transport here: "
                      "under TLS, answers still unread when a write fails are lost")
        return None

    def feed(self, records: bytes) -> None:
        self._incoming.write(records)

    def decrypt(self) -> bytes:
        """The plaintext the session holds (b"" when it needs more records); raises
        ``ssl.SSLError`` once nsqd ended the session."""
        try:
            return self._sslobj.read(READ_CHUNK)
        except ssl.SSLWantReadError:
            return b""


class ConnectionDelegate:
    """What a connection reports to its owner; every method may be left as is."""

    def on_message(self, conn: "Connection", message: Message) -> None:
        message.requeue(backoff=False)  # nobody consumes here: hand it back at once

    def on_message_frames(self, conn: "Connection", payloads: list[bytes]) -> None:
        """With ``raw_messages``: message frames' payloads (timestamp, attempts, ID,
        body as :func:`nsq_protocol.message.decode_message` reads them), in the order they
        came, as many at once as one read brought; answered later by ID through
        :meth:`Connection.finish_ids` and its kin. Left as is, like :meth:`on_message`:
        nobody consumes here, so they are handed back at once."""
        conn.requeue_ids([payload[MESSAGE_HEADER.size:MESSAGE_HEADER_SIZE] for payload in payloads])

    def on_message_finished(self, conn: "Connection", message: Message) -> None: ...

    def on_message_requeued(self, conn: "Connection", message: Message, backoff: bool) -> None: ...

    def on_server_error(self, conn: "Connection", error: ServerError) -> None:
        log.error("(%s) nsqd error: %s", conn.address, error)

    def on_close_wait(self, conn: "Connection") -> None: ...

    def on_close(self, conn: "Connection", reason: BaseException | None) -> None: ...


class Connection:
    """One connection to an nsqd: the TCP (or TLS) socket, IDENTIFY and the features it
    negotiates, heartbeats, framing, and the commands a producer or a consumer sends.
    Producer and Consumer are built on it; use it directly for what they do not cover."""

    def __init__(self, address: str, config: Config, delegate: ConnectionDelegate | None = None,
                 raw_messages: bool = False) -> None:
        """``raw_messages``: hand message frames to ``delegate.on_message_frames`` as they
        came, with no :class:`Message` built for each (for consumers that take many
        messages at once and answer them in bulk)."""
        self.address = address
        self.config = config
        self.delegate = delegate or ConnectionDelegate()
        self.raw_messages = raw_messages
        self.host, self.port = split_dial_address(address)
        self.server_settings: dict[str, Any] = {}
        self.max_rdy = 2500
        # RDY as last sent, when it was last raised above 0, and when a message last came
        self.rdy_count = 0
        self.last_rdy_time = 0.0
        self.last_message_time = 0.0
        self.in_flight = 0
        self.messages_received = 0
        self.messages_discarded = 0  # read after writing failed: never handed over

        self._reader: _Reader | None = None
        self._writer: asyncio.StreamWriter | None = None
        # the socket's transport (under TLS, the one beneath the writer's), checked per message
        self._transport: asyncio.WriteTransport | None = None
        # a second descriptor of the socket, to read it after the transport closed its own
        # on a write error (under TLS, through the session in _tls)
        self._spare: socket.socket | None = None
        self._tls: _TlsSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._write_error: BaseException | None = None
        self._leftover_deadline: float | None = None
        self._frames = FrameDecoder()
        self._codec: StreamCodec | None = None
        self._pending: deque[asyncio.Future[bytes]] = deque()
        self._read_task: asyncio.Task[None] | None = None
        self._connected = False
        self._close_sent = False
        self._close_wait = False
        self._closed = asyncio.Event()
        self._close_reason: BaseException | None = None

    def __repr__(self) -> str:
        return f"Connection({self.address})"

    # -- state ------------------------------------------------------------------
    @property
    def is_connected(self) -> bool:
        return self._connected and self._writable

    @property
    def is_closing(self) -> bool:
        """CLS was sent, writing failed or the connection is gone: no RDY may be raised on it."""
        return self._close_sent or not self._writable

    @property
    def _writable(self) -> bool:
        # the transport closes itself on a write error, and _finalize closes it
        transport = self._transport
        return transport is not None and not transport.is_closing()

    @property
    def is_closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # -- handshake ----------------------------------------------------------------
    async def connect(self) -> None:
        """Open the socket and negotiate; raises :class:`IdentifyError` or ``OSError``."""
        if self._connected or self._closed.is_set():
            raise RuntimeError(f"{self} cannot connect twice")
        cfg = self.config
        try:
            async with asyncio.timeout(cfg.dial_timeout or None):
                await self._open_socket()
            self._write(MAGIC_V2 + cmd.identify(cfg.identify_body()))
            await self._negotiate()
        except BaseException as err:
            self._finalize(err)
            if isinstance(err, TimeoutError):
                raise ConnectionClosedError(f"{self.address}: timed out connecting or negotiating") from err
            raise
        self._connected = True
        self._read_task = asyncio.create_task(self._read_loop(), name=f"nsq-read-{self.address}")

    async def _open_socket(self) -> None:
        """``asyncio.open_connection`` with a :class:`_Reader` and the spare descriptor."""
        self._loop = loop = asyncio.get_running_loop()
        self._reader = reader = _Reader(limit=READ_CHUNK, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        transport, _ = await loop.create_connection(
            lambda: protocol, self.host, self.port, local_addr=_local_address(self.config.local_addr))
        self._writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        self._transport = self._writer.transport
        self._spare = transport.get_extra_info("socket").dup()
        self._spare.setblocking(False)

    async def _negotiate(self) -> None:
        cfg = self.config
        answer = await self._expect_response("IDENTIFY")
        if answer != OK:  # nsqd answers JSON when feature negotiation is on
            try:
                self.server_settings = json.loads(answer)
            except ValueError as err:
                raise IdentifyError(f"{self.address}: IDENTIFY answer is not JSON: {answer[:100]!r}") from err
            self.max_rdy = int(self.server_settings.get("max_rdy_count", self.max_rdy))
        settings = self.server_settings
        if cfg.tls_v1:
            if not settings.get("tls_v1"):
                raise IdentifyError(f"{self.address}: TLS was asked for but nsqd did not enable it")
            await self._upgrade_tls()
        snappy_on, deflate_on = bool(settings.get("snappy")), bool(settings.get("deflate"))
        if snappy_on or deflate_on:
            self._codec = codec_for(snappy_on, deflate_on, int(settings.get("deflate_level") or 6))
            rest = self._frames.take_unparsed()  # bytes after IDENTIFY's answer are compressed
            if rest:
                self._frames.feed(self._codec.decode(rest) if self._codec else rest)
            if await self._expect_response("compression") != OK:
                raise IdentifyError(f"{self.address}: no OK after enabling compression")
        if settings.get("auth_required"):
            if not cfg.auth_secret:
                raise IdentifyError(f"{self.address}: nsqd requires AUTH and no auth_secret is set")
            self._write(cmd.auth(cfg.auth_secret))
            answer = await self._expect_response("AUTH")
            try:
                self.server_settings["auth"] = json.loads(answer)
            except ValueError as err:
                raise IdentifyError(f"{self.address}: AUTH answer is not JSON: {answer[:100]!r}") from err

    async def _upgrade_tls(self) -> None:
        assert self._writer is not None
        if self._frames.take_unparsed():
            raise IdentifyError(f"{self.address}: unexpected data before the TLS handshake")
        server_name = self.config.tls_server_name or self.host
        await self._writer.start_tls(client_context(self.config), server_hostname=server_name,
                                     ssl_handshake_timeout=self.config.read_timeout)
        self._tls = _TlsSession.of(self._writer.transport)
        if self._tls is None:
            self._close_spare()
            self._transport = self._writer.transport
        else:
            # the SSL transport hears of a failed socket write one loop iteration later:
            # the socket's own transport tells at once whether a write reached nsqd
            self._transport = self._tls.socket_transport
        try:
            answer = await self._expect_response("TLS")
        except (ConnectionClosedError, ssl.SSLError, ConnectionResetError) as err:
            # with TLS 1.3 nsqd judges the client certificate after the handshake completed
            raise IdentifyError(f"{self.address}: nsqd ended the connection after the TLS handshake "
                                f"(is a client certificate it requires missing or refused?): {err}") from err
        if answer != OK:
            raise IdentifyError(f"{self.address}: no OK after the TLS handshake")

    async def _expect_response(self, step: str) -> bytes:
        while True:
            frame = await self._read_frame()
            if frame.is_error:
                err = ServerError(frame.error_code, frame.data.decode("utf-8", "replace"))
                raise IdentifyError(f"{self.address}: {step} failed: {err}") from err
            if frame.is_response and frame.data == HEARTBEAT:
                self._write(cmd.nop())
                continue
            if not frame.is_response:
                raise IdentifyError(f"{self.address}: unexpected frame type {frame.type} during {step}")
            return frame.data

    async def _read_frame(self) -> Frame:
        while (frame := self._frames.next_frame()) is None:
            await self._read_chunk()
        return frame

    async def _read_chunk(self) -> None:
        assert self._reader is not None
        async with asyncio.timeout(self.config.read_timeout):
            data = await self._reader.read(READ_CHUNK)
        if not data:
            data = await self._read_leftover()
        self._frames.feed(self._codec.decode(data) if self._codec else data)

    async def _read_leftover(self) -> bytes:
        """After the transport failed or was aborted: what nsqd sent before it closed, read
        from the spare descriptor until EOF, an error or the deadline."""
        assert self._reader is not None
        failure = self._reader.lost or self._write_error
        if failure is None:
            raise ConnectionClosedError(f"{self.address}: connection closed by nsqd")
        closed = ConnectionClosedError(f"{self.address}: connection lost ({failure!r})")
        if self._spare is None:
            raise closed from failure
        loop = self._loop or asyncio.get_running_loop()
        if self._leftover_deadline is None:
            self._leftover_deadline = loop.time() + LEFTOVER_READ_TIMEOUT
        tls = self._tls
        try:
            async with asyncio.timeout_at(self._leftover_deadline):
                if tls is None:
                    data = await loop.sock_recv(self._spare, READ_CHUNK)
                else:
                    while not (data := tls.decrypt()):
                        if not (records := await loop.sock_recv(self._spare, READ_CHUNK)):
                            break
                        tls.feed(records)
        except (OSError, TimeoutError):  # ssl.SSLError included: the session ended
            data = b""
        if not data:
            raise closed from failure
        return data

    # -- reading ------------------------------------------------------------------
    async def _read_loop(self) -> None:
        reason: BaseException | None = None
        try:
            while not self._closed.is_set():
                while not self._closed.is_set():
                    if self.raw_messages and self._deliver_raw(self._frames.next_message_payloads()):
                        continue
                    if (frame := self._frames.next_frame()) is None:
                        break
                    self._dispatch(frame)
                if not self._closed.is_set():
                    await self._read_chunk()
        except TimeoutError:
            reason = ConnectionClosedError(f"{self.address}: nothing read for {self.config.read_timeout}s")
        except asyncio.CancelledError:
            reason = ConnectionClosedError(f"{self.address}: connection closed")
        except (OSError, ConnectionClosedError, ProtocolError) as err:
            reason = err
        except Exception as err:  # a delegate bug: report it and drop the connection
            log.exception("(%s) error while handling a frame", self.address)
            reason = err
        finally:
            self._finalize(reason)

    def _deliver_raw(self, payloads: list[bytes]) -> bool:
        """A run of message frames, handed over in one call (``raw_messages``)."""
        if not payloads:
            return False
        if not self._writable:
            self.messages_discarded += len(payloads)
            return True
        self.in_flight += len(payloads)
        self.messages_received += len(payloads)
        self.last_message_time = time.monotonic()
        self.delegate.on_message_frames(self, payloads)
        return True

    def _dispatch(self, frame: Frame) -> None:
        if frame.is_message:
            if not self._writable:
                self.messages_discarded += 1
                return
            self.in_flight += 1
            self.messages_received += 1
            self.last_message_time = time.monotonic()
            if self.raw_messages:
                self.delegate.on_message_frames(self, [frame.data])
            else:
                self.delegate.on_message(self, Message(decode_message(frame.data), self.address, self))
        elif frame.is_response:
            if frame.data == HEARTBEAT:
                try:
                    self.send(cmd.nop())
                except NotConnectedError:
                    pass  # writing failed: the rest is being read before closing
            elif frame.data == CLOSE_WAIT:
                self._close_wait = True
                self.delegate.on_close_wait(self)
                self._close_if_drained()
            elif self._pending:
                fut = self._pending.popleft()
                if not fut.done():
                    fut.set_result(frame.data)
            else:
                log.warning("(%s) unexpected response %r", self.address, frame.data[:100])
        else:
            error = ServerError(frame.error_code, frame.data.decode("utf-8", "replace"))
            # FIN/REQ/TOUCH failures answer no pending command and leave the connection open
            fatal = error.code not in NON_FATAL_CODES
            if fatal and self._pending:
                fut = self._pending.popleft()
                if not fut.done():
                    fut.set_exception(error)
            else:
                self.delegate.on_server_error(self, error)
            if fatal:  # nsqd closes the connection after these: nothing more may be sent on it
                self._finalize(error)

    # -- writing ------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        assert self._writer is not None
        self._writer.write(self._codec.encode(data) if self._codec else data)

    def send(self, data: bytes) -> None:
        """Write a command that nsqd does not answer (RDY, FIN, REQ, TOUCH, NOP).
        :class:`NotConnectedError` means nsqd got none of it."""
        if not self._writable:
            raise NotConnectedError(f"{self.address}: not connected")
        self._write(data)
        # the transport closes itself when the socket refuses the bytes; a write that
        # waits in its buffer fails later and shows in the read loop instead
        if not self._writable:
            raise NotConnectedError(f"{self.address}: writing failed: connection closed")

    def request(self, data: bytes) -> asyncio.Future[bytes]:
        """Write a command nsqd answers (PUB, MPUB, DPUB, SUB); the future gets the answer
        or the :class:`ServerError`/:class:`ConnectionClosedError` instead."""
        self.send(data)
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending.append(fut)
        return fut

    async def drain(self) -> None:
        """Wait until the socket accepts more (at most ``write_timeout``)."""
        if self._writer is None or self._closed.is_set():
            raise NotConnectedError(f"{self.address}: not connected")
        try:
            async with asyncio.timeout(self.config.write_timeout):
                await self._writer.drain()
        except (OSError, TimeoutError) as err:
            self._stop_writing(err)
            raise ConnectionClosedError(f"{self.address}: write failed: {err!r}") from err

    def _stop_writing(self, err: BaseException) -> None:
        """A local write error: the read loop reads what nsqd already sent, then closes."""
        if self._write_error is None:
            self._write_error = err
        if self._read_task is None or self._read_task.done():
            self._finalize(err)
        elif self._writer is not None:
            self._writer.transport.abort()  # the reader sees EOF; the spare keeps the socket

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    # -- consumer commands ----------------------------------------------------------
    async def subscribe(self, topic: str, channel: str) -> None:
        answer = await self.request(cmd.sub(topic, channel))
        if answer != OK:
            raise ServerError("E_INVALID", f"SUB answered {answer!r}")

    def send_rdy(self, count: int) -> None:
        self.send(cmd.rdy(count))
        self.rdy_count = count
        if count > 0:
            self.last_rdy_time = time.monotonic()

    def start_close(self) -> None:
        """CLS: nsqd stops sending and answers CLOSE_WAIT; the socket is closed once every
        in-flight message has been answered."""
        if self._close_sent or self._closed.is_set():
            return
        self._close_sent = True
        self.rdy_count = 0
        try:
            self.send(cmd.cls())
        except NotConnectedError:
            pass

    def close(self, reason: BaseException | None = None) -> None:
        """Close now, without waiting for anything."""
        self._finalize(reason or ConnectionClosedError(f"{self.address}: closed by the client"))

    def _close_if_drained(self) -> None:
        if self._close_wait and self.in_flight <= 0:
            self.close(ConnectionClosedError(f"{self.address}: closed after CLOSE_WAIT"))

    # -- MessageResponder --------------------------------------------------------------
    # The owner hears of each answer before it is written, as in go-nsq: a backoff's RDY 0
    # then reaches nsqd ahead of the REQ, so the requeued message is not redelivered at once.
    def finish(self, message: Message) -> None:
        self.in_flight -= 1
        self.delegate.on_message_finished(self, message)
        self._answer(cmd.fin(message.id))

    def requeue(self, message: Message, delay: float | None, backoff: bool) -> None:
        cfg = self.config
        if delay is None:
            delay = cfg.default_requeue_delay * message.attempts
        delay = min(delay, cfg.max_requeue_delay)
        self.in_flight -= 1
        self.delegate.on_message_requeued(self, message, backoff)
        self._answer(cmd.req(message.id, round(delay * 1000)))

    def touch(self, message: Message) -> None:
        try:
            self.send(cmd.touch(message.id))
        except NotConnectedError:
            log.warning("(%s) cannot TOUCH %s: connection closed", self.address, message.id.decode(errors="replace"))

    # -- answers in bulk, by message ID (raw_messages consumers) --------------------------
    # One write for many answers; in-flight bookkeeping as for the per-message ones, but
    # no per-message delegate calls. The caller answers each delivered ID exactly once.
    def finish_ids(self, ids: Sequence[bytes]) -> None:
        self.in_flight -= len(ids)
        self._answer(cmd.fins(ids))

    def requeue_ids(self, ids: Sequence[bytes], delay_ms: int = 0) -> None:
        self.in_flight -= len(ids)
        self._answer(b"".join(cmd.req(msg_id, delay_ms) for msg_id in ids))

    def touch_ids(self, ids: Sequence[bytes]) -> None:
        try:
            self.send(b"".join(map(cmd.touch, ids)))
        except NotConnectedError:
            log.warning("(%s) cannot TOUCH %d messages: connection closed", self.address, len(ids))

    def _answer(self, command: bytes) -> None:
        try:
            self.send(command)
        except NotConnectedError:
            # nsqd will time the message out and deliver it again
            log.warning("(%s) cannot send %s: connection closed", self.address, command.split(b" ", 1)[0].decode())
        self._close_if_drained()

    # -- teardown --------------------------------------------------------------------
    def _finalize(self, reason: BaseException | None) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._close_reason = reason
        self._transport = None  # under TLS the socket's transport closes only after the session
        self.rdy_count = 0
        closed = ConnectionClosedError(f"{self.address}: connection closed before nsqd answered"
                                       + (f" ({reason})" if reason else ""))
        while self._pending:
            fut = self._pending.popleft()
            if not fut.done():
                fut.set_exception(closed)
        if self._writer is not None:
            self._writer.close()
        self._close_spare()
        if self.messages_discarded:
            log.warning("(%s) %d message(s) read after writing failed were not handed over: "
                        "nsqd will deliver them again", self.address, self.messages_discarded)
        task = self._read_task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
        if self._connected:
            self.delegate.on_close(self, reason)

    def _close_spare(self) -> None:
        spare, self._spare = self._spare, None
        if spare is not None:
            if self._loop is not None:  # a pending sock_recv on it must not outlive the descriptor
                self._loop.remove_reader(spare.fileno())
            spare.close()

    @property
    def close_reason(self) -> BaseException | None:
        return self._close_reason
