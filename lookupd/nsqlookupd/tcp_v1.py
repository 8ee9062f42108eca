"""One nsqd peer's TCP connection, speaking lookupd's protocol V1.

Every command is answered in order; every error is answered with its ``E_*`` text and
closes the connection, as Go's lookupd does. When the connection closes, the peer's
registrations go with it.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Callable, cast

from nsq_protocol.errors import E_BAD_PROTOCOL, E_INVALID, ProtocolError
from nsq_protocol.lookup_v1 import (
    IDENTIFY,
    OK,
    PING,
    REGISTER,
    V1Command,
    V1CommandDecoder,
    decode_peer_identity,
    encode_response,
    parse_topic_channel,
)

from .listen import format_address
from .registry import PeerInfo, Registry


@dataclass(frozen=True, slots=True)
class LookupdIdentity:
    """What lookupd answers to IDENTIFY."""

    tcp_port: int
    http_port: int
    broadcast_address: str
    hostname: str
    version: str

    def to_json(self) -> bytes:
        return json.dumps({
            "broadcast_address": self.broadcast_address,
            "hostname": self.hostname,
            "http_port": self.http_port,
            "tcp_port": self.tcp_port,
            "version": self.version,
        }, separators=(",", ":")).encode()


class V1Connection(asyncio.Protocol):
    """Feeds a peer's bytes to the V1 decoder and applies its commands to the registry.

    Everything a command does is synchronous, so answers are written in order from
    ``data_received``; reading pauses while the peer does not read its answers.
    """

    def __init__(self, registry: Registry, identity: Callable[[], LookupdIdentity],
                 logger: logging.Logger, on_close: Callable[["V1Connection"], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = registry
        self.identity = identity
        self.log = logger
        self.on_close = on_close
        self.clock = clock
        self.remote = "?"
        self.peer_id: str | None = None
        self.transport: asyncio.Transport | None = None
        self.decoder = V1CommandDecoder(before_body=self._refuse_second_identify)

    # -- asyncio.Protocol ----------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self.remote = format_address(transport.get_extra_info("peername"))
        self.log.info("TCP: new client(%s)", self.remote)

    def data_received(self, data: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.decoder.feed(data)
        try:
            for cmd in self.decoder:
                self._write(self._execute(cmd))
        except ProtocolError as e:
            if e.code == E_BAD_PROTOCOL:
                self.log.error("client(%s) bad protocol magic %r", self.remote, self.decoder.magic)
            else:
                self.log.error("CLIENT(%s): %s", self.remote, e)
            self._write(e.wire_text)
            self.transport.close()

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.log.info("CLIENT(%s): closing", self.remote)
        if self.peer_id is not None:
            for topic, channel in self.registry.remove_peer(self.peer_id):
                self.log.info("DB: client(%s) UNREGISTER topic:%s channel:%s", self.remote, topic, channel or "")
        self.transport = None
        self.on_close(self)

    def pause_writing(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # -- commands ------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(encode_response(data))

    def _refuse_second_identify(self, cmd: V1Command) -> None:
        if self.peer_id is not None:
            raise ProtocolError(E_INVALID, "cannot IDENTIFY again")

    def _execute(self, cmd: V1Command) -> bytes:
        now = self.clock()
        if cmd.name == PING:
            if self.peer_id is not None:
                self.registry.touch_peer(self.peer_id, now)
            return OK
        if cmd.name == IDENTIFY:
            return self._identify(cmd, now)
        if self.peer_id is None:
            raise ProtocolError(E_INVALID, "client must IDENTIFY")
        topic, channel = parse_topic_channel(cmd)
        self.registry.touch_peer(self.peer_id, now)
        if cmd.name == REGISTER:
            changes = self.registry.register(self.peer_id, topic, channel)
            verb = "REGISTER"
        else:
            changes = self.registry.unregister(self.peer_id, topic, channel)
            verb = "UNREGISTER"
        for t, c in changes:
            self.log.info("DB: client(%s) %s topic:%s channel:%s", self.remote, verb, t, c or "")
        return OK

    def _identify(self, cmd: V1Command, now: float) -> bytes:
        assert cmd.body is not None
        peer = decode_peer_identity(cmd.body)
        peer_id = self.remote
        while self.registry.has_peer(peer_id):  # a stale connection from the same address
            peer_id += "'"
        self.registry.add_peer(PeerInfo(
            id=peer_id, remote_address=self.remote, hostname=peer.hostname,
            broadcast_address=peer.broadcast_address, tcp_port=peer.tcp_port,
            http_port=peer.http_port, version=peer.version), now)
        self.peer_id = peer_id
        self.log.info("CLIENT(%s): IDENTIFY address:%s TCP:%d HTTP:%d version:%s", self.remote,
                      peer.broadcast_address, peer.tcp_port, peer.http_port, peer.version)
        return self.identity().to_json()

