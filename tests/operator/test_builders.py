"""Pure builders: every manifest valid for two Kubernetes versions, and shaped as the
cluster needs (stable DNS names, OnDelete, claims, probes, ownership)."""
from __future__ import annotations

import tomllib
from typing import Any

import kubernetes_validate
import pytest

from nsq_operator.builders import build_cluster, toml
from nsq_operator.builders.configmap import nsqd_config
from nsq_operator.constants import NSQD_READINESS_PATH, TOPOLOGY_READY_CONDITION
from tests.operator.samples import cluster
from tests.servers import Nsqd

K8S_VERSIONS = ["1.28.0", "1.33.0"]

RICH_SPEC: dict[str, Any] = {
    "nsqd": {"replicas": 5, "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
             "storage": {"size": "50Gi", "storageClassName": "fast", "whenScaled": "Delete", "whenDeleted": "Delete"},
             "options": {"mem-queue-size": 0, "sync-every": 1, "msg-timeout": "90s"},
             "replication": {"replicas": 3, "timeout": "2s", "failoverTimeout": "10s"}},
    "lookupd": {"replicas": 2, "resources": {"requests": {"cpu": 0.1}}},
    "scheduling": {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                       {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                           "labelSelector": {"matchLabels": {"app": "x"}}}}]}},
                   "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "nsq", "effect": "NoSchedule"}],
                   "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                  "whenUnsatisfiable": "ScheduleAnyway"}],
                   "nodeSelector": {"pool": "queues"}, "priorityClassName": "high"},
    "imagePullSecrets": ["registry"],
    "drainTimeoutSeconds": 120,
    "metrics": {"enabled": True, "statsdAddress": "statsd.monitoring:8125"},
}


def by_kind_and_name(manifests: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m["kind"], m["metadata"]["name"]): m for m in manifests}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("spec", [{}, RICH_SPEC], ids=["defaults", "everything-set"])
def test_every_manifest_is_valid_kubernetes(spec: dict[str, Any], version: str) -> None:
    manifests = build_cluster(cluster(**spec))
    assert len(manifests) == 11
    for manifest in manifests:
        kubernetes_validate.validate(manifest, version, strict=True)


def test_the_cluster_owns_everything_with_standard_labels() -> None:
    for manifest in build_cluster(cluster()):
        meta = manifest["metadata"]
        assert meta["namespace"] == "ns1"
        assert meta["ownerReferences"] == [{"apiVersion": "nsq.dev/v1alpha1", "kind": "NsqCluster", "name": "demo",
                                            "uid": "uid-demo", "controller": True, "blockOwnerDeletion": True}]
        assert meta["labels"]["app.kubernetes.io/instance"] == "demo"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "nsq-operator"


def test_nsqd_statefulset() -> None:
    objs = by_kind_and_name(build_cluster(cluster(**RICH_SPEC)))
    sts = objs["StatefulSet", "demo-nsqd"]["spec"]
    assert sts["replicas"] == 5
    assert sts["updateStrategy"] == {"type": "OnDelete"}
    assert sts["serviceName"] == "demo-nsqd-headless"
    assert sts["persistentVolumeClaimRetentionPolicy"] == {"whenScaled": "Delete", "whenDeleted": "Delete"}
    claim = sts["volumeClaimTemplates"][0]["spec"]
    assert claim["resources"]["requests"]["storage"] == "50Gi" and claim["storageClassName"] == "fast"
    pod = sts["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] > 120
    assert pod["readinessGates"] == [{"conditionType": TOPOLOGY_READY_CONDITION}]
    container = pod["containers"][0]
    assert "--broadcast-address=$(POD_NAME).demo-nsqd-headless.ns1.svc" in container["args"]
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert container["readinessProbe"]["httpGet"] == {"path": NSQD_READINESS_PATH, "port": "http"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/ping"
    startup = container["startupProbe"]  # /ping answers 503 while a large data path loads
    assert startup["httpGet"]["path"] == "/ping" and startup["periodSeconds"] * startup["failureThreshold"] >= 3600
    assert container["resources"]["limits"] == {"memory": "1Gi"}
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert pod["nodeSelector"] == {"pool": "queues"} and pod["priorityClassName"] == "high"
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    spread = pod["topologySpreadConstraints"][0]
    assert spread["labelSelector"]["matchLabels"] == sts["selector"]["matchLabels"]


def test_headless_services_publish_pods_before_they_are_ready() -> None:
    objs = by_kind_and_name(build_cluster(cluster()))
    for name in ("demo-nsqd-headless", "demo-lookupd"):
        spec = objs["Service", name]["spec"]
        assert spec["clusterIP"] == "None" and spec["publishNotReadyAddresses"] is True
    client = objs["Service", "demo-nsqd"]["spec"]
    assert client["type"] == "ClusterIP" and "publishNotReadyAddresses" not in client
    assert {p["port"] for p in client["ports"]} == {4150, 4151}


def test_budgets_allow_one_pod_down_and_pods_get_no_api_token() -> None:
    objs = by_kind_and_name(build_cluster(cluster()))
    assert objs["PodDisruptionBudget", "demo-nsqd"]["spec"]["maxUnavailable"] == 1
    assert objs["PodDisruptionBudget", "demo-lookupd"]["spec"]["maxUnavailable"] == 1
    assert objs["ServiceAccount", "demo-nsq"]["automountServiceAccountToken"] is False


def test_nsqd_config_lists_every_lookupd_by_dns_name() -> None:
    config = tomllib.loads(nsqd_config(cluster(**RICH_SPEC)))
    assert config["nsqlookupd_tcp_addresses"] == ["demo-lookupd-0.demo-lookupd.ns1.svc:4160",
                                                  "demo-lookupd-1.demo-lookupd.ns1.svc:4160"]
    assert config["mem_queue_size"] == 0 and config["sync_every"] == 1 and config["msg_timeout"] == "90s"
    assert config["statsd_address"] == "statsd.monitoring:8125"


def options_hash(spec: dict[str, Any]) -> str:
    sts = by_kind_and_name(build_cluster(cluster(**spec)))["StatefulSet", "demo-nsqd"]
    return sts["spec"]["template"]["metadata"]["annotations"]["nsq.dev/options-hash"]


def test_pod_template_changes_with_options_not_with_lookupd_scale() -> None:
    base = options_hash({})
    assert options_hash({"lookupd": {"replicas": 5}}) == base
    assert options_hash({"nsqd": {"replicas": 7}}) == base
    assert options_hash({"nsqd": {"options": {"msg-timeout": "2m"}}}) != base


def test_a_real_nsqd_accepts_the_generated_config(servers: Any, tmp_path: Any) -> None:
    demo = cluster(nsqd={"options": {"mem-queue-size": 7, "max-rdy-count": 99, "msg-timeout": "90s",
                                     "busy-poll-window": "20us"}})
    config = tomllib.loads(nsqd_config(demo))
    config["nsqlookupd_tcp_addresses"] = []  # the DNS names only resolve inside the cluster
    path = tmp_path / "nsqd.conf"
    path.write_text(toml.dumps(config))
    nsqd: Nsqd = servers.nsqd(config=str(path))
    assert nsqd.get_json("/config/mem_queue_size") == 7
    assert nsqd.get_json("/config/max_rdy_count") == 99
    assert nsqd.get_json("/config/msg_timeout") == 90 * 10**9
    assert nsqd.get_json("/config/busy_poll_window") == 20_000
