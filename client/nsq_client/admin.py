"""Small aiohttp clients for nsqd's and nsqlookupd's HTTP APIs (aiohttp comes with the
client's ``admin`` extra: ``pip install 'nsq-client[admin]'``).

Both accept ``host:port`` or a full ``http(s)://`` base URL, share one
:class:`aiohttp.ClientSession` when given one (else own theirs; close with ``await
close()`` or ``async with``), and raise :class:`AdminError` with the status and NSQ's
error code (``TOPIC_NOT_FOUND`` ...) for any non-2xx answer (transport failures raise :class:`aiohttp.ClientError`).
"""
from __future__ import annotations

import json
import ssl
from types import TracebackType
from typing import Any, Sequence

try:
    import aiohttp
except ModuleNotFoundError as missing:  # the client installed without its admin extra
    raise ModuleNotFoundError(f"nsq_client.admin needs {missing.name}: pip install 'nsq-client[admin]'",
                              name=missing.name) from missing

from nsq_protocol.commands import encode_mpub_body

from .errors import AdminError
from .http_get import NSQ_ACCEPT, base_url, error_code, unwrap


class _HttpApi:
    def __init__(self, address: str, *, session: aiohttp.ClientSession | None = None,
                 timeout: float = 5.0, connect_timeout: float | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        """``timeout`` bounds a whole request, ``connect_timeout`` (when given) its TCP
        connect; ``ssl_context`` for an ``https://`` address (CA to trust, client certificate)."""
        self.address = address
        self.url = base_url(address)
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._session = session
        self._owns_session = session is None
        self._timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_timeout)

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
            self._owns_session = True
        return self._session

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> "_HttpApi":
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def _call(self, method: str, path: str, params: dict[str, Any] | None = None,
                    body: bytes | None = None) -> bytes:
        url = self.url + path
        query = {k: str(v) for k, v in (params or {}).items() if v is not None}
        async with self._client().request(method, url, params=query, data=body,
                                          headers={"Accept": NSQ_ACCEPT}, ssl=self._ssl,
                                          timeout=self._timeout) as resp:
            data = await resp.read()
            if not 200 <= resp.status < 300:
                raise AdminError(resp.status, error_code(data), url)
            return data

    async def _json(self, method: str, path: str, params: dict[str, Any] | None = None) -> Any:
        data = await self._call(method, path, params)
        try:
            value = json.loads(data)
        except ValueError:
            raise AdminError(200, f"answer is not JSON: {data[:100]!r}", self.url + path) from None
        return unwrap(value)

    async def ping(self) -> bool:
        """True when the server answers /ping with 200; False when it answers an error
        (nsqd answers 500 while draining) or cannot be reached."""
        try:
            await self._call("GET", "/ping")
        except (AdminError, aiohttp.ClientError, TimeoutError):
            return False
        return True

    async def info(self) -> dict[str, Any]:
        return dict(await self._json("GET", "/info"))


