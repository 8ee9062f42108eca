"""Runs the operator under test: KMock's emulator and the test kubelet in a child process,
kopf on the test's event loop, talking over HTTP like in a cluster. The kubelet publishes
which process serves which pod in an address book file; the operator's test resolver and
the tests read it."""
from __future__ import annotations

import asyncio
import json
import multiprocessing
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

import aiohttp
import kmock
import kopf

from nsq_operator.handlers import build_registry
from nsq_operator.runtime import Intervals, Runtime
from tests.operator.emulator import ADMIN, REQUESTS_PATH, KubeEmulator
from tests.operator.addresses import AddressBook, KubeletEndpoints
from tests.operator.kubelet import FakeKubelet
from tests.servers import http

T = TypeVar("T")
FAST = Intervals(cluster_status=1.0, topology=1.0, retry=0.5, http_timeout=3.0, rollout=0.3, drain_margin=2.0,
                 ready_timeout=6.0, handoff_timeout=20.0, max_backoff=2.0, unschedulable_timeout=2.0)
PLURALS = {"NsqCluster": "nsqclusters", "NsqTopic": "nsqtopics", "NsqChannel": "nsqchannels"}
REJECTIONS = "apiserver-rejections.jsonl"
FORBIDDEN = "forbidden-creates"
FORBIDDEN_NAMESPACES = "forbidden-namespaces"
STATUS_RACE = "status-race"
STATUS_CONFLICT = "status-conflict"
TOKEN = "serviceaccount-token"  # the operator's token: what it logs in with, what the apiserver accepts


def _backstage_main(root: str, namespace: str, pipe: Connection, restricted: bool = True,
                    extra_apis: frozenset[str] = frozenset()) -> None:
    """The cluster side, in a process of its own (its own GIL): emulator + kubelet."""
    async def main() -> None:
        async with KubeEmulator(restricted_namespaces=frozenset({namespace} if restricted else set()),
                                extra_apis=extra_apis,
                                rejections_file=Path(root) / REJECTIONS, forbidden_file=Path(root) / FORBIDDEN,
                                forbidden_namespaces_file=Path(root) / FORBIDDEN_NAMESPACES,
                                status_race_file=Path(root) / STATUS_RACE,
                                status_conflict_file=Path(root) / STATUS_CONFLICT,
                                tokens_file=Path(root) / TOKEN) as emulator, kmock.Server(emulator) as server:
            kubelet = FakeKubelet(str(server.url), namespace, Path(root))
            await kubelet.start()
            pipe.send(str(server.url).rstrip("/"))
            try:
                await asyncio.get_running_loop().run_in_executor(None, pipe.recv)  # the stop word
            finally:
                errors = [repr(e) for e in kubelet.errors[-5:]]
                await kubelet.stop()
                pipe.send(errors)
    asyncio.run(main())


