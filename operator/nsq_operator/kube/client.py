"""A small async Kubernetes API client that reuses the credentials kopf logged in with,
so the operator has one login path and one event loop."""
from __future__ import annotations

import base64
import json
import ssl
import tempfile
from importlib import metadata
from typing import Any

import aiohttp
import kopf

from ..constants import MANAGED_BY
from .resources import KINDS

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
TOO_MANY_REQUESTS = 429  # an eviction its PodDisruptionBudget does not allow now
CONFLICT = 409  # a write naming a resourceVersion the object has moved on from


class KubeApiError(Exception):
    def __init__(self, status: int, method: str, url: str, body: str) -> None:
        super().__init__(f"{method} {url} -> {status}: {body[:300]}")
        self.status = status
        self.said = _status_message(body)

    @property
    def refused(self) -> bool:
        """The API server will not take this write as it is (invalid, forbidden, bad request):
        trying again changes nothing until the spec or the cluster does."""
        return self.status in (400, 403, 422)


def _status_message(body: str) -> str:
    """The message of the API server's Status answer, else the start of the body."""
    try:
        answer = json.loads(body)
    except ValueError:
        return body[:300]
    return str(answer.get("message") or body[:300]) if isinstance(answer, dict) else body[:300]


def _ssl_context(info: kopf.ConnectionInfo) -> ssl.SSLContext | bool:
    if not info.server.startswith("https"):
        return False
    if info.insecure:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        cadata = _text(info.ca_data)
        context = ssl.create_default_context(cafile=str(info.ca_path) if info.ca_path else None, cadata=cadata)
    certificate = info.certificate_path or _spill(info.certificate_data)
    if certificate:
        context.load_cert_chain(str(certificate), str(info.private_key_path or _spill(info.private_key_data)))
    return context


def _text(data: str | bytes | None) -> str | None:
    """kubeconfig carries certificates base64-encoded; ssl wants PEM text."""
    if data is None:
        return None
    raw = data if isinstance(data, bytes) else data.encode()
    try:
        return base64.b64decode(raw, validate=True).decode()
    except ValueError:
        return raw.decode()


def _spill(data: str | bytes | None) -> str | None:
    """ssl loads client certificates from files only."""
    text = _text(data)
    if text is None:
        return None
    handle = tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False)
    with handle:
        handle.write(text)
    return handle.name


class KubeApi:
    def __init__(self, info: kopf.ConnectionInfo, timeout: float = 30.0) -> None:
        self.server = info.server.rstrip("/")
        # named in the API server's audit log and as the field manager of its writes
        self._headers = {**info.as_http_headers(), "User-Agent": f"{MANAGED_BY}/{metadata.version('nsq-operator')}"}
        self._ssl = _ssl_context(info)
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(headers=self._headers, timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _request(self, method: str, url: str, body: Any = None, content_type: str = "application/json",
                       params: dict[str, str] | None = None) -> Any:
        async with self._client().request(method, self.server + url, json=body, params=params, ssl=self._ssl,
                                          headers={"Content-Type": content_type}) as response:
            text = await response.text()
            if response.status == 404:
                return None
            if response.status >= 400:
                raise KubeApiError(response.status, method, url, text)
            return await response.json(content_type=None) if text else {}

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._request("GET", KINDS[kind].url(namespace, name))

    async def list(self, kind: str, namespace: str, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
        selector = ",".join(f"{k}={v}" for k, v in (labels or {}).items())
        answer = await self._request("GET", KINDS[kind].url(namespace), params={"labelSelector": selector} if selector else None)
        items = (answer or {}).get("items") or []
        # filtered here as well: a selector the server ignores must not widen the result
        return [item for item in items if _has_labels(item, labels or {})]

    async def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        namespace = manifest["metadata"]["namespace"]
        return await self._request("POST", KINDS[manifest["kind"]].url(namespace), manifest)

    async def patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any],
                    subresource: str | None = None, content_type: str = MERGE_PATCH) -> dict[str, Any] | None:
        return await self._request("PATCH", KINDS[kind].url(namespace, name, subresource), patch, content_type)

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        await self._request("DELETE", KINDS[kind].url(namespace, name))

    async def evict(self, namespace: str, pod: str) -> str | None:
        """Evict a pod as `kubectl drain` does, through its PodDisruptionBudget; None once it
        goes (or is gone), else the API server's reason for refusing (429) for now."""
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
        try:
            await self._request("POST", KINDS["Pod"].url(namespace, pod, "eviction"), eviction)
        except KubeApiError as e:
            if e.status == TOO_MANY_REQUESTS:
                return e.said
            raise
        return None


def _has_labels(item: dict[str, Any], labels: dict[str, str]) -> bool:
    have = item.get("metadata", {}).get("labels") or {}
    return all(have.get(k) == v for k, v in labels.items())
