"""Pieces of pod templates both StatefulSets share: probes, scheduling, identity."""
from __future__ import annotations

import copy
from typing import Any

from ..models import NsqCluster

POD_NAME_ENV = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
RUN_AS = 65532  # an unprivileged uid; fsGroup makes the data volume writable for it


def http_probe(path: str, port: str, period: int, failures: int, initial_delay: int = 0) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": port}, "initialDelaySeconds": initial_delay,
            "periodSeconds": period, "timeoutSeconds": 2, "failureThreshold": failures}


def security_context() -> dict[str, Any]:
    return {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "fsGroup": RUN_AS}


def container_security_context() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def scheduling(cluster: NsqCluster, selector: dict[str, str]) -> dict[str, Any]:
    """affinity, tolerations, spread constraints ... as pod spec fields; a spread
    constraint without a labelSelector spreads the component's own pods."""
    knobs = cluster.spec.scheduling
    out: dict[str, Any] = {}
    if knobs.affinity:
        out["affinity"] = copy.deepcopy(knobs.affinity)
    if knobs.tolerations:
        out["tolerations"] = copy.deepcopy(knobs.tolerations)
    if knobs.topology_spread_constraints:
        constraints = copy.deepcopy(knobs.topology_spread_constraints)
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


def resources(requirements: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if requirements.requests:
        out["requests"] = dict(requirements.requests)
    if requirements.limits:
        out["limits"] = dict(requirements.limits)
    return out
