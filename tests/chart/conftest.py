"""One helm for the chart tests, extracted once per machine (see helm.py)."""
from __future__ import annotations

import pytest

from tests.chart.helm import helm_binary
from tests.chart.render import Helm


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(helm_binary(), tmp_path_factory.mktemp("helm-home"))
