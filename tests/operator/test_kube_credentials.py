"""The operator's Kubernetes client logs in with a client certificate given inline (as a
kubeconfig carries it) and leaves no private key on disk."""
from __future__ import annotations

import base64
import ssl
import tempfile
from pathlib import Path
from typing import Iterator

import kopf
import pytest
from aiohttp import web

from nsq_operator.kube.client import KubeApi
from tests.broker.certs import make_pki


@pytest.fixture
def private_tmp(tmp_path: Path) -> Iterator[Path]:
    """Where tempfile puts files during the test: watched for leftovers."""
    watched = tmp_path / "tmp"
    watched.mkdir()
    before, tempfile.tempdir = tempfile.tempdir, str(watched)
    try:
        yield watched
    finally:
        tempfile.tempdir = before


async def test_client_certificate_data_leaves_no_key_file(tmp_path: Path, private_tmp: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
    server_context.load_cert_chain(str(pki.server.cert), str(pki.server.key))
    server_context.verify_mode = ssl.CERT_REQUIRED  # like an apiserver taking client certificates

    async def configmap(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        assert peer is not None
        return web.json_response({"kind": "ConfigMap", "metadata": {"name": request.match_info["name"]}})
    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/configmaps/{name}", configmap)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context)
    await site.start()
    port = runner.addresses[0][1]

    def inline(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()
    info = kopf.ConnectionInfo(server=f"https://127.0.0.1:{port}", ca_data=inline(pki.ca),
                               certificate_data=inline(pki.client.cert), private_key_data=inline(pki.client.key))
    api = KubeApi(lambda: info)
    try:
        assert api._ssl is not None
        # the server certificate names nsqd.test, not 127.0.0.1: check the chain, not the name
        api._ssl.check_hostname = False
        got = await api.get("ConfigMap", "ns", "c")
        assert got is not None and got["metadata"]["name"] == "c"
    finally:
        await api.close()
        await runner.cleanup()
    assert list(private_tmp.iterdir()) == []
