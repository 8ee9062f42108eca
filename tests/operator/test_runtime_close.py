"""Once the operator's cleanup closed its connections, a handler still running opens no
new ones (nothing would close them: CI printed aiohttp's "Unclosed client session" for
sessions opened after the cleanup)."""
from __future__ import annotations

import kopf
import pytest

from nsq_operator.kube.client import KubeApi
from nsq_operator.runtime import Runtime


def _connection() -> kopf.ConnectionInfo:
    return kopf.ConnectionInfo(server="http://127.0.0.1:9", token="t")


async def test_a_closed_runtime_refuses_to_open_connections() -> None:
    rt = Runtime()
    rt.connection = _connection()
    session = rt.http
    kube = rt.kube
    await rt.close()
    assert session.closed
    with pytest.raises(RuntimeError, match="stopping"):
        rt.http
    with pytest.raises(RuntimeError, match="stopping"):
        rt.kube
    with pytest.raises(RuntimeError, match="closed"):
        await kube.get("Pod", "default", "p")


async def test_closing_twice_is_harmless() -> None:
    rt = Runtime()
    rt.connection = _connection()
    rt.http
    await rt.close()
    await rt.close()
