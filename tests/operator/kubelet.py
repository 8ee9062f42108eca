"""A test kubelet: for every StatefulSet in the emulator it keeps Pod objects and, behind
each, a real nsqd or nsqlookupd process on its own loopback address (127.0.x.y).

A pod's container is "ready" once its process answers /ping; the pod is Ready once every
readiness gate condition is True too, as a real kubelet computes it. nsqd starts with
the cluster's ConfigMap as its config file (lookupd DNS names mapped to the test
processes) and broadcasts its pod DNS name, like in the cluster."""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from nsq_operator.builders import toml
from nsq_operator.constants import NSQD_CONFIG_FILE
from nsq_operator.models.cluster import ClusterRef
from tests.servers import Nsqd, Nsqlookupd, ServerProcess

_hosts = itertools.count(2)
ADDRESS_BOOK = "pods.json"


def next_host() -> str:
    n = next(_hosts)
    return f"127.0.{n // 250}.{n % 250 + 2}"


def _condition(pod: dict[str, Any], type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True" for c in pod.get("status", {}).get("conditions", []))


@dataclass
class RunningPod:
    name: str
    component: str
    process: ServerProcess


class FakeKubelet:
    def __init__(self, api_url: str, namespace: str, root: Path) -> None:
        self.api = api_url.rstrip("/")
        self.namespace = namespace
        self.root = root
        self.book = root / ADDRESS_BOOK
        self.pods: dict[str, RunningPod] = {}
        self.started: list[ServerProcess] = []  # every process ever launched, stopped at the end
        self._starting: set[asyncio.Future[Any]] = set()
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self.errors: list[BaseException] = []

    def process(self, pod: str) -> ServerProcess:
        return self.pods[pod].process

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
        # a launch still waiting for its process's /ping finishes first, so none is left behind
        await asyncio.gather(*self._starting, return_exceptions=True)
        await asyncio.gather(*(asyncio.to_thread(p.stop) for p in self.started))
        self.pods.clear()

    async def _launch(self, process: ServerProcess) -> None:
        self.started.append(process)
        future = asyncio.ensure_future(asyncio.to_thread(process.start))
        self._starting.add(future)
        future.add_done_callback(self._starting.discard)
        await asyncio.shield(future)

    async def _run(self) -> None:
        while True:
            try:
                await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # kept for the test to see; the loop goes on like a kubelet
                self.errors.append(e)
            await asyncio.sleep(0.1)  # a polling period, not a synchronisation

    # -- the API -----------------------------------------------------------------------
    async def _get(self, path: str) -> Any:
        assert self._session is not None
        async with self._session.get(self.api + path) as r:
            return await r.json() if r.status == 200 else None

    async def _send(self, method: str, path: str, body: Any, content_type: str = "application/json") -> None:
        assert self._session is not None
        async with self._session.request(method, self.api + path, json=body,
                                         headers={"Content-Type": content_type}) as r:
            if r.status >= 400 and r.status != 404:
                raise RuntimeError(f"{method} {path}: {r.status} {await r.text()}")

    def _pods_path(self, name: str | None = None) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods" + (f"/{name}" if name else "")

    # -- one pass ----------------------------------------------------------------------
    async def sync(self) -> None:
        sets = (await self._get(f"/apis/apps/v1/namespaces/{self.namespace}/statefulsets") or {}).get("items", [])
        pods = {p["metadata"]["name"]: p for p in (await self._get(self._pods_path()) or {}).get("items", [])}
        wanted: set[str] = set()
        # lookupd first: a starting nsqd is given the lookupds that exist
        for sts in sorted(sets, key=lambda s: s["metadata"]["labels"].get("app.kubernetes.io/component") != "nsqlookupd"):
            names = [f"{sts['metadata']['name']}-{i}" for i in range(int(sts["spec"].get("replicas", 0)))]
            wanted.update(names)
            missing = [n for n in names if n not in self.pods]
            await asyncio.gather(*(self._start_pod(sts, n) for n in missing))
        for name in [n for n in self.pods if n not in wanted]:
            running = self.pods.pop(name)
            self._publish()
            await asyncio.to_thread(running.process.stop)
            await self._send("DELETE", self._pods_path(name), None)
        for name, pod in pods.items():
            if name in self.pods:
                await self._update_ready(pod)

    async def _start_pod(self, sts: dict[str, Any], name: str) -> None:
        component = sts["metadata"]["labels"]["app.kubernetes.io/component"]
        cluster = ClusterRef(sts["metadata"]["labels"]["app.kubernetes.io/instance"], self.namespace)
        template = sts["spec"]["template"]
        args = [a.replace("$(POD_NAME)", name) for a in template["spec"]["containers"][0]["args"]]
        broadcast = next(a.split("=", 1)[1] for a in args if a.startswith("--broadcast-address="))
        workdir = self.root / name
        process: ServerProcess
        if component == "nsqd":
            config = await self._nsqd_config(cluster, workdir)
            process = Nsqd(workdir, {"config": str(config), "broadcast-address": broadcast}, host=next_host())
        else:
            process = Nsqlookupd(workdir, {"broadcast-address": broadcast}, host=next_host())
        await self._launch(process)
        self.pods[name] = RunningPod(name, component, process)
        self._publish()
        container = dict(template["spec"]["containers"][0], args=args)
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": self.namespace, "labels": dict(template["metadata"]["labels"]),
                            "annotations": dict(template["metadata"].get("annotations") or {})},
               "spec": {**template["spec"], "containers": [container], "hostname": name},
               "status": {"phase": "Running", "podIP": process.host, "conditions": [
                   {"type": "ContainersReady", "status": "True"},
                   {"type": "Ready", "status": "False"}]}}
        await self._send("POST", self._pods_path(), pod)

    def _publish(self) -> None:
        """The address book the test side reads: pod -> its process's addresses."""
        book = {name: {"component": p.component, "host": p.process.host, "tcp_port": p.process.tcp_port,
                       "http_port": p.process.http_port} for name, p in self.pods.items()}
        temporary = self.book.with_suffix(".tmp")
        temporary.write_text(json.dumps(book))
        os.replace(temporary, self.book)

    async def _nsqd_config(self, cluster: ClusterRef, workdir: Path) -> Path:
        configmap = await self._get(f"/api/v1/namespaces/{self.namespace}/configmaps/{cluster.name}-nsq-config")
        values = tomllib.loads(configmap["data"][NSQD_CONFIG_FILE])
        values["nsqlookupd_tcp_addresses"] = [self.lookupd_tcp_for(a) for a in values.get("nsqlookupd_tcp_addresses", [])
                                              if self._pod_of_dns(a) in self.pods]
        workdir.mkdir(parents=True, exist_ok=True)
        path = workdir / "nsqd.conf"
        path.write_text(toml.dumps(values))
        return path

    @staticmethod
    def _pod_of_dns(address: str) -> str:
        return re.split(r"[.:]", address, maxsplit=1)[0]

    def lookupd_tcp_for(self, dns_address: str) -> str:
        return self.process(self._pod_of_dns(dns_address)).tcp_address

    async def _update_ready(self, pod: dict[str, Any]) -> None:
        gates = [g["conditionType"] for g in pod.get("spec", {}).get("readinessGates", [])]
        ready = _condition(pod, "ContainersReady") and all(_condition(pod, g) for g in gates)
        if ready != _condition(pod, "Ready"):
            await self._send("PATCH", self._pods_path(pod["metadata"]["name"]) + "/status",
                             {"status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}},
                             "application/strategic-merge-patch+json")


class AddressBook:
    """The test side's view of the kubelet's address book (read afresh each time: it is
    tiny, and a cache keyed on file stamps can miss a rewrite within one clock tick)."""

    def __init__(self, root: Path) -> None:
        self.path = root / ADDRESS_BOOK

    def pods(self) -> dict[str, dict[str, Any]]:
        try:
            return dict(json.loads(self.path.read_text()))
        except FileNotFoundError:
            return {}

    def http(self, pod: str) -> str:
        entry = self.pods().get(pod)
        if entry is None:
            return "http://127.0.0.1:1"  # a pod without a process: nothing answers, as in a cluster
        return f"http://{entry['host']}:{entry['http_port']}"

    def tcp(self, pod: str) -> str | None:
        entry = self.pods().get(pod)
        return None if entry is None else f"{entry['host']}:{entry['tcp_port']}"


class KubeletEndpoints:
    """The operator's view of pod addresses in tests: the kubelet's processes."""

    def __init__(self, book: AddressBook) -> None:
        self.book = book

    def nsqd_http(self, cluster: ClusterRef, pod: str) -> str:
        return self.book.http(pod)

    def lookupd_http(self, cluster: ClusterRef, pod: str) -> str:
        return self.book.http(pod)

    def lookupd_tcp(self, cluster: ClusterRef, pod: str) -> str:
        # a lookupd not started yet keeps its DNS name: unreachable, as in a cluster before it runs
        return self.book.tcp(pod) or f"{pod}.{cluster.name}-lookupd.{cluster.namespace}.svc:4160"
