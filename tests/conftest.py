"""Fixtures shared by every test folder."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.run_order import longest_first
from tests.servers import Nsqd, Nsqlookupd, ServerProcess


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = longest_first(items)


class Servers:
    """Starts real servers on demand and stops every one of them at teardown."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.started: list[ServerProcess] = []
        self._n = 0

    def _dir(self, kind: str) -> Path:
        self._n += 1
        return self.root / f"{kind}{self._n}"

    def nsqd(self, start: bool = True, tcp_port: int | None = None, http_port: int | None = None,
             kind: type[Nsqd] = Nsqd, **flags: object) -> Nsqd:
        """``kind``: ``tests.reference.GoNsqd`` for Go's nsqd with the same flags."""
        server = kind(self._dir("nsqd"), _flags(flags), tcp_port=tcp_port, http_port=http_port)
        self.started.append(server)
        return server.start() if start else server  # type: ignore[return-value]

    def lookupd(self, start: bool = True, tcp_port: int | None = None, http_port: int | None = None,
                kind: type[Nsqlookupd] = Nsqlookupd, **flags: object) -> Nsqlookupd:
        server = kind(self._dir("lookupd"), _flags(flags), tcp_port=tcp_port, http_port=http_port)
        self.started.append(server)
        return server.start() if start else server  # type: ignore[return-value]

    def close(self) -> None:
        for server in sorted(self.started, key=lambda s: s.program != "nsqd"):
            server.stop()


def _flags(flags: dict[str, object]) -> dict[str, object]:
    return {k.replace("_", "-"): v for k, v in flags.items()}


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    s = Servers(tmp_path)
    yield s
    s.close()


@pytest.fixture(scope="module")
def module_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    s = Servers(tmp_path_factory.mktemp("servers"))
    yield s
    s.close()
