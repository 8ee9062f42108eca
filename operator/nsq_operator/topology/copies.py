"""How many copies an NsqTopic's messages get on each nsqd: pure.

``spec.replicas`` when set, else the cluster's default (the ``--topic-replicas`` its
nsqds run with, from ``spec.nsqd.replication.replicas``). A count above 1 needs the nsqds
to run with their replication peers (``spec.nsqd.replication`` with replicas above 1 or
``perTopic``) and at most as many nsqds as peers; the CRD schema bounds it to 1..5, the
rest (a fact of another object) is checked here and reported in the Ready condition."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..kube.pods import replication_on_of, replication_peers_of, topic_replicas_of


@dataclass(frozen=True)
class Copies:
    ask: int | None  # what each nsqd is told when the topic is created or converged; None: nothing
    problem: str | None = None  # why spec.replicas is not applied


def topic_copies(wanted: int | None, cluster: str, pods: Iterable[Mapping[str, Any]]) -> Copies:
    running = [p for p in pods if replication_on_of(p)]
    if not running:  # replication off: every topic has one copy
        if wanted is not None and wanted > 1:
            return Copies(None, f"spec.replicas {wanted} needs replicated topics in NsqCluster {cluster}: set its "
                                f"spec.nsqd.replication (replicas above 1, or perTopic: true)")
        return Copies(None)
    if wanted is None:
        return Copies(max(topic_replicas_of(p) for p in running))
    nsqds = min(len(replication_peers_of(p)) for p in running)
    if wanted > nsqds:
        return Copies(None, f"spec.replicas {wanted} is above the {nsqds} nsqds of NsqCluster {cluster}: each copy "
                            f"of a message lives on a different nsqd")
    return Copies(wanted)
