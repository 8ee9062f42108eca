"""``python -m nsq_local.kubeload``: the load of :mod:`nsq_local.load` run against a
cluster someone else runs (a Kubernetes Job next to an NsqCluster, or a test's pods),
until told to stop; then it waits for every acknowledged message to reach every channel
and prints the counts, the last line as ``RESULT {json}``. Exit 0 when nothing
acknowledged was lost.

    python -m nsq_local.kubeload \\
        --nsqd-tcp-address nsq-nsqd-0.nsq-nsqd-headless.ns.svc:4150 ... \\
        --lookupd-http-address nsq-lookupd-0.nsq-lookupd.ns.svc:4161 ... \\
        --topic orders --channel billing --channel archive --stop-file /work/stop

Producers go through one producer pool over the given nsqds and every nsqd the lookupds
list (a pod replaced on another address is found again); consumers find their nsqds
through the lookupds. Stop by creating the stop file, by SIGTERM/SIGINT, or with
``--duration``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from nsq_client import ProducerPool

from .ledger import Ledger, Tally
from .load import Load
from .options import LoadOptions

STOP_FILE_POLL = 0.5  # seconds between looks at the stop file
RESULT_PREFIX = "RESULT "


class DiscoveringLoad(Load):
    """A :class:`Load` whose producer pool also publishes to every nsqd the lookupds list,
    so it follows nsqds that come back on new addresses."""

    async def start(self) -> None:
        await self._start_consumers()
        self._pool = ProducerPool(self._nsqds, self.config(lookupd_poll_interval=self.options.lookupd_poll_interval),
                                  lookupd_addresses=self._lookupds)
        await self._pool.connect()
        interval = self.options.batch * self.options.publishers / self.options.rate
        for topic in self.options.topics:
            for i in range(self.options.publishers):
                self._publishers.append(asyncio.create_task(
                    self._publish_loop(self._pool, topic, interval, offset=i * interval / self.options.publishers),
                    name=f"nsq-kubeload-publish-{topic}-{i}"))


def summary(tally: Tally, all_delivered: bool) -> dict[str, Any]:
    """The counts a script or a test checks, JSON-ready."""
    return {
        "ok": tally.lost == 0 and tally.acknowledged > 0 and all_delivered,
        "published": tally.published, "acknowledged": tally.acknowledged, "failed": tally.failed,
        "delivered": tally.delivered, "lost": tally.lost, "duplicates": tally.duplicates,
        "unknown": tally.unknown, "all_delivered": all_delivered,
        "channels": [{"topic": c.topic, "channel": c.channel, "acknowledged": c.acknowledged,
                      "delivered": c.delivered, "lost": c.lost, "duplicates": c.duplicates,
                      "failed_but_delivered": c.failed_but_delivered} for c in tally.channels],
        "phases": [{"name": p.name, "seconds": round(p.seconds, 3), "acknowledged": p.acknowledged,
                    "deliveries": p.deliveries} for p in tally.phases],
        "deliveries_by_node": {phase: dict(counts) for phase, counts in tally.deliveries_by_node.items()},
    }


def render(result: dict[str, Any]) -> str:
    lines = [f"published     {result['published']}",
             f"acknowledged  {result['acknowledged']}   (publishes failed on every nsqd: {result['failed']})",
             f"delivered     {result['delivered']}   (distinct messages, summed over channels)",
             f"lost          {result['lost']}",
             f"duplicates    {result['duplicates']}"]
    lines += [f"  {c['topic']}/{c['channel']}: acknowledged {c['acknowledged']} delivered {c['delivered']} "
              f"lost {c['lost']} duplicates {c['duplicates']}" for c in result["channels"]]
    if not result["all_delivered"]:
        lines.append("some acknowledged messages were not delivered before the deadline")
    lines.append(("OK" if result["ok"] else "FAILED") + f": {result['lost']} acknowledged messages lost")
    lines.append(RESULT_PREFIX + json.dumps(result, sort_keys=True))
    return "\n".join(lines)


async def _stopped(stop: asyncio.Event, stop_file: Path | None, duration: float | None) -> None:
    """Until ``stop`` is set, ``stop_file`` exists or ``duration`` seconds passed."""
    deadline = None if duration is None else time.monotonic() + duration
    while not stop.is_set():
        if stop_file is not None and stop_file.exists():
            return
        if deadline is not None and time.monotonic() >= deadline:
            return
        try:
            async with asyncio.timeout(STOP_FILE_POLL):
                await stop.wait()
        except TimeoutError:
            pass


async def run(options: LoadOptions, nsqds: list[str], lookupds: list[str], *, stop_file: Path | None,
              duration: float | None, settle_timeout: float, connection: dict[str, Any] | None = None) -> dict[str, Any]:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    ledger = Ledger(options.topics, options.channels, first_phase="load")
    load = DiscoveringLoad(options, ledger, nsqds, lookupds, connection=connection)
    try:
        await load.start()
        print(f"publishing to {options.topics}, consuming {options.channels}", flush=True)
        await _stopped(stop, stop_file, duration)
        ledger.begin_phase("settle")
        await load.stop_publishing()
        print("publishing stopped; waiting for every acknowledged message to be delivered", flush=True)
        delivered = await load.wait_all_delivered(settle_timeout)
    finally:
        await load.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return summary(ledger.tally(), delivered)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nsq_local.kubeload", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nsqd-tcp-address", action="append", default=[], help="an nsqd for the producers (repeatable)")
    parser.add_argument("--lookupd-http-address", action="append", default=[], required=True,
                        help="a lookupd for consumers and producers (repeatable)")
    parser.add_argument("--topic", action="append", default=[], help="a topic to publish to (repeatable)")
    parser.add_argument("--channel", action="append", default=[], help="a channel consumed on every topic (repeatable)")
    parser.add_argument("--rate", type=float, default=200.0, help="messages per second per topic")
    parser.add_argument("--batch", type=int, default=10, help="messages per MPUB (1: PUB)")
    parser.add_argument("--stop-file", type=Path, default=None, help="stop publishing once this file exists")
    parser.add_argument("--duration", type=float, default=None, help="stop publishing after this many seconds")
    parser.add_argument("--settle-timeout", type=float, default=120.0,
                        help="seconds for the last messages to be delivered once publishing stopped")
    parser.add_argument("--tls-root-ca-file", default=None,
                        help="connect to nsqd over TLS, trusting this CA (an NsqCluster with spec.tls)")
    parser.add_argument("--auth-secret", default="", help="the secret sent with AUTH (an NsqCluster with spec.auth)")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def connection_of(args: argparse.Namespace) -> dict[str, Any]:
    connection: dict[str, Any] = {}
    if args.tls_root_ca_file:
        connection.update(tls_v1=True, tls_root_ca_file=args.tls_root_ca_file)
    if args.auth_secret:
        connection["auth_secret"] = args.auth_secret
    return connection


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.stop_file is None and args.duration is None:
        parser.error("give --stop-file or --duration (or both)")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        options = LoadOptions(topics=args.topic or ["orders"], channels=args.channel or ["billing"],
                              rate=args.rate, batch=args.batch)
    except ValueError as err:
        parser.error(str(err))
    result = asyncio.run(run(options, args.nsqd_tcp_address, args.lookupd_http_address, stop_file=args.stop_file,
                             duration=args.duration, settle_timeout=args.settle_timeout,
                             connection=connection_of(args)))
    print(render(result), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
