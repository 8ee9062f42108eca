"""The operator's pure pieces: conditions, create-or-patch decisions, names and addresses,
error messages, wishes, the TOML writer and the command line."""
from __future__ import annotations

import tomllib
from typing import Any

import kopf
import pytest
from pydantic import ValidationError

from nsq_operator.builders import toml
from nsq_operator.cli import parser
from nsq_operator.endpoints import PodDnsEndpoints
from nsq_operator.handlers.login import configure
from nsq_operator.kube.apply import apply, contains
from nsq_operator.builders.statefulsets import build_nsqd_statefulset
from nsq_operator.models import NsqCluster, NsqClusterSpec
from nsq_operator.models.common import quantity_value
from nsq_operator.reconcile.storage import storage_change
from nsq_operator.runtime import Intervals, Runtime
from nsq_operator.models.cluster import ClusterRef
from nsq_operator.status import conditions
from nsq_operator.status.errors import describe
from nsq_operator.topology.wishes import BadSpec, channel_wish, topic_wish


def test_transition_time_moves_only_when_the_status_does() -> None:
    first = conditions.conditions_for([], conditions.progressing("PodsNotReady", "0/3"), 1)
    assert [c["type"] for c in first] == ["Ready", "Progressing", "Degraded"]
    ready_at = first[0]["lastTransitionTime"]
    again = conditions.set_condition(first, "Ready", "False", "PodsNotReady", "1/3", 2, at="2099-01-01T00:00:00Z")
    ready = next(c for c in again if c["type"] == "Ready")
    assert ready["lastTransitionTime"] == ready_at and ready["message"] == "1/3" and ready["observedGeneration"] == 2
    flipped = conditions.set_condition(again, "Ready", "True", "Reconciled", "", 2, at="2099-01-01T00:00:00Z")
    assert next(c for c in flipped if c["type"] == "Ready")["lastTransitionTime"] == "2099-01-01T00:00:00Z"


def test_degraded_verdict() -> None:
    verdict = conditions.degraded("InvalidSpec", "spec.nsqd.replicas: too small")
    by_type = {c["type"]: c for c in conditions.conditions_for([], verdict, 3)}
    assert by_type["Degraded"]["status"] == "True" and by_type["Degraded"]["message"] == "spec.nsqd.replicas: too small"
    assert by_type["Ready"]["status"] == "False" and by_type["Progressing"]["status"] == "False"


def test_validation_errors_name_every_field() -> None:
    with pytest.raises(ValidationError) as caught:
        NsqClusterSpec.model_validate({"nsqd": {"replicas": -1, "options": {"max-rdy-count": 0}}})
    message = describe(caught.value)
    assert "spec.nsqd.replicas" in message and "spec.nsqd.options.max-rdy-count" in message


