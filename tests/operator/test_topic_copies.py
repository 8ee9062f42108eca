"""The copies an NsqTopic asks of each nsqd (``topology/copies.py``): its spec.replicas,
else the cluster's default as its nsqds run it; a count the cluster cannot give is
reported instead of applied."""
from __future__ import annotations

from typing import Any

from nsq_operator.topology.copies import Copies, topic_copies


def nsqd_pod(*args: str) -> dict[str, Any]:
    return {"metadata": {"name": "c-nsqd-0"}, "spec": {"containers": [{"name": "nsqd", "args": list(args)}]}}


PEERS = "--replication-peer=a:4153,b:4153,c:4153"
ON_ONE = [nsqd_pod("--replication-address=a:4153", PEERS, "--topic-replicas=1")] * 3
ON_TWO = [nsqd_pod("--replication-address=a:4153", PEERS, "--topic-replicas=2")] * 3
OFF = [nsqd_pod("--data-path=/data")] * 3


def test_unset_takes_the_default_the_nsqds_run_with() -> None:
    assert topic_copies(None, "c", ON_TWO) == Copies(2)
    assert topic_copies(None, "c", ON_ONE) == Copies(1)  # sent too: a count set before is taken back
    assert topic_copies(None, "c", OFF) == Copies(None)


def test_set_overrides_the_default_both_ways() -> None:
    assert topic_copies(3, "c", ON_ONE) == Copies(3)
    assert topic_copies(1, "c", ON_TWO) == Copies(1)
    assert topic_copies(1, "c", OFF) == Copies(None)  # one copy is what every topic has


def test_what_the_cluster_cannot_give_is_reported() -> None:
    wide = topic_copies(4, "c", ON_ONE)
    assert wide.ask is None and wide.problem is not None and "above the 3 nsqds of NsqCluster c" in wide.problem
    off = topic_copies(2, "c", OFF)
    assert off.ask is None and off.problem is not None and "perTopic" in off.problem
