"""No ghost timers: when the operator loses its access to an NsqCluster (the namespace's
RoleBinding went with the namespace, and the watch that would have told of the deletion
with it), the cluster's timers read it afresh once, take the 403 as "gone" and stop, with
one INFO record; they do not fail every pass, log ERRORs and hammer the apiserver."""
from __future__ import annotations

import asyncio
import logging

import pytest

from tests.operator.conftest import NAMESPACE
from tests.operator.harness import FAST, OperatorUnderTest
from tests.operator.idle_cost import idle_cost
from tests.operator.rolling import events

pytestmark = pytest.mark.asyncio(loop_scope="module")
WINDOW = 5 * FAST.cluster_status


async def ready_and_announced(operator: OperatorUnderTest, cluster: str) -> None:
    """Ready, and its Event posted: kopf posts Events in the background, and one still
    queued when access goes is refused and retried by kopf's poster (seen on a loaded
    machine), which is not what these tests are about."""
    await operator.ready("NsqCluster", cluster, timeout=90)

    async def posted() -> bool:
        assert await events(operator, cluster, "Ready"), "no Ready Event yet"
        return True
    await operator.until(posted, 30, f"{cluster}'s Ready Event posted")


async def status_timer_stopped(operator: OperatorUnderTest, caplog: pytest.LogCaptureFixture, cluster: str) -> None:
    async def said() -> bool:
        return any(f"{NAMESPACE}/{cluster} is gone for the operator" in r.getMessage()
                   and "Timer 'status'" in r.getMessage() for r in caplog.records)
    await operator.until(said, 30, f"the status timer of {cluster} stopped")


async def test_timers_of_a_cluster_the_operator_may_no_longer_read_stop(
        operator: OperatorUnderTest, caplog: pytest.LogCaptureFixture) -> None:
    await operator.create("NsqCluster", "ghost", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1},
                                                  "admin": {"enabled": False}})
    await ready_and_announced(operator, "ghost")
    caplog.set_level(logging.INFO)
    operator.backstage.forbid_namespaces(NAMESPACE)
    try:
        await status_timer_stopped(operator, caplog, "ghost")
        caplog.clear()
        cost = await idle_cost(operator, WINDOW)
        errors = [r.getMessage()[:200] for r in caplog.records if r.levelno >= logging.ERROR]
    finally:
        operator.backstage.forbid_namespaces()
    # the status and rollout timers (every 1 s and 0.3 s here) ask nothing any more: no
    # GET of the cluster, no status patch, no Event of their failure
    working = {key: n for key, n in cost.requests.items() if key.split(" ")[1] != "watch"}
    assert working == {}, cost.requests
    assert errors == [], errors[:5]
    await operator.delete("NsqCluster", "ghost")


async def test_a_timer_that_stopped_says_so_once_at_info(operator: OperatorUnderTest,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    await operator.create("NsqCluster", "ghost2", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1},
                                                   "admin": {"enabled": False}})
    await ready_and_announced(operator, "ghost2")
    caplog.set_level(logging.INFO)
    caplog.clear()
    operator.backstage.forbid_namespaces(NAMESPACE)
    try:
        await status_timer_stopped(operator, caplog, "ghost2")
        await asyncio.sleep(WINDOW)  # a second stop record would come in this window
    finally:
        operator.backstage.forbid_namespaces()
    said = [r for r in caplog.records if f"{NAMESPACE}/ghost2 is gone for the operator" in r.getMessage()]
    assert {r.levelno for r in said} == {logging.INFO}, [r.getMessage() for r in said]
    # once per timer; the status pass met the 403 (the roller's idle ticks ask nothing, so
    # it has nothing to be refused)
    stopped = [r.getMessage().split("'")[1] for r in said]
    assert "status" in stopped and len(stopped) == len(set(stopped)), stopped
    await operator.delete("NsqCluster", "ghost2")
