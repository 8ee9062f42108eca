"""One client connection's state: what it negotiated, its RDY and in-flight counts, and
its output buffer.

Frames collect in one bytearray and leave in one socket write when it reaches
--output-buffer-size, when the work that wrote them is done (the end of a received batch
of commands or of a channel's pump), or at the latest on the next loop turn, which is
sooner than --output-buffer-timeout ever asks."""
from __future__ import annotations

import asyncio
import time
from enum import IntEnum
from typing import TYPE_CHECKING

from nsq_protocol.compression import StreamCodec
from nsq_protocol.frames import FRAME_HEADER, FRAME_MESSAGE
from nsq_protocol.host_port import join_host_port

from .message import ATTEMPTS, MAX_ATTEMPTS, Payload, payload_attempts

if TYPE_CHECKING:
    from .auth import AuthState
    from .channel import Channel
    from .message import Message


_ATTEMPTS_IN_FRAME = FRAME_HEADER.size + 8  # after the frame header and the timestamp
_ONLY_BYTES = {bytes}
_MESSAGE_HEADERS: dict[int, bytes] = {}  # a message frame's header by its payload's size


def _message_header(payload_size: int) -> bytes:
    header = FRAME_HEADER.pack(payload_size + 4, FRAME_MESSAGE)
    if len(_MESSAGE_HEADERS) < 256:  # sizes vary without bound: keep the first ones seen
        _MESSAGE_HEADERS[payload_size] = header
    return header


class ClientState(IntEnum):
    INIT = 0
    DISCONNECTED = 1
    CONNECTED = 2
    SUBSCRIBED = 3
    CLOSING = 4


