"""The chart lints, renders objects Kubernetes 1.28 and 1.33 accept, ships the
repository's CRDs unchanged, and turns its values into the operator's Deployment and the
example cluster."""
from __future__ import annotations

import filecmp
import urllib.parse
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from nsq_operator.cli import parser as operator_parser
from nsq_operator.constants import DEFAULT_IMAGE
from nsq_operator.models import NsqChannelSpec, NsqCluster, NsqTopicSpec
from tests.chart.render import CHART, NAMESPACE, ROOT, Helm, of_kind, one
from tests.chart.values import CUSTOM

K8S_VERSIONS = ["1.28.0", "1.33.0"]
REPO_CRDS = ROOT / "crds"
CUSTOM_KINDS = {"NsqCluster": ("nsqclusters", None), "NsqTopic": ("nsqtopics", NsqTopicSpec),
                "NsqChannel": ("nsqchannels", NsqChannelSpec)}


def crd_schema(plural: str) -> dict[str, Any]:
    crd = yaml.safe_load((REPO_CRDS / f"{plural}.nsq.dev.yaml").read_text(encoding="utf-8"))
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def validate_custom(obj: dict[str, Any]) -> None:
    plural, spec_model = CUSTOM_KINDS[obj["kind"]]
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft4Validator(crd_schema(plural)).iter_errors(obj)]
    assert errors == [], f"{obj['kind']} {obj['metadata']['name']}: {errors}"
    if spec_model is None:
        NsqCluster.from_body({**obj, "metadata": {**obj["metadata"], "uid": "u", "generation": 1}})
    else:
        spec_model.model_validate(obj["spec"])


def operator_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    containers = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


@pytest.mark.parametrize("values", [None, CUSTOM], ids=["defaults", "custom"])
def test_helm_lint_passes(helm: Helm, values: dict[str, Any] | None) -> None:
    done = helm.lint(values)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


@pytest.mark.parametrize("bad, field", [
    ({"logLevel": "trace"}, "logLevel"),
    ({"watchNamespaces": ["Not_A_Namespace"]}, "watchNamespaces"),
    ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
    ({"intervals": {"status": 0}}, "status"),
    ({"exampleCluster": {"topics": [{"name": "no spaces allowed"}]}}, "name"),
    ({"replicaCount": 2}, "replicaCount"),
])
def test_values_outside_the_schema_are_refused(helm: Helm, bad: dict[str, Any], field: str) -> None:
    done = helm.lint(bad)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stdout + done.stderr
    assert field in done.stdout + done.stderr


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("values", [None, CUSTOM], ids=["defaults", "custom"])
def test_every_rendered_object_is_valid_for_kubernetes(helm: Helm, version: str, values: dict[str, Any] | None) -> None:
    objects = helm.template(values, kube_version=version, include_crds=True)
    builtin = [o for o in objects if o["kind"] not in CUSTOM_KINDS]
    custom = [o for o in objects if o["kind"] in CUSTOM_KINDS]
    assert {o["kind"] for o in builtin} == {"CustomResourceDefinition", "ServiceAccount", "ClusterRole",
                                            "ClusterRoleBinding", "Deployment"} | ({"RoleBinding"} if values else set())
    assert len(of_kind(objects, "CustomResourceDefinition")) == 3
    for obj in builtin:
        kubernetes_validate.validate(obj, version, strict=True)
    for obj in custom:
        validate_custom(obj)
    assert len(custom) == (5 if values else 0)


def test_the_chart_ships_the_repository_crds_unchanged() -> None:
    shipped, generated = CHART / "crds", REPO_CRDS
    names = sorted(p.name for p in generated.glob("*.yaml"))
    assert names and sorted(p.name for p in shipped.iterdir()) == names
    match, mismatch, errors = filecmp.cmpfiles(generated, shipped, names, shallow=False)
    assert mismatch == [] and errors == [], f"charts/nsq-operator/crds drifted from crds/: copy {mismatch + errors}"


