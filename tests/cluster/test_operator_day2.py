"""Issue 32's day two on the real cluster, with the operator installed as users install it
(CRDs applied server-side, `helm install` into a namespace of its own, under a release name
of its own, scoped by the chart's `watchNamespaces` to this module's namespaces so it never
touches another engineer's NsqClusters):

- Pod Security "restricted" admits every pod of an NsqCluster (nsqd, nsqlookupd, nsqadmin);
- a larger spec.nsqd.storage.size reaches every claim's status.capacity, and a class that
  cannot grow says Degraded StorageResizeFailed with the apiserver's 403 while the rest works;
- an image that cannot be pulled and a container that exits make the cluster Degraded;
- nsqadmin answers through its Service's DNS name from a pod and lists the nsqds;
- `helm upgrade` and `helm uninstall` leave nothing Terminating;
- the longest NsqCluster name (builders/limits.py) works, one more character is refused;
- a bound token of 600 s rotates under the running operator, which keeps working;
- the NsqCluster's NetworkPolicy, enforced by kube-router, lets in the operator (installed
  outside nsq-system, under a release name of its own) and the named clients, no one else;
  quantities the apiserver stores canonical cause no write on later passes; a policy the
  spec drops while the StatefulSet controller rewrites status is still pruned;
- a deleted watched namespace leaves no timer running for its NsqClusters;
- the idle operator sends nothing: its watches last 10 minutes each.

The operator's requests are counted by the apiserver under a FlowSchema matching its
ServiceAccount alone (apiserver_flowcontrol_dispatched_requests_total), so other tests'
and engineers' requests on the shared cluster are not counted (run with -s to see them);
the cluster's audit log names them when a count fails (tests/cluster/audit.py).

The token's renewal takes eight minutes: the operator's Deployment gets its 600 s token
before the first test (the module's operator fixture) and the last test checks it.

Another operator installed cluster-wide (test_operator_on_cluster.py's) also sees this
module's NsqClusters while it runs: every cluster here names its image, so both would
write the same objects; what is proven of *this* operator (the token) is read from its
own log."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterator

import pytest

from nsq_operator.builders.limits import MAX_CLUSTER_NAME
from tests.chart.helm import helm_binary
from tests.cluster import audit, nsq_exec
from tests.cluster.kube import (REPO, Kube, KubectlError, connection_outcomes, connector_pod, namespace_snapshot, pod,
                                project_image, restricted_container, wait_until)

pytestmark = pytest.mark.real_cluster
RELEASE = "day2"
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}
TOKEN_SECONDS = 600  # the least expirationSeconds the apiserver allows
SMALL = {"requests": {"cpu": "10m", "memory": "32Mi"}}
# one namespace per test, made before the operator is installed (its RoleBindings go there)
APP_NAMESPACES = ("restricted", "storage", "crash", "names", "gone", "token", "policy", "replication")
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
IDLE_WINDOW = 90  # seconds
IDLE_REQUESTS_PER_MINUTE = 4  # none is needed: no object to run, and every watch lasts 10 minutes


def fullname(release: str) -> str:
    return f"{release}-nsq-operator"


def install(kube: Kube, release: str, namespace: str, watched: list[str], *extra: str) -> None:
    kube.helm("install", release, str(REPO / "charts/nsq-operator"), "--namespace", namespace,
         "--set-json", f"watchNamespaces={json.dumps(watched)}",
         "--set", "logLevel=info", "--set", "intervals.status=5", "--set", "intervals.drift=10",
         *extra, "--wait", "--timeout", "5m")


def nsq_cluster(name: str, namespace: str, *, nsqd: int = 1, admin: bool = False, image: str | None = None,
                storage: dict[str, Any] | None = None, nsqd_template: dict[str, Any] | None = None) -> dict[str, Any]:
    """A small NsqCluster (one nsqlookupd, small requests: the node has two cores and is shared).
    It names its image, so a cluster-wide operator of another release writes the same objects."""
    spec: dict[str, Any] = {
        "image": image or project_image(),
        "drainTimeoutSeconds": 5,
        "nsqd": {"replicas": nsqd, "resources": SMALL, "storage": {"size": "1Gi", **(storage or {})}},
        "lookupd": {"replicas": 1, "resources": SMALL},
        "admin": {"enabled": admin, "resources": SMALL},
    }
    if nsqd_template:
        spec["nsqd"]["podTemplate"] = nsqd_template
    return {"apiVersion": "nsq.dev/v1alpha1", "kind": "NsqCluster", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


def nsq_topic(name: str, namespace: str, cluster: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "nsq.dev/v1alpha1", "kind": "NsqTopic", "metadata": {"name": name, "namespace": namespace},
            "spec": {"cluster": cluster, **spec}}


def condition(kube: Kube, kind: str, name: str, namespace: str, type_: str) -> dict[str, Any] | None:
    conditions = (kube.get(kind, name, namespace).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), None)


def is_true(kube: Kube, kind: str, name: str, namespace: str, type_: str, reason: str | None = None
            ) -> dict[str, Any] | None:
    found = condition(kube, kind, name, namespace, type_)
    if found and found["status"] == "True" and (reason is None or found["reason"] == reason):
        return found
    return None


def cluster_ready(kube: Kube, name: str, namespace: str, timeout: float = 300,
                  operator_namespace: str | None = None) -> dict[str, Any]:
    return wait_until(f"NsqCluster {namespace}/{name} to be Ready",
                      lambda: is_true(kube, "nsqcluster", name, namespace, "Ready"), timeout=timeout, every=2,
                      explain=lambda: namespace_snapshot(kube, namespace, operator_namespace))


def pods_of(kube: Kube, namespace: str, instance: str) -> list[dict[str, Any]]:
    return kube.items("pods", namespace, "-l", f"app.kubernetes.io/instance={instance}")


def ready(pod_: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod_.get("status", {}).get("conditions", []))


def nsqd_topics(kube: Kube, namespace: str, pod_name: str) -> list[str]:
    script = ("import json, urllib.request as r\n"
              "print(json.dumps([t['topic_name'] for t in json.load(r.urlopen("
              "'http://127.0.0.1:4151/stats?format=json'))['topics']]))")
    return json.loads(kube.run("exec", pod_name, "-n", namespace, "-c", "nsqd", "--", "python3", "-c", script))


def terminating(kube: Kube, namespace: str | None = None) -> list[str]:
    """Every object (of the kinds that can be listed) carrying a deletionTimestamp."""
    scope = ["--namespaced=true"] if namespace else ["--namespaced=false"]
    kinds = [k for k in kube.run("api-resources", "--verbs=list", *scope, "-o", "name").split()
             if k not in ("events", "events.events.k8s.io", "componentstatuses")]
    args = ["get", ",".join(kinds), "-o", "json", "--ignore-not-found"] + (["-n", namespace] if namespace else [])
    listed = json.loads(kube.run(*args) or '{"items": []}')
    return [f"{item['kind']}/{item['metadata']['name']} finalizers={item['metadata'].get('finalizers')}"
            for item in listed.get("items", []) if item["metadata"].get("deletionTimestamp")]


def token_claims(kube: Kube, namespace: str, pod_name: str) -> dict[str, Any]:
    token = kube.run("exec", pod_name, "-n", namespace, "--", "cat", f"{SERVICE_ACCOUNT_DIR}/token")
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def errors(log: str) -> list[str]:
    """The log's ERROR records (a record: a line with a timestamp and the lines that follow it)."""
    records = re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ )", log)
    return [r for r in records if " ERROR " in r.split("\n", 1)[0] or "Traceback" in r]


