"""Replicated topics, the operator's pure side: spec.nsqd.replication turns into nsqd's
flags (each pod's stable address, every ordinal in order), a replication port on the
container, the headless Service and the NetworkPolicy; nothing changes when it is off;
the CRD rule and the model bound the copies by the nsqds; the peer list follows the
number of nsqds without restarting a pod, and is settled once every nsqd runs it; and
GET /replication answers are judged in sync, catching up,
behind or missing."""
from __future__ import annotations

from typing import Any

import celpy
import kubernetes_validate
import pytest
import yaml
from pydantic import ValidationError

from nsq_operator.builders import build_cluster
from nsq_operator.builders.statefulsets import build_nsqd_statefulset
from nsq_operator.models import NsqCluster
from nsq_operator.builders.revision import Revision
from nsq_operator.reconcile.membership import unsettled
from nsq_operator.status import replication as judge
from nsqd.cli import load_options
from nsqd.options import NsqdOptions
from tests.operator.samples import cluster, cluster_body
from tests.operator.test_builders import K8S_VERSIONS, by_kind_and_name
from tests.operator.test_crd_rules import ROOT

REPLICATED: dict[str, Any] = {"nsqd": {"replicas": 3, "replication": {"replicas": 2, "timeout": "2s",
                                                                      "failoverTimeout": "1s"}},
                              "networkPolicy": {"enabled": True}}
PEERS = ",".join(f"demo-nsqd-{i}.demo-nsqd-headless.ns1.svc:4153" for i in range(3))


