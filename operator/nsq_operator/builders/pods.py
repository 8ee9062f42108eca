"""Pieces of pod templates both StatefulSets share: probes, scheduling, identity."""
from __future__ import annotations

import copy
from typing import Any, Mapping

from ..models import NsqCluster

POD_NAME_ENV = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
# soft: a cluster with fewer nodes than pods still runs them all, a lost node takes fewer down
DEFAULT_SPREAD: dict[str, Any] = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                  "whenUnsatisfiable": "ScheduleAnyway"}
RUN_AS = 65532  # an unprivileged uid; fsGroup makes the data volume writable for it


def http_probe(path: str, port: str, period: int, failures: int, initial_delay: int = 0,
               scheme: str = "HTTP") -> dict[str, Any]:
    get = {"path": path, "port": port, **({"scheme": scheme} if scheme != "HTTP" else {})}
    return {"httpGet": get, "initialDelaySeconds": initial_delay,
            "periodSeconds": period, "timeoutSeconds": 2, "failureThreshold": failures}


def security_context() -> dict[str, Any]:
    """What Pod Security "restricted" asks of a pod: not root, the runtime's seccomp filter."""
    return {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "fsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"}}


def container_security_context() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def scheduling(cluster: NsqCluster, selector: dict[str, str]) -> dict[str, Any]:
    """affinity, tolerations, spread constraints ... as pod spec fields; a spread
    constraint without a labelSelector spreads the component's own pods, and without any
    the pods are spread over nodes as far as the scheduler can."""
    knobs = cluster.spec.scheduling
    out: dict[str, Any] = {}
    if knobs.affinity:
        out["affinity"] = copy.deepcopy(knobs.affinity)
    if knobs.tolerations:
        out["tolerations"] = copy.deepcopy(knobs.tolerations)
    constraints = copy.deepcopy(knobs.topology_spread_constraints or [DEFAULT_SPREAD])
    for constraint in constraints:
        constraint.setdefault("labelSelector", {"matchLabels": dict(selector)})
    out["topologySpreadConstraints"] = constraints
    if knobs.node_selector:
        out["nodeSelector"] = dict(knobs.node_selector)
    if knobs.priority_class_name:
        out["priorityClassName"] = knobs.priority_class_name
    if cluster.spec.image_pull_secrets:
        out["imagePullSecrets"] = [{"name": name} for name in cluster.spec.image_pull_secrets]
    return out


def resources(requirements: Any, default_requests: Mapping[str, str]) -> dict[str, Any]:
    """The user's requests and limits; a resource given neither gets the default request,
    so no pod is BestEffort (the first evicted under node pressure). A limit alone is left
    to Kubernetes, which then requests the limit."""
    requests = dict(requirements.requests)
    for resource, amount in default_requests.items():
        if resource not in requests and resource not in requirements.limits:
            requests[resource] = amount
    out: dict[str, Any] = {"requests": requests}
    if requirements.limits:
        out["limits"] = dict(requirements.limits)
    return out
