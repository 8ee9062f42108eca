"""CustomResourceDefinitions generated from the pydantic models.

``python -m nsq_operator.crdgen [DIR]`` writes ``DIR/*.yaml`` (default ``crds``);
``--check`` exits 1 and names the files that differ from the models."""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from .builders.limits import MAX_CLUSTER_NAME, TIGHTEST
from .constants import GROUP, VERSION
from .models import NsqChannelSpec, NsqClusterSpec, NsqClusterStatus, NsqTopicSpec, TopologyStatus
from .openapi import structural_schema

READY = '.status.conditions[?(@.type=="Ready")].status'


def _column(name: str, path: str, type_: str = "string", description: str = "", priority: int = 0) -> dict[str, Any]:
    column: dict[str, Any] = {"name": name, "type": type_, "jsonPath": path}
    if description:
        column["description"] = description
    if priority:
        column["priority"] = priority
    return column


AGE = _column("Age", ".metadata.creationTimestamp", "date")


@dataclass(frozen=True)
class CrdKind:
    kind: str
    plural: str
    short_names: list[str]
    description: str
    spec: type[BaseModel]
    status: type[BaseModel]
    columns: list[dict[str, Any]]
    spec_required: bool
    scale: dict[str, str] | None = None
    rules: list[dict[str, str]] = field(default_factory=list)  # CEL at the root (metadata.name is there)
    categories: list[str] = field(default_factory=lambda: ["nsq"])

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"


KINDS = [
    CrdKind(
        kind="NsqCluster", plural="nsqclusters", short_names=["nsqc"],
        description="An NSQ cluster: nsqlookupd and nsqd pods run and kept in shape by the operator.",
        spec=NsqClusterSpec, status=NsqClusterStatus, spec_required=False,
        columns=[_column("Ready", READY, description="all pods ready and registered"),
                 _column("Replicas", ".spec.nsqd.replicas", "integer", "nsqd pods wanted"),
                 _column("Ready-Nsqd", ".status.nsqd.readyReplicas", "integer", "nsqd pods ready"),
                 _column("Lookupd", ".spec.lookupd.replicas", "integer", "nsqlookupd pods wanted"),
                 _column("Image", ".spec.image", priority=1), AGE],
        scale={"specReplicasPath": ".spec.nsqd.replicas", "statusReplicasPath": ".status.nsqd.replicas",
               "labelSelectorPath": ".status.nsqd.selector"},
        # every name the operator makes from the cluster's must fit (builders/limits.py)
        rules=[{"rule": f"self.metadata.name.size() <= {MAX_CLUSTER_NAME}",
                "message": f"metadata.name may have at most {MAX_CLUSTER_NAME} characters: {TIGHTEST} must fit "
                           f"63 characters"}]),
    CrdKind(
        kind="NsqTopic", plural="nsqtopics", short_names=["nsqt"],
        description="An NSQ topic kept on every nsqd of a cluster.",
        spec=NsqTopicSpec, status=TopologyStatus, spec_required=True,
        columns=[_column("Cluster", ".spec.cluster"), _column("Topic", ".status.name"),
                 _column("Paused", ".spec.paused", "boolean"),
                 _column("Depth", ".status.depth", "integer", "messages waiting on all nsqds"),
                 _column("Ready", READY), AGE]),
    CrdKind(
        kind="NsqChannel", plural="nsqchannels", short_names=["nsqch"],
        description="An NSQ channel kept on every nsqd of a cluster, created before an nsqd takes traffic.",
        spec=NsqChannelSpec, status=TopologyStatus, spec_required=True,
        columns=[_column("Cluster", ".spec.cluster"), _column("Topic", ".spec.topic"),
                 _column("Channel", ".status.name"), _column("Paused", ".spec.paused", "boolean"),
                 _column("Depth", ".status.depth", "integer", "messages waiting on all nsqds"),
                 _column("In-Flight", ".status.inFlight", "integer", "messages in flight on all nsqds"),
                 _column("Ready", READY), AGE]),
]


def crd(kind: CrdKind) -> dict[str, Any]:
    spec = structural_schema(kind.spec)
    spec["description"] = f"The desired state of the {kind.kind}."
    if not kind.spec_required:
        spec["default"] = {}
    status = structural_schema(kind.status)
    status["description"] = f"The observed state of the {kind.kind}, written by the operator."
    schema: dict[str, Any] = {
        "type": "object",
        "description": kind.description,
        "properties": {
            "apiVersion": {"type": "string", "description": "nsq.dev/v1alpha1"},
            "kind": {"type": "string", "description": kind.kind},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }
    if kind.spec_required:
        schema["required"] = ["spec"]
    if kind.rules:
        schema["x-kubernetes-validations"] = [dict(rule) for rule in kind.rules]
    subresources: dict[str, Any] = {"status": {}}
    if kind.scale:
        subresources["scale"] = dict(kind.scale)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": kind.crd_name, "labels": {"app.kubernetes.io/part-of": "nsq-operator"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": kind.kind, "listKind": f"{kind.kind}List", "plural": kind.plural,
                      "singular": kind.singular, "shortNames": kind.short_names, "categories": kind.categories},
            "versions": [{
                "name": VERSION, "served": True, "storage": True,
                "schema": {"openAPIV3Schema": schema},
                "subresources": subresources,
                "additionalPrinterColumns": kind.columns,
            }],
        },
    }


def render(kind: CrdKind) -> str:
    header = "# Generated by `python -m nsq_operator.crdgen` from nsq_operator.models; do not edit.\n"
    return header + yaml.safe_dump(crd(kind), sort_keys=False, allow_unicode=True, width=120)


def rendered_files() -> dict[str, str]:
    return {f"{kind.crd_name}.yaml": render(kind) for kind in KINDS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nsq_operator.crdgen", description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", default="crds")
    parser.add_argument("--check", action="store_true", help="report drift instead of writing")
    args = parser.parse_args(argv)
    out = Path(args.directory)
    files = rendered_files()
    if args.check:
        stale = [name for name, text in files.items()
                 if not (out / name).exists() or (out / name).read_text(encoding="utf-8") != text]
        for name in stale:
            print(f"{out / name} differs from the models; run python -m nsq_operator.crdgen", file=sys.stderr)
        return 1 if stale else 0
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
