"""One pass over an NsqTopic or NsqChannel: converge every answering nsqd of its cluster,
act once on an empty request, report counts per node; and the deletion per policy."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Callable, Iterable

from nsq_protocol.names import is_ephemeral

from ..builders import labels
from ..constants import EMPTY_REQUEST_ANNOTATION
from ..kube.pods import component_pods, ordinal_of
from ..models import NodeCounts, ReplicationStatus, TopologyStatus
from ..models.cluster import ClusterRef
from ..runtime import Runtime
from ..status import conditions
from ..status import replication as replica_judge
from ..topology.converge import converge_channel, converge_topic, set_replicas
from ..topology.copies import Copies, topic_copies
from ..topology.nodes import Fleet, Node, lookupd_admins, nsqd_fleet
from ..topology.removal import remove_channel, remove_topic
from ..topology.ownership import nsq_name, winner
from ..topology.wishes import ChannelWish, TopicWish, channel_spec, channel_wish, topic_spec, topic_wish
from .freshness import ensure_current
from .gate import REACH_ERRORS
from .replication import read_replication


class NotYet(Exception):
    """Something to wait for (a cluster, a pod); retried with backoff."""


@dataclass(frozen=True)
class TopologyPass:
    status: dict[str, Any]
    verdict: conditions.Verdict


Wish = TopicWish | ChannelWish


async def _cluster_ref(rt: Runtime, wish: Wish) -> ClusterRef | None:
    """The NsqCluster's names as its pods advertise them (with its DNS domain, if any);
    None when there is no such cluster."""
    domain = await rt.cluster_domain(wish.namespace, wish.cluster)
    return None if domain is None else ClusterRef(wish.cluster, wish.namespace, domain)


async def _fleet(rt: Runtime, wish: Wish) -> tuple[ClusterRef, Fleet]:
    cluster = await _cluster_ref(rt, wish)
    if cluster is None:
        raise NotYet(f"NsqCluster {wish.cluster} does not exist in namespace {wish.namespace}")
    return cluster, await nsqd_fleet(rt, cluster)


async def _replication(rt: Runtime, cluster: ClusterRef, wish: Wish, counts: list[NodeCounts],
                       pods: list[dict[str, Any]]) -> ReplicationStatus | None:
    """A topic's copies on the nsqds that have it, as many as its own count (``wish.replicas``
    as asked of them); None for a channel, an ephemeral topic, or nsqds without
    replication."""
    if not isinstance(wish, TopicWish) or is_ephemeral(wish.topic):
        return None
    replication = await read_replication(rt, cluster, pods)
    if replication is None:
        return None
    return replication.status(sorted((c.pod for c in counts), key=ordinal_of), wish.replicas)


async def _set_replicas(fleet: Fleet, wish: Wish) -> list[str]:
    """The topic's own count on every answering nsqd; what they refused."""
    if not isinstance(wish, TopicWish) or wish.replicas is None:
        return []
    refused = await asyncio.gather(*(set_replicas(node, wish) for node in fleet.nodes), return_exceptions=True)
    for r in refused:
        if isinstance(r, BaseException) and not isinstance(r, REACH_ERRORS):
            raise r
    return [r for r in refused if isinstance(r, str)]


async def _on_every_node(fleet: Fleet, act: Callable[[Node], Awaitable[NodeCounts]]) -> tuple[list[NodeCounts], list[str]]:
    results = await asyncio.gather(*(act(node) for node in fleet.nodes), return_exceptions=True)
    counts = [r for r in results if isinstance(r, NodeCounts)]
    failed = [node.pod for node, r in zip(fleet.nodes, results) if not isinstance(r, NodeCounts)]
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, REACH_ERRORS):
            raise r
    return counts, failed + fleet.unreachable


async def _empty(fleet: Fleet, wish: Wish) -> None:
    for node in fleet.nodes:
        if isinstance(wish, TopicWish):
            await node.admin.empty_topic(wish.topic)
        else:
            await node.admin.empty_channel(wish.topic, wish.channel)


def _conflict(wish: Wish, body: Any, declared: Iterable[Wish]) -> TopologyPass | None:
    """Another, older object declares the same NSQ name: this one is not applied."""
    first = winner(wish, [d for d in declared if d.owner != wish.owner])
    if first.owner == wish.owner:
        return None
    what = f"topic {wish.topic}" if isinstance(wish, TopicWish) else f"channel {wish.topic}/{wish.channel}"
    status = TopologyStatus(name=wish.topic if isinstance(wish, TopicWish) else wish.channel,
                            observed_generation=body["metadata"].get("generation"))
    return TopologyPass(status.wire(), conditions.degraded(
        "Conflict", f"{body['kind']} {first.owner} declares {what} of NsqCluster {wish.cluster} already (it is older); "
                    f"this one is not applied"))


