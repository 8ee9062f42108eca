"""What nsqadmin asks the cluster: every lookupd (or every configured nsqd) at once, every
node of a topic at once. A call that some targets answered returns their answers and one
warning per target that did not; a call that none answered raises :class:`UpstreamError`
(Go's rule, under which a topic no nsqd holds has no stats to give either)."""
from __future__ import annotations

import asyncio
import ssl
from typing import Any, Awaitable, Callable, Sequence, TypeVar

import aiohttp

from nsq_client.admin import LookupdAdmin, NsqdAdmin
from nsq_client.errors import AdminError

from . import producers as prods
from . import stats
from .options import NsqadminOptions
from .producers import Producer

T = TypeVar("T")
R = TypeVar("R")


class UpstreamError(Exception):
    """No lookupd or nsqd asked gave an answer."""


def describe(error: BaseException, target: str) -> str:
    """One line naming the target and what went wrong."""
    if isinstance(error, AdminError):
        return f"{error.url}: HTTP {error.status} {error.message}"
    if isinstance(error, TimeoutError):
        return f"{target}: no answer in time"
    return f"{target}: {error.__class__.__name__}: {error}".rstrip(": ")


async def fan_out(targets: Sequence[T], call: Callable[[T], Awaitable[R]],
                  name: Callable[[T], str] = str) -> tuple[list[tuple[T, R]], list[str]]:
    """``call`` on every target at once: (target, answer) in the targets' order, and a
    line per failure."""
    outcomes = await asyncio.gather(*(call(t) for t in targets), return_exceptions=True)
    answers: list[tuple[T, R]] = []
    errors: list[str] = []
    for target, outcome in zip(targets, outcomes):
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, (AdminError, aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError)):
                raise outcome
            errors.append(describe(outcome, name(target)))
        else:
            answers.append((target, outcome))
    return answers, errors


def _require_some(kind: str, answered: int, errors: list[str]) -> None:
    if answered == 0:
        raise UpstreamError(f"failed to query any {kind}: " + "; ".join(errors))


def client_ssl_context(options: NsqadminOptions) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=options.http_client_tls_root_ca_file or None)
    if options.http_client_tls_cert:
        ctx.load_cert_chain(options.http_client_tls_cert, options.http_client_tls_key)
    if options.http_client_tls_insecure_skip_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class ClusterInfo:
    def __init__(self, options: NsqadminOptions, session: aiohttp.ClientSession) -> None:
        self.options = options
        self.session = session
        self._ssl = client_ssl_context(options)

    def with_options(self, options: NsqadminOptions) -> "ClusterInfo":
        return ClusterInfo(options, self.session)

    # -- clients ------------------------------------------------------------
    def _kwargs(self) -> dict[str, Any]:
        return {"session": self.session, "timeout": self.options.http_client_request_timeout,
                "connect_timeout": self.options.http_client_connect_timeout, "ssl_context": self._ssl}

    def lookupd(self, address: str) -> LookupdAdmin:
        return LookupdAdmin(address, **self._kwargs())

    def nsqd(self, address: str) -> NsqdAdmin:
        return NsqdAdmin(address, **self._kwargs())

    @property
    def lookupds(self) -> list[str]:
        return list(self.options.nsqlookupd_http_addresses)

    # -- topics -------------------------------------------------------------
    async def topics(self) -> tuple[list[str], list[str]]:
        """Every topic the lookupds know (or the configured nsqds hold), sorted."""
        if self.lookupds:
            answers, errors = await fan_out(self.lookupds, lambda a: self.lookupd(a).topics())
            _require_some("nsqlookupd", len(answers), errors)
        else:
            answers, errors = await fan_out(self.options.nsqd_http_addresses, self._nsqd_topic_names)
            _require_some("nsqd", len(answers), errors)
        return sorted({t for _, names in answers for t in names}), errors

    async def _nsqd_topic_names(self, address: str) -> list[str]:
        answer = await self.nsqd(address).stats(include_clients=False)
        return [t["topic_name"] for t in answer.get("topics") or []]

    async def topic_channels(self, topic: str) -> tuple[list[str], list[str]]:
        answers, errors = await fan_out(self.lookupds, lambda a: self.lookupd(a).channels(topic))
        _require_some("nsqlookupd", len(answers), errors)
        return sorted({c for _, names in answers for c in names}), errors

    async def inactive_topics(self, topics: list[str]) -> dict[str, list[str]]:
        """Topics that lookupds know but no nsqd produces, with their channels."""
        if not self.lookupds:
            return {}

        async def inactive(topic: str) -> list[str] | None:
            try:
                holders, _ = await self.lookupd_topic_producers(topic)
            except UpstreamError:
                holders = []
            if holders:
                return None
            try:
                channels, _ = await self.topic_channels(topic)
            except UpstreamError:
                channels = []
            return channels

        found = await asyncio.gather(*(inactive(t) for t in topics))
        return {t: chans for t, chans in zip(topics, found) if chans is not None}

    # -- producers ----------------------------------------------------------
    async def producers(self) -> tuple[list[Producer], list[str]]:
        """Every nsqd of the cluster."""
        if self.lookupds:
            answers, errors = await fan_out(self.lookupds, lambda a: self.lookupd(a).nodes())
            _require_some("nsqlookupd", len(answers), errors)
            return prods.merge_lookupd_nodes(answers), errors
        return await self.nsqd_producers(self.options.nsqd_http_addresses)

    async def nsqd_producers(self, addresses: Sequence[str]) -> tuple[list[Producer], list[str]]:
        async def one(address: str) -> Producer:
            info = await self.nsqd(address).info()
            return prods.from_nsqd(address, info, await self._nsqd_topic_names(address))
        answers, errors = await fan_out(list(addresses), one)
        _require_some("nsqd", len(answers), errors)
        return [p for _, p in answers], errors

    async def lookupd_topic_producers(self, topic: str) -> tuple[list[Producer], list[str]]:
        answers, errors = await fan_out(self.lookupds, lambda a: self.lookupd(a).lookup(topic))
        _require_some("nsqlookupd", len(answers), errors)
        return prods.merge_topic_producers([a.get("producers") or [] for _, a in answers]), errors

    async def topic_producers(self, topic: str) -> tuple[list[Producer], list[str]]:
        """The nsqds holding ``topic``."""
        if self.lookupds:
            return await self.lookupd_topic_producers(topic)
        nodes, errors = await self.nsqd_producers(self.options.nsqd_http_addresses)
        return [p for p in nodes if any(t == topic for t, _ in p.topics)], errors

    # -- stats --------------------------------------------------------------
    async def node_stats(self, producers: list[Producer], topic: str | None = None,
                         channel: str | None = None, include_clients: bool = False
                         ) -> tuple[list[stats.Json], list[str]]:
        """Each producer's topics (only ``topic`` when given), in Go's shape, by topic and host."""
        async def one(p: Producer) -> list[stats.Json]:
            answer = await self.nsqd(p.url).stats(topic, channel, include_clients=include_clients)
            return [stats.node_topic(p.http_address, p.hostname, t) for t in answer.get("topics") or []
                    if topic is None or t.get("topic_name") == topic]
        answers, errors = await fan_out(producers, one, lambda p: p.http_address)
        _require_some("nsqd", len(answers), errors)
        found = [t for _, topics in answers for t in topics]
        return sorted(found, key=lambda t: (t["topic_name"], t["hostname"], t["node"])), errors
