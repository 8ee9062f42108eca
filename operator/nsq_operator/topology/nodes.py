"""The nsqds of a cluster the operator can talk to, each with its admin client."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp

from nsq_client.admin import LookupdAdmin, NsqdAdmin

from ..builders import labels
from ..endpoints import Endpoints
from ..kube.pods import PodSource, component_pods, is_serving
from ..models.cluster import ClusterRef


@dataclass(frozen=True)
class Node:
    pod: str
    admin: NsqdAdmin


@dataclass(frozen=True)
class Fleet:
    """The nsqds that answer and the pods that exist but do not (yet)."""
    nodes: list[Node]
    unreachable: list[str]


async def nsqd_fleet(api: PodSource, endpoints: Endpoints, session: aiohttp.ClientSession,
                     cluster: ClusterRef) -> Fleet:
    pods = await component_pods(api, cluster, labels.NSQD)
    nodes = [Node(p["metadata"]["name"], NsqdAdmin(endpoints.nsqd_http(cluster, p["metadata"]["name"]), session=session))
             for p in pods if is_serving(p)]
    return Fleet(nodes, [p["metadata"]["name"] for p in pods if not is_serving(p)])


async def lookupd_admins(api: PodSource, endpoints: Endpoints, session: aiohttp.ClientSession,
                         cluster: ClusterRef) -> list[tuple[dict[str, Any], LookupdAdmin]]:
    pods = await component_pods(api, cluster, labels.LOOKUPD)
    return [(p, LookupdAdmin(endpoints.lookupd_http(cluster, p["metadata"]["name"]), session=session)) for p in pods]