class ClientConn:
    # the lone-delivery path reads a dozen of these per message on a connection whose
    # object is cold in the cache; slots keep them in the object itself
    __slots__ = ("in_flight_count", "ready_count", "finish_count", "message_count", "channel", "codec",
                 "state", "write_paused", "sample_rate", "closed", "msg_timeout", "_out", "_holds",
                 "transport", "id", "_flush_handle", "output_buffer_size", "output_buffer_timeout",
                 "heartbeat_interval", "requeue_count", "pub_counts", "remote_host", "remote_address",
                 "client_id", "hostname", "user_agent", "connect_ts", "deflate", "snappy", "tls",
                 "feature_negotiation", "auth_secret", "auth_state", "auth_identity", "auth_identity_url",
                 "authed", "__weakref__")

    def __init__(self, client_id: int, transport: asyncio.Transport, *, msg_timeout: float,
                 heartbeat_interval: float, output_buffer_size: int,
                 output_buffer_timeout: float) -> None:
        self.id = client_id
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.remote_host = str(peer[0]) if isinstance(peer, tuple) else ""
        self.remote_address = join_host_port(self.remote_host, peer[1]) if isinstance(peer, tuple) else str(peer or "")
        self.client_id = self.remote_host
        self.hostname = self.remote_host
        self.user_agent = ""
        self.connect_ts = int(time.time())

        self.state = ClientState.INIT
        self.channel: Channel | None = None
        self.msg_timeout = msg_timeout
        self.heartbeat_interval = heartbeat_interval
        self.output_buffer_size = output_buffer_size
        self.output_buffer_timeout = output_buffer_timeout
        self.sample_rate = 0
        self.deflate = False
        self.snappy = False
        self.tls = False
        self.feature_negotiation = False

        self.ready_count = 0
        self.in_flight_count = 0
        self.message_count = 0
        self.finish_count = 0
        self.requeue_count = 0
        self.pub_counts: dict[str, int] = {}

        self.auth_secret = ""
        self.auth_state: AuthState | None = None
        self.auth_identity = ""
        self.auth_identity_url = ""
        self.authed = False

        self.codec: StreamCodec | None = None
        self.write_paused = False
        self.closed = False
        self._out = bytearray()
        self._flush_handle: asyncio.Handle | None = None
        self._holds = 0  # callers that flush when they are done writing

    # -- output ---------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self.closed:
            return
        out = self._out
        out += data
        if len(out) >= self.output_buffer_size:
            self.flush()
        elif self._flush_handle is None and not self._holds:
            self._flush_handle = asyncio.get_running_loop().call_soon(self.flush)

    def hold_flush(self) -> None:
        """The caller writes a batch and calls ``release_flush`` after it: no flush is
        scheduled for a later loop turn in between (it would cost the loop an extra turn)."""
        self._holds += 1

    def release_flush(self) -> None:
        self._holds -= 1
        if not self._holds:
            self.flush()

    def write_frame(self, frame_type: int, data: bytes) -> None:
        self.write(FRAME_HEADER.pack(len(data) + 4, frame_type) + data)

    def flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if not self._out or self.closed:
            return
        # the transport may keep the buffer until the socket takes it: hand it over whole
        data: bytes | bytearray = self._out
        self._out = bytearray()
        if self.codec is not None:
            data = self.codec.encode(bytes(data))
        self.transport.write(data)

    def send_messages(self, items: "list[Payload | Message]") -> None:
        """Message frames: a ``Message`` with the attempts of this delivery, a fresh message
        (its bare payload, as queued) with the attempts it holds plus one."""
        self.in_flight_count += len(items)
        self.message_count += len(items)
        if self.closed or not items:
            return
        if len(items) == 1 or not self._frames_of_equal_fresh(items):  # one: framing it directly is cheaper
            self._frames_one_by_one(items)
        if len(self._out) >= self.output_buffer_size:
            self.flush()
        elif self._out and self._flush_handle is None and not self._holds:
            self._flush_handle = asyncio.get_running_loop().call_soon(self.flush)

    def send_lone(self, payload: Payload) -> None:
        """``send_messages`` of one fresh message, written at once: a consumer with RDY 1
        that just finished its previous one gets its next in the same loop pass."""
        self.in_flight_count += 1
        self.message_count += 1
        if self.closed:
            return
        header = _MESSAGE_HEADERS.get(len(payload))
        if header is None:
            header = _message_header(len(payload))
        frame = bytearray(header + payload)  # one copy: a bytearray grown by += copies twice
        if payload[8] or payload[9]:  # delivered before (read back with its attempts)
            ATTEMPTS.pack_into(frame, _ATTEMPTS_IN_FRAME, min(payload_attempts(payload) + 1, MAX_ATTEMPTS))
        else:  # never delivered: attempts 0 becomes 1, its low byte set without a pack
            frame[_ATTEMPTS_IN_FRAME + 1] = 1
        if self._out or self._holds or self.codec is not None:
            self._out += frame
            if not self._holds:
                self.flush()
        else:
            self.transport.write(frame)

    def _frames_of_equal_fresh(self, items: "list[Payload | Message]") -> bool:
        """The usual delivery, fresh messages of one size never delivered before, framed
        without a Python step per message: the frames are the payloads joined by their
        common header, and every attempts field (all 0) becomes 1 through one strided
        write. False, with nothing written, for any other delivery."""
        if set(map(type, items)) != _ONLY_BYTES:
            return False
        sizes = set(map(len, items))  # type: ignore[arg-type]
        if len(sizes) != 1:
            return False
        size = sizes.pop()
        count = len(items)
        out = self._out
        base = len(out)
        stride = size + FRAME_HEADER.size
        header = FRAME_HEADER.pack(size + 4, FRAME_MESSAGE)
        out += header
        out += header.join(items)  # type: ignore[arg-type]
        high = base + _ATTEMPTS_IN_FRAME
        if out[high::stride].count(0) == count and out[high + 1::stride].count(0) == count:
            out[high + 1::stride] = b"\x01" * count
            return True
        del out[base:]  # some were delivered before: frame them one by one
        return False

    def _frames_one_by_one(self, items: "list[Payload | Message]") -> None:
        out, limit = self._out, self.output_buffer_size
        header, attempts_into = FRAME_HEADER.pack, ATTEMPTS.pack_into
        for item in items:
            start = len(out)
            if item.__class__ is bytes:
                out += header(len(item) + 4, FRAME_MESSAGE)  # type: ignore[arg-type]
                out += item  # type: ignore[operator]
                attempts_into(out, start + _ATTEMPTS_IN_FRAME, min(payload_attempts(item) + 1, MAX_ATTEMPTS))  # type: ignore[arg-type]
            else:
                payload = item.payload  # type: ignore[union-attr]
                out += header(len(payload) + 4, FRAME_MESSAGE)
                out += payload
                attempts_into(out, start + _ATTEMPTS_IN_FRAME, item.attempts)  # type: ignore[union-attr]
            if len(out) >= limit:
                self.flush()
                out = self._out

    def spare_ready(self) -> int:
        """How many more messages this client may be sent now."""
        if self.state != ClientState.SUBSCRIBED or self.write_paused:
            return 0
        return self.ready_count - self.in_flight_count

    # -- flow control ---------------------------------------------------------
    # Whatever can give the client room (RDY, a message settled, writes resumed) tells
    # its channel, which keeps the clients with room in a queue instead of looking at
    # every consumer for every message.
    def has_lone_room(self) -> bool:
        """Subscribed, writable, and room for exactly one more message (RDY 1)."""
        return (self.ready_count - self.in_flight_count == 1 and self.state == ClientState.SUBSCRIBED
                and not self.write_paused)

    def _room_may_have_grown(self) -> None:
        channel = self.channel
        if channel is not None and self.spare_ready() > 0:
            channel.client_has_room(self)

    def set_ready(self, count: int) -> None:
        self.ready_count = count
        self._room_may_have_grown()

    def resume_writes(self) -> None:
        self.write_paused = False
        self._room_may_have_grown()

    def finished_message(self) -> None:
        self.finished_messages(1)

    def finished_messages(self, count: int) -> None:
        self.finish_count += count
        self.in_flight_count = max(0, self.in_flight_count - count)
        self._room_may_have_grown()

    def finished_lone(self) -> None:
        """``finished_message`` without telling the channel: its caller decides what the
        room is used for (``Channel.finish_lone``)."""
        self.finish_count += 1
        self.in_flight_count = max(0, self.in_flight_count - 1)

    def room_may_have_grown(self) -> None:
        self._room_may_have_grown()

    def requeued_message(self) -> None:
        self.requeue_count += 1
        self.in_flight_count = max(0, self.in_flight_count - 1)
        self._room_may_have_grown()

    def timed_out_message(self) -> None:
        self.in_flight_count = max(0, self.in_flight_count - 1)
        self._room_may_have_grown()

    def empty_in_flight(self) -> None:
        self.in_flight_count = 0
        self._room_may_have_grown()

    def published(self, topic: str, count: int) -> None:
        self.pub_counts[topic] = self.pub_counts.get(topic, 0) + count

    def close(self) -> None:
        """Flush what is buffered and close the connection."""
        if self.closed:
            return
        self.flush()
        self.closed = True
        self.transport.close()

    # -- stats ----------------------------------------------------------------
    def stats(self, topic_filter: str = "") -> dict:
        """/stats' entry for this client, with Go's keys: ``authed``, the auth identity
        and ``pub_counts`` are left out when empty, as Go's JSON leaves them out."""
        tls_info = self.transport.get_extra_info("ssl_object")
        stats: dict = {
            "client_id": self.client_id,
            "hostname": self.hostname,
            "version": "V2",
            "remote_address": self.remote_address,
            "state": int(self.state),
            "ready_count": self.ready_count,
            "in_flight_count": self.in_flight_count,
            "message_count": self.message_count,
            "finish_count": self.finish_count,
            "requeue_count": self.requeue_count,
            "connect_ts": self.connect_ts,
            "sample_rate": self.sample_rate,
            "deflate": self.deflate,
            "snappy": self.snappy,
            "user_agent": self.user_agent,
        }
        if self.authed:
            stats["authed"] = True
        if self.auth_identity:
            stats["auth_identity"] = self.auth_identity
        if self.auth_identity_url:
            stats["auth_identity_url"] = self.auth_identity_url
        pub_counts = [{"topic": t, "count": c} for t, c in sorted(self.pub_counts.items())
                      if not topic_filter or t == topic_filter]
        if pub_counts:
            stats["pub_counts"] = pub_counts
        stats.update({
            "tls": self.tls,
            "tls_cipher_suite": tls_info.cipher()[0] if tls_info else "",
            # Go names the versions TLS1.2, TLS1.3; Python's ssl TLSv1.2, TLSv1.3
            "tls_version": tls_info.version().replace("TLSv", "TLS") if tls_info else "",
            "tls_negotiated_protocol": (tls_info.selected_alpn_protocol() or "") if tls_info else "",
            "tls_negotiated_protocol_is_mutual": self.tls,  # Go's is always true under TLS
        })
        return stats

    def __repr__(self) -> str:
        return f"{self.remote_address}({self.client_id})"