def test_a_default_release_runs_one_operator_on_every_namespace(helm: Helm) -> None:
    objects = helm.template()
    deployment = one(objects, "Deployment")
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # never two operators at once
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == one(objects, "ServiceAccount")["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = operator_container(objects)
    assert container["image"] == DEFAULT_IMAGE  # what an NsqCluster runs unless told otherwise
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["command"] == ["nsq-operator"]
    args = operator_parser().parse_args(container["args"])
    assert args.all_namespaces and args.namespace == [] and not args.verbose
    assert args.default_image == container["image"]  # clusters naming no image run the operator's release
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert of_kind(objects, "NsqCluster") == [] and of_kind(objects, "RoleBinding") == []


@pytest.mark.parametrize("values", [None, CUSTOM], ids=["defaults", "custom"])
def test_the_liveness_probe_asks_the_operator_where_it_answers(helm: Helm, values: dict[str, Any] | None) -> None:
    container = operator_container(helm.template(values))
    endpoint = urllib.parse.urlsplit(operator_parser().parse_args(container["args"]).liveness)
    probe = container["livenessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert endpoint.hostname == "0.0.0.0"  # the kubelet probes the pod's address, not its loopback
    assert endpoint.port == ports[probe["port"]] == (values or {}).get("livenessPort", 8080)
    assert endpoint.path == probe["path"] == "/healthz"


def test_values_reach_the_operator(helm: Helm) -> None:
    objects = helm.template(CUSTOM)
    container = operator_container(objects)
    assert container["image"] == "registry.example.com/nsq/nsq-operator:1.2.3"
    assert container["imagePullPolicy"] == "Always"
    assert container["resources"] == CUSTOM["resources"]
    args = operator_parser().parse_args(container["args"])
    assert args.namespace == CUSTOM["watchNamespaces"] and not args.all_namespaces
    assert args.verbose  # logLevel debug
    assert (args.status_interval, args.drift_interval) == (30, 2.5)
    pod = one(objects, "Deployment")["spec"]["template"]
    assert pod["metadata"]["labels"]["team"] == "messaging"
    assert pod["metadata"]["annotations"] == {"example.com/scrape": "false"}
    for key in ("nodeSelector", "tolerations", "priorityClassName", "imagePullSecrets"):
        assert pod["spec"][key] == CUSTOM[key]
    assert one(objects, "ServiceAccount")["metadata"]["annotations"] == CUSTOM["serviceAccount"]["annotations"]


def test_the_example_cluster_runs_the_operator_image_with_its_topics_and_channels(helm: Helm) -> None:
    objects = helm.template(CUSTOM)
    cluster = one(objects, "NsqCluster")
    assert cluster["metadata"] == {**cluster["metadata"], "name": "demo", "namespace": NAMESPACE}
    assert cluster["spec"]["image"] == "registry.example.com/nsq/nsq-operator:1.2.3"
    model = NsqCluster.from_body({**cluster, "metadata": {**cluster["metadata"], "uid": "u", "generation": 1}})
    assert (model.spec.nsqd.replicas, model.spec.lookupd.replicas) == (2, 2)  # lookupd from the defaults
    assert model.spec.drain_timeout_seconds == 90
    topics = {t["spec"]["topicName"]: t for t in of_kind(objects, "NsqTopic")}
    channels = {(c["spec"]["topic"], c["spec"]["channelName"]): c for c in of_kind(objects, "NsqChannel")}
    assert set(topics) == {"Orders_v1", "clicks"}
    assert set(channels) == {("Orders_v1", "billing"), ("Orders_v1", "archive#ephemeral")}
    for obj in [*topics.values(), *channels.values()]:
        assert obj["spec"]["cluster"] == "demo" and obj["metadata"]["namespace"] == NAMESPACE
    names = [o["metadata"]["name"] for o in [*topics.values(), *channels.values()]]
    assert len(set(names)) == len(names)


def test_an_example_cluster_user_image_wins(helm: Helm) -> None:
    values = {"exampleCluster": {"enabled": True, "spec": {"image": "nsq:custom"}}}
    assert one(helm.template(values), "NsqCluster")["spec"]["image"] == "nsq:custom"


def test_an_example_cluster_the_operator_would_not_watch_is_refused(helm: Helm) -> None:
    values = {"watchNamespaces": ["team-a"], "exampleCluster": {"enabled": True}}
    done = helm.run("template", "nsq", str(CHART), "--namespace", NAMESPACE, values=values)
    assert done.returncode != 0
    assert "watchNamespaces leaves out" in done.stderr


def test_one_version_names_the_release_everywhere() -> None:
    """The package version is the release: the chart's version and appVersion, the
    operator's default image tag (which the chart's default image must be), every
    command's --version (nsq_protocol.version, tests/release/test_versions.py), the image
    the Dockerfile's comment builds and the example manifests naming the release image all
    say it."""
    import re
    import tomllib
    from importlib import metadata

    from nsq_operator.constants import IMAGE_REPOSITORY, OPERATOR_VERSION
    from nsq_protocol.version import RELEASE
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    version = project["version"]
    assert metadata.version("nsq-operator") == OPERATOR_VERSION == RELEASE == version, "reinstall the package"
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert set(re.findall(r"nsq-operator:(\d+\.\d+\.\d+\S*)", dockerfile)) <= {version}
    assert chart["version"] == version and chart["appVersion"] == version
    assert DEFAULT_IMAGE == f"{IMAGE_REPOSITORY}:{version}"
    registry = IMAGE_REPOSITORY.split("/", 1)[0]
    assert "." in registry and registry != "docker.io"  # fully qualified, where a release publishes it
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert values["image"]["repository"] == IMAGE_REPOSITORY and values["image"]["tag"] == ""
    examples = ROOT / "operator" / "examples"
    for path in sorted(examples.glob("*.yaml")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if IMAGE_REPOSITORY in line or "nsq-operator:" in line.replace(IMAGE_REPOSITORY, ""):
                assert f"{IMAGE_REPOSITORY}:{version}" in line, f"{path.name}: {line.strip()}"


def test_the_default_release_runs_the_published_image(helm: Helm) -> None:
    container = operator_container(helm.template())
    assert container["image"] == DEFAULT_IMAGE
    assert operator_parser().parse_args(container["args"]).default_image == DEFAULT_IMAGE


def test_a_locally_built_image_replaces_the_published_one(helm: Helm) -> None:
    values = {"image": {"repository": "localhost:5000/nsq-operator", "tag": "dev", "pullPolicy": "Never"},
              "exampleCluster": {"enabled": True}}
    objects = helm.template(values)
    container = operator_container(objects)
    assert container["image"] == "localhost:5000/nsq-operator:dev"
    assert container["imagePullPolicy"] == "Never"
    assert operator_parser().parse_args(container["args"]).default_image == "localhost:5000/nsq-operator:dev"
    assert one(objects, "NsqCluster")["spec"]["image"] == "localhost:5000/nsq-operator:dev"
