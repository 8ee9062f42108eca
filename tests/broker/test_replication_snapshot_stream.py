"""A snapshot is streamed as the backup reads it: a backup that comes back wiped while the
owner holds a backlog of 120 MB is caught up in full, and the owner's peak memory while
sending it grows by a fraction of the backlog (a snapshot built whole grew it by more
than the backlog: every frame, then their join)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.broker.load import Consumer, Fin, Hold, publish
from tests.broker.replicas import cluster, post  # noqa: F401 (cluster: a fixture)
from tests.servers import wait_for

pytestmark = pytest.mark.timeout(120)

MESSAGES = 40_000
BODY = 3000  # 120 MB of bodies


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


async def test_a_snapshot_of_a_large_backlog_reaches_a_wiped_backup_without_being_built_in_memory(
        cluster) -> None:
    c = cluster(3)
    owner, wiped, _ = c.nodes
    post(owner, "/topic/create?topic=backlog")
    post(owner, "/channel/create?topic=backlog&channel=later")  # nobody consumes: all stays live
    bodies = [b"%08d" % i + b"x" * (BODY - 8) for i in range(MESSAGES)]
    assert len((await publish(owner.tcp_address, "backlog", bodies, batch=200)).acked) == MESSAGES
    del bodies
    # one FIN: the owner's own shard indexes its messages by ID (a copy of each, paid once
    # whatever sends the snapshot), so that what is measured below is the snapshot alone
    decisions = iter([Fin])
    consumer = await Consumer(owner.tcp_address, "backlog", "later", rdy=1,
                              decide=lambda d: next(decisions, Hold)).start()
    await consumer.wait_until(lambda: len(consumer.finished) == 1, 30, "one finished")
    await consumer.quiesce()
    await consumer.stop()
    live = MESSAGES - 1
    wait_for(lambda: c.replication(1)["held_copies"].get(c.peers[0]) == live, 30, message="the copies")

    wiped.kill()
    shutil.rmtree(wiped.workdir / "data")
    pid = owner.proc.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak RSS starts again from now
    before = _status_kib(pid, "VmRSS")
    connects = c.replication(0)["backups"][0]["connects"]
    wiped.start()
    wait_for(lambda: (lambda b: b["connects"] > connects and b["state"] == "in_sync")(c.replication(0)["backups"][0]),
             60, message="the wiped backup caught up")
    assert c.replication(1)["held_copies"].get(c.peers[0]) == live
    grew_mib = (_status_kib(pid, "VmHWM") - before) / 1024
    print(f"\nsnapshot of {MESSAGES * BODY / 2**20:.0f} MiB: the owner's peak RSS grew {grew_mib:.1f} MiB")
    assert grew_mib < MESSAGES * BODY / 2**20 / 4, f"the owner's peak RSS grew {grew_mib:.0f} MiB"
