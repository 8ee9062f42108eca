"""The distributions users install (``distributions/``: nsq-client, nsq-servers,
nsq-operator, nsq-spark), as a release builds them: each tree staged by
``distributions/stage.py``, its sdist and wheel built by the build backend, then the wheel
installed into a clean venv of its own with what it declares and nothing else, and run.

What a wheel declares is installed without an index: the sibling distributions from the
wheels built here, every other requirement (and theirs, down the tree) linked from this
environment's installed copy. So a module importing something its distribution does not
declare fails here, as it would for a user, in seconds instead of a download.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.release.build_backend import backend, built, start_hook

ROOT = Path(__file__).resolve().parents[2]
ROOT_PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = ROOT_PROJECT["project"]["version"]


def load_stage() -> ModuleType:
    spec = importlib.util.spec_from_file_location("distributions_stage", ROOT / "distributions" / "stage.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


STAGE = load_stage()


@dataclass(frozen=True)
class Expected:
    packages: frozenset[str]
    scripts: frozenset[str]
    extras_bring: frozenset[str] = frozenset()  # modules its extras (not its requirements) bring


EXPECTED = {
    "nsq-client": Expected(frozenset({"nsq_protocol", "nsq_client"}), frozenset({"nsq_tail", "nsq_stat", "to_nsq"}),
                           frozenset({"aiohttp", "uvloop"})),
    "nsq-servers": Expected(frozenset({"nsqd", "nsqlookupd", "nsqadmin", "nsq_local"}),
                            frozenset({"nsqd", "nsqlookupd", "nsqadmin", "nsq-local"})),
    "nsq-operator": Expected(frozenset({"nsq_operator"}), frozenset({"nsq-operator"})),
    "nsq-spark": Expected(frozenset({"nsq_spark"}), frozenset({"nsq-spark"}), frozenset({"pyspark", "pyarrow"})),
}
NAMES = sorted(EXPECTED)
NOT_FOR_THE_CLIENT = {"kopf", "aiohttp", "pyspark"}  # a client user never needs these


@dataclass
class Built:
    wheel: Path
    sdist: Path

    def metadata(self) -> list[tuple[str, str]]:
        with zipfile.ZipFile(self.wheel) as archive:
            [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
            message = Parser().parsestr(archive.read(name).decode())
        return [(k, str(v)) for k, v in message.items()]

    def requires(self) -> list[Requirement]:
        return [Requirement(v) for k, v in self.metadata() if k == "Requires-Dist"]


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    """Every distribution's sdist and wheel, built side by side."""
    tmp = tmp_path_factory.mktemp("distributions")
    assert STAGE.names() == NAMES, "a new distribution: say what it holds in EXPECTED"
    backend_dir = backend(ROOT_PROJECT["build-system"]["requires"])
    trees = {name: STAGE.stage(name, tmp / "staged" / name) for name in NAMES}
    out = tmp / "dist"
    sdists = {name: start_hook("build_sdist", tree, out, backend_dir) for name, tree in trees.items()}
    wheels = {name: start_hook("build_wheel", tree, out, backend_dir) for name, tree in trees.items()}
    return {name: Built(built(wheels[name], out), built(sdists[name], out)) for name in NAMES}


