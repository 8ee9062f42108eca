"""``nsq-local``: NSQ on this machine.

    nsq-local up      2 nsqlookupds and N nsqds on loopback ports until Ctrl-C
    nsq-local demo    a rolling restart of the nsqds under load, with the report
    nsq-local demo --scale-down
                      instead, the last nsqd leaves for good: drained, its backlog handed
                      to the other nsqds, stopped, removed; with the report
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from pydantic import ValidationError

from nsq_protocol.version import own_program_version

from .cluster import LocalCluster
from .demo import run_demo
from .options import ClusterOptions, DemoOptions, LoadOptions
from .report import render


def _words(text: str) -> list[str]:
    return [w for w in text.split(",") if w]


def _flags(pairs: list[str]) -> dict[str, str]:
    flags = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"expected name=value, got {pair!r}")
        flags[name.lstrip("-")] = value
    return flags


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nsq-local", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=own_program_version("nsq-local"))
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--nsqds", type=int, default=3, help="number of nsqds (default 3)")
    common.add_argument("--lookupds", type=int, default=2, help="number of nsqlookupds (default 2)")
    common.add_argument("--workdir", type=Path, default=None,
                        help="where nodes keep data and logs (default: a temporary directory, removed at the end)")
    common.add_argument("--base-port", type=int, default=0,
                        help="first of consecutive ports for the nodes (default: free ports)")
    common.add_argument("--nsqd-flag", action="append", default=[], metavar="NAME=VALUE",
                        help="extra nsqd flag, e.g. --nsqd-flag mem-queue-size=100 (repeatable)")
    common.add_argument("--no-admin", action="store_true", help="do not run nsqadmin, the web UI")
    common.add_argument("-v", "--verbose", action="store_true", help="log what the cluster and clients do")

    sub.add_parser("up", parents=[common], help="run a cluster until Ctrl-C")

    demo = sub.add_parser("demo", parents=[common], help="rolling restart under load, with the report")
    demo.add_argument("--topics", type=_words, default=["orders", "clicks"], help="comma-separated")
    demo.add_argument("--channels", type=_words, default=["archive", "alerts"], help="comma-separated")
    demo.add_argument("--rate", type=float, default=1000.0, help="messages per second per topic")
    demo.add_argument("--slow-channel", default=None,
                      help="a channel consuming slower than the publish rate while publishing goes on, so "
                      "each nsqd holds a backlog when drained (default: the first channel; '' for none)")
    demo.add_argument("--slow-share", type=float, default=0.8,
                      help="the share of the publish rate the slow channel keeps up with")
    demo.add_argument("--batch", type=int, default=10, help="messages per MPUB (1: PUB)")
    demo.add_argument("--before", type=float, default=5.0, help="seconds of load before the restart")
    demo.add_argument("--after", type=float, default=5.0, help="seconds of load after it")
    demo.add_argument("--drain-by", choices=["auto", "http", "sigterm"], default="auto",
                      help="POST /drain (http), SIGTERM, or http where nsqd offers it (auto, the default)")
    demo.add_argument("--scale-down", type=int, nargs="?", const=1, default=0, metavar="N",
                      help="instead of the rolling restart, scale down the last N nsqds (default 1) one "
                      "at a time, each handing its backlog to the others (POST /drain?handoff=...)")
    demo.add_argument("--handoff-timeout", type=float, default=60.0,
                      help="seconds a scaled-down nsqd has to hand its backlog off")
    demo.add_argument("--settle-timeout", type=float, default=30.0,
                      help="seconds for the last messages to arrive once publishing stopped")
    return parser


def _cluster_options(args: argparse.Namespace, workdir: Path) -> ClusterOptions:
    return ClusterOptions(nsqds=args.nsqds, lookupds=args.lookupds, workdir=workdir,
                          base_port=args.base_port, nsqd_flags=_flags(args.nsqd_flag), admin=not args.no_admin)


async def _up(options: ClusterOptions) -> int:
    cluster = LocalCluster(options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await cluster.start()
    try:
        lines = [f"cluster up, data and logs in {options.workdir}"]
        lines += [f"  {node.name:<13} TCP {node.tcp_address}  HTTP {node.http_address}"
                  for node in cluster.lookupds + cluster.nsqds]
        if cluster.admin_url:
            lines.append(f"nsqadmin: {cluster.admin_url}")
        lines += ["consumers: " + " ".join(f"--lookupd-http-address={a}" for a in cluster.lookupd_http_addresses),
                  "producers: " + " ".join(f"--nsqd-tcp-address={a}" for a in cluster.nsqd_tcp_addresses),
                  "Ctrl-C stops it"]
        print("\n".join(lines), flush=True)
        await stop.wait()
    finally:
        codes = await cluster.stop()
    print("stopped: " + ", ".join(f"{name} exit {code}" for name, code in codes.items()))
    return 0 if all(code == 0 for code in codes.values()) else 1


async def _demo(options: DemoOptions) -> int:
    report = await run_demo(options, progress=lambda line: print(line, flush=True))
    print()
    print(render(report))
    return 0 if report.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    with tempfile.TemporaryDirectory(prefix="nsq-local-") as tmp:
        workdir = args.workdir or Path(tmp)
        try:
            cluster = _cluster_options(args, workdir)
            if args.command == "up":
                return asyncio.run(_up(cluster))
            options = DemoOptions(
                cluster=cluster, before=args.before, after=args.after, settle_timeout=args.settle_timeout,
                drain_by=args.drain_by, scale_down=args.scale_down, handoff_timeout=args.handoff_timeout,
                load=LoadOptions(topics=args.topics, channels=args.channels, rate=args.rate, batch=args.batch,
                                 slow_channel=args.channels[0] if args.slow_channel is None else args.slow_channel or None,
                                 slow_share=args.slow_share))
        except (ValidationError, argparse.ArgumentTypeError) as err:
            parser.error(str(err))
        return asyncio.run(_demo(options))


if __name__ == "__main__":
    sys.exit(main())
