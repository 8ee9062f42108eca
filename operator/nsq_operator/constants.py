"""Names and numbers shared by the CRDs, the builders and the handlers."""
from __future__ import annotations

from importlib import metadata
from typing import Final

GROUP: Final = "nsq.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

# the release: the package's version is the one place it is written (pyproject.toml); the
# chart's appVersion and version equal it (tests/chart/test_chart.py fails otherwise)
OPERATOR_VERSION: Final = metadata.version("nsq-operator")
# where a release publishes the image (operator, nsqd and nsqlookupd in one)
IMAGE_REPOSITORY: Final = "ghcr.io/nsq-operator/nsq-operator"
# what an NsqCluster runs when its spec names no image: the operator's own release, fully
# qualified (an unqualified name means another registry to another runtime's config);
# `nsq-operator --default-image` (the chart passes its own image) overrides it
DEFAULT_IMAGE: Final = f"{IMAGE_REPOSITORY}:{OPERATOR_VERSION}"

# container ports, NSQ's defaults
NSQD_TCP_PORT: Final = 4150
NSQD_HTTP_PORT: Final = 4151
NSQD_HTTPS_PORT: Final = 4152  # only with spec.tls
NSQD_REPLICATION_PORT: Final = 4153  # only with spec.nsqd.replication.replicas > 1: nsqds copy messages to peers
LOOKUPD_TCP_PORT: Final = 4160
LOOKUPD_HTTP_PORT: Final = 4161

# nsqd's /ready answers 503 from the moment a drain starts, so clients leave it first
NSQD_READINESS_PATH: Final = "/ready"
NSQD_LIVENESS_PATH: Final = "/ping"
LOOKUPD_READINESS_PATH: Final = "/ping"
LOOKUPD_LIVENESS_PATH: Final = "/ping"

NSQD_DATA_PATH: Final = "/data"
NSQD_CONFIG_DIR: Final = "/etc/nsq"
NSQD_CONFIG_FILE: Final = "nsqd.conf"
LOOKUPD_CONFIG_FILE: Final = "nsqlookupd.conf"
NSQ_TLS_DIR: Final = "/etc/nsq-tls"  # the TLS Secret's tls.crt, tls.key and ca.crt

# The pod condition the operator sets once every declared topic and channel exists on
# that nsqd; the pod's readiness gate waits for it, so no client reaches a bare nsqd.
TOPOLOGY_READY_CONDITION: Final = f"{GROUP}/topology-ready"

EMPTY_REQUEST_ANNOTATION: Final = f"{GROUP}/empty-requested-at"
OPTIONS_HASH_ANNOTATION: Final = f"{GROUP}/options-hash"
# on an NsqCluster: a new value asks for one more rolling restart; "true" pauses the operator
RESTART_ANNOTATION: Final = f"{GROUP}/restart"
PAUSED_ANNOTATION: Final = f"{GROUP}/paused"
# on pod templates (and so on pods): what a pod runs, one hash per reason to restart it
IMAGE_REVISION_ANNOTATION: Final = f"{GROUP}/image-revision"
CONFIG_REVISION_ANNOTATION: Final = f"{GROUP}/config-revision"
RESTART_REVISION_ANNOTATION: Final = f"{GROUP}/restart-revision"
FINALIZER: Final = f"{GROUP}/topology"
# on nsqd's pod template: a hash of the TLS Secret's data, so a renewed certificate rolls the pods
TLS_REVISION_ANNOTATION: Final = f"{GROUP}/tls-revision"
# on nsqd's pod template with spec.tls: the operator calls that pod's HTTP API over HTTPS, trusting
# this Secret's ca.crt and showing its certificate (the pod says it, so a roll that turns TLS on works)
TLS_SECRET_ANNOTATION: Final = f"{GROUP}/tls-secret"

# requested for a resource the user gives neither a request nor a limit for: enough for an
# idle broker, so the pods are Burstable rather than BestEffort
NSQD_DEFAULT_REQUESTS: Final = {"cpu": "100m", "memory": "128Mi"}
LOOKUPD_DEFAULT_REQUESTS: Final = {"cpu": "50m", "memory": "64Mi"}
ADMIN_DEFAULT_REQUESTS: Final = {"cpu": "25m", "memory": "64Mi"}

# nsqd gets this long beyond the drain timeout before the kubelet kills it
TERMINATION_GRACE_MARGIN_SECONDS: Final = 15
NSQD_CLAIM_TEMPLATE: Final = "data"  # a pod's claim is named <template>-<pod>

MANAGED_BY: Final = "nsq-operator"
INSTANCE_LABEL: Final = "app.kubernetes.io/instance"  # names the NsqCluster on everything built for it
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
