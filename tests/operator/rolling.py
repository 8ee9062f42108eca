"""What the roller tests look at: status.rollout, the cluster's Events, pods and the
logs and processes of the kubelet's nsqds."""
from __future__ import annotations

import os
import signal
from typing import Any

from tests.broker.wire import WireConn
from tests.operator.harness import OperatorUnderTest


async def rollout(operator: OperatorUnderTest, cluster: str) -> dict[str, Any]:
    return dict(((await operator.get("NsqCluster", cluster)) or {}).get("status", {}).get("rollout") or {})


async def rolled(operator: OperatorUnderTest, cluster: str, replaced: list[str], timeout: float = 90) -> dict[str, Any]:
    """Wait until the roll replaced exactly ``replaced`` (in that order), is over, and the
    cluster is Ready again; returns the cluster."""
    async def done() -> dict[str, Any]:
        state = await rollout(operator, cluster)
        assert state.get("replaced") == replaced and state.get("phase") == "Complete", state
        return state
    await operator.until(done, timeout, f"{cluster} rolled {replaced}")
    return await operator.ready("NsqCluster", cluster, timeout=timeout)


async def events(operator: OperatorUnderTest, cluster: str, reason: str | None = None) -> list[dict[str, Any]]:
    items = (await operator.core(f"/api/v1/namespaces/{operator.namespace}/events") or {}).get("items", [])
    return [e for e in items if e.get("involvedObject", {}).get("name") == cluster
            and e.get("involvedObject", {}).get("kind") == "NsqCluster" and (reason is None or e.get("reason") == reason)]


async def pod(operator: OperatorUnderTest, name: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = await operator.core(f"/api/v1/namespaces/{operator.namespace}/pods/{name}")
    return found


def image_of(pod_: dict[str, Any]) -> str:
    return str(pod_["spec"]["containers"][0]["image"])


def nsqd_log(operator: OperatorUnderTest, pod_: str) -> str:
    """Everything the pod's nsqds wrote, replacements included (they share the work dir)."""
    try:
        return (operator.backstage.root / pod_ / "nsqd.log").read_text(errors="replace")
    except FileNotFoundError:
        return ""


def drains(operator: OperatorUnderTest, pod_: str) -> int:
    return nsqd_log(operator, pod_).count("DRAIN: started")


def signal_pod(operator: OperatorUnderTest, pod_: str, sig: int) -> None:
    pid = operator.pods.pid(pod_)
    assert pid is not None, f"{pod_} runs no process"
    os.kill(pid, sig)


def freeze(operator: OperatorUnderTest, pod_: str) -> None:
    signal_pod(operator, pod_, signal.SIGSTOP)


def thaw(operator: OperatorUnderTest, pod_: str) -> None:
    signal_pod(operator, pod_, signal.SIGCONT)


def publish(operator: OperatorUnderTest, pod_: str, topic: str, bodies: list[bytes]) -> None:
    for body in bodies:
        status, answer = operator.pod_call(pod_, "POST", f"/pub?topic={topic}", body)
        assert status == 200, (pod_, status, answer)


def depth(operator: OperatorUnderTest, pod_: str, topic: str, channel: str) -> int:
    found = operator.channel_on(pod_, topic, channel)
    return int(found["depth"]) if found else 0


def bodies(pod_: str, count: int) -> list[bytes]:
    return [f"{pod_}-{n}".encode() for n in range(count)]


def consume_all(operator: OperatorUnderTest, pod_: str, topic: str, channel: str) -> list[bytes]:
    """Every message waiting in the channel on that nsqd, finished one by one."""
    waiting = depth(operator, pod_, topic, channel)
    tcp = operator.pods.tcp(pod_)
    assert tcp is not None
    with WireConn(tcp) as consumer:
        consumer.sub(topic, channel)
        consumer.expect_ok()
        consumer.rdy(max(waiting, 1))
        messages = consumer.read_messages(waiting, timeout=20) if waiting else []
        for message in messages:
            consumer.fin(message.id)
        consumer.nop()
    return [m.body for m in messages]


async def statefulset_replicas(operator: OperatorUnderTest, name: str) -> int:
    sts = await operator.core(f"/apis/apps/v1/namespaces/{operator.namespace}/statefulsets/{name}")
    return int(sts["spec"]["replicas"])


async def scaled_to(operator: OperatorUnderTest, cluster: str, replicas: int, timeout: float = 90) -> None:
    async def done() -> bool:
        state = await rollout(operator, cluster)
        assert state.get("phase") == "Complete" and not state.get("error"), (state.get("message"), state.get("error"))
        assert await statefulset_replicas(operator, f"{cluster}-nsqd") == replicas
        assert await pod(operator, f"{cluster}-nsqd-{replicas}") is None
        return True
    await operator.until(done, timeout, f"{cluster} scaled down to {replicas}")
    await operator.ready("NsqCluster", cluster, timeout=timeout)
