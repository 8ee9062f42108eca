"""Running helm on the chart and reading what it renders."""
from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "nsq-operator"
RELEASE = "nsq"
NAMESPACE = "nsq-system"


@dataclass(frozen=True)
class Helm:
    binary: Path
    home: Path  # helm's config, cache and data homes: nothing of the user's is read or written

    def run(self, *args: str, values: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
        command = [str(self.binary), *args]
        if values is not None:
            text = yaml.safe_dump(values)
            values_file = self.home / f"values-{hashlib.sha256(text.encode()).hexdigest()[:16]}.yaml"
            values_file.write_text(text)
            command += ["--values", str(values_file)]
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(self.home),
               "HELM_CONFIG_HOME": str(self.home / "config"), "HELM_CACHE_HOME": str(self.home / "cache"),
               "HELM_DATA_HOME": str(self.home / "data")}
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)

    def lint(self, values: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
        return self.run("lint", "--strict", "--namespace", NAMESPACE, str(CHART), values=values)

    def template(self, values: dict[str, Any] | None = None, kube_version: str = "1.33.0",
                 include_crds: bool = False) -> list[dict[str, Any]]:
        args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", kube_version]
        if include_crds:
            args.append("--include-crds")
        done = self.run(*args, values=values)
        assert done.returncode == 0, done.stderr
        return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = of_kind(objects, kind)
    assert len(found) == 1, f"{len(found)} {kind} rendered"
    return found[0]
