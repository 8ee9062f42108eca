"""The build backend the pyproject.toml files name (setuptools>=77, the first with PEP
639's ``license-files``), installed once per machine into a cache outside the repository
(the project's venv may hold an older setuptools for its editable install), and its hooks
run as build frontends run them: a process each."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def backend(requires: list[str]) -> Path:
    """A folder holding ``requires`` (for PYTHONPATH); a skip where pip cannot install them."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nsq-operator-tests"
    key = hashlib.sha256(f"{sys.version_info[:2]} {sorted(requires)}".encode()).hexdigest()[:16]
    target = cache / f"build-backend-{key}"
    if (target / ".complete").is_file():
        return target
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                          "--target", str(staging), *requires], capture_output=True, text=True, timeout=300)
    if pip.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        pytest.skip(f"could not install the build backend {requires}: {pip.stderr[-500:]}")
    (staging / ".complete").touch()
    try:
        staging.rename(target)  # whole, so a reader never takes a half-installed backend
    except OSError:  # another process installed it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return target


def start_hook(hook: str, source: Path, out: Path, backend_dir: Path) -> subprocess.Popen[str]:
    """``build_sdist`` or ``build_wheel`` of the tree at ``source`` into ``out``, started;
    :func:`built` waits for it."""
    script = f"import sys; from setuptools import build_meta as b; print('built', b.{hook}(sys.argv[1]))"
    return subprocess.Popen([sys.executable, "-c", script, str(out)], cwd=source, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            env={"PYTHONPATH": str(backend_dir), "PATH": "/usr/bin:/bin"})


def built(process: subprocess.Popen[str], out: Path) -> Path:
    """The file a started hook built."""
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    return out / stdout.splitlines()[-1].split()[1]  # the backend logs to stdout before
