"""``to_nsq``: publish stdin to a topic, one message per delimited record.

    tail -F app.log | to_nsq --topic=logs --nsqd-tcp-address=127.0.0.1:4150
    to_nsq --topic=ids --delimiter=, --rate=100 --nsqd-tcp-address=a:4150 --nsqd-tcp-address=b:4150 < ids.csv

Each record is published without its delimiter; empty records are skipped (NSQ has no
empty messages) and a last record without a delimiter after it is published too. With
one nsqd, records are published in order over one connection; with several, through the
failover :class:`ProducerPool` (round-robin over the nsqds that are up, a failed publish
retried on the next), where NSQ's to_nsq would copy every record to every nsqd.
``--rate`` caps the records published per second.

It exits 0 once every record is acknowledged (or after SIGINT/SIGTERM, once what was
sent is answered). At the first failed publish it stops reading, waits for the answers to
what was already sent and exits 1.
"""
from __future__ import annotations

import asyncio
import signal
import sys
from typing import AsyncIterator, BinaryIO, Callable, Sequence

from pydantic import BaseModel, Field

from nsq_protocol.flags import FlagError
from nsq_protocol.names import is_valid_topic_name

from ..config import Config
from ..errors import NsqClientError, ProducerStoppedError
from ..producer import Producer
from ..producer_pool import ProducerPool
from .command_line import USAGE_ERROR, fail, parse_options, run, user_agent
from .config_options import build_config
from .delimited_input import read_records

PROGRAM = "to_nsq"
WINDOW = 256  # publishes awaiting nsqd's answer at once

Submit = Callable[[bytes], "asyncio.Future[None]"]


class ToNsqOptions(BaseModel):
    topic: str = Field("", description="NSQ topic to publish to")
    nsqd_tcp_address: list[str] = Field(default_factory=list,
                                        description="destination nsqd TCP address (may be given multiple times)")
    delimiter: str = Field("\n", description="character to split input from stdin")
    rate: int = Field(0, ge=0, description="Throttle messages to n/second. 0 to disable")
    producer_opt: list[str] = Field(default_factory=list, description=(
        "option to passthrough to the producer's Config, key=value or key,value "
        "(may be given multiple times)"))


def check(options: ToNsqOptions) -> None:
    if not options.topic:
        raise FlagError("--topic required")
    if not is_valid_topic_name(options.topic):
        raise FlagError(f"invalid value {options.topic!r} for flag -topic: not a valid topic name")
    if len(options.delimiter.encode()) != 1:
        raise FlagError(f"invalid value {options.delimiter!r} for flag -delimiter: must be a single byte")
    if not options.nsqd_tcp_address:
        raise FlagError("--nsqd-tcp-address required")


class Pacer:
    """At most ``rate`` starts per second, evenly spaced; 0 means no limit. Time lost
    waiting elsewhere is not made up with a burst."""

    def __init__(self, rate: int) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._next: float | None = None

    async def wait(self) -> None:
        if not self.interval:
            return
        now = asyncio.get_running_loop().time()
        if self._next is None or self._next < now:
            self._next = now
        delay = self._next - now
        self._next += self.interval
        if delay > 0:
            await asyncio.sleep(delay)


class Publisher:
    """Submits records with at most ``window`` unanswered; the first failure stops it."""

    def __init__(self, submit: Submit, window: int, pacer: Pacer) -> None:
        self._submit = submit
        self._slots = asyncio.Semaphore(window)
        self._pacer = pacer
        self._pending: set[asyncio.Future[None]] = set()
        self.published = 0
        self.error: BaseException | None = None
        self.failed = asyncio.Event()

    async def publish_all(self, records: AsyncIterator[bytes]) -> None:
        async for record in records:
            await self._slots.acquire()
            if self.error is not None:
                return
            await self._pacer.wait()
            answer = self._submit(record)
            self._pending.add(answer)
            answer.add_done_callback(self._answered)

    def _answered(self, answer: asyncio.Future[None]) -> None:
        self._pending.discard(answer)
        self._slots.release()
        error = ProducerStoppedError("publish abandoned") if answer.cancelled() else answer.exception()
        if error is None:
            self.published += 1
        elif self.error is None:
            self.error = error
            self.failed.set()

    async def wait_answered(self) -> None:
        if self._pending:
            await asyncio.wait(set(self._pending))


async def to_nsq(options: ToNsqOptions, config: Config, source: BinaryIO) -> int:
    addresses = options.nsqd_tcp_address
    producer = Producer(addresses[0], config) if len(addresses) == 1 else ProducerPool(addresses, config)
    publisher = Publisher(lambda body: producer.publish_nowait(options.topic, body), WINDOW, Pacer(options.rate))
    loop = asyncio.get_running_loop()
    try:
        await producer.connect()
        reading = asyncio.create_task(publisher.publish_all(read_records(source, options.delimiter.encode())))
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, reading.cancel)
        failed = asyncio.create_task(publisher.failed.wait())
        await asyncio.wait({reading, failed}, return_when=asyncio.FIRST_COMPLETED)
        reading.cancel()  # a failed publish stops the reading at once, even while stdin is quiet
        failed.cancel()
        await asyncio.wait({reading})
        if not reading.cancelled() and reading.exception() is not None:
            raise reading.exception()  # type: ignore[misc]
        await publisher.wait_answered()
    except (OSError, NsqClientError, TimeoutError) as err:
        return fail(PROGRAM, f"{err}")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await producer.stop()
    if publisher.error is not None:
        return fail(PROGRAM, f"publish failed after {publisher.published} message(s): {publisher.error}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(PROGRAM, sys.argv[1:] if argv is None else argv, ToNsqOptions, check)
    if isinstance(options, int):
        return options
    try:
        config = build_config(options.producer_opt, "producer-opt", defaults={"user_agent": user_agent(PROGRAM)})
    except FlagError as err:
        print(f"{PROGRAM}: {err}", file=sys.stderr)
        return USAGE_ERROR
    return run(to_nsq(options, config, sys.stdin.buffer))


if __name__ == "__main__":
    sys.exit(main())
