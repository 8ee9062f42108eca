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
    # the passes made in the window, counted by what each does once: a status pass applies
    # (server-side) the one ConfigMap, a drift pass reads its NsqTopic afresh
    status_passes, drift_passes = cost.count("patch", "configmaps"), cost.count("get", "nsqtopics")
    assert status_passes >= WINDOW / FAST.cluster_status / 3 and drift_passes >= TOPICS, cost.requests
    assert cost.count("list", "pods") == 0 and cost.count("get", "pods") == 0, cost.requests
    # a pass under way as the window opens or closes is counted in part: one of each timer per edge
    edges = 2 * (1 + TOPICS)
    assert cost.count("get", "statefulsets") == 0, cost.requests  # read from the index, never from the API
    assert abs(cost.count("patch", "statefulsets") - 2 * status_passes) <= 4, cost.requests  # the applies
    # the NsqCluster is read once per status pass and once per drift pass: not by the roller's
    # idle ticks (about WINDOW / FAST.rollout of them, each would read it)
    assert WINDOW / FAST.rollout > 2 * edges
    assert abs(cost.count("get", "nsqclusters") - (status_passes + drift_passes)) <= edges, cost.requests
    assert cost.count("patch", "nsqclusters/status") == 0, cost.requests  # nothing changed, nothing written
    assert cost.count("watch", "pods") == 0, cost.requests  # the watch stays open: no relisting


async def test_the_emulator_honours_label_selectors(operator: OperatorUnderTest) -> None:
    selector = "app.kubernetes.io/instance=idle,app.kubernetes.io/component=nsqd"
    found = await operator.core(f"/api/v1/namespaces/{operator.namespace}/pods?labelSelector={selector}")
    assert [p["metadata"]["name"] for p in found["items"]] == ["idle-nsqd-0"]
