"""The documentation users read: the README in the order they need it (install, run
locally, publish and consume, Kubernetes, Spark, then the reference under docs/), its
client example run against a real nsqd, its cluster manifest built by the operator, the
two set-up commands and no others, links that resolve, Python examples that are whole
programs, and nothing in them that only makes sense inside this project's own work
(paths beside the checkout, issue numbers, work sessions)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from nsq_operator.builders import build_cluster
from nsq_operator.models import NsqCluster
from tests.conftest import Servers

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
USER_DOCS = sorted({README, ROOT / "CHANGELOG.md", ROOT / "pipeline" / "README.md", ROOT / "operator" / "UPGRADING.md",
                    ROOT / "charts" / "nsq-operator" / "README.md", *(ROOT / "docs").glob("*.md"),
                    *(ROOT / "distributions").glob("**/README.md")})
NOT_FOR_USERS = re.compile(r"\.\./shared|\bissues? #?\d+|\bthe issue\b|\bsessions? \d+|\b(?:this|same|previous|next) session\b",
                           re.I)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def blocks(path: Path, language: str) -> list[str]:
    return [code for lang, code in FENCE.findall(text(path)) if lang == language]


def section(title: str) -> str:
    return text(README).split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_user_docs_speak_to_users(doc: Path) -> None:
    found = [m.group(0) for m in NOT_FOR_USERS.finditer(text(doc))]
    assert not found, f"{doc.relative_to(ROOT)}: {found}"


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(doc: Path) -> None:
    for target in re.findall(r"\]\(([^)\s]+)\)", text(doc)):
        if "://" in target or target.startswith("#"):
            continue
        assert (doc.parent / target.split("#")[0]).exists(), f"{doc.relative_to(ROOT)}: {target}"


def test_the_readme_goes_in_the_order_people_need_it() -> None:
    headings = re.findall(r"^## (.+)$", text(README), re.M)
    assert headings == ["Install", "Run NSQ on this machine", "Publish and consume", "Run it on Kubernetes",
                        "A Spark pipeline", "Reference", "Working on it"]
    for page in ("servers.md", "differences-from-go.md", "drain-and-handoff.md", "client.md", "operator.md",
                 "benchmarks.md", "design.md", "development.md"):
        assert f"(docs/{page})" in text(README), f"the README does not point at docs/{page}"


def test_the_readme_sets_up_with_make_demo_and_make_test_only() -> None:
    assert set(re.findall(r"\bmake ([\w-]+)", text(README))) == {"demo", "test"}
    assert "make demo" in section("Working on it") and "make test" in section("Working on it")


@pytest.mark.parametrize("doc", [d for d in USER_DOCS if blocks(d, "python")], ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples_are_whole_programs(doc: Path) -> None:
    """No ``await`` outside a function: each example compiles as a module."""
    for code in blocks(doc, "python"):
        compile(code, str(doc), "exec")


@pytest.mark.parametrize("doc", [README, ROOT / "distributions" / "nsq-client" / "README.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_publish_and_consume_example_runs_against_nsqd(doc: Path, servers: Servers) -> None:
    [example] = [code for code in blocks(doc, "python") if "Producer(" in code and "Consumer(" in code]
    nsqd = servers.nsqd()
    program = example.replace("127.0.0.1:4150", nsqd.tcp_address)
    assert program.count(nsqd.tcp_address) == 2, "the example names nsqd's address twice"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "hello\n"
    assert nsqd.channel("events", "archive")["message_count"] == 1  # type: ignore[index]


def test_the_readme_cluster_is_what_the_operator_builds_and_the_addresses_it_names() -> None:
    [manifest] = blocks(README, "yaml")
    doc: dict[str, Any] = yaml.safe_load(manifest)
    cluster = NsqCluster.from_body({**doc, "metadata": {**doc["metadata"], "namespace": "apps", "uid": "u"}})
    services = {m["metadata"]["name"]: {p["port"] for p in m["spec"]["ports"]}
                for m in build_cluster(cluster) if m["kind"] == "Service"}
    for name, port in re.findall(r"`([\w-]+)\.<namespace>:(\d+)`", section("Run it on Kubernetes")):
        assert int(port) in services.get(name, set()), f"{name}:{port} is not a Service port ({services})"
