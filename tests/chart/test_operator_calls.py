"""The operator's real calls, not only the list read from its code: the operator runs
against KMock's emulator through a recording proxy (a cluster with topic and channel
created, made ready and deleted, the cluster's nsqds scaled down with the leaving claim
deleted, then rolled to new options), and every request it made must be allowed by the
RBAC of a default release of the chart."""
from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from tests.chart.operator_calls import CALLS
from tests.chart.rbac import Request, allowed, grants
from tests.chart.recorder import RecordingProxy, Seen
from tests.chart.render import NAMESPACE as RELEASE_NAMESPACE, Helm, one
from tests.operator.harness import Backstage, OperatorUnderTest
from tests.operator.rolling import events, pod, rolled, rollout

NAMESPACE = "nsq-rbac"
# readable by every authenticated user (the system:discovery and system:public-info-viewer roles)
PUBLIC_PATHS = ["/api", "/api/*", "/apis", "/apis/*", "/version", "/version/", "/healthz", "/livez", "/readyz"]
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def as_request(seen: Seen) -> Request | None:
    """The RBAC attributes of an API request; None for a non-resource (discovery) path."""
    parts = seen.path.strip("/").split("/")
    if parts[0] == "api" and len(parts) > 2:
        group, rest = "", parts[2:]
    elif parts[0] == "apis" and len(parts) > 3:
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = None
    if rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource = "/".join([rest[0], *rest[2:3]])
    named = len(rest) > 1
    if seen.method == "GET":
        verb = "get" if named else "watch" if seen.query.get("watch") in ("true", "1") else "list"
    elif seen.method == "DELETE":
        verb = "delete" if named else "deletecollection"
    else:
        verb = VERBS[seen.method]
    return Request(verb, group, resource, namespace)


async def scaled_down_to_one_nsqd(operator: OperatorUnderTest, cluster: str) -> None:
    """The scale-down is over: one nsqd left, the other's pod and claim gone."""
    async def done() -> bool:
        state = await rollout(operator, cluster)
        assert state.get("phase") == "Complete" and not state.get("error"), state
        sts = await operator.core(f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/{cluster}-nsqd")
        assert sts["spec"]["replicas"] == 1
        assert await pod(operator, f"{cluster}-nsqd-1") is None
        claim = f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims/data-{cluster}-nsqd-1"
        assert await operator.core(claim) is None
        return True
    await operator.until(done, 90, f"{cluster} scaled down to 1 nsqd")
    await operator.ready("NsqCluster", cluster, timeout=60)


def test_requests_map_to_rbac_attributes() -> None:
    assert as_request(Seen("GET", "/apis/nsq.dev/v1alpha1/nsqclusters", {"watch": "true"})) == \
        Request("watch", "nsq.dev", "nsqclusters", None)
    assert as_request(Seen("PATCH", "/api/v1/namespaces/a/pods/p-0/status", {})) == \
        Request("patch", "", "pods/status", "a")
    assert as_request(Seen("GET", "/api/v1/namespaces/a", {})) == Request("get", "", "namespaces", None)
    assert as_request(Seen("GET", "/api/v1/namespaces", {})) == Request("list", "", "namespaces", None)
    assert as_request(Seen("POST", "/apis/apps/v1/namespaces/a/statefulsets", {})) == \
        Request("create", "apps", "statefulsets", "a")
    assert as_request(Seen("GET", "/apis/nsq.dev/v1alpha1", {})) is None


@pytest.mark.asyncio
async def test_every_request_the_operator_makes_is_allowed_by_the_chart(helm: Helm, tmp_path: Path) -> None:
    objects = helm.template()
    granted = grants(objects, one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"],
                     RELEASE_NAMESPACE)
    backstage = Backstage(tmp_path, NAMESPACE).start()
    proxy = RecordingProxy(backstage.url)
    operator: OperatorUnderTest | None = None
    try:
        proxy.start()
        # the test's own calls go straight to the emulator, the operator's through the proxy
        operator = OperatorUnderTest(backstage, NAMESPACE, via=proxy.url)
        await operator.start()
        delete = {"deletionPolicy": "Delete"}
        await operator.create("NsqTopic", "events", {"cluster": "rbac", **delete})  # before its cluster exists
        await operator.create("NsqCluster", "rbac", {"nsqd": {"replicas": 2, "storage": {"whenScaled": "Delete"}},
                                                     "lookupd": {"replicas": 1}, "drainTimeoutSeconds": 2})
        await operator.create("NsqChannel", "events-audit", {"cluster": "rbac", "topic": "events",
                                                             "channelName": "audit", **delete})
        # the refused-spec path (a bound the schema cannot say: the apiserver admits it)
        await operator.create("NsqCluster", "broken", {"nsqd": {"options": {"msg-timeout": "0s"}}})
        for kind, name in [("NsqCluster", "rbac"), ("NsqTopic", "events"), ("NsqChannel", "events-audit")]:
            await operator.ready(kind, name, timeout=60)
        for kind, name in [("NsqChannel", "events-audit"), ("NsqTopic", "events")]:
            await operator.delete(kind, name)

            async def gone(kind: str = kind, name: str = name) -> bool:
                return await operator.get(kind, name) is None
            await operator.until(gone, 40, f"{kind} {name} deleted past its finalizer")
        # the roller: a scale-down (handoff, lower the StatefulSet's replicas, delete the
        # leaving pod's claim), then a rolling upgrade of the nsqd left (drain, evict the
        # pod, Events); one pod to roll keeps the test short
        assert await operator.core(f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims/data-rbac-nsqd-1")
        await operator.patch("NsqCluster", "rbac", {"spec": {"nsqd": {"replicas": 1}}})
        await scaled_down_to_one_nsqd(operator, "rbac")
        await operator.patch("NsqCluster", "rbac", {"spec": {"nsqd": {"options": {"max-rdy-count": 55}}}})
        await rolled(operator, "rbac", ["rbac-nsqd-0"])
        # kopf posts events of its own; these are the roller's, posted through the proxy too
        assert await events(operator, "rbac", "ScaleDown") and await events(operator, "rbac", "ConfigChange")
    finally:
        if operator is not None:
            await operator.stop()
        proxy.stop()
        backstage.stop()

    made = {r for r in map(as_request, proxy.seen) if r is not None}
    public = {s.path for s in proxy.seen if as_request(s) is None}
    assert [p for p in public if not any(fnmatch.fnmatch(p, pattern) for pattern in PUBLIC_PATHS)] == []
    assert sorted(str(r) for r in made if not allowed(granted, r)) == []
    # the scenario reached the operator's main paths, so the check above covered them
    listed = {(c.verb, c.group, c.resource) for c in CALLS}
    exercised = {(r.verb, r.group, r.resource) for r in made}
    # (an apply that makes an object is a patch on the wire; the apiserver checks create too)
    for expected in [("watch", "nsq.dev", "nsqclusters"), ("patch", "nsq.dev", "nsqtopics/status"),
                     ("patch", "", "configmaps"), ("list", "", "pods"), ("patch", "", "pods/status"),
                     ("get", "nsq.dev", "nsqclusters"), ("patch", "nsq.dev", "nsqchannels"),
                     ("create", "", "pods/eviction"), ("delete", "", "persistentvolumeclaims"),
                     ("patch", "apps", "statefulsets"), ("create", "", "events")]:
        assert expected in exercised
    assert exercised <= listed, f"calls missing from operator_calls.CALLS: {sorted(exercised - listed)}"
