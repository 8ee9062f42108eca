"""An NsqTopic's own number of copies (spec.replicas) under kopf against the emulator and
the test kubelet's real nsqds: in a cluster whose default is one copy (replication
perTopic), a topic asking for 3 is created with 3 on every nsqd (read back from each
nsqd's GET /replication), its status counts 3 copies per nsqd, a topic without the field
gets the cluster's default, and a count above the cluster's nsqds is reported, not
applied. The schema refuses a count outside 1..5. A topic holding messages goes down to
one copy and back up with them copied; an ephemeral topic's copies are refused."""
from __future__ import annotations

from typing import Any, Awaitable, Callable

import pytest

from tests.operator.harness import OperatorUnderTest

pytestmark = pytest.mark.asyncio(loop_scope="module")

PODS = [f"per-nsqd-{i}" for i in range(3)]


def safe_in_sync_of(operator: OperatorUnderTest) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    async def safe_in_sync() -> dict[str, Any] | None:
        obj = await operator.ready("NsqTopic", "per-safe", timeout=60)
        found = obj["status"].get("replication") or {}
        assert found.get("replicas") == 3 and found.get("inSync") == 9 and found.get("missing") == 0, found
        return obj
    return safe_in_sync


async def test_a_topic_asking_for_three_copies_in_a_cluster_of_one_gets_them_on_every_nsqd(
        operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "per", {
        "drainTimeoutSeconds": 2, "lookupd": {"replicas": 1},
        "nsqd": {"replicas": 3, "replication": {"replicas": 1, "perTopic": True, "timeout": "3s"}}})
    await operator.create("NsqTopic", "per-safe", {"cluster": "per", "topicName": "safe", "replicas": 3})
    await operator.create("NsqTopic", "per-plain", {"cluster": "per", "topicName": "plain"})
    await operator.create("NsqTopic", "per-wide", {"cluster": "per", "topicName": "wide", "replicas": 4})

    safe = await operator.until(safe_in_sync_of(operator), 90, "per-safe with its 3 copies of every nsqd in sync")
    rows = {row["pod"]: row["inSync"] for row in safe["status"]["replication"]["owners"]}
    assert rows == {"per-nsqd-0": PODS, "per-nsqd-1": ["per-nsqd-1", "per-nsqd-2", "per-nsqd-0"],
                    "per-nsqd-2": ["per-nsqd-2", "per-nsqd-0", "per-nsqd-1"]}

    plain = await operator.ready("NsqTopic", "per-plain", timeout=60)
    assert plain["status"]["replication"]["replicas"] == 1
    assert plain["status"]["replication"]["inSync"] == 3  # each nsqd's own copy, nothing more
    for pod in PODS:  # what each nsqd was told, as it says it
        counts = operator.pod_json(pod, "/replication")["topic_replicas"]
        assert counts["safe"] == 3 and counts["plain"] == 1, (pod, counts)
        assert "wide" not in counts or counts["wide"] == 1, (pod, counts)

    async def wide_refused() -> dict[str, Any] | None:
        c = await operator.condition("NsqTopic", "per-wide", "Degraded")
        return c if c and c["status"] == "True" and c["reason"] == "ReplicasNotApplied" else None
    condition = await operator.until(wide_refused, 30, "per-wide's count reported as not applied")
    assert "spec.replicas 4 is above the 3 nsqds" in condition["message"]

    status, answer = await operator.attempt("POST", operator._path("NsqTopic"), {
        "apiVersion": "nsq.dev/v1alpha1", "kind": "NsqTopic",
        "metadata": {"name": "per-six", "namespace": operator.namespace},
        "spec": {"cluster": "per", "replicas": 6}})
    assert status == 422, (status, answer)  # the schema's maximum
    assert [r["error"] for r in operator.backstage.take_rejections()] == [
        "NsqTopic per-six: spec.replicas: 6 is greater than the maximum of 5"]


async def test_a_held_topic_goes_down_to_one_copy_and_back_up_to_three_with_its_messages_copied(
        operator: OperatorUnderTest) -> None:
    """per-safe (3 copies, from the test above) holds 20 messages on per-nsqd-0: lowered to
    1, every nsqd applies it and the backups forget the copies; raised to 3 again while
    the messages wait, per-nsqd-0 reads them back from its queue and both backups hold
    them again. An ephemeral topic asking for copies is refused by the nsqds, and the
    NsqTopic says so, naming them."""
    for i in range(20):
        assert operator.pod_call("per-nsqd-0", "POST", "/pub?topic=safe", b"m%d" % i)[0] == 200

    owner = operator.pod_json("per-nsqd-0", "/replication")["node"]

    def copies_of_nsqd_0(pod: str) -> int:
        return operator.pod_json(pod, "/replication")["held_topics"].get(owner, {}).get("safe", 0)

    async def both_backups_hold_them() -> bool | None:
        return copies_of_nsqd_0("per-nsqd-1") == 20 == copies_of_nsqd_0("per-nsqd-2") or None
    await operator.until(both_backups_hold_them, 30, "both backups hold the 20 copies")

    await operator.patch("NsqTopic", "per-safe", {"spec": {"replicas": 1}})

    async def one_copy_everywhere() -> bool | None:
        counts = [operator.pod_json(pod, "/replication")["topic_replicas"].get("safe") for pod in PODS]
        return (counts == [1, 1, 1] and copies_of_nsqd_0("per-nsqd-1") == 0 == copies_of_nsqd_0("per-nsqd-2")) or None
    await operator.until(one_copy_everywhere, 60, "1 copy of safe on every nsqd, the backups' copies forgotten")
    lowered = await operator.ready("NsqTopic", "per-safe", timeout=60)
    assert lowered["status"]["replication"]["replicas"] == 1
    assert operator.topic_on("per-nsqd-0", "safe")["depth"] == 20  # type: ignore[index]

    await operator.patch("NsqTopic", "per-safe", {"spec": {"replicas": 3}})

    async def three_everywhere_and_copied() -> bool | None:
        counts = [operator.pod_json(pod, "/replication")["topic_replicas"].get("safe") for pod in PODS]
        return (counts == [3, 3, 3] and copies_of_nsqd_0("per-nsqd-1") == 20 == copies_of_nsqd_0("per-nsqd-2")) or None
    await operator.until(three_everywhere_and_copied, 60, "3 copies of safe, the 20 held copied to both backups")
    await operator.until(safe_in_sync_of(operator), 60, "per-safe with its 3 copies of every nsqd in sync")
    assert operator.topic_on("per-nsqd-0", "safe")["depth"] == 20  # type: ignore[index]

    await operator.create("NsqTopic", "per-fleeting", {"cluster": "per", "topicName": "fleeting#ephemeral",
                                                       "replicas": 2})

    async def refused() -> dict[str, Any] | None:
        c = await operator.condition("NsqTopic", "per-fleeting", "Degraded")
        return c if c and c["status"] == "True" and c["reason"] == "ReplicasRefused" else None
    condition = await operator.until(refused, 60, "copies of an ephemeral topic refused by the nsqds")
    assert all(pod in condition["message"] for pod in PODS), condition
    assert "never replicated" in condition["message"], condition
