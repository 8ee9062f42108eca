"""Every Kubernetes API call the operator makes, read from its code and kopf's (1.45):
the chart's RBAC must allow each of them and nothing else. When the operator starts
making a new call, add it here with where it is made, and to the chart's ClusterRole.

Discovery (/version, /api, /apis/...) is left out: every authenticated user may read it
(the default system:discovery role)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tests.chart.rbac import Grant, Request

# Where a call lands:
#   object    - in the namespace of the object being worked on;
#   watch     - kopf's list + watch streams: across every namespace when the operator
#               watches all of them, else in each watched namespace;
#   cluster   - a cluster-scoped resource;
#   namespace-list - cluster-scoped, made only when the operator watches named namespaces.
Scope = Literal["object", "watch", "cluster", "namespace-list"]


@dataclass(frozen=True)
class Call:
    verb: str
    group: str
    resource: str
    scope: Scope
    where: str


NSQ = "nsq.dev"
CUSTOM = ("nsqclusters", "nsqtopics", "nsqchannels")
BUILT = (("", "serviceaccounts"), ("", "configmaps"), ("", "services"), ("apps", "statefulsets"),
         ("apps", "deployments"), ("policy", "poddisruptionbudgets"))

CALLS: list[Call] = [
    *(Call(verb, NSQ, plural, "watch", "kopf: handlers, timers and indexes of handlers.build_registry")
      for plural in CUSTOM for verb in ("list", "watch")),
    *(Call(verb, "", "pods", "watch", "kopf: the topology-gate on.event handler and the managed_pods index of "
                                      "handlers.build_registry (server-side label selector)")
      for verb in ("list", "watch")),
    *(Call(verb, "apps", "statefulsets", "watch", "kopf: the managed_statefulsets index of handlers.build_registry "
                                                  "(server-side label selector)")
      for verb in ("list", "watch")),
    *(Call("patch", NSQ, plural, "object", "kopf: finalizer, progress and last-handled annotations")
      for plural in CUSTOM),
    *(Call("patch", NSQ, f"{plural}/status", "object", "kopf: the patch.status of every change handler; "
                                                   "handlers.unguarded.send_status: every timer's pass")
      for plural in CUSTOM),
    Call("get", NSQ, "nsqclusters", "object", "handlers.rollout reads the NsqCluster afresh before a step of a roll "
                                              "(idle passes read kopf's bodies and indexes)"),
    Call("update", NSQ, "nsqclusters/finalizers", "object",
         "builders.ownership: ownerReferences with blockOwnerDeletion (OwnerReferencesPermissionEnforcement)"),
    # server-side apply: a patch, which needs create too when it makes the object
    *(Call(verb, group, plural, "object", "kube.apply.apply of every manifest of builders.build_cluster")
      for group, plural in BUILT for verb in ("create", "patch")),
    # server-side apply: a patch, which needs create too when it makes the object (above);
    # rollout.observe reads the StatefulSets from the index, rollout.roller lowers the nsqd
    # replicas: patch above; the pods are read from the managed_pods index
    Call("delete", "", "pods", "object", "rollout.roller: a pod whose container cannot run is deleted for its replacement"),
    Call("create", "", "pods/eviction", "object",
         "rollout.roller: a drained, restarted or called-off pod is evicted for its replacement, a scale-down's "
         "leaving pod once its messages are handed off"),
    *(Call(verb, "", "persistentvolumeclaims", "object", "reconcile.storage.grow: every claim expanded to a larger "
                                                           "spec.nsqd.storage.size") for verb in ("list", "patch")),
    Call("delete", "apps", "statefulsets", "object",
         "reconcile.storage.grow: the nsqd StatefulSet made anew (pods orphaned) with the larger claim template"),
    Call("get", "apps", "statefulsets", "object",
         "reconcile.cluster._apply_nsqd: the nsqd StatefulSet read afresh after its apply met a newer version "
         "(409: the StatefulSet controller's status writes)"),
    Call("delete", "", "persistentvolumeclaims", "object",
         "rollout.roller: the claim of a pod removed by a scale-down, when storage.whenScaled is Delete"),
    Call("patch", "", "pods/status", "object", "kube.pods.mark_topology_ready"),
    Call("create", "", "events", "object",
         "kopf.event of handlers.status_patch.write_status (a change of condition); kube.events.post_event through "
         "kopf (the roller's, storage grown)"),
    Call("list", "", "events", "object", "reconcile.health.creation_refused: FailedCreate of a StatefulSet's pods"),
    Call("get", "", "secrets", "object", "reconcile.tls.look: the TLS Secret's data (its hash rolls nsqd, its CA is "
                                         "trusted by tls_trust for HTTPS calls to nsqd)"),
    # spec.tls.issuerRef, spec.metrics.prometheus, spec.networkPolicy: applied by kube.apply, read and
    # deleted by reconcile.optional.prune_optional when the spec stops asking for them
    *(Call(verb, group, plural, "object", "kube.apply.apply of builders.build_cluster's optional objects; "
                                          "reconcile.optional.prune_optional")
      for group, plural in (("cert-manager.io", "certificates"), ("monitoring.coreos.com", "podmonitors"),
                            ("networking.k8s.io", "networkpolicies"))
      for verb in ("create", "patch", "get", "delete")),
    *(Call(verb, "apiextensions.k8s.io", "customresourcedefinitions", "cluster",
           "kopf: the resource observer follows CRDs") for verb in ("list", "watch")),
    *(Call(verb, "", "namespaces", "namespace-list", "kopf: the namespace observer, when namespaces are named")
      for verb in ("list", "watch")),
]


def requests(watched: list[str], sample_namespace: str = "some-namespace") -> list[Request]:
    """The concrete requests the operator makes when it watches ``watched`` (all
    namespaces when empty; objects then live in ``sample_namespace``)."""
    out: list[Request] = []
    object_namespaces = watched or [sample_namespace]
    for call in CALLS:
        if call.scope == "object":
            out += [Request(call.verb, call.group, call.resource, ns) for ns in object_namespaces]
        elif call.scope == "watch":
            out += ([Request(call.verb, call.group, call.resource, ns) for ns in watched] if watched
                    else [Request(call.verb, call.group, call.resource, None)])
        elif call.scope == "cluster" or watched:
            out.append(Request(call.verb, call.group, call.resource, None))
    return out


def least_grants(watched: list[str]) -> set[Grant]:
    """The rights those requests need and no more: namespaced ones granted cluster-wide
    only when every namespace is watched."""
    out: set[Grant] = set()
    for call in CALLS:
        if call.scope in ("object", "watch"):
            out |= ({Grant(call.group, call.resource, call.verb, ns) for ns in watched} if watched
                    else {Grant(call.group, call.resource, call.verb, None)})
        elif call.scope == "cluster" or watched:
            out.add(Grant(call.group, call.resource, call.verb, None))
    return out
