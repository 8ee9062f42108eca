"""The cost of watching: pods and StatefulSets reach the operator through watches with a
server-side label selector (the emulator honours labelSelector) and are read from kopf's
indexes; whether an object moved on during a pass is read from the body kopf keeps up to
date, and a topic's cluster from kopf's index of NsqClusters. So an idle cluster's passes
read nothing from the API server: they only apply what the builders say (server-side, a
no-op when nothing drifted), and the roller's idle ticks make no request at all. The
figure at production intervals is bench/operator_idle_requests.py's."""
from __future__ import annotations

import pytest

from tests.operator.harness import FAST, OperatorUnderTest
from tests.operator.idle_cost import idle_cluster, idle_cost

pytestmark = pytest.mark.asyncio(loop_scope="module")
WINDOW = 5.0
TOPICS = 2
READS = ("get", "list")


async def test_an_idle_cluster_costs_only_its_applies(operator: OperatorUnderTest) -> None:
    await idle_cluster(operator, "idle", TOPICS)
    cost = await idle_cost(operator, WINDOW)
    # the passes made in the window: a status pass applies the one ConfigMap and looks its
    # one nsqd up (the lookupd list), a drift pass looks the nsqd up to converge its topic
    status_passes = cost.count("patch", "configmaps")
    drift_passes = cost.nsqd_lookups - status_passes
    assert status_passes >= WINDOW / FAST.cluster_status / 3, cost
    assert drift_passes >= TOPICS * WINDOW / FAST.topology / 3, cost
    reads = {key: n for key, n in cost.requests.items() if key.split(" ")[1] in READS}
    assert reads == {}, cost.requests  # no GET or LIST of anything, the roller's ticks included
    assert cost.count("patch", "nsqclusters/status") == 0, cost.requests  # nothing changed, nothing written
    assert cost.count("patch", "nsqtopics/status") == 0, cost.requests
    assert cost.count("watch", "pods") == 0, cost.requests  # the watch stays open: no relisting
    # what is left: the applies of a status pass, one per object the cluster owns, each pass
    # a pass under way as the window opens or closes is counted in part
    assert abs(cost.count("patch", "statefulsets") - 2 * status_passes) <= 2, cost.requests


async def test_the_emulator_honours_label_selectors(operator: OperatorUnderTest) -> None:
    selector = "app.kubernetes.io/instance=idle,app.kubernetes.io/component=nsqd"
    found = await operator.core(f"/api/v1/namespaces/{operator.namespace}/pods?labelSelector={selector}")
    assert [p["metadata"]["name"] for p in found["items"]] == ["idle-nsqd-0"]