def test_contains_ignores_server_added_fields() -> None:
    actual = {"spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "a", "image": "x", "tty": False}]}}},
              "status": {}}
    assert contains(actual, {"spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}})
    assert not contains(actual, {"spec": {"replicas": 4}})
    assert not contains(actual, {"spec": {"template": {"spec": {"containers": []}}}})


class FakeApi:
    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []

    async def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.applied.append(manifest)
        return manifest


def statefulset(claim: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s", "namespace": "n"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}}, "serviceName": "h",
                     "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                               "spec": {"resources": {"requests": {"storage": claim}}}}]}}


async def test_immutable_statefulset_fields_are_sent_as_they_are_and_reported() -> None:
    live = statefulset("1Gi")
    live["spec"]["volumeClaimTemplates"][0]["status"] = {"phase": "Pending"}  # defaulted by the apiserver
    api = FakeApi()
    unchanged = await apply(api, statefulset("1Gi"), live)
    assert unchanged.not_applied == [] and api.applied[-1] == statefulset("1Gi")
    grown = statefulset("5Gi")
    grown["spec"]["replicas"] = 3
    held = await apply(api, grown, live)
    assert held.not_applied == ["volumeClaimTemplates"]
    assert api.applied[-1]["spec"]["volumeClaimTemplates"] == live["spec"]["volumeClaimTemplates"]
    assert api.applied[-1]["spec"]["replicas"] == 3


def test_production_endpoints_are_pod_dns_names() -> None:
    endpoints, cluster = PodDnsEndpoints(), ClusterRef("demo", "prod")
    assert endpoints.nsqd_http(cluster, "demo-nsqd-2") == "http://demo-nsqd-2.demo-nsqd-headless.prod.svc:4151"
    assert endpoints.lookupd_http(cluster, "demo-lookupd-0") == "http://demo-lookupd-0.demo-lookupd.prod.svc:4161"
    assert endpoints.lookupd_tcp(cluster, "demo-lookupd-1") == "demo-lookupd-1.demo-lookupd.prod.svc:4160"


def body(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def test_names_default_to_the_object_name() -> None:
    assert topic_wish(body("NsqTopic", "orders", {"cluster": "c"})).topic == "orders"
    assert topic_wish(body("NsqTopic", "x", {"cluster": "c", "topicName": "Orders_v2"})).topic == "Orders_v2"
    wish = channel_wish(body("NsqChannel", "archive", {"cluster": "c", "topic": "orders", "paused": True}))
    assert (wish.topic, wish.channel, wish.paused) == ("orders", "archive", True)
    with pytest.raises(BadSpec, match="metadata.name"):
        topic_wish(body("NsqTopic", "n" * 65, {"cluster": "c"}))
    with pytest.raises(BadSpec, match="spec.cluster"):
        topic_wish(body("NsqTopic", "t", {}))


def test_toml_round_trips_through_the_standard_reader() -> None:
    values = {"a": 1, "b": 0.25, "c": True, "d": 'quote " and \\ slash', "e": ["x:1", "y:2"], "f": [0.5, 0.99], "g": []}
    assert tomllib.loads(toml.dumps(values)) == values


def test_command_line() -> None:
    args = parser().parse_args(["-n", "queues", "-n", "other", "--status-interval", "3"])
    assert args.namespace == ["queues", "other"] and args.status_interval == 3.0
    assert parser().parse_args([]).namespace == []


@pytest.mark.parametrize("given", ["0", "-5", "2.5", "ten"])
def test_the_watch_timeout_is_a_positive_whole_number_of_seconds(given: str) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args([f"--watch-timeout={given}"])


def test_each_watch_is_ended_by_the_apiserver_before_kopf_takes_its_silence_for_a_dead_stream() -> None:
    """The apiserver sends no bookmark on a watch of objects no one changed: kopf's 70 s
    inactivity timeout then reopened every idle watch (the real cluster's idle test)."""
    watch = parser().parse_args(["--watch-timeout", "300"]).watch_timeout
    settings = kopf.OperatorSettings()
    configure(settings=settings, memo=kopf.Memo(runtime=Runtime(intervals=Intervals(watch=watch))))
    assert settings.watching.server_timeout == 300 and str(settings.watching.server_timeout) == "300"  # timeoutSeconds
    assert settings.watching.inactivity_timeout is not None and settings.watching.inactivity_timeout > 300
    assert parser().parse_args([]).watch_timeout == Intervals.watch


def test_quantities_compare_by_value() -> None:
    assert quantity_value("10Gi") == 10 * 2**30 and quantity_value("1e3") == 1000 == quantity_value("1k")
    assert quantity_value("500Mi") < quantity_value("1Gi") < quantity_value("1.5G")
    assert quantity_value("100m") * 10 == 1 and quantity_value("2E") == 2 * 10**18
    with pytest.raises(ValueError):
        quantity_value("lots")


@pytest.mark.parametrize("have, want, grow_to, field", [
    ({"size": "1Gi"}, {"size": "2Gi"}, "2Gi", None),
    ({"size": "1Gi"}, {"size": "1024Mi"}, None, None),
    ({"size": "2Gi"}, {"size": "1Gi"}, None, "spec.nsqd.storage.size"),
    ({"size": "1Gi"}, {"size": "2Gi", "storageClassName": "fast"}, None, "spec.nsqd.storage.storageClassName"),
])
def test_storage_changes(have: dict[str, Any], want: dict[str, Any], grow_to: str | None, field: str | None) -> None:
    def sts(storage: dict[str, Any]) -> dict[str, Any]:
        cluster = NsqCluster.from_body({"metadata": {"name": "c", "namespace": "n"}, "spec": {"nsqd": {"storage": storage}}})
        return build_nsqd_statefulset(cluster)
    change = storage_change(sts(have), sts(want))
    assert change.grow_to == grow_to
    assert (change.refused is None) == (field is None) and (field is None or field in str(change.refused))
