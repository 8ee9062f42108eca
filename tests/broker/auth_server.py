"""A small reference server for NSQ's auth protocol, for tests only.

nsqd asks ``GET /auth?remote_ip=&tls=&secret=&common_name=`` (or POSTs the same form);
the answer is ``{"identity", "identity_url", "ttl", "authorizations": [{"topic",
"channels", "permissions"}]}``. Grants are set per secret and may change while nsqd
runs, so a test can revoke access and watch nsqd notice when the TTL expires. Every
request is recorded.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.servers import HOST


@dataclass
class Grant:
    topic: str
    channels: list[str]
    permissions: list[str]

    def as_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "channels": self.channels, "permissions": self.permissions}


@dataclass
class Identity:
    name: str
    grants: list[Grant] = field(default_factory=list)
    ttl: int = 3600
    url: str = ""

    def answer(self) -> dict[str, Any]:
        return {"identity": self.name, "identity_url": self.url, "ttl": self.ttl,
                "authorizations": [g.as_json() for g in self.grants]}


class AuthServer:
    def __init__(self) -> None:
        self.identities: dict[str, Identity] = {}
        self.requests: list[dict[str, str]] = []
        self.methods: list[str] = []
        self.status = 200  # set to 500 to play a broken auth server
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((HOST, 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"{HOST}:{self._httpd.server_address[1]}"

    def start(self) -> "AuthServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def grant(self, secret: str, identity: Identity) -> None:
        with self._lock:
            self.identities[secret] = identity

    def queries_for(self, secret: str) -> list[dict[str, str]]:
        with self._lock:
            return [r for r in self.requests if r.get("secret") == secret]

    def _answer(self, params: dict[str, str], method: str) -> tuple[int, bytes]:
        with self._lock:
            self.requests.append(params)
            self.methods.append(method)
            if self.status != 200:
                return self.status, b'{"message": "INTERNAL_ERROR"}'
            identity = self.identities.get(params.get("secret", ""))
        if identity is None:
            return 403, b'{"message": "NOT_AUTHORIZED"}'
        return 200, json.dumps(identity.answer()).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, params: dict[str, str], method: str) -> None:
                if urlparse(self.path).path != "/auth":
                    status, body = 404, b'{"message": "NOT_FOUND"}'
                else:
                    status, body = server._answer(params, method)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                query = parse_qs(urlparse(self.path).query, keep_blank_values=True)
                self._reply({k: v[0] for k, v in query.items()}, "GET")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
                self._reply({k: v[0] for k, v in form.items()}, "POST")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
