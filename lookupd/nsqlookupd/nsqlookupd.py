"""nsqlookupd: the registry behind a V1 TCP listener and an HTTP listener."""
from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Callable

from aiohttp import web

from . import __version__
from .http_api import LookupdHttpApi
from .listen import bind_listener, bound_port, format_address
from .options import NsqlookupdOptions
from .registry import Registry
from .tcp_v1 import LookupdIdentity, V1Connection

HTTP_SHUTDOWN_TIMEOUT = 1.0  # seconds given to in-flight HTTP requests at stop


class NSQLookupd:
    """``await start()`` binds both listeners (their real ports are then ``tcp_port`` and
    ``http_port``); ``await stop()`` closes them and every connection."""

    def __init__(self, options: NsqlookupdOptions, logger: logging.Logger | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self.log = logger or logging.getLogger("nsqlookupd")
        self.clock = clock
        self.registry = Registry(inactive_producer_timeout=options.inactive_producer_timeout,
                                 tombstone_lifetime=options.tombstone_lifetime)
        self.hostname = socket.gethostname()
        self._connections: set[V1Connection] = set()
        self._tcp_server: asyncio.AbstractServer | None = None
        self._http_runner: web.AppRunner | None = None
        self.tcp_port = self.http_port = 0  # the real ports, once started
        self.tcp_address = self.http_address = ""

    def identity(self) -> LookupdIdentity:
        return LookupdIdentity(tcp_port=self.tcp_port, http_port=self.http_port,
                               broadcast_address=self.options.broadcast_address,
                               hostname=self.hostname, version=__version__)

    async def start(self) -> None:
        """Raises OSError naming the address when a listener cannot be bound."""
        tcp_sock = _listen(self.options.tcp_address)
        try:
            http_sock = _listen(self.options.http_address)
        except OSError:
            tcp_sock.close()
            raise
        self.tcp_port, self.http_port = bound_port(tcp_sock), bound_port(http_sock)

        loop = asyncio.get_running_loop()
        self.tcp_address = format_address(tcp_sock.getsockname())
        self.http_address = format_address(http_sock.getsockname())
        self._tcp_server = await loop.create_server(self._new_connection, sock=tcp_sock)
        self.log.info("TCP: listening on %s", self.tcp_address)

        api = LookupdHttpApi(self.registry, __version__, self.log, self.clock)
        self._http_runner = web.AppRunner(api.application(), access_log=None, handle_signals=False)
        await self._http_runner.setup()
        await web.SockSite(self._http_runner, http_sock, shutdown_timeout=HTTP_SHUTDOWN_TIMEOUT).start()
        self.log.info("HTTP: listening on %s", self.http_address)

    async def stop(self) -> None:
        if self._tcp_server is not None:
            self._tcp_server.close()
            self.log.info("TCP: closing %s", self.tcp_address)
        for conn in list(self._connections):
            conn.close()
        if self._http_runner is not None:
            await self._http_runner.cleanup()
            self._http_runner = None
        if self._tcp_server is not None:
            await self._tcp_server.wait_closed()
            self._tcp_server = None

    def _new_connection(self) -> V1Connection:
        conn = V1Connection(self.registry, self.identity, self.log, self._connections.discard, self.clock)
        self._connections.add(conn)
        return conn


def _listen(address: str) -> socket.socket:
    try:
        return bind_listener(address)
    except OSError as e:
        raise OSError(e.errno, f"listen ({address}) failed - {e.strerror or e}") from e
