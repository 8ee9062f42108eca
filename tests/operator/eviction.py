"""The pods/eviction subresource as the API server serves it, with the disruption
controller's arithmetic done on the spot (KMock has neither): a running pod covered by a
PodDisruptionBudget is evicted only while the budget allows a disruption, else 429.

- expected pods: the replicas of the StatefulSet whose selector is the budget's (else
  the pods it selects); healthy: selected pods that are Ready and not being deleted;
  desiredHealthy = expected - maxUnavailable (or minAvailable).
- a Ready pod may go while healthy - desiredHealthy > 0; a pod that is not Ready while
  healthy >= desiredHealthy (unhealthyPodEvictionPolicy IfHealthyBudget, the default);
- a pod already being deleted, or not running, goes without a check."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

TOO_MANY_REQUESTS = 429
REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    wanted = selector.get("matchLabels") or {}
    return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _healthy(pod: Mapping[str, Any]) -> bool:
    return _ready(pod) and not pod["metadata"].get("deletionTimestamp")


def refusal(pod: Mapping[str, Any], budgets: Iterable[Mapping[str, Any]], pods: list[Mapping[str, Any]],
            statefulsets: list[Mapping[str, Any]]) -> str | None:
    """Why the eviction of ``pod`` is refused; None when it may go."""
    if pod["metadata"].get("deletionTimestamp") or (pod.get("status") or {}).get("phase") not in (None, "Running"):
        return None
    labels = pod["metadata"].get("labels") or {}
    for budget in budgets:
        selector = budget["spec"].get("selector") or {}
        if not _selects(selector, labels):
            continue
        selected = [p for p in pods if _selects(selector, p["metadata"].get("labels") or {})]
        owner = next((s for s in statefulsets if (s["spec"].get("selector") or {}) == selector), None)
        expected = int(owner["spec"].get("replicas", 0)) if owner else len(selected)
        if "minAvailable" in budget["spec"]:
            desired = int(budget["spec"]["minAvailable"])
        else:
            desired = expected - int(budget["spec"].get("maxUnavailable", 0))
        healthy = sum(1 for p in selected if _healthy(p))
        allowed = healthy - desired > 0 if _healthy(pod) else healthy >= desired
        if not allowed:
            return (f"{REFUSAL} The disruption budget {budget['metadata']['name']} needs {desired} healthy pods and "
                    f"has {healthy} of {expected}")
    return None
