"""go-nsq's own client, built from tests/interop/clients/gonsq (a Go module pinning go-nsq)
into the venv, once per version of its sources: ``gonsq_client produce|consume``."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).parent / "clients" / "gonsq"


def gonsq_client() -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.skip("go-nsq's client needs the go command to build")
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        digest.update((SOURCE / name).read_bytes())
    binary = Path(sys.prefix) / "gonsq-client" / f"gonsq_client-{digest.hexdigest()[:16]}"
    if binary.is_file():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    building = binary.with_name(f"{binary.name}.{os.getpid()}")  # two workers may build at once
    done = subprocess.run([go, "build", "-o", str(building), "."], cwd=SOURCE, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, f"go build of go-nsq's client failed:\n{done.stderr[-3000:]}"
    os.replace(building, binary)
    return binary
