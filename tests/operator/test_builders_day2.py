"""Builders of a secure, observable cluster (spec.tls, spec.auth, spec.metrics.prometheus,
spec.networkPolicy, spec.nsqd.durable): every manifest valid for Kubernetes (built-in
kinds) or for its project's CRD (Certificate, PodMonitor), and each shaped as promised."""
from __future__ import annotations

import fnmatch
import tomllib
from typing import Any

import kubernetes_validate
import pydantic
import pytest

from nsq_operator.builders import build_cluster, names, toml
from nsq_operator.builders.configmap import nsqd_config
from nsq_operator.builders.listeners import client_listeners
from nsq_operator.builders.revision import Revision
from nsq_operator.constants import TLS_REVISION_ANNOTATION, TLS_SECRET_ANNOTATION
from tests import custom_kinds
from tests.operator.samples import cluster
from tests.operator.test_builders import K8S_VERSIONS, by_kind_and_name

ISSUER = {"issuerRef": {"name": "nsq-ca", "kind": "ClusterIssuer"}}
SECURE: dict[str, Any] = {
    "tls": ISSUER, "clusterDomain": "cluster.local",
    "auth": {"httpAddresses": ["nsq-auth.auth:4181", "https://auth.example.com/auth"], "requestMethod": "post"},
    "metrics": {"prometheus": {"enabled": True, "labels": {"release": "prometheus"}}},
    "networkPolicy": {"enabled": True, "clientLabels": {"nsq-client": "true"},
                      "clientNamespaces": {"matchLabels": {"team": "payments"}},
                      "allowFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]},
    "nsqd": {"durable": True, "replicas": 4},
}
CLIENT_AUTH = {"tls": {"secretName": "mine", "required": "tcp-https", "clientAuthPolicy": "require-verify"}}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("spec", [SECURE, CLIENT_AUTH], ids=["issuer-auth-metrics-policy", "secret-client-auth"])
def test_every_manifest_is_valid_for_kubernetes_or_its_crd(spec: dict[str, Any], version: str) -> None:
    manifests = build_cluster(cluster(**spec))
    for manifest in manifests:
        if custom_kinds.is_custom(manifest):
            custom_kinds.validate(manifest)
        else:
            kubernetes_validate.validate(manifest, version, strict=True)


def test_the_custom_kind_check_catches_a_field_the_crd_lacks() -> None:
    certificate = by_kind_and_name(build_cluster(cluster(**SECURE)))["Certificate", "demo-nsqd-tls"]
    certificate["spec"]["dnsName"] = ["typo"]
    with pytest.raises(AssertionError, match=r"\.spec\.dnsName"):
        custom_kinds.validate(certificate)
    certificate["spec"].pop("dnsName")
    certificate["spec"]["duration"] = 90
    with pytest.raises(pydantic.ValidationError):
        custom_kinds.validate(certificate)


def _nsqd(spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    built = build_cluster(cluster(**spec).model_copy(update=extra))
    return by_kind_and_name(built)["StatefulSet", "demo-nsqd"]["spec"]["template"]


def test_tls_flags_volume_ports_and_https_probes() -> None:
    template = _nsqd({"tls": ISSUER})
    container = template["spec"]["containers"][0]
    assert [a for a in container["args"] if "tls" in a or "https" in a] == [
        "--tls-cert=/etc/nsq-tls/tls.crt", "--tls-key=/etc/nsq-tls/tls.key", "--tls-required=true",
        "--tls-min-version=tls1.2", "--https-address=0.0.0.0:4152", "--tls-root-ca-file=/etc/nsq-tls/ca.crt"]
    assert {"name": "https", "containerPort": 4152, "protocol": "TCP"} in container["ports"]
    assert {"name": "tls", "mountPath": "/etc/nsq-tls", "readOnly": True} in container["volumeMounts"]
    assert {"name": "tls", "secret": {"secretName": "demo-nsqd-tls", "defaultMode": 0o440}} in template["spec"]["volumes"]
    # plain HTTP is closed with --tls-required=true: the kubelet probes over HTTPS
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "https", "scheme": "HTTPS"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/ping", "port": "https", "scheme": "HTTPS"}
    assert template["metadata"]["annotations"][TLS_SECRET_ANNOTATION] == "demo-nsqd-tls"


def test_client_certificates_keep_plain_http_for_the_probes() -> None:
    template = _nsqd(CLIENT_AUTH)
    container = template["spec"]["containers"][0]
    assert "--tls-client-auth-policy=require-verify" in container["args"]
    assert "--tls-root-ca-file=/etc/nsq-tls/ca.crt" in container["args"]
    assert "--tls-required=tcp-https" in container["args"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "http"}
    assert TLS_SECRET_ANNOTATION not in template["metadata"]["annotations"]  # the operator keeps plain HTTP
    with pytest.raises(pydantic.ValidationError, match="the kubelet's probes show none"):
        cluster(tls={"secretName": "mine", "clientAuthPolicy": "require"})


def test_no_tls_no_tls_anything() -> None:
    objs = by_kind_and_name(build_cluster(cluster()))
    assert not [m for m in objs.values() if m["kind"] == "Certificate"]
    template = objs["StatefulSet", "demo-nsqd"]["spec"]["template"]
    assert not [a for a in template["spec"]["containers"][0]["args"] if "tls" in a or "auth" in a]
    assert TLS_REVISION_ANNOTATION not in template["metadata"]["annotations"]
    assert [v["name"] for v in template["spec"]["volumes"]] == ["config"]


def test_a_renewed_certificate_is_a_new_revision_of_nsqds_pods_only() -> None:
    before = _nsqd({"tls": ISSUER}, tls_revision="aaaa")
    after = _nsqd({"tls": ISSUER}, tls_revision="bbbb")
    assert after["metadata"]["annotations"][TLS_REVISION_ANNOTATION] == "bbbb"
    old, new = Revision.of(before), Revision.of(after)
    assert old is not None and new is not None
    assert old.config != new.config and old.image == new.image and old.restart == new.restart
    lookupd = [by_kind_and_name(build_cluster(cluster(tls=ISSUER).model_copy(update={"tls_revision": r})))[
        "StatefulSet", "demo-lookupd"] for r in ("aaaa", "bbbb")]
    assert lookupd[0] == lookupd[1]


def test_the_certificate_names_every_pod_and_service_however_nsqd_scales() -> None:
    for replicas in (1, 7):
        demo = cluster(tls=ISSUER, clusterDomain="cluster.local", nsqd={"replicas": replicas})
        certificate = by_kind_and_name(build_cluster(demo))["Certificate", "demo-nsqd-tls"]
        spec = certificate["spec"]
        assert spec["secretName"] == "demo-nsqd-tls"
        assert spec["issuerRef"] == {"name": "nsq-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
        wanted = [names.nsqd_broadcast_address(demo, pod) for pod in names.nsqd_pods(demo)]
        short = [names.pod_dns(pod, "demo-nsqd-headless", "ns1") for pod in names.nsqd_pods(demo)]
        services = ["demo-nsqd", "demo-nsqd.ns1", "demo-nsqd.ns1.svc", "demo-nsqd.ns1.svc.cluster.local",
                    "demo-nsqd-headless.ns1.svc"]
        for name in wanted + short + services:  # a wildcard covers exactly one label, as TLS matches it
            assert any(fnmatch.fnmatch(name, pattern) and name.count(".") == pattern.count(".")
                       for pattern in spec["dnsNames"]), name
        assert spec["dnsNames"] == by_kind_and_name(build_cluster(cluster(
            tls=ISSUER, clusterDomain="cluster.local")))["Certificate", "demo-nsqd-tls"]["spec"]["dnsNames"]


def test_a_secret_of_ones_own_makes_no_certificate() -> None:
    objs = by_kind_and_name(build_cluster(cluster(tls={"secretName": "mine"})))
    assert not [m for m in objs.values() if m["kind"] == "Certificate"]
    volumes = objs["StatefulSet", "demo-nsqd"]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "mine", "defaultMode": 0o440}} in volumes
    with_issuer = by_kind_and_name(build_cluster(cluster(tls={"secretName": "mine", **ISSUER})))
    assert with_issuer["Certificate", "demo-nsqd-tls"]["spec"]["secretName"] == "mine"


def test_services_carry_https_and_nsqadmin_reads_nsqd_over_https() -> None:
    objs = by_kind_and_name(build_cluster(cluster(tls=ISSUER, nsqd={"replicas": 2})))
    for service in ("demo-nsqd", "demo-nsqd-headless"):
        assert {"name": "https", "port": 4152, "targetPort": "https", "protocol": "TCP"} in \
            objs["Service", service]["spec"]["ports"]
    admin = objs["Deployment", "demo-nsqadmin"]["spec"]["template"]["spec"]
    args = admin["containers"][0]["args"]
    assert [a for a in args if a.startswith("--nsqd-http-address")] == [
        "--nsqd-http-address=https://demo-nsqd-0.demo-nsqd-headless.ns1.svc:4152",
        "--nsqd-http-address=https://demo-nsqd-1.demo-nsqd-headless.ns1.svc:4152"]
    assert "--http-client-tls-root-ca-file=/etc/nsq-tls/ca.crt" in args
    assert not [a for a in args if a.startswith("--lookupd-http-address")]
    assert admin["volumes"] == [{"name": "tls", "secret": {"secretName": "demo-nsqd-tls", "defaultMode": 0o440}}]


def test_auth_flags() -> None:
    args = _nsqd(SECURE)["spec"]["containers"][0]["args"]
    assert [a for a in args if a.startswith("--auth")] == [
        "--auth-http-address=nsq-auth.auth:4181", "--auth-http-address=https://auth.example.com/auth",
        "--auth-http-request-method=post"]
    with pytest.raises(pydantic.ValidationError):
        cluster(auth={"httpAddresses": []})


def test_durable_mode_is_sync_before_ack_in_the_config_file(servers: Any, tmp_path: Any) -> None:
    config = tomllib.loads(nsqd_config(cluster(nsqd={"durable": True})))
    assert config["sync_before_ack"] is True
    assert "sync_before_ack" not in tomllib.loads(nsqd_config(cluster()))
    config["nsqlookupd_tcp_addresses"] = []
    path = tmp_path / "nsqd.conf"
    path.write_text(toml.dumps(config))
    assert servers.nsqd(config=str(path)).get_json("/config/sync_before_ack") is True


def test_prometheus_annotations_and_pod_monitors() -> None:
    objs = by_kind_and_name(build_cluster(cluster(**SECURE)))
    nsqd = objs["StatefulSet", "demo-nsqd"]["spec"]["template"]["metadata"]["annotations"]
    lookupd = objs["StatefulSet", "demo-lookupd"]["spec"]["template"]["metadata"]["annotations"]
    assert {k: v for k, v in nsqd.items() if k.startswith("prometheus.io/")} == {
        "prometheus.io/scrape": "true", "prometheus.io/path": "/metrics", "prometheus.io/port": "4152",
        "prometheus.io/scheme": "https"}
    assert lookupd["prometheus.io/port"] == "4161" and lookupd["prometheus.io/scheme"] == "http"
    monitor = objs["PodMonitor", "demo-nsqd"]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "nsqd"
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "https" and endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"]["ca"] == {"secret": {"name": "demo-nsqd-tls", "key": "ca.crt"}}
    assert endpoint["tlsConfig"]["serverName"] in objs["Certificate", "demo-nsqd-tls"]["spec"]["dnsNames"]
    [endpoint] = objs["PodMonitor", "demo-nsqlookupd"]["spec"]["podMetricsEndpoints"]
    assert endpoint == {"port": "http", "path": "/metrics", "interval": "30s", "scheme": "http"}
    off = by_kind_and_name(build_cluster(cluster()))
    assert not [m for m in off.values() if m["kind"] == "PodMonitor"]
    assert "prometheus.io/scrape" not in off["StatefulSet", "demo-nsqd"]["spec"]["template"]["metadata"]["annotations"]
    annotations_only = by_kind_and_name(build_cluster(cluster(metrics={"prometheus": {"enabled": True,
                                                                                       "podMonitor": False}})))
    assert not [m for m in annotations_only.values() if m["kind"] == "PodMonitor"]


def test_network_policy_admits_clients_nsqds_nsqadmin_and_the_operator_to_nsqd_only() -> None:
    objs = by_kind_and_name(build_cluster(cluster(**SECURE)))
    policy = objs["NetworkPolicy", "demo-nsqd"]["spec"]
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "nsqd"
    assert policy["policyTypes"] == ["Ingress"]
    [rule] = policy["ingress"]
    assert sorted(p["port"] for p in rule["ports"]) == [4150, 4151, 4152]
    peers = rule["from"]
    assert {"podSelector": {"matchLabels": {"nsq-client": "true"}},
            "namespaceSelector": {"matchLabels": {"team": "payments"}}} in peers
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "nsq-system"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "nsq-operator"}}} in peers
    components = {p["podSelector"]["matchLabels"].get("app.kubernetes.io/component") for p in peers
                  if "namespaceSelector" not in p}
    assert components == {"nsqd", "nsqadmin"}
    assert {"namespaceSelector": {"matchLabels": {"name": "monitoring"}}} in peers
    assert not [m for m in objs.values() if m["kind"] == "NetworkPolicy" and m["metadata"]["name"] != "demo-nsqd"]
    assert not [m for m in build_cluster(cluster()) if m["kind"] == "NetworkPolicy"]


