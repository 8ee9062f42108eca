"""The CRDs' CEL transition rules make cluster, topicName (NsqTopic) and cluster, topic,
channelName (NsqChannel) immutable: each rule is evaluated with cel-python, a CEL
implementation from PyPI, on the old and new spec as the API server binds them (self,
oldSelf), and crdcheck (the apiserver's own CRD validation, which compiles the rules)
accepts the CRDs."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CRDCHECK = ROOT.parent / "shared" / "k8s-crdcheck" / "crdcheck"


def rules(kind: str) -> list[dict[str, str]]:
    crd = yaml.safe_load((ROOT / "crds" / f"{kind}.nsq.dev.yaml").read_text())
    found: list[dict[str, str]] = \
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]
    return found


def refusals(kind: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The messages of the rules a change from ``old`` to ``new`` breaks."""
    env = celpy.Environment()
    out = []
    for rule in rules(kind):
        program = env.program(env.compile(rule["rule"]))
        if not program.evaluate({"self": celpy.json_to_cel(new), "oldSelf": celpy.json_to_cel(old)}):
            out.append(rule["message"])
    return out


TOPIC = {"cluster": "demo", "topicName": "orders", "paused": False, "deletionPolicy": "Retain"}
CHANNEL = {"cluster": "demo", "topic": "orders", "channelName": "billing", "paused": False}


@pytest.mark.parametrize("kind, old, change, refused", [
    ("nsqtopics", TOPIC, {"paused": True, "deletionPolicy": "Delete"}, []),
    ("nsqtopics", TOPIC, {"cluster": "other"}, ["cluster is immutable: delete this object and create another"]),
    ("nsqtopics", TOPIC, {"topicName": "orders_v2"}, ["topicName is immutable: delete this object and create another"]),
    ("nsqtopics", {"cluster": "demo"}, {"topicName": "orders"}, ["topicName is immutable: delete this object and create another"]),
    ("nsqchannels", CHANNEL, {"paused": True}, []),
    ("nsqchannels", CHANNEL, {"topic": "clicks"}, ["topic is immutable: delete this object and create another"]),
    ("nsqchannels", CHANNEL, {"channelName": None}, ["channelName is immutable: delete this object and create another"]),
])
def test_what_names_an_nsq_object_cannot_change(kind: str, old: dict[str, Any], change: dict[str, Any],
                                                refused: list[str]) -> None:
    new = {k: v for k, v in {**old, **change}.items() if v is not None}
    assert refusals(kind, old, new) == refused
    assert refusals(kind, old, old) == []


def test_the_apiserver_accepts_the_rules() -> None:
    tool = str(CRDCHECK) if CRDCHECK.exists() else shutil.which("crdcheck")
    if tool is None:
        pytest.skip("crdcheck (../shared/k8s-crdcheck) is not on this machine")
    objects = [{"apiVersion": "nsq.dev/v1alpha1", "kind": "NsqTopic", "metadata": {"name": "t", "namespace": "n"},
                "spec": TOPIC},
               {"apiVersion": "nsq.dev/v1alpha1", "kind": "NsqChannel", "metadata": {"name": "c", "namespace": "n"},
                "spec": CHANNEL}]
    done = subprocess.run([tool, str(ROOT / "crds" / "nsqtopics.nsq.dev.yaml"), str(ROOT / "crds" / "nsqchannels.nsq.dev.yaml"),
                           "/dev/stdin"], input=yaml.safe_dump_all(objects), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
