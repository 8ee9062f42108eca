"""``make demo``: a rolling restart of a local 3-nsqd cluster under load, with 0 lost.

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
from .report import Report
from .rolling import NodeRestart, RollingRestartError, rolling_restart
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
    progress(f"starting {len(cluster.lookupds)} nsqlookupds and {len(cluster.nsqds)} nsqds "
             f"in {options.cluster.workdir}")
    await cluster.start()
    try:
        for node in cluster.lookupds + cluster.nsqds:
            progress(f"  {node.name:<13} TCP {node.tcp_address}  HTTP {node.http_address}")
        await cluster.create_topics(topics, channels)
        ledger = Ledger(topics, channels, first_phase="before")
        load = Load(options.load, ledger, cluster.nsqd_tcp_addresses, cluster.lookupd_http_addresses,
                    consumers)
        progress(f"load: {len(topics)} topics x {len(channels)} channels, "
                 f"{options.load.rate:g} messages/s per topic; {options.before:g}s before the restart")
        await load.start()
        try:
            await asyncio.sleep(options.before)  # a phase of steady load, not a wait for anything
            ledger.begin_phase("during")
            progress("rolling restart: drain, restart on the same data directory, wait until "
                     "ready and registered, next")

            def on_restart(r: NodeRestart) -> None:
                progress(f"  {r.name}: held {r.held} messages, drained by {r.drained_by} in "
                         f"{r.drain_seconds:.2f}s, exit code {r.exit_code}, back {r.back_seconds:.2f}s later")
            try:
                restarts = await rolling_restart(cluster, options.exit_timeout, options.drain_by, on_restart)
            except RollingRestartError as err:
                restarts = err.restarts
                errors.append(str(err))
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
    return Report(tally=ledger.tally(now=settled), restarts=restarts, nsqds=len(cluster.nsqds),
                  lookupds=len(cluster.lookupds), all_delivered=all_delivered, errors=errors,
                  seconds=time.monotonic() - started,
                  node_names={n.tcp_address: n.name for n in cluster.nsqds})


async def _wait_all_nodes_deliver(ledger: Ledger, cluster: LocalCluster, timeout: float) -> list[str]:
    """The phase after the roll lasts until consumers got messages from every nsqd again
    (restarted nodes are back in use by producers and consumers); the nodes that did not
    deliver within ``timeout`` are errors."""
    every = set(cluster.nsqd_tcp_addresses)

    async def all_deliver() -> bool:
        return set(ledger.deliveries_by_node("after")) >= every
    try:
        await wait_until(all_deliver, timeout, "every nsqd delivering after the rolling restart", interval=0.1)
    except NotReachedError:
        idle = every - set(ledger.deliveries_by_node("after"))
        return [f"{address} delivered nothing after the rolling restart" for address in sorted(idle)]
    return []


def main() -> int:
    from .cli import main as cli_main
    import sys
    return cli_main(["demo", *sys.argv[1:]])


if __name__ == "__main__":
    raise SystemExit(main())
