"""A test kubelet (and the StatefulSet controller's share of the work): for every
StatefulSet in the emulator it keeps Pod objects and, behind each, a real nsqd or
nsqlookupd process on its own loopback address (127.0.x.y).

- A pod is created from the StatefulSet's *current* template, once no pod of that name
  exists; the API server may refuse it (Pod Security), which becomes a FailedCreate event
  on the StatefulSet and a new try once the StatefulSet changes. Only the container named
  after the component (nsqd, nsqlookupd) runs, other containers are carried on the Pod; its container's flags are passed through (``--drain-timeout`` ...), except the
  listen addresses, data path and config file, which the kubelet sets (the config file
  is the cluster's ConfigMap with lookupd DNS names mapped to the test processes).
- An nsqd pod's claim is a PersistentVolumeClaim object plus a directory: it survives
  the pod (a replacement runs on the same data) and goes when the claim is deleted.
- A pod deleted through the API (it carries the kubelet's finalizer, so it is first
  marked terminating, as in a cluster) gets SIGTERM, then SIGKILL after its
  terminationGracePeriodSeconds; then the object goes. Pods beyond the StatefulSet's
  replicas are deleted the same way.
- ContainersReady comes from the readiness probe's path; Ready also needs every
  readiness gate. A process that exits is not restarted: the container waits in
  CrashLoopBackOff, as a real one whose restarts keep failing.
- An image tagged ``crashloop`` never runs: the container waits in CrashLoopBackOff. A
  process that exits 0 (an nsqd after its drain) leaves its container terminated,
  Completed; another exit is recorded in lastState, with 128+signal for a signal.
- Scheduling: the kubelet is one node (NODE_LABELS); a pod whose nodeSelector asks for
  other labels is created Pending, PodScheduled False, Unschedulable, and runs nothing.
- Garbage collection: a StatefulSet whose owning NsqCluster is gone is deleted, and its
  pods with it (KMock has no garbage collector). A StatefulSet deleted with
  ``propagationPolicy: Orphan`` stays Terminating a moment and leaves its pods running
  (the emulator drops their owner reference); a StatefulSet made later under the same
  name adopts every one its selector matches, and deletes those beyond its replicas.
- The StatefulSet controller's status (replicas, readyReplicas, observedGeneration ...)
  is written whenever a pod changes: a StatefulSet's resourceVersion moves on its own.
- Each pod carries ``controller-revision-hash: <statefulset>-<hash>``, its hash at its
  longest (10 characters), a label value the apiserver checks (63 at most).
- Replicated topics: a pod's DNS name is given one loopback address and replication port
  for good, the first time its own flags or a peer's name it (``--replication-address``,
  ``--replication-peer`` are mapped to them, as the lookupd names are): an nsqd with
  replication runs on that address, a replacement on the same one, as a pod's stable name
  resolves to whichever pod has it. A claim the API server made anew (its older self was
  deleted) starts empty, as a new volume does.
"""
from __future__ import annotations

import asyncio
import shutil
import time
import tomllib
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Coroutine

import aiohttp

from nsq_operator.builders import toml
from nsq_operator.constants import LOOKUPD_CONFIG_FILE, NSQD_CONFIG_FILE
from nsq_operator.models.cluster import ClusterRef
from nsq_operator.status.conditions import now
from tests.operator.addresses import REPLICATION_BOOK, next_host, write_book
from tests.operator.emulator import ADMIN
from tests.operator.pod_volumes import PROBE_CONTEXT, PodNsqd, local_paths, project_secrets
from tests.servers import Nsqlookupd, ServerProcess, free_port

FINALIZER = "kubelet.test/terminate"
CRASH_LOOP_TAG = "crashloop"
PROBE_PERIOD = 0.2
REVISION_LABEL = "controller-revision-hash"
KUBELET_FLAGS = {"tcp-address", "http-address", "https-address", "data-path", "config", "broadcast-address",
                 "replication-listen-address"}


# the one node this kubelet is: a pod whose nodeSelector asks for other labels stays Pending
NODE_LABELS = {"kubernetes.io/hostname": "harness-node", "kubernetes.io/os": "linux"}


def fits(pod_spec: dict[str, Any]) -> bool:
    return all(NODE_LABELS.get(k) == v for k, v in (pod_spec.get("nodeSelector") or {}).items())


