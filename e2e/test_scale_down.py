"""Scale-down of a local cluster under load: the last of 3 nsqds is drained with its
backlog handed to the other two (a slow channel makes sure it holds one), stopped and
removed; every acknowledged message still reaches every channel, duplicates (a message
the leaving node still held for one channel but not another is handed off for all) are
counted and reported, and nothing is left on the leaving node's disk.

A handoff the targets refuse stops the scale-down loudly and keeps the node, still
holding its messages."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest

from nsq_client import NsqdAdmin
from nsq_local.cluster import LocalCluster
from nsq_local.demo import run_demo
from nsq_local.options import ClusterOptions, DemoOptions, LoadOptions
from nsq_local.processes import Node
from nsq_local.report import render
from nsq_local.scaling import ScaleDownError, scale_down

pytestmark = pytest.mark.slow

TOPICS, CHANNELS = ["orders", "clicks"], ["archive", "alerts"]


async def messages_on_disk(data_of: Path) -> int:
    """Messages an nsqd started alone (no lookupd) on that node's directory finds there."""
    node = Node("nsqd", "disk-check", data_of)
    await node.start()
    admin = NsqdAdmin(node.http_address)
    try:
        stats = await admin.stats(include_clients=False)
    finally:
        await admin.close()
        assert await node.stop() == 0
    return sum(int(t.get("depth") or 0) + sum(int(c.get("depth") or 0) + int(c.get("deferred_count") or 0)
                                              for c in t.get("channels") or [])
               for t in stats.get("topics") or [])


@pytest.mark.timeout(90)
async def test_scale_down_under_load_hands_the_backlog_off_and_loses_nothing(tmp_path: Path) -> None:
    options = DemoOptions(
        cluster=ClusterOptions(workdir=tmp_path),
        load=LoadOptions(topics=TOPICS, channels=CHANNELS, rate=300, slow_channel="archive", slow_share=0.6),
        before=2.0, after=1.5, settle_timeout=30, exit_timeout=30, scale_down=1, handoff_timeout=30)

    report = await run_demo(options)
    text = render(report)
    tally = report.tally

    assert report.errors == [], text
    [gone] = report.scale_downs
    assert (gone.name, gone.targets, gone.exit_code) == ("nsqd-2", ("nsqd-0", "nsqd-1"), 0), text
    assert gone.held > 0 and gone.handed_off > 0 and gone.topics == len(TOPICS), text
    assert tally.acknowledged > 0 and tally.lost == 0, text
    assert [(c.topic, c.channel, c.lost) for c in tally.channels] == [
        (t, c, 0) for t in TOPICS for c in CHANNELS], text
    assert tally.unknown == 0, text
    assert tally.duplicates == sum(c.deliveries - c.delivered for c in tally.channels)
    assert f"duplicates    {tally.duplicates}" in text
    assert "Scale-down of 1 of 3 nsqds" in text and "handed off" in text
    # producers and consumers went on with the two nsqds left, and only with them
    by_name = {report.node_names[a]: n for a, n in tally.deliveries_by_node["after"].items()}
    assert set(by_name) == {"nsqd-0", "nsqd-1"} and all(by_name.values()), text
    assert report.ok, text
    assert await messages_on_disk(tmp_path / "nsqd-2") == 0


@pytest.mark.timeout(60)
async def test_a_refused_handoff_stops_the_scale_down_and_keeps_the_node_with_its_messages(tmp_path: Path) -> None:
    cluster = LocalCluster(ClusterOptions(workdir=tmp_path, nsqds=2, lookupds=1))
    target, leaving = cluster.nsqds
    target.flags["max-msg-size"] = "8"  # the only target refuses every message the leaving node holds
    async with cluster:
        await cluster.create_topics(["kept"], ["ch"])
        bodies = [f"a message longer than 8 bytes {i}".encode() for i in range(20)]
        await cluster.nsqd_admin(leaving).multi_publish("kept", bodies)

        refused = "nsqd-1: handoff failed after 0 messages, 20 left on its disk: .*kept running"
        with pytest.raises(ScaleDownError, match=refused) as failure:
            await scale_down(cluster, leaving, handoff_timeout=20, exit_timeout=20)
        assert failure.value.done == []
        assert leaving.running and leaving in cluster.nsqds
        handoff = (await cluster.nsqd_admin(leaving).drain_state())["handoff"]
        assert handoff["error"], handoff

        leaving.signal(signal.SIGTERM)
        assert await leaving.wait_exited(20) == 0
    assert await messages_on_disk(tmp_path / "nsqd-1") == len(bodies)
