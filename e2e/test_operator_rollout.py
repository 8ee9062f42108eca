"""The operator's promise under load, on the emulated API server with a test kubelet that
runs a real nsqd or nsqlookupd behind every pod: a 3-nsqd/2-lookupd NsqCluster with its
topics and channels is loaded by our producer pool and consumers (through lookupd) and by
pynsq Readers; its image is changed, and every nsqd pod is replaced, highest ordinal
first, without losing one acknowledged message on any channel (duplicates are counted and
reported); then nsqd is scaled 3 -> 2 under the same load, and still nothing is lost.

Clients reach pods as in Kubernetes: by the DNS names lookupd hands out (resolved through
the kubelet's address book, :mod:`e2e.pod_dns`) and by stable per-pod addresses
(:mod:`e2e.pod_ports`) standing in for ``<pod>.<service>:<port>``."""
from __future__ import annotations

import asyncio
import inspect
import time
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio

from e2e.pod_dns import child_environment, pod_of, resolving_pods
from e2e.pod_ports import PodPorts
from e2e.pynsq_consumers import PynsqConsumers
from nsq_local.kubeload import DiscoveringLoad, render, summary
from nsq_local.ledger import Ledger
from nsq_local.options import LoadOptions
from tests.operator.harness import Backstage, OperatorUnderTest

pytestmark = pytest.mark.slow

NS = "nsq-e2e"
CLUSTER = "roll"
NSQDS = [f"{CLUSTER}-nsqd-{i}" for i in range(3)]
LOOKUPDS = [f"{CLUSTER}-lookupd-{i}" for i in range(2)]
TOPICS = ["orders", "clicks"]
OUR_CHANNELS = ["billing", "archive"]  # consumed by nsq_client consumers
PYNSQ_CHANNEL = "audit"                # consumed by pynsq Readers
NEW_IMAGE = "nsq-operator:0.2.0"
ROLL_TIMEOUT = 90.0
SCALE_TIMEOUT = 60.0
SETTLE_TIMEOUT = 30.0
POLL = 0.1  # how often the pod watcher lists pods (a polling period, not a synchronisation)


@pytest_asyncio.fixture
async def operator(tmp_path: Path) -> AsyncIterator[OperatorUnderTest]:
    backstage = Backstage(tmp_path / "pods", NS)
    (tmp_path / "pods").mkdir()
    backstage.start()
    running = OperatorUnderTest(backstage, NS)
    try:
        await running.start()
        yield running
    finally:
        await running.stop()
        backstage.stop()
        if backstage.kubelet_errors:
            print("test kubelet errors:", *backstage.kubelet_errors, sep="\n  ")