class NsqdAdmin(_HttpApi):
    """nsqd's HTTP API (``--http-address``)."""

    async def stats(self, topic: str | None = None, channel: str | None = None, *,
                    include_clients: bool = True, include_mem: bool = False) -> dict[str, Any]:
        return dict(await self._json("GET", "/stats", {
            "format": "json", "topic": topic, "channel": channel,
            "include_clients": str(include_clients).lower(), "include_mem": str(include_mem).lower()}))

    async def publish(self, topic: str, body: bytes, defer: float | None = None) -> None:
        params = {"topic": topic, "defer": None if defer is None else round(defer * 1000)}
        await self._call("POST", "/pub", params, body)

    async def multi_publish(self, topic: str, bodies: Sequence[bytes]) -> None:
        await self._call("POST", "/mpub", {"topic": topic, "binary": "true"}, encode_mpub_body(bodies))

    async def create_topic(self, topic: str, replicas: int | None = None) -> None:
        """``replicas`` (our nsqd only, beyond NSQ): the topic's own number of copies; an
        nsqd refuses a change while the topic holds messages (AdminError 400)."""
        await self._call("POST", "/topic/create", {"topic": topic, "replicas": replicas})

    async def delete_topic(self, topic: str) -> None:
        await self._call("POST", "/topic/delete", {"topic": topic})

    async def empty_topic(self, topic: str) -> None:
        await self._call("POST", "/topic/empty", {"topic": topic})

    async def pause_topic(self, topic: str) -> None:
        await self._call("POST", "/topic/pause", {"topic": topic})

    async def unpause_topic(self, topic: str) -> None:
        await self._call("POST", "/topic/unpause", {"topic": topic})

    async def create_channel(self, topic: str, channel: str) -> None:
        await self._call("POST", "/channel/create", {"topic": topic, "channel": channel})

    async def delete_channel(self, topic: str, channel: str) -> None:
        await self._call("POST", "/channel/delete", {"topic": topic, "channel": channel})

    async def empty_channel(self, topic: str, channel: str) -> None:
        await self._call("POST", "/channel/empty", {"topic": topic, "channel": channel})

    async def pause_channel(self, topic: str, channel: str) -> None:
        await self._call("POST", "/channel/pause", {"topic": topic, "channel": channel})

    async def unpause_channel(self, topic: str, channel: str) -> None:
        await self._call("POST", "/channel/unpause", {"topic": topic, "channel": channel})

    async def drain(self, handoff: Sequence[str] = ()) -> dict[str, Any]:
        """``POST /drain`` (our nsqd only): start a drain, or cut a running one's wait short.
        With ``handoff`` (other nsqds' HTTP ``host:port``) a scale-down drain: the node hands
        its backlog to them and stays up until signalled; after a failed handoff this
        retries it. Returns the drain state, as ``drain_state``."""
        params = {"handoff": ",".join(handoff)} if handoff else None
        return dict(await self._json("POST", "/drain", params))

    async def drain_state(self) -> dict[str, Any]:
        """``GET /drain`` (our nsqd only): ``draining``, ``started_at``, ``finished_at``,
        ``in_flight``, ... and ``handoff`` (None for a plain drain, else ``targets``,
        ``finished``, ``error``, ``topics``, ``messages``, ``topics_left``, ``messages_left``)."""
        return dict(await self._json("GET", "/drain"))

    async def replication(self) -> dict[str, Any]:
        """``GET /replication`` (our nsqd, with ``--topic-replicas`` above 1): ``node``,
        ``replicas``, ``quorum``, ``backups`` (``peer``, ``connected``, ``acked_through``,
        ``lag_frames``, ``missed_frames``, ``connects``), ``peers`` (``peer``, ``alive``),
        ``held_copies`` and ``adopted``. Raises AdminError 404 where replication is off."""
        return dict(await self._json("GET", "/replication"))

    async def replication_peers(self) -> dict[str, Any]:
        """``GET /replication/peers`` (our nsqd with replication): ``epoch``, ``peers`` and
        ``settled`` (the epoch since which its copies sit on its backups of that list)."""
        return dict(await self._json("GET", "/replication/peers"))

    async def set_replication_peers(self, peers: Sequence[str], epoch: int) -> dict[str, Any]:
        """``PUT /replication/peers``: the peer list of ``epoch`` replaces the current one
        (AdminError 409 for a stale epoch or too few peers for some topic's copies)."""
        data = await self._call("PUT", "/replication/peers",
                                body=json.dumps({"epoch": epoch, "peers": list(peers)}).encode())
        return dict(unwrap(json.loads(data)))

    async def get_config(self, option: str) -> Any:
        """The option's value: a string option comes back as text (nsqd answers it
        so), anything else as JSON (durations in nanoseconds, ``log_level`` as Go's number)."""
        url = self.url + f"/config/{option}"
        async with self._client().get(url, headers={"Accept": NSQ_ACCEPT}, ssl=self._ssl,
                                      timeout=self._timeout) as resp:
            data = await resp.read()
            if resp.status != 200:
                raise AdminError(resp.status, error_code(data), url)
            if resp.content_type == "application/json":
                return json.loads(data)
            return data.decode("utf-8", "replace")

    async def set_config(self, option: str, value: str | list[str]) -> None:
        """nsqd takes ``log_level`` as a bare string and ``nsqlookupd_tcp_addresses`` as a
        JSON list."""
        body = value.encode() if isinstance(value, str) else json.dumps(value).encode()
        await self._call("PUT", f"/config/{option}", body=body)


class LookupdAdmin(_HttpApi):
    """nsqlookupd's HTTP API (``--http-address``)."""

    async def lookup(self, topic: str) -> dict[str, Any]:
        """``{"channels": [...], "producers": [{broadcast_address, tcp_port, ...}]}``;
        :class:`AdminError` 404 ``TOPIC_NOT_FOUND`` when no nsqd has the topic."""
        return dict(await self._json("GET", "/lookup", {"topic": topic}))

    async def topics(self) -> list[str]:
        return list((await self._json("GET", "/topics")).get("topics") or [])

    async def channels(self, topic: str) -> list[str]:
        return list((await self._json("GET", "/channels", {"topic": topic})).get("channels") or [])

    async def nodes(self) -> list[dict[str, Any]]:
        return list((await self._json("GET", "/nodes")).get("producers") or [])

    async def create_topic(self, topic: str) -> None:
        await self._call("POST", "/topic/create", {"topic": topic})

    async def delete_topic(self, topic: str) -> None:
        await self._call("POST", "/topic/delete", {"topic": topic})

    async def create_channel(self, topic: str, channel: str) -> None:
        await self._call("POST", "/channel/create", {"topic": topic, "channel": channel})

    async def delete_channel(self, topic: str, channel: str) -> None:
        await self._call("POST", "/channel/delete", {"topic": topic, "channel": channel})

    async def tombstone_topic_producer(self, topic: str, node: str) -> None:
        """``node`` is the producer's ``broadcast_address:http_port``."""
        await self._call("POST", "/topic/tombstone", {"topic": topic, "node": node})
