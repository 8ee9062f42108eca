"""nsqd's side of the conversation with nsqlookupds (protocol V1 over TCP, plus one HTTP call).

One task per lookupd address keeps a connection: magic, IDENTIFY (lookupd's answer gives
its HTTP address), REGISTER of everything nsqd has right then, then the register/unregister
commands queued since, in order, and a PING every ``ping_interval``. Any failure closes
the connection and a new one is made after a capped exponential backoff; since lookupd
drops a peer's registrations with its connection, every connection starts by
registering everything again. That is also why commands for a peer that is down are
dropped: the next connection's full registration covers them.
"""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Callable

from nsq_protocol.errors import ProtocolError
from nsq_protocol.host_port import split_host_port
from nsq_protocol.lookup_v1 import (
    MAGIC_V1,
    V1ResponseDecoder,
    identify,
    is_error_response,
    ping,
    register,
    unregister,
)

from .http_client import HttpClient, HttpClientError

RECONNECT_FIRST_DELAY = 0.5
RECONNECT_MAX_DELAY = 15.0
CONNECT_TIMEOUT = 5.0
ANSWER_TIMEOUT = 10.0
NSQ_ACCEPT = "application/vnd.nsq; version=1.0"


class LookupdPeers:
    """nsqd's connections to every configured lookupd."""

    def __init__(self, *, identity: dict, registrations: Callable[[], list[tuple[str, str | None]]],
                 addresses: list[str], ping_interval: float = 15.0,
                 http_timeout: float = 5.0, logger: logging.Logger | None = None) -> None:
        self.identity = dict(identity)
        self.registrations = registrations
        self.ping_interval = ping_interval
        self.http_timeout = http_timeout
        self.log = logger or logging.getLogger("nsqd.lookup")
        self._addresses = _unique(addresses)
        self._peers: dict[str, _Peer] = {}
        self._started = False
        self._withdrawn = False  # draining: nothing is registered any more
        self._http: HttpClient | None = None

    async def start(self) -> None:
        self._started = True
        for address in self._addresses:
            self._add_peer(address)

    async def close(self) -> None:
        self._started = False
        peers, self._peers = list(self._peers.values()), {}
        for peer in peers:
            peer.cancel()
        await asyncio.gather(*(peer.wait_stopped() for peer in peers), return_exceptions=True)
        if self._http is not None:
            await self._http.close()
            self._http = None

    def set_addresses(self, addresses: list[str]) -> None:
        """Connect to the new addresses, disconnect from the ones no longer listed."""
        self._addresses = _unique(addresses)
        if not self._started:
            return
        for address in list(self._peers):
            if address not in self._addresses:
                self.log.info("LOOKUP(%s): removing peer", address)
                self._peers.pop(address).cancel()
        for address in self._addresses:
            if address not in self._peers:
                self._add_peer(address)

    def register(self, topic: str, channel: str | None = None) -> None:
        if not self._withdrawn:
            self._broadcast(register(topic, channel))

    def withdraw(self, registrations: list[tuple[str, str | None]]) -> None:
        """Unregister all of ``registrations`` from every lookupd and register nothing
        from now on (the ``registrations`` callback must also return nothing)."""
        self._withdrawn = True
        for topic, channel in registrations:
            self.unregister(topic, channel)

    def unregister(self, topic: str, channel: str | None = None) -> None:
        self._broadcast(unregister(topic, channel))

    def http_addresses(self) -> list[str]:
        """``host:port`` of each lookupd's HTTP API, as its IDENTIFY answer gave it."""
        return [peer.http_address for peer in self._peers.values() if peer.http_address]

    async def channels_for_topic(self, topic: str) -> list[str]:
        """Every channel any lookupd knows for ``topic``; lookupds that fail are skipped."""
        addresses = self.http_addresses()
        if not addresses:
            return []
        results = await asyncio.gather(*(self._fetch_channels(a, topic) for a in addresses))
        return sorted({name for names in results for name in names})

    # -- internals -----------------------------------------------------------
    def _add_peer(self, address: str) -> None:
        self.log.info("LOOKUP(%s): adding peer", address)
        self._peers[address] = _Peer(address, self)

    def _broadcast(self, command: bytes) -> None:
        for peer in self._peers.values():
            peer.send_later(command)

    async def _fetch_channels(self, address: str, topic: str) -> list[str]:
        if self._http is None:
            self._http = HttpClient(connect_timeout=self.http_timeout, request_timeout=self.http_timeout)
        url = f"http://{address}/channels"
        try:
            answer = await self._http.request("GET", url, params={"topic": topic}, headers={"Accept": NSQ_ACCEPT})
            if answer.status != 200:
                self.log.warning("LOOKUPD(%s): GET %s?topic=%s answered %d", address, url, topic, answer.status)
                return []
            channels = answer.json()["channels"]
            return [name for name in channels if isinstance(name, str)]
        except (HttpClientError, ValueError, KeyError, TypeError) as e:
            self.log.warning("LOOKUPD(%s): GET %s failed - %s", address, url, e or type(e).__name__)
            return []


