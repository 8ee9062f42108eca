"""nsqadmin for a cluster: a Deployment of nsqadmin pods asking every lookupd by its
stable DNS name, and a Service in front of them (``kubectl port-forward`` to it, or a
NodePort / LoadBalancer). ``spec.admin.enabled: false`` scales the Deployment to zero."""
from __future__ import annotations

from typing import Any

from ..constants import ADMIN_DEFAULT_REQUESTS, LOOKUPD_HTTP_PORT, NSQ_TLS_DIR, NSQD_HTTPS_PORT
from ..models import NsqCluster
from . import labels, names, tls
from .ownership import object_meta
from .pods import container_security_context, http_probe, resources, scheduling, security_context

ADMIN = "nsqadmin"
ADMIN_HTTP_PORT = 4171


def admin_name(cluster: NsqCluster) -> str:
    return f"{cluster.name}-nsqadmin"


def lookupd_http_addresses(cluster: NsqCluster) -> list[str]:
    return [f"{names.lookupd_broadcast_address(cluster, pod)}:{LOOKUPD_HTTP_PORT}" for pod in names.lookupd_pods(cluster)]


def _https_only(cluster: NsqCluster) -> bool:
    return cluster.spec.tls is not None and cluster.spec.tls.https_only


def upstream_args(cluster: NsqCluster) -> list[str]:
    """Where nsqadmin reads the cluster: its lookupds, or, when nsqd's plain HTTP is closed,
    every nsqd by its HTTPS address (lookupd hands out plain HTTP ports only), trusting
    the TLS Secret's ca.crt."""
    if not _https_only(cluster):
        return [f"--lookupd-http-address={a}" for a in lookupd_http_addresses(cluster)]
    return [*(f"--nsqd-http-address=https://{names.nsqd_broadcast_address(cluster, pod)}:{NSQD_HTTPS_PORT}"
              for pod in names.nsqd_pods(cluster)),
            f"--http-client-tls-root-ca-file={NSQ_TLS_DIR}/{tls.CA_FILE}"]


def admin_container(cluster: NsqCluster) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": ADMIN,
        "image": cluster.image,
        "imagePullPolicy": cluster.spec.image_pull_policy,
        "command": [ADMIN],
        "args": [f"--http-address=0.0.0.0:{ADMIN_HTTP_PORT}", *upstream_args(cluster)],
        "ports": [{"name": "http", "containerPort": ADMIN_HTTP_PORT, "protocol": "TCP"}],
        "readinessProbe": http_probe("/ping", "http", period=5, failures=3),
        "livenessProbe": http_probe("/ping", "http", period=10, failures=6, initial_delay=5),
        "securityContext": container_security_context(),
    }
    container["resources"] = resources(cluster.spec.admin.resources, ADMIN_DEFAULT_REQUESTS)
    if _https_only(cluster):
        container["volumeMounts"] = [tls.mount()]
    return container


def build_admin_deployment(cluster: NsqCluster) -> dict[str, Any]:
    admin = cluster.spec.admin
    selector = labels.selector(cluster, ADMIN)
    pod_spec: dict[str, Any] = {
        "serviceAccountName": names.service_account(cluster),
        "automountServiceAccountToken": False,
        "securityContext": security_context(),
        "containers": [admin_container(cluster)],
        **scheduling(cluster, selector),
    }
    if _https_only(cluster):
        pod_spec["volumes"] = [tls.volume(cluster)]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_meta(cluster, admin_name(cluster), ADMIN),
        "spec": {
            "replicas": admin.replicas if admin.enabled else 0,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": labels.labels(cluster, ADMIN)}, "spec": pod_spec},
        },
    }


def build_admin_service(cluster: NsqCluster) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(cluster, admin_name(cluster), ADMIN),
        "spec": {"type": cluster.spec.admin.service_type, "selector": labels.selector(cluster, ADMIN),
                 "ports": [{"name": "http", "port": ADMIN_HTTP_PORT, "targetPort": "http", "protocol": "TCP"}]},
    }