class PodWatch:
    """Which pods of the cluster were replaced (same name, new uid), in order, and what
    each pod runs; lists the pods every :data:`POLL` seconds."""

    def __init__(self, operator: OperatorUnderTest, cluster: str = CLUSTER) -> None:
        self.operator, self.cluster = operator, cluster
        self.replaced: list[str] = []
        self._uids: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None

    async def pods(self) -> dict[str, dict[str, Any]]:
        listing = await self.operator.core(f"/api/v1/namespaces/{NS}/pods") or {}
        return {p["metadata"]["name"]: p for p in listing.get("items", [])
                if p["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == self.cluster}

    async def _look(self) -> None:
        for name, pod in (await self.pods()).items():
            uid = pod["metadata"]["uid"]
            if name in self._uids and self._uids[name] != uid:
                self.replaced.append(name)
            self._uids[name] = uid

    async def _run(self) -> None:
        while True:
            await self._look()
            await asyncio.sleep(POLL)

    async def start(self) -> None:
        await self._look()
        self._task = asyncio.create_task(self._run(), name="pod-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) and \
        not pod["metadata"].get("deletionTimestamp")


async def until(what: str, timeout: float, check: Callable[[], Awaitable[object] | object],
                state: Callable[[], Awaitable[str]] | None = None) -> None:
    """Wait until ``check`` holds; AssertionError after ``timeout`` s, with ``state()``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if await result if inspect.isawaitable(result) else result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g}s" + (f"\n{await state()}" if state else ""))
        await asyncio.sleep(0.05)


def cluster_state(operator: OperatorUnderTest, watch: "PodWatch") -> Callable[[], Awaitable[str]]:
    """What the cluster looks like, for a failed wait: pods, status, replacements."""
    async def describe() -> str:
        pods = await watch.pods()
        lines = [f"  {name}: {p['spec']['containers'][0]['image']} ready={_ready(p)} "
                 f"deleting={bool(p['metadata'].get('deletionTimestamp'))}" for name, p in sorted(pods.items())]
        status = ((await operator.get("NsqCluster", watch.cluster)) or {}).get("status")
        return "\n".join(["pods:", *lines, f"replaced so far: {watch.replaced}", f"status: {status}"])
    return describe


def pods_delivering(ledger: Ledger, phase: str) -> set[str]:
    """The pods whose nsqd delivered messages to our consumers or pynsq during ``phase``."""
    return {pod_of(address.rsplit(":", 1)[0]) or address for address in ledger.deliveries_by_node(phase)}


def acknowledged_in(ledger: Ledger, phase: str) -> int:
    return next((p.acknowledged for p in ledger.tally().phases if p.name == phase), 0)


def serving(ledger: Ledger, phase: str, pods: list[str]) -> Callable[[], bool]:
    """Publishes acknowledged and every one of ``pods`` delivering during ``phase``."""
    return lambda: pods_delivering(ledger, phase) == set(pods) and acknowledged_in(ledger, phase) > 0


async def _create_cluster(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", CLUSTER, {
        "nsqd": {"replicas": 3, "options": {"msg-timeout": "10s"}},
        "lookupd": {"replicas": 2}, "drainTimeoutSeconds": 10})
    channels = []
    for topic in TOPICS:
        await operator.create("NsqTopic", f"{CLUSTER}-{topic}", {"cluster": CLUSTER, "topicName": topic})
        for channel in OUR_CHANNELS + [PYNSQ_CHANNEL]:
            name = f"{CLUSTER}-{topic}-{channel}"
            await operator.create("NsqChannel", name, {"cluster": CLUSTER, "topic": topic, "channelName": channel})
            channels.append(name)
    await operator.ready("NsqCluster", CLUSTER, timeout=60)
    for name in channels:
        await operator.ready("NsqChannel", name, timeout=30)


@pytest.mark.timeout(240)
async def test_image_roll_then_scale_down_under_load_loses_no_acknowledged_message(
        operator: OperatorUnderTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    await _create_cluster(operator)
    book = operator.pods.path
    watch = PodWatch(operator)
    await watch.start()
    ledger = Ledger(TOPICS, OUR_CHANNELS + [PYNSQ_CHANNEL], first_phase="before")
    options = LoadOptions(topics=TOPICS, channels=OUR_CHANNELS, rate=150, batch=5, max_in_flight=50,
                          lookupd_poll_interval=0.5)
    for name, value in child_environment(book).items():
        monkeypatch.setenv(name, value)
    with resolving_pods(book):
        async with PodPorts(operator.pods, NSQDS, "tcp_port") as nsqd_ports, \
                PodPorts(operator.pods, LOOKUPDS, "http_port") as lookupd_ports:
            load = DiscoveringLoad(options, ledger, nsqd_ports.addresses, lookupd_ports.addresses)
            pynsq = PynsqConsumers([(t, PYNSQ_CHANNEL) for t in TOPICS], lookupd_ports.addresses, tmp_path,
                                   max_in_flight=50, lookupd_poll_interval=1,
                                   on_delivery=lambda d: ledger.delivered(d.topic, d.channel, d.body, d.nsqd))
            try:
                await pynsq.start()
                await load.start()
                await until("every nsqd serving before the roll", 20, serving(ledger, "before", NSQDS))

                # -- the roll ------------------------------------------------------------------
                ledger.begin_phase("roll")
                await operator.patch("NsqCluster", CLUSTER, {"spec": {"image": NEW_IMAGE}})

                async def rolled() -> bool:
                    pods = await watch.pods()
                    return sorted(pods) == sorted(LOOKUPDS + NSQDS) and all(
                        p["spec"]["containers"][0]["image"] == NEW_IMAGE and _ready(p) for p in pods.values())
                await until("every pod replaced by one running the new image", ROLL_TIMEOUT, rolled,
                            cluster_state(operator, watch))
                await operator.ready("NsqCluster", CLUSTER, timeout=20)

                async def roll_recorded() -> dict[str, Any] | None:
                    rollout = ((await operator.get("NsqCluster", CLUSTER)) or {}).get("status", {}).get("rollout")
                    return rollout if rollout and rollout.get("phase") == "Complete" else None
                await until("status.rollout Complete", 20, roll_recorded, cluster_state(operator, watch))
                recorded = [p for p in (await roll_recorded() or {}).get("replaced", []) if p in NSQDS]
                ledger.begin_phase("between")
                await until("producers and consumers back on every replaced nsqd", 20,
                            serving(ledger, "between", NSQDS))
                replaced_nsqds = [p for p in watch.replaced if p in NSQDS]

                # -- the scale-down --------------------------------------------------------------
                ledger.begin_phase("scale")
                await operator.patch("NsqCluster", CLUSTER, {"spec": {"nsqd": {"replicas": 2}}})

                async def scaled() -> bool:
                    obj = await operator.get("NsqCluster", CLUSTER)
                    pods = await watch.pods()
                    status = obj.get("status") or {}
                    return NSQDS[2] not in pods and status.get("nsqd", {}).get("readyReplicas") == 2
                await until(f"{NSQDS[2]} gone and 2 nsqds ready", SCALE_TIMEOUT, scaled,
                            cluster_state(operator, watch))
                await operator.ready("NsqCluster", CLUSTER, timeout=20)
                ledger.begin_phase("after")
                await until("every remaining nsqd serving", 20, serving(ledger, "after", NSQDS[:2]))

                ledger.begin_phase("settle")
                await load.stop_publishing()
                pynsq.catch_up()
                delivered = await load.wait_all_delivered(SETTLE_TIMEOUT)
            finally:
                await load.stop()
                await pynsq.stop()
                await watch.stop()
    result = summary(ledger.tally(), delivered)
    text = render(result) + f"\nnsqd pods replaced in order: {replaced_nsqds}"
    print(text)

    # every nsqd pod was replaced once, highest ordinal first, and the operator's status says so
    assert replaced_nsqds == [NSQDS[2], NSQDS[1], NSQDS[0]], text
    assert recorded == replaced_nsqds, f"status.rollout.replaced: {recorded}"
    phases = {p["name"]: p for p in result["phases"]}
    assert all(phases[name]["acknowledged"] > 0 for name in ("before", "roll", "between", "scale", "after")), text
    # every acknowledged message reached every channel, ours and pynsq's
    assert result["acknowledged"] > 0 and result["lost"] == 0 and delivered, text
    assert [(c["topic"], c["channel"], c["lost"]) for c in result["channels"]] == [
        (t, c, 0) for t in TOPICS for c in OUR_CHANNELS + [PYNSQ_CHANNEL]], text
    assert all(c["delivered"] == c["acknowledged"] + c["failed_but_delivered"] for c in result["channels"]), text
    assert result["unknown"] == 0, text
    # duplicates (at least once) are counted and reported, not hidden
    tally = ledger.tally()
    assert result["duplicates"] == sum(c.deliveries - c.delivered for c in tally.channels), text
    assert f"duplicates    {result['duplicates']}" in text
    assert result["ok"], text
