"""The cost of watching: pods and StatefulSets reach the operator through watches with a
server-side label selector (the emulator now honours labelSelector) and are read from
kopf's indexes, so an idle cluster's passes list no pods and read no StatefulSet, and the
roller's idle ticks make no request at all. The figure at production intervals is
bench/operator_idle_requests.py's."""
from __future__ import annotations

import pytest

from tests.operator.harness import FAST, OperatorUnderTest
from tests.operator.idle_cost import idle_cluster, idle_cost

pytestmark = pytest.mark.asyncio(loop_scope="module")
WINDOW = 5.0
TOPICS = 2


async def test_an_idle_cluster_costs_only_its_status_and_drift_passes(operator: OperatorUnderTest) -> None:
    await idle_cluster(operator, "idle", TOPICS)
    cost = await idle_cost(operator, WINDOW)
    assert cost.count("list", "pods") == 0 and cost.count("get", "pods") == 0, cost.requests
    assert cost.count("get", "statefulsets") <= WINDOW / FAST.cluster_status + 1, cost.requests  # apply's read only
    # one read of the NsqCluster per status pass and per drift pass of each topic: none from
    # the roller's ticks (WINDOW / FAST.rollout of them)
    passes = (1 + TOPICS) * (WINDOW / FAST.cluster_status + 1)
    assert cost.count("get", "nsqclusters") <= passes, cost.requests
    assert cost.count("patch", "nsqclusters/status") == 0, cost.requests  # nothing changed, nothing written
    # watches stay open: no relisting
    assert cost.count("watch", "pods") + cost.count("get", "pods") == 0, cost.requests


async def test_the_emulator_honours_label_selectors(operator: OperatorUnderTest) -> None:
    selector = "app.kubernetes.io/instance=idle,app.kubernetes.io/component=nsqd"
    found = await operator.core(f"/api/v1/namespaces/{operator.namespace}/pods?labelSelector={selector}")
    assert [p["metadata"]["name"] for p in found["items"]] == ["idle-nsqd-0"]
