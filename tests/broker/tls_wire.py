"""WireConn plus NSQ's in-band TLS upgrade: IDENTIFY with tls_v1, the server's JSON
answer in plain text, a TLS handshake on the same socket, then an OK over TLS, then
(optionally) compression on top with its own OK."""
from __future__ import annotations

import ssl
from typing import Any

from nsq_protocol.compression import DeflateCodec, SnappyCodec
from tests.broker.wire import WireConn


class TlsWireConn(WireConn):
    def negotiate_tls(self, context: ssl.SSLContext, features: dict[str, Any] | None = None,
                      server_hostname: str = "127.0.0.1") -> dict[str, Any]:
        """IDENTIFY asking for TLS (and whatever ``features`` add); returns the server's
        JSON answer. Raises ssl.SSLError when the handshake is refused."""
        self.identify({"feature_negotiation": True, "tls_v1": True, **(features or {})})
        answer = self.read_json()
        if answer.get("tls_v1"):
            left = self._frames.take_unparsed()
            assert not left, f"the server sent {left!r} before the TLS handshake"
            self.sock = context.wrap_socket(self.sock, server_hostname=server_hostname)
            self.expect_ok()
        if answer.get("deflate"):
            self._codec = DeflateCodec(answer["deflate_level"])
            self.expect_ok()
        elif answer.get("snappy"):
            self._codec = SnappyCodec()
            self.expect_ok()
        return answer

    @property
    def tls_version(self) -> str | None:
        return self.sock.version() if isinstance(self.sock, ssl.SSLSocket) else None
