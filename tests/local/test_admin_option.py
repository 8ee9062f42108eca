"""``nsq-local up`` and ``demo`` run nsqadmin beside the cluster unless ``--no-admin``."""
from __future__ import annotations

from pathlib import Path

from nsq_local import cli
from nsq_local.cluster import LocalCluster
from nsq_local.options import ClusterOptions


def test_the_commands_ask_for_nsqadmin_unless_told_not_to(tmp_path: Path) -> None:
    for command in ("up", "demo"):
        assert cli._cluster_options(cli._parser().parse_args([command]), tmp_path).admin is True
        assert cli._cluster_options(cli._parser().parse_args([command, "--no-admin"]), tmp_path).admin is False


def test_nsqadmin_asks_every_lookupd_and_takes_a_port_of_its_own(tmp_path: Path) -> None:
    cluster = LocalCluster(ClusterOptions(workdir=tmp_path, nsqds=1, lookupds=2, admin=True, base_port=20000))
    assert cluster.admin is not None
    argv = cluster.admin.argv()
    assert argv[1:] == [f"--http-address={cluster.admin.http_address}",
                        *(f"--lookupd-http-address={a}" for a in cluster.lookupd_http_addresses)]
    taken = {n.http_port for n in cluster.lookupds + cluster.nsqds} | {n.tcp_port for n in cluster.lookupds + cluster.nsqds}
    assert cluster.admin.http_port not in taken and cluster.admin_url == f"http://{cluster.admin.http_address}/"
    assert LocalCluster(ClusterOptions(workdir=tmp_path / "plain")).admin is None
