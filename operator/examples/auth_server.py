"""An example NSQ auth server for NsqCluster's spec.auth (standard library only, so it runs
in the operator's image or any Python image; see auth-server.yaml beside it).

nsqd asks ``GET /auth?secret=..&remote_ip=..&tls=..&common_name=..`` (or POSTs the same
form) when a client sends AUTH; ``GET /ping`` answers 200 while the secrets file reads. A secret listed in the secrets file gets its
authorizations, in NSQ's shape, for ``--ttl`` seconds; any other secret gets 403, which
nsqd turns into E_AUTH_FAILED for the client. ``--require-tls`` refuses clients that did
not upgrade to TLS (the secret would have crossed the network in the clear).

The secrets file (JSON), read at every request so a mounted Secret's update applies:

    {"s3cr3t-billing": {"identity": "billing", "identity_url": "",
                        "authorizations": [{"topic": "^orders$", "channels": ["^billing$"],
                                            "permissions": ["subscribe"]}]}}

A publish is checked with an empty channel name, so a grant to publish needs a channel
pattern that matches it (".*"), as in NSQ.

    python auth_server.py --listen 0.0.0.0:4181 --secrets /etc/nsq-auth/secrets.json
"""
from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PERMISSIONS = {"publish", "subscribe"}


def load_secrets(path: Path) -> dict[str, dict[str, Any]]:
    secrets = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(secrets, dict):
        raise ValueError(f"{path}: expected an object of secret -> identity")
    for secret, entry in secrets.items():
        for grant in entry.get("authorizations", []):
            unknown = set(grant.get("permissions", [])) - PERMISSIONS
            if unknown:
                raise ValueError(f"{path}: secret {secret[:4]}...: unknown permission {sorted(unknown)}")
    return secrets


def answer(secrets: dict[str, dict[str, Any]], query: dict[str, str], ttl: int,
           require_tls: bool) -> tuple[int, dict[str, Any]]:
    """(status, body) for one auth request."""
    if require_tls and query.get("tls") != "true":
        return 403, {"message": "TLS required"}
    entry = secrets.get(query.get("secret", ""))
    if entry is None:
        return 403, {"message": "NOT_AUTHORIZED"}
    return 200, {"ttl": ttl, "identity": entry.get("identity", ""), "identity_url": entry.get("identity_url", ""),
                 "authorizations": entry.get("authorizations", [])}


def handler(secrets_path: Path, ttl: int, require_tls: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self, form: str) -> None:
            url = urllib.parse.urlsplit(self.path)
            if url.path == "/ping":  # readiness: the secrets file reads
                try:
                    load_secrets(secrets_path)
                except (OSError, ValueError) as e:
                    self._send(503, {"message": str(e)})
                    return
                self._send(200, {"message": "OK"})
                return
            if url.path != "/auth":
                self._send(404, {"message": "NOT_FOUND"})
                return
            query = dict(urllib.parse.parse_qsl(form, keep_blank_values=True))
            try:
                status, body = answer(load_secrets(secrets_path), query, ttl, require_tls)
            except (OSError, ValueError) as e:
                status, body = 500, {"message": f"secrets unreadable: {e}"}
            self._send(status, body)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self._reply(urllib.parse.urlsplit(self.path).query)

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            self._reply(self.rfile.read(length).decode("utf-8", "replace"))

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # secrets are in the query: log none
            return
    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="0.0.0.0:4181", help="host:port to serve on")
    parser.add_argument("--secrets", type=Path, required=True, help="JSON file: secret -> identity and grants")
    parser.add_argument("--ttl", type=int, default=3600, help="seconds nsqd keeps an answer")
    parser.add_argument("--require-tls", action="store_true", help="refuse clients not using TLS")
    args = parser.parse_args(argv)
    load_secrets(args.secrets)  # a broken file fails at start, not at the first client
    host, _, port = args.listen.rpartition(":")
    server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), handler(args.secrets, args.ttl, args.require_tls))
    print(f"nsq auth server listening on {server.server_address[0]}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
