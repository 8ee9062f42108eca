"""``make demo``: a rolling restart of a local 3-nsqd cluster under load, with 0 lost.
With ``scale_down`` (``nsq-local demo --scale-down``), the last nsqd(s) are scaled down
instead: each drained, its backlog handed to the others, stopped and removed.

Starts 2 nsqlookupds and 3 nsqds (each with its own data directory and ports), creates
the topics and channels on every nsqd, starts producers (one producer pool over the
nsqds) and consumers (through the lookupds), and then: load for a while; drain, restart
and wait for each nsqd in turn while the load goes on; load for a while again; stop
publishing and wait until every channel got every acknowledged message. Prints the
report and exits 1 if an acknowledged message was lost or a node did not stop cleanly.

``python -m nsq_local.demo [options]`` is ``nsq-local demo [options]``.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from .cluster import LocalCluster
from .ledger import Ledger
from .load import ConsumersFactory, Load
from .options import DemoOptions
from .processes import Node
from .report import Report
from .rolling import NodeRestart, RollingRestartError, rolling_restart
from .scaling import NodeScaleDown, ScaleDownError, scale_down_last
from .waiting import NotReachedError, wait_until

log = logging.getLogger("nsq_local")

Progress = Callable[[str], None]


def _quiet(message: str) -> None:
    log.info("%s", message)


async def run_demo(options: DemoOptions, progress: Progress = _quiet,
                   consumers: ConsumersFactory | None = None) -> Report:
    """The demo; ``consumers``: others than the load's own (see :class:`Load`)."""
    started = time.monotonic()
    cluster = LocalCluster(options.cluster)
    topics, channels = options.load.topics, options.load.channels
    errors: list[str] = []
    restarts: list[NodeRestart] = []
    scale_downs: list[NodeScaleDown] = []
    progress(f"starting {len(cluster.lookupds)} nsqlookupds and {len(cluster.nsqds)} nsqds "
             f"in {options.cluster.workdir}")
    await cluster.start()
    node_names = {n.tcp_address: n.name for n in cluster.nsqds}  # scaled-down ones included
    try:
        for node in cluster.lookupds + cluster.nsqds:
            progress(f"  {node.name:<13} TCP {node.tcp_address}  HTTP {node.http_address}")
        if cluster.admin_url:
            progress(f"nsqadmin: {cluster.admin_url} (the cluster's web UI, while the demo runs)")
        await cluster.create_topics(topics, channels)
        ledger = Ledger(topics, channels, first_phase="before")
        load = Load(options.load, ledger, cluster.nsqd_tcp_addresses, cluster.lookupd_http_addresses,
                    consumers)
        progress(f"load: {len(topics)} topics x {len(channels)} channels, "
                 f"{options.load.rate:g} messages/s per topic; {options.before:g}s before the "
                 f"{'scale-down' if options.scale_down else 'restart'}")
        await load.start()
        try:
            await asyncio.sleep(options.before)  # a phase of steady load, not a wait for anything
            ledger.begin_phase("during")
            if options.scale_down:
                scale_downs, step_errors = await _scale_down(cluster, load, options, progress)
            else:
                restarts, step_errors = await _rolling_restart(cluster, options, progress)
            errors += step_errors
            ledger.begin_phase("after")
            progress(f"load goes on for {options.after:g}s")
            await asyncio.sleep(options.after)
            errors += await _wait_all_nodes_deliver(ledger, cluster, options.settle_timeout)
            await load.stop_publishing()
            ledger.begin_phase("settle")
            progress("publishing stopped; waiting until every acknowledged message is delivered")
            all_delivered = await load.wait_all_delivered(options.settle_timeout)
            settled = time.monotonic()
        finally:
            await load.stop()
    finally:
        codes = await cluster.stop()
    errors += [f"{name} exited with {code} when the cluster stopped" for name, code in codes.items() if code != 0]
    return Report(tally=ledger.tally(now=settled), restarts=restarts, nsqds=len(node_names),
                  lookupds=len(cluster.lookupds), all_delivered=all_delivered, errors=errors,
                  seconds=time.monotonic() - started, node_names=node_names,
                  scale_downs=scale_downs, planned_scale_downs=options.scale_down)


async def _rolling_restart(cluster: LocalCluster, options: DemoOptions,
                           progress: Progress) -> tuple[list[NodeRestart], list[str]]:
    progress("rolling restart: drain, restart on the same data directory, wait until "
             "ready and registered, next")

    def on_restart(r: NodeRestart) -> None:
        progress(f"  {r.name}: held {r.held} messages, drained by {r.drained_by} in "
                 f"{r.drain_seconds:.2f}s, exit code {r.exit_code}, back {r.back_seconds:.2f}s later")
    try:
        return await rolling_restart(cluster, options.exit_timeout, options.drain_by, on_restart), []
    except RollingRestartError as err:
        return err.restarts, [str(err)]


async def _scale_down(cluster: LocalCluster, load: Load, options: DemoOptions,
                      progress: Progress) -> tuple[list[NodeScaleDown], list[str]]:
    progress(f"scale-down of the last {options.scale_down} nsqd(s): drain, hand the backlog to the "
             "other nsqds, stop, remove from the cluster and the producers' pool")

    async def on_removed(node: Node, r: NodeScaleDown) -> None:
        await load.remove_nsqd(node.tcp_address)
        progress(f"  {r.name}: held {r.held} messages, handed off {r.handed_off} messages of {r.topics} "
                 f"topics to {', '.join(r.targets)} in {r.handoff_seconds:.2f}s, exit code {r.exit_code}")
    try:
        return await scale_down_last(cluster, options.scale_down, handoff_timeout=options.handoff_timeout,
                                     exit_timeout=options.exit_timeout, on_removed=on_removed), []
    except ScaleDownError as err:
        return err.done, [str(err)]


async def _wait_all_nodes_deliver(ledger: Ledger, cluster: LocalCluster, timeout: float) -> list[str]:
    """The phase after the roll lasts until consumers got messages from every nsqd again
    (restarted nodes are back in use by producers and consumers); the nodes that did not
    deliver within ``timeout`` are errors."""
    every = set(cluster.nsqd_tcp_addresses)

    async def all_deliver() -> bool:
        return set(ledger.deliveries_by_node("after")) >= every
    try:
        await wait_until(all_deliver, timeout, "every nsqd delivering after the rolling restart or scale-down", interval=0.1)
    except NotReachedError:
        idle = every - set(ledger.deliveries_by_node("after"))
        return [f"{address} delivered nothing after the rolling restart or scale-down" for address in sorted(idle)]
    return []


def main() -> int:
    from .cli import main as cli_main
    import sys
    return cli_main(["demo", *sys.argv[1:]])


if __name__ == "__main__":
    raise SystemExit(main())
