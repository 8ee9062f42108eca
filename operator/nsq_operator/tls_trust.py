"""What the operator trusts when it calls an nsqd over HTTPS: the ca.crt of the pod's TLS
Secret (the system's CAs when the Secret has none), one SSL context per Secret, rebuilt
when its CA changes. The cluster pass hands in each Secret it reads; anything else reads
the Secret once, when it first needs it."""
from __future__ import annotations

import base64
import hashlib
import ssl
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

CA_KEY = "ca.crt"


class SecretSource(Protocol):
    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...


class SecretMissing(Exception):
    """The TLS Secret a pod names does not exist (yet)."""


def ca_of(secret: Mapping[str, Any]) -> str | None:
    encoded = (secret.get("data") or {}).get(CA_KEY)
    return base64.b64decode(encoded).decode() if encoded else None


def client_context(ca_pem: str | None) -> ssl.SSLContext:
    """Verifies the server's certificate and name, against ``ca_pem`` or the system's CAs."""
    return ssl.create_default_context(cadata=ca_pem) if ca_pem else ssl.create_default_context()


@dataclass
class TlsTrust:
    _contexts: dict[tuple[str, str], tuple[str, ssl.SSLContext]] = field(default_factory=dict)

    def remember(self, namespace: str, name: str, secret: Mapping[str, Any]) -> ssl.SSLContext:
        ca = ca_of(secret)
        digest = hashlib.sha256((ca or "").encode()).hexdigest()
        held = self._contexts.get((namespace, name))
        if held is None or held[0] != digest:
            held = (digest, client_context(ca))
            self._contexts[namespace, name] = held
        return held[1]

    async def context(self, api: SecretSource, namespace: str, name: str) -> ssl.SSLContext:
        held = self._contexts.get((namespace, name))
        if held is not None:
            return held[1]
        secret = await api.get("Secret", namespace, name)
        if secret is None:
            raise SecretMissing(f"Secret {namespace}/{name} does not exist")
        return self.remember(namespace, name, secret)
