"""``nsq_stat``: poll one channel's stats across a cluster and print NSQ's nsq_stat table.

    nsq_stat --topic=events --channel=archive --lookupd-http-address=127.0.0.1:4161
    nsq_stat --topic=events --channel=archive --nsqd-http-address=10.0.0.1:4151 \\
             --nsqd-http-address=10.0.0.2:4151 --interval=5s --count=10

The first poll is the baseline for the rates, so a row is printed from the second poll
on; ``--count`` rows are printed, then it exits 0 (without ``--count`` it runs until
SIGINT/SIGTERM). The two header lines come first and again every 25 polls, as NSQ's
nsq_stat prints them. ``--status-every`` is NSQ's deprecated name for ``--interval``: when
given, it is the interval (and a line on stderr says so). It exits 1 when no nsqd has the
channel or none answers.
"""
from __future__ import annotations

import asyncio
import signal
import sys
from typing import Annotated, Sequence, TextIO

from pydantic import BaseModel, Field

from nsq_protocol.flags import Duration, FlagError

from .cluster_stats import ClusterStats, StatsUnavailableError
from .command_line import fail, parse_options, run
from .stat_table import header_lines, row

PROGRAM = "nsq_stat"
HEADER_EVERY = 25  # polls


class StatOptions(BaseModel):
    topic: str = Field("", description="NSQ topic")
    channel: str = Field("", description="NSQ channel")
    nsqd_http_address: list[str] = Field(default_factory=list,
                                         description="nsqd HTTP address (may be given multiple times)")
    lookupd_http_address: list[str] = Field(default_factory=list,
                                            description="lookupd HTTP address (may be given multiple times)")
    interval: Annotated[Duration, Field(gt=0)] = Field(2.0, description="duration of time between polling/printing output")
    count: int | None = Field(None, gt=0, description="number of reports (default: until interrupted)")
    status_every: Annotated[Duration, Field(gt=0)] | None = Field(
        None, description="(deprecated) duration of time between polling/printing output")
    http_client_connect_timeout: Annotated[Duration, Field(gt=0)] = Field(2.0, description="timeout for HTTP connect")
    http_client_request_timeout: Annotated[Duration, Field(gt=0)] = Field(5.0, description="timeout for HTTP request")


def effective_interval(options: StatOptions) -> float:
    return options.status_every if options.status_every is not None else options.interval


def check(options: StatOptions) -> None:
    if not options.topic or not options.channel:
        raise FlagError("--topic and --channel are required")
    if not options.nsqd_http_address and not options.lookupd_http_address:
        raise FlagError("--nsqd-http-address or --lookupd-http-address required")
    if options.nsqd_http_address and options.lookupd_http_address:
        raise FlagError("use --nsqd-http-address or --lookupd-http-address not both")


async def stat_loop(options: StatOptions, out: TextIO, stop: asyncio.Event) -> int:
    cluster = ClusterStats(options.topic, options.channel, nsqd_http_addresses=options.nsqd_http_address,
                           lookupd_http_addresses=options.lookupd_http_address,
                           timeout=options.http_client_request_timeout,
                           connect_timeout=options.http_client_connect_timeout)
    interval = effective_interval(options)
    previous = None
    poll = 0
    try:
        while not stop.is_set():
            try:
                current = await cluster.totals()
            except StatsUnavailableError as err:
                return fail(PROGRAM, str(err))
            if current is None:
                return fail(PROGRAM, f"failed to find channel({options.channel}) in stats metadata "
                                     f"for topic({options.topic})")
            lines = header_lines() if poll % HEADER_EVERY == 0 else []
            if previous is not None:
                lines.append(row(previous, current, interval))
            if lines:
                out.write("\n".join(lines) + "\n")
                out.flush()
            previous = current
            if options.count is not None and poll >= options.count:
                break
            poll += 1
            try:
                async with asyncio.timeout(interval):
                    await stop.wait()
            except TimeoutError:
                pass
    finally:
        await cluster.close()
    return 0


async def serve(options: StatOptions, out: TextIO) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    return await stat_loop(options, out, stop)


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(PROGRAM, sys.argv[1:] if argv is None else argv, StatOptions, check)
    if isinstance(options, int):
        return options
    if options.status_every is not None:
        print(f"{PROGRAM}: --status-every is deprecated, use --interval", file=sys.stderr)
    return run(serve(options, sys.stdout))


if __name__ == "__main__":
    sys.exit(main())
