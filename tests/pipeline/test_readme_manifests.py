"""The Kubernetes manifests pipeline/README.md shows for N copies of the archive job next
to an NsqCluster: valid for the operator's model and for Kubernetes' own schemas, and
running the command the README documents."""
from __future__ import annotations

import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from nsq_operator.builders.names import lookupd_headless_service
from nsq_operator.constants import LOOKUPD_HTTP_PORT
from nsq_operator.models.cluster import NsqCluster
from nsq_spark.cli import parser

README = Path(__file__).resolve().parents[2] / "pipeline" / "README.md"


def readme_manifests() -> list[dict]:
    section = README.read_text().split("### N copies on Kubernetes", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert block, "no yaml block under 'N copies on Kubernetes'"
    return [doc for doc in yaml.safe_load_all(block.group(1)) if doc]


@pytest.mark.parametrize("version", ["1.28.0", "1.33.0"])
def test_the_readme_s_copies_on_kubernetes_are_valid(version: str) -> None:
    manifests = {m["kind"]: m for m in readme_manifests()}
    assert set(manifests) == {"NsqCluster", "StatefulSet"}
    cluster = NsqCluster.from_body(manifests["NsqCluster"])
    archive = manifests["StatefulSet"]
    kubernetes_validate.validate(archive, version, strict=True)

    container = archive["spec"]["template"]["spec"]["containers"][0]
    args = parser().parse_args(container["args"])  # the command line nsq-spark takes
    assert args.lookupd_http_address == [f"{lookupd_headless_service(cluster)}:{LOOKUPD_HTTP_PORT}"]
    assert args.max_in_flight <= cluster.spec.nsqd.options.max_rdy_count * cluster.spec.nsqd.replicas
    assert archive["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > args.drain_timeout
