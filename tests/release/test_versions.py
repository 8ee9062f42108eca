"""One version everywhere, as users see it: every console script's ``--version`` names the
release (pyproject.toml's version) and the NSQ release it speaks, and ``-h`` lists
``-config`` and ``-version`` where Go's does. (The chart, the image tag and the operator's
default image are held to the same version by tests/chart/test_chart.py.)"""
from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

import nsqadmin
import nsqd
import nsqlookupd
import nsq_client
from nsq_protocol.version import DISTRIBUTION, NSQ_VERSION, RELEASE
from tests.reference import SHARED_BIN
from tests.servers import BIN

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
SCRIPTS = sorted(PROJECT["scripts"])
# programs Go NSQ v1.3.0 also has: Go's line and flags, the release in parentheses
GO_PROGRAMS = {"nsqd", "nsqlookupd", "nsqadmin", "nsq_tail", "nsq_stat", "to_nsq"}
SERVERS = {"nsqd", "nsqlookupd", "nsqadmin"}  # the ones with a config file
OWN_PROGRAMS = {"nsq-operator", "nsq-local", "nsq-spark"}
PYTHON = r"python3\.\d+\.\d+\S*"


def run_all(argvs: list[list[str]], timeout: float = 120) -> list[subprocess.CompletedProcess[str]]:
    """Runs the commands side by side (each imports its whole program; one after the other
    they would take most of a minute on a loaded machine)."""
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL) for argv in argvs]
    done = []
    for argv, proc in zip(argvs, procs):
        out, err = proc.communicate(timeout=timeout)
        done.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    return done


def expected_line(program: str) -> str:
    if program in GO_PROGRAMS:
        return rf"{re.escape(program)} v{re.escape(NSQ_VERSION)} \({DISTRIBUTION} v{re.escape(RELEASE)}, built w/{PYTHON}\)\n"
    return rf"{re.escape(program)} v{re.escape(RELEASE)} \(NSQ v{re.escape(NSQ_VERSION)}, built w/{PYTHON}\)\n"


def test_every_script_is_classified() -> None:
    assert set(SCRIPTS) == GO_PROGRAMS | OWN_PROGRAMS, "a new console script: say which kind of --version it prints"


def test_the_release_is_the_package_version() -> None:
    assert RELEASE == PROJECT["version"], "reinstall the package (pip install -e .)"
    assert nsq_client.__version__ == RELEASE  # what the client sends in IDENTIFY's user_agent
    # what the servers report on the wire is the NSQ release they are compatible with
    assert nsqd.__version__ == nsqlookupd.__version__ == nsqadmin.__version__ == NSQ_VERSION


def test_every_command_prints_the_release_and_the_nsq_version() -> None:
    argvs = [[str(BIN / s), "--version"] for s in SCRIPTS]
    argvs += [[str(BIN / s), "-version"] for s in SCRIPTS if s in GO_PROGRAMS]  # Go's flags take both
    for done in run_all(argvs):
        program = Path(done.args[0]).name
        assert done.returncode == 0, f"{done.args}: {done.stderr[-2000:]}"
        assert re.fullmatch(expected_line(program), done.stdout), f"{done.args}: {done.stdout!r}"
        assert f"v{RELEASE}" in done.stdout and f"v{NSQ_VERSION}" in done.stdout


def test_go_reference_binaries_are_the_nsq_version_we_name() -> None:
    """NSQ_VERSION is the release whose binaries the nsqd_ref tests compare us with."""
    nsqd_ref = SHARED_BIN / "nsqd"
    if not nsqd_ref.exists():
        pytest.skip(f"Go NSQ's binaries are not at {SHARED_BIN}")
    [done] = run_all([[str(nsqd_ref), "--version"]])
    assert done.stdout.startswith(f"nsqd v{NSQ_VERSION} (built w/go"), done.stdout


def help_flags(text: str) -> set[str]:
    return set(re.findall(r"^  -([a-z0-9-]+)", text, re.M))


def test_help_lists_config_and_version_where_gos_does() -> None:
    programs = sorted(GO_PROGRAMS)
    ours = {Path(d.args[0]).name: help_flags(d.stdout + d.stderr) for d in run_all([[str(BIN / p), "-h"] for p in programs])}
    for program in programs:
        assert "version" in ours[program], program
        assert ("config" in ours[program]) == (program in SERVERS), program
    if not (SHARED_BIN / "nsqd").exists():
        return  # Go's own -h, where its binaries are here, is checked below
    present = [p for p in programs if (SHARED_BIN / p).exists()]
    for done in run_all([[str(SHARED_BIN / p), "-h"] for p in present]):
        program = Path(done.args[0]).name
        gos = help_flags(done.stdout + done.stderr) & {"config", "version"}
        assert gos <= ours[program], f"{program}: Go's -h lists {sorted(gos)}"


def test_the_release_read_from_the_dist_info_name_is_what_the_installed_metadata_says(tmp_path: Path) -> None:
    # nsqd reads its release from the .dist-info directory's name (importing
    # importlib.metadata costs every start tens of milliseconds); it must agree with the
    # metadata, and step aside where one path entry is ambiguous
    import sys
    from importlib import metadata

    from nsq_protocol import version

    assert RELEASE == metadata.version(DISTRIBUTION) == version._named_by_dist_info(DISTRIBUTION)
    for name in ("nsq_operator-0.1.0.dist-info", "nsq_operator-0.2.0.dist-info"):
        (tmp_path / name).mkdir()
    sys.path.insert(0, str(tmp_path))
    try:
        assert version._named_by_dist_info(DISTRIBUTION) is None
    finally:
        sys.path.remove(str(tmp_path))
