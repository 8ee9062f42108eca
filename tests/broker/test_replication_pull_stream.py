"""An adoption's PULL is answered as the adopter reads it: when an owner holding a backlog
of 120 MB is lost, its second backup sends its copies to the adopter without building
the answer in memory (built whole, every frame and then their join, it grew that
backup's peak memory by twice the backlog), and the adopter takes every message over.

The topic has 3 copies on its owner and the default of 1 on the other nsqds, so the
adopter keeps what it adopts alone: the answering backup's memory then measures the
answer, not the adopter's own copies it would otherwise receive next."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.load import publish
from tests.broker.replicas import cluster, post  # noqa: F401 (cluster: a fixture)
from tests.broker.test_replication_snapshot_stream import BODY, MESSAGES, _status_kib
from tests.servers import wait_for

pytestmark = pytest.mark.timeout(120)


async def test_a_large_backlog_is_pulled_from_a_survivor_without_its_answer_built_in_memory(cluster) -> None:
    c = cluster(1)
    owner, adopter, answering = c.nodes
    post(owner, "/topic/create?topic=backlog&replicas=3")
    wait_for(lambda: all(b["connected"] for b in c.replication(0)["backups"]), 10, message="links to both backups")
    post(owner, "/channel/create?topic=backlog&channel=later")  # nobody consumes: all stays live
    bodies = [b"%08d" % i + b"x" * (BODY - 8) for i in range(MESSAGES)]
    assert len((await publish(owner.tcp_address, "backlog", bodies, batch=200)).acked) == MESSAGES
    del bodies
    for i in (1, 2):
        wait_for(lambda: c.replication(i)["held_copies"].get(c.peers[0]) == MESSAGES, 30,
                 message=f"backup {i} holds the copies")

    pid = answering.proc.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak RSS starts again from now
    before = _status_kib(pid, "VmRSS")
    owner.kill()
    wait_for(lambda: c.replication(1)["adopted"] == {c.peers[0]: MESSAGES}, 60, message="the adoption")
    wait_for(lambda: adopter.topic("backlog") and adopter.topic("backlog")["channels"][0]["depth"] == MESSAGES,
             30, message="the adopted messages queued on the adopter's channel")
    # the adopter told the survivor to drop the old copies (it keeps one copy of the topic)
    wait_for(lambda: c.replication(2)["held_copies"].get(c.peers[0], 0) == 0, 30, message="the DROP")
    grew_mib = (_status_kib(pid, "VmHWM") - before) / 1024
    print(f"\nPULL answer of {MESSAGES * BODY / 2**20:.0f} MiB: the answering backup's peak RSS grew {grew_mib:.1f} MiB")
    assert grew_mib < MESSAGES * BODY / 2**20 / 4, f"the answering backup's peak RSS grew {grew_mib:.0f} MiB"
