"""``nsq_tail``: print the messages of one or more topics to stdout, one per line.

    nsq_tail --topic=events --lookupd-http-address=127.0.0.1:4161
    nsq_tail --topic=events --nsqd-tcp-address=127.0.0.1:4150 --n=10 --print-topic

It subscribes an ephemeral channel of its own (``tail<6 digits>#ephemeral``) unless
``--channel`` names one, so it takes a copy of the stream without disturbing other
consumers. With ``--n`` it prints that many messages in all and exits 0; messages that
arrive after the last one it prints are requeued, not lost. SIGINT/SIGTERM stop it
gracefully (exit 0).
"""
from __future__ import annotations

import asyncio
import os
import random
import sys
from typing import BinaryIO, Callable, Sequence

from pydantic import BaseModel, Field

from nsq_protocol.flags import FlagError
from nsq_protocol.names import is_valid_channel_name, is_valid_topic_name

from ..config import Config
from ..consumer import Consumer, Handler
from ..errors import NsqClientError
from ..message import Message
from ..signals import stop_on_signals
from .command_line import USAGE_ERROR, fail, parse_options, run, user_agent
from .config_options import build_config

PROGRAM = "nsq_tail"


class TailOptions(BaseModel):
    topic: list[str] = Field(default_factory=list, description="NSQ topic (may be given multiple times)")
    channel: str = Field("", description="NSQ channel (default: tail<random>#ephemeral)")
    nsqd_tcp_address: list[str] = Field(default_factory=list,
                                        description="nsqd TCP address (may be given multiple times)")
    lookupd_http_address: list[str] = Field(default_factory=list,
                                            description="lookupd HTTP address (may be given multiple times)")
    n: int = Field(0, ge=0, description="total messages to show (will wait if starved)")
    print_topic: bool = Field(False, description="print topic name where message was received")
    max_in_flight: int = Field(200, ge=0, description="max number of messages to allow in flight")
    consumer_opt: list[str] = Field(default_factory=list, description=(
        "option to passthrough to the consumer's Config, key=value or key,value "
        "(may be given multiple times)"))


def check(options: TailOptions) -> None:
    if not options.topic:
        raise FlagError("--topic is required")
    for topic in options.topic:
        if not is_valid_topic_name(topic):
            raise FlagError(f"invalid value {topic!r} for flag -topic: not a valid topic name")
    if options.channel and not is_valid_channel_name(options.channel):
        raise FlagError(f"invalid value {options.channel!r} for flag -channel: not a valid channel name")
    if not options.nsqd_tcp_address and not options.lookupd_http_address:
        raise FlagError("--nsqd-tcp-address or --lookupd-http-address required")
    if options.nsqd_tcp_address and options.lookupd_http_address:
        raise FlagError("use --nsqd-tcp-address or --lookupd-http-address not both")


def consumer_config(options: TailOptions) -> Config:
    # never ask for more messages than will be shown
    max_in_flight = options.max_in_flight
    if 0 < options.n < max_in_flight:
        max_in_flight = options.n
    return build_config(options.consumer_opt, "consumer-opt", defaults={"user_agent": user_agent(PROGRAM)},
                        overrides={"max_in_flight": max_in_flight})


class TailPrinter:
    """Writes each message as ``body\\n`` (``topic | body\\n`` with ``--print-topic``) and
    calls ``on_done`` once ``limit`` messages are out (0: never) or stdout fails."""

    def __init__(self, out: BinaryIO, limit: int, print_topic: bool, on_done: Callable[[], None]) -> None:
        self.out = out
        self.limit = limit
        self.print_topic = print_topic
        self.on_done = on_done
        self.shown = 0
        self.error: OSError | None = None

    @property
    def finished(self) -> bool:
        return self.error is not None or (self.limit > 0 and self.shown >= self.limit)

    def handler(self, topic: str) -> Handler:
        prefix = f"{topic} | ".encode() if self.print_topic else b""

        async def show(message: Message) -> None:
            if self.finished:  # beyond --n: another consumer of the channel may take it
                message.requeue(0, backoff=False)
                return
            try:
                self.out.write(prefix + message.body + b"\n")
                self.out.flush()
            except OSError as err:
                self.error = err
                message.requeue(0, backoff=False)
                self.on_done()
                return
            self.shown += 1
            if self.finished:
                self.on_done()
        return show


async def tail(options: TailOptions, config: Config, out: BinaryIO) -> int:
    channel = options.channel or f"tail{random.randrange(999999):06d}#ephemeral"
    done = asyncio.Event()
    printer = TailPrinter(out, options.n, options.print_topic, done.set)
    consumers = [Consumer(topic, channel, config, handler=printer.handler(topic)) for topic in options.topic]
    remove_handlers = stop_on_signals(*consumers, on_done=lambda _: done.set())
    try:
        for consumer in consumers:
            if options.nsqd_tcp_address:
                await consumer.connect_to_nsqds(options.nsqd_tcp_address)
            else:
                await consumer.connect_to_lookupds(options.lookupd_http_address)
        await done.wait()
    except (OSError, NsqClientError, TimeoutError) as err:
        return fail(PROGRAM, f"{err}")
    finally:
        remove_handlers()
        await asyncio.gather(*(consumer.stop() for consumer in consumers))
    if printer.error is not None:
        _silence_stdout()
        return fail(PROGRAM, f"failed to write to stdout - {printer.error}")
    return 0


def _silence_stdout() -> None:
    """After a broken pipe, let the interpreter's final flush of stdout go nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(PROGRAM, sys.argv[1:] if argv is None else argv, TailOptions, check)
    if isinstance(options, int):
        return options
    try:
        config = consumer_config(options)
    except FlagError as err:
        print(f"{PROGRAM}: {err}", file=sys.stderr)
        return USAGE_ERROR
    return run(tail(options, config, sys.stdout.buffer))


if __name__ == "__main__":
    sys.exit(main())