def _condition(pod: dict[str, Any], type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True" for c in pod.get("status", {}).get("conditions", []))


def container_flags(args: list[str]) -> dict[str, Any]:
    """``--name=value`` arguments the kubelet passes through; repeated flags become lists."""
    flags: dict[str, Any] = {}
    for arg in args:
        name, _, value = arg.removeprefix("--").partition("=")
        if name in KUBELET_FLAGS:
            continue
        flags[name] = [*flags[name], value] if isinstance(flags.get(name), list) else (
            [flags[name], value] if name in flags else value)
    return flags


def _owned_by(sts: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": sts["metadata"]["name"],
            "uid": sts["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def _owner(pod: dict[str, Any]) -> str | None:
    """The uid of the StatefulSet controlling the pod, if any."""
    return next((r["uid"] for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


@dataclass
class RunningPod:
    name: str
    component: str
    image: str
    grace: float
    process: ServerProcess | None  # None: the container never runs (crash loop)
    probe_path: str
    probed_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class FakeKubelet:
    def __init__(self, api_url: str, namespace: str, root: Path) -> None:
        self.api = api_url.rstrip("/")
        self.namespace = namespace
        self.root = root
        self.pods: dict[str, RunningPod] = {}
        self.busy: set[str] = set()  # pods being started or terminated
        self.claims: dict[str, Path] = {}  # claim name -> its directory
        self.started: list[ServerProcess] = []  # every process ever launched, stopped at the end
        self._tasks: set[asyncio.Task[None]] = set()
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self.errors: list[BaseException] = []
        self.refused: set[tuple[str, str | None]] = set()  # (StatefulSet, resourceVersion) whose pods were refused
        self.stable: dict[str, tuple[str, int]] = {}  # pod -> (host, replication port) its DNS name stands for

    def process(self, pod: str) -> ServerProcess:
        process = self.pods[pod].process
        assert process is not None, f"{pod} runs no process"
        return process

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5), headers=ADMIN)
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        # a start or a termination under way finishes first, so no process is left behind
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
        await asyncio.gather(*(asyncio.to_thread(p.stop, 10) for p in self.started))
        self.pods.clear()

    async def _run(self) -> None:
        while True:
            try:
                await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # kept for the test to see; the loop goes on like a kubelet
                self.errors.append(e)
            await asyncio.sleep(0.1)  # a polling period, not a synchronisation

    def _spawn(self, pod: str, work: Coroutine[Any, Any, None]) -> None:
        self.busy.add(pod)

        async def run() -> None:
            try:
                await work
            except Exception as e:
                self.errors.append(e)
            finally:
                self.busy.discard(pod)
        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- the API -----------------------------------------------------------------------
    async def _get(self, path: str) -> Any:
        assert self._session is not None
        async with self._session.get(self.api + path) as r:
            return await r.json() if r.status == 200 else None

    async def _send(self, method: str, path: str, body: Any, content_type: str = "application/json") -> None:
        assert self._session is not None
        async with self._session.request(method, self.api + path, json=body,
                                         headers={"Content-Type": content_type}) as r:
            if r.status >= 400 and r.status != 404 and not (r.status == 409 and method == "POST"):
                raise RuntimeError(f"{method} {path}: {r.status} {await r.text()}")

    def _path(self, plural: str, name: str | None = None) -> str:
        return f"/api/v1/namespaces/{self.namespace}/{plural}" + (f"/{name}" if name else "")

    async def _list(self, path: str) -> list[dict[str, Any]]:
        """A collection's items; a listing that fails ends the pass (the next one lists
        again), as a controller never takes a failed list for an empty one: that would
        garbage-collect every StatefulSet and delete every pod."""
        assert self._session is not None
        async with self._session.get(self.api + path) as r:
            if r.status != 200:
                raise RuntimeError(f"GET {path}: {r.status} {await r.text()}")
            items: list[dict[str, Any]] = (await r.json()).get("items", [])
            return items

    async def _items(self, path: str) -> dict[str, dict[str, Any]]:
        return {o["metadata"]["name"]: o for o in await self._list(path)}

    # -- one pass ----------------------------------------------------------------------
    async def sync(self) -> None:
        # pods settled before the listing: one that finished starting since is not in it yet
        settled = {n for n in self.pods if n not in self.busy}
        sets = await self._collect_garbage(
            await self._list(f"/apis/apps/v1/namespaces/{self.namespace}/statefulsets"))
        pods = await self._items(self._path("pods"))
        claims = await self._items(self._path("persistentvolumeclaims"))
        wanted: dict[str, dict[str, Any]] = {}
        # lookupd first: a starting nsqd is given the lookupds that exist
        for sts in sorted(sets, key=lambda s: s["metadata"]["labels"].get("app.kubernetes.io/component") != "nsqlookupd"):
            for i in range(int(sts["spec"].get("replicas", 0))):
                wanted[f"{sts['metadata']['name']}-{i}"] = sts
        for name in [n for n in settled if n in self.pods and n not in self.busy]:
            pod = pods.get(name)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                self._spawn(name, self._terminate(name, still_listed=pod is not None))
            elif name not in wanted and _owner(pod) is not None:
                # beyond its StatefulSet's replicas, or its StatefulSet is gone (the garbage
                # collector's part); an orphan (owner reference removed) runs on
                await self._send("DELETE", self._path("pods", name), None)
        for name, pod in pods.items():  # pods never scheduled, whose StatefulSet no longer wants them
            if name not in self.pods and name not in self.busy and name not in wanted \
                    and not pod["metadata"].get("finalizers") and not pod["metadata"].get("deletionTimestamp"):
                await self._send("DELETE", self._path("pods", name), None)
        for name, sts in wanted.items():
            if name not in self.pods and name not in self.busy and name not in pods:
                self._spawn(name, self._start_pod(sts, name))
            elif name in pods and _owner(pods[name]) is None and await self._can_adopt(sts):
                # the StatefulSet controller adopts a running orphan its selector matches
                await self._send("PATCH", self._path("pods", name), {"metadata": {"ownerReferences": [_owned_by(sts)]}},
                                 "application/merge-patch+json")
        for name, pod in pods.items():
            # the controller adopts every orphan its selector matches, beyond its replicas too
            # (those it then deletes, above, on the next pass)
            sts = self._claimer(sets, pod)
            if name not in wanted and sts is not None and _owner(pod) is None \
                    and not pod["metadata"].get("deletionTimestamp") and await self._can_adopt(sts):
                await self._send("PATCH", self._path("pods", name), {"metadata": {"ownerReferences": [_owned_by(sts)]}},
                                 "application/merge-patch+json")
        for sts in sets:
            await self._write_status(sts, pods)
        for claim in [c for c in self.claims if c not in claims]:
            # (a pod being started has its claim recorded before the apiserver has it)
            if not any(self.claims[claim].is_relative_to(self.root / p) for p in {*self.pods, *self.busy}):
                shutil.rmtree(self.claims.pop(claim), ignore_errors=True)
        await asyncio.gather(*(self._probe(pod) for name, pod in pods.items()
                               if name in settled and name in self.pods and name not in self.busy))

    async def _can_adopt(self, sts: dict[str, Any]) -> bool:
        """As the StatefulSet controller checks before it adopts: the StatefulSet, read
        afresh, is still the one listed (same uid) and not being deleted. Without it, a
        pass that listed a StatefulSet the operator has since deleted (Orphan) would give
        its pods an owner that no longer exists, and a later pass would delete them as a
        dead owner's pods, which is what the garbage collector does."""
        fresh = await self._get(f"/apis/apps/v1/namespaces/{self.namespace}/statefulsets/{sts['metadata']['name']}")
        return bool(fresh) and fresh["metadata"].get("uid") == sts["metadata"]["uid"] \
            and not fresh["metadata"].get("deletionTimestamp")

    @staticmethod
    def _claimer(sets: list[dict[str, Any]], pod: dict[str, Any]) -> dict[str, Any] | None:
        """The StatefulSet whose selector matches the pod and whose pods its name is one of."""
        base, _, ordinal = pod["metadata"]["name"].rpartition("-")
        have = pod["metadata"].get("labels") or {}
        for sts in sets:
            wanted = (sts["spec"].get("selector") or {}).get("matchLabels") or {}
            if sts["metadata"]["name"] == base and ordinal.isdigit() and wanted \
                    and all(have.get(k) == v for k, v in wanted.items()) and not sts["metadata"].get("deletionTimestamp"):
                return sts
        return None

    async def _write_status(self, sts: dict[str, Any], pods: dict[str, dict[str, Any]]) -> None:
        """The StatefulSet controller's status, rewritten whenever one of its pods changes
        (each write a new resourceVersion, as on a real apiserver)."""
        if sts["metadata"].get("deletionTimestamp"):
            return
        mine = [p for p in pods.values() if _owner(p) == sts["metadata"]["uid"]]
        ready = sum(1 for p in mine if _condition(p, "Ready"))
        status = {"observedGeneration": sts["metadata"].get("generation", 1), "replicas": len(mine),
                  "readyReplicas": ready, "availableReplicas": ready, "currentReplicas": len(mine),
                  "updatedReplicas": len(mine)}
        have = sts.get("status") or {}
        if any(have.get(k) != v for k, v in status.items()):
            await self._send("PATCH", f"/apis/apps/v1/namespaces/{self.namespace}/statefulsets/"
                                      f"{sts['metadata']['name']}/status", {"status": status},
                             "application/merge-patch+json")

    async def _collect_garbage(self, sets: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Delete the StatefulSets whose owner is gone; returns the others."""
        clusters = await self._items(f"/apis/nsq.dev/v1alpha1/namespaces/{self.namespace}/nsqclusters")
        alive = []
        for sts in sets:
            owners = [o["name"] for o in sts["metadata"].get("ownerReferences", []) if o.get("kind") == "NsqCluster"]
            if owners and not any(name in clusters for name in owners):
                await self._send("DELETE", f"/apis/apps/v1/namespaces/{self.namespace}/statefulsets/"
                                           f"{sts['metadata']['name']}", None)
            else:
                alive.append(sts)
        return alive

    async def _start_pod(self, sts: dict[str, Any], name: str) -> None:
        """As the StatefulSet controller and the kubelet do it: the Pod object first (the API
        server may refuse it), then its claim and its process, then its status."""
        component = sts["metadata"]["labels"]["app.kubernetes.io/component"]
        cluster = ClusterRef(sts["metadata"]["labels"]["app.kubernetes.io/instance"], self.namespace)
        template = sts["spec"]["template"]
        containers = [dict(c) for c in template["spec"]["containers"]]
        container = next(c for c in containers if c["name"] == component)  # the one this kubelet runs
        args = [a.replace("$(POD_NAME)", name) for a in container.get("args", [])]
        container["args"] = args
        # as the StatefulSet controller labels a pod: its ControllerRevision's name, the
        # StatefulSet's name and a 32-bit hash, here at its longest (10 digits)
        revision = f"{sts['metadata']['name']}-{zlib.crc32(repr(template).encode()):010d}"
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": self.namespace,
                            "labels": {**template["metadata"]["labels"], REVISION_LABEL: revision},
                            "annotations": dict(template["metadata"].get("annotations") or {}),
                            "finalizers": [FINALIZER], "ownerReferences": [_owned_by(sts)]},
               "spec": {**template["spec"], "containers": containers, "hostname": name},
               "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"},
                                                             {"type": "ContainersReady", "status": "False"},
                                                             {"type": "Ready", "status": "False"}]}}
        if not fits(template["spec"]):
            pod["metadata"]["finalizers"] = []  # no process to stop: the API server deletes it at once
            pod["status"]["conditions"][0] = {
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": now(),
                "message": f"0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector"}
            await self._create_pod(sts, pod)
            return
        if not await self._create_pod(sts, pod):
            return
        broadcast = next(a.split("=", 1)[1] for a in args if a.startswith("--broadcast-address="))
        workdir = self.root / name
        workdir.mkdir(parents=True, exist_ok=True)
        for claim_template in sts["spec"].get("volumeClaimTemplates", []):
            await self._claim(f"{claim_template['metadata']['name']}-{name}", claim_template, workdir / "data")
        mounted = await project_secrets(template["spec"], container, workdir,
                                        lambda secret: self._get(self._path("secrets", secret)))
        flags = local_paths({**container_flags(args), "broadcast-address": broadcast}, mounted)
        host = next_host()
        if "replication-address" in flags:  # its stable name's address, which its peers know it by
            host = self._stable(name)[0]
            flags["replication-address"] = self._replication_address(flags["replication-address"])
            peers = flags.get("replication-peer") or []
            peers = [p for value in (peers if isinstance(peers, list) else [peers]) for p in value.split(",") if p]
            flags["replication-peer"] = ",".join(self._replication_address(p) for p in peers)
        process: ServerProcess | None = None
        if not container["image"].endswith(f":{CRASH_LOOP_TAG}"):
            if component == "nsqd":
                flags["config"] = str(await self._nsqd_config(cluster, workdir))
                process = PodNsqd(workdir, flags, host=host)
            else:
                flags["config"] = str(await self._lookupd_config(cluster, workdir))
                process = Nsqlookupd(workdir, flags, host=next_host())
            self.started.append(process)
            await asyncio.to_thread(process.start)
        probe = (container.get("readinessProbe") or {}).get("httpGet", {}).get("path", "/ping")
        self.pods[name] = RunningPod(name, component, container["image"],
                                     float(template["spec"].get("terminationGracePeriodSeconds", 30)), process, probe)
        self._publish()
        await self._send("PATCH", self._path("pods", name) + "/status",
                         {"status": {"phase": "Running", "podIP": process.host if process else None}},
                         "application/merge-patch+json")

    async def _create_pod(self, sts: dict[str, Any], pod: dict[str, Any]) -> bool:
        """POST the pod; a refusal (Pod Security ...) becomes a FailedCreate event on the
        StatefulSet, as the controller reports it, once per template it was refused for."""
        assert self._session is not None
        key = (sts["metadata"]["name"], sts["metadata"].get("resourceVersion"))
        if key in self.refused:
            return False  # tried again once the StatefulSet changes
        async with self._session.post(self.api + self._path("pods"), json=pod) as r:
            if r.status < 400 or r.status == 409:
                return True
            message = (await r.json(content_type=None) or {}).get("message") or await r.text()
        if r.status not in (403, 422):  # Pod Security, quota ...; or a label value too long
            raise RuntimeError(f"POST pod {pod['metadata']['name']}: {r.status} {message}")
        self.refused.add(key)
        await self._send("POST", self._path("events"), {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{sts['metadata']['name']}-", "namespace": self.namespace},
            "involvedObject": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": sts["metadata"]["name"],
                               "namespace": self.namespace, "uid": sts["metadata"].get("uid")},
            "type": "Warning", "reason": "FailedCreate",
            "message": f"create Pod {pod['metadata']['name']} in StatefulSet {sts['metadata']['name']} failed "
                       f"error: {message}",
            "source": {"component": "statefulset-controller"}, "count": 1, "firstTimestamp": now(),
            "lastTimestamp": now()})
        return False

    async def _claim(self, name: str, template: dict[str, Any], directory: Path) -> None:
        """The pod's claim, made unless it exists; one made anew is a new, empty volume (the
        directory of a deleted one may still be there when its pod is replaced at once)."""
        assert self._session is not None
        self.claims[name] = directory
        async with self._session.post(self.api + self._path("persistentvolumeclaims"), json={
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": self.namespace,
                             "labels": template["metadata"].get("labels", {})},
                "spec": template["spec"], "status": {"phase": "Bound"}}) as r:
            if r.status >= 400 and r.status != 409:
                raise RuntimeError(f"POST claim {name}: {r.status} {await r.text()}")
            made = r.status < 300
        if made and directory.exists():
            shutil.rmtree(directory)

    def _stable(self, pod: str) -> tuple[str, int]:
        if pod not in self.stable:
            host = next_host()
            self.stable[pod] = (host, free_port(host))
            write_book(self.root, {p: f"{h}:{port}" for p, (h, port) in self.stable.items()}, REPLICATION_BOOK)
        return self.stable[pod]

    def _replication_address(self, dns_address: str) -> str:
        host, port = self._stable(self._pod_of_dns(dns_address))
        return f"{host}:{port}"

    async def _terminate(self, name: str, still_listed: bool) -> None:
        running = self.pods[name]
        if running.process is not None:
            await asyncio.to_thread(running.process.stop, running.grace)
        del self.pods[name]
        self._publish()
        if still_listed:
            await self._send("PATCH", self._path("pods", name), {"metadata": {"finalizers": None}},
                             "application/merge-patch+json")

    def _publish(self) -> None:
        """The address book the test side reads: pod -> its process's addresses."""
        write_book(self.root, {
            name: {"component": p.component, "host": p.process.host, "tcp_port": p.process.tcp_port,
                   "http_port": p.process.http_port, "pid": p.process.proc.pid if p.process.proc else None,
                   "https_port": getattr(p.process, "https_port", None)}
            for name, p in self.pods.items() if p.process is not None})

    async def _config_map(self, cluster: ClusterRef) -> dict[str, str]:
        configmap = await self._get(self._path("configmaps", f"{cluster.name}-nsq-config"))
        return dict(configmap["data"])

    async def _nsqd_config(self, cluster: ClusterRef, workdir: Path) -> Path:
        values = tomllib.loads((await self._config_map(cluster))[NSQD_CONFIG_FILE])
        values["nsqlookupd_tcp_addresses"] = [self.lookupd_tcp_for(a) for a in values.get("nsqlookupd_tcp_addresses", [])
                                              if self._pod_of_dns(a) in self.pods
                                              and self.pods[self._pod_of_dns(a)].process is not None]
        path = workdir / "nsqd.conf"
        path.write_text(toml.dumps(values))
        return path

    async def _lookupd_config(self, cluster: ClusterRef, workdir: Path) -> Path:
        path = workdir / "nsqlookupd.conf"
        path.write_text((await self._config_map(cluster))[LOOKUPD_CONFIG_FILE])
        return path

    @staticmethod
    def _pod_of_dns(address: str) -> str:
        return address.split(".", 1)[0].split(":", 1)[0]

    def lookupd_tcp_for(self, dns_address: str) -> str:
        return self.process(self._pod_of_dns(dns_address)).tcp_address

    # -- status ------------------------------------------------------------------------
    @staticmethod
    def _container_status(running: RunningPod, ready: bool) -> dict[str, Any]:
        process = running.process
        last: dict[str, Any] | None = None  # the run before, as a kubelet records it in lastState
        if process is None:
            state: dict[str, Any] = {"waiting": {"reason": "CrashLoopBackOff",
                                                 "message": "back-off restarting failed container"}}
            last = {"terminated": {"exitCode": 1, "reason": "Error"}}
        elif process.proc is None or process.proc.poll() is not None:
            code = None if process.proc is None else process.proc.returncode
            if code is not None and code < 0:
                code = 128 - code  # killed by a signal, as a container runtime reports it (SIGKILL: 137)
            if code == 0:  # nsqd's way out of a drain: the container completed
                state = {"terminated": {"exitCode": 0, "reason": "Completed"}}
            else:
                state = {"waiting": {"reason": "CrashLoopBackOff", "message": f"the container exited with {code}"}}
                if code is not None:
                    last = {"terminated": {"exitCode": code, "reason": "Error"}}
        else:
            state = {"running": {}}
        # the other states as nulls: a merge patch then removes them
        state = {kind: state.get(kind) for kind in ("waiting", "running", "terminated")}
        return {"conditions": [{"type": "ContainersReady", "status": "True" if ready else "False"}],
                "containerStatuses": [{"name": running.component, "image": running.image, "ready": ready,
                                       "restartCount": 0 if process is not None else 5, "state": state,
                                       "lastState": last}]}

    async def _probe(self, pod: dict[str, Any]) -> None:
        running = self.pods[pod["metadata"]["name"]]
        if time.monotonic() - running.probed_at < PROBE_PERIOD:
            return
        running.probed_at = time.monotonic()
        ready = False
        process = running.process
        if process is not None and process.proc is not None and process.proc.poll() is None:
            assert self._session is not None
            try:
                url = process.probe_url(running.probe_path) if isinstance(process, PodNsqd) else \
                    process.url(running.probe_path)
                async with self._session.get(url, timeout=aiohttp.ClientTimeout(total=1), ssl=PROBE_CONTEXT) as r:
                    ready = r.status == 200
            except (aiohttp.ClientError, asyncio.TimeoutError):
                ready = False
        wanted = self._container_status(running, ready)
        gates = [g["conditionType"] for g in pod.get("spec", {}).get("readinessGates", [])]
        pod_ready = ready and all(_condition(pod, g) for g in gates)
        have = pod.get("status", {})
        current = {c["type"]: c.get("status") for c in have.get("conditions", [])}
        for condition in wanted["conditions"]:
            if current.get(condition["type"]) != condition["status"]:
                condition["lastTransitionTime"] = now()
        wanted["conditions"].append({"type": "Ready", "status": "True" if pod_ready else "False"})
        if current.get("Ready") != wanted["conditions"][-1]["status"]:
            wanted["conditions"][-1]["lastTransitionTime"] = now()
        if (any(current.get(c["type"]) != c["status"] for c in wanted["conditions"])
                or _without_nulls(have.get("containerStatuses")) != _without_nulls(wanted["containerStatuses"])):
            await self._send("PATCH", self._path("pods", pod["metadata"]["name"]) + "/status", {"status": wanted},
                             "application/strategic-merge-patch+json")
