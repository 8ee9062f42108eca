"""A small async Kubernetes API client that reuses the credentials kopf logged in with,
so the operator has one login path and one event loop."""
from __future__ import annotations

import contextvars
import json
import ssl
from importlib import metadata
from typing import Any, Awaitable, Callable

import aiohttp
import kopf

from ..constants import MANAGED_BY
from .resources import KINDS

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
FIELD_MANAGER = MANAGED_BY  # every write is made under this name: the fields it sets are its own
TOO_MANY_REQUESTS = 429  # an eviction its PodDisruptionBudget does not allow now
CONFLICT = 409  # a write naming a resourceVersion the object has moved on from
INVALID = 422  # ... or a JSON patch whose test fails


# Called before a 403 is raised: a timer's pass sets it to ask whether its own object is still
# there for the operator (handlers.unguarded), which ends the pass when it is not.
ON_FORBIDDEN: contextvars.ContextVar[Callable[[], Awaitable[None]] | None] = \
    contextvars.ContextVar("on_forbidden", default=None)


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


def _ssl_context(info: kopf.ConnectionInfo) -> ssl.SSLContext | None:
    """kopf's own context: certificates given as data pass through files it removes
    once loaded, so no private key is left on disk."""
    return info.as_ssl_context() if info.server.startswith("https") else None


# named in the API server's audit log (and as the field manager, were none given)
USER_AGENT = f"{MANAGED_BY}/{metadata.version('nsq-operator')}"


class KubeApi:
    """Requests carry the latest login's credentials; a request the apiserver refuses as
    unauthenticated logs in anew (a rotated token) and is sent once more."""

    def __init__(self, connection: Callable[[], kopf.ConnectionInfo],
                 relogin: Callable[[], kopf.ConnectionInfo | None] | None = None, timeout: float = 30.0) -> None:
        self._connection, self._relogin = connection, relogin
        self._info: kopf.ConnectionInfo | None = None
        self._ssl: ssl.SSLContext | None = None
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self._follow()

    def _follow(self) -> kopf.ConnectionInfo:
        info = self._connection()
        if info is not self._info:
            self._info, self._ssl = info, _ssl_context(info)
        return info

    @property
    def server(self) -> str:
        return self._follow().server.rstrip("/")

    def _client(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("the Kubernetes API client is closed")
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        self._closed = True
        if self._session is not None:
            await self._session.close()

    async def _request(self, method: str, url: str, body: Any = None, content_type: str = "application/json",
                       params: dict[str, str] | None = None) -> Any:
        if method in ("POST", "PATCH", "PUT"):
            params = {"fieldManager": FIELD_MANAGER, **(params or {})}
        for attempt in (1, 2):
            info = self._follow()
            headers = {**info.as_http_headers(), "Content-Type": content_type, "User-Agent": USER_AGENT}
            async with self._client().request(method, info.server.rstrip("/") + url, json=body, params=params,
                                              ssl=self._ssl, headers=headers) as response:
                text = await response.text()
                if response.status == 401 and attempt == 1 and self._relogin is not None:
                    self._relogin()
                    continue
                if response.status == 404:
                    return None
                if response.status == 403 and (check := ON_FORBIDDEN.get()) is not None:
                    await check()
                if response.status >= 400:
                    raise KubeApiError(response.status, method, url, text)
                return await response.json(content_type=None) if text else {}
        raise AssertionError("unreachable")

    async def resources_of(self, api_version: str) -> list[str] | None:
        """The resources (plurals) the API server serves in a group version; None when it
        serves none there (its CRDs are not installed)."""
        prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        answer = await self._request("GET", prefix)
        return None if answer is None else [str(r.get("name")) for r in answer.get("resources") or []]

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

    async def patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any] | list[dict[str, Any]],
                    subresource: str | None = None, content_type: str = MERGE_PATCH) -> dict[str, Any] | None:
        return await self._request("PATCH", KINDS[kind].url(namespace, name, subresource), patch, content_type)

    async def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply, forced: the object's fields of this manager become exactly
        the manifest's (created when missing); other managers' fields stay."""
        meta = manifest["metadata"]
        applied = await self._request("PATCH", KINDS[manifest["kind"]].url(meta["namespace"], meta["name"]), manifest,
                                      APPLY_PATCH, params={"force": "true"})
        assert applied is not None, f"applying {manifest['kind']} {meta['name']} answered 404"
        return dict(applied)

    async def delete(self, kind: str, namespace: str, name: str, propagation: str | None = None) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation} if propagation else None
        await self._request("DELETE", KINDS[kind].url(namespace, name), body)


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
