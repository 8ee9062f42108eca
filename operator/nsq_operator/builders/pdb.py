"""PodDisruptionBudgets: voluntary evictions take at most one pod of a component at a time."""
from __future__ import annotations

from typing import Any

from ..models import NsqCluster
from . import labels, names
from .ownership import object_meta


def _pdb(cluster: NsqCluster, name: str, component: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": object_meta(cluster, name, component),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels.selector(cluster, component)}}}


def build_nsqd_pdb(cluster: NsqCluster) -> dict[str, Any]:
    return _pdb(cluster, names.nsqd_pdb(cluster), labels.NSQD)


def build_lookupd_pdb(cluster: NsqCluster) -> dict[str, Any]:
    return _pdb(cluster, names.lookupd_pdb(cluster), labels.LOOKUPD)
