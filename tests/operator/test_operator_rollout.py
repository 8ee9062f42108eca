"""Rolling upgrades under kopf against the emulator and the test kubelet's real
processes: a new image rolls every pod one at a time (lookupd, then nsqds highest
ordinal first, each drained before it is deleted), options and nsq.dev/restart do the
same with their own Event reasons, nsq.dev/paused stops everything, a stuck drain or a
replacement that never gets Ready stops the roll Degraded until it can go on, a
crash-looping pod is replaced without a drain, and an nsqd pod deleted by someone else
(an eviction) drains itself on SIGTERM within its grace period."""
from __future__ import annotations

import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from nsq_operator import metrics

from nsq_operator.constants import PAUSED_ANNOTATION, RESTART_ANNOTATION
from tests.broker.wire import WireConn
from tests.operator.harness import OperatorUnderTest
from tests.servers import free_port
from tests.operator.rolling import (depth, drains, events, freeze, image_of, nsqd_log, pod, publish, rolled, rollout,
                                    signal_pod, thaw)

pytestmark = pytest.mark.asyncio(loop_scope="module")
SIGKILL = 9


async def retire(operator: OperatorUnderTest, cluster: str) -> None:
    """Delete a finished test's cluster, so that its pods stop loading the next tests."""
    await operator.delete("NsqCluster", cluster)

    async def gone() -> bool:
        return await operator.get("NsqCluster", cluster) is None and await pod(operator, f"{cluster}-nsqd-0") is None
    await operator.until(gone, 40, f"{cluster} and its pods gone")


def assert_metrics_show_the_stuck_roll(operator: OperatorUnderTest, cluster: str, phase: str) -> None:
    """The operator's /metrics, served as the CLI serves it over the operator's own
    Runtime (fed by kopf's index), say which phase the roll is stuck in and since when."""
    server = metrics.serve(f"127.0.0.1:{free_port('127.0.0.1')}", metrics.RolloutCollector(operator.runtime))
    try:
        host, port = server.server_address[:2]
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    stuck = (("cluster", cluster), ("namespace", operator.namespace), ("phase", phase))
    assert samples[("nsq_operator_rollout_in_progress", stuck)] == 1
    assert samples[("nsq_operator_rollout_phase_seconds", stuck)] > 0
    assert samples[("nsq_operator_rollout_failures", stuck[:2])] >= 1
    assert samples[("nsq_operator_clusters", ())] >= 1


def pods_of(cluster: str, nsqds: int) -> list[str]:
    return [f"{cluster}-nsqd-{i}" for i in range(nsqds)]


async def test_a_new_image_rolls_every_pod_highest_ordinal_first_draining_each_nsqd(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "roll", {"image": "nsq:1", "drainTimeoutSeconds": 2,
                                                 "nsqd": {"replicas": 2}, "lookupd": {"replicas": 1}})
    await operator.create("NsqChannel", "roll-audit", {"cluster": "roll", "topic": "orders", "channelName": "audit"})
    await operator.ready("NsqCluster", "roll", timeout=60)
    await operator.ready("NsqChannel", "roll-audit")
    nsqds = pods_of("roll", 2)
    for i, name in enumerate(nsqds):
        publish(operator, name, "orders", [f"{name}-{n}".encode() for n in range(i + 2)])
    before = {name: depth(operator, name, "orders", "audit") for name in nsqds}

    await operator.patch("NsqCluster", "roll", {"spec": {"image": "nsq:2"}})

    await rolled(operator, "roll", ["roll-lookupd-0", "roll-nsqd-1", "roll-nsqd-0"])
    for name in ["roll-lookupd-0", *nsqds]:
        assert image_of(await pod(operator, name) or {}) == "nsq:2", name
    for name in nsqds:  # drained once, by the roller, and back on the same disk with every message
        assert drains(operator, name) == 1, name
        assert depth(operator, name, "orders", "audit") == before[name]
    restarts = await events(operator, "roll", "NewRevision")
    assert sorted(e["message"].split()[1] for e in restarts) == sorted(["roll-lookupd-0", *nsqds])
    assert all("draining it first" in e["message"] for e in restarts if "nsqd" in e["message"].split()[1])
    state = await rollout(operator, "roll")
    assert state.get("error") is None and state["failures"] == 0 and state["targetRevision"]
    await retire(operator, "roll")


