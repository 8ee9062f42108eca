"""Server-side apply takes back what the operator stops setting: the objects built from
spec A, then applied over by those built from spec B, are the objects built from B alone
(the storage, immutable in a StatefulSet, stays the same in both)."""
from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from nsq_operator.builders import build_cluster
from nsq_operator.kube.client import FIELD_MANAGER
from nsq_operator.models import NsqCluster
from tests.operator import fieldsets

NAMES = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6)
LABEL_MAPS = st.dictionaries(st.sampled_from(["zone", "disk", "kubernetes.io/arch", "team"]), NAMES, max_size=3)
TOLERATIONS = st.lists(st.fixed_dictionaries({"key": NAMES, "operator": st.just("Exists"),
                                              "effect": st.sampled_from(["NoSchedule", "NoExecute"])}), max_size=2)
SPREAD = st.lists(st.fixed_dictionaries({"maxSkew": st.integers(1, 3),
                                         "topologyKey": st.sampled_from(["zone", "kubernetes.io/hostname"]),
                                         "whenUnsatisfiable": st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])}),
                  max_size=2, unique_by=lambda c: (c["topologyKey"], c["whenUnsatisfiable"]))
QUANTITIES = st.sampled_from(["100m", "1", "64Mi", "1Gi", 2])
RESOURCES = st.fixed_dictionaries({}, optional={
    "requests": st.dictionaries(st.sampled_from(["cpu", "memory"]), QUANTITIES, max_size=2),
    "limits": st.dictionaries(st.sampled_from(["cpu", "memory"]), QUANTITIES, max_size=2)})
SCHEDULING = st.fixed_dictionaries({}, optional={
    "nodeSelector": LABEL_MAPS, "tolerations": TOLERATIONS, "topologySpreadConstraints": SPREAD,
    "priorityClassName": NAMES,
    "affinity": st.just({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}})})
SPECS = st.fixed_dictionaries({}, optional={
    "image": st.sampled_from(["nsq:1", "registry.example/nsq:2"]),
    "imagePullPolicy": st.sampled_from(["Always", "IfNotPresent"]),
    "imagePullSecrets": st.lists(NAMES, max_size=2, unique=True),
    "scheduling": SCHEDULING,
    "drainTimeoutSeconds": st.integers(0, 120),
    "nsqd": st.fixed_dictionaries({}, optional={"replicas": st.integers(0, 4), "resources": RESOURCES,
                                                "options": st.fixed_dictionaries({}, optional={
                                                    "mem-queue-size": st.integers(0, 100),
                                                    "log-level": st.sampled_from(["info", "debug"])})}),
    "lookupd": st.fixed_dictionaries({}, optional={"replicas": st.integers(1, 3), "resources": RESOURCES}),
    "metrics": st.one_of(st.just({}), st.just({"enabled": True, "statsdAddress": "statsd:8125"})),
    "admin": st.fixed_dictionaries({}, optional={"enabled": st.booleans(), "replicas": st.integers(0, 2),
                                                "resources": RESOURCES,
                                                "serviceType": st.sampled_from(["ClusterIP", "NodePort"])}),
})


def built(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return build_cluster(NsqCluster.from_body({"metadata": {"name": "prop", "namespace": "ns", "uid": "u-1"},
                                               "spec": spec}))


def applied(objects: dict[str, tuple[dict[str, Any], Any]], manifests: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(objects)
    for manifest in manifests:
        key = f"{manifest['kind']}/{manifest['metadata']['name']}"
        live, owners = out.get(key, ({}, {}))
        out[key] = fieldsets.apply(live, manifest, FIELD_MANAGER, True, owners)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SPECS, SPECS)
def test_applying_b_over_a_gives_b(a: dict[str, Any], b: dict[str, Any]) -> None:
    over = applied(applied({}, built(a)), built(b))
    alone = applied({}, built(b))
    assert {k: v[0] for k, v in over.items()} == {k: v[0] for k, v in alone.items()}


def test_a_field_another_manager_set_survives_and_a_dropped_one_goes() -> None:
    spec = {"scheduling": {"nodeSelector": {"zone": "a"}}, "imagePullSecrets": ["pull"]}
    objects = applied({}, built(spec))
    key = "StatefulSet/prop-nsqd"
    live, owners = objects[key]
    edited = {**live, "metadata": {**live["metadata"], "annotations": {"team": "messaging"}}}
    objects[key] = (edited, fieldsets.update(live, edited, "kubectl-annotate", owners))
    after = applied(objects, built({}))[key][0]
    assert after["metadata"]["annotations"] == {"team": "messaging"}
    pod = after["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod and "imagePullSecrets" not in pod
