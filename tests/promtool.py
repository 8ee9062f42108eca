"""Prometheus' own linter on our /metrics: ``promtool check metrics``, on PATH or taken out
of Debian's prometheus package into the venv by ``make test`` (tests skip, saying why,
without it)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.servers import BIN


def promtool_problems(text: str) -> str:
    """What ``promtool check metrics`` says about ``text``; empty when it has nothing to say."""
    promtool = shutil.which("promtool") or shutil.which("promtool", path=str(BIN))
    if promtool is None:
        pytest.skip("no promtool on PATH or in the venv (make test fetches it from Debian's prometheus package)")
    done = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
    return "" if done.returncode == 0 else (done.stdout + done.stderr).decode()
