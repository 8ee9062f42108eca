"""Everything of ours a user hands to a real kube-apiserver passes the apiserver's own
checks (crdcheck: structural schemas, defaulting, pruning, validation, CEL): the CRDs,
the examples and the manifests in the documentation. The chart's rendering is checked
in tests/chart/test_chart_apiserver.py."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tests.apiserver_checks import ABSENT, CRD_FILES, ROOT, check, tool

pytestmark = pytest.mark.skipif(tool() is None, reason=ABSENT)

KINDS = {"NsqCluster", "NsqTopic", "NsqChannel"}
# kubectl apply (client-side) keeps the whole object in this annotation, at most 256 KiB
LAST_APPLIED_LIMIT = 262144
# what e2e/kind/lib.sh fills in before applying its manifests
PLACEHOLDERS = {"__NAMESPACE__": "nsq-e2e", "__IMAGE__": "docker.io/library/nsq-operator:e2e", "__NAME__": "load",
                "__RATE__": "100"}


def _ours(documents: list[Any]) -> list[dict[str, Any]]:
    return [d for d in documents if isinstance(d, dict) and d.get("kind") in KINDS]


def documented_manifests() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The NsqCluster/NsqTopic/NsqChannel manifests of the documentation: YAML blocks of
    every Markdown file, and the YAML files beside the docs that users apply."""
    for markdown in sorted(ROOT.glob("**/*.md")):
        if ".venv" in markdown.parts or "node_modules" in markdown.parts:
            continue
        for index, block in enumerate(re.findall(r"```ya?ml\n(.*?)```", markdown.read_text(encoding="utf-8"), re.S)):
            found = _ours(list(yaml.safe_load_all(block)))
            if found:
                yield f"{markdown.relative_to(ROOT)} block {index + 1}", found
    for path in sorted([*ROOT.glob("e2e/kind/*.yaml"), *ROOT.glob("operator/examples/*.yaml")]):
        text = path.read_text(encoding="utf-8")
        for placeholder, value in PLACEHOLDERS.items():
            text = text.replace(placeholder, value)
        found = _ours(list(yaml.safe_load_all(text)))
        if found:
            yield str(path.relative_to(ROOT)), found


def test_the_crds_are_accepted() -> None:
    assert len(CRD_FILES) == 3
    assert check() == []


def test_every_documented_manifest_is_accepted() -> None:
    manifests = dict(documented_manifests())
    assert {"e2e/kind/cluster.yaml", "operator/examples/nsq.yaml"} <= set(manifests), sorted(manifests)
    for where, documents in manifests.items():
        assert check(documents) == [], where


def quantity(where: dict[str, Any], value: Any) -> dict[str, Any]:
    return {"apiVersion": "nsq.dev/v1alpha1", "kind": "NsqCluster", "metadata": {"name": "q", "namespace": "ns"},
            "spec": {"nsqd": {"storage": {"size": value} if where == "size" else {},
                              "resources": {"requests": {"memory": value}} if where == "memory" else {}}}}


@pytest.mark.parametrize("where", ["size", "memory"])
def test_quantities_are_int_or_string_with_the_pattern_beside(where: str) -> None:
    assert check([quantity(where, "512Mi"), quantity(where, 1024), quantity(where, "0.5")]) == []
    refused = check([quantity(where, "lots")])
    assert len(refused) == 1 and "should match" in refused[0], refused


def int_or_strings(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if node.get("x-kubernetes-int-or-string"):
        yield node
    for sub in [*node.get("properties", {}).values(), node.get("items"), node.get("additionalProperties")]:
        if isinstance(sub, dict):
            yield from int_or_strings(sub)


def test_every_int_or_string_is_exactly_the_two_branches() -> None:
    found = [node for path in CRD_FILES for version in yaml.safe_load(path.read_text())["spec"]["versions"]
             for node in int_or_strings(version["schema"]["openAPIV3Schema"])]
    assert len(found) >= 5  # storage.size, requests and limits of nsqd and lookupd (and of nsqadmin)
    for node in found:
        assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}]
        assert "type" not in node


def test_kubectl_apply_can_keep_the_last_applied_crd() -> None:
    for path in CRD_FILES:
        assert len(json.dumps(yaml.safe_load(path.read_text()))) < LAST_APPLIED_LIMIT, path.name


def test_a_broken_crd_is_refused(tmp_path: Path) -> None:
    """The check can fail: the quantity schema this project once shipped."""
    crd = yaml.safe_load((ROOT / "crds" / "nsqclusters.nsq.dev.yaml").read_text())
    size = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["nsqd"][
        "properties"]["storage"]["properties"]["size"]
    size["anyOf"][1]["pattern"] = size.pop("pattern")
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(crd))
    errors = check(crds=[broken])
    assert any("must be empty to be structural" in e for e in errors), errors
