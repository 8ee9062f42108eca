"""KMock's Kubernetes emulator with the behaviour kopf and the operator rely on:
uid/resourceVersion/generation stamps, JSON-patch with a failed ``test`` answering 422,
strategic merge of lists keyed by ``type``/``name``, a ``status`` subresource kept apart
from the rest, finalizers, and a watch that subscribes before it lists; Pod Security
"restricted" on pods in the namespaces labelled for it (pod_admission.py), and the
pods/eviction subresource honouring PodDisruptionBudgets (eviction.py)."""
from __future__ import annotations

import copy
import datetime
import itertools
import uuid
from typing import Any, AsyncIterator

import aiohttp.web
import attrs
import jsonpatch
import kmock
from kmock._internal import enums

from nsq_operator.constants import GROUP, VERSION
from tests.operator import eviction, selectors
from tests.operator.pod_admission import admit_pod

CUSTOM = {"nsqclusters": ("NsqCluster", {"status", "scale"}), "nsqtopics": ("NsqTopic", {"status"}),
          "nsqchannels": ("NsqChannel", {"status"})}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge(target: Any, patch: Any) -> Any:
    """Merge patch, except lists of objects with a ``type`` or ``name`` merge by that key."""
    if isinstance(patch, list) and isinstance(target, list) and patch and all(isinstance(p, dict) for p in patch):
        key = next((k for k in ("type", "name") if all(k in p for p in patch)), None)
        if key is not None:
            merged = [copy.deepcopy(t) for t in target]
            for item in patch:
                index = next((i for i, t in enumerate(merged) if isinstance(t, dict) and t.get(key) == item[key]), None)
                if index is None:
                    merged.append(copy.deepcopy(item))
                else:
                    merged[index] = strategic_merge(merged[index], item)
            return merged
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = strategic_merge(result.get(key), value)
    return result


REQUESTS_PATH = "/_harness/requests"


