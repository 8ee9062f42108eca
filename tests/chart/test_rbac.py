"""The chart grants the operator exactly the calls it makes (operator_calls.CALLS): each
one allowed, nothing else granted, and when it watches named namespaces, nothing outside
them."""
from __future__ import annotations

from typing import Any

import pytest

from nsq_operator.builders import build_cluster
from nsq_operator.kube.resources import KINDS
from tests.chart.operator_calls import BUILT, CALLS, least_grants, requests
from tests.chart.rbac import Grant, Request, allowed, grants
from tests.chart.render import NAMESPACE, Helm, one
from tests.operator.samples import cluster

WATCHED = [NAMESPACE, "team-a"]


def operator_grants(objects: list[dict[str, Any]]) -> set[Grant]:
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    return grants(objects, pod["serviceAccountName"], NAMESPACE)


@pytest.mark.parametrize("watched", [[], WATCHED], ids=["all-namespaces", "named-namespaces"])
def test_every_call_of_the_operator_is_allowed(helm: Helm, watched: list[str]) -> None:
    granted = operator_grants(helm.template({"watchNamespaces": watched}))
    denied = [str(r) for r in requests(watched) if not allowed(granted, r)]
    assert denied == []


@pytest.mark.parametrize("watched", [[], WATCHED], ids=["all-namespaces", "named-namespaces"])
def test_nothing_beyond_those_calls_is_granted(helm: Helm, watched: list[str]) -> None:
    granted = operator_grants(helm.template({"watchNamespaces": watched}))
    assert sorted(map(str, granted - least_grants(watched))) == []
    assert sorted(map(str, least_grants(watched) - granted)) == []


def test_watching_named_namespaces_grants_nothing_in_others(helm: Helm) -> None:
    granted = operator_grants(helm.template({"watchNamespaces": WATCHED}))
    for call in CALLS:
        if call.scope in ("object", "watch"):
            assert not allowed(granted, Request(call.verb, call.group, call.resource, "elsewhere")), call
            assert not allowed(granted, Request(call.verb, call.group, call.resource, None)), call


def test_the_model_of_rbac_denies_what_no_rule_names(helm: Helm) -> None:
    """The checks above mean something only if this evaluator can say no."""
    granted = operator_grants(helm.template())
    for request in [Request("deletecollection", "", "pods", "x"), Request("list", "", "secrets", "x"),
                    Request("update", "nsq.dev", "nsqclusters", "x"), Request("create", "", "pods", None),
                    Request("get", "", "pods", "x"), Request("list", "apps", "deployments", None),
                    Request("create", "rbac.authorization.k8s.io", "roles", "x")]:
        assert not allowed(granted, request), request
    assert allowed(granted, Request("patch", "", "pods/status", "x"))
    # the same rights bound to another account grant that account nothing
    assert grants(helm.template(), "someone-else", NAMESPACE) == set()


def test_every_kind_the_builders_make_is_in_the_list() -> None:
    built = {(KINDS[m["kind"]].api_version.rpartition("/")[0], KINDS[m["kind"]].plural)
             for m in build_cluster(cluster("demo", "ns1"))}
    assert built == set(BUILT)
