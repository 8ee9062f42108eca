"""The two StatefulSets: nsqlookupd (stateless) and nsqd (one claim per pod), both
``OnDelete``: the operator's roller decides when each pod restarts, and in what order."""
from __future__ import annotations

from typing import Any

from ..constants import (LOOKUPD_CONFIG_FILE, LOOKUPD_DEFAULT_REQUESTS, NSQD_DEFAULT_REQUESTS, NSQD_CLAIM_TEMPLATE, LOOKUPD_HTTP_PORT, LOOKUPD_LIVENESS_PATH, LOOKUPD_READINESS_PATH,
                         LOOKUPD_TCP_PORT, NSQD_CONFIG_DIR, NSQD_CONFIG_FILE, NSQD_DATA_PATH, NSQD_HTTP_PORT,
                         NSQD_HTTPS_PORT, NSQD_LIVENESS_PATH, NSQD_READINESS_PATH, NSQD_REPLICATION_PORT,
                         NSQD_TCP_PORT,
                         OPTIONS_HASH_ANNOTATION, TERMINATION_GRACE_MARGIN_SECONDS, TLS_REVISION_ANNOTATION,
                         TLS_SECRET_ANNOTATION, TOPOLOGY_READY_CONDITION)
from ..models import NsqCluster
from ..strategic_merge import merge_pod_template
from . import labels, monitoring, names, tls
from .configmap import nsqd_tunables, options_hash
from .ownership import object_meta
from .revision import stamp
from .pods import (POD_NAME_ENV, container_security_context, http_probe, resources, scheduling,
                   security_context)

DATA_VOLUME = NSQD_CLAIM_TEMPLATE
REPLICATION_PORT_NAME = "replication"
# nsqd answers /ping 503 LOADING while it opens its topics (about a second per thousand):
# liveness is held off until /ping has answered 200 once, for up to an hour
NSQD_STARTUP_PERIOD, NSQD_STARTUP_FAILURES = 5, 720
CONFIG_VOLUME = "config"


def _ports(tcp: int, http: int) -> list[dict[str, Any]]:
    return [{"name": "tcp", "containerPort": tcp, "protocol": "TCP"},
            {"name": "http", "containerPort": http, "protocol": "TCP"}]


def _config_volume(cluster: NsqCluster) -> dict[str, Any]:
    return {"name": CONFIG_VOLUME, "configMap": {"name": names.config_map(cluster)}}