def test_network_policy_admits_the_operator_where_it_runs_and_scrapers_to_http_only() -> None:
    from nsq_operator.models import NsqCluster
    from nsq_operator.models.network import OperatorPod
    from tests.operator.samples import cluster_body
    here = OperatorPod("platform", {"app.kubernetes.io/name": "queue-operator", "app.kubernetes.io/instance": "mq"})
    scrapers = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                 "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}},
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "keda"}}}]

    def policy(operator_pod: OperatorPod | None, **network: Any) -> dict[str, Any]:
        built = NsqCluster.from_body(cluster_body(networkPolicy={"enabled": True, **network}), operator_pod=operator_pod)
        return by_kind_and_name(build_cluster(built))["NetworkPolicy", "demo-nsqd"]["spec"]

    def operator_peers(spec: dict[str, Any]) -> list[dict[str, Any]]:
        return [p for p in spec["ingress"][0]["from"] if "namespaceSelector" in p]

    mine = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "platform"}},
            "podSelector": {"matchLabels": dict(here.labels)}}
    assert operator_peers(policy(here)) == [mine]  # nothing of nsq-system
    # a spec naming another operator admits it as well, never instead
    other = operator_peers(policy(here, operatorNamespace="nsq-system"))
    assert other == [mine, {**mine, "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "nsq-system"}}}]
    # an operator that does not know where it runs (outside the cluster) keeps the chart's defaults
    assert operator_peers(policy(None)) == [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "nsq-system"}}, "podSelector": {"matchLabels": {"app.kubernetes.io/name": "nsq-operator"}}}]
    with_scrapers = policy(here, httpFrom=scrapers)
    assert with_scrapers["ingress"][1] == {"from": scrapers, "ports": [{"protocol": "TCP", "port": 4151}]}
    tls = NsqCluster.from_body(cluster_body(networkPolicy={"enabled": True, "httpFrom": scrapers}, tls=ISSUER))
    assert [p["port"] for p in by_kind_and_name(build_cluster(tls))["NetworkPolicy", "demo-nsqd"]["spec"]
            ["ingress"][1]["ports"]] == [4151, 4152]


def test_listeners_name_the_client_services_and_the_https_port_with_tls() -> None:
    secure = cluster(**SECURE, admin={"enabled": False})
    manifests = by_kind_and_name(build_cluster(secure))
    listeners = {entry.name: entry.address for entry in client_listeners(secure)}
    namespace = secure.namespace
    assert listeners == {"nsqd-tcp": f"demo-nsqd.{namespace}.svc.cluster.local:4150",
                         "nsqd-http": f"demo-nsqd.{namespace}.svc.cluster.local:4151",
                         "nsqd-https": f"demo-nsqd.{namespace}.svc.cluster.local:4152",
                         "lookupd-http": f"demo-lookupd.{namespace}.svc.cluster.local:4161"}
    for address in listeners.values():
        service = manifests["Service", address.split(".")[0]]
        assert int(address.rsplit(":", 1)[1]) in [p["port"] for p in service["spec"]["ports"]]