async def test_options_and_the_restart_annotation_roll_with_their_own_reasons(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "tune", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1},
                                                 "drainTimeoutSeconds": 2})
    await operator.ready("NsqCluster", "tune", timeout=60)
    lookupd_started = operator.pod_json("tune-lookupd-0", "/info")

    await operator.patch("NsqCluster", "tune", {"spec": {"nsqd": {"options": {"max-rdy-count": 55}}}})
    await rolled(operator, "tune", ["tune-nsqd-0"])  # lookupd's template did not change
    assert operator.pod_json("tune-nsqd-0", "/config/max_rdy_count") == 55
    assert operator.pod_json("tune-lookupd-0", "/info") == lookupd_started
    assert [e["message"].split()[1] for e in await events(operator, "tune", "ConfigChange")] == ["tune-nsqd-0"]

    started = operator.pod_json("tune-nsqd-0", "/stats?format=json")["start_time"]
    await operator.patch("NsqCluster", "tune", {"metadata": {"annotations": {RESTART_ANNOTATION: "first"}}})
    await rolled(operator, "tune", ["tune-lookupd-0", "tune-nsqd-0"])
    assert operator.pod_json("tune-nsqd-0", "/stats?format=json")["start_time"] != started
    assert len(await events(operator, "tune", "ManualRestart")) == 2
    await retire(operator, "tune")


async def test_a_paused_cluster_is_left_alone_until_resumed(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "calm", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1}, "drainTimeoutSeconds": 2})
    await operator.ready("NsqCluster", "calm", timeout=60)
    await operator.patch("NsqCluster", "calm", {"metadata": {"annotations": {PAUSED_ANNOTATION: "true"}}})
    changed = await operator.patch("NsqCluster", "calm", {"spec": {"nsqd": {"replicas": 2, "options": {"max-rdy-count": 9}}}})

    async def paused_seen() -> Any:
        c = await operator.condition("NsqCluster", "calm", "Progressing")
        return c if c and c["reason"] == "Paused" and c.get("observedGeneration") == changed["metadata"]["generation"] else None
    condition = await operator.until(paused_seen, 30, "Paused condition for the new generation")
    assert PAUSED_ANNOTATION in condition["message"] and condition["status"] == "False"
    sts = await operator.core(f"/apis/apps/v1/namespaces/{operator.namespace}/statefulsets/calm-nsqd")
    assert sts["spec"]["replicas"] == 1
    assert operator.pod_json("calm-nsqd-0", "/config/max_rdy_count") != 9

    await operator.patch("NsqCluster", "calm", {"metadata": {"annotations": {PAUSED_ANNOTATION: None}}})
    obj = await rolled(operator, "calm", ["calm-nsqd-0"])
    assert obj["status"]["nsqd"]["readyReplicas"] == 2
    assert operator.pod_json("calm-nsqd-0", "/config/max_rdy_count") == 9
    await retire(operator, "calm")


async def test_a_stuck_drain_stops_the_roll_degraded_until_it_finishes(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "stuck", {"drainTimeoutSeconds": 2,
                                                  "nsqd": {"replicas": 2}, "lookupd": {"replicas": 1}})
    await operator.ready("NsqCluster", "stuck", timeout=60)
    publish(operator, "stuck-nsqd-1", "jobs", [b"held"])
    tcp = operator.pods.tcp("stuck-nsqd-1")
    assert tcp is not None
    with WireConn(tcp) as consumer:  # holds the message in flight: the drain waits for it
        consumer.sub("jobs", "work")
        consumer.expect_ok()
        consumer.rdy(1)
        consumer.read_message()

        await operator.patch("NsqCluster", "stuck", {"spec": {"nsqd": {"options": {"max-rdy-count": 7}}}})

        async def draining() -> bool:
            state = await rollout(operator, "stuck")
            return state.get("phase") == "Draining" and state.get("pod") == "stuck-nsqd-1"
        await operator.until(draining, 60, "stuck-nsqd-1 draining")
        freeze(operator, "stuck-nsqd-1")  # the nsqd hangs mid-drain
        try:
            async def degraded() -> Any:
                c = await operator.condition("NsqCluster", "stuck", "Degraded")
                return c if c and c["status"] == "True" else None
            condition = await operator.until(degraded, 40, "stuck Degraded")
            assert condition["reason"] == "RolloutBlocked"
            assert "stuck-nsqd-1" in condition["message"] and "has not finished" in condition["message"]
            assert (await rollout(operator, "stuck"))["failures"] >= 1
            assert_metrics_show_the_stuck_roll(operator, "stuck", "Draining")
            assert await events(operator, "stuck", "RolloutBlocked")
            assert operator.pod_json("stuck-nsqd-0", "/config/max_rdy_count") != 7  # the roll went no further
        finally:
            thaw(operator, "stuck-nsqd-1")

    await rolled(operator, "stuck", ["stuck-nsqd-1", "stuck-nsqd-0"])
    assert (await operator.condition("NsqCluster", "stuck", "Degraded") or {}).get("status") == "False"
    assert depth(operator, "stuck-nsqd-1", "jobs", "work") == 1  # requeued at the drain timeout, kept on disk
    await retire(operator, "stuck")


