"""nsqd processes with TLS for tests: an HTTPS listener on a free port, and readiness
checked over HTTPS (with ``--tls-required=true`` plain HTTP answers 403 to everything)."""
from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.broker.certs import Pki
from tests.servers import Nsqd, free_port


def https(method: str, url: str, context: ssl.SSLContext, body: bytes | None = None,
          timeout: float = 10.0) -> tuple[int, bytes]:
    if body is None and method in ("POST", "PUT"):
        body = b""
    req = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class TlsNsqd(Nsqd):
    def __init__(self, workdir: Path, pki: Pki, flags: dict[str, Any] | None = None) -> None:
        tls_flags = {"tls-cert": str(pki.server.cert), "tls-key": str(pki.server.key)}
        super().__init__(workdir, {**tls_flags, **(flags or {})})
        self.pki = pki
        self.https_port = free_port(self.host)
        self.flags.setdefault("https-address", f"{self.host}:{self.https_port}")

    def https_url(self, path: str) -> str:
        return f"https://{self.host}:{self.https_port}{path}"

    def https(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        return https(method, self.https_url(path), self.pki.client_context(with_cert=self.pki.client), body)

    def https_json(self, path: str) -> Any:
        status, body = self.https("GET", path)
        assert status == 200, (path, status, body)
        return json.loads(body)

    def answers_ping(self) -> bool:
        status, _ = self.https("GET", "/ping")
        return status == 200
