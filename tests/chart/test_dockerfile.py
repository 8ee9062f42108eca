"""The image, checked without a Docker engine: its base and user, what its build context
holds, and that its build stage turns that context into a wheel with the nsqd,
nsqlookupd and nsq-operator commands and no Spark or test dependencies."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from nsq_operator.builders.pods import RUN_AS
from tests.chart.dockerfile import (DOCKERFILE, DOCKERIGNORE, IgnoreRule, Stage, context_files, ignore_rules,
                                    in_context, stages)
from tests.chart.render import ROOT, Helm, one

COMMANDS = {"nsqd", "nsqlookupd", "nsq-operator"}


def dockerfile() -> tuple[dict[str, str], list[Stage]]:
    return stages(DOCKERFILE.read_text(encoding="utf-8"))


def build_and_final() -> tuple[Stage, Stage]:
    _, found = dockerfile()
    assert len(found) == 2, "a build stage and the image"
    return found[0], found[1]


def copied_sources(build: Stage) -> list[str]:
    sources = []
    for copy in build.all("COPY"):
        words = [w for w in copy.words if not w.startswith("--")]
        sources += [w.rstrip("/") for w in words[:-1]]
    return sources


def test_the_image_is_python_311_slim_run_as_the_pods_user(helm: Helm) -> None:
    build, final = build_and_final()
    assert build.base == final.base == "python:3.11-slim"
    users = final.all("USER")
    assert users, "the image must not run as root"
    uid, _, gid = users[-1].arguments.partition(":")
    assert uid.isdigit() and int(uid) != 0  # numeric, so the kubelet can check runAsNonRoot
    assert int(uid) == RUN_AS  # the uid nsqd and nsqlookupd pods run as
    pod = one(helm.template(), "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(uid)
    assert final.all("CMD")[-1].arguments == '["nsq-operator"]'


def test_the_image_installs_only_the_wheels_built_from_the_project() -> None:
    build, final = build_and_final()
    assert any("pip wheel --wheel-dir /wheels ." in run.arguments for run in build.all("RUN"))
    install = [run.arguments for run in final.all("RUN") if "pip install" in run.arguments]
    assert len(install) == 1
    assert "--mount=type=bind,from=build,source=/wheels,target=/wheels" in install[0]
    assert "pip install --no-index --find-links=/wheels nsq-operator " in install[0]
    assert "[" not in install[0]  # no extras: neither spark nor test
    assert "/wheels" not in " ".join(i.arguments for i in final.all("COPY"))  # no wheel layer left


def test_the_build_copies_every_package_folder_and_only_the_context_holds_them() -> None:
    build, _ = build_and_final()
    where = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]["find"]["where"]
    sources = copied_sources(build)
    license_files = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["license-files"]
    assert set(where) | {"pyproject.toml", "README.md", *license_files} == set(sources)
    files = context_files()
    for source in sources:
        assert any(f == source or f.startswith(source + "/") for f in files), f"{source} is not in the build context"
    stray = [f for f in files if not any(f == s or f.startswith(s + "/") for s in sources)]
    assert stray == [], "the context holds files the build never copies"
    assert not any("__pycache__" in f or f.endswith(".pyc") or ".egg-info" in f for f in files)


def test_dockerignore_follows_dockers_rules() -> None:
    rules = [IgnoreRule("*", False), IgnoreRule("src", True), IgnoreRule("**/__pycache__", False)]
    assert not in_context(".venv/bin/python", rules)
    assert in_context("src/pkg/mod.py", rules)
    assert not in_context("src/pkg/__pycache__/mod.cpython-311.pyc", rules)
    assert not in_context("README.md", rules)
    assert [r.pattern for r in ignore_rules("# comment\n\n!protocol/\n/abs\n")] == ["protocol", "abs"]


def test_the_build_stage_makes_a_wheel_with_the_three_commands(tmp_path: Path) -> None:
    build, _ = build_and_final()
    source, files = tmp_path / "src", context_files()
    for copy in build.all("COPY"):
        *sources, destination = [w for w in copy.words if not w.startswith("--")]
        for src in sources:
            src = src.rstrip("/")
            for f in files:
                if f == src:
                    target = source / destination / Path(f).name if destination.endswith("/") else source / destination
                elif f.startswith(src + "/"):
                    target = source / destination / f[len(src) + 1:]
                else:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / f, target)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--disable-pip-version-check",
                           "--wheel-dir", str(tmp_path / "wheels"), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = (tmp_path / "wheels").glob("nsq_operator-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = archive.read(info).decode()
        meta = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    for package in ("nsqd/cli.py", "nsqlookupd/cli.py", "nsq_operator/cli.py", "nsq_protocol/frames.py",
                    "nsq_client/__init__.py"):
        assert package in names
    scripts = {line.split("=")[0].strip() for line in entry_points.splitlines() if "=" in line}
    assert COMMANDS <= scripts
    # the image's package carries the license (PEP 639: the file and the metadata naming it)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: MIT" in meta and "License-File: LICENSE" in meta
    always = [line for line in meta.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert always and not [line for line in always if any(n in line.lower() for n in ("pyspark", "pytest", "pyarrow"))]


@pytest.mark.parametrize("path", [".venv/bin/python", ".git/HEAD", "tests/conftest.py", "charts/nsq-operator/Chart.yaml",
                                  "broker/nsqd/__pycache__/x.pyc", "nsq_operator.egg-info/PKG-INFO"])
def test_the_context_leaves_out(path: str) -> None:
    assert not in_context(path, ignore_rules(DOCKERIGNORE.read_text(encoding="utf-8")))