def flow_dispatched(kube: Kube, flow_schema: str) -> float:
    """Requests the apiserver dispatched under the FlowSchema (API Priority and Fairness),
    which matches the operator's ServiceAccount alone."""
    metrics = kube.run("get", "--raw", "/metrics")
    pattern = re.compile(r'^apiserver_flowcontrol_dispatched_requests_total\{([^}]*)\} ([0-9.e+]+)$')
    return sum(float(m.group(2)) for line in metrics.splitlines()
               if (m := pattern.match(line)) and f'flow_schema="{flow_schema}"' in m.group(1))


def apiserver_requests(kube: Kube) -> float:
    metrics = kube.run("get", "--raw", "/metrics")
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith("apiserver_request_total{"))


@dataclass
class Operator:
    namespace: str
    apps: dict[str, str]
    pod: str
    first_token: dict[str, Any]
    flow_schema: str

    def log(self, kube: Kube) -> str:
        return kube.run("logs", "-n", self.namespace, self.pod, "--tail", "-1", check=False)


def flow_schema(name: str, service_account: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": name},
            "spec": {"matchingPrecedence": 200, "priorityLevelConfiguration": {"name": "workload-low"},
                     "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {
                         "name": service_account, "namespace": namespace}}],
                         "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                            "clusterScope": True, "namespaces": ["*"]}],
                         "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}


