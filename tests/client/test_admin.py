"""The HTTP admin clients against real nsqd and nsqlookupd processes."""
from __future__ import annotations

import asyncio

import aiohttp
import pytest

from nsq_client import AdminError, LookupdAdmin, NsqdAdmin
from tests.client.conftest import nsqd_starter
from tests.client.helpers import eventually
from tests.conftest import Servers
from tests.servers import HOST, Nsqd, free_port


def find(stats: dict, topic: str, channel: str | None = None) -> dict | None:
    for t in stats["topics"]:
        if t["topic_name"] == topic:
            if channel is None:
                return t
            return next((c for c in t["channels"] if c["channel_name"] == channel), None)
    return None


async def test_topic_and_channel_lifecycle(shared_nsqd: Nsqd, topic: str) -> None:
    async with NsqdAdmin(shared_nsqd.http_address) as nsqd:
        assert await nsqd.ping()
        assert (await nsqd.info())["version"]
        await nsqd.create_topic(topic)
        await nsqd.create_channel(topic, "ch")
        await nsqd.publish(topic, b"one")
        await nsqd.multi_publish(topic, [b"two", b"three"])
        await nsqd.publish(topic, b"later", defer=60)
        channel = find(await nsqd.stats(topic), topic, "ch")
        assert channel is not None and channel["depth"] == 3 and channel["deferred_count"] == 1

        await nsqd.pause_topic(topic)
        assert find(await nsqd.stats(topic), topic)["paused"] is True  # type: ignore[index]
        await nsqd.unpause_topic(topic)
        await nsqd.pause_channel(topic, "ch")
        assert find(await nsqd.stats(topic), topic, "ch")["paused"] is True  # type: ignore[index]
        await nsqd.unpause_channel(topic, "ch")
        assert find(await nsqd.stats(topic), topic, "ch")["paused"] is False  # type: ignore[index]

        await nsqd.empty_channel(topic, "ch")
        assert find(await nsqd.stats(topic), topic, "ch")["depth"] == 0  # type: ignore[index]
        await nsqd.empty_topic(topic)
        await nsqd.delete_channel(topic, "ch")
        assert find(await nsqd.stats(topic), topic, "ch") is None
        await nsqd.delete_topic(topic)
        assert find(await nsqd.stats(), topic) is None


async def test_errors_carry_status_and_nsq_code(shared_nsqd: Nsqd) -> None:
    async with NsqdAdmin(shared_nsqd.http_address) as nsqd:
        with pytest.raises(AdminError) as missing:
            await nsqd.delete_topic("no-such-topic")
        assert missing.value.status == 404 and missing.value.message == "TOPIC_NOT_FOUND"
        with pytest.raises(AdminError) as invalid:
            await nsqd.create_topic("bad topic!")
        assert invalid.value.status == 400 and invalid.value.message == "INVALID_TOPIC"


async def test_config_options_read_and_set(shared_nsqd: Nsqd) -> None:
    async with NsqdAdmin(shared_nsqd.http_address) as nsqd:
        addresses = await nsqd.get_config("nsqlookupd_tcp_addresses")
        assert addresses in ([], None)  # Go answers null for an empty list
        try:
            lookupd = f"{HOST}:{free_port()}"
            await nsqd.set_config("nsqlookupd_tcp_addresses", [lookupd])
            assert await nsqd.get_config("nsqlookupd_tcp_addresses") == [lookupd]
            await nsqd.set_config("log_level", "warn")
            assert await nsqd.get_config("log_level") == 3  # Go's number for warn
            await nsqd.set_config("log_level", "info")
            assert await nsqd.get_config("log_level") == 2
            assert await nsqd.get_config("log_prefix") == "[nsqd] "  # strings come as text
        finally:
            await nsqd.set_config("nsqlookupd_tcp_addresses", [])
            await nsqd.set_config("log_level", "info")


async def test_ping_is_false_when_nothing_answers() -> None:
    async with NsqdAdmin(f"{HOST}:{free_port()}", timeout=1) as nobody:
        assert await nobody.ping() is False
        with pytest.raises(aiohttp.ClientError):
            await nobody.info()


async def test_lookupd_queries_and_actions(servers: Servers, module_flavour: str, topic: str) -> None:
    lookupd = servers.lookupd(start=False)
    start = nsqd_starter(servers, module_flavour)
    _, nsqd = await asyncio.gather(asyncio.to_thread(lookupd.start),
                                   asyncio.to_thread(start, lookupd_tcp_address=lookupd.tcp_address))
    async with NsqdAdmin(nsqd.http_address) as nsqd_api, LookupdAdmin(lookupd.http_address) as api:
        assert await api.ping()
        assert (await api.info())["version"]
        await nsqd_api.create_topic(topic)
        await nsqd_api.create_channel(topic, "ch")

        async def listed() -> bool:
            try:
                found = await api.lookup(topic)
            except AdminError:
                return False
            return bool(found["producers"]) and found["channels"] == ["ch"]
        await eventually(listed, message="the topic and its channel registered")
        found = await api.lookup(topic)
        assert found["channels"] == ["ch"]
        assert [(p["broadcast_address"], p["tcp_port"]) for p in found["producers"]] == [(HOST, nsqd.tcp_port)]
        assert topic in await api.topics()
        assert await api.channels(topic) == ["ch"]
        assert [n["tcp_port"] for n in await api.nodes()] == [nsqd.tcp_port]

        await api.create_topic(f"{topic}-made")
        await api.create_channel(f"{topic}-made", "other")
        assert "other" in await api.channels(f"{topic}-made")
        await api.delete_channel(f"{topic}-made", "other")
        await api.delete_topic(f"{topic}-made")
        assert f"{topic}-made" not in await api.topics()

        await api.tombstone_topic_producer(topic, nsqd.http_address)
        assert (await api.lookup(topic))["producers"] == []
        with pytest.raises(AdminError) as unknown:
            await api.lookup("never-registered")
        assert unknown.value.status == 404
