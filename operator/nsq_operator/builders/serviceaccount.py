"""The pods' ServiceAccount: nsqd and nsqlookupd never call the Kubernetes API, so no
token is mounted."""
from __future__ import annotations

from typing import Any

from ..models import NsqCluster
from . import names
from .ownership import object_meta


def build_service_account(cluster: NsqCluster) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": object_meta(cluster, names.service_account(cluster)),
            "automountServiceAccountToken": False}
