"""KMock's Kubernetes emulator with the behaviour kopf and the operator rely on:
uid/resourceVersion/generation stamps, JSON-patch with a failed ``test`` answering 422,
strategic merge of lists keyed by ``type``/``name``, a ``status`` subresource kept apart
from the rest, finalizers, and a watch that subscribes before it lists; Pod Security
"restricted" on pods in the namespaces labelled for it (pod_admission.py), and the
pods/eviction subresource honouring PodDisruptionBudgets (eviction.py).

And what a real apiserver refuses or does on a write (admission.py): defaulting and
crdcheck of nsq.dev objects, the core kinds' schema, StatefulSet's immutable spec; a
write naming a stale resourceVersion is a 409; field managers and server-side apply
(fieldsets.py); a write that changes nothing is no write; core objects' quantities are
stored canonical (``1024Mi`` read back as ``1Gi``); names and label values are checked for
length; a DELETE with propagationPolicy Orphan leaves the object Terminating (an orphan
finalizer) until the garbage collector's part is done, a moment later; a claim grows only
where its StorageClass allows it, and only once bound; a test can make a StatefulSet's
controller write its status (a new resourceVersion) just before the next write to it."""
from __future__ import annotations

import asyncio
import copy
import datetime
import itertools
import json
import uuid
from pathlib import Path
from typing import Any, AsyncIterator

import aiohttp.web
import attrs
import jsonpatch
import kmock
import yaml
from kmock._internal import enums

from nsq_operator import quantity
from nsq_operator.constants import GROUP, VERSION
from tests.operator import eviction, fieldsets, selectors
from tests.operator.admission import Admission, Backlog, Refused
from tests.operator.pod_admission import admit_pod

# other projects' kinds the operator writes, served when a test installs their CRDs
EXTRA_APIS = {"cert-manager.io/v1": ("certificates", "Certificate"),
              "monitoring.coreos.com/v1": ("podmonitors", "PodMonitor")}
CUSTOM = {"nsqclusters": ("NsqCluster", {"status", "scale"}), "nsqtopics": ("NsqTopic", {"status"}),
          "nsqchannels": ("NsqChannel", {"status"})}


ORPHAN_FINALIZER = "orphan"
ORPHAN_RELEASE_SECONDS = 0.5  # how long the garbage collector takes to release an Orphan deletion's dependents


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


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k not in ("managedFields", "resourceVersion")}
    return {**obj, "metadata": meta}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


APPLY_PATCH = "application/apply-patch+yaml"
ADMIN_TOKEN = "cluster-admin"  # what the test kubelet and the tests themselves send
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _header(request: Any, name: str) -> str:
    return next((v for k, v in request.headers.items() if k.lower() == name), "")


def manager_of(request: Any) -> str:
    """The field manager of a write: the fieldManager parameter, else the start of the
    client's User-Agent, as the apiserver names it."""
    return request.params.get("fieldManager") or _header(request, "user-agent").split("/", 1)[0] or "unknown"


def _invalid(message: str) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=422, reason="Invalid", message=message)