class Backstage:
    """Runs the cluster side in a child process and tells where its API server listens.

    Every write the emulated apiserver refuses as invalid (a field it would prune, a
    status its schema does not admit, an immutable field changed ...) fails the test at
    ``stop`` unless the test took it with ``take_rejections`` (it meant to be refused)."""

    def __init__(self, root: Path, namespace: str, restricted: bool = True,
                 extra_apis: frozenset[str] = frozenset()) -> None:
        """``restricted``: the namespace enforces Pod Security "restricted" (as the tests want);
        ``extra_apis``: other projects' APIs served (emulator.EXTRA_APIS: cert-manager ...)."""
        self.root, self.namespace = root, namespace
        self.url = ""
        self.kubelet_errors: list[str] = []
        self._rejections_taken = 0
        self._pipe, child = multiprocessing.Pipe()
        self._process = multiprocessing.get_context("spawn").Process(
            target=_backstage_main, args=(str(root), namespace, child, restricted, extra_apis), daemon=True)

    def start(self) -> "Backstage":
        self.root.mkdir(parents=True, exist_ok=True)
        if not (self.root / TOKEN).exists():
            self.rotate_token("token-1")
        self._process.start()
        if not self._pipe.poll(30):
            self._process.kill()
            raise RuntimeError("the emulator did not start")
        self.url = self._pipe.recv()
        return self

    def rotate_token(self, token: str) -> None:
        """The operator's service-account token is replaced: the old one is refused from now on."""
        (self.root / TOKEN).write_text(token, encoding="utf-8")

    def token(self) -> str:
        return (self.root / TOKEN).read_text(encoding="utf-8").strip()

    def forbid_creating(self, *plurals: str) -> None:
        """From now on the apiserver answers 403 to creating these (none: allow all again)."""
        (self.root / FORBIDDEN).write_text("\n".join(plurals), encoding="utf-8")

    def forbid_namespaces(self, *namespaces: str) -> None:
        """From now on the apiserver answers 403 to the operator (all but the admin) in these
        namespaces, as when their RoleBinding went (none: allow all again)."""
        (self.root / FORBIDDEN_NAMESPACES).write_text("\n".join(namespaces), encoding="utf-8")

    def race_status(self, *statefulsets: str) -> None:
        """The next write to each of these StatefulSets meets a status write of its controller
        first (its resourceVersion moves between the writer's read and its write), once."""
        (self.root / STATUS_RACE).write_text("\n".join(statefulsets), encoding="utf-8")

    def conflict_status_write(self, kind: str, name: str) -> None:
        """The next status write to this object is refused with 409 Conflict, once."""
        with (self.root / STATUS_CONFLICT).open("a", encoding="utf-8") as out:
            out.write(f"{PLURALS[kind]}/{name}\n")

    def conflicts_waiting(self) -> list[str]:
        path = self.root / STATUS_CONFLICT
        return path.read_text(encoding="utf-8").split() if path.exists() else []

    def rejections(self) -> list[dict[str, str]]:
        path = self.root / REJECTIONS
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        return [json.loads(line) for line in lines]

    def take_rejections(self) -> list[dict[str, str]]:
        """The writes refused since the last call, which the test thereby expected."""
        found = self.rejections()
        taken, self._rejections_taken = found[self._rejections_taken:], len(found)
        return taken

    def stop(self) -> None:
        try:
            self._pipe.send("stop")
            if self._pipe.poll(60):
                self.kubelet_errors = self._pipe.recv()
        finally:
            self._process.join(10)
            if self._process.is_alive():
                self._process.kill()
        unexpected = self.rejections()[self._rejections_taken:]
        assert not unexpected, f"the apiserver would have refused {len(unexpected)} write(s): {unexpected[:5]}"


