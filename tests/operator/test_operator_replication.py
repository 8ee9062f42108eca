"""Replicated topics under kopf against the emulator and the test kubelet's real nsqds
(each pod's replication address and peer list mapped to its loopback address, which its
replacement keeps): the flags on the StatefulSet, status from every nsqd's GET
/replication on the NsqCluster and the NsqTopic, a pod deleted with its claim replaced
while its backup delivers its messages, a roll that waits for every copy to be in place
before the next nsqd goes down, and a scale-up and a scale-down that move the copies
before a pod leaves."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.operator.harness import OperatorUnderTest
from tests.operator.rolling import bodies, consume_all, events, pod, publish, rolled, rollout

pytestmark = pytest.mark.asyncio(loop_scope="module")

# a new nsqd is silent for two failover timeouts: long enough here to outlast its way to
# Ready on a loaded machine, so that the roll is seen waiting for the copies alone
REPLICATION = {"replicas": 2, "timeout": "3s", "failoverTimeout": "8s"}


def spec(replication: dict[str, Any] = REPLICATION, **extra: Any) -> dict[str, Any]:
    return {"drainTimeoutSeconds": 2, "lookupd": {"replicas": 1},
            "nsqd": {"replicas": 3, "replication": replication}, **extra}


def nsqds(cluster: str) -> list[str]:
    return [f"{cluster}-nsqd-{i}" for i in range(3)]


async def statefulset(operator: OperatorUnderTest, name: str) -> dict[str, Any]:
    found: dict[str, Any] = await operator.core(f"/apis/apps/v1/namespaces/{operator.namespace}/statefulsets/{name}")
    return found


async def delete_core(operator: OperatorUnderTest, plural: str, name: str) -> None:
    status, answer = await operator.attempt("DELETE", f"{operator.api}/api/v1/namespaces/{operator.namespace}/"
                                                      f"{plural}/{name}")
    assert status < 300, (plural, name, status, answer)


async def copies_in_sync(operator: OperatorUnderTest, kind: str, name: str, status_of: Any) -> dict[str, Any]:
    """The object once Ready, with every copy in sync in its replication status."""
    async def probe() -> dict[str, Any] | None:
        obj = await operator.ready(kind, name, timeout=60)
        found = status_of(obj["status"]) or {}
        assert found.get("inSync") == 6 and found.get("missing") == 0, found
        return obj
    return await operator.until(probe, 60, f"{kind} {name} with every copy in sync")


async def retire(operator: OperatorUnderTest, cluster: str) -> None:
    await operator.delete("NsqCluster", cluster)

    async def gone() -> bool:
        return await operator.get("NsqCluster", cluster) is None and await pod(operator, f"{cluster}-nsqd-0") is None
    await operator.until(gone, 60, f"{cluster} and its pods gone")


async def test_a_pod_deleted_with_its_claim_comes_back_while_its_backup_delivers_its_messages(
        operator: OperatorUnderTest) -> None:
    # no roll here, so a short failover timeout: the adoption and the replacement's silent
    # start (two failover timeouts) are most of this test's time
    await operator.create("NsqCluster", "rep", spec({**REPLICATION, "failoverTimeout": "3s"}))
    await operator.create("NsqTopic", "rep-orders", {"cluster": "rep", "topicName": "orders"})
    await operator.create("NsqChannel", "rep-audit", {"cluster": "rep", "topic": "orders", "channelName": "audit"})

    cluster = await copies_in_sync(operator, "NsqCluster", "rep", lambda s: s["nsqd"].get("replication"))
    args = (await statefulset(operator, "rep-nsqd"))["spec"]["template"]["spec"]["containers"][0]["args"]
    peers = ",".join(f"rep-nsqd-{i}.rep-nsqd-headless.{operator.namespace}.svc:4153" for i in range(3))
    assert f"--replication-peer={peers}" in args and "--topic-replicas=2" in args
    assert f"--replication-address=$(POD_NAME).rep-nsqd-headless.{operator.namespace}.svc:4153" in args
    headless = await operator.core(f"/api/v1/namespaces/{operator.namespace}/services/rep-nsqd-headless")
    assert {"name": "replication", "port": 4153, "targetPort": "replication", "protocol": "TCP"} in \
        headless["spec"]["ports"]
    rows = {row["pod"]: row for row in cluster["status"]["nsqd"]["replication"]["owners"]}
    # every nsqd's copies on itself and on the next ordinal (wrapping round)
    assert {p: r["inSync"] for p, r in rows.items()} == {
        "rep-nsqd-0": ["rep-nsqd-0", "rep-nsqd-1"], "rep-nsqd-1": ["rep-nsqd-1", "rep-nsqd-2"],
        "rep-nsqd-2": ["rep-nsqd-2", "rep-nsqd-0"]}
    topic = await copies_in_sync(operator, "NsqTopic", "rep-orders", lambda s: s.get("replication"))
    assert topic["status"]["replication"]["replicas"] == 2
    await operator.ready("NsqChannel", "rep-audit")
    assert "replication" not in ((await operator.get("NsqChannel", "rep-audit"))["status"])

    sent = bodies("rep-nsqd-0", 40)
    publish(operator, "rep-nsqd-0", "orders", sent)  # each answered once rep-nsqd-1 holds a copy
    address_0 = _peer_address(operator, 0)
    await delete_core(operator, "persistentvolumeclaims", "data-rep-nsqd-0")
    await delete_core(operator, "pods", "rep-nsqd-0")

    async def lost_seen() -> bool:  # the cluster and the topic say the copies are not all there
        obj = await operator.get("NsqCluster", "rep")
        found = obj["status"]["nsqd"].get("replication") or {}
        ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
        return found.get("missing", 0) > 0 and ready["status"] == "False"
    await operator.until(lost_seen, 30, "the missing copies reported")

    def adopted() -> int:
        return int(operator.pod_json("rep-nsqd-1", "/replication")["adopted"].get(address_0, 0))
    await operator.until(lambda: _now(adopted() == 40), 60, "rep-nsqd-1 adopting the messages of rep-nsqd-0")
    assert sorted(consume_all(operator, "rep-nsqd-1", "orders", "audit")) == sorted(sent)

    replaced = await copies_in_sync(operator, "NsqCluster", "rep", lambda s: s["nsqd"].get("replication"))
    assert replaced["status"]["nsqd"]["readyReplicas"] == 3
    claim = await operator.core(f"/api/v1/namespaces/{operator.namespace}/persistentvolumeclaims/data-rep-nsqd-0")
    assert claim is not None  # the replacement runs on a new claim, under the same name and address
    await copies_in_sync(operator, "NsqTopic", "rep-orders", lambda s: s.get("replication"))


async def test_the_nsqds_scale_up_and_down_with_their_copies_moved_first_and_no_pod_restarted(
        operator: OperatorUnderTest) -> None:
    """3 to 4: the new pod starts with the list of four, the others are given it live and
    rep-nsqd-2's copies move to rep-nsqd-3. 4 to 3: the list of three is given first, and
    rep-nsqd-3 is handed off and removed only once rep-nsqd-2's copies are back on
    rep-nsqd-0; what rep-nsqd-3 accepted is handed off, and its backup forgets its copies,
    so every message is delivered once. No pod restarts for the list."""
    before = {p: (await pod(operator, p))["metadata"]["uid"] for p in nsqds("rep")}
    await operator.patch("NsqCluster", "rep", {"spec": {"nsqd": {"replicas": 4}}})

    async def four() -> dict[str, Any]:
        obj = await operator.ready("NsqCluster", "rep", timeout=90)
        found = obj["status"]["nsqd"].get("replication") or {}
        assert (found.get("inSync"), found.get("missing")) == (8, 0), found
        return obj
    await operator.until(four, 90, "four nsqds with every copy in sync")
    address = {i: _peer_address(operator, i) for i in range(4)}
    args = (await statefulset(operator, "rep-nsqd"))["spec"]["template"]["spec"]["containers"][0]["args"]
    (epoch,) = [int(a.split("=", 1)[1]) for a in args if a.startswith("--replication-membership-epoch=")]
    for p in [*nsqds("rep"), "rep-nsqd-3"]:
        peers = operator.pod_json(p, "/replication/peers")
        assert (peers["epoch"], peers["peers"], peers["settled"]) == (epoch, list(address.values()), epoch), \
            (p, peers)
    assert {p: (await pod(operator, p))["metadata"]["uid"] for p in nsqds("rep")} == before
    sent = {name: bodies(f"scaled-{name}", 20) for name in [*nsqds("rep"), "rep-nsqd-3"]}
    for name, messages in sent.items():
        publish(operator, name, "orders", messages)

    def held(holder: str, owner: int) -> int:
        return int(operator.pod_json(holder, "/replication")["held_topics"].get(address[owner], {}).get("orders", 0))
    await operator.until(lambda: _now(held("rep-nsqd-3", 2) >= 20 and held("rep-nsqd-0", 2) == 0), 30,
                         "rep-nsqd-2's copies on rep-nsqd-3 only")

    at_handoff: dict[str, int] = {}
    watching = True

    async def watch() -> None:
        while watching:
            state = await rollout(operator, "rep")
            if state.get("phase") == "HandingOff" and not at_handoff:
                at_handoff["rep-nsqd-0 holds of rep-nsqd-2"] = held("rep-nsqd-0", 2)
            await asyncio.sleep(0.05)
    watcher = asyncio.create_task(watch())
    try:
        await operator.patch("NsqCluster", "rep", {"spec": {"nsqd": {"replicas": 3}}})

        async def three() -> dict[str, Any]:
            obj = await operator.ready("NsqCluster", "rep", timeout=90)
            assert obj["status"]["nsqd"]["replicas"] == 3 and await pod(operator, "rep-nsqd-3") is None
            return obj
        await operator.until(three, 120, "three nsqds again")
    finally:
        watching = False
        await watcher
    assert at_handoff == {"rep-nsqd-0 holds of rep-nsqd-2": 20}, "rep-nsqd-3 was taken out before the copies moved"
    # rep-nsqd-3's backup forgot what it handed off: nothing of it is delivered twice
    assert held("rep-nsqd-0", 3) == 0
    delivered: list[bytes] = []
    for name in nsqds("rep"):
        delivered += consume_all(operator, name, "orders", "audit")
    assert sorted(delivered) == sorted(b for messages in sent.values() for b in messages)
    assert {p: (await pod(operator, p))["metadata"]["uid"] for p in nsqds("rep")} == before
    assert not await events(operator, "rep", "NewRevision")
    await copies_in_sync(operator, "NsqCluster", "rep", lambda s: s["nsqd"].get("replication"))
    # the CRD's rule: no more copies than nsqds
    status, answer = await operator.attempt(
        "PATCH", f"{operator.api}/apis/nsq.dev/v1alpha1/namespaces/{operator.namespace}/nsqclusters/rep",
        {"spec": {"nsqd": {"replicas": 1}}}, "application/merge-patch+json")
    assert status == 422 and "cannot be above replicas" in json.dumps(answer), (status, answer)
    operator.backstage.take_rejections()


async def test_a_roll_takes_the_next_nsqd_down_only_once_every_copy_is_back_in_place(
        operator: OperatorUnderTest) -> None:
    """rep-nsqd-2, rolled first, comes back on a new (empty) claim: a new nsqd stays silent
    towards its peers for two failover timeouts, Ready all the while, so only the copies
    hold the roll back; no two nsqds are ever down at once, and every message published
    before is delivered (rep-nsqd-2's own by its backup, rep-nsqd-0)."""
    sent = {name: bodies(name, 20) for name in nsqds("rep")}
    for name, messages in sent.items():
        publish(operator, name, "orders", messages)
    await delete_core(operator, "persistentvolumeclaims", "data-rep-nsqd-2")  # its pod keeps the volume until gone
    seen: list[tuple[str, str | None, str]] = []  # (phase, pod, message and error)
    down_at_once = 0
    heard_when_next_drained: dict[str, Any] = {}
    watching = True

    async def watch() -> None:
        nonlocal down_at_once
        while watching:
            state = await rollout(operator, "rep")
            entry = (str(state.get("phase")), state.get("pod"), f"{state.get('message')} {state.get('error')}")
            if not seen or seen[-1] != entry:
                seen.append(entry)
            if entry[:2] == ("Draining", "rep-nsqd-1") and not heard_when_next_drained:
                heard_when_next_drained.update(
                    {p: operator.pod_json(p, "/replication")["peers"] for p in ("rep-nsqd-0", "rep-nsqd-2")})
            ready = [_ready(await pod(operator, name)) for name in nsqds("rep")]
            down_at_once = max(down_at_once, ready.count(False))
            await asyncio.sleep(0.05)
    watcher = asyncio.create_task(watch())
    try:
        await operator.patch("NsqCluster", "rep", {"spec": {"image": "nsq:2"}})
        await rolled(operator, "rep", ["rep-lookupd-0", "rep-nsqd-2", "rep-nsqd-1", "rep-nsqd-0"], timeout=150)
    finally:
        watching = False
        await watcher
    assert down_at_once == 1
    held = [m for phase, name, m in seen if phase == "Replacing" and name == "rep-nsqd-2"
            and ("waiting for the copies of replicated topics to be in place" in m
                 or "is Ready but its copies are not all in place" in m)]
    assert held, seen
    assert all("rep-nsqd-2" in m for m in held), held  # what the replaced nsqd's silence leaves out
    assert all(peer["alive"] for peers in heard_when_next_drained.values() for peer in peers), heard_when_next_drained
    after = seen.index(next(e for e in seen if e[:2] == ("Draining", "rep-nsqd-1")))
    assert after > seen.index(next(e for e in seen if e[2] == held[-1]))
    await copies_in_sync(operator, "NsqCluster", "rep", lambda s: s["nsqd"].get("replication"))

    delivered: list[bytes] = []
    for name in nsqds("rep"):
        delivered += consume_all(operator, name, "orders", "audit")
    missing = {b for messages in sent.values() for b in messages} - set(delivered)
    assert not missing, sorted(missing)[:5]  # at least once: a restart past the failover timeout adds duplicates
    restarts = await events(operator, "rep", "NewRevision")
    assert len(restarts) == 4
    await retire(operator, "rep")


def _ready(found: dict[str, Any] | None) -> bool:
    conditions = ((found or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) \
        and not (found or {}).get("metadata", {}).get("deletionTimestamp")


async def _now(value: Any) -> Any:
    return value


def _peer_address(operator: OperatorUnderTest, ordinal: int) -> str:
    """The address nsqd knows a peer by (the kubelet's loopback address for its DNS name):
    peers are listed in ordinal order."""
    return str(operator.pod_json("rep-nsqd-1", "/replication")["peers"][ordinal]["peer"])


async def test_replication_turned_on_and_off_rolls_the_nsqds_without_waiting_for_copies_that_cannot_exist(
        operator: OperatorUnderTest) -> None:
    """While a roll turns replication on, the nsqds not restarted yet have no copies to
    wait for (and turning it off leaves none): the roll goes through, then the copies are
    reported; once off, the status says nothing of replication."""
    await operator.create("NsqCluster", "turn", {"drainTimeoutSeconds": 2, "lookupd": {"replicas": 1},
                                                 "nsqd": {"replicas": 2}})
    plain = await operator.ready("NsqCluster", "turn", timeout=60)
    assert "replication" not in plain["status"]["nsqd"]

    await operator.patch("NsqCluster", "turn", {"spec": {"nsqd": {"replication": {"replicas": 2,
                                                                                  "failoverTimeout": "1s"}}}})
    await rolled(operator, "turn", ["turn-nsqd-1", "turn-nsqd-0"], timeout=120)

    async def on() -> dict[str, Any]:
        obj = await operator.ready("NsqCluster", "turn", timeout=60)
        found = obj["status"]["nsqd"].get("replication") or {}
        assert (found.get("replicas"), found.get("inSync"), found.get("missing")) == (2, 4, 0), found
        return obj
    await operator.until(on, 60, "turn with its copies in sync")

    await operator.patch("NsqCluster", "turn", {"spec": {"nsqd": {"replication": {"replicas": 1}}}})
    await rolled(operator, "turn", ["turn-nsqd-1", "turn-nsqd-0"], timeout=120)

    async def off() -> dict[str, Any]:
        obj = await operator.ready("NsqCluster", "turn", timeout=60)
        assert "replication" not in obj["status"]["nsqd"], obj["status"]["nsqd"]
        return obj
    await operator.until(off, 60, "turn without replication")
    args = (await statefulset(operator, "turn-nsqd"))["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [a for a in args if a.startswith(("--replication", "--topic-replicas"))]
    await retire(operator, "turn")
