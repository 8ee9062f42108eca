"""One TCP connection speaking protocol V2: magic, then a loop of commands.

Bytes go through the (possibly compressed) stream into a sans-IO CommandDecoder; each
command runs to completion before the next is decoded. A handler that must wait (AUTH
asks an HTTP server) returns an awaitable, and decoding resumes when it is done. A
publish that waits for its replicas (or, in durable mode, its fsync) does not stop
decoding: more publishes run behind it and their answers leave in command order
(owed_answers.py); any other command waits until every answer before it is written.
Errors are sent as error frames; fatal ones close the connection after the frame.

A consumer's stream is mostly FINs: a run of them is taken from the buffer in one go and
finished as a batch, and whatever the received commands freed up (FIN, REQ, RDY) is
refilled by one pump of the channel after the batch; the answers to a batch leave in
one write.
"""
from __future__ import annotations

import asyncio
import json
import logging
import struct
import time
from typing import TYPE_CHECKING, Awaitable, Callable, Sequence

from nsq_protocol import CLOSE_WAIT, HEARTBEAT, MAGIC_V2, OK
from nsq_protocol import errors as E
from nsq_protocol.commands import (
    FIN_LINE_LENGTH,
    Command,
    CommandDecoder,
    check_sub_params,
    parse_base10,
    parse_message_id,
    parse_mpub_body,
)
from nsq_protocol.compression import DeflateCodec, SnappyCodec
from nsq_protocol.errors import ProtocolError
from nsq_protocol.frames import FRAME_ERROR, FRAME_RESPONSE, encode_frame
from nsq_protocol.gotext import raw
from nsq_protocol.identify import IdentifyRequest, Negotiated, negotiate
from nsq_protocol.names import MAX_NAME_LENGTH

from .channel import ChannelError
from .diskqueue import DiskQueueError
from .group_commit import SyncError
from .owed_answers import CLOSE_AFTER, OwedAnswers, Waiting
from .replication.tracker import ReplicationError
from .client_conn import ClientConn, ClientState

if TYPE_CHECKING:
    from .nsqd import NSQD
    from .topic import Topic

log = logging.getLogger("nsqd")

Response = bytes | None | Awaitable[bytes | None]

TLS_HANDSHAKE_TIMEOUT = 5.0  # seconds, as nsqd allows
# publishes a connection may have waiting for their replicas (or fsync) before it stops
# reading; each holds only a future, its messages are already on the topic
OWED_ANSWERS_LIMIT = 64
# what may run while earlier publishes still wait: more publishes; anything else (SUB,
# IDENTIFY, CLS, ...) waits until every answer before it is written
PIPELINED = frozenset((b"PUB", b"MPUB", b"DPUB"))


