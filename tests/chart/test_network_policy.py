"""Each NsqCluster's NetworkPolicy admits the operator the chart installed, wherever it is
installed and whatever it is named: the chart tells the operator its namespace (downward
API) and its pod's selector labels, and the policy's operator peer selects exactly that
pod, as a network plugin would match it (namespace by kubernetes.io/metadata.name, pod by
labels)."""
from __future__ import annotations

from typing import Any

import pytest

from nsq_operator.builders.network import build_network_policy
from nsq_operator.cli import operator_pod, parser as operator_parser
from nsq_operator.models import NsqCluster
from tests.chart.render import CHART, Helm, one
from tests.operator.samples import cluster_body

NSQD_HTTP, NSQD_TCP = 4151, 4150


def render(helm: Helm, release: str, namespace: str, values: dict[str, Any] | None = None) -> dict[str, Any]:
    import yaml
    done = helm.run("template", release, str(CHART), "--namespace", namespace, values=values)
    assert done.returncode == 0, done.stderr
    return one([d for d in yaml.safe_load_all(done.stdout) if d], "Deployment")


def environment(container: dict[str, Any], namespace: str) -> dict[str, str]:
    """The container's environment as the kubelet resolves it (the downward API's namespace)."""
    out = {}
    for var in container.get("env") or []:
        if "value" in var:
            out[var["name"]] = var["value"]
        elif var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace":
            out[var["name"]] = namespace
    return out


def matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, selector
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def admitted(policy: dict[str, Any], namespace: str, pod_labels: dict[str, str], port: int) -> bool:
    namespace_labels = {"kubernetes.io/metadata.name": namespace}  # the apiserver labels every namespace so
    for rule in policy["spec"]["ingress"]:
        if port not in [p["port"] for p in rule["ports"]]:
            continue
        for peer in rule["from"]:
            same_namespace = "namespaceSelector" not in peer and namespace == policy["metadata"]["namespace"]
            if (same_namespace or ("namespaceSelector" in peer and matches(peer["namespaceSelector"], namespace_labels))) \
                    and matches(peer.get("podSelector", {}), pod_labels):
                return True
    return False


@pytest.mark.parametrize("release, namespace, values", [
    ("nsq", "nsq-system", None),
    ("mq", "platform", None),
    ("mq", "platform", {"nameOverride": "queue-operator"}),
    ("nsq", "ops", {"fullnameOverride": "broker-operator", "podLabels": {"team": "messaging"}}),
], ids=["default", "other-namespace", "nameOverride", "fullnameOverride"])
def test_the_network_policy_admits_the_operator_the_chart_installed(
        helm: Helm, monkeypatch: pytest.MonkeyPatch, release: str, namespace: str,
        values: dict[str, Any] | None) -> None:
    deployment = render(helm, release, namespace, values)
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    for name, value in environment(container, namespace).items():
        monkeypatch.setenv(name, value)
    args = operator_parser().parse_args(container["args"])  # the defaults come from the environment
    cluster = NsqCluster.from_body(cluster_body("demo", "apps", networkPolicy={"enabled": True}),
                                   operator_pod=operator_pod(args))
    policy = build_network_policy(cluster)
    assert policy is not None
    labels = pod["metadata"]["labels"]
    assert admitted(policy, namespace, labels, NSQD_HTTP) and admitted(policy, namespace, labels, NSQD_TCP)
    assert not admitted(policy, "elsewhere", labels, NSQD_HTTP)
    assert not admitted(policy, namespace, {"app.kubernetes.io/name": "something-else"}, NSQD_HTTP)
    # the selector the operator is told is the Deployment's own (stable across its upgrades)
    assert args.operator_labels == deployment["spec"]["selector"]["matchLabels"]
