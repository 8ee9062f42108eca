"""The ConfigMap holding nsqd's and nsqlookupd's config files.

The lookupd list lives here rather than in the pod template: scaling lookupd then
changes no pod template (running nsqds get the list live over HTTP), while pods that
start later read the current list."""
from __future__ import annotations

import hashlib
from typing import Any

from ..constants import LOOKUPD_CONFIG_FILE, NSQD_CONFIG_FILE
from ..models import NsqCluster
from . import names, toml
from .ownership import object_meta


def nsqd_tunables(cluster: NsqCluster) -> dict[str, Any]:
    """nsqd's config-file values the owner chose (everything but the lookupd list)."""
    values = cluster.spec.nsqd.options.config_file()
    if cluster.spec.nsqd.durable:
        values["sync_before_ack"] = True
    metrics = cluster.spec.metrics
    if metrics.enabled:
        values.update(statsd_address=metrics.statsd_address, statsd_prefix=metrics.statsd_prefix,
                      statsd_interval=metrics.statsd_interval)
    return values


def nsqd_config(cluster: NsqCluster) -> str:
    values = nsqd_tunables(cluster)
    values["nsqlookupd_tcp_addresses"] = names.lookupd_tcp_addresses(cluster)
    return toml.dumps(values)


def lookupd_config(cluster: NsqCluster) -> str:
    return toml.dumps(cluster.spec.lookupd.options.config_file())


def options_hash(values: dict[str, Any]) -> str:
    """Changes exactly when a pod must restart to pick the options up."""
    return hashlib.sha256(toml.canonical(values).encode()).hexdigest()[:16]


def build_configmap(cluster: NsqCluster) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(cluster, names.config_map(cluster)),
        "data": {NSQD_CONFIG_FILE: nsqd_config(cluster), LOOKUPD_CONFIG_FILE: lookupd_config(cluster)},
    }
