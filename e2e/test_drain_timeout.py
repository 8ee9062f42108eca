"""A drain whose consumer never answers: a pynsq handler holds its messages without FIN
or REQ; the drain waits --drain-timeout for them, then requeues them, persists them and
exits 0; after a restart on the same data directory they are delivered again (not lost),
with the same message IDs and one more attempt."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from e2e.pynsq_consumers import PynsqConsumers
from nsq_local.cluster import LocalCluster
from nsq_local.options import ClusterOptions
from nsq_local.waiting import http_status, wait_until

pytestmark = pytest.mark.slow

TOPIC, CHANNEL = "held", "stuck"
COUNT = 5
DRAIN_TIMEOUT = 2.0


async def channel_stats(cluster: LocalCluster) -> dict[str, Any]:
    [node] = cluster.nsqds
    stats = await cluster.nsqd_admin(node).stats(topic=TOPIC, channel=CHANNEL, include_clients=False)
    [topic] = stats["topics"]
    [channel] = topic["channels"]
    return dict(channel)


@pytest.mark.timeout(60)
async def test_messages_held_past_the_drain_timeout_are_requeued_persisted_and_delivered_after_restart(
        tmp_path: Path) -> None:
    options = ClusterOptions(workdir=tmp_path, nsqds=1, lookupds=1,
                             # msg-timeout far beyond the test: only the drain can take the messages back
                             nsqd_flags={"drain-timeout": f"{DRAIN_TIMEOUT:g}s", "msg-timeout": "5m"})
    async with LocalCluster(options) as cluster:
        [node] = cluster.nsqds
        await cluster.create_topics([TOPIC], [CHANNEL])
        holder = PynsqConsumers([(TOPIC, CHANNEL)], cluster.lookupd_http_addresses, tmp_path,
                                max_in_flight=COUNT, mode="hold")
        await holder.start()
        try:
            bodies = [f"held {i}".encode() for i in range(COUNT)]
            await cluster.nsqd_admin(node).multi_publish(TOPIC, bodies)
            await holder.wait_until(lambda: len(holder.deliveries()) == COUNT, 20, "every message held")
            assert (await channel_stats(cluster))["in_flight_count"] == COUNT

            started = time.monotonic()
            await cluster.nsqd_admin(node).drain()
            state = await cluster.nsqd_admin(node).drain_state()
            assert (state["draining"], state["in_flight"]) == (True, COUNT), state
            assert await http_status(cluster.session, f"http://{node.http_address}/ready") == 503
            assert await node.wait_exited(DRAIN_TIMEOUT + 20) == 0
            drain_seconds = time.monotonic() - started
            # the drain waited for the handler that never answered, then gave up on it
            assert DRAIN_TIMEOUT <= drain_seconds < DRAIN_TIMEOUT + 15, drain_seconds
            await holder.wait_until(lambda: bool(holder.events("closed")), 10, "nsqd closed the holder's connection")
        finally:
            await holder.kill()  # it must not take the messages again after the restart
        held = holder.deliveries()
        assert {d.attempts for d in held} == {1}

        await cluster.start_nsqd(node)
        persisted = await channel_stats(cluster)
        assert (persisted["depth"], persisted["in_flight_count"]) == (COUNT, 0), persisted

        reader = PynsqConsumers([(TOPIC, CHANNEL)], cluster.lookupd_http_addresses, tmp_path)
        await reader.start()
        try:
            await reader.wait_until(lambda: len(reader.deliveries()) >= COUNT, 20, "every held message again")

            async def all_finished() -> bool:
                stats = await channel_stats(cluster)
                return (stats["depth"], stats["in_flight_count"]) == (0, 0)
            await wait_until(all_finished, 10, "every redelivered message finished")
        finally:
            assert await reader.stop() == 0, reader.describe()
        again = reader.deliveries()
        assert sorted(d.body for d in again) == sorted(bodies)
        assert {d.message_id: d.body for d in again} == {d.message_id: d.body for d in held}
        assert {d.attempts for d in again} == {2}
