"""nsqd's side of the lookupd conversation (``nsqd.lookup.LookupdPeers``) against real
nsqlookupd processes, observed through their HTTP API."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, TypeVar

import pytest

from nsqd.lookup import LookupdPeers
from tests.conftest import Servers
from tests.servers import HOST, Nsqlookupd, free_port

T = TypeVar("T")
pytestmark = pytest.mark.timeout(60)

IDENTITY = {"broadcast_address": HOST, "hostname": "test-nsqd", "tcp_port": 24150,
            "http_port": 24151, "version": "1.3.0"}


@pytest.fixture
def start_lookupd(servers: Servers) -> Callable[..., Nsqlookupd]:
    """Real nsqlookupds on ports they choose (or the ones given), stopped after the test."""
    def start(tcp_port: int = 0, http_port: int = 0, **flags: object) -> Nsqlookupd:
        return servers.lookupd(tcp_port=tcp_port, http_port=http_port, **flags)
    return start


class NsqdState:
    """What an nsqd would hand to ``registrations``: its topics and their channels."""

    def __init__(self, topics: dict[str, list[str]]) -> None:
        self.topics = topics

    def registrations(self) -> list[tuple[str, str | None]]:
        out: list[tuple[str, str | None]] = []
        for topic, channels in self.topics.items():
            out.extend([(topic, c) for c in channels] if channels else [(topic, None)])
        return out


async def eventually(check: Callable[[], T], timeout: float = 10.0, message: str = "") -> T:
    """Poll a blocking ``check`` (HTTP to lookupd) off the event loop until it is truthy."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await asyncio.to_thread(check)
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout:.0f}s: {message}")
        await asyncio.sleep(0.05)


def registered(lookupd: Nsqlookupd, topic: str) -> bool:
    return IDENTITY["tcp_port"] in lookupd.producer_tcp_ports(topic)


def our_node(lookupd: Nsqlookupd) -> dict[str, Any] | None:
    return next((n for n in lookupd.get("/nodes").json()["producers"] if n["tcp_port"] == IDENTITY["tcp_port"]),
                None)


def channels(lookupd: Nsqlookupd, topic: str) -> list[str]:
    return lookupd.get(f"/channels?topic={topic}").json()["channels"]


async def test_connects_identifies_and_registers_everything(start_lookupd) -> None:  # type: ignore[no-untyped-def]
    lookupd = start_lookupd()
    state = NsqdState({"alone": [], "busy": ["c1", "c2"]})
    peers = LookupdPeers(identity=IDENTITY, registrations=state.registrations, addresses=[lookupd.tcp_address])
    await peers.start()
    try:
        node = await eventually(lambda: (n := our_node(lookupd)) and n["topics"] == ["alone", "busy"] and n,
                                message="both topics registered")
        assert {k: node[k] for k in IDENTITY} == IDENTITY
        assert channels(lookupd, "busy") == ["c1", "c2"] and channels(lookupd, "alone") == []
        assert peers.http_addresses() == [lookupd.http_address]
    finally:
        await peers.close()


async def test_runtime_register_and_unregister_are_sent_in_order(start_lookupd) -> None:  # type: ignore[no-untyped-def]
    lookupd = start_lookupd()
    state = NsqdState({"base": []})
    peers = LookupdPeers(identity=IDENTITY, registrations=state.registrations, addresses=[lookupd.tcp_address])
    await peers.start()
    try:
        await eventually(lambda: registered(lookupd, "base"), message="initial registration")
        peers.register("t")
        peers.register("t", "tmp#ephemeral")
        peers.register("gone")
        peers.unregister("gone")  # queued after its register: it must end unregistered
        await eventually(lambda: "tmp#ephemeral" in channels(lookupd, "t"), message="channel registered")
        assert registered(lookupd, "t")
        assert not registered(lookupd, "gone")
        peers.unregister("t", "tmp#ephemeral")
        await eventually(lambda: channels(lookupd, "t") == [], message="ephemeral channel unregistered")
        peers.unregister("t")
        await eventually(lambda: not registered(lookupd, "t"), message="topic unregistered")
        assert registered(lookupd, "base")
    finally:
        await peers.close()


async def test_a_restarted_lookupd_gets_every_registration_back(start_lookupd) -> None:  # type: ignore[no-untyped-def]
    lookupd = start_lookupd()
    state = NsqdState({"a": ["x"]})
    peers = LookupdPeers(identity=IDENTITY, registrations=state.registrations, addresses=[lookupd.tcp_address])
    await peers.start()
    try:
        await eventually(lambda: registered(lookupd, "a"), message="first registration")
        await asyncio.to_thread(lookupd.stop)
        state.topics["b"] = []  # created while the lookupd is down
        peers.register("b")  # dropped for the down peer: the reconnection covers it
        await asyncio.to_thread(lookupd.start)  # same ports
        await eventually(lambda: registered(lookupd, "a") and registered(lookupd, "b"), 15,
                         "every registration back after the restart")
        assert channels(lookupd, "a") == ["x"]
    finally:
        await peers.close()