async def test_crash_looping_pods_are_replaced_without_a_drain(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "crash", {"image": "nsq:1", "drainTimeoutSeconds": 2,
                                                  "nsqd": {"replicas": 1}, "lookupd": {"replicas": 1}})
    await operator.ready("NsqCluster", "crash", timeout=60)

    # an nsqd that died and does not come back is replaced at once, not drained
    signal_pod(operator, "crash-nsqd-0", SIGKILL)
    await operator.patch("NsqCluster", "crash", {"spec": {"image": "nsq:2"}})
    await rolled(operator, "crash", ["crash-nsqd-0", "crash-lookupd-0"])  # the stuck pod first
    stuck = await events(operator, "crash", "StuckPod")
    assert [e["message"].split()[1] for e in stuck] == ["crash-nsqd-0"] and "CrashLoopBackOff" in stuck[0]["message"]
    assert drains(operator, "crash-nsqd-0") == 0

    # a new image whose pods never get Ready stops the roll at its first pod
    await operator.patch("NsqCluster", "crash", {"spec": {"image": "nsq:crashloop"}})

    async def degraded() -> Any:
        c = await operator.condition("NsqCluster", "crash", "Degraded")
        return c if c and c["status"] == "True" else None
    condition = await operator.until(degraded, 60, "crash Degraded")
    assert "crash-lookupd-0 is not Ready" in condition["message"]
    assert image_of(await pod(operator, "crash-nsqd-0") or {}) == "nsq:2"  # the roll went no further

    # back to a good image: the crash-looping pod is replaced without waiting for it
    await operator.patch("NsqCluster", "crash", {"spec": {"image": "nsq:2"}})
    await rolled(operator, "crash", ["crash-lookupd-0"])
    assert [e["message"].split()[1] for e in await events(operator, "crash", "StuckPod")] == \
        ["crash-nsqd-0", "crash-lookupd-0"]
    assert (await operator.condition("NsqCluster", "crash", "Degraded") or {}).get("status") == "False"


async def test_an_evicted_nsqd_drains_itself_within_its_grace_period(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "evict", {"drainTimeoutSeconds": 2, "nsqd": {"replicas": 1},
                                                  "lookupd": {"replicas": 1}})
    await operator.ready("NsqCluster", "evict", timeout=60)
    publish(operator, "evict-nsqd-0", "jobs", [b"in-flight", b"waiting"])
    tcp = operator.pods.tcp("evict-nsqd-0")
    assert tcp is not None
    with WireConn(tcp) as consumer:
        consumer.sub("jobs", "work")
        consumer.expect_ok()
        consumer.rdy(1)
        consumer.read_message()
        # what `kubectl drain` does: delete the pod, nothing else (no POST /drain)
        async with operator.session.delete(f"{operator.api}/api/v1/namespaces/{operator.namespace}/pods/evict-nsqd-0") as r:
            assert r.status < 400

        async def replaced() -> bool:
            found = await pod(operator, "evict-nsqd-0")
            return bool(found) and not found["metadata"].get("deletionTimestamp") and any(
                c["type"] == "Ready" and c["status"] == "True" for c in found["status"]["conditions"])
        await operator.until(replaced, 60, "evict-nsqd-0 replaced and Ready")
    log = nsqd_log(operator, "evict-nsqd-0")
    assert drains(operator, "evict-nsqd-0") == 1 and "DRAIN: done" in log  # on SIGTERM, before any SIGKILL
    assert depth(operator, "evict-nsqd-0", "jobs", "work") == 2  # the one in flight was requeued and kept
    await retire(operator, "evict")
