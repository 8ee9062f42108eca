"""The nsqds of a cluster the operator can talk to, each with its admin client."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp

from nsq_client.admin import LookupdAdmin, NsqdAdmin

from ..builders import labels
from ..endpoints import Endpoints
from ..kube.pods import PodSource, component_pods, is_serving, tls_secret_of
from ..models.cluster import ClusterRef
from ..tls_trust import SecretMissing

if TYPE_CHECKING:
    from ..runtime import Runtime


@dataclass(frozen=True)
class Node:
    pod: str
    admin: NsqdAdmin


@dataclass(frozen=True)
class Fleet:
    """The nsqds that answer and the pods that exist but do not (yet)."""
    nodes: list[Node]
    unreachable: list[str]


async def nsqd_fleet(rt: "Runtime", cluster: ClusterRef) -> Fleet:
    """A pod whose TLS Secret is missing counts as unreachable (it cannot be called)."""
    pods = await component_pods(rt, cluster, labels.NSQD)
    nodes, unreachable = [], [p["metadata"]["name"] for p in pods if not is_serving(p)]
    for pod in (p for p in pods if is_serving(p)):
        name = pod["metadata"]["name"]
        try:
            nodes.append(Node(name, await rt.nsqd_admin(cluster, name, tls_secret_of(pod))))
        except SecretMissing:
            unreachable.append(name)
    return Fleet(nodes, unreachable)


async def lookupd_admins(api: PodSource, endpoints: Endpoints, session: aiohttp.ClientSession,
                         cluster: ClusterRef) -> list[tuple[dict[str, Any], LookupdAdmin]]:
    pods = await component_pods(api, cluster, labels.LOOKUPD)
    return [(p, LookupdAdmin(endpoints.lookupd_http(cluster, p["metadata"]["name"]), session=session)) for p in pods]