async def reconcile_topology(rt: Runtime, body: Any, declared: Iterable[Wish] = (), live: Any = None) -> TopologyPass:
    """``declared``: the live NsqTopic (or NsqChannel) declarations of the same cluster;
    ``body``: the snapshot the pass works on, ``live``: kopf's body (freshness)."""
    wish: Wish = topic_wish(body) if body["kind"] == "NsqTopic" else channel_wish(body)
    converge = converge_topic if isinstance(wish, TopicWish) else converge_channel
    ensure_current(live, body)
    if (conflict := _conflict(wish, body, declared)) is not None:
        return conflict
    cluster, fleet = await _fleet(rt, wish)
    pods = await component_pods(rt, cluster, labels.NSQD)
    copies = Copies(None)
    if isinstance(wish, TopicWish):  # its own count, or the cluster's default, as asked of each nsqd
        copies = topic_copies(wish.replicas, wish.cluster, pods)
        wish = replace(wish, replicas=copies.ask)
    ensure_current(live, body)  # before any nsqd is told to pause or unpause as this spec says
    previous = dict(body.get("status") or {})
    emptied = previous.get("emptiedRequest")
    requested = (body["metadata"].get("annotations") or {}).get(EMPTY_REQUEST_ANNOTATION)
    counts, missing = await _on_every_node(fleet, lambda node: converge(node, wish))  # type: ignore[arg-type]
    if requested and requested != emptied and not missing and fleet.nodes:
        ensure_current(live, body)  # emptying is done once per request: never for a request since taken back
        await _empty(fleet, wish)
        emptied = requested
        counts, missing = await _on_every_node(fleet, lambda node: converge(node, wish))  # type: ignore[arg-type]
    refused = await _set_replicas(fleet, wish)
    replication = await _replication(rt, cluster, wish, counts, pods)
    status = TopologyStatus(
        name=wish.topic if isinstance(wish, TopicWish) else wish.channel,
        observed_generation=body["metadata"].get("generation"),
        depth=sum(c.depth for c in counts), in_flight=sum(c.in_flight for c in counts),
        nodes=sorted(counts, key=lambda c: c.pod), emptied_request=emptied, replication=replication)
    unplaced = None if replication is None else replica_judge.unsettled(replication)
    unsettled = sorted(c.pod for c in counts if c.paused != wish.paused)  # nsqd did not keep the flag it was given
    if missing:
        verdict = conditions.progressing("NodesUnreachable", f"not yet on {', '.join(sorted(missing))}")
    elif not fleet.nodes:
        verdict = conditions.progressing("NoNsqd", f"NsqCluster {wish.cluster} has no nsqd answering yet")
    elif unsettled:
        verdict = conditions.progressing("PauseNotApplied", f"{'not ' if wish.paused else ''}paused on "
                                         f"{', '.join(unsettled)} although spec.paused is {str(wish.paused).lower()}")
    elif requested and requested != emptied:
        verdict = conditions.progressing("EmptyPending", "emptying waits for every nsqd to answer")
    elif copies.problem is not None:
        verdict = conditions.degraded("ReplicasNotApplied", copies.problem)
    elif refused:
        verdict = conditions.degraded("ReplicasRefused", f"{copies.ask} replicas are not applied on "
                                                         f"{'; '.join(sorted(refused))}")
    elif unplaced is not None:
        verdict = conditions.progressing("ReplicasNotInSync", f"on {len(counts)} nsqd; copies not all in place: "
                                                              f"{unplaced}")
    elif replication is not None:
        verdict = conditions.ready(f"on {len(counts)} nsqd; {replication.in_sync} copies in sync"
                                   + (f", {replication.behind} behind" if replication.behind else ""))
    else:
        verdict = conditions.ready(f"on {len(counts)} nsqd")
    ensure_current(live, body)
    return TopologyPass(status.wire(), verdict)


async def delete_topology(rt: Runtime, body: Any, declared: Iterable[Wish] = ()) -> None:
    """Per the deletion policy; raises Refused (messages would be lost) or NotYet. A name
    another live object still declares stays on the nsqds."""
    is_topic = body["kind"] == "NsqTopic"
    spec = topic_spec(body) if is_topic else channel_spec(body)
    if spec.deletion_policy == "Retain":
        return
    wish: Wish = topic_wish(body) if is_topic else channel_wish(body)
    if any(d.owner != wish.owner and nsq_name(d) == nsq_name(wish) for d in declared):
        return
    cluster = await _cluster_ref(rt, wish)
    if cluster is None:
        return  # the cluster and its nsqds are gone already
    fleet = await nsqd_fleet(rt, cluster)
    if fleet.unreachable:
        raise NotYet(f"waiting for {', '.join(fleet.unreachable)} to answer before deleting")
    lookupds = [admin for _, admin in await lookupd_admins(rt, rt.endpoints, rt.http, cluster)]
    if isinstance(wish, TopicWish):
        await remove_topic(fleet.nodes, lookupds, cluster, wish, spec.delete_with_messages)
    else:
        await remove_channel(fleet.nodes, lookupds, wish, spec.delete_with_messages)
