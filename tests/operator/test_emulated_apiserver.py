"""The emulated API server is no more forgiving than a real one where the operator's
tests lean on it: what the apiserver would refuse or silently drop is refused (and the
refusal fails the test that caused it), a stale resourceVersion conflicts, a write that
changes nothing is no write, and server-side apply keeps fields per manager."""
from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator

import aiohttp
import kmock
import pytest
import pytest_asyncio

from tests.apiserver_checks import ABSENT, tool
from tests.operator.admission import Admission, Backlog
from tests.operator.emulator import ADMIN, APPLY_PATCH, KubeEmulator
from tests.operator.harness import REJECTIONS, Backstage

NS = "emulated"
MERGE = "application/merge-patch+json"
CLUSTERS = f"/apis/nsq.dev/v1alpha1/namespaces/{NS}/nsqclusters"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"
STATEFULSETS = f"/apis/apps/v1/namespaces/{NS}/statefulsets"
needs_crdcheck = pytest.mark.skipif(tool() is None, reason=ABSENT)


class Api:
    def __init__(self, url: str, session: aiohttp.ClientSession, rejections: Path) -> None:
        self.url, self.session, self.rejections = url.rstrip("/"), session, rejections

    async def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                   **params: str) -> tuple[int, Any]:
        async with self.session.request(method, self.url + path, json=body, params=params,
                                        headers={"Content-Type": content_type}) as r:
            return r.status, await r.json(content_type=None)

    async def ok(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                 **params: str) -> Any:
        status, answer = await self.call(method, path, body, content_type, **params)
        assert status < 400, (method, path, status, answer)
        return answer

    async def apply(self, path: str, body: dict[str, Any], manager: str, force: bool = True) -> tuple[int, Any]:
        params = {"fieldManager": manager, **({"force": "true"} if force else {})}
        return await self.call("PATCH", path, body, APPLY_PATCH, **params)


@pytest_asyncio.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with KubeEmulator(rejections_file=tmp_path / REJECTIONS) as emulator, kmock.Server(emulator) as server:
        async with aiohttp.ClientSession() as session:
            yield Api(str(server.url), session, tmp_path / REJECTIONS)


def cluster(name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "nsq.dev/v1alpha1", "kind": "NsqCluster", "metadata": {"name": name, "namespace": NS},
            "spec": spec or {}}


def configmap(name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


@needs_crdcheck
async def test_a_wrong_status_patch_is_refused_and_recorded(api: Api) -> None:
    await api.ok("POST", CLUSTERS, cluster("wrong"))
    status, answer = await api.call("PATCH", f"{CLUSTERS}/wrong/status", {"status": {"nsqd": {"readyReplicas": "3"}}},
                                    MERGE)
    assert status == 422 and "status.nsqd.readyReplicas" in answer["message"], answer
    status, answer = await api.call("PATCH", f"{CLUSTERS}/wrong/status", {"status": {"rollout": {"stage": "x"}}},
                                    MERGE)
    assert status == 422 and 'unknown field "status.rollout.stage"' in answer["message"], answer
    assert len(api.rejections.read_text().splitlines()) == 2
    stored = await api.ok("GET", f"{CLUSTERS}/wrong")
    assert "status" not in stored


@needs_crdcheck
async def test_objects_are_defaulted_from_the_crd(api: Api) -> None:
    created = await api.ok("POST", CLUSTERS, cluster("plain"))
    assert created["spec"]["nsqd"]["replicas"] == 3
    assert created["spec"]["nsqd"]["options"]["msg-timeout"] == "60s"
    assert created["spec"]["nsqd"]["storage"]["size"] == "10Gi"


async def test_a_stale_resource_version_conflicts_and_a_no_op_is_no_write(api: Api) -> None:
    made = await api.ok("POST", CONFIGMAPS, configmap("rv", {"a": "1"}))
    version = made["metadata"]["resourceVersion"]
    moved = await api.ok("PATCH", f"{CONFIGMAPS}/rv", {"data": {"a": "2"}}, MERGE)
    assert moved["metadata"]["resourceVersion"] != version
    status, _ = await api.call("PATCH", f"{CONFIGMAPS}/rv", {"metadata": {"resourceVersion": version},
                                                            "data": {"a": "3"}}, MERGE)
    assert status == 409
    same = await api.ok("PATCH", f"{CONFIGMAPS}/rv", {"data": {"a": "2"}}, MERGE)
    assert same["metadata"]["resourceVersion"] == moved["metadata"]["resourceVersion"]


async def test_core_objects_outside_their_schema_are_refused(api: Api) -> None:
    status, answer = await api.call("POST", CONFIGMAPS, {**configmap("odd", {"a": "1"}), "date": {}})
    assert status == 422 and "date" in answer["message"]
    assert len(api.rejections.read_text().splitlines()) == 1


def statefulset(claim_size: str) -> dict[str, Any]:
    labels = {"app": "s"}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s", "namespace": NS},
            "spec": {"serviceName": "s", "replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                               "spec": {"accessModes": ["ReadWriteOnce"],
                                                        "resources": {"requests": {"storage": claim_size}}}}]}}


