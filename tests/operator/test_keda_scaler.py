"""KEDA's nsq scaler against our nsqlookupd and nsqd: the calls it makes (tests/keda_nsq.py)
read the depth it would scale on, for every case its rules distinguish: a channel on two
nsqds, one of them paused, a topic without channels, a channel a topic lacks, a topic no
lookupd knows, and a plain-HTTP-closed nsqd (--tls-required=true), which it cannot read.
The same calls against Go's nsqd and nsqlookupd v1.3.0 read the same depths. The example
ScaledObject (operator/examples/keda-scaledobject.yaml) is valid for KEDA's CRD and names
the example cluster's lookupds, topic and channel."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from nsq_operator.builders import names
from nsq_operator.constants import LOOKUPD_HTTP_PORT
from tests import custom_kinds, keda_nsq
from tests.broker.certs import make_pki
from tests.broker.tls_nsqd import TlsNsqd
from tests.reference import FLAVOURS, GoNsqd, GoNsqlookupd, flavour_or_skip, skip_unless_present, NSQLOOKUPD_REF
from tests.servers import Nsqd, Nsqlookupd, wait_for
from tests.operator.samples import cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "operator" / "examples"


def _publish(nsqd: Nsqd, topic: str, count: int) -> None:
    for i in range(count):
        assert nsqd.post(f"/pub?topic={topic}", f"m{i}".encode()).status == 200


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_scaler_reads_the_depth_of_a_channel_over_every_nsqd(servers: Any, flavour: str) -> None:
    if flavour_or_skip(flavour) == "go":
        skip_unless_present(NSQLOOKUPD_REF, "NSQLOOKUPD_REF")
    nsqd_kind, lookupd_kind = (GoNsqd, GoNsqlookupd) if flavour == "go" else (Nsqd, Nsqlookupd)
    lookupd = servers.lookupd(kind=lookupd_kind)
    one, two = (servers.nsqd(kind=nsqd_kind, lookupd_tcp_address=lookupd.tcp_address) for _ in range(2))
    lookupds = [lookupd.http_address]
    for nsqd, count in ((one, 3), (two, 4)):
        assert nsqd.post("/topic/create?topic=orders").status == 200
        assert nsqd.post("/channel/create?topic=orders&channel=billing").status == 200
        _publish(nsqd, "orders", count)
    wait_for(lambda: len(keda_nsq.producers(lookupds, "orders")) == 2, 10, message="both nsqds registered")
    assert keda_nsq.depth(lookupds, "orders", "billing") == 7

    assert two.post("/channel/pause?topic=orders&channel=billing").status == 200
    assert keda_nsq.depth(lookupds, "orders", "billing") == 3  # a paused channel's depth is left out

    # the topic has channels, not this one: the topic's own depth (0: every message went to billing)
    assert keda_nsq.depth(lookupds, "orders", "audit") == 0
    # a topic without channels: its depth, whatever channel is asked for
    _publish(one, "fresh", 2)
    wait_for(lambda: keda_nsq.producers(lookupds, "fresh"), 10, message="fresh registered")
    assert keda_nsq.depth(lookupds, "fresh", "billing") == 2
    # a topic no lookupd knows: 404, depth 0
    assert keda_nsq.producers(lookupds, "nowhere") == []
    assert keda_nsq.depth(lookupds, "nowhere", "billing") == 0


def test_an_nsqd_whose_plain_http_is_closed_fails_the_scaler(servers: Any, tmp_path: Path) -> None:
    """The scaler speaks plain HTTP only: an NsqCluster scaled by KEDA keeps it open
    (spec.tls.required: tcp-https, TCP clients still need TLS)."""
    pki = make_pki(tmp_path / "pki")
    lookupd = servers.lookupd()
    lookupds = [lookupd.http_address]
    started = []
    try:
        for n, required in enumerate(("tcp-https", "true")):
            nsqd = TlsNsqd(tmp_path / f"nsqd-{n}", pki, {"tls-required": required,
                                                         "lookupd-tcp-address": lookupd.tcp_address})
            started.append(nsqd)
            nsqd.start()
            topic = f"orders-{required}"
            assert nsqd.https("POST", f"/topic/create?topic={topic}")[0] == 200
            assert nsqd.https("POST", f"/channel/create?topic={topic}&channel=billing")[0] == 200
            for i in range(5):
                assert nsqd.https("POST", f"/pub?topic={topic}", f"m{i}".encode())[0] == 200
            wait_for(lambda: keda_nsq.producers(lookupds, topic), 10, message=f"{topic} registered")
        assert keda_nsq.depth(lookupds, "orders-tcp-https", "billing") == 5
        with pytest.raises(keda_nsq.ScaleError, match="unexpected status code 403"):
            keda_nsq.depth(lookupds, "orders-true", "billing")
    finally:
        for nsqd in started:
            nsqd.stop()


def test_the_example_scaled_object_fits_keda_and_the_example_cluster() -> None:
    scaled = yaml.safe_load((EXAMPLES / "keda-scaledobject.yaml").read_text())
    custom_kinds.validate(scaled)
    [trigger] = scaled["spec"]["triggers"]
    assert trigger["type"] == "nsq"
    meta = trigger["metadata"]
    documents = list(yaml.safe_load_all((EXAMPLES / "nsq.yaml").read_text()))
    example = next(d for d in documents if d["kind"] == "NsqCluster")
    built = cluster(example["metadata"]["name"], scaled["metadata"]["namespace"], **example["spec"])
    service = f"{names.lookupd_headless_service(built)}.{built.namespace}.svc:{LOOKUPD_HTTP_PORT}"
    assert meta["nsqLookupdHTTPAddresses"] == service
    channels = {(d["spec"]["topic"], d["spec"].get("channelName", d["metadata"]["name"])) for d in documents
                if d["kind"] == "NsqChannel"}
    assert (meta["topic"], meta["channel"]) in channels
    assert int(meta["depthThreshold"]) > 0 and int(meta["activationDepthThreshold"]) >= 0
