"""Owner references: deleting an NsqCluster lets Kubernetes' garbage collector remove
everything built for it."""
from __future__ import annotations

from typing import Any

from ..constants import API_VERSION
from ..models import NsqCluster
from .labels import labels


def owner_references(cluster: NsqCluster) -> list[dict[str, Any]]:
    return [{"apiVersion": API_VERSION, "kind": "NsqCluster", "name": cluster.name, "uid": cluster.uid,
             "controller": True, "blockOwnerDeletion": True}]


def object_meta(cluster: NsqCluster, name: str, component: str | None = None) -> dict[str, Any]:
    return {"name": name, "namespace": cluster.namespace, "labels": labels(cluster, component),
            "ownerReferences": owner_references(cluster)}
