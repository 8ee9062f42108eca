"""The number of nsqds under replicated topics: fixed.

Every nsqd is started with the same ordered peer list (--replication-peer), which names
who backs up whom and who adopts a lost nsqd's messages. nsqd cannot change that list
while it runs, and a roll that gave the pods different lists one by one would have them
disagree on who holds which copies. So while replication is on (in the spec, in the
StatefulSet or in a running pod) the operator keeps the StatefulSet's replicas and peer
list as they are, and says why in the cluster's conditions. To change the number of
nsqds: turn replication off (a roll), change the replicas (a scale-down hands messages
off as usual), turn it on again (another roll)."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..kube.pods import replication_on_of
from ..models import NsqCluster
from .health import Problem

MEMBERSHIP_FIXED = "ReplicaChangeRefused"


def replicating(statefulset: Mapping[str, Any] | None, pods: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any nsqd runs (or its StatefulSet would make one run) with replicated topics."""
    template = ((statefulset or {}).get("spec") or {}).get("template") or {}
    return replication_on_of(template) or any(replication_on_of(p) for p in pods)


def hold_membership(cluster: NsqCluster, statefulset: Mapping[str, Any] | None,
                    pods: Iterable[Mapping[str, Any]]) -> tuple[NsqCluster, Problem | None]:
    """The cluster as the builders and the roller are to see it: with replication on
    anywhere, nsqd's replicas stay what the StatefulSet has, with a problem naming the
    change not applied; otherwise as the spec says."""
    if statefulset is None:
        return cluster, None
    running = int((statefulset.get("spec") or {}).get("replicas", 0))
    wanted = cluster.spec.nsqd.replicas
    if running == wanted or not (cluster.spec.nsqd.replicated is not None or replicating(statefulset, pods)):
        return cluster, None
    nsqd = cluster.spec.nsqd.model_copy(update={"replicas": running})
    held = cluster.model_copy(update={"spec": cluster.spec.model_copy(update={"nsqd": nsqd})})
    if cluster.spec.nsqd.replicated is not None:
        why = (f"spec.nsqd.replicas {wanted} is not applied: with replicated topics "
               f"(spec.nsqd.replication.replicas {cluster.spec.nsqd.replication.replicas if cluster.spec.nsqd.replication else 1}) every nsqd keeps the same "
               f"fixed list of its {running} peers, so the number of nsqds stays {running}; to change it, set "
               f"spec.nsqd.replication.replicas to 1 (and perTopic to false), wait for the roll, change "
               f"spec.nsqd.replicas, then turn replication on again")
    else:
        why = (f"spec.nsqd.replicas {wanted} waits: nsqds still run with replicated topics and their fixed list of "
               f"{running} peers; the number of nsqds changes once every nsqd runs without replication")
    return held, Problem(MEMBERSHIP_FIXED, why)
