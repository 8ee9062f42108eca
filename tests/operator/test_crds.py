"""crds/*.yaml: generated from the models, structural, valid for Kubernetes, and the
schema itself rejects the bad specs it can express."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import jsonschema
import kubernetes_validate
import pytest
import yaml

from nsq_operator import crdgen

CRDS = Path(__file__).resolve().parents[2] / "crds"
K8S_VERSIONS = ["1.28.0", "1.33.0"]


def load(kind: str) -> dict[str, Any]:
    return yaml.safe_load((CRDS / f"{kind}.nsq.dev.yaml").read_text(encoding="utf-8"))


def schema_of(kind: str) -> dict[str, Any]:
    return load(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_crd_files_match_the_models() -> None:
    assert crdgen.main([str(CRDS), "--check"]) == 0, "crds/ drifted: run python -m nsq_operator.crdgen"


def test_check_reports_drift(tmp_path: Path) -> None:
    assert crdgen.main([str(tmp_path)]) == 0
    victim = tmp_path / "nsqtopics.nsq.dev.yaml"
    victim.write_text(victim.read_text().replace("paused", "halted"))
    assert crdgen.main([str(tmp_path), "--check"]) == 1


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("kind", ["nsqclusters", "nsqtopics", "nsqchannels"])
def test_crds_are_valid_kubernetes_objects(kind: str, version: str) -> None:
    kubernetes_validate.validate(load(kind), version, strict=True)


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("kind", ["nsqclusters", "nsqtopics", "nsqchannels"])
def test_schemas_are_structural_and_described(kind: str) -> None:
    for path, node in walk(schema_of(kind)):
        free = node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
        assert "type" in node or free, f"{path} has no type"
        assert "$ref" not in node and "title" not in node, path
        assert not ("properties" in node and "additionalProperties" in node), path
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            assert isinstance(node.get(key, True), bool), path
        if path.count(".") >= 1 and not path.endswith("]") and "{" not in path.rsplit(".", 1)[-1]:
            if path not in (".apiVersion", ".kind", ".metadata"):
                assert node.get("description"), f"{path} has no description (kubectl explain shows it)"


def test_cluster_crd_has_scale_status_columns_and_short_name() -> None:
    version = load("nsqclusters")["spec"]["versions"][0]
    assert version["subresources"]["status"] == {}
    assert version["subresources"]["scale"]["specReplicasPath"] == ".spec.nsqd.replicas"
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert {"Replicas", "Ready-Nsqd", "Age"} <= set(columns)
    assert load("nsqclusters")["spec"]["names"]["shortNames"] == ["nsqc"]
    status = schema_of("nsqclusters")["properties"]["status"]["properties"]
    assert {"observedGeneration", "conditions"} <= set(status)
    assert set(status["conditions"]["items"]["properties"]) >= {"type", "status", "reason", "message"}


def test_topic_and_channel_columns_show_depth() -> None:
    for kind in ("nsqtopics", "nsqchannels"):
        columns = {c["name"] for c in load(kind)["spec"]["versions"][0]["additionalPrinterColumns"]}
        assert {"Depth", "Ready", "Age", "Cluster"} <= columns
    assert load("nsqchannels")["spec"]["names"]["shortNames"] == ["nsqch"]


def validator(kind: str) -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(schema_of(kind))


def errors(kind: str, obj: dict[str, Any]) -> list[str]:
    return sorted(".".join(str(p) for p in e.absolute_path) for e in validator(kind).iter_errors(obj))


def test_valid_objects_pass_the_schema() -> None:
    assert errors("nsqclusters", {"spec": {"nsqd": {"replicas": 5, "resources": {"requests": {"cpu": "100m", "memory": 1024}},
                                                    "options": {"msg-timeout": "1m30s"}}}}) == []
    assert errors("nsqtopics", {"spec": {"cluster": "demo", "topicName": "orders#ephemeral"}}) == []
    assert errors("nsqchannels", {"spec": {"cluster": "demo", "topic": "orders", "channelName": "archive"}}) == []


@pytest.mark.parametrize("kind, obj, field", [
    ("nsqclusters", {"spec": {"nsqd": {"replicas": -1}}}, "spec.nsqd.replicas"),
    ("nsqclusters", {"spec": {"nsqd": {"options": {"max-deflate-level": 0}}}}, "spec.nsqd.options.max-deflate-level"),
    ("nsqclusters", {"spec": {"nsqd": {"options": {"msg-timeout": "one minute"}}}}, "spec.nsqd.options.msg-timeout"),
    ("nsqclusters", {"spec": {"nsqd": {"storage": {"size": "lots"}}}}, "spec.nsqd.storage.size"),
    ("nsqtopics", {"spec": {"cluster": "demo", "topicName": "no spaces"}}, "spec.topicName"),
    ("nsqtopics", {"spec": {"cluster": "demo", "topicName": "x" * 65}}, "spec.topicName"),
    ("nsqtopics", {"spec": {"cluster": "Demo_Cluster"}}, "spec.cluster"),
    ("nsqtopics", {"spec": {}}, "spec"),
    ("nsqchannels", {"spec": {"cluster": "demo", "topic": "t", "channelName": "a/b"}}, "spec.channelName"),
    ("nsqchannels", {"spec": {"cluster": "demo", "topic": "t", "deletionPolicy": "Orphan"}}, "spec.deletionPolicy"),
])
def test_the_schema_rejects_bad_specs(kind: str, obj: dict[str, Any], field: str) -> None:
    assert field in errors(kind, obj)


def test_schema_defaults_are_nsqs() -> None:
    options = schema_of("nsqclusters")["properties"]["spec"]["properties"]["nsqd"]["properties"]["options"]
    assert options["properties"]["mem-queue-size"]["default"] == 10000
    assert options["properties"]["msg-timeout"]["default"] == "60s"
    assert options["default"] == {}


EXAMPLES = Path(__file__).resolve().parents[2] / "operator" / "examples"
SPECS = {"NsqCluster": "nsqclusters", "NsqTopic": "nsqtopics", "NsqChannel": "nsqchannels"}


def test_the_examples_pass_the_schema_and_the_models() -> None:
    from nsq_operator.models import NsqChannelSpec, NsqClusterSpec, NsqTopicSpec
    models = {"NsqCluster": NsqClusterSpec, "NsqTopic": NsqTopicSpec, "NsqChannel": NsqChannelSpec}
    documents = list(yaml.safe_load_all((EXAMPLES / "nsq.yaml").read_text()))
    assert [d["kind"] for d in documents] == ["NsqCluster", "NsqTopic", "NsqChannel", "NsqChannel"]
    for document in documents:
        assert errors(SPECS[document["kind"]], document) == [], document["metadata"]["name"]
        models[document["kind"]].model_validate(document["spec"])