async def test_a_statefulsets_immutable_spec_is_refused(api: Api) -> None:
    assert (await api.apply(f"{STATEFULSETS}/s", statefulset("1Gi"), "me"))[0] < 400
    status, answer = await api.apply(f"{STATEFULSETS}/s", statefulset("2Gi"), "me")
    assert status == 422 and "volumeClaimTemplates" in answer["message"], answer
    api.rejections.unlink()
    grown = statefulset("1Gi")
    grown["spec"]["replicas"] = 2
    assert (await api.apply(f"{STATEFULSETS}/s", grown, "me"))[0] == 200


async def test_server_side_apply_keeps_fields_per_manager(api: Api) -> None:
    path = f"{CONFIGMAPS}/owned"
    status, created = await api.apply(path, configmap("owned", {"a": "1", "b": "2"}, {"mine": "x"}), "operator")
    assert status < 400 and created["data"] == {"a": "1", "b": "2"}  # created by the apply
    # another manager adds a label and changes a value of ours
    await api.ok("PATCH", path, {"metadata": {"labels": {"theirs": "y"}}, "data": {"b": "9"}}, MERGE,
                 fieldManager="kubectl-edit")
    # without force, applying our value of b again conflicts with the editor
    status, answer = await api.apply(path, configmap("owned", {"a": "1", "b": "2"}, {"mine": "x"}), "operator",
                                     force=False)
    assert status == 409 and "kubectl-edit" in answer["message"] and "data.b" in answer["message"]
    # forced, and without the field a, which we alone owned: a goes, their label stays
    status, applied = await api.apply(path, configmap("owned", {"b": "2"}, {}), "operator")
    assert status == 200
    assert applied["data"] == {"b": "2"}
    assert applied["metadata"]["labels"] == {"theirs": "y"}
    managers = {(e["manager"], e["operation"]) for e in applied["metadata"]["managedFields"]}
    assert managers == {("operator", "Apply"), ("kubectl-edit", "Update")}


async def test_untaken_refusals_fail_the_test_that_caused_them(tmp_path: Path) -> None:
    backstage = Backstage(tmp_path, NS).start()
    try:
        async with aiohttp.ClientSession(headers=ADMIN) as session:
            async with session.post(backstage.url + CONFIGMAPS, json={**configmap("odd", {}), "date": {}}) as r:
                assert r.status == 422
    finally:
        with pytest.raises(AssertionError, match="would have refused 1 write"):
            backstage.stop()


@needs_crdcheck
async def test_crdcheck_judges_what_was_written_in_batches() -> None:
    reported: list[str] = []
    backlog = Backlog(Admission(), reported.append)
    for name in ("one", "two"):
        backlog.add({**cluster(name), "spec": {"nsqd": {"replicaz": 3}}})
    await backlog.close()
    assert sorted(reported) == [f'crdcheck, after the write: NsqCluster {name}: unknown field "spec.nsqd.replicaz" '
                                f'(the apiserver drops it)' for name in ("one", "two")]
