"""Reading every nsqd's GET /replication: for the cluster's and the topics' status and for
the roller, which takes no nsqd down while a copy is missing or catching up."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..builders import names
from ..kube.pods import is_serving, replication_address_of, replication_on_of, tls_secret_of, topic_replicas_of
from ..models import ReplicationStatus
from ..models.cluster import ClusterRef
from ..runtime import Runtime
from ..status import replication as judge
from .gate import REACH_ERRORS


@dataclass(frozen=True)
class Replication:
    replicas: int  # the largest --topic-replicas a pod runs with
    reports: dict[str, dict[str, Any] | None]  # pod -> its GET /replication (None: no answer)
    pod_of: dict[str, str]  # replication address -> pod

    def status(self, owners: Iterable[str], copies: int | None = None) -> ReplicationStatus:
        """Over every topic (the widest count an nsqd uses), or for a topic of ``copies``."""
        return judge.summarize(self.replicas if copies is None else copies, owners, self.reports, self.pod_of,
                               topic_copies=copies)


def replicated_pods(pods: Iterable[Mapping[str, Any]]) -> int:
    return max((topic_replicas_of(p) for p in pods), default=1)


async def _report(rt: Runtime, cluster: ClusterRef, pod: Mapping[str, Any]) -> dict[str, Any] | None:
    if not is_serving(pod) or not replication_on_of(pod):
        return None
    try:
        admin = await rt.nsqd_admin(cluster, pod["metadata"]["name"], tls_secret_of(pod))
        return await admin.replication()
    except REACH_ERRORS:
        return None


async def read_replication(rt: Runtime, cluster: ClusterRef, pods: list[dict[str, Any]],
                           expected: Iterable[str] = ()) -> Replication | None:
    """None when no pod runs with replication peers (nothing is asked of any nsqd then).
    ``expected``: pod names that should exist (their addresses are named too)."""
    if not any(replication_on_of(p) for p in pods):
        return None
    replicas = replicated_pods(pods)
    answers = await asyncio.gather(*(_report(rt, cluster, p) for p in pods))
    reports: dict[str, dict[str, Any] | None] = {name: None for name in expected}
    reports.update({p["metadata"]["name"]: answer for p, answer in zip(pods, answers)})
    pod_of = {names.nsqd_replication_address(cluster, name): name
              for name in [*expected, *(p["metadata"]["name"] for p in pods)]}
    pod_of.update({address: p["metadata"]["name"] for p in pods if (address := replication_address_of(p))})
    # nsqd lists its peers in the order it was given them, the ordinals' (builders): the
    # i-th is pod i, whatever its address resolves to
    statefulset = names.nsqd_statefulset(cluster)
    for answer in answers:
        for ordinal, peer in enumerate((answer or {}).get("peers") or []):
            pod_of.setdefault(str(peer.get("peer")), names.pod_name(statefulset, ordinal))
    return Replication(replicas, reports, pod_of)
