"""Fixtures of the interop folder: third-party client processes that never outlive a test."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import Servers
from tests.interop.client_process import Clients
from tests.interop.gonsq import gonsq_client
from tests.servers import Nsqd


@pytest.fixture
def clients(tmp_path: Path) -> Iterator[Clients]:
    c = Clients(tmp_path)
    yield c
    c.close()


@pytest.fixture(scope="module")
def shared_nsqd(module_servers: Servers) -> Nsqd:
    """One nsqd (default flags) for a whole module; every test uses its own topic."""
    return module_servers.nsqd()


@pytest.fixture(scope="session")
def gonsq() -> Path:
    """go-nsq's client program (built once per version of its sources)."""
    return gonsq_client()
