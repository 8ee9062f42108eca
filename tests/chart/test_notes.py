"""What ``helm install`` prints (templates/NOTES.txt): the addresses clients connect to,
which are the Services the operator builds for that cluster, and a here-document that
runs as printed and applies a valid NsqCluster.

``helm template`` leaves NOTES.txt out, and ``helm install --dry-run`` wants a cluster, so
the notes are rendered by the same engine from a copy of the chart where NOTES.txt, word
for word, is a named template that a YAML document holds as a block of text."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from nsq_operator.builders import build_cluster
from nsq_operator.models import NsqCluster
from tests.chart.render import CHART, NAMESPACE, RELEASE, Helm, one
from tests.chart.values import CUSTOM

ADDRESS = re.compile(r"([a-z0-9-]+)\.([a-z0-9<>-]+)\.svc:(\d+)")


@pytest.fixture(scope="module")
def notes_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chart = tmp_path_factory.mktemp("notes") / "nsq-operator"
    shutil.copytree(CHART, chart)
    text = (chart / "templates" / "NOTES.txt").read_text(encoding="utf-8")
    (chart / "templates" / "_notes.tpl").write_text('{{- define "notes-under-test" -}}\n' + text + "{{- end -}}\n")
    (chart / "templates" / "notes-under-test.yaml").write_text('notes: |\n{{ include "notes-under-test" . | indent 2 }}\n')
    return chart


def notes(helm: Helm, chart: Path, values: dict[str, Any] | None = None) -> str:
    done = helm.run("template", RELEASE, str(chart), "--namespace", NAMESPACE,
                    "--show-only", "templates/notes-under-test.yaml", values=values)
    assert done.returncode == 0, done.stderr
    text: str = yaml.safe_load(done.stdout)["notes"]
    return text


def services(cluster: NsqCluster) -> dict[str, set[int]]:
    return {m["metadata"]["name"]: {p["port"] for p in m["spec"]["ports"]}
            for m in build_cluster(cluster) if m["kind"] == "Service"}


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_the_example_clusters_addresses_are_its_services(helm: Helm, notes_chart: Path, tls: bool) -> None:
    values = {**CUSTOM, "watchNamespaces": [], "exampleCluster": {**CUSTOM["exampleCluster"]}}
    if tls:
        values["exampleCluster"]["spec"] = {**values["exampleCluster"]["spec"], "tls": {"secretName": "nsq-tls"}}
    text = notes(helm, notes_chart, values)
    rendered = one(helm.template(values), "NsqCluster")
    cluster = NsqCluster.from_body({**rendered, "metadata": {**rendered["metadata"], "uid": "u"}})
    built = services(cluster)
    found = ADDRESS.findall(text)
    assert {name for name, _, _ in found} == {"demo-nsqd", "demo-lookupd"}, text
    for name, namespace, port in found:
        assert namespace == NAMESPACE and int(port) in built[name], f"{name}:{port} not in {built}"
    assert ("4152 (HTTPS)" in text) == tls and ("svc:4151" in text) == (not tls)
    [forward] = re.findall(r"port-forward svc/([a-z0-9-]+) (\d+)", text)
    assert int(forward[1]) in built[forward[0]]


def test_without_nsqadmin_no_web_ui_is_offered(helm: Helm, notes_chart: Path) -> None:
    values = {"exampleCluster": {"enabled": True, "name": "nsq", "spec": {"admin": {"enabled": False}}}}
    assert "port-forward" not in notes(helm, notes_chart, values)


def test_the_here_document_applies_a_cluster_whose_addresses_are_given(helm: Helm, notes_chart: Path,
                                                                      tmp_path: Path) -> None:
    text = notes(helm, notes_chart)
    lines = text.splitlines()
    [start] = [i for i, line in enumerate(lines) if "<<'YAML'" in line]
    end = lines.index("YAML", start)  # the terminator alone at the start of its line, as bash needs it
    command = "\n".join(lines[start:end + 1]).replace("<namespace>", "apps")
    assert not lines[start].startswith(" "), "copied from the notes, the command runs as printed"
    stub = tmp_path / "kubectl"
    stub.write_text('#!/bin/sh\nprintf "%s " "$@" > "$0.args"\ncat\n')
    stub.chmod(0o755)
    done = subprocess.run(["bash", "-euc", command], capture_output=True, text=True, timeout=30,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (tmp_path / "kubectl.args").read_text().split() == ["-n", "apps", "apply", "-f", "-"]
    doc = yaml.safe_load(done.stdout)
    cluster = NsqCluster.from_body({**doc, "metadata": {**doc["metadata"], "namespace": "apps", "uid": "u"}})
    built = services(cluster)
    for name, namespace, port in ADDRESS.findall(text):
        assert namespace == "<namespace>" and int(port) in built[name], f"{name}:{port}"
