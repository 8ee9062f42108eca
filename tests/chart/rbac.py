"""Kubernetes RBAC, evaluated over rendered objects: may this ServiceAccount make this
request? Only what the chart uses is modelled (rules with apiGroups/resources/verbs,
ClusterRoles bound by ClusterRoleBindings or RoleBindings); anything else it meets
(wildcards, resourceNames, nonResourceURLs, aggregation) fails the tests outright."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

RBAC = "rbac.authorization.k8s.io/v1"


@dataclass(frozen=True)
class Request:
    """The attributes RBAC decides on. ``namespace`` None: a cluster-scoped object, or a
    namespaced kind across every namespace."""
    verb: str
    group: str
    resource: str  # "pods", or "pods/status" for a subresource
    namespace: str | None

    def __str__(self) -> str:
        where = f"in {self.namespace}" if self.namespace else "cluster-wide"
        return f"{self.verb} {self.group or 'core'}/{self.resource} {where}"


@dataclass(frozen=True)
class Grant:
    """One (group, resource, verb) a role allows, and where: ``None`` for everywhere
    (bound by a ClusterRoleBinding), else the namespace of a RoleBinding."""
    group: str
    resource: str
    verb: str
    namespace: str | None


def _rules(role: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    assert "aggregationRule" not in role, f"{role['metadata']['name']}: aggregation is not modelled"
    for rule in role.get("rules") or []:
        assert not rule.get("resourceNames") and not rule.get("nonResourceURLs"), rule
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"{role['metadata']['name']} grants {field} '*'"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    yield group, resource, verb


def grants(objects: list[dict[str, Any]], account: str, account_namespace: str) -> set[Grant]:
    """Everything the ServiceAccount is allowed, through every binding naming it."""
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
             for o in objects if o["kind"] in ("ClusterRole", "Role") and o["apiVersion"] == RBAC}
    out: set[Grant] = set()
    for binding in objects:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding") or binding["apiVersion"] != RBAC:
            continue
        named = any(s["kind"] == "ServiceAccount" and s["name"] == account and s.get("namespace") == account_namespace
                    for s in binding.get("subjects") or [])
        if not named:
            continue
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        role_namespace = scope if ref["kind"] == "Role" else None
        role = roles.get((ref["kind"], role_namespace, ref["name"]))
        assert role is not None, f"{binding['metadata']['name']} refers to {ref['kind']} {ref['name']}, not rendered"
        out.update(Grant(g, r, v, scope) for g, r, v in _rules(role))
    return out


def allowed(granted: set[Grant], request: Request) -> bool:
    return any(g.group == request.group and g.resource == request.resource and g.verb == request.verb
               and (g.namespace is None or g.namespace == request.namespace) for g in granted)