async def test_a_lookupd_that_starts_later_is_reached(start_lookupd) -> None:  # type: ignore[no-untyped-def]
    tcp_port, http_port = free_port(), free_port()
    state = NsqdState({"early": []})
    peers = LookupdPeers(identity=IDENTITY, registrations=state.registrations,
                         addresses=[f"{HOST}:{tcp_port}"])
    await peers.start()
    try:
        assert peers.http_addresses() == []
        lookupd = await asyncio.to_thread(start_lookupd, tcp_port=tcp_port, http_port=http_port)
        await eventually(lambda: registered(lookupd, "early"), 15, "registered once lookupd is up")
    finally:
        await peers.close()


async def test_set_addresses_connects_new_and_drops_removed(start_lookupd) -> None:  # type: ignore[no-untyped-def]
    one, two = start_lookupd(), start_lookupd()
    state = NsqdState({"t": []})
    peers = LookupdPeers(identity=IDENTITY, registrations=state.registrations, addresses=[one.tcp_address])
    await peers.start()
    try:
        await eventually(lambda: registered(one, "t"), message="on the first lookupd")
        peers.set_addresses([two.tcp_address])
        await eventually(lambda: registered(two, "t"), message="on the second lookupd")
        await eventually(lambda: our_node(one) is None, message="gone from the first lookupd")
        assert peers.http_addresses() == [two.http_address]
        peers.set_addresses([one.tcp_address, two.tcp_address])
        await eventually(lambda: registered(one, "t"), message="back on the first lookupd")
        assert sorted(peers.http_addresses()) == sorted([one.http_address, two.http_address])
    finally:
        await peers.close()


async def test_pings_keep_the_producer_active(start_lookupd) -> None:  # type: ignore[no-untyped-def]
    lookupd = start_lookupd(inactive_producer_timeout="1s")
    state = NsqdState({"t": []})
    peers = LookupdPeers(identity=IDENTITY, registrations=state.registrations, addresses=[lookupd.tcp_address],
                         ping_interval=0.2)
    await peers.start()
    try:
        await eventually(lambda: registered(lookupd, "t"), message="registered")

        def last_update() -> int:
            (entry,) = [e for e in lookupd.get("/debug").json()["client::"] if e["tcp_port"] == IDENTITY["tcp_port"]]
            return int(entry["last_update"])

        first = await asyncio.to_thread(last_update)
        await eventually(lambda: last_update() > first, 5, "a PING refreshed lookupd's last_update")
        started = time.monotonic()
        await eventually(lambda: time.monotonic() - started > 1.5 and registered(lookupd, "t"), 5,
                         "still active after more than the inactivity timeout")
    finally:
        await peers.close()


async def test_close_is_prompt_and_lookupd_forgets_us(start_lookupd) -> None:  # type: ignore[no-untyped-def]
    lookupd = start_lookupd()
    peers = LookupdPeers(identity=IDENTITY, registrations=NsqdState({"t": []}).registrations,
                         addresses=[lookupd.tcp_address, f"{HOST}:{free_port()}"])  # one never answers
    await peers.start()
    await eventually(lambda: registered(lookupd, "t"), message="registered")
    started = time.monotonic()
    await peers.close()
    assert time.monotonic() - started < 1.5
    await eventually(lambda: our_node(lookupd) is None, 5, "lookupd dropped the closed connection")
    peers.register("after-close")  # harmless


async def test_channels_for_topic_is_the_union_over_lookupds(start_lookupd) -> None:  # type: ignore[no-untyped-def]
    one, two = start_lookupd(), start_lookupd()
    for lookupd, channel in ((one, "a"), (one, "b"), (two, "b"), (two, "c")):
        assert lookupd.post(f"/channel/create?topic=known&channel={channel}").status == 200
    peers = LookupdPeers(identity=IDENTITY, registrations=NsqdState({}).registrations,
                         addresses=[one.tcp_address, two.tcp_address])
    await peers.start()
    try:
        assert await peers.channels_for_topic("known") == [], "no HTTP address is known before IDENTIFY"
        await eventually(lambda: len(peers.http_addresses()) == 2, message="both lookupds identified")
        assert await peers.channels_for_topic("known") == ["a", "b", "c"]
        assert await peers.channels_for_topic("unknown") == []
        await asyncio.to_thread(two.stop)
        assert await peers.channels_for_topic("known") == ["a", "b"], "a lookupd that is down is skipped"
    finally:
        await peers.close()