def _labels(obj: Any) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@attrs.define(kw_only=True)
class KubeEmulator(kmock.KubernetesEmulator):
    _versions: Any = attrs.field(factory=lambda: itertools.count(1), init=False)
    # namespaces labelled pod-security.kubernetes.io/enforce=restricted
    restricted_namespaces: frozenset[str] = attrs.field(factory=frozenset)
    evicted: list[str] = attrs.field(factory=list, init=False)  # pods evicted, in order
    served: dict[str, int] = attrs.field(factory=dict, init=False)  # "<client> <verb> <resource>": requests

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.resources.load_bundled()
        for plural, (kind, subresources) in CUSTOM.items():
            self.resources[f"{GROUP}/{VERSION}/{plural}"] = kmock.ResourceInfo(
                kind=kind, singular=kind.lower(), namespaced=True, subresources=subresources,
                verbs={"list", "watch", "get", "create", "patch", "update", "delete"})

    def _has_status(self, resource: Any) -> bool:
        try:
            return "status" in self.resources[resource].subresources
        except (KeyError, LookupError):
            return False

    async def _handle(self, request: Any) -> Any:
        del self._requests[:-50]  # KMock records every request; the tests assert on objects only
        if request.url.path == REQUESTS_PATH:  # the harness's own: how many API calls were made
            return aiohttp.web.json_response(self.served)
        self._count(request)
        if request.resource is not None and request.resource.plural == "pods" and request.subresource == "eviction":
            return await self._evict(request)
        collect = None
        if request.resource is not None and request.action in (enums.action.CREATE, enums.action.UPDATE,
                                                               enums.action.DELETE):
            async with self._lock:
                collect = await self._write(request)
        try:
            return await kmock.KubernetesScaffold._handle(self, request)
        finally:
            if collect is not None:
                async with self._lock:
                    raw = self._objects[collect].raw
                    self._objects[collect].delete()
                    await self._buses[collect[0]].put({"type": "DELETED", "object": raw})

    def _count(self, request: Any) -> None:
        """Requests by client (User-Agent) and by verb and resource, watches counted once."""
        agent = next((v for k, v in request.headers.items() if k.lower() == "user-agent"), "").split("/", 1)[0]
        method = str(getattr(request.method, "value", request.method)).lower()
        if request.params.get("watch") in ("true", "1"):
            verb = "watch"
        elif method == "get" and request.name is None:
            verb = "list"
        else:
            verb = method
        what = request.resource.plural if request.resource is not None else request.url.path
        key = f"{agent or '-'} {verb} {what}" + (f"/{request.subresource}" if request.subresource else "")
        self.served[key] = self.served.get(key, 0) + 1

    async def _serve_list(self, request: Any) -> Any:
        answer = await super()._serve_list(request)
        selector = request.params.get("labelSelector")
        if selector:
            answer["items"] = [o for o in answer["items"] if selectors.matches(selector, _labels(o))]
        return answer

    async def _evict(self, request: Any) -> Any:
        """POST pods/<name>/eviction: refused (429) when the pod's disruption budget does not
        allow it (eviction.py), else the pod is deleted as a DELETE would."""
        async with self._lock:
            key = (request.resource, request.namespace, request.name)
            if key not in self._objects or self._objects[key].deleted:
                raise kmock.KubernetesObjectNotFoundError()
            current = copy.deepcopy(self._objects[key].raw)

            def listed(plural: str) -> list[dict[str, Any]]:
                return [obj.raw for (res, ns, _), obj in self._objects.items()
                        if res.plural == plural and ns == request.namespace and not obj.deleted]
            why = eviction.refusal(current, listed("poddisruptionbudgets"), listed("pods"), listed("statefulsets"))
            if why is not None:
                raise kmock.KubernetesError(status=eviction.TOO_MANY_REQUESTS, reason="TooManyRequests", message=why)
            self.evicted.append(str(request.name))
            if current["metadata"].get("finalizers"):
                if not current["metadata"].get("deletionTimestamp"):
                    current["metadata"].update(deletionTimestamp=_now(), resourceVersion=str(next(self._versions)))
                    self._objects[key].create(current)
                    await self._buses[request.resource].put({"type": "MODIFIED", "object": self._objects[key].raw})
            else:
                self._objects[key].delete()
                await self._buses[request.resource].put({"type": "DELETED", "object": current})
        return aiohttp.web.json_response({"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201},
                                         status=201)

    async def _write(self, request: Any) -> Any:
        resource, objects = request.resource, self._objects
        if request.action == enums.action.CREATE:
            body = copy.deepcopy(request.data)
            meta = body.setdefault("metadata", {})
            namespace = request.namespace or meta.get("namespace")
            if namespace:
                meta["namespace"] = namespace
            if "name" not in meta and meta.get("generateName"):  # as the API server does (events)
                meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
                # KMock then looks the new object up by the request's name: give it the same
                request.data.setdefault("metadata", {})["name"] = meta["name"]
            key = (resource, namespace, meta["name"])
            if resource.plural == "pods" and namespace in self.restricted_namespaces:
                admit_pod(body)
            if key in objects and not objects[key].deleted:
                raise kmock.KubernetesError(status=409, reason="AlreadyExists", message=f"{meta['name']} exists")
            meta.update(uid=str(uuid.uuid4()), resourceVersion=str(next(self._versions)), generation=1,
                        creationTimestamp=_now())
            if key in objects:
                objects[key].create(body)
            else:
                objects[key] = body
            await self._buses[resource].put({"type": "ADDED", "object": objects[key].raw})
            return None
        if request.name is None:
            return None
        key = (resource, request.namespace, request.name)
        if key not in objects or objects[key].deleted:
            raise kmock.KubernetesObjectNotFoundError()
        current = copy.deepcopy(objects[key].raw)
        if request.action == enums.action.DELETE:
            if current["metadata"].get("finalizers"):
                if not current["metadata"].get("deletionTimestamp"):
                    current["metadata"].update(deletionTimestamp=_now(), resourceVersion=str(next(self._versions)))
                    objects[key].create(current)
                    await self._buses[resource].put({"type": "MODIFIED", "object": objects[key].raw})
                return None
            objects[key].delete()
            await self._buses[resource].put({"type": "DELETED", "object": current})
            return None
        new = self._patched(current, request)
        if request.subresource == "status":
            new = {**current, "status": new.get("status")}
        elif self._has_status(resource):
            new["status"] = current.get("status")
        if new.get("status") is None:
            new.pop("status", None)
        meta = new["metadata"]
        if new.get("spec") != current.get("spec"):
            meta["generation"] = int(current["metadata"].get("generation", 1)) + 1
        meta["resourceVersion"] = str(next(self._versions))
        objects[key].history = [new]  # only the latest version is served; keeping all of them costs time
        await self._buses[resource].put({"type": "MODIFIED", "object": objects[key].raw})
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return key
        return None

    def _patched(self, current: dict[str, Any], request: Any) -> dict[str, Any]:
        content_type = next((v for k, v in request.headers.items() if k.lower() == "content-type"), "")
        if "json-patch" in content_type:
            try:
                return jsonpatch.apply_patch(current, request.data, in_place=False)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
                raise kmock.KubernetesError(status=422, reason="Invalid", message=str(e)) from None
        if "strategic" in content_type:
            return strategic_merge(current, request.data)
        return merge_patch(current, request.data)

    async def _serve_watch(self, request: Any) -> AsyncIterator[Any]:
        yield b""
        bus = self._buses[request.resource]
        mark = await bus.mark()  # before the listing, so nothing written in between is lost
        try:
            async with self._lock:
                events = [{"type": "ADDED", "object": obj.raw} for (res, ns, name), obj in self._objects.items()
                          if res == request.resource and not obj.deleted and self._wanted(request, ns, name)
                          and self._selected(request, obj.raw)]
            for event in events:
                yield event
            async for event in bus.stream(since=mark):
                meta = event.get("object", {}).get("metadata", {})
                if self._wanted(request, meta.get("namespace"), meta.get("name")) \
                        and self._selected(request, event.get("object", {})):
                    yield event
        finally:
            await bus.unmark(mark)

    @staticmethod
    def _selected(request: Any, obj: dict[str, Any]) -> bool:
        """Its labelSelector, as the API server applies it (an object that stops matching is
        simply no longer sent, where a real watch would send it as DELETED)."""
        selector = request.params.get("labelSelector")
        return not selector or selectors.matches(selector, _labels(obj))

    @staticmethod
    def _wanted(request: Any, namespace: str | None, name: str | None) -> bool:
        return ((request.namespace is None or namespace == request.namespace)
                and (request.name is None or name == request.name))
