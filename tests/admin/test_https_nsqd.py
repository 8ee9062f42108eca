"""nsqadmin in front of an nsqd that speaks HTTPS only and wants a client certificate:
``--nsqd-http-address=https://...`` with the ``--http-client-tls-*`` files."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.broker.certs import Pki, make_pki
from tests.broker.tls_nsqd import TlsNsqd

from .processes import start_admin


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TlsNsqd, Pki, Path]]:
    tmp = tmp_path_factory.mktemp("https")
    pki = make_pki(tmp / "pki")
    nsqd = TlsNsqd(tmp / "nsqd", pki, {"tls-required": "true", "tls-client-auth-policy": "require-verify",
                                       "tls-root-ca-file": str(pki.ca)}).start()
    assert nsqd.https("POST", "/topic/create?topic=secret") == (200, b"")
    assert nsqd.get("/stats").status == 403, "plain HTTP is refused: only HTTPS reaches this nsqd"
    yield nsqd, pki, tmp
    nsqd.stop()


def test_https_nsqd_with_a_client_certificate(secure: tuple[TlsNsqd, Pki, Path]) -> None:
    nsqd, pki, tmp = secure
    address = f"https://{nsqd.host}:{nsqd.https_port}"
    trusted = start_admin(tmp / "trusted", {"nsqd-http-address": address, "http-client-tls-root-ca-file": pki.ca,
                                            "http-client-tls-cert": pki.client.cert, "http-client-tls-key": pki.client.key})
    anonymous = start_admin(tmp / "anonymous", {"nsqd-http-address": address, "http-client-tls-insecure-skip-verify": "true"})
    try:
        assert trusted.get_json("/api/topics") == {"topics": ["secret"], "message": ""}
        topic = trusted.get_json("/api/topics/secret")
        assert [n["node"] for n in topic["nodes"]] == [nsqd.http_address] and topic["message"] == ""
        refused = anonymous.call("GET", "/api/topics")  # no client certificate: the nsqd hangs up
        assert refused.status == 502 and refused.json()["message"].startswith("UPSTREAM_ERROR: failed to query any nsqd")
    finally:
        trusted.stop()
        anonymous.stop()
