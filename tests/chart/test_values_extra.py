"""The chart's values for what a site adds to the operator's pod: arguments, environment,
volumes, security contexts, topology spread, and the ServiceAccount (made by the release,
or an existing one named), each landing where Kubernetes reads it and still valid."""
from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from tests.chart.render import CHART, NAMESPACE, Helm, of_kind, one

EXTRA: dict[str, Any] = {
    "extraArgs": ["--ready-timeout=900"],
    "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy.example.com:3128"},
                 {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
    "extraVolumes": [{"name": "ca-bundle", "configMap": {"name": "corporate-ca"}}],
    "extraVolumeMounts": [{"name": "ca-bundle", "mountPath": "/etc/ssl/corporate", "readOnly": True}],
    "podSecurityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001,
                           "seccompProfile": {"type": "RuntimeDefault"}},
    "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True},
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                   "whenUnsatisfiable": "ScheduleAnyway",
                                   "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "nsq-operator"}}}],
}


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(objects, "Deployment")["spec"]["template"]["spec"]
    return spec


def test_extras_land_in_the_operators_pod_after_the_charts_own(helm: Helm) -> None:
    defaults = pod_spec(helm.template())
    objects = helm.template(EXTRA)
    pod = pod_spec(objects)
    [container], [default_container] = pod["containers"], defaults["containers"]
    assert container["args"] == default_container["args"] + EXTRA["extraArgs"]
    assert container["env"] == default_container["env"] + EXTRA["extraEnv"]
    assert pod["volumes"] == defaults["volumes"] + EXTRA["extraVolumes"]
    assert container["volumeMounts"] == default_container["volumeMounts"] + EXTRA["extraVolumeMounts"]
    assert pod["securityContext"] == EXTRA["podSecurityContext"]
    assert container["securityContext"] == EXTRA["securityContext"]
    assert pod["topologySpreadConstraints"] == EXTRA["topologySpreadConstraints"]
    assert "topologySpreadConstraints" not in defaults
    kubernetes_validate.validate(one(objects, "Deployment"), "1.33.0", strict=True)


def test_the_default_contexts_are_the_restricted_ones(helm: Helm) -> None:
    pod = pod_spec(helm.template())
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["containers"][0]["securityContext"] == {"allowPrivilegeEscalation": False,
                                                       "readOnlyRootFilesystem": True,
                                                       "capabilities": {"drop": ["ALL"]}}


@pytest.mark.parametrize("account", [{"name": "platform-nsq"}, {"create": False, "name": "platform-nsq"}],
                         ids=["made-and-named", "existing"])
def test_the_operator_runs_as_the_service_account_its_bindings_name(helm: Helm, account: dict[str, Any]) -> None:
    objects = helm.template({"serviceAccount": account, "watchNamespaces": [NAMESPACE, "team-a"]})
    assert pod_spec(objects)["serviceAccountName"] == "platform-nsq"
    made = of_kind(objects, "ServiceAccount")
    assert [a["metadata"]["name"] for a in made] == (["platform-nsq"] if account.get("create", True) else [])
    bindings = of_kind(objects, "RoleBinding") + of_kind(objects, "ClusterRoleBinding")
    assert len(bindings) == 3
    assert all(b["subjects"] == [{"kind": "ServiceAccount", "name": "platform-nsq", "namespace": NAMESPACE}]
               for b in bindings)


def test_an_existing_service_account_must_be_named(helm: Helm) -> None:
    done = helm.run("template", "nsq", str(CHART), "--namespace", NAMESPACE,
                    values={"serviceAccount": {"create": False}})
    assert done.returncode != 0 and "serviceAccount.name: name the existing ServiceAccount" in done.stderr


@pytest.mark.parametrize("bad", [{"extraArgs": [""]}, {"extraEnv": [{"value": "x"}]},
                                 {"extraVolumeMounts": [{"name": "ca-bundle"}]}, {"serviceAccount": {"create": "no"}},
                                 {"topologySpreadConstraints": {"maxSkew": 1}}],
                         ids=["empty-arg", "env-without-name", "mount-without-path", "create-not-bool", "spread-not-list"])
def test_malformed_extras_are_refused_by_the_schema(helm: Helm, bad: dict[str, Any]) -> None:
    done = helm.run("template", "nsq", str(CHART), "--namespace", NAMESPACE, values=bad)
    assert done.returncode != 0 and "values don't meet the specifications of the schema" in done.stderr, done.stderr

