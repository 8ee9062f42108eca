"""NsqdAdmin's drain calls against real nsqd processes (the drain is ours: Go nsqd has no
/drain)."""
from __future__ import annotations

import pytest

from nsq_client import AdminError, NsqdAdmin
from tests.client.helpers import channel_stats, eventually
from tests.conftest import Servers
from tests.servers import Nsqd


async def test_scale_down_drain_and_its_state(servers: Servers, topic: str) -> None:
    source, target = servers.nsqd(), servers.nsqd()
    async with NsqdAdmin(source.http_address) as admin:
        await admin.create_topic(topic)
        await admin.create_channel(topic, "c")
        await admin.multi_publish(topic, [b"one", b"two", b"three"])
        idle = await admin.drain_state()
        assert idle["draining"] is False and idle["handoff"] is None

        started = await admin.drain(handoff=[target.http_address])
        assert started["draining"] is True and started["handoff"]["targets"] == [target.http_address]

        async def handed_off() -> dict | None:
            handoff = (await admin.drain_state())["handoff"]
            return handoff if handoff["finished"] else None
        handoff = await eventually(handed_off, 15, "the handoff")
        assert handoff["error"] is None and handoff["topics"] == {topic: 3} and handoff["messages"] == 3
        await eventually(lambda: _depth_is(target, topic, 3), 5, "the backlog on the target")

        again = await admin.drain()  # a plain request once handed off changes nothing
        assert again["handoff"] == handoff
        with pytest.raises(AdminError) as exiting:
            await admin.create_topic(topic)
        assert (exiting.value.status, exiting.value.message) == (503, "EXITING")


async def _depth_is(nsqd: Nsqd, topic: str, depth: int) -> bool:
    channel = await channel_stats(nsqd, topic, "c")
    return channel is not None and channel["depth"] == depth


async def test_invalid_handoff_target_is_refused(servers: Servers) -> None:
    async with NsqdAdmin(servers.nsqd().http_address) as admin:
        with pytest.raises(AdminError) as invalid:
            await admin.drain(handoff=["no-port"])
        assert (invalid.value.status, invalid.value.message) == (400, "INVALID_HANDOFF")
        assert (await admin.drain_state())["draining"] is False