def _container(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    sts = by_kind_and_name(manifests)["StatefulSet", "demo-nsqd"]
    return dict(sts["spec"]["template"]["spec"]["containers"][0])


def test_the_nsqd_flags_name_each_pod_by_its_stable_name_and_every_ordinal_in_order() -> None:
    args = _container(build_cluster(cluster(**REPLICATED)))["args"]
    # the listener binds every interface: the pod's DNS name resolves only once the pod runs
    assert args[-6:] == ["--replication-address=$(POD_NAME).demo-nsqd-headless.ns1.svc:4153",
                         "--replication-listen-address=0.0.0.0:4153", f"--replication-peer={PEERS}", "--topic-replicas=2", "--replication-timeout=2s",
                         "--replication-failover-timeout=1s"]


def test_with_a_cluster_domain_the_names_are_fully_qualified() -> None:
    args = _container(build_cluster(cluster(clusterDomain="cluster.local", **REPLICATED)))["args"]
    assert "--replication-address=$(POD_NAME).demo-nsqd-headless.ns1.svc.cluster.local:4153" in args


def test_nsqd_reads_the_flags_as_the_operator_writes_them() -> None:
    """Each pod's args, $(POD_NAME) filled in as the kubelet does, through nsqd's own CLI."""
    args = _container(build_cluster(cluster(**REPLICATED)))["args"]
    flags = [a.replace("$(POD_NAME)", "demo-nsqd-1") for a in args
             if a.startswith(("--replication", "--topic-replicas"))]
    options = load_options(flags)
    assert isinstance(options, NsqdOptions)
    assert options.replication_address == "demo-nsqd-1.demo-nsqd-headless.ns1.svc:4153"
    assert options.replication_peers == PEERS.split(",")
    assert (options.topic_replicas, options.replication_timeout, options.replication_failover_timeout) == (2, 2.0, 1.0)


def test_the_port_is_on_the_container_the_headless_service_and_the_policy_only() -> None:
    objects = by_kind_and_name(build_cluster(cluster(**REPLICATED)))
    ports = _container(list(objects.values()))["ports"]
    assert {"name": "replication", "containerPort": 4153, "protocol": "TCP"} in ports
    headless = objects["Service", "demo-nsqd-headless"]["spec"]["ports"]
    assert {"name": "replication", "port": 4153, "targetPort": "replication", "protocol": "TCP"} in headless
    assert all(p["port"] != 4153 for p in objects["Service", "demo-nsqd"]["spec"]["ports"])  # clients never
    rules = objects["NetworkPolicy", "demo-nsqd"]["spec"]["ingress"]
    replication = [r for r in rules if {"protocol": "TCP", "port": 4153} in r["ports"]]
    assert replication == [{"from": [{"podSelector": {"matchLabels": {
        "app.kubernetes.io/name": "nsq", "app.kubernetes.io/instance": "demo", "app.kubernetes.io/component": "nsqd"}}}],
        "ports": [{"protocol": "TCP", "port": 4153}]}]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_manifest_stays_valid_for_kubernetes(version: str) -> None:
    for manifest in build_cluster(cluster(**REPLICATED)):
        kubernetes_validate.validate(manifest, version, strict=True)


@pytest.mark.parametrize("off", [{}, {"replication": {"replicas": 1}}, {"replication": {}}])
def test_off_changes_no_manifest(off: dict[str, Any]) -> None:
    assert build_cluster(cluster(nsqd={"replicas": 3, **off}, networkPolicy={"enabled": True})) == \
        build_cluster(cluster(nsqd={"replicas": 3}, networkPolicy={"enabled": True}))


def test_the_model_bounds_the_copies() -> None:
    with pytest.raises(ValidationError, match="cannot be above replicas"):
        cluster(nsqd={"replicas": 2, "replication": {"replicas": 3}})
    with pytest.raises(ValidationError):
        cluster(nsqd={"replicas": 9, "replication": {"replicas": 6}})
    cluster(nsqd={"replicas": 0, "replication": {"replicas": 1}})  # off: no bound


def _nsqd_rule() -> dict[str, str]:
    crd = yaml.safe_load((ROOT / "crds" / "nsqclusters.nsq.dev.yaml").read_text())
    nsqd = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["nsqd"]
    (rule,) = nsqd["x-kubernetes-validations"]
    return dict(rule)


@pytest.mark.parametrize("nsqd, admitted", [
    ({"replicas": 3}, True), ({"replicas": 0, "replication": {"replicas": 1}}, True),
    ({"replicas": 3, "replication": {"replicas": 3}}, True), ({"replicas": 2, "replication": {"replicas": 3}}, False),
    ({"replicas": 1, "replication": {"replicas": 2}}, False)])
def test_the_crd_rule_bounds_the_copies_by_the_nsqds(nsqd: dict[str, Any], admitted: bool) -> None:
    """As the apiserver binds it (self: spec.nsqd), with cel-python; crdcheck cannot judge it
    (it reads every number as a float: tests/operator/admission.py)."""
    rule = _nsqd_rule()
    env = celpy.Environment()
    verdict = env.program(env.compile(rule["rule"])).evaluate({"self": celpy.json_to_cel(nsqd)})
    assert bool(verdict) is admitted


def _statefulset(replicas: int, replication: int, epoch: int = 0) -> dict[str, Any]:
    nsqd: dict[str, Any] = {"replicas": replicas}
    if replication > 1:
        nsqd["replication"] = {"replicas": replication}
    return build_nsqd_statefulset(cluster(nsqd=nsqd).model_copy(update={"peer_epoch": epoch}))


def _args(statefulset: dict[str, Any]) -> list[str]:
    return list(statefulset["spec"]["template"]["spec"]["containers"][0]["args"])


def test_a_change_of_nsqd_replicas_changes_the_peer_list_and_its_epoch_but_restarts_no_pod() -> None:
    """The list and its epoch are given to running nsqds live: the pods' revision (what
    the roller restarts a pod for) does not change with them."""
    three, five = _statefulset(3, 3), _statefulset(5, 3, epoch=1)
    assert f"--replication-peer={PEERS}" in _args(three)
    assert not any(a.startswith("--replication-membership-epoch=") for a in _args(three)), "epoch 0: not said"
    assert "--replication-membership-epoch=1" in _args(five)
    assert [a for a in _args(five) if a.startswith("--replication-peer=")] == [
        "--replication-peer=" + ",".join(f"demo-nsqd-{i}.demo-nsqd-headless.ns1.svc:4153" for i in range(5))]
    assert Revision.of(three["spec"]["template"]) == Revision.of(five["spec"]["template"])
    assert Revision.of(_statefulset(3, 2)["spec"]["template"]) != Revision.of(three["spec"]["template"]), \
        "other flags still restart the pods"


def test_nsqd_reads_the_epoch_and_may_be_left_out_of_a_list_that_has_one() -> None:
    flags = [a.replace("$(POD_NAME)", "demo-nsqd-3") for a in _args(_statefulset(3, 2, epoch=4))
             if a.startswith(("--replication", "--topic-replicas"))]
    options = load_options(flags)  # a leaving pod made anew: it runs on with the list in its data path
    assert isinstance(options, NsqdOptions) and options.replication_membership_epoch == 4
    assert load_options([f for f in flags if not f.startswith("--replication-membership-epoch")]) == 2, \
        "without an epoch the address must be in the list"


def _report(peers: int, epoch: int, settled: int, moving: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"peers": [{"peer": f"p{i}", "alive": True} for i in range(peers)],
            "membership": {"epoch": epoch, "settled": settled, "moving_topics": list(moving)}}


def test_a_peer_list_is_settled_once_every_nsqd_runs_it_and_moved_its_copies() -> None:
    assert unsettled({"n-0": _report(3, 2, 2), "n-1": _report(3, 2, 2)}, 3) is None
    assert unsettled({"n-0": _report(4, 1, 1), "n-1": _report(3, 2, 2)}, 3) == "n-0 runs a peer list of 4 nsqds"
    assert unsettled({"n-0": _report(3, 2, 1, ("orders",))}, 3) == "n-0 is moving orders to its new backups"
    assert unsettled({"n-0": None}, 3) == "n-0 does not answer"
    assert unsettled({"n-0": _report(3, 2, 2), "n-1": _report(3, 3, 3)}, 3) == \
        "the nsqds run peer lists of epochs 2, 3"


def _backup(peer: str, connected: bool = True, lag: int = 0, missed: int = 0) -> dict[str, Any]:
    return {"peer": peer, "connected": connected, "acked_through": 10, "lag_frames": lag, "missed_frames": missed,
            "connects": 1}


def test_answers_are_judged_per_owner() -> None:
    pod_of = {f"a{i}:4153": f"p-{i}" for i in range(4)}
    reports: judge.Reports = {
        "p-0": {"backups": [_backup("a1:4153"), _backup("a2:4153", lag=judge.IN_SYNC_LAG_FRAMES + 1)],
                "peers": [{"peer": "a3:4153", "alive": False}]},
        "p-1": {"backups": [_backup("a2:4153", missed=3), _backup("a3:4153", connected=False)], "peers": []},
        "p-2": {"backups": [_backup("a3:4153", lag=judge.IN_SYNC_LAG_FRAMES), _backup("a0:4153")], "peers": []},
        "p-3": None,
    }
    status = judge.summarize(3, ["p-0", "p-1", "p-2", "p-3"], reports, pod_of)
    rows = {row.pod: row for row in status.owners}
    assert (rows["p-0"].in_sync, rows["p-0"].catching_up) == (["p-0", "p-1"], ["p-2"])
    assert (rows["p-1"].behind, rows["p-1"].missing) == (["p-2"], ["p-3"])
    assert rows["p-2"].in_sync == ["p-2", "p-3", "p-0"]
    assert rows["p-3"].missing == ["p-3"] and not rows["p-3"].in_sync
    assert (status.in_sync, status.catching_up, status.behind, status.missing) == (6, 1, 1, 2)
    assert judge.unsettled(status) == ("copies of p-0 catching up on p-2; copies of p-1 missing on p-3; "
                                       "p-3 does not answer")
    assert judge.not_heard(reports, pod_of) == ["p-3"]
    settled = judge.summarize(2, ["p-2"], reports, pod_of)
    assert judge.all_in_place(settled, {"p-2": reports["p-2"]}, pod_of) is None
    assert judge.all_in_place(settled, reports, pod_of) == "p-3 not heard from by every peer"


def test_the_status_fits_the_crd() -> None:
    """Written as the operator writes it, the CRD's schema admits it (NsqCluster and NsqTopic)."""
    status = judge.summarize(2, ["p-0"], {"p-0": {"backups": [_backup("x")]}}, {})
    body = cluster_body(nsqd={"replicas": 2, "replication": {"replicas": 2}})
    assert NsqCluster.from_body(body).spec.nsqd.replicated is not None
    wire = status.wire()
    assert wire["owners"] == [{"pod": "p-0", "inSync": ["p-0", "x"], "catchingUp": [], "behind": [], "missing": []}]


def test_per_topic_runs_the_peers_with_one_copy_by_default_and_nsqd_reads_them() -> None:
    """replicas 1 with perTopic: the nsqds run their replication links, every topic has one
    copy unless its NsqTopic asks for more; nsqd accepts the flags."""
    spec = {"nsqd": {"replicas": 3, "replication": {"replicas": 1, "perTopic": True}}}
    args = _container(build_cluster(cluster(**spec)))["args"]
    assert f"--replication-peer={PEERS}" in args and "--topic-replicas=1" in args
    flags = [a.replace("$(POD_NAME)", "demo-nsqd-1") for a in args
             if a.startswith(("--replication", "--topic-replicas"))]
    options = load_options(flags)
    assert isinstance(options, NsqdOptions) and options.replication_on and options.topic_replicas == 1


def test_a_topic_of_fewer_copies_counts_the_first_backups_only() -> None:
    report = {"backups": [_backup("x"), _backup("y")]}
    status = judge.summarize(2, ["p-0"], {"p-0": report}, {"x": "p-1", "y": "p-2"}, topic_copies=2)
    assert status.owners[0].in_sync == ["p-0", "p-1"] and status.in_sync == 2
    alone = judge.summarize(1, ["p-0"], {"p-0": report}, {}, topic_copies=1)
    assert alone.owners[0].in_sync == ["p-0"] and alone.replicas == 1
