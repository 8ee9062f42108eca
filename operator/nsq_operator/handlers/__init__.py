"""The operator's kopf registry: which handler runs for what, and how often."""
from __future__ import annotations

import kopf

from ..builders import labels
from ..constants import GROUP, MANAGED_BY, MANAGED_BY_LABEL, VERSION
from ..metrics import rollout_of
from ..runtime import CLUSTER_INDEX, POD_INDEX, ROLLOUT_INDEX, STATEFULSET_INDEX, Intervals
from . import unguarded
from .cluster import cluster_changed, cluster_tick
from .login import cleanup, configure, login
from .rollout import cluster_rollout
from .pods import (cluster_domains, declared_channels, declared_topics, managed_pods, managed_statefulsets,
                   needs_gate, pod_gate)
from .topology import topology_changed, topology_deleted, topology_tick

NSQD_PODS = {"app.kubernetes.io/component": labels.NSQD, "app.kubernetes.io/managed-by": MANAGED_BY}


def build_registry(intervals: Intervals) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    kopf.on.login(registry=registry)(login)
    kopf.on.startup(registry=registry)(configure)
    kopf.on.cleanup(registry=registry)(cleanup)

    clusters = (GROUP, VERSION, "nsqclusters")
    for on in (kopf.on.create, kopf.on.update, kopf.on.resume):
        on(*clusters, registry=registry, id="reconcile", backoff=intervals.retry)(cluster_changed)
    # No finalizer on an NsqCluster: nothing needs doing before one goes (its objects go by
    # their owner references). A failed pass (an nsqd slow to answer) retries after `retry`.
    unguarded.timer(registry, *clusters, id="status", interval=intervals.cluster_status,
                    initial_delay=intervals.cluster_status, backoff=intervals.retry)(cluster_tick)
    # rolling upgrades and scale-down, a step per tick; a stopped roll retries with its own backoff
    unguarded.timer(registry, *clusters, id="rollout", interval=intervals.rollout,
                    initial_delay=intervals.rollout, backoff=intervals.retry)(cluster_rollout)

    for plural in ("nsqtopics", "nsqchannels"):
        resource = (GROUP, VERSION, plural)
        for on in (kopf.on.create, kopf.on.update, kopf.on.resume):
            on(*resource, registry=registry, id="reconcile", backoff=intervals.retry)(topology_changed)
        # the finalizer guards the topic or channel on the nsqds: only deletionPolicy Delete needs it
        kopf.on.delete(*resource, registry=registry, id="delete", backoff=intervals.retry,
                       field="spec.deletionPolicy", value="Delete")(topology_deleted)
        unguarded.timer(registry, *resource, id="drift", interval=intervals.topology,
                        initial_delay=intervals.topology, backoff=intervals.retry)(topology_tick)

    # the operator's pods, kept from kopf's pod watch (server-side selector, handlers.login.configure):
    # each pass reads them here instead of listing them
    kopf.index("v1", "pods", registry=registry, id=POD_INDEX, labels={MANAGED_BY_LABEL: MANAGED_BY})(managed_pods)
    kopf.index("apps", "v1", "statefulsets", registry=registry, id=STATEFULSET_INDEX,
               labels={MANAGED_BY_LABEL: MANAGED_BY})(managed_statefulsets)
    kopf.index(GROUP, VERSION, "nsqclusters", registry=registry, id=ROLLOUT_INDEX)(rollout_of)
    kopf.index(*clusters, registry=registry, id=CLUSTER_INDEX)(cluster_domains)  # read by the topology passes
    kopf.index(GROUP, VERSION, "nsqtopics", registry=registry, id="declared_topics")(declared_topics)
    kopf.index(GROUP, VERSION, "nsqchannels", registry=registry, id="declared_channels")(declared_channels)
    kopf.on.event("v1", "pods", registry=registry, id="topology-gate", labels=NSQD_PODS, when=needs_gate)(pod_gate)
    return registry