def _pod_template(cluster: NsqCluster, component: str, container: dict[str, Any], extra: dict[str, Any],
                  annotations: dict[str, str], volumes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    selector = labels.selector(cluster, component)
    spec: dict[str, Any] = {
        "serviceAccountName": names.service_account(cluster),
        "automountServiceAccountToken": False,
        "securityContext": security_context(),
        "containers": [container],
        "volumes": [_config_volume(cluster), *(volumes or [])],
        **scheduling(cluster, selector),
        **extra,
    }
    annotations = {**annotations, **monitoring.scrape_annotations(cluster, component)}
    template = {"metadata": {"labels": labels.labels(cluster, component), "annotations": annotations}, "spec": spec}
    override = (cluster.spec.nsqd if component == labels.NSQD else cluster.spec.lookupd).pod_template
    return merge_pod_template(template, override.wire())


def nsqd_security_args(cluster: NsqCluster) -> list[str]:
    """TLS and authorization flags (spec.tls, spec.auth)."""
    args = tls.nsqd_args(cluster.spec.tls) if cluster.spec.tls else []
    if (auth := cluster.spec.auth) is not None:
        args += [f"--auth-http-address={address}" for address in auth.http_addresses]
        args.append(f"--auth-http-request-method={auth.request_method}")
    return args


def nsqd_replication_args(cluster: NsqCluster) -> list[str]:
    """Replicated topics (spec.nsqd.replication): this pod's stable address, every ordinal's
    in order (the replicas of the spec) with the list's epoch, the copies wanted and the
    timeouts. Nothing when replication is off. The list and its epoch restart no pod
    (revision.LIVE_ARGS): running nsqds are given a new list live (reconcile.membership),
    pods made later start with it."""
    replication = cluster.spec.nsqd.replicated
    if replication is None:
        return []
    own = names.nsqd_replication_address(cluster, "$(POD_NAME)")
    # the pod's DNS name is published only once the pod has its address: listen on every
    # interface of the pod rather than resolve its own name at start
    return [f"--replication-address={own}",
            f"--replication-listen-address=0.0.0.0:{NSQD_REPLICATION_PORT}",
            f"--replication-peer={','.join(names.nsqd_replication_peers(cluster))}",
            *([f"--replication-membership-epoch={cluster.peer_epoch}"] if cluster.peer_epoch else []),
            f"--topic-replicas={replication.replicas}",
            f"--replication-timeout={replication.timeout}",
            f"--replication-failover-timeout={replication.failover_timeout}"]


def nsqd_probes(cluster: NsqCluster) -> dict[str, Any]:
    """Over HTTPS when plain HTTP is closed (the kubelet does not verify the certificate)."""
    https = cluster.spec.tls is not None and cluster.spec.tls.https_only
    port, scheme = ("https", "HTTPS") if https else ("http", "HTTP")
    return {"readinessProbe": http_probe(NSQD_READINESS_PATH, port, period=5, failures=3, scheme=scheme),
            "livenessProbe": http_probe(NSQD_LIVENESS_PATH, port, period=10, failures=6, initial_delay=10,
                                        scheme=scheme),
            "startupProbe": http_probe(NSQD_LIVENESS_PATH, port, period=NSQD_STARTUP_PERIOD,
                                       failures=NSQD_STARTUP_FAILURES, scheme=scheme)}


def nsqd_container(cluster: NsqCluster) -> dict[str, Any]:
    broadcast = names.pod_dns("$(POD_NAME)", names.nsqd_headless_service(cluster), cluster.namespace, cluster.domain)
    ports = _ports(NSQD_TCP_PORT, NSQD_HTTP_PORT)
    mounts = [{"name": DATA_VOLUME, "mountPath": NSQD_DATA_PATH},
              {"name": CONFIG_VOLUME, "mountPath": NSQD_CONFIG_DIR, "readOnly": True}]
    if cluster.spec.tls is not None:
        ports.append({"name": "https", "containerPort": NSQD_HTTPS_PORT, "protocol": "TCP"})
        mounts.append(tls.mount())
    if cluster.spec.nsqd.replicated is not None:
        ports.append({"name": REPLICATION_PORT_NAME, "containerPort": NSQD_REPLICATION_PORT, "protocol": "TCP"})
    container: dict[str, Any] = {
        "name": "nsqd",
        "image": cluster.image,
        "imagePullPolicy": cluster.spec.image_pull_policy,
        "command": ["nsqd"],
        "args": [f"--config={NSQD_CONFIG_DIR}/{NSQD_CONFIG_FILE}",
                 f"--tcp-address=0.0.0.0:{NSQD_TCP_PORT}",
                 f"--http-address=0.0.0.0:{NSQD_HTTP_PORT}",
                 f"--data-path={NSQD_DATA_PATH}",
                 f"--broadcast-address={broadcast}",
                 f"--drain-timeout={cluster.spec.drain_timeout_seconds}s",
                 *nsqd_security_args(cluster),
                 *nsqd_replication_args(cluster)],
        "env": [POD_NAME_ENV],
        "ports": ports,
        **nsqd_probes(cluster),
        "volumeMounts": mounts,
        "securityContext": container_security_context(),
    }
    container["resources"] = resources(cluster.spec.nsqd.resources, NSQD_DEFAULT_REQUESTS)
    return container


def lookupd_container(cluster: NsqCluster) -> dict[str, Any]:
    broadcast = names.pod_dns("$(POD_NAME)", names.lookupd_headless_service(cluster), cluster.namespace, cluster.domain)
    container: dict[str, Any] = {
        "name": "nsqlookupd",
        "image": cluster.image,
        "imagePullPolicy": cluster.spec.image_pull_policy,
        "command": ["nsqlookupd"],
        "args": [f"--config={NSQD_CONFIG_DIR}/{LOOKUPD_CONFIG_FILE}",
                 f"--tcp-address=0.0.0.0:{LOOKUPD_TCP_PORT}",
                 f"--http-address=0.0.0.0:{LOOKUPD_HTTP_PORT}",
                 f"--broadcast-address={broadcast}"],
        "env": [POD_NAME_ENV],
        "ports": _ports(LOOKUPD_TCP_PORT, LOOKUPD_HTTP_PORT),
        "readinessProbe": http_probe(LOOKUPD_READINESS_PATH, "http", period=5, failures=3),
        "livenessProbe": http_probe(LOOKUPD_LIVENESS_PATH, "http", period=10, failures=6, initial_delay=5),
        "volumeMounts": [{"name": CONFIG_VOLUME, "mountPath": NSQD_CONFIG_DIR, "readOnly": True}],
        "securityContext": container_security_context(),
    }
    container["resources"] = resources(cluster.spec.lookupd.resources, LOOKUPD_DEFAULT_REQUESTS)
    return container


def _claim_template(cluster: NsqCluster) -> dict[str, Any]:
    storage = cluster.spec.nsqd.storage
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage.size}}}
    if storage.storage_class_name:
        spec["storageClassName"] = storage.storage_class_name
    return {"metadata": {"name": DATA_VOLUME, "labels": labels.labels(cluster, labels.NSQD)}, "spec": spec}


