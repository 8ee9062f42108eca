"""A console script whose Python module is missing says what to install, in one line,
never a traceback (nsq_protocol.launch). Each script is started here the way its
installed script starts it, with modules hidden by an import blocker: all that its
distribution requires; kopf for the operator; PySpark for a Spark job; one of this
project's own packages."""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from nsq_protocol.launch import MISSING_MODULE
from tests.release.test_distributions import EXPECTED

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
DISTRIBUTION = {script: name for name, expected in EXPECTED.items() for script in expected.scripts}

# argv[1]: the entry point (module:function), argv[2]: JSON list of modules to hide,
# argv[3:]: the arguments
START = """
import importlib, json, sys
entry, hidden, args = sys.argv[1], set(json.loads(sys.argv[2])), sys.argv[3:]

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Hide())
module, function = entry.split(":")
sys.argv = [entry, *args]
sys.exit(getattr(importlib.import_module(module), function)())
"""


def start(script: str, hidden: list[str], args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", START, SCRIPTS[script], json.dumps(hidden), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def required_modules(distribution: str) -> set[str]:
    """The top-level modules of the distributions ``distribution`` requires (not its extras)."""
    project = tomllib.loads((ROOT / "distributions" / distribution / "pyproject.toml").read_text())["project"]
    names = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    return {module for module, dists in metadata.packages_distributions().items()
            if any(canonicalize_name(d) in names for d in dists) and not module.startswith("_")}


def expected_line(script: str, module: str, requirement: str) -> str:
    return f"{script}: the Python module {module} is not installed: pip install '{requirement}'\n"


def test_every_script_without_its_requirements_names_its_distribution() -> None:
    """Every module the script's distribution requires hidden at once: the first one the
    start imports is named, with the distribution to install."""
    runs = {script: start(script, sorted(required_modules(DISTRIBUTION[script])), ["--version"]) for script in SCRIPTS}
    for script, process in runs.items():
        stdout, stderr = process.communicate(timeout=120)
        assert (process.returncode, stdout) == (MISSING_MODULE, ""), f"{script}: {stdout}{stderr}"
        module = stderr.removeprefix(f"{script}: the Python module ").split(" ")[0]
        assert module in required_modules(DISTRIBUTION[script]), stderr
        assert stderr == expected_line(script, module, DISTRIBUTION[script])


def test_kopf_missing_names_the_operator() -> None:
    stdout, stderr = start("nsq-operator", ["kopf"], ["--version"]).communicate(timeout=120)
    assert stderr == expected_line("nsq-operator", "kopf", "nsq-operator") and stdout == ""


def test_a_spark_job_without_pyspark_names_the_extra_and_version_needs_none() -> None:
    job = ["archive", "--topic", "events", "--channel", "archive", "--nsqd-tcp-address", "127.0.0.1:4150",
           "--output", "out", "--checkpoint", "checkpoint"]
    without_spark = start("nsq-spark", ["pyspark", "pyarrow"], job)
    version = start("nsq-spark", ["pyspark", "pyarrow"], ["--version"])
    stdout, stderr = without_spark.communicate(timeout=120)
    assert without_spark.returncode == MISSING_MODULE and stdout == ""
    assert stderr == expected_line("nsq-spark", "pyspark", "nsq-spark[spark]")
    stdout, stderr = version.communicate(timeout=120)
    assert version.returncode == 0 and stdout.startswith("nsq-spark v"), stderr


def test_a_missing_package_of_this_project_names_its_distribution() -> None:
    stdout, stderr = start("nsq-spark", ["nsq_client"], ["--version"]).communicate(timeout=120)
    assert stderr == expected_line("nsq-spark", "nsq_client", "nsq-client") and stdout == ""
