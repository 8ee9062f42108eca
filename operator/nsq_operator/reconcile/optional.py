"""The objects a cluster has only when its spec asks (cert-manager's Certificate, the
Prometheus Operator's PodMonitors, the NetworkPolicy): when the spec stops asking, they
are deleted. Checked after a change of the spec only, so an idle cluster pays nothing."""
from __future__ import annotations

from ..builders import build_cluster, labels, monitoring, network, tls
from ..kube.client import KubeApiError
from ..models import NsqCluster
from ..runtime import Runtime

OPTIONAL_KINDS = frozenset({"Certificate", "PodMonitor"})  # of APIs a cluster may not serve


def possible(cluster: NsqCluster) -> list[tuple[str, str]]:
    """Every optional object a spec of this cluster could ask for, by kind and name."""
    return [("Certificate", tls.certificate_name(cluster)), ("NetworkPolicy", network.policy_name(cluster)),
            *(("PodMonitor", monitoring.pod_monitor_name(cluster, c)) for c in (labels.NSQD, labels.LOOKUPD))]


async def prune_optional(rt: Runtime, cluster: NsqCluster) -> None:
    wanted = {(m["kind"], m["metadata"]["name"]) for m in build_cluster(cluster)}
    for kind, name in possible(cluster):
        if (kind, name) in wanted:
            continue
        if kind in OPTIONAL_KINDS and not await rt.discovery.serves(rt.kube, kind):
            continue
        existing = await rt.kube.get(kind, cluster.namespace, name)
        if existing is None or not _ours(existing, cluster):
            continue
        try:
            await rt.kube.delete(kind, cluster.namespace, name)
        except KubeApiError as e:
            if e.status != 404:
                raise


def _ours(obj: dict, cluster: NsqCluster) -> bool:
    """Made for this cluster (owned by it), not an object of the same name someone else keeps."""
    return any(ref.get("kind") == "NsqCluster" and ref.get("name") == cluster.name
               for ref in obj["metadata"].get("ownerReferences") or [])
