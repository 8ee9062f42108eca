"""Reading the pods of a cluster and setting the operator's readiness-gate condition."""
from __future__ import annotations

from typing import Any, Mapping, Protocol

from ..builders import labels
from ..constants import TLS_SECRET_ANNOTATION, TOPOLOGY_READY_CONDITION
from ..models.cluster import ClusterRef
from ..status.conditions import now
from .client import STRATEGIC_MERGE_PATCH, KubeApi


# waiting reasons of a container that will not get better by waiting
FAILING_WAITING_REASONS = frozenset({"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "InvalidImageName",
                                     "CreateContainerConfigError", "CreateContainerError"})


def failing(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of a container of the pod that cannot run; None when none."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FAILING_WAITING_REASONS:
            return str(waiting["reason"]), str(waiting.get("message") or "")
    return None


def unschedulable(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(since, scheduler's message) of a pod the scheduler finds no node for; None otherwise."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return str(c.get("lastTransitionTime") or pod["metadata"].get("creationTimestamp") or ""), str(c.get("message") or "")
    return None


def condition(pod: Mapping[str, Any], type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def is_ready(pod: Mapping[str, Any]) -> bool:
    return condition(pod, "Ready")


def is_serving(pod: Mapping[str, Any]) -> bool:
    """The container answers its probe: the operator can talk to it, clients maybe not yet."""
    return condition(pod, "ContainersReady") and not pod["metadata"].get("deletionTimestamp")


def topology_ready(pod: Mapping[str, Any]) -> bool:
    return condition(pod, TOPOLOGY_READY_CONDITION)


def ordinal_of(name: str) -> int:
    """A StatefulSet pod's ordinal, from its name (``<statefulset>-<ordinal>``)."""
    return int(name.rsplit("-", 1)[-1])


def ordinal(pod: Mapping[str, Any]) -> int:
    return ordinal_of(pod["metadata"]["name"])


class PodSource(Protocol):
    async def pods(self, namespace: str, selector: Mapping[str, str]) -> list[dict[str, Any]]: ...


async def component_pods(source: PodSource, cluster: ClusterRef, component: str) -> list[dict[str, Any]]:
    pods = await source.pods(cluster.namespace, labels.selector(cluster, component))
    return sorted(pods, key=ordinal)


async def mark_topology_ready(api: KubeApi, pod: dict[str, Any]) -> None:
    meta = pod["metadata"]
    gate = {"type": TOPOLOGY_READY_CONDITION, "status": "True", "reason": "TopologyCreated",
            "message": "every declared topic and channel exists on this nsqd", "lastTransitionTime": now()}
    await api.patch("Pod", meta["namespace"], meta["name"], {"status": {"conditions": [gate]}}, "status",
                    STRATEGIC_MERGE_PATCH)  # merges by condition type, leaving the kubelet's alone


def tls_secret_of(pod: Mapping[str, Any]) -> str | None:
    """The Secret whose CA a pod's nsqd is called with over HTTPS; None: plain HTTP."""
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(TLS_SECRET_ANNOTATION) or None


def _nsqd_flag(pod: Mapping[str, Any], flag: str) -> str | None:
    """The value of ``--<flag>=`` on a pod's (or pod template's) nsqd container; None without."""
    prefix = f"--{flag}="
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") != labels.NSQD:
            continue
        for arg in container.get("args") or []:
            if str(arg).startswith(prefix):
                return str(arg)[len(prefix):]
    return None


def _whole_number(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def topic_replicas_of(pod: Mapping[str, Any]) -> int:
    """The --topic-replicas a pod (or pod template) runs its nsqd with; 1 (no replication)
    when it names none."""
    return _whole_number(_nsqd_flag(pod, "topic-replicas"), 1)


def replication_peers_of(pod: Mapping[str, Any]) -> list[str]:
    """The --replication-peer list a pod's nsqd runs with (empty without)."""
    return [p for p in (_nsqd_flag(pod, "replication-peer") or "").split(",") if p]


def replication_epoch_of(pod: Mapping[str, Any]) -> int:
    """The --replication-membership-epoch of a pod's (or pod template's) peer list (0 without)."""
    return _whole_number(_nsqd_flag(pod, "replication-membership-epoch"), 0)


def replication_on_of(pod: Mapping[str, Any]) -> bool:
    """Whether a pod (or pod template) runs its nsqd with replication peers: some of its
    topics may be replicated, whatever its default --topic-replicas."""
    return replication_address_of(pod) is not None


def replication_address_of(pod: Mapping[str, Any]) -> str | None:
    """The --replication-address a pod's nsqd runs with (``$(POD_NAME)`` filled in); None without."""
    address = _nsqd_flag(pod, "replication-address")
    return None if address is None else address.replace("$(POD_NAME)", (pod.get("metadata") or {}).get("name") or "")