class _Peer:
    """One lookupd: the task that keeps its connection, and the commands waiting for it."""

    def __init__(self, address: str, owner: LookupdPeers) -> None:
        self.address = address
        self.owner = owner
        self.log = owner.log
        self.http_address: str | None = None  # kept across reconnections
        self._outbox: asyncio.Queue[bytes] | None = None  # exists while registered
        self._identified = False  # the current connection got past IDENTIFY
        self._task = asyncio.get_running_loop().create_task(self._run())

    def send_later(self, command: bytes) -> None:
        if self._outbox is not None:
            self._outbox.put_nowait(command)

    def cancel(self) -> None:
        self._task.cancel()

    async def wait_stopped(self) -> None:
        await asyncio.wait([self._task])  # the caller's own cancellation still reaches it

    async def _run(self) -> None:
        delay = RECONNECT_FIRST_DELAY
        while True:
            self._identified = False
            try:
                await self._session()
            except (OSError, EOFError, asyncio.TimeoutError, ValueError, ProtocolError, LookupdRefused) as e:
                self.log.error("LOOKUPD(%s): %s", self.address, e or type(e).__name__)
            except Exception:  # a bug must not end this lookupd's connection for good
                self.log.exception("LOOKUPD(%s): unexpected error", self.address)
            finally:
                self._outbox = None
            if self._identified:
                delay = RECONNECT_FIRST_DELAY
            self.log.info("LOOKUPD(%s): reconnecting in %.1fs", self.address, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_DELAY)

    async def _session(self) -> None:
        """One connection, from connecting until it fails (it never ends otherwise)."""
        host, port = split_host_port(self.address)
        self.log.info("LOOKUPD(%s): connecting", self.address)
        async with asyncio.timeout(CONNECT_TIMEOUT):
            reader, writer = await asyncio.open_connection(host, port)
        conn = _Connection(reader, writer)
        try:
            self.http_address = await self._identify(conn)
            self._identified = True
            self._outbox = outbox = asyncio.Queue()
            # taken right after the outbox exists: anything that changes later is queued
            everything = [register(topic, channel) for topic, channel in self.owner.registrations()]
            await self._send_all(conn, everything)
            await self._serve(conn, outbox)
        finally:
            await conn.close()

    async def _identify(self, conn: "_Connection") -> str:
        answer = await conn.call(MAGIC_V1 + identify(self.owner.identity))
        if is_error_response(answer):
            raise LookupdRefused(f"IDENTIFY refused: {answer.decode('utf-8', 'replace')}")
        try:
            info = json.loads(answer)
            address = _join_host_port(str(info["broadcast_address"]), int(info["http_port"]))
        except (ValueError, KeyError, TypeError):
            raise LookupdRefused(f"IDENTIFY answer is not lookupd's info: {answer[:200]!r}") from None
        if not info["broadcast_address"]:
            raise LookupdRefused("IDENTIFY answer has no broadcast_address")
        self.log.info("LOOKUPD(%s): peer info %s", self.address, info)
        return address

    async def _serve(self, conn: "_Connection", outbox: asyncio.Queue[bytes]) -> None:
        loop = asyncio.get_running_loop()
        next_ping = loop.time() + self.owner.ping_interval
        while True:
            wait = next_ping - loop.time()
            if wait <= 0:
                await self._send_all(conn, [ping()])
                next_ping = loop.time() + self.owner.ping_interval
                continue
            command = await conn.wait_for_item(outbox, wait)
            if command is None:
                continue
            batch = [command]
            while not outbox.empty():
                batch.append(outbox.get_nowait())
            await self._send_all(conn, batch)

    async def _send_all(self, conn: "_Connection", commands: list[bytes]) -> None:
        if not commands:
            return
        for command, answer in zip(commands, await conn.call_many(commands)):
            if is_error_response(answer):
                self.log.error("LOOKUPD(%s): %s answered %s", self.address,
                               command.strip().decode("utf-8", "replace"), answer.decode("utf-8", "replace"))
            else:
                self.log.debug("LOOKUPD(%s): %s answered %s", self.address,
                               command.strip().decode("utf-8", "replace"), answer.decode("utf-8", "replace"))


class LookupdRefused(Exception):
    """The lookupd answered IDENTIFY with an error or with something unreadable."""


class _Connection:
    """A V1 connection: commands out, answers in, and noticing when lookupd hangs up
    even while nothing is being asked."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self._answers: asyncio.Queue[bytes] = asyncio.Queue()
        self._reading = asyncio.get_running_loop().create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        decoder = V1ResponseDecoder()
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                raise EOFError("lookupd closed the connection")
            decoder.feed(chunk)
            for answer in decoder:
                self._answers.put_nowait(answer)

    async def call(self, command: bytes) -> bytes:
        return (await self.call_many([command]))[0]

    async def call_many(self, commands: list[bytes]) -> list[bytes]:
        self.writer.write(b"".join(commands))
        await self.writer.drain()
        answers = []
        for _ in commands:
            answer = await self.wait_for_item(self._answers, ANSWER_TIMEOUT)
            if answer is None:
                raise asyncio.TimeoutError(f"no answer within {ANSWER_TIMEOUT:.0f}s")
            answers.append(answer)
        return answers

    async def wait_for_item(self, queue: asyncio.Queue[bytes], timeout: float) -> bytes | None:
        """The next item of ``queue``, or None after ``timeout``; raises as soon as the
        connection fails."""
        if not queue.empty():
            return queue.get_nowait()
        getter = asyncio.ensure_future(queue.get())
        try:
            done, _ = await asyncio.wait({getter, self._reading}, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():
                getter.cancel()
        if getter in done:
            return getter.result()
        if self._reading.done():
            self._reading.result()  # raises what ended the reading
            raise EOFError("lookupd closed the connection")
        return None

    async def close(self) -> None:
        self._reading.cancel()
        self.writer.close()
        try:
            async with asyncio.timeout(1.0):
                await self.writer.wait_closed()
        except (OSError, asyncio.TimeoutError):
            pass
        try:
            await self._reading
        except (asyncio.CancelledError, OSError, EOFError, ProtocolError):
            pass


def _join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _unique(addresses: list[str]) -> list[str]:
    return list(dict.fromkeys(a for a in addresses if a))