class V2Protocol(asyncio.Protocol):
    __slots__ = ("client", "_busy", "_blocked", "_decoder", "_last_read", "_busy_poller", "_pub_runs",
                 "transport", "nsqd", "_magic", "_owed", "_held", "_pump_due", "_dead", "_cls_received",
                 "_next_beat", "_heartbeat", "_tls_required", "_auth_enabled", "__weakref__")

    def __init__(self, nsqd: "NSQD") -> None:
        self.nsqd = nsqd
        self.transport: asyncio.Transport | None = None
        self.client: ClientConn | None = None
        self._magic = b""
        self._decoder = CommandDecoder(nsqd.command_limits, before_body=self._before_body)
        self._busy = False  # an awaitable handler is running; decoding waits
        self._owed = OwedAnswers(OWED_ANSWERS_LIMIT)
        # decoding waits for owed answers: too many, or a command that must not pass them
        self._blocked = False
        self._held: Command | None = None  # that command, run once they are written
        self._pump_due = False  # the commands processed freed RDY capacity
        self._dead = False
        self._cls_received = False  # a second CLS is an error, as in Go's nsqd
        self._last_read = time.monotonic()
        self._next_beat = 0.0
        self._busy_poller = nsqd.busy_poller
        self._heartbeat: asyncio.TimerHandle | None = None
        # fixed for the process's life; read once rather than on every command
        self._tls_required = nsqd.options.tls_required != "false"
        self._auth_enabled = nsqd.options.auth_enabled
        # runs of PUBs are published as a batch unless each PUB must wait on its own
        # (for an authorization or, in durable mode, for its fsync)
        self._pub_runs = not self._auth_enabled and not nsqd.options.sync_before_ack

    # -- asyncio.Protocol -----------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport subclasses
        transport.set_write_buffer_limits(high=4 * 1024 * 1024)

    def data_received(self, data: bytes) -> None:
        self._last_read = time.monotonic()
        if self._busy_poller is not None:
            self._busy_poller.poke()
        client = self.client
        if (len(data) == FIN_LINE_LENGTH and data[-1] == 0x0A and data.startswith(b"FIN ") and client is not None
                and (channel := client.channel) is not None and client.codec is None
                and not self._busy and not self._blocked and self._decoder.at_boundary()
                and channel.finish_lone(client, data[4:-1])):
            return  # a consumer with RDY 1 finished its message: its next one is already written
        if (self._pub_runs and client is not None and data.startswith(_LONE_PUBLISHES)
                and self._publish_lone(client, data)):
            return  # a publisher that waits for each answer: published and answered
        if client is None:
            self._magic += data
            if len(self._magic) < 4:
                return
            if not self._start(self._magic[:4]):
                return
            data = self._magic[4:]
            client = self.client
        assert client is not None
        if client.codec is not None:
            try:
                data = client.codec.decode(data)
            except Exception as e:
                log.error("PROTOCOL(V2): [%s] failed to decompress input: %s", client, e)
                self._close()
                return
        self._decoder.feed(data)
        self._process()

    def connection_lost(self, exc: Exception | None) -> None:
        self._dead = True
        self._owed.clear()
        self._held = None
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        # the decoder's hook is a method of this protocol: a cycle, which would leave the
        # connection's objects to the cyclic collector (rare in nsqd: see cli's thresholds)
        # instead of freeing them here
        self._decoder.before_body = None
        client = self.client
        if client is None:
            return
        client.closed = True
        log.info("PROTOCOL(V2): [%s] exiting ioloop", client)
        if client.channel is not None:
            client.channel.remove_client(client.id)
            client.channel = None  # nothing refers back to a channel (a deleted one among them)
        self.nsqd.remove_client(client.id)

    def pause_writing(self) -> None:
        if self.client is not None:
            self.client.write_paused = True

    def resume_writing(self) -> None:
        client = self.client
        if client is not None:
            client.resume_writes()
            if client.channel is not None:
                client.channel.pump()

    # -- connection setup -----------------------------------------------------
    def _start(self, magic: bytes) -> bool:
        assert self.transport is not None
        if magic != MAGIC_V2:
            log.error("client(%s) bad protocol magic '%s'",
                      self.transport.get_extra_info("peername"), magic.decode("latin-1"))
            self.transport.write(encode_frame(FRAME_ERROR, E.E_BAD_PROTOCOL.encode()))
            self._close()
            return False
        opts = self.nsqd.options
        self.client = ClientConn(
            self.nsqd.next_client_id(), self.transport,
            msg_timeout=opts.msg_timeout, heartbeat_interval=opts.heartbeat_interval,
            output_buffer_size=16 * 1024, output_buffer_timeout=opts.output_buffer_timeout)
        self.nsqd.add_client(self.client)
        log.info("TCP: new client(%s)", self.client.remote_address)
        self._schedule_heartbeat()
        return True

    def _close(self) -> None:
        self._dead = True
        if self.client is not None:
            self.client.close()
        elif self.transport is not None:
            self.transport.close()

    # -- heartbeats -----------------------------------------------------------
    # One timer per connection, due at the next heartbeat or at the read deadline (two
    # intervals after the last bytes read, as nsqd's), whichever comes first. Reads only
    # move _last_read: a timer that finds the deadline moved re-arms for the new one.
    def _schedule_heartbeat(self) -> None:
        """(Re)start heartbeats: the next one is due an interval from now."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        client = self.client
        if client is None or client.heartbeat_interval <= 0 or self._dead:
            return
        self._next_beat = time.monotonic() + client.heartbeat_interval
        self._arm_heartbeat(client.heartbeat_interval)

    def _arm_heartbeat(self, interval: float) -> None:
        due = self._next_beat
        if not self._busy and not self._owed:  # a command still running is not the client's silence
            due = min(due, self._last_read + 2 * interval)
        delay = max(0.0, due - time.monotonic())
        self._heartbeat = asyncio.get_running_loop().call_later(delay, self._beat)

    def _beat(self) -> None:
        self._heartbeat = None
        client = self.client
        if client is None or self._dead or client.heartbeat_interval <= 0:
            return
        interval = client.heartbeat_interval
        now = time.monotonic()
        idle = now - self._last_read
        if idle >= 2 * interval and not self._busy and not self._owed:
            log.error("PROTOCOL(V2): [%s] timed out: no command for %.1fs", client, idle)
            self._close()
            return
        if now >= self._next_beat:
            client.write_frame(FRAME_RESPONSE, HEARTBEAT)
            self._next_beat += interval
            if self._next_beat <= now:  # the loop fell behind: no burst of late beats
                self._next_beat = now + interval
        self._arm_heartbeat(interval)

    # -- the command loop -----------------------------------------------------
    def _process(self) -> None:
        client = self.client
        assert client is not None
        client.hold_flush()
        try:
            self._process_commands(client)
            if self._pump_due and client.channel is not None:
                self._pump_due = False
                client.channel.pump()
        finally:
            client.release_flush()

    def _process_commands(self, client: ClientConn) -> None:
        decoder = self._decoder
        if self._held is not None and not self._busy and not self._blocked and not self._dead:
            held, self._held = self._held, None
            if not self._run(client, held):
                return
        while not self._busy and not self._blocked and not self._dead:
            channel = client.channel  # set only by a SUB that passed every check
            if channel is not None and decoder.buffered >= FIN_LINE_LENGTH:
                fins = decoder.take_fins(channel.in_flight.ids())
                if fins:
                    self._finish_batch(fins)
                    if not decoder.buffered:  # the common case: the read held only FINs
                        return
            if self._pub_runs and (client.tls or not self._tls_required):
                run = decoder.take_pubs()
                if run is not None:
                    self._publish_run(*run)
                    if not decoder.buffered:  # the common case: the read ended with the run
                        return
                    continue
            try:
                cmd = decoder.next_command()
            except ProtocolError as err:
                self._send_error(err)
                if err.fatal:
                    return
                continue
            if cmd is None:
                return
            if self._owed and cmd.name not in PIPELINED:
                self._held = cmd
                self._block()
                return
            if not self._run(client, cmd):
                return

    def _run(self, client: ClientConn, cmd: Command) -> bool:
        """One decoded command; False once decoding must stop (a fatal error, or a
        handler to wait for)."""
        try:
            result = self._exec(cmd)
        except ProtocolError as err:
            self._send_error(err)
            return not err.fatal
        if isinstance(result, (bytes, type(None))):
            if result is not None:
                self._respond(encode_frame(FRAME_RESPONSE, result))
            return True
        self._busy = True
        if self.transport is not None:
            self.transport.pause_reading()
        asyncio.ensure_future(self._finish_async(result))
        return False

    def _block(self) -> None:
        self._blocked = True
        if self.transport is not None:
            self.transport.pause_reading()

    def _respond(self, frame: bytes) -> None:
        """An answer, written now unless answers owed before it are still waiting."""
        if self._owed:
            self._owed.add(frame)
        else:
            assert self.client is not None
            self.client.write(frame)

    def _owe(self, command: str, settled: "asyncio.Future[object]", oks: int) -> None:
        """``oks`` OKs once ``settled`` resolves (the failure if it fails), after every
        answer owed before; decoding goes on unless too many are owed."""
        self._owed.add(Waiting(command, settled, oks))
        settled.add_done_callback(self._write_settled)
        if self._owed.full:
            self._block()

    def _write_settled(self, _settled: object = None) -> None:
        client = self.client
        if self._dead or client is None:
            return
        for owed in self._owed.take_settled():
            if isinstance(owed, bytes):
                client.write(owed)
            elif isinstance(owed, Waiting):
                error = owed.settled.exception() if not owed.settled.cancelled() else ReplicationError("cancelled")
                if error is None:
                    client.write(_OK_FRAME * owed.oks if owed.oks > 1 else _OK_FRAME)
                    continue
                if not isinstance(error, ProtocolError):
                    error = ProtocolError(_failed(owed.command), f"{owed.command} failed {error}")
                if not error.fatal:
                    log.info("PROTOCOL(V2): [%s] %s", client, error)
                    client.write_frame(FRAME_ERROR, error.wire_text)
                    continue
                self._owed.clear()  # what was owed after it is never answered: the connection closes
                self._held = None
                self._send_error(error)
                return
            else:  # CLOSE_AFTER: a fatal error's frame went just before
                self._close()
                return
        if self._blocked and not (self._owed.full or (self._held is not None and self._owed)):
            self._blocked = False
            self._last_read = time.monotonic()  # the read deadline starts again after the commands
            if self.transport is not None:
                self.transport.resume_reading()
            self._process()

    def _finish_batch(self, msg_ids: list[bytes]) -> None:
        client = self.client
        assert client is not None and client.channel is not None
        finished, refused = client.channel.finish_many(client.id, msg_ids)
        if finished:
            client.finished_messages(finished)
            self._pump_due = True
        for msg_id, reason in refused:
            self._send_error(ProtocolError(E.E_FIN_FAILED, f"FIN {_shown(msg_id)} failed {reason}"))

    async def _finish_async(self, pending: Awaitable[bytes | None]) -> None:
        client = self.client
        assert client is not None
        try:
            result = await pending
            if result is not None:
                self._respond(encode_frame(FRAME_RESPONSE, result))
        except ProtocolError as err:
            self._send_error(err)
            if err.fatal:
                return
        except Exception:
            log.exception("PROTOCOL(V2): [%s] command failed", client)
            self._close()
            return
        finally:
            self._busy = False
            # nsqd's read deadline starts when it reads again, after the command
            self._last_read = time.monotonic()
        if not self._dead and self.transport is not None:
            self.transport.resume_reading()
            self._process()

    def _send_error(self, err: ProtocolError) -> None:
        client = self.client
        assert client is not None
        level = logging.ERROR if err.fatal else logging.INFO
        log.log(level, "PROTOCOL(V2): [%s] %s", client, err)
        if self._owed:  # after the answers owed before it; nothing is read meanwhile
            self._owed.add(encode_frame(FRAME_ERROR, err.wire_text))
            if err.fatal:
                self._owed.add(CLOSE_AFTER)
                self._held = None
                self._block()
            return
        client.write_frame(FRAME_ERROR, err.wire_text)
        if err.fatal:
            self._close()

    def _exec(self, cmd: Command) -> Response:
        if cmd.name == b"IDENTIFY":
            return self._identify(cmd)
        self._enforce_tls(cmd.name)
        handler = _HANDLERS.get(cmd.name)
        if handler is None:
            raise ProtocolError(E.E_INVALID, f"invalid command {raw(cmd.name)}")
        return handler(self, cmd)

    def _before_body(self, name: bytes) -> None:
        client = self.client
        assert client is not None
        if name in (b"IDENTIFY", b"AUTH") and client.state != ClientState.INIT:
            raise ProtocolError(E.E_INVALID, f"cannot {name.decode()} in current state")
        if name != b"IDENTIFY":
            self._enforce_tls(name)

    def _enforce_tls(self, name: bytes) -> None:
        client = self.client
        assert client is not None
        if self._tls_required and not client.tls:
            raise ProtocolError(E.E_INVALID, f"cannot {raw(name)} in current state (TLS required)")

    # -- IDENTIFY and AUTH ----------------------------------------------------
    def _identify(self, cmd: Command) -> Response:
        client = self.client
        assert client is not None and cmd.body is not None
        if client.state != ClientState.INIT:
            raise ProtocolError(E.E_INVALID, "cannot IDENTIFY in current state")
        request = IdentifyRequest.parse(cmd.body)
        limits = self.nsqd.identify_limits
        n = negotiate(request, limits)
        client.client_id, client.hostname, client.user_agent = n.client_id, n.hostname, n.user_agent
        client.heartbeat_interval = n.heartbeat_interval_ms / 1000
        client.output_buffer_size = n.output_buffer_size
        client.output_buffer_timeout = n.output_buffer_timeout_ms / 1000
        client.sample_rate = n.sample_rate
        client.msg_timeout = n.msg_timeout_ms / 1000
        client.feature_negotiation = n.feature_negotiation
        self._schedule_heartbeat()
        if not n.feature_negotiation:
            return OK
        client.write_frame(FRAME_RESPONSE, json.dumps(n.response(limits)).encode())
        if n.tls:
            return self._upgrade_tls(n)
        self._upgrade_compression(n.snappy, n.deflate, n.deflate_level)
        return None

    async def _upgrade_tls(self, n: Negotiated) -> None:
        """The IDENTIFY answer has left in plain text; the TLS handshake follows on the
        same socket and an OK over TLS confirms it. Compression, if negotiated too, is
        stacked on top and confirmed by its own OK."""
        client, context = self.client, self.nsqd.tls_context
        assert client is not None and self.transport is not None and context is not None
        client.flush()
        if self._heartbeat is not None:  # nothing may be written in plain text mid-handshake
            self._heartbeat.cancel()
            self._heartbeat = None
        log.info("PROTOCOL(V2): [%s] upgrading connection to TLS", client)
        try:
            transport = await asyncio.get_running_loop().start_tls(
                self.transport, self, context, server_side=True,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT)
        except (OSError, asyncio.TimeoutError) as e:
            # the failed handshake has closed the socket: no error frame can reach the client
            log.error("PROTOCOL(V2): [%s] E_IDENTIFY_FAILED IDENTIFY failed %s", client, e)
            client.closed = True
            if not self._dead:
                self.connection_lost(None)
            return
        if transport is None:
            raise ProtocolError(E.E_IDENTIFY_FAILED, "IDENTIFY failed TLS upgrade")
        transport.set_write_buffer_limits(high=4 * 1024 * 1024)
        self.transport = client.transport = transport  # type: ignore[assignment]
        client.tls = True
        self._schedule_heartbeat()
        client.write_frame(FRAME_RESPONSE, OK)
        self._upgrade_compression(n.snappy, n.deflate, n.deflate_level)

    def _upgrade_compression(self, snappy_on: bool, deflate_on: bool, level: int) -> None:
        """Switch both directions of the stream; confirm with an OK in the new encoding."""
        client = self.client
        assert client is not None
        if not (snappy_on or deflate_on):
            return
        client.flush()
        codec = SnappyCodec() if snappy_on else DeflateCodec(level)
        client.codec = codec
        client.snappy, client.deflate = snappy_on, deflate_on
        rest = self._decoder.take_unparsed()
        if rest:
            self._decoder.feed(codec.decode(rest))
        client.write_frame(FRAME_RESPONSE, OK)

    def _auth(self, cmd: Command) -> Response:
        client = self.client
        assert client is not None and cmd.body is not None
        if client.authed:
            raise ProtocolError(E.E_INVALID, "AUTH already set")
        if not self.nsqd.options.auth_enabled:
            raise ProtocolError(E.E_AUTH_DISABLED, "AUTH disabled")
        return self.nsqd.authenticate(client, cmd.body.decode("utf-8", "replace"))

    def _check_auth(self, command: str, topic: str, channel: str = "") -> Awaitable[None] | None:
        if not self._auth_enabled:
            return None
        client = self.client
        assert client is not None
        return self.nsqd.authorize(client, command, topic, channel)

    def _after_auth(self, command: str, topic: str, channel: str,
                    then: Callable[[], Response]) -> Response:
        pending = self._check_auth(command, topic, channel)
        if pending is None:
            return then()

        async def run() -> bytes | None:
            await pending
            result = then()
            if isinstance(result, (bytes, type(None))):
                return result
            return await result
        return run()

    # -- consuming ------------------------------------------------------------
    def _sub(self, cmd: Command) -> Response:
        client = self.client
        assert client is not None
        if client.state != ClientState.INIT:
            raise ProtocolError(E.E_INVALID, "cannot SUB in current state")
        if client.heartbeat_interval <= 0:
            raise ProtocolError(E.E_INVALID, "cannot SUB with heartbeats disabled")
        if self.nsqd.drain.draining:
            raise ProtocolError(E.E_INVALID, "cannot SUB while draining")
        topic_name, channel_name = check_sub_params(cmd.params)
        return self._after_auth("SUB", topic_name, channel_name,
                                lambda: self._subscribe(topic_name, channel_name))

    def _subscribe(self, topic_name: str, channel_name: str) -> bytes | None:
        client = self.client
        assert client is not None
        if self._dead:
            return None  # gone while AUTH was asked: a channel must not keep it
        channel = self.nsqd.get_topic(topic_name).get_channel(channel_name)
        limit = self.nsqd.options.max_channel_consumers
        if limit and len(channel.clients) >= limit:
            raise ProtocolError(E.E_SUB_FAILED,
                                f"SUB failed consumers for {topic_name}:{channel_name} exceeds limit of {limit}")
        channel.add_client(client)
        client.channel = channel
        client.state = ClientState.SUBSCRIBED
        return OK

    def _rdy(self, cmd: Command) -> Response:
        client = self.client
        assert client is not None
        if client.state == ClientState.CLOSING:
            return None  # RDY after CLS is ignored
        if client.state != ClientState.SUBSCRIBED:
            raise ProtocolError(E.E_INVALID, "cannot RDY in current state")
        count = 1
        if cmd.params:
            try:
                count = parse_base10(cmd.params[0])
            except ValueError:
                raise ProtocolError(E.E_INVALID, f"RDY could not parse count {raw(cmd.params[0])}") from None
        max_rdy = self.nsqd.options.max_rdy_count
        if count > max_rdy:
            raise ProtocolError(E.E_INVALID, f"RDY count {count} out of range 0-{max_rdy}")
        client.set_ready(count)
        self._pump_due = True
        return None

    def _in_flight_state(self, name: str, cmd: Command, needed: int) -> bytes:
        client = self.client
        assert client is not None
        if client.state not in (ClientState.SUBSCRIBED, ClientState.CLOSING):
            raise ProtocolError(E.E_INVALID, f"cannot {name} in current state")
        if len(cmd.params) < needed:
            raise ProtocolError(E.E_INVALID, f"{name} insufficient number of params")
        return parse_message_id(cmd.params[0])

    def _fin(self, cmd: Command) -> Response:
        msg_id = self._in_flight_state("FIN", cmd, 1)
        client = self.client
        assert client is not None and client.channel is not None
        try:
            client.channel.finish(client.id, msg_id)
        except ChannelError as e:
            raise ProtocolError(E.E_FIN_FAILED, f"FIN {_shown(msg_id)} failed {e}") from None
        client.finished_message()
        self._pump_due = True
        return None

    def _req(self, cmd: Command) -> Response:
        msg_id = self._in_flight_state("REQ", cmd, 2)
        client = self.client
        assert client is not None and client.channel is not None
        try:
            delay_ms = parse_base10(cmd.params[1])
        except ValueError:
            raise ProtocolError(E.E_INVALID, f"REQ could not parse timeout {raw(cmd.params[1])}") from None
        max_ms = int(self.nsqd.options.max_req_timeout * 1000)
        if delay_ms > max_ms:
            log.info("PROTOCOL(V2): [%s] REQ timeout %d out of range 0-%d. Setting to %d",
                     client, delay_ms, max_ms, max_ms)
            delay_ms = max_ms
        try:
            client.channel.requeue(client.id, msg_id, delay_ms / 1000)
        except ChannelError as e:
            raise ProtocolError(E.E_REQ_FAILED, f"REQ {_shown(msg_id)} failed {e}") from None
        client.requeued_message()
        self._pump_due = True
        return None

    def _touch(self, cmd: Command) -> Response:
        msg_id = self._in_flight_state("TOUCH", cmd, 1)
        client = self.client
        assert client is not None and client.channel is not None
        try:
            client.channel.touch(client.id, msg_id, client.msg_timeout)
        except ChannelError as e:
            raise ProtocolError(E.E_TOUCH_FAILED, f"TOUCH {_shown(msg_id)} failed {e}") from None
        return None

    def _cls(self, cmd: Command) -> Response:
        client = self.client
        assert client is not None
        if self._cls_received:
            raise ProtocolError(E.E_INVALID, "cannot CLS in current state")
        if client.state == ClientState.CLOSING:
            # a drain closed the consumer first: its own CLS is confirmed, and the
            # connection stays for the FINs of the messages it still holds
            self._cls_received = True
            return CLOSE_WAIT
        if client.state != ClientState.SUBSCRIBED:
            raise ProtocolError(E.E_INVALID, "cannot CLS in current state")
        self._cls_received = True
        client.state = ClientState.CLOSING
        client.ready_count = 0
        return CLOSE_WAIT

    def _nop(self, cmd: Command) -> Response:
        return None

    # -- publishing -----------------------------------------------------------
    def _publish(self, command: str, topic_name: str, bodies: Sequence[bytes], defer: float) -> Response:
        client = self.client
        assert client is not None
        nsqd = self.nsqd
        if nsqd.drain.refuses_publishes:
            raise ProtocolError(_failed(command), f"{command} failed: draining")
        topic = nsqd.get_topic(topic_name)
        if topic.exiting or nsqd.exiting:
            raise ProtocolError(_failed(command), f"{command} failed: exiting")
        try:
            replicated = nsqd.publish(topic, bodies, defer)
        except DiskQueueError as e:
            raise ProtocolError(_failed(command), f"{command} failed {e}") from None
        client.published(topic_name, len(bodies))
        synced = nsqd.durable_barrier()
        if replicated is None and synced is None:
            return OK
        if synced is None and isinstance(replicated, asyncio.Future) and not self._busy:
            self._owe(command, replicated, 1)  # the quorum's own future: no task per publish
            return None
        settling = (self._ok_once_synced(command, _failed(command), synced) if replicated is None
                    else self._ok_once_replicated(command, synced, replicated))
        if self._busy:  # run by an awaited handler (after AUTH), which awaits this itself
            return settling
        self._owe(command, asyncio.ensure_future(settling), 1)
        return None

    def _publish_run(self, topic_bytes: bytes, bodies: list[bytes]) -> None:
        """Consecutive PUBs to one topic: one batch when nothing can refuse any of them,
        else one at a time as if decoded one by one (every PUB error closes the
        connection, so the rest of the run is never wanted after one)."""
        client = self.client
        assert client is not None
        nsqd = self.nsqd
        topic_name = topic_bytes.decode("ascii")
        if not nsqd.drain.refuses_publishes and not nsqd.exiting:
            topic = nsqd.get_topic(topic_name)
            if topic.replicated and not topic.exiting:
                self._publish_replicated_run(topic, bodies)
                return
            if not topic.exiting and topic.put_in_memory(nsqd.new_payloads(bodies)):
                count = len(bodies)
                client.published(topic_name, count)
                self._respond(_OK_FRAME * count if count > 1 else _OK_FRAME)
                return
        for body in bodies:
            try:
                result = self._publish("PUB", topic_name, (body,), 0.0)
            except ProtocolError as err:
                self._send_error(err)
                return
            if result is not None:  # None: owed until its replicas hold it
                self._respond(encode_frame(FRAME_RESPONSE, result))

    def _publish_lone(self, client: ClientConn, data: bytes) -> bool:
        """A read that is exactly one whole PUB or MPUB to a topic already checked on this
        stream, as a publisher waiting for each OK sends it (Go's ``bench_writer``, a
        synchronous producer): published and answered without the command loop. False,
        with nothing done, for anything else (a read holding less or more, a first
        publish to the topic, a body the checks would refuse, compression, TLS still to
        come, a replicated or new topic, answers still owed to earlier publishes, which
        this one's must follow), which the general path decodes as usual."""
        decoder = self._decoder
        if (client.codec is not None or self._busy or self._blocked or self._owed or self._held is not None
                or self._dead or not decoder.at_boundary() or (self._tls_required and not client.tls)):
            return False
        mpub = data[0] == 0x4D  # M
        at = 5 if mpub else 4
        nl = data.find(b"\n", at, at + MAX_NAME_LENGTH + 1)
        if nl < 0 or nl + 5 > len(data):
            return False
        name = data[at:nl]
        if not decoder.knows_topic(name):
            return False
        topic_name = name.decode("ascii")
        topic = self.nsqd.topics.get(topic_name)
        if topic is None or topic.replicated:  # before parsing the body: a replicated PUB would parse it twice
            return False
        (size,) = _SIZE.unpack_from(data, nl + 1)
        if nl + 5 + size != len(data):
            return False
        limits = decoder.limits
        bodies: Sequence[bytes]
        if mpub:
            if not 0 < size <= limits.max_body_size:
                return False
            if size > 8 and _ONE_MESSAGE.unpack_from(data, nl + 5) == (1, size - 8) and size - 8 <= limits.max_msg_size:
                bodies = (data[nl + 13:],)  # an MPUB of one message (bench_writer -batch-size=1)
            else:
                try:
                    bodies = parse_mpub_body(data[nl + 5:], limits.max_msg_size, limits.max_body_size)
                except ProtocolError:
                    return False  # the general path refuses it, with its error
        else:
            if not 0 < size <= limits.max_msg_size:
                return False
            bodies = (data[nl + 5:],)
        client.hold_flush()  # the answer leaves in one write when this is done
        try:
            result = self._publish("MPUB" if mpub else "PUB", topic_name, bodies, 0.0)
            assert result is OK  # not durable (_pub_runs), not replicated: nothing to wait for
            client.write(_OK_FRAME)
        except ProtocolError as err:
            self._send_error(err)
        finally:
            client.release_flush()
        return True

    def _publish_replicated_run(self, topic: "Topic", bodies: list[bytes]) -> None:
        """Consecutive PUBs to a replicated topic: copied as one batch, each answered OK
        once a quorum holds the batch; the connection reads on after that."""
        client = self.client
        assert client is not None
        try:
            replicated = self.nsqd.publish(topic, bodies)
        except DiskQueueError as e:
            self._send_error(ProtocolError(E.E_PUB_FAILED, f"PUB failed {e}"))
            return
        assert isinstance(replicated, asyncio.Future)
        client.published(topic.name, len(bodies))
        self._owe("PUB", replicated, len(bodies))

    async def _ok_once_synced(self, command: str, code: str, synced: Awaitable[None]) -> bytes:
        """Durable mode: OK only once the messages are fsynced (the next group commit)."""
        try:
            await synced
        except SyncError as e:
            raise ProtocolError(code, f"{command} failed {e}") from None
        return OK

    async def _ok_once_replicated(self, command: str, synced: Awaitable[None] | None,
                                  replicated: Awaitable[None]) -> bytes:
        """A replicated topic: OK once a quorum of replicas holds the messages (this
        node's copy fsynced first in durable mode)."""
        try:
            if synced is not None:
                await synced
            await replicated
        except (SyncError, ReplicationError) as e:
            raise ProtocolError(_failed(command), f"{command} failed {e}") from None
        return OK

    def _pub(self, cmd: Command) -> Response:
        assert cmd.body is not None
        body, topic = cmd.body, cmd.topic
        if not self._auth_enabled:
            return self._publish("PUB", topic, (body,), 0.0)
        return self._after_auth("PUB", topic, "", lambda: self._publish("PUB", topic, (body,), 0.0))

    def _mpub(self, cmd: Command) -> Response:
        bodies, topic = cmd.bodies, cmd.topic
        if not self._auth_enabled:
            return self._publish("MPUB", topic, bodies, 0.0)
        return self._after_auth("MPUB", topic, "", lambda: self._publish("MPUB", topic, bodies, 0.0))

    def _dpub(self, cmd: Command) -> Response:
        assert cmd.body is not None
        body, topic, defer = cmd.body, cmd.topic, cmd.defer_ms / 1000
        return self._after_auth("DPUB", topic, "", lambda: self._publish("DPUB", topic, (body,), defer))


_OK_FRAME = encode_frame(FRAME_RESPONSE, OK)
_LONE_PUBLISHES = (b"MPUB ", b"PUB ")
_SIZE = struct.Struct(">i")
_ONE_MESSAGE = struct.Struct(">ii")  # an MPUB body's count and first size

# the handlers are the class's functions, not each connection's bound methods: a dict of
# those would be one more per connection and a cycle through it
_HANDLERS: dict[bytes, Callable[[V2Protocol, Command], Response]] = {
    b"FIN": V2Protocol._fin, b"RDY": V2Protocol._rdy, b"REQ": V2Protocol._req, b"PUB": V2Protocol._pub,
    b"MPUB": V2Protocol._mpub, b"DPUB": V2Protocol._dpub, b"NOP": V2Protocol._nop,
    b"TOUCH": V2Protocol._touch, b"SUB": V2Protocol._sub, b"CLS": V2Protocol._cls, b"AUTH": V2Protocol._auth,
}


def _shown(msg_id: bytes) -> str:
    """A message ID from the client, for an error text: it is only known to be 16 bytes."""
    return msg_id.decode("utf-8", "replace")


def _failed(command: str) -> str:
    """PUB -> E_PUB_FAILED, and so on."""
    return getattr(E, f"E_{command}_FAILED")