def nsqd_annotations(cluster: NsqCluster) -> dict[str, str]:
    annotations = {OPTIONS_HASH_ANNOTATION: options_hash(nsqd_tunables(cluster))}
    if cluster.spec.tls is not None:
        # a renewed or replaced certificate changes the template, so the roller replaces every pod
        annotations[TLS_REVISION_ANNOTATION] = cluster.tls_revision
        if cluster.spec.tls.https_only:
            annotations[TLS_SECRET_ANNOTATION] = str(tls.secret_name(cluster))
    return annotations


def build_nsqd_statefulset(cluster: NsqCluster) -> dict[str, Any]:
    storage = cluster.spec.nsqd.storage
    template = _pod_template(
        cluster, labels.NSQD, nsqd_container(cluster),
        extra={"terminationGracePeriodSeconds": cluster.spec.drain_timeout_seconds + TERMINATION_GRACE_MARGIN_SECONDS,
               "readinessGates": [{"conditionType": TOPOLOGY_READY_CONDITION}]},
        annotations=nsqd_annotations(cluster),
        volumes=[tls.volume(cluster)] if cluster.spec.tls is not None else [])
    stamp(template, nsqd_tunables(cluster), cluster.restart_token)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": object_meta(cluster, names.nsqd_statefulset(cluster), labels.NSQD),
        "spec": {
            "serviceName": names.nsqd_headless_service(cluster),
            "replicas": cluster.spec.nsqd.replicas,
            "selector": {"matchLabels": labels.selector(cluster, labels.NSQD)},
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "persistentVolumeClaimRetentionPolicy": {"whenScaled": storage.when_scaled,
                                                     "whenDeleted": storage.when_deleted},
            "template": template,
            "volumeClaimTemplates": [_claim_template(cluster)],
        },
    }


def build_lookupd_statefulset(cluster: NsqCluster) -> dict[str, Any]:
    template = _pod_template(
        cluster, labels.LOOKUPD, lookupd_container(cluster), extra={"terminationGracePeriodSeconds": 30},
        annotations={OPTIONS_HASH_ANNOTATION: options_hash(cluster.spec.lookupd.options.config_file())})
    stamp(template, cluster.spec.lookupd.options.config_file(), cluster.restart_token)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": object_meta(cluster, names.lookupd_statefulset(cluster), labels.LOOKUPD),
        "spec": {
            "serviceName": names.lookupd_headless_service(cluster),
            "replicas": cluster.spec.lookupd.replicas,
            "selector": {"matchLabels": labels.selector(cluster, labels.LOOKUPD)},
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "template": template,
        },
    }