class OperatorUnderTest:
    def __init__(self, backstage: Backstage, namespace: str, intervals: Intervals = FAST, via: str | None = None) -> None:
        self.backstage = backstage
        self.namespace = namespace
        self.pods = AddressBook(backstage.root)
        self.api = backstage.url
        self.operator_api = via or backstage.url  # where the operator (not the test) sends its requests
        self.session = aiohttp.ClientSession(headers=ADMIN)
        self._stop = asyncio.Event()
        self._ignored: set[asyncio.Task[Any]] = set()
        self._runner: asyncio.Task[None] | None = None
        self.runtime = Runtime(endpoints=KubeletEndpoints(self.pods), intervals=intervals, credentials=self._credentials)

    def _credentials(self, **_: Any) -> kopf.ConnectionInfo:
        """As a pod's service account: the token file read afresh at every login."""
        return kopf.ConnectionInfo(server=self.operator_api, insecure=True, token=self.backstage.token())

    async def start(self) -> None:
        self._ignored.update(asyncio.all_tasks())
        ready = asyncio.Event()
        settings = kopf.OperatorSettings()
        settings.watching.server_timeout = 30
        settings.networking.error_backoffs = [0.1, 0.2, 0.5]
        tasks = await kopf.spawn_tasks(registry=build_registry(self.runtime.intervals),
                                       memo=kopf.Memo(runtime=self.runtime),
                                       settings=settings, standalone=True, clusterwide=True,  # KMock cannot serve /api/v1/namespaces
                                       stop_flag=self._stop, ready_flag=ready)
        self._runner = asyncio.create_task(kopf.run_tasks(tasks, ignored=self._ignored))
        async with asyncio.timeout(20):
            await ready.wait()

    async def stop_operator(self) -> None:
        """Stop kopf (an uninstalled operator); the API stays reachable through this object."""
        current = asyncio.current_task()
        if current is not None:
            self._ignored.add(current)  # kopf cancels every task it does not know at exit
        self._stop.set()
        if self._runner is not None:
            async with asyncio.timeout(30):
                await self._runner

    async def stop(self) -> None:
        await self.stop_operator()
        await self.session.close()

    # -- the API, as kubectl would use it --------------------------------------------------
    def _path(self, kind: str, name: str | None = None, subresource: str | None = None) -> str:
        path = f"{self.api}/apis/nsq.dev/v1alpha1/namespaces/{self.namespace}/{PLURALS[kind]}"
        return path + (f"/{name}" if name else "") + (f"/{subresource}" if subresource else "")

    async def _call(self, method: str, url: str, body: Any = None, content_type: str = "application/json") -> Any:
        async with self.session.request(method, url, json=body, headers={"Content-Type": content_type}) as r:
            if r.status == 404:
                return None
            assert r.status < 400, (method, url, r.status, await r.text())
            return await r.json()

    async def attempt(self, method: str, url: str, body: Any = None,
                      content_type: str = "application/json") -> tuple[int, Any]:
        """A call whose refusal is the point: the status and the answer."""
        async with self.session.request(method, url, json=body, headers={"Content-Type": content_type}) as r:
            return r.status, await r.json(content_type=None)

    async def attempt_as(self, token: str, method: str, url: str) -> tuple[int, str]:
        async with aiohttp.ClientSession() as session:
            async with session.request(method, url, headers={"Authorization": f"Bearer {token}"}) as r:
                return r.status, await r.text()

    async def create(self, kind: str, name: str, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> Any:
        meta: dict[str, Any] = {"name": name, "namespace": self.namespace}
        if annotations:
            meta["annotations"] = annotations
        return await self._call("POST", self._path(kind),
                                {"apiVersion": "nsq.dev/v1alpha1", "kind": kind, "metadata": meta, "spec": spec})

    async def get(self, kind: str, name: str) -> Any:
        return await self._call("GET", self._path(kind, name))

    async def patch(self, kind: str, name: str, patch: dict[str, Any]) -> Any:
        return await self._call("PATCH", self._path(kind, name), patch, "application/merge-patch+json")

    async def delete(self, kind: str, name: str) -> Any:
        return await self._call("DELETE", self._path(kind, name))

    async def api_requests(self) -> dict[str, int]:
        """What the emulated API server served so far, by "<client> <verb> <resource>"."""
        found: dict[str, int] = await self._call("GET", f"{self.api}{REQUESTS_PATH}")
        return found

    async def core(self, path: str) -> Any:
        return await self._call("GET", f"{self.api}{path}")

    async def condition(self, kind: str, name: str, type_: str) -> dict[str, Any] | None:
        obj = await self.get(kind, name)
        conditions = ((obj or {}).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == type_), None)

    async def until(self, probe: Callable[[], Awaitable[T]], timeout: float = 40.0, what: str = "condition") -> T:
        """Poll ``probe`` until it returns something truthy (AssertionError counts as not yet)."""
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                value = await probe()
                if value:
                    return value
            except AssertionError as e:
                last = e
            await asyncio.sleep(0.05)
        raise AssertionError(f"{what} not met within {timeout}s (last: {last!r})")

    async def ready(self, kind: str, name: str, timeout: float = 40.0) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            obj = await self.get(kind, name)
            status = (obj or {}).get("status") or {}
            c = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), None)
            current = status.get("observedGeneration") == obj["metadata"]["generation"] if obj else False
            if c and c["status"] == "True" and current:
                return obj
            # not yet: what the status says, for the message should it never be
            raise AssertionError(f"observed generation current: {current}, conditions: {status.get('conditions')}")
        return await self.until(probe, timeout, f"{kind} {name} Ready")

    # -- the real processes behind the pods ----------------------------------------------
    def pod_json(self, pod: str, path: str) -> Any:
        status, body = http("GET", self.pods.http(pod) + path)
        assert status == 200, (pod, path, status, body)
        return json.loads(body)

    def pod_call(self, pod: str, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        return http(method, self.pods.http(pod) + path, body)

    def topic_on(self, pod: str, topic: str) -> dict[str, Any] | None:
        stats = self.pod_json(pod, f"/stats?format=json&topic={topic}")
        return next((t for t in stats["topics"] or [] if t["topic_name"] == topic), None)

    def channel_on(self, pod: str, topic: str, channel: str) -> dict[str, Any] | None:
        found = self.topic_on(pod, topic)
        return next((c for c in found["channels"] if c["channel_name"] == channel), None) if found else None