@attrs.define(kw_only=True)
class KubeEmulator(kmock.KubernetesEmulator):
    rejections_file: Path | None = None  # every write refused as invalid, one JSON line each
    forbidden_file: Path | None = None  # plurals whose creation a test forbids (RBAC says no), one a line
    # namespaces whose RoleBinding a test took away: everything in them is 403 but to the admin, one a line
    forbidden_namespaces_file: Path | None = None
    tokens_file: Path | None = None  # bearer tokens accepted besides ADMIN_TOKEN, one a line; absent: no auth
    _versions: Any = attrs.field(factory=lambda: itertools.count(1), init=False)
    # namespaces labelled pod-security.kubernetes.io/enforce=restricted
    restricted_namespaces: frozenset[str] = attrs.field(factory=frozenset)
    # the CRDs of other projects this cluster has ("cert-manager.io/v1", "monitoring.coreos.com/v1")
    extra_apis: frozenset[str] = attrs.field(factory=frozenset)
    evicted: list[str] = attrs.field(factory=list, init=False)  # pods evicted, in order
    served: dict[str, int] = attrs.field(factory=dict, init=False)  # "<client> <verb> <resource>": requests
    _owners: dict[Any, dict[fieldsets.Manager, fieldsets.FieldSet]] = attrs.field(factory=dict, init=False)
    _admission: Admission = attrs.field(factory=Admission, init=False)
    _backlog: Backlog | None = attrs.field(default=None, init=False)
    _tasks: set[Any] = attrs.field(factory=set, init=False)
    # StatefulSets whose next write meets a status write of their controller first, one a line
    status_race_file: Path | None = None
    # "<plural>/<name>" whose next status write is refused with 409, one a line
    status_conflict_file: Path | None = None

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.resources.load_bundled()
        for plural, (kind, subresources) in CUSTOM.items():
            self.resources[f"{GROUP}/{VERSION}/{plural}"] = kmock.ResourceInfo(
                kind=kind, singular=kind.lower(), namespaced=True, subresources=subresources,
                verbs={"list", "watch", "get", "create", "patch", "update", "delete"})
        for api_version, (plural, kind) in EXTRA_APIS.items():
            if api_version in self.extra_apis:
                self.resources[f"{api_version}/{plural}"] = kmock.ResourceInfo(
                    kind=kind, singular=kind.lower(), namespaced=True, subresources={"status"},
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
        self._authenticate(request)
        self._count(request)
        self._authorize(request)
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
                    self._owners.pop(collect, None)
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
                self._owners.pop(key, None)
                await self._buses[request.resource].put({"type": "DELETED", "object": current})
        return aiohttp.web.json_response({"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201},
                                         status=201)

    def _authenticate(self, request: Any) -> None:
        if self.tokens_file is None or not self.tokens_file.exists():
            return
        accepted = {ADMIN_TOKEN, *self.tokens_file.read_text(encoding="utf-8").split()}
        scheme, _, token = _header(request, "authorization").partition(" ")
        if scheme != "Bearer" or token not in accepted:
            raise kmock.KubernetesError(status=401, reason="Unauthorized", message="Unauthorized")

    def _authorize(self, request: Any) -> None:
        """403 for all but the admin in a namespace whose RoleBinding is gone."""
        if self.forbidden_namespaces_file is None or not self.forbidden_namespaces_file.exists():
            return
        if request.namespace not in set(self.forbidden_namespaces_file.read_text(encoding="utf-8").split()):
            return
        if _header(request, "authorization") == ADMIN["Authorization"]:
            return
        what = request.resource.plural if request.resource is not None else request.url.path
        raise kmock.KubernetesError(status=403, reason="Forbidden",
                                    message=f'{what} is forbidden: cannot {request.method} resource "{what}" '
                                            f'in the namespace "{request.namespace}"')

    def _forbidden(self) -> set[str]:
        if self.forbidden_file is None or not self.forbidden_file.exists():
            return set()
        return set(self.forbidden_file.read_text(encoding="utf-8").split())

    def _record(self, entry: dict[str, str]) -> None:
        if self.rejections_file is not None:
            with self.rejections_file.open("a", encoding="utf-8") as out:
                out.write(json.dumps(entry) + "\n")

    async def _admit(self, request: Any, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        try:
            self._admission.admit(old, new)
        except Refused as e:
            self._record({"method": request.method, "path": str(request.url.path), "manager": manager_of(request),
                          "error": str(e)})
            raise _invalid(str(e)) from None
        if self._admission.custom(new):
            if self._backlog is None:
                self._backlog = Backlog(self._admission, lambda error: self._record(
                    {"method": "", "path": "", "manager": "", "error": error}))
            self._backlog.add(new)

    async def __aexit__(self, *exc: Any) -> Any:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._backlog is not None:
            await self._backlog.close()
        return await super().__aexit__(*exc)

    def _stamped(self, key: Any, obj: dict[str, Any], owners: dict[fieldsets.Manager, fieldsets.FieldSet]) -> None:
        self._owners[key] = owners
        obj["metadata"]["managedFields"] = fieldsets.managed_fields(owners, obj.get("apiVersion", ""), _now())

    async def _create(self, request: Any, key: Any, body: dict[str, Any],
                      owners: dict[fieldsets.Manager, fieldsets.FieldSet]) -> None:
        objects = self._objects
        if key in objects and not objects[key].deleted:
            raise kmock.KubernetesError(status=409, reason="AlreadyExists", message=f"{key[2]} exists")
        body = self._admission.defaulted(body)
        body["metadata"].update(uid=str(uuid.uuid4()), resourceVersion=str(next(self._versions)), generation=1,
                                creationTimestamp=_now())
        await self._admit(request, None, body)
        self._stamped(key, body, owners)
        if key in objects:
            objects[key].create(body)
        else:
            objects[key] = body
        await self._buses[key[0]].put({"type": "ADDED", "object": objects[key].raw})

    async def _write(self, request: Any) -> Any:
        resource, objects = request.resource, self._objects
        manager = manager_of(request)
        if request.action == enums.action.CREATE:
            if resource.plural in self._forbidden():
                raise kmock.KubernetesError(status=403, reason="Forbidden",
                                            message=f"{resource.plural} is forbidden: cannot create")
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
            self._typed(resource, body)
            await self._create(request, key, body, fieldsets.update({}, body, manager, {}))
            return None
        if request.name is None:
            return None
        key = (resource, request.namespace, request.name)
        applying = request.method == "PATCH" and APPLY_PATCH in _header(request, "content-type")
        if key not in objects or objects[key].deleted:
            if applying and request.subresource is None:  # server-side apply creates what is missing
                config = self._apply_config(request, key)
                body, owners = fieldsets.apply({}, config, manager, True, {})
                body["metadata"].update(name=request.name, namespace=request.namespace)
                await self._create(request, key, body, owners)
                return None
            raise kmock.KubernetesObjectNotFoundError()
        current = copy.deepcopy(objects[key].raw)
        if request.action == enums.action.DELETE:
            orphaning = self._propagation(request) == "Orphan"
            if current["metadata"].get("finalizers") or orphaning:
                if not current["metadata"].get("deletionTimestamp"):
                    finalizers = list(current["metadata"].get("finalizers") or [])
                    if orphaning and ORPHAN_FINALIZER not in finalizers:
                        # as the apiserver does: the garbage collector releases the
                        # dependents first, then takes its finalizer off (_release)
                        finalizers.append(ORPHAN_FINALIZER)
                        self._spawn(self._release(key, current["metadata"]["uid"]))
                    current["metadata"].update(deletionTimestamp=_now(), resourceVersion=str(next(self._versions)),
                                               finalizers=finalizers)
                    objects[key].create(current)
                    await self._buses[resource].put({"type": "MODIFIED", "object": objects[key].raw})
                return None
            objects[key].delete()
            self._owners.pop(key, None)
            await self._buses[resource].put({"type": "DELETED", "object": current})
            return None
        self._check_resize(request, current)
        owners = self._owners.get(key, {})
        if applying:
            config = self._apply_config(request, key)
            try:
                new, new_owners = fieldsets.apply(current, config, manager, request.params.get("force") == "true",
                                                  owners)
            except fieldsets.Conflicts as e:
                raise kmock.KubernetesError(status=409, reason="Conflict", message=str(e)) from None
        else:
            new = self._patched(current, request)
        if request.subresource is None and resource.plural == "statefulsets" and key[2] in self._racing() \
                and self._admission.defaulted(copy.deepcopy(new)).get("spec") != current.get("spec"):
            current = await self._race_status(key, current)
        self._check_precondition(request, current)
        if request.subresource == "status":
            self._conflict_once(f"{resource.plural}/{key[2]}")
            new = {**current, "status": new.get("status")}
        elif self._has_status(resource):
            new["status"] = current.get("status")
        if new.get("status") is None:
            new.pop("status", None)
        if not applying:
            new_owners = fieldsets.update(current, new, manager, owners, status=request.subresource == "status")
        new = self._admission.defaulted(new)
        meta = new["metadata"]
        if _content(new) == _content(current) and new_owners == owners:
            return None  # nothing changes: no new resourceVersion, no event (as etcd skips the write)
        if new.get("spec") != current.get("spec"):
            meta["generation"] = int(current["metadata"].get("generation", 1)) + 1
        meta["resourceVersion"] = str(next(self._versions))
        await self._admit(request, current, new)
        self._stamped(key, new, new_owners)
        objects[key].history = [new]  # only the latest version is served; keeping all of them costs time
        await self._buses[resource].put({"type": "MODIFIED", "object": objects[key].raw})
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return key
        return None

    @staticmethod
    def _propagation(request: Any) -> str | None:
        data = request.data if isinstance(request.data, dict) else {}
        return request.params.get("propagationPolicy") or data.get("propagationPolicy")

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)

        def done(task: Any) -> None:
            self._tasks.discard(task)
            if not task.cancelled() and task.exception() is not None:  # a harness fault: fail the test
                self._record({"method": "", "path": "", "manager": "emulator", "error": repr(task.exception())})
        task.add_done_callback(done)

    async def _release(self, key: Any, uid: str) -> None:
        """The garbage collector's part of an Orphan deletion, a moment later (until then
        the object is Terminating): the dependents lose their owner reference and stay,
        then the orphan finalizer goes, and with it the object."""
        await asyncio.sleep(ORPHAN_RELEASE_SECONDS)
        async with self._lock:
            if key not in self._objects:
                return
            obj = self._objects[key]
            if obj.deleted or obj.raw["metadata"].get("uid") != uid:
                return
            await self._orphan(key[1], uid)
            current = copy.deepcopy(obj.raw)
            finalizers = [f for f in current["metadata"].get("finalizers") or [] if f != ORPHAN_FINALIZER]
            if finalizers:
                current["metadata"].update(finalizers=finalizers, resourceVersion=str(next(self._versions)))
                obj.history = [current]
                await self._buses[key[0]].put({"type": "MODIFIED", "object": obj.raw})
                return
            obj.delete()
            self._owners.pop(key, None)
            await self._buses[key[0]].put({"type": "DELETED", "object": current})

    def _check_resize(self, request: Any, current: dict[str, Any]) -> None:
        """A claim grows only where its StorageClass allows expansion (else 403, as the
        apiserver's PersistentVolumeClaimResize admission answers) and only once it is
        bound (else 422: the spec of an unbound claim is immutable). A claim whose class no
        StorageClass object describes stands for the harness' own, which expands."""
        if request.resource.plural != "persistentvolumeclaims" or request.subresource is not None:
            return
        data = request.data if isinstance(request.data, dict) else {}
        wanted = (((data.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
        have = (((current.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
        if wanted is None or have is None or quantity.same(wanted, have):
            return
        name = current["metadata"]["name"]
        if (current.get("status") or {}).get("phase") != "Bound":
            raise kmock.KubernetesError(
                status=422, reason="Invalid",
                message=f"PersistentVolumeClaim \"{name}\" is invalid: spec: Forbidden: spec is immutable after "
                        f"creation except resources.requests and volumeAttributesClassName for bound claims")
        classes = [o.raw for (res, _, _), o in self._objects.items()
                   if res.plural == "storageclasses" and not o.deleted]
        named = (current.get("spec") or {}).get("storageClassName") or next(
            (c["metadata"]["name"] for c in classes
             if (c["metadata"].get("annotations") or {}).get("storageclass.kubernetes.io/is-default-class") == "true"),
            None)
        found = next((c for c in classes if c["metadata"]["name"] == named), None)
        if found is not None and not found.get("allowVolumeExpansion"):
            raise kmock.KubernetesError(
                status=403, reason="Forbidden",
                message=f"persistentvolumeclaims \"{name}\" is forbidden: only dynamically provisioned pvc can be "
                        f"resized and the storageclass that provisions the pvc must support resize")

    def _conflict_once(self, named: str) -> None:
        """The apiserver's answer when its own retries of a write under contention ran out
        ("the object has been modified"): once per naming, for the status writes a test names."""
        if self.status_conflict_file is None or not self.status_conflict_file.exists():
            return
        waiting = self.status_conflict_file.read_text(encoding="utf-8").split()
        if named not in waiting:
            return
        waiting.remove(named)
        self.status_conflict_file.write_text("\n".join(waiting), encoding="utf-8")
        raise kmock.KubernetesError(status=409, reason="Conflict",
                                    message=f"Operation cannot be fulfilled on {named}: the object has been "
                                            f"modified; please apply your changes to the latest version and try again")

    def _racing(self) -> set[str]:
        if self.status_race_file is None or not self.status_race_file.exists():
            return set()
        return set(self.status_race_file.read_text(encoding="utf-8").split())

    async def _race_status(self, key: Any, current: dict[str, Any]) -> dict[str, Any]:
        """The StatefulSet controller's status write landing between a client's read and its
        write: for a StatefulSet a test names, once per naming, its resourceVersion moves
        (a status write) just before a write that changes its spec is judged. Returns the
        object as it then is."""
        racing = self._racing()
        if key[2] not in racing:
            return current
        assert self.status_race_file is not None
        self.status_race_file.write_text("\n".join(sorted(racing - {key[2]})), encoding="utf-8")
        obj = self._objects[key]
        current = copy.deepcopy(obj.raw)
        status = dict(current.get("status") or {})
        status["collisionCount"] = int(status.get("collisionCount") or 0)  # a status write, as the controller's
        current.update(status=status)
        current["metadata"]["resourceVersion"] = str(next(self._versions))
        obj.history = [current]
        await self._buses[key[0]].put({"type": "MODIFIED", "object": obj.raw})
        return copy.deepcopy(current)

    async def _orphan(self, namespace: str | None, uid: str) -> None:
        """The garbage collector's part of an Orphan deletion: the dependents lose their
        owner reference and stay."""
        for (resource, ns, _), obj in list(self._objects.items()):
            refs = (obj.raw.get("metadata") or {}).get("ownerReferences") or [] if not obj.deleted else []
            if ns == namespace and any(r.get("uid") == uid for r in refs):
                kept = copy.deepcopy(obj.raw)
                kept["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid]
                if not kept["metadata"]["ownerReferences"]:
                    del kept["metadata"]["ownerReferences"]
                kept["metadata"]["resourceVersion"] = str(next(self._versions))
                obj.history = [kept]
                await self._buses[resource].put({"type": "MODIFIED", "object": obj.raw})

    def _typed(self, resource: Any, body: dict[str, Any]) -> None:
        """The apiserver stores apiVersion and kind from the URL when a POST leaves them out."""
        try:
            kind = self.resources[resource].kind
        except (KeyError, LookupError):
            return
        body.setdefault("apiVersion", f"{resource.group}/{resource.version}" if resource.group else resource.version)
        body.setdefault("kind", kind)

    def _apply_config(self, request: Any, key: Any) -> dict[str, Any]:
        config = request.data if isinstance(request.data, dict) else yaml.safe_load(request.text or "{}")
        if not isinstance(config, dict) or not config.get("apiVersion") or not config.get("kind"):
            raise kmock.KubernetesError(status=400, reason="BadRequest",
                                        message="an apply patch needs apiVersion and kind")
        name = (config.get("metadata") or {}).get("name")
        if name is not None and name != key[2]:
            raise kmock.KubernetesError(status=400, reason="BadRequest",
                                        message=f"the name of the object ({name}) does not match the URL ({key[2]})")
        config = copy.deepcopy(config)
        if self._has_status(key[0]):
            config.pop("status", None)  # the main resource never writes status
        return config

    @staticmethod
    def _check_precondition(request: Any, current: dict[str, Any]) -> None:
        """A write naming the resourceVersion it was read at fails when the object moved on."""
        data = request.data if isinstance(request.data, dict) else {}
        wanted = (data.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and str(wanted) != current["metadata"].get("resourceVersion"):
            raise kmock.KubernetesError(
                status=409, reason="Conflict",
                message=f"Operation cannot be fulfilled on {request.resource.plural} \"{request.name}\": the object "
                        f"has been modified; please apply your changes to the latest version and try again")

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
