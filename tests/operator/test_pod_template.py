"""Pod templates: every generated one meets Pod Security "restricted", and a user's
override (spec.nsqd.podTemplate, spec.lookupd.podTemplate) is merged into it the way
Kubernetes merges a strategic merge patch, with merge keys taken from Kubernetes' own
OpenAPI schema."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from nsq_operator.builders import build_cluster
from nsq_operator.reconcile.cluster import parse
from nsq_operator.status.errors import BadSpec
from nsq_operator.strategic_merge import CONTAINER_MERGE_KEYS, POD_SPEC_MERGE_KEYS
from tests.operator.pod_security import manifest_violations, violations
from tests.operator.samples import cluster, cluster_body
from tests.operator.test_builders import RICH_SPEC, by_kind_and_name

SIDECAR = {"name": "exporter", "image": "registry.example/exporter:1.2", "args": ["--port=9117"],
           "readinessProbe": {"httpGet": {"path": "/metrics", "port": 9117}},
           "livenessProbe": {"httpGet": {"path": "/metrics", "port": 9117}},
           "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
           "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                               "readOnlyRootFilesystem": True}}
OVERRIDE: dict[str, Any] = {
    "metadata": {"labels": {"team": "payments"}, "annotations": {"prometheus.io/scrape": "true"}},
    "spec": {
        "securityContext": {"runAsUser": 10001, "supplementalGroups": [4000]},
        "containers": [{"name": "nsqd", "env": [{"name": "GODEBUG", "value": "x"}],
                        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]},
                       SIDECAR],
        "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
        "tolerations": [{"key": "spot", "operator": "Exists"}],
        "terminationGracePeriodSeconds": None,
    },
}

LOOKUPD_OVERRIDE: dict[str, Any] = {"metadata": OVERRIDE["metadata"],
                                    "spec": {"containers": [SIDECAR], "volumes": OVERRIDE["spec"]["volumes"]}}


def nsqd_template(**spec: Any) -> dict[str, Any]:
    template: dict[str, Any] = by_kind_and_name(build_cluster(cluster(**spec)))["StatefulSet", "demo-nsqd"]["spec"]["template"]
    return template


@pytest.mark.parametrize("spec", [{}, RICH_SPEC, {"nsqd": {"podTemplate": OVERRIDE}, "lookupd": {"podTemplate": LOOKUPD_OVERRIDE}}],
                         ids=["defaults", "everything-set", "override"])
def test_every_generated_pod_template_meets_the_restricted_profile(spec: dict[str, Any]) -> None:
    for manifest in build_cluster(cluster(**spec)):
        assert manifest_violations(manifest) == [], manifest["metadata"]["name"]


def test_the_checker_catches_what_today_would_be_refused() -> None:
    """The profile checker is not a yes-man: the pod spec of before (no seccomp), a root
    sidecar and a hostPath volume are each named."""
    spec = nsqd_template()["spec"]
    del spec["securityContext"]["seccompProfile"]
    assert violations(spec) == ["spec.containers[nsqd].securityContext.seccompProfile.type must be RuntimeDefault or "
                                "Localhost (here or for the pod)"]
    spec = nsqd_template(nsqd={"podTemplate": {"spec": {
        "containers": [{"name": "shell", "image": "busybox", "securityContext": {"runAsUser": 0}}],
        "volumes": [{"name": "host", "hostPath": {"path": "/"}}]}}})["spec"]
    found = violations(spec)
    assert "spec.volumes[host]: hostPath volumes are forbidden" in found
    assert "spec.containers[shell].securityContext.runAsUser must not be 0" in found
    assert "spec.containers[shell].securityContext.allowPrivilegeEscalation must be false" in found
    assert "spec.containers[shell].securityContext.capabilities.drop must include ALL" in found


def test_an_override_merges_as_kubernetes_merges() -> None:
    template = nsqd_template(nsqd={"podTemplate": OVERRIDE})
    meta, spec = template["metadata"], template["spec"]
    assert meta["labels"]["team"] == "payments" and meta["labels"]["app.kubernetes.io/component"] == "nsqd"
    assert meta["annotations"]["prometheus.io/scrape"] == "true"
    assert "nsq.dev/config-revision" in meta["annotations"]
    # maps merge: the generated seccomp and group stay beside the user's uid
    assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 65532,
                                       "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"},
                                       "supplementalGroups": [4000]}
    # containers merge by name: nsqd keeps its args and probes, gains env and a mount; the sidecar is added
    assert [c["name"] for c in spec["containers"]] == ["nsqd", "exporter"]
    nsqd = spec["containers"][0]
    assert [e["name"] for e in nsqd["env"]] == ["POD_NAME", "GODEBUG"]
    assert [m["mountPath"] for m in nsqd["volumeMounts"]] == ["/data", "/etc/nsq", "/scratch"]
    assert nsqd["readinessProbe"]["httpGet"]["path"] == "/ready" and "--data-path=/data" in nsqd["args"]
    assert spec["containers"][1] == SIDECAR
    assert [v["name"] for v in spec["volumes"]] == ["config", "scratch"]
    # lists without a merge key are replaced; null removes a field
    assert spec["tolerations"] == [{"key": "spot", "operator": "Exists"}]
    assert "terminationGracePeriodSeconds" not in spec
    assert "readinessGates" in spec


def test_an_override_can_delete_a_generated_list_item_and_is_valid_kubernetes() -> None:
    override = {"spec": {"containers": [{"name": "nsqd", "env": [{"name": "POD_NAME", "$patch": "delete"}]}]}}
    spec = {"nsqd": {"podTemplate": override}, "lookupd": {"podTemplate": LOOKUPD_OVERRIDE}}
    assert nsqd_template(**spec)["spec"]["containers"][0]["env"] == []
    for manifest in build_cluster(cluster(**spec)):
        kubernetes_validate.validate(manifest, "1.33.0", strict=True)


def test_an_override_changes_the_pods_revision_so_the_pods_roll() -> None:
    base = nsqd_template()["metadata"]["annotations"]["nsq.dev/config-revision"]
    for override in ({"metadata": {"labels": {"team": "a"}}}, {"metadata": {"annotations": {"a": "b"}}},
                     {"spec": {"securityContext": {"runAsUser": 10001}}}):
        assert nsqd_template(nsqd={"podTemplate": override})["metadata"]["annotations"]["nsq.dev/config-revision"] != base


@pytest.mark.parametrize("override, field", [
    ({"metadata": {"labels": {"app.kubernetes.io/instance": "other"}}}, "spec.nsqd.podTemplate.metadata.labels"),
    ({"spec": {"containers": [{"image": "no-name"}]}}, "spec.nsqd.podTemplate"),
    ({"spec": {"volumes": [{"name": "x", "$patch": "replace"}]}}, "spec.nsqd.podTemplate"),
])
def test_an_override_the_operator_cannot_merge_is_a_bad_spec(override: dict[str, Any], field: str) -> None:
    with pytest.raises(BadSpec, match=field.replace(".", r"\.")):
        parse(cluster_body(nsqd={"podTemplate": override}))


def _openapi_definitions() -> dict[str, Any]:
    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / "v1.33.0-local" / "_definitions.json"
    definitions: dict[str, Any] = json.loads(root.read_text())["$defs"]
    return definitions


@pytest.mark.parametrize("definition, table", [("io.k8s.api.core.v1.PodSpec", POD_SPEC_MERGE_KEYS),
                                               ("io.k8s.api.core.v1.Container", CONTAINER_MERGE_KEYS)])
def test_merge_keys_are_kubernetes_own(definition: str, table: dict[str, str]) -> None:
    properties = _openapi_definitions()[definition]["properties"]
    declared = {name: prop["x-kubernetes-patch-merge-key"] for name, prop in properties.items()
                if "merge" in (prop.get("x-kubernetes-patch-strategy") or "").split(",")}
    assert table == declared
