"""The kube-apiserver's own checks of CustomResourceDefinitions and custom resources, run
by ``crdcheck`` (built from k8s.io/apiextensions-apiserver; ``../shared/k8s-crdcheck``).
It is a reference tool for the tests, never part of the product: where it is absent the
tests that need it are skipped and say so.

Everything here is for test code: the emulated API server checks each nsq.dev object
written to it, and tests check every manifest the project ships."""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterable

import yaml

ROOT = Path(__file__).resolve().parents[1]
CRD_FILES = sorted((ROOT / "crds").glob("*.yaml"))
TOOL_ENV = "CRDCHECK"  # where the tool is, when not in ../shared/k8s-crdcheck
ABSENT = "crdcheck (../shared/k8s-crdcheck/crdcheck, or $CRDCHECK) is not on this machine"


def tool() -> Path | None:
    candidates = [os.environ.get(TOOL_ENV), str(ROOT.parent / "shared" / "k8s-crdcheck" / "crdcheck"),
                  shutil.which("crdcheck")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return Path(candidate)
    return None


class CrdCheckFailed(RuntimeError):
    """The tool itself could not run (a file it cannot read, a crash): not a verdict."""


def _errors(returncode: int, stdout: str, stderr: str) -> list[str]:
    """The errors the tool printed, one per line; the last line is its count."""
    if returncode not in (0, 1):
        raise CrdCheckFailed(f"crdcheck exited {returncode}: {stderr or stdout}")
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines or not lines[-1].startswith("crdcheck:"):
        raise CrdCheckFailed(f"crdcheck printed no summary: {stdout!r} {stderr!r}")
    return lines[:-1]


def _stream(documents: Iterable[dict[str, Any]]) -> bytes:
    return yaml.safe_dump_all(list(documents), sort_keys=False).encode()


def check(documents: Iterable[dict[str, Any]] = (), files: Iterable[Path] = (),
          crds: Iterable[Path] = CRD_FILES) -> list[str]:
    """The apiserver's errors for the given objects and files, judged against ``crds``
    (CRD documents among the objects or files are checked themselves too)."""
    found = tool()
    assert found is not None, ABSENT
    done = subprocess.run([str(found), *map(str, crds), *map(str, files), "/dev/stdin"], input=_stream(documents),
                          capture_output=True, timeout=60)
    return _errors(done.returncode, done.stdout.decode(), done.stderr.decode())


async def check_async(documents: Iterable[dict[str, Any]], crds: Iterable[Path] = CRD_FILES,
                      binary: Path | None = None) -> list[str]:
    """``check`` without blocking an event loop (the emulated API server's)."""
    found = binary or tool()
    assert found is not None, ABSENT
    process = await asyncio.create_subprocess_exec(
        str(found), *map(str, crds), "/dev/stdin", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(_stream(documents)), 60)
    assert process.returncode is not None
    return _errors(process.returncode, stdout.decode(), stderr.decode())