# -- what each distribution is --------------------------------------------------------------------
def test_the_distributions_share_out_the_packages_and_scripts() -> None:
    packages = [p for e in EXPECTED.values() for p in e.packages]
    tops = {p.rstrip("*") for p in ROOT_PROJECT["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert sorted(packages) == sorted(tops), "each import package in exactly one distribution"
    scripts = [s for e in EXPECTED.values() for s in e.scripts]
    assert sorted(scripts) == sorted(ROOT_PROJECT["project"]["scripts"]), "each console script in exactly one"


@pytest.mark.parametrize("name", NAMES)
def test_the_wheel_holds_its_packages_scripts_license_and_the_version(dists: dict[str, Built], name: str) -> None:
    dist, expected = dists[name], EXPECTED[name]
    with zipfile.ZipFile(dist.wheel) as archive:
        names = archive.namelist()
        tops = {n.split("/")[0] for n in names}
        [info] = [t for t in tops if t.endswith(".dist-info")]
        assert tops - {info} == expected.packages
        assert archive.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    fields = dist.metadata()
    assert ("Name", name) in fields and ("Version", VERSION) in fields
    assert ("License-Expression", "MIT") in fields and ("License-File", "LICENSE") in fields
    scripts = dict(line.split(" = ") for line in entry_points.split("[console_scripts]\n")[1].split("\n\n")[0].splitlines())
    assert scripts == {s: ROOT_PROJECT["project"]["scripts"][s] for s in expected.scripts}  # as the dev install's
    if name == "nsq-servers":
        assert "nsqadmin/static/index.html" in names


@pytest.mark.parametrize("name", NAMES)
def test_the_sdist_holds_what_its_wheel_is_built_from(dists: dict[str, Built], name: str) -> None:
    top = f"{name.replace('-', '_')}-{VERSION}"
    with tarfile.open(dists[name].sdist) as archive:
        members = set(archive.getnames())
        pyproject = archive.extractfile(f"{top}/pyproject.toml")
        assert pyproject is not None
        project = tomllib.loads(pyproject.read().decode())["project"]
        license_file = archive.extractfile(f"{top}/LICENSE")
        assert license_file is not None and license_file.read() == (ROOT / "LICENSE").read_bytes()
    assert project["version"] == VERSION and "dynamic" not in project
    with zipfile.ZipFile(dists[name].wheel) as wheel:  # python -m build makes the wheel from the sdist
        packaged = {n for n in wheel.namelist() if ".dist-info/" not in n}
    missing = {n for n in packaged if f"{top}/{n}" not in members}
    assert not missing, f"the sdist lacks {sorted(missing)[:5]}"


@pytest.mark.parametrize("name", NAMES)
def test_requirements_pin_the_siblings_and_keep_extras_apart(dists: dict[str, Built], name: str) -> None:
    always = [r for r in dists[name].requires() if r.marker is None or r.marker.evaluate({"extra": ""})]
    for requirement in always:
        if requirement.name in NAMES:
            assert str(requirement.specifier) == f"=={VERSION}", requirement
    names = {canonicalize_name(r.name) for r in always}
    if name == "nsq-client":
        assert not names & NOT_FOR_THE_CLIENT, f"the client requires {sorted(names & NOT_FOR_THE_CLIENT)}"
    if name == "nsq-spark":
        assert not names & {"pyspark", "pyarrow"}, "Spark provides them, or the spark extra"
        spark = {r.name for r in dists[name].requires() if r.marker is not None and r.marker.evaluate({"extra": "spark"})}
        assert spark == {"pyspark", "pyarrow"}


def test_staging_pins_only_sibling_requirements() -> None:
    text = 'dynamic = ["version"]\ndependencies = [\n    "nsq-client[admin]",  # why\n    "nsq-clientele",\n]\n'
    staged = tomllib.loads(STAGE.versioned(text, "9.8.7", NAMES))
    assert staged["version"] == "9.8.7" and "dynamic" not in staged
    assert staged["dependencies"] == ["nsq-client[admin]==9.8.7", "nsq-clientele"]
    with pytest.raises(ValueError):
        STAGE.versioned("version = '1'\n", "9.8.7", NAMES)


# -- installed, each alone ----------------------------------------------------------------------
@dataclass
class Installed:
    venv: Path
    site: Path
    linked: dict[str, str]        # distribution -> version, linked from this environment
    own: set[str]                 # this project's distributions installed from the wheels

    def run(self, *argv: str) -> subprocess.Popen[str]:
        return subprocess.Popen(argv, cwd=self.venv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, env={"PATH": f"{self.venv / 'bin'}:/usr/bin:/bin"})


def closure(name: str, dists: dict[str, Built]) -> tuple[set[str], dict[str, metadata.Distribution]]:
    """(this project's distributions, everything else) that installing ``name`` brings."""
    own: set[str] = set()
    others: dict[str, metadata.Distribution] = {}
    todo: list[tuple[str, frozenset[str]]] = [(name, frozenset())]
    while todo:
        current, extras = todo.pop()
        if current in NAMES:
            own.add(current)
            requires = dists[current].requires()
        else:
            key = canonicalize_name(current)
            if key in others:
                continue
            try:
                others[key] = metadata.distribution(current)
            except metadata.PackageNotFoundError:
                pytest.fail(f"{name} requires {current}, which this environment lacks: reinstall the project")
            requires = [Requirement(r) for r in others[key].requires or []]
        for requirement in requires:
            wanted = requirement.marker is None or any(requirement.marker.evaluate({"extra": e})
                                                       for e in {"", *extras})
            if wanted and not (requirement.name in own and not requirement.extras):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return own, others


def link(distribution: metadata.Distribution, site: Path) -> None:
    """The distribution's top-level files and folders, linked into ``site``."""
    tops = {f.parts[0] for f in distribution.files or [] if f.parts[0] not in ("..", "__pycache__", "bin")}
    for top in tops:
        if top.endswith(".pth") or (site / top).exists():
            continue
        (site / top).symlink_to(Path(str(distribution.locate_file(top))))


@pytest.fixture(scope="module")
def installed(dists: dict[str, Built], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Installed]:
    """Each distribution in a clean venv of its own, installed side by side."""
    tmp = tmp_path_factory.mktemp("venvs")
    pending, result = [], {}
    for name in NAMES:
        venv = tmp / name
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        python = venv / "bin" / "python"
        site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        own, others = closure(name, dists)
        for distribution in others.values():
            link(distribution, site)
        wheels = [str(dists[n].wheel) for n in sorted(own)]
        pending.append(subprocess.Popen(
            [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
             "--no-compile", "--disable-pip-version-check", *wheels],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        result[name] = Installed(venv, site, {k: d.version for k, d in others.items()}, own)
    for process in pending:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-3000:]
    return result


def test_the_client_brings_no_kopf_aiohttp_or_pyspark(installed: dict[str, Installed]) -> None:
    client = installed["nsq-client"]
    assert client.own == {"nsq-client"}
    assert not set(client.linked) & NOT_FOR_THE_CLIENT, sorted(client.linked)
    assert {"pydantic", "python-snappy"} <= set(client.linked)


@pytest.mark.parametrize("name", NAMES)
def test_site_packages_holds_the_intended_packages_only(installed: dict[str, Installed], name: str) -> None:
    venv = installed[name]
    tops = {p.name for p in venv.site.iterdir() if not p.is_symlink() and not p.name.endswith(".dist-info")
            and p.name != "__pycache__"}
    assert tops == {p for own in venv.own for p in EXPECTED[own].packages}


def test_every_console_script_prints_the_version(installed: dict[str, Installed]) -> None:
    runs = [(name, script, installed[name].run(str(installed[name].venv / "bin" / script), "--version"))
            for name in NAMES for script in sorted(EXPECTED[name].scripts)]
    for name, script, process in runs:
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0 and f"v{VERSION}" in stdout, f"{name} {script}: {stdout}{stderr[-2000:]}"


IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
for top in sys.argv[1:]:
    package = importlib.import_module(top)
    for module in pkgutil.walk_packages(package.__path__, top + "."):
        if module.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as error:
            print(module.name, error.name)
"""


def test_every_module_imports_with_what_its_distribution_declares(installed: dict[str, Installed]) -> None:
    """A module that needs what its distribution does not declare fails to import; one
    that needs an extra names a module the extra brings."""
    runs = [(name, installed[name].run(str(installed[name].venv / "bin" / "python"), "-c", IMPORT_EVERY_MODULE,
                                       *sorted(EXPECTED[name].packages))) for name in NAMES]
    for name, process in runs:
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, f"{name}: {stderr[-3000:]}"
        missing = {line.split()[1].split(".")[0] for line in stdout.splitlines()}
        assert missing <= EXPECTED[name].extras_bring, f"{name}: {stdout}"


def test_the_admin_client_without_its_extra_says_to_install_it(installed: dict[str, Installed]) -> None:
    client = installed["nsq-client"]
    process = client.run(str(client.venv / "bin" / "python"), "-c", "import nsq_client.admin")
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1
    assert stderr.splitlines()[-1] == ("ModuleNotFoundError: nsq_client.admin needs aiohttp: "
                                       "pip install 'nsq-client[admin]'")


def test_nsq_spark_without_pyspark_says_to_install_the_extra(installed: dict[str, Installed]) -> None:
    spark = installed["nsq-spark"]
    assert "pyspark" not in spark.linked
    process = spark.run(str(spark.venv / "bin" / "nsq-spark"), "archive", "--topic", "events", "--channel", "archive",
                        "--nsqd-tcp-address", "127.0.0.1:4150", "--output", "out", "--checkpoint", "checkpoint")
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 1 and stdout == ""
    assert stderr == "nsq-spark: the Python module pyspark is not installed: pip install 'nsq-spark[spark]'\n"

