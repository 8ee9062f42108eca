"""An NsqCluster's name bounds every name made from it: Services are DNS labels (63), the
StatefulSet controller labels each pod controller-revision-hash: <statefulset>-<hash>
(a label value, 63), cert-manager's commonName has 64 bytes. The CRD refuses a longer
name (a CEL rule on metadata.name), the operator reports one stored before the rule, and
the longest name allowed fits every one of them."""
from __future__ import annotations

import string
from typing import Any

import pytest

from nsq_operator.builders import build_cluster
from nsq_operator.builders.limits import MAX_CLUSTER_NAME
from nsq_operator.builders.tls import COMMON_NAME_MAX
from nsq_operator.models import NsqCluster
from nsq_operator.reconcile.cluster import parse
from nsq_operator.status.errors import BadSpec
from tests.apiserver_checks import check, tool
from tests.operator.admission import name_and_labels
from tests.operator.kubelet import REVISION_LABEL
from tests.operator.samples import cluster_body

FULL = {"nsqd": {"replicas": 1000}, "lookupd": {"replicas": 15}, "networkPolicy": {"enabled": True},
        "metrics": {"prometheus": {"podMonitor": True}},
        "tls": {"issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}}


def name_of(length: int) -> str:
    return (string.ascii_lowercase * 3)[:length]


def derived_objects(name: str, namespace: str = "ns1") -> list[dict[str, Any]]:
    """Every object built for a cluster with every optional one asked for, and the last pod
    of each StatefulSet as its controller makes it (hostname and revision label)."""
    built = build_cluster(NsqCluster.from_body(cluster_body(name, namespace, **FULL)))
    pods = []
    for sts in (m for m in built if m["kind"] == "StatefulSet"):
        last = sts["spec"]["replicas"] - 1
        pods.append({"kind": "Pod", "metadata": {
            "name": f"{sts['metadata']['name']}-{last}",
            "labels": {**sts["spec"]["template"]["metadata"]["labels"],
                       REVISION_LABEL: f"{sts['metadata']['name']}-{'9' * 10}"}}})
    return built + pods


def test_the_longest_name_allowed_fits_every_name_made_from_it() -> None:
    objects = derived_objects(name_of(MAX_CLUSTER_NAME))
    assert {o["kind"] for o in objects} >= {"Service", "StatefulSet", "Pod", "Deployment", "Certificate"}
    for obj in objects:
        assert name_and_labels(obj) == [], obj["metadata"]["name"]
        assert len(obj["metadata"]["name"]) <= 63 or obj["kind"] not in ("Service", "Pod")


def test_one_character_more_does_not() -> None:
    too_long = [o for o in derived_objects(name_of(MAX_CLUSTER_NAME + 1)) if name_and_labels(o)]
    assert [(o["kind"], o["metadata"]["name"]) for o in too_long] == \
        [("Pod", f"{name_of(MAX_CLUSTER_NAME + 1)}-lookupd-14")]  # its controller-revision-hash label


def test_the_common_name_is_left_out_where_the_namespace_makes_it_too_long() -> None:
    def certificate(namespace: str) -> dict[str, Any]:
        return next(o for o in derived_objects(name_of(MAX_CLUSTER_NAME), namespace) if o["kind"] == "Certificate")
    short = certificate("ns1")["spec"]
    assert short["commonName"] == f"{name_of(MAX_CLUSTER_NAME)}-nsqd.ns1.svc"
    long_namespace = name_of(30)
    long = certificate(long_namespace)["spec"]
    assert len(f"{name_of(MAX_CLUSTER_NAME)}-nsqd.{long_namespace}.svc") > COMMON_NAME_MAX
    assert "commonName" not in long and f"{name_of(MAX_CLUSTER_NAME)}-nsqd.{long_namespace}.svc" in long["dnsNames"]


def test_the_operator_names_a_name_too_long_stored_before_the_rule() -> None:
    parse(cluster_body(name_of(MAX_CLUSTER_NAME)))
    with pytest.raises(BadSpec, match=rf"metadata.name .* has {MAX_CLUSTER_NAME + 1} characters, at most "
                                      rf"{MAX_CLUSTER_NAME}"):
        parse(cluster_body(name_of(MAX_CLUSTER_NAME + 1)))


@pytest.mark.skipif(tool() is None, reason="crdcheck (../shared/k8s-crdcheck) is not on this machine")
def test_the_apiserver_refuses_a_name_too_long() -> None:
    def body(length: int) -> dict[str, Any]:
        return {"apiVersion": "nsq.dev/v1alpha1", "kind": "NsqCluster",
                "metadata": {"name": name_of(length), "namespace": "ns1"}, "spec": {}}
    assert check([body(MAX_CLUSTER_NAME)]) == []
    errors = check([body(MAX_CLUSTER_NAME + 1)])
    assert len(errors) == 1 and f"at most {MAX_CLUSTER_NAME} characters" in errors[0], errors
