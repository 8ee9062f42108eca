"""Fixtures that run our nsqlookupd as a subprocess on 127.0.0.1 (helpers in lookupd_process)."""
from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from tests.lookupd.lookupd_process import ServerProcess, StartLookupd


@pytest.fixture
def start_lookupd(tmp_path: Path) -> Iterator[StartLookupd]:
    """Starts nsqlookupd processes with extra flags; every one is stopped after the test."""
    started: list[ServerProcess] = []
    numbers = itertools.count()

    def start(*flags: str, **ports: int) -> ServerProcess:
        server = ServerProcess(tmp_path / f"nsqlookupd-{next(numbers)}.log", *flags, **ports)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def lookupd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One nsqlookupd with default flags, shared by a module's tests (use unique topics)."""
    server = ServerProcess(tmp_path_factory.mktemp("lookupd") / "nsqlookupd.log").start()
    yield server
    server.stop()


@pytest.fixture
def topic() -> str:
    return f"topic-{uuid.uuid4().hex[:10]}"
