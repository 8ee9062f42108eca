"""What a cluster gets without asking: resource requests (never BestEffort), nsqd and
nsqlookupd pods spread softly over nodes; and the cluster DNS domain its names end in."""
from __future__ import annotations

import tomllib
from typing import Any

from nsq_operator.builders import build_cluster
from nsq_operator.builders.configmap import nsqd_config
from nsq_operator.endpoints import PodDnsEndpoints
from tests.operator.samples import cluster
from tests.operator.test_builders import by_kind_and_name


def pod_spec(statefulset: str, **spec: Any) -> dict[str, Any]:
    found: dict[str, Any] = by_kind_and_name(build_cluster(cluster(**spec)))["StatefulSet", statefulset]["spec"]["template"]["spec"]
    return found


def test_pods_are_never_best_effort() -> None:
    assert pod_spec("demo-nsqd")["containers"][0]["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"}}
    assert pod_spec("demo-lookupd")["containers"][0]["resources"] == {"requests": {"cpu": "50m", "memory": "64Mi"}}
    # what the user gives wins; a resource with only a limit is left to Kubernetes (it requests the limit)
    mine = pod_spec("demo-nsqd", nsqd={"resources": {"requests": {"cpu": "2"}, "limits": {"memory": "1Gi"}}})
    assert mine["containers"][0]["resources"] == {"requests": {"cpu": "2"}, "limits": {"memory": "1Gi"}}


def test_pods_are_spread_over_nodes_unless_told_otherwise() -> None:
    for statefulset, component in (("demo-nsqd", "nsqd"), ("demo-lookupd", "nsqlookupd")):
        (spread,) = pod_spec(statefulset)["topologySpreadConstraints"]
        assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["whenUnsatisfiable"] == "ScheduleAnyway"
        assert spread["maxSkew"] == 1 and spread["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == component
    zones = [{"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}]
    (spread,) = pod_spec("demo-nsqd", scheduling={"topologySpreadConstraints": zones})["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone" and spread["whenUnsatisfiable"] == "DoNotSchedule"


def test_the_cluster_dns_domain_ends_every_advertised_name() -> None:
    spec = {"clusterDomain": "k8s.example.org", "lookupd": {"replicas": 1}}
    nsqd = pod_spec("demo-nsqd", **spec)["containers"][0]
    assert "--broadcast-address=$(POD_NAME).demo-nsqd-headless.ns1.svc.k8s.example.org" in nsqd["args"]
    lookupd = pod_spec("demo-lookupd", **spec)["containers"][0]
    assert "--broadcast-address=$(POD_NAME).demo-lookupd.ns1.svc.k8s.example.org" in lookupd["args"]
    assert tomllib.loads(nsqd_config(cluster(**spec)))["nsqlookupd_tcp_addresses"] == \
        ["demo-lookupd-0.demo-lookupd.ns1.svc.k8s.example.org:4160"]
    ref = cluster(**spec).ref
    assert PodDnsEndpoints().nsqd_http(ref, "demo-nsqd-0") == "http://demo-nsqd-0.demo-nsqd-headless.ns1.svc.k8s.example.org:4151"
    # unset: the names pods complete through their search path, as before
    assert "--broadcast-address=$(POD_NAME).demo-nsqd-headless.ns1.svc" in pod_spec("demo-nsqd")["containers"][0]["args"]


def test_the_operator_chooses_the_default_image_not_the_crd() -> None:
    from pathlib import Path

    import yaml

    from nsq_operator.constants import DEFAULT_IMAGE
    from nsq_operator.models import NsqCluster
    from tests.operator.samples import cluster_body
    crd = yaml.safe_load((Path(__file__).resolve().parents[2] / "crds" / "nsqclusters.nsq.dev.yaml").read_text())
    image = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["image"]
    assert "default" not in image  # a CRD default would be stored in every object, and outlive the operator
    registry, _, rest = DEFAULT_IMAGE.partition("/")
    assert "." in registry and ":" in rest.rsplit("/", 1)[-1]  # fully qualified, with a tag
    assert pod_spec("demo-nsqd")["containers"][0]["image"] == DEFAULT_IMAGE
    mine = NsqCluster.from_body(cluster_body(), default_image="registry.example/nsq/nsq-operator:9.9.9")
    assert {c["image"] for m in build_cluster(mine) if m["kind"] == "StatefulSet"
            for c in m["spec"]["template"]["spec"]["containers"]} == {"registry.example/nsq/nsq-operator:9.9.9"}
    named = NsqCluster.from_body(cluster_body(image="nsq:pinned"), default_image="registry.example/x:1")
    assert named.image == "nsq:pinned"