def token_patch() -> dict[str, Any]:
    """The service-account token as the kubelet projects it by default, but expiring in 600 s."""
    volume = {"name": "kube-api-access-600", "projected": {"defaultMode": 0o444, "sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}}
    mount = {"name": "kube-api-access-600", "mountPath": SERVICE_ACCOUNT_DIR, "readOnly": True}
    return {"spec": {"template": {"spec": {"automountServiceAccountToken": False, "volumes": [volume],
                                           "containers": [{"name": "operator", "volumeMounts": [mount]}]}}}}


@pytest.fixture(scope="module")
def operator(kube: Kube) -> Iterator[Operator]:
    kube.run("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    for crd in ("nsqclusters", "nsqtopics", "nsqchannels"):
        kube.run("wait", "--for", "condition=Established", "--timeout", "60s", f"crd/{crd}.nsq.dev")
    namespace = kube.namespace("day2-ops")
    apps = {key: kube.namespace(f"day2-{key}", RESTRICTED) for key in APP_NAMESPACES}
    schema = f"nsq-day2-{namespace.rsplit('-', 1)[1]}"
    kube.apply(flow_schema(schema, fullname(RELEASE), namespace))
    try:
        install(kube, RELEASE, namespace, list(apps.values()))
        # The chart has no setting for the token's lifetime: the pod gets a projected token
        # of 600 s in place of the automounted one (3607 s).
        deployment = fullname(RELEASE)
        kube.run("patch", "deployment", deployment, "-n", namespace, "--type=strategic", "-p", json.dumps(token_patch()))
        kube.run("rollout", "status", f"deployment/{deployment}", "-n", namespace, "--timeout", "180s", timeout=200)
        pod_name = wait_until("one operator pod, with the 600 s token", lambda: (
            len(pods := [p for p in kube.items("pods", namespace) if not p["metadata"].get("deletionTimestamp")]) == 1
            and not pods[0]["spec"].get("automountServiceAccountToken", True) and ready(pods[0])
            and pods[0]["metadata"]["name"]), timeout=120)
        first = token_claims(kube, namespace, pod_name)
        yield Operator(namespace, apps, pod_name, first, schema)
    finally:
        for app in apps.values():
            kube.run("delete", "nsqclusters,nsqtopics,nsqchannels", "--all", "-n", app, "--wait=false", check=False)
        subprocess.run([helm_binary(), "uninstall", RELEASE, "--namespace", namespace, "--wait", "--timeout", "3m"],
                       env={**os.environ, "KUBECONFIG": str(kube.kubeconfig)}, capture_output=True, timeout=240)
        kube.run("delete", "flowschema", schema, "--wait=false", check=False)
        for app in [namespace, *apps.values()]:
            kube.run("delete", "namespace", app, "--wait=false", check=False)


@pytest.fixture(autouse=True, scope="module")
def _operator_with_a_short_token_first(operator: Operator) -> None:
    """The operator (and its 600 s token) starts before the first test: renewal takes eight minutes."""


def app_namespace(kube: Kube, operator: Operator, key: str) -> Iterator[str]:
    namespace = operator.apps[key]
    yield namespace
    kube.run("delete", "nsqclusters,nsqtopics,nsqchannels", "--all", "-n", namespace, "--wait=false", check=False)
    kube.run("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.fixture
def restricted(kube: Kube, operator: Operator) -> Iterator[str]:
    yield from app_namespace(kube, operator, "restricted")


@pytest.fixture
def storage_namespace(kube: Kube, operator: Operator) -> Iterator[str]:
    yield from app_namespace(kube, operator, "storage")


@pytest.fixture
def crash_namespace(kube: Kube, operator: Operator) -> Iterator[str]:
    yield from app_namespace(kube, operator, "crash")


@pytest.fixture
def names_namespace(kube: Kube, operator: Operator) -> Iterator[str]:
    yield from app_namespace(kube, operator, "names")


@pytest.fixture
def policy_namespace(kube: Kube, operator: Operator) -> Iterator[str]:
    yield from app_namespace(kube, operator, "policy")


@pytest.fixture
def replication_namespace(kube: Kube, operator: Operator) -> Iterator[str]:
    yield from app_namespace(kube, operator, "replication")


def test_the_idle_operator_s_requests_per_minute(kube: Kube, operator: Operator) -> None:
    """Counted by the apiserver itself: a FlowSchema matching the operator's ServiceAccount
    alone, so the other tests' and engineers' requests are not counted; on failure the audit
    log says which requests they were. The window is longer than kopf's own 70 s watch
    inactivity timeout, which reopened every watch of a kind whose objects no one changed."""
    wait_until("the operator's requests to be counted under its FlowSchema",
               lambda: flow_dispatched(kube, operator.flow_schema) > 0, timeout=60)
    # its start (a LIST and a WATCH per resource and namespace, 8 namespaces) must be over,
    # on a loaded machine too, where kopf may open its watches in bursts seconds apart:
    # settled once 20 s pass with 2 requests at most
    samples = [flow_dispatched(kube, operator.flow_schema)]

    def settled() -> bool:
        samples.append(flow_dispatched(kube, operator.flow_schema))
        return len(samples) >= 3 and samples[-1] - samples[-3] <= 2
    wait_until("the operator to settle after its start", settled, timeout=240, every=10)
    began, began_at = time.monotonic(), audit.now()  # before the counters: the audit sees what they count
    start, total_start = flow_dispatched(kube, operator.flow_schema), apiserver_requests(kube)
    wait_until("the window to pass", lambda: time.monotonic() - began >= IDLE_WINDOW, timeout=IDLE_WINDOW + 30,
               every=1)
    took = time.monotonic() - began
    per_minute = (flow_dispatched(kube, operator.flow_schema) - start) * 60 / took
    everyone = (apiserver_requests(kube) - total_start) * 60 / took
    sent = audit.requests_of(audit.service_account_user(operator.namespace, fullname(RELEASE)), began_at, audit.now())
    print(f"idle operator (no NsqCluster in its {len(operator.apps)} namespaces): {per_minute:.1f} requests/min "
          f"(apiserver_flowcontrol_dispatched_requests_total, FlowSchema {operator.flow_schema}); "
          f"the whole apiserver: {everyone:.1f} requests/min (apiserver_request_total); "
          f"the operator's, audited: {audit.summary(sent)}")
    assert per_minute < IDLE_REQUESTS_PER_MINUTE, f"{per_minute:.1f}/min: {audit.summary(sent)}"


@pytest.mark.timeout(600)
def test_restricted_namespace_admits_every_pod_and_nsqadmin_answers_through_its_service(kube: Kube, operator: Operator, restricted: str) -> None:
    assert kube.get("namespace", restricted)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    kube.apply(nsq_cluster("nsq", restricted, nsqd=2, admin=True))
    cluster_ready(kube, "nsq", restricted, operator_namespace=operator.namespace)
    pods = wait_until("nsqd, nsqlookupd and nsqadmin pods ready", lambda: (
        (found := pods_of(kube, restricted, "nsq")) and all(ready(p) for p in found)
        and {p["metadata"]["labels"].get("app.kubernetes.io/component") for p in found} >= {"nsqd", "nsqlookupd", "nsqadmin"}
        and found), timeout=240, every=2)
    assert sorted(p["metadata"]["labels"]["app.kubernetes.io/component"] for p in pods) == \
        ["nsqadmin", "nsqd", "nsqd", "nsqlookupd"]
    for p in pods:
        for container in p["spec"]["containers"]:
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    events = json.loads(kube.run("get", "events", "-n", restricted, "-o", "json"))["items"]
    assert [e["message"] for e in events if e.get("reason") == "FailedCreate"] == []
    assert is_true(kube, "nsqcluster", "nsq", restricted, "Degraded") is None

    # nsqadmin through its Service, by DNS name, from a pod of the namespace
    service = kube.get("service", "nsq-nsqadmin", restricted)
    port = service["spec"]["ports"][0]["port"]
    nsqds = sorted(p["metadata"]["name"] for p in pods if p["metadata"]["labels"]["app.kubernetes.io/component"] == "nsqd")
    script = ("import json, socket, urllib.request as r\n"
              f"host = 'nsq-nsqadmin.{restricted}.svc.cluster.local'\n"
              "print(json.dumps({'ip': socket.gethostbyname(host),\n"
              f"  'page': r.urlopen(f'http://{{host}}:{port}/').status,\n"
              f"  'nodes': json.load(r.urlopen(f'http://{{host}}:{port}/api/nodes'))}}))\n")
    kube.apply(pod("browser", restricted, [restricted_container("browser", project_image(), ["python3", "-c", script])],
                   restartPolicy="OnFailure"))
    wait_until("the browser pod to finish",
               lambda: kube.get("pod", "browser", restricted)["status"].get("phase") == "Succeeded", timeout=180, every=2)
    seen = json.loads(kube.run("logs", "browser", "-n", restricted).strip().splitlines()[-1])
    assert seen["ip"] == service["spec"]["clusterIP"]
    assert seen["page"] == 200
    listed = sorted(node["broadcast_address"] for node in seen["nodes"]["nodes"] or [])
    assert len(listed) == 2 and all(any(a.split(".")[0] == n for a in listed) for n in nsqds), seen["nodes"]

    # the operator's requests with this one small cluster (2 nsqd, 1 nsqlookupd, nsqadmin) idle
    start, began = flow_dispatched(kube, operator.flow_schema), time.monotonic()
    wait_until("a minute to pass", lambda: time.monotonic() - began >= 60, timeout=90, every=1)
    per_minute = (flow_dispatched(kube, operator.flow_schema) - start) * 60 / (time.monotonic() - began)
    print(f"operator with one idle NsqCluster (status every 5 s, drift every 10 s): {per_minute:.1f} requests/min")


def claims(kube: Kube, namespace: str, cluster: str) -> list[dict[str, Any]]:
    return [c for c in kube.items("pvc", namespace) if c["metadata"]["name"].startswith(f"data-{cluster}-nsqd-")]


@pytest.mark.timeout(600)
def test_storage_growth_reaches_the_claims_and_a_fixed_class_says_why_not(
        kube: Kube, operator: Operator, storage_namespace: str) -> None:
    ns = storage_namespace
    kube.apply([nsq_cluster("grows", ns, nsqd=2), nsq_cluster("fixed", ns, storage={"storageClassName": "nsq-fixed"})])
    cluster_ready(kube, "grows", ns, operator_namespace=operator.namespace)
    cluster_ready(kube, "fixed", ns, operator_namespace=operator.namespace)
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_of(kube, ns, "grows")}
    assert [c["status"]["capacity"]["storage"] for c in claims(kube, ns, "grows")] == ["1Gi", "1Gi"]

    patch = json.dumps({"spec": {"nsqd": {"storage": {"size": "2Gi"}}}})
    kube.run("patch", "nsqcluster", "grows", "-n", ns, "--type=merge", "-p", patch)
    kube.run("patch", "nsqcluster", "fixed", "-n", ns, "--type=merge", "-p", patch)

    grown = wait_until("every claim of grows to have 2Gi", lambda: (
        len(found := claims(kube, ns, "grows")) == 2
        and all((c.get("status") or {}).get("capacity", {}).get("storage") == "2Gi" for c in found) and found),
        timeout=240, every=2)
    assert all(c["spec"]["resources"]["requests"]["storage"] == "2Gi" for c in grown)
    statefulset = wait_until("the StatefulSet made anew with 2Gi claims", lambda: (
        (s := kube.get_or_none("statefulset", "grows-nsqd", ns))
        and s["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "2Gi" and s),
        timeout=180, every=2)
    assert statefulset["spec"]["replicas"] == 2
    cluster_ready(kube, "grows", ns, operator_namespace=operator.namespace)
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_of(kube, ns, "grows")}
    assert after == before  # the pods were kept through the StatefulSet's replacement

    degraded = wait_until("fixed to say Degraded StorageResizeFailed", lambda: is_true(
        kube, "nsqcluster", "fixed", ns, "Degraded", "StorageResizeFailed"), timeout=180, every=2)
    print("fixed:", degraded["message"])
    assert "data-fixed-nsqd-0" in degraded["message"]
    assert "forbidden" in degraded["message"].lower() and "resize" in degraded["message"]
    # the rest keeps working: the claim, the StatefulSet and the nsqd are as they were, and
    # a topic declared now is made on the nsqd
    assert [c["status"]["capacity"]["storage"] for c in claims(kube, ns, "fixed")] == ["1Gi"]
    assert kube.get("statefulset", "fixed-nsqd", ns)["spec"]["volumeClaimTemplates"][0]["spec"]["resources"][
        "requests"]["storage"] == "1Gi"
    assert all(ready(p) for p in pods_of(kube, ns, "fixed"))
    kube.apply(nsq_topic("still-works", ns, "fixed"))
    wait_until("the topic to be made on fixed's nsqd", lambda: "still-works" in nsqd_topics(kube, ns, "fixed-nsqd-0"),
               timeout=120, every=2)
    assert is_true(kube, "nsqcluster", "fixed", ns, "Degraded", "StorageResizeFailed")


@pytest.mark.timeout(600)
def test_a_container_that_cannot_run_makes_the_cluster_degraded(kube: Kube, operator: Operator,
                                                                crash_namespace: str) -> None:
    ns = crash_namespace
    kube.apply([
        nsq_cluster("unpullable", ns, image="localhost/nsq-operator:no-such-tag"),
        nsq_cluster("exits", ns, nsqd_template={"spec": {"containers": [{"name": "nsqd", "command": ["false"]}]}}),
    ])
    pulled = wait_until("unpullable to say Degraded ImagePullBackOff", lambda: (
        (c := is_true(kube, "nsqcluster", "unpullable", ns, "Degraded"))
        and c["reason"] in ("ImagePullBackOff", "ErrImagePull") and c), timeout=240, every=2)
    print("unpullable:", pulled["reason"], pulled["message"])
    assert "cannot run" in pulled["message"]
    assert is_true(kube, "nsqcluster", "unpullable", ns, "Ready") is None

    crashed = wait_until("exits to say Degraded CrashLoopBackOff", lambda: is_true(
        kube, "nsqcluster", "exits", ns, "Degraded", "CrashLoopBackOff"), timeout=300, every=2)
    print("exits:", crashed["message"])
    assert "exits-nsqd-0" in crashed["message"]
    nsqd = next(s for s in kube.get("pod", "exits-nsqd-0", ns)["status"]["containerStatuses"] if s["name"] == "nsqd")
    assert nsqd["restartCount"] >= 1 and nsqd["lastState"]["terminated"]["exitCode"] == 1
    # the rest of that cluster runs: its nsqlookupd is ready
    assert all(ready(p) for p in kube.items("pods", ns, "-l", "app.kubernetes.io/instance=exits,"
                                                               "app.kubernetes.io/component=nsqlookupd"))


@pytest.mark.timeout(600)
def test_the_longest_cluster_name_works_and_one_more_character_is_refused(
        kube: Kube, operator: Operator, names_namespace: str) -> None:
    ns = names_namespace
    longest = ("n" + uuid.uuid4().hex * 2)[:MAX_CLUSTER_NAME]
    assert len(longest) == MAX_CLUSTER_NAME == 44
    with pytest.raises(KubectlError) as refused:
        kube.apply(nsq_cluster(longest + "x", ns))
    print(refused.value.stderr.strip())
    assert "Invalid value" in refused.value.stderr
    assert f"metadata.name may have at most {MAX_CLUSTER_NAME} characters" in refused.value.stderr
    assert kube.get_or_none("nsqcluster", longest + "x", ns) is None

    kube.apply(nsq_cluster(longest, ns, admin=True))
    cluster_ready(kube, longest, ns, operator_namespace=operator.namespace)
    names = {(o["kind"], o["metadata"]["name"]) for kind in ("statefulsets", "services", "deployments")
             for o in kube.items(kind, ns)}
    assert {("StatefulSet", f"{longest}-nsqd"), ("StatefulSet", f"{longest}-lookupd"),
            ("Service", f"{longest}-nsqd-headless"), ("Deployment", f"{longest}-nsqadmin")} <= names
    pods = pods_of(kube, ns, longest)
    assert len(pods) == 3 and all(ready(p) for p in pods)
    assert all(len(p["metadata"]["labels"]["controller-revision-hash"]) <= 63
               for p in pods if "controller-revision-hash" in p["metadata"]["labels"])
    assert [e["message"] for e in json.loads(kube.run("get", "events", "-n", ns, "-o", "json"))["items"]
            if e.get("type") == "Warning" and e.get("reason") in ("FailedCreate", "FailedApply")] == []


@pytest.mark.timeout(600)
def test_the_network_policy_admits_the_operator_and_named_clients_and_keeps_others_out(
        kube: Kube, operator: Operator, policy_namespace: str) -> None:
    """Defect 5 on a cluster that enforces NetworkPolicies, with defects 3 and 4 on the same
    cluster: its quantities are written as the apiserver does not store them (1024Mi for
    1Gi, 0.25Gi for 256Mi), and the policy is dropped in the same change as a scale-up."""
    ns = policy_namespace
    assert operator.namespace != "nsq-system" and RELEASE != "nsq-operator"
    guarded = nsq_cluster("guarded", ns, nsqd=2, storage={"size": "1024Mi"})
    guarded["spec"]["nsqd"]["resources"] = {"requests": {"cpu": "10m", "memory": "32Mi"},
                                            "limits": {"memory": "0.25Gi"}}
    guarded["spec"]["networkPolicy"] = {"enabled": True, "clientLabels": {"nsq-client": "yes"}}
    kube.apply(guarded)
    cluster_ready(kube, "guarded", ns, operator_namespace=operator.namespace)
    policy = kube.get("networkpolicy", "guarded-nsqd", ns)
    assert policy["spec"]["policyTypes"] == ["Ingress"]

    # the operator reaches every nsqd's HTTP API through the policy: it makes the topic there
    kube.apply(nsq_topic("orders", ns, "guarded"))
    for nsqd in ("guarded-nsqd-0", "guarded-nsqd-1"):
        wait_until(f"the topic on {nsqd}", lambda: "orders" in nsqd_topics(kube, ns, nsqd), timeout=120, every=2)
    wait_until("NsqTopic orders Ready", lambda: is_true(kube, "nsqtopic", "orders", ns, "Ready"), timeout=120, every=2,
               explain=lambda: namespace_snapshot(kube, ns, operator.namespace)
               + "\n" + json.dumps(kube.get("nsqtopic", "orders", ns).get("status")))

    # through the address status.listeners gives, a client pod with the named labels
    # connects to nsqd's TCP port; one without them does not
    listeners = {entry["name"]: entry["address"] for entry in kube.get("nsqcluster", "guarded", ns)["status"]["listeners"]}
    assert listeners["nsqd-tcp"] == f"guarded-nsqd.{ns}.svc:4150"
    host, port = listeners["nsqd-tcp"].rsplit(":", 1)
    kube.apply([connector_pod("client", ns, {"nsq-client": "yes"}, host, int(port)),
                connector_pod("stranger", ns, {"nsq-client": "no"}, host, int(port))])
    client, stranger = connection_outcomes(kube, "client", ns), connection_outcomes(kube, "stranger", ns)
    assert client[-5:] == ["connected"] * 5, client
    assert "connected" not in stranger, stranger

    # canonical quantities: three drift passes (10 s each) write nothing to the StatefulSet
    statefulset = kube.get("statefulset", "guarded-nsqd", ns)
    template = statefulset["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert template["limits"]["memory"] == "256Mi"
    assert statefulset["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    began = time.monotonic()
    wait_until("three drift passes", lambda: time.monotonic() - began >= 35, timeout=60, every=1)
    after = kube.get("statefulset", "guarded-nsqd", ns)
    assert after["metadata"]["generation"] == statefulset["metadata"]["generation"]
    assert [c for c in kube.get("nsqcluster", "guarded", ns)["status"]["conditions"]
            if c.get("reason") == "ChangeNotApplied"] == []

    # the policy dropped in the change that scales up: pruned although the StatefulSet
    # controller rewrites the StatefulSet's status (its resourceVersion) while pods start
    kube.run("patch", "nsqcluster", "guarded", "-n", ns, "--type=merge", "-p",
             json.dumps({"spec": {"networkPolicy": {"enabled": False}, "nsqd": {"replicas": 3}}}))
    wait_until("the NetworkPolicy pruned", lambda: kube.get_or_none("networkpolicy", "guarded-nsqd", ns) is None,
               timeout=180, every=2)
    wait_until("three nsqds ready", lambda: kube.get("statefulset", "guarded-nsqd", ns)
               .get("status", {}).get("readyReplicas") == 3, timeout=240, every=2)
    cluster_ready(kube, "guarded", ns, operator_namespace=operator.namespace)

    # deleted the usual way, its timers end with it: no pass after it is gone logs an error
    deleted = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kube.run("delete", "nsqtopic,nsqcluster", "--all", "-n", ns, "--timeout", "180s", timeout=200)
    gone = time.monotonic()
    wait_until("four status passes after the deletion", lambda: time.monotonic() - gone >= 20, timeout=40, every=1)
    after = kube.run("logs", "-n", operator.namespace, operator.pod, "--since-time", deleted)
    assert [r.split("\n", 1)[0][:300] for r in errors(after) if ns in r] == []


GHOSTS = ("Defect: with watchNamespaces, deleting a watched namespace right after its NsqClusters (kubectl delete "
          "nsqclusters --all; kubectl delete namespace) leaves the operator's 'status' and 'rollout' timers running for "
          "the deleted NsqClusters, every 5 s each, for as long as the operator runs: the namespace's RoleBinding is "
          "gone, so each pass is refused 403 (GET .../events, GET .../nsqclusters/<name>) and logged as ERROR, "
          "hundreds of requests a minute that never stop until the operator restarts")


@pytest.mark.timeout(600)
def test_a_deleted_watched_namespace_leaves_no_ghost_behind(kube: Kube, operator: Operator) -> None:
    """Deleting the NsqClusters and then the namespace the operator watches (by a
    RoleBinding there) takes the RoleBinding with them: once the retries of what was under
    way when it went are spent (kopf: 9 attempts, under a minute), the operator must not go
    on working for NsqClusters that are gone."""
    ns = operator.apps["gone"]
    kube.apply([nsq_cluster("nsq", ns), nsq_cluster("other", ns)])
    cluster_ready(kube, "nsq", ns, operator_namespace=operator.namespace)
    cluster_ready(kube, "other", ns, operator_namespace=operator.namespace)
    kube.run("delete", "nsqclusters", "--all", "-n", ns, "--wait=false")
    kube.run("delete", "namespace", ns, "--timeout", "240s", timeout=260)
    assert kube.get_or_none("namespace", ns) is None
    went = time.monotonic()
    wait_until("kopf's retries of requests under way to be spent", lambda: time.monotonic() - went >= 70,
               timeout=100, every=1)
    settled = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    start, began = flow_dispatched(kube, operator.flow_schema), time.monotonic()
    wait_until("a minute to pass", lambda: time.monotonic() - began >= 60, timeout=90, every=1)
    per_minute = (flow_dispatched(kube, operator.flow_schema) - start) * 60 / (time.monotonic() - began)
    after = kube.run("logs", "-n", operator.namespace, operator.pod, "--since-time", settled)
    ghosts = [r.split("\n", 1)[0][:300] for r in errors(after) if f"/namespaces/{ns}/" in r]
    print(f"{len(ghosts)} ERROR records about {ns} from 70 s to 130 s after it went; the operator made "
          f"{per_minute:.1f} requests/min meanwhile (every ghost of the module's namespaces counted)",
          *ghosts[:4], sep="\n")
    assert ghosts == []


def copies(kube: Kube, kind: str, name: str, namespace: str) -> dict[str, Any]:
    status = kube.get(kind, name, namespace).get("status") or {}
    return (status.get("nsqd") or {}).get("replication") or {} if kind == "nsqcluster" else \
        status.get("replication") or {}


def every_copy_in_sync(kube: Kube, name: str, namespace: str, wanted: int) -> bool:
    found = copies(kube, "nsqcluster", name, namespace)
    return found.get("inSync") == wanted and found.get("missing") == 0 and found.get("catchingUp") == 0


@pytest.mark.timeout(900)
def test_a_replicated_nsqd_lost_with_its_disk_is_adopted_and_replaced_under_an_enforced_policy(
        kube: Kube, operator: Operator, replication_namespace: str) -> None:
    """Node loss on the real cluster: the pod and its claim deleted together. Its backup
    adopts and delivers every acknowledged message; the StatefulSet brings the pod back on
    a new, empty claim, and the copies are in sync again. The peers reach each other's
    replication port through the cluster's own NetworkPolicy, which kube-router enforces."""
    ns = replication_namespace
    cluster = nsq_cluster("rep", ns, nsqd=3)
    # the CRD's CEL rule, on integers as the apiserver decodes them (crdcheck cannot judge it)
    cluster["spec"]["nsqd"]["replication"] = {"replicas": 4}
    with pytest.raises(KubectlError) as refused:
        kube.apply(cluster)
    assert "replication.replicas cannot be above replicas" in refused.value.stderr
    cluster["spec"]["nsqd"]["replication"] = {"replicas": 2}
    cluster["spec"]["networkPolicy"] = {"enabled": True}
    kube.apply([cluster, nsq_topic("orders", ns, "rep"),
                {"apiVersion": "nsq.dev/v1alpha1", "kind": "NsqChannel", "metadata": {"name": "orders-audit", "namespace": ns},
                 "spec": {"cluster": "rep", "topic": "orders", "channelName": "audit"}}])
    cluster_ready(kube, "rep", ns, operator_namespace=operator.namespace)
    wait_until("every copy in sync (3 owners x 2 copies)", lambda: every_copy_in_sync(kube, "rep", ns, 6),
               timeout=180, every=2, explain=lambda: json.dumps(copies(kube, "nsqcluster", "rep", ns)))
    rows = {row["pod"]: row["inSync"] for row in copies(kube, "nsqcluster", "rep", ns)["owners"]}
    assert rows == {"rep-nsqd-0": ["rep-nsqd-0", "rep-nsqd-1"], "rep-nsqd-1": ["rep-nsqd-1", "rep-nsqd-2"],
                    "rep-nsqd-2": ["rep-nsqd-2", "rep-nsqd-0"]}
    wait_until("NsqChannel orders-audit Ready",
               lambda: is_true(kube, "nsqchannel", "orders-audit", ns, "Ready"), timeout=120, every=2)
    assert copies(kube, "nsqtopic", "orders", ns).get("replicas") == 2
    # a topic of its own count: on all three nsqds where the cluster's default is two
    kube.apply(nsq_topic("events", ns, "rep", replicas=3))
    wait_until("NsqTopic events with its 9 copies in sync", lambda: copies(kube, "nsqtopic", "events", ns).get(
        "inSync") == 9, timeout=120, every=2, explain=lambda: json.dumps(copies(kube, "nsqtopic", "events", ns)))
    assert copies(kube, "nsqtopic", "events", ns).get("replicas") == 3
    for pod in ("rep-nsqd-0", "rep-nsqd-1", "rep-nsqd-2"):
        assert nsq_exec.nsqd_json(kube, ns, pod, "/replication")["topic_replicas"].get("events") == 3, pod

    sent = [f"rep-{i:04d}" for i in range(200)]
    events = [f"event-{i:04d}" for i in range(50)]
    nsq_exec.publish(kube, ns, "rep-nsqd-0", "orders", sent)  # OK once rep-nsqd-1 holds a copy of each
    nsq_exec.publish(kube, ns, "rep-nsqd-0", "events", events)
    owner_address = nsq_exec.nsqd_json(kube, ns, "rep-nsqd-0", "/replication")["node"]
    held = {pod: nsq_exec.nsqd_json(kube, ns, pod, "/replication")["held_topics"].get(owner_address, {})
            for pod in ("rep-nsqd-1", "rep-nsqd-2")}
    wait_until("the third copy of every event", lambda: nsq_exec.nsqd_json(
        kube, ns, "rep-nsqd-2", "/replication")["held_topics"].get(owner_address, {}).get("events") == 50,
        timeout=30, every=1)  # the OK waited for one backup of two
    assert held["rep-nsqd-1"] == {"orders": 200, "events": 50}, held
    assert "orders" not in held["rep-nsqd-2"], held  # two copies: the owner's and the next one's

    # node loss: the claim (its finalizer holds it while the pod runs) and the pod
    kube.run("delete", "pvc", "data-rep-nsqd-0", "-n", ns, "--wait=false")
    kube.run("delete", "pod", "rep-nsqd-0", "-n", ns, "--wait=false")
    wait_until("rep-nsqd-1 to adopt the messages of rep-nsqd-0", lambda: nsq_exec.nsqd_json(
        kube, ns, "rep-nsqd-1", "/replication")["adopted"].get(owner_address) == 250, timeout=180, every=2)
    delivered = nsq_exec.consume(kube, ns, "rep-nsqd-1", "orders", "audit", sent, seconds=60)
    print(f"acknowledged {len(sent)}, delivered by the adopter {len(delivered)} "
          f"({len(delivered) - len(set(delivered))} duplicates)")
    assert sorted(set(delivered)) == sorted(sent) and len(delivered) == len(sent)
    # the topic had no channel: its messages waited in its own queue, and the first channel gets them
    delivered_events = nsq_exec.consume(kube, ns, "rep-nsqd-1", "events", "late", events, seconds=60)
    assert sorted(delivered_events) == sorted(events)

    # the replacement runs on a new claim, and every copy is in place again
    # each nsqd now links to both others, as the widest topic (events) needs: 3 x 3
    wait_until("the copies in sync again", lambda: every_copy_in_sync(kube, "rep", ns, 9),
               timeout=300, every=2, explain=lambda: namespace_snapshot(kube, ns, operator.namespace)
               + "\n" + json.dumps(copies(kube, "nsqcluster", "rep", ns)))
    claim = kube.get("pvc", "data-rep-nsqd-0", ns)
    assert not claim["metadata"].get("deletionTimestamp") and claim["status"]["phase"] == "Bound"
    cluster_ready(kube, "rep", ns, operator_namespace=operator.namespace)
    wait_until("NsqTopic orders Ready", lambda: is_true(kube, "nsqtopic", "orders", ns, "Ready"), timeout=120, every=2,
               explain=lambda: namespace_snapshot(kube, ns, operator.namespace)
               + "\n" + json.dumps(kube.get("nsqtopic", "orders", ns).get("status")))

    # scaled up and down with replication on: the peer list given to the running nsqds
    # live (no pod restarted), the leaving pod taken out once the copies moved off it
    running = {pod: kube.get("pod", pod, ns)["metadata"]["uid"] for pod in ("rep-nsqd-0", "rep-nsqd-1", "rep-nsqd-2")}
    kube.run("patch", "nsqcluster", "rep", "-n", ns, "--type", "merge", "-p", '{"spec":{"nsqd":{"replicas":4}}}')
    wait_until("four nsqds with every copy in sync (4 x 3)", lambda: every_copy_in_sync(kube, "rep", ns, 12),
               timeout=300, every=2, explain=lambda: namespace_snapshot(kube, ns, operator.namespace)
               + "\n" + json.dumps(copies(kube, "nsqcluster", "rep", ns)))
    cluster_ready(kube, "rep", ns, operator_namespace=operator.namespace)
    later = [f"later-{i:04d}" for i in range(100)]
    nsq_exec.publish(kube, ns, "rep-nsqd-3", "orders", later)
    leaving_address = nsq_exec.nsqd_json(kube, ns, "rep-nsqd-3", "/replication")["node"]
    kube.run("patch", "nsqcluster", "rep", "-n", ns, "--type", "merge", "-p", '{"spec":{"nsqd":{"replicas":3}}}')
    wait_until("rep-nsqd-3 gone and every copy in sync (3 x 3)", lambda: not kube.items(
        "pods", ns, "-l", "statefulset.kubernetes.io/pod-name=rep-nsqd-3") and every_copy_in_sync(kube, "rep", ns, 9),
        timeout=300, every=2, explain=lambda: namespace_snapshot(kube, ns, operator.namespace)
        + "\n" + json.dumps(copies(kube, "nsqcluster", "rep", ns)))
    cluster_ready(kube, "rep", ns, operator_namespace=operator.namespace)
    # what rep-nsqd-3 accepted was handed off, and its backups forgot their copies of it
    assert not nsq_exec.nsqd_json(kube, ns, "rep-nsqd-0", "/replication")["held_copies"].get(leaving_address)
    seen: list[str] = []
    for pod in ("rep-nsqd-0", "rep-nsqd-1", "rep-nsqd-2"):
        seen += nsq_exec.consume(kube, ns, pod, "orders", "audit", later, seconds=10)
    assert sorted(seen) == sorted(later), sorted(set(later) - set(seen))[:5]
    assert {pod: kube.get("pod", pod, ns)["metadata"]["uid"] for pod in running} == running, "a pod was restarted"


@pytest.mark.timeout(900)
def test_helm_upgrade_and_uninstall_leave_nothing_terminating(kube: Kube, operator: Operator) -> None:
    """A second release of its own (the module's operator keeps running for the token test)."""
    release = "day2b"
    ops = kube.namespace("day2b-ops")
    app = kube.namespace("day2b-app", RESTRICTED)
    deployment = fullname(release)
    installed = True
    try:
        install(kube, release, ops, [app])
        first = [p["metadata"]["name"] for p in kube.items("pods", ops)]
        kube.apply([nsq_cluster("nsq", app), nsq_topic("orders", app, "nsq", deletionPolicy="Delete")])
        cluster_ready(kube, "nsq", app, operator_namespace=ops)
        wait_until("the topic on the nsqd", lambda: "orders" in nsqd_topics(kube, app, "nsq-nsqd-0"), timeout=120)
        assert kube.get("nsqcluster", "nsq", app)["metadata"].get("finalizers") in (None, [])

        kube.helm("upgrade", release, str(REPO / "charts/nsq-operator"), "--namespace", ops, "--reuse-values",
             "--set", "intervals.status=7", "--wait", "--timeout", "5m")
        args = kube.get("deployment", deployment, ops)["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "--status-interval=7" in args and f"--namespace={app}" in args
        def replacement() -> list[dict[str, Any]] | None:
            pods = kube.items("pods", ops)
            names = [p["metadata"]["name"] for p in pods]
            return pods if len(pods) == 1 and names != first and ready(pods[0]) else None

        replaced = wait_until("the operator pod replaced", replacement, timeout=120)
        assert replaced[0]["status"]["containerStatuses"][0]["restartCount"] == 0
        assert terminating(kube, ops) == [] and terminating(kube, app) == []
        cluster_ready(kube, "nsq", app, operator_namespace=ops)

        # the CRs deleted before the uninstall go away (the topic's finalizer taken off by the operator)
        kube.run("delete", "nsqtopic", "orders", "-n", app, "--timeout", "120s", timeout=150)
        kube.run("delete", "nsqcluster", "nsq", "-n", app, "--timeout", "120s", timeout=150)
        assert kube.items("nsqclusters,nsqtopics,nsqchannels", app) == []
        wait_until("the cluster's pods to go", lambda: pods_of(kube, app, "nsq") == [], timeout=180, every=2)

        kube.helm("uninstall", release, "--namespace", ops, "--wait", "--timeout", "3m")
        installed = False
        assert release not in kube.helm("list", "--namespace", ops, "-q").split()
        gone = time.monotonic()
        wait_until("the operator pod to go", lambda: kube.items("pods", ops) == [], timeout=120, every=1)
        print(f"the operator pod went {time.monotonic() - gone:.1f}s after `helm uninstall --wait` returned")
        assert [o["metadata"]["name"] for o in kube.items("deployments,replicasets,serviceaccounts,rolebindings", ops)
                if o["metadata"]["name"] != "default"] == []
        assert kube.items("rolebindings", app) == [] or all(
            b["metadata"]["name"] != deployment for b in kube.items("rolebindings", app))
        for kind in ("clusterrole", "clusterrolebinding"):
            assert [n for n in kube.run("get", kind, "-o", "name").split() if deployment in n] == []
        assert terminating(kube, ops) == [] and terminating(kube, app) == []
        assert [t for t in terminating(kube) if deployment in t] == []
    finally:
        if installed:
            subprocess.run([helm_binary(), "uninstall", release, "--namespace", ops, "--wait", "--timeout", "2m"],
                           env={**os.environ, "KUBECONFIG": str(kube.kubeconfig)}, capture_output=True, timeout=180)
        for name in (app, ops):
            kube.run("delete", "namespace", name, "--wait=false", check=False)


@pytest.mark.timeout(1500)
def test_a_600s_token_rotates_under_the_running_operator(kube: Kube, operator: Operator) -> None:
    """Last: the kubelet renews the token after 80% of its life (480 s); once the first token
    has expired too, the operator must be working with the new one."""
    ns = operator.apps["token"]
    first = operator.first_token
    assert first["exp"] - first["iat"] == TOKEN_SECONDS
    renewed = wait_until("the kubelet to renew the operator's token", lambda: (
        (claims_ := token_claims(kube, operator.namespace, operator.pod))["iat"] > first["iat"] and claims_),
        timeout=max(60.0, first["iat"] + TOKEN_SECONDS + 120 - time.time()), every=5)
    assert renewed["exp"] - renewed["iat"] == TOKEN_SECONDS
    # well past the first token's expiry (any leeway of the apiserver's included): what the
    # operator and kopf do from now on needs the renewed token
    wait_until("the first token to have expired a minute and a half ago", lambda: time.time() > first["exp"] + 90,
               timeout=max(10.0, first["exp"] + 120 - time.time()), every=1)

    applied = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kube.apply([nsq_cluster("nsq", ns), nsq_topic("after-rotation", ns, "nsq")])
    cluster_ready(kube, "nsq", ns, operator_namespace=operator.namespace)
    wait_until("the topic made on the nsqd", lambda: "after-rotation" in nsqd_topics(kube, ns, "nsq-nsqd-0"),
               timeout=120, every=2)
    wait_until("the NsqTopic to be Ready", lambda: is_true(kube, "nsqtopic", "after-rotation", ns, "Ready"), timeout=60)

    # kopf's own write (its record of the handled spec) went through too, not just the operator's client's
    annotations = kube.get("nsqcluster", "nsq", ns)["metadata"].get("annotations") or {}
    assert "nsq.dev/last-handled-configuration" in annotations
    operator_pod = kube.get("pod", operator.pod, operator.namespace)  # the same pod, never restarted
    assert operator_pod["status"]["containerStatuses"][0]["restartCount"] == 0
    # This operator's own work on the cluster since it was applied (a cluster-wide operator
    # of another release may handle its creation first; its timers run here regardless, and
    # the only NsqCluster in this operator's namespaces now is this one).
    since = kube.run("logs", "-n", operator.namespace, operator.pod, "--since-time", applied)
    assert "Timer 'status' succeeded." in since, since[-3000:]
    log = operator.log(kube)
    about_tokens = [line for line in log.splitlines()
                    if re.search(r"401|Unauthorized|authentication", line, re.IGNORECASE)]
    print("\n".join(["the operator's lines about its credentials:", *about_tokens]))
    failed = errors(log)
    print(f"{len(failed)} ERROR records in the operator's log")
    assert [r for r in failed if re.search(r"(?<![,.\d])\b401\b|Unauthorized", r)] == []  # no refused token unhandled
