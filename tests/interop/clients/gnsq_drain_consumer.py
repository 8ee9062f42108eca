"""A gnsq ``Consumer`` (gnsq never sends CLS) that finds its nsqds through lookupd and
holds messages in flight on request, until killed.

Bodies whose ID starts with ``--hold`` are left unanswered until the file ``--release``
exists; then those are FINed, and so is every later message as its handler returns.
Other messages are FINed as their handler returns.

Output, one JSON line each:
``{"event": "connected" | "disconnected", "nsqd"}`` for each connection gnsq opens or loses;
``{"channel", "id", "intact", "attempts", "msg_id", "nsqd", "held"}`` per delivery;
``{"event": "finished", "id", "nsqd"}`` when a held message is FINed;
``{"event": "error", "error"}`` for each error frame an nsqd sends.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

import gevent
import gnsq

from bodies import read_body
from jsonl import emit, text

RELEASE_POLL_INTERVAL = 0.05


class ReportingConsumer(gnsq.Consumer):
    """gnsq's Consumer, saying which connection each event happened on."""

    def handle_connection_success(self, conn: Any) -> None:
        emit(event="connected", nsqd=str(conn))
        super().handle_connection_success(conn)

    def handle_connection_failure(self, conn: Any) -> None:
        emit(event="disconnected", nsqd=str(conn))
        super().handle_connection_failure(conn)

    def handle_message(self, conn: Any, message: gnsq.Message) -> Any:
        message.nsqd = str(conn)
        return super().handle_message(conn, message)


class Holder:
    def __init__(self, channel: str, hold_prefix: str) -> None:
        self.channel = channel
        self.hold_prefix = hold_prefix
        self.released = False
        self.held: list[gnsq.Message] = []

    def handle(self, consumer: gnsq.Consumer, message: gnsq.Message) -> None:
        ident, intact = read_body(message.body)
        hold = not self.released and ident.startswith(self.hold_prefix)
        emit(channel=self.channel, id=ident, intact=intact, attempts=message.attempts, msg_id=text(message.id),
             nsqd=message.nsqd, held=hold)
        if hold:
            message.enable_async()  # gnsq answers nothing for it when the handler returns
            self.held.append(message)

    def release_when(self, path: str) -> None:
        while not os.path.exists(path):
            gevent.sleep(RELEASE_POLL_INTERVAL)
        self.released = True
        for message in self.held:
            message.finish()
            emit(event="finished", id=read_body(message.body)[0], nsqd=message.nsqd)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lookupd-http", required=True, help="host:port of nsqlookupd's HTTP API")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--max-in-flight", type=int, default=10)
    parser.add_argument("--lookupd-poll-interval", type=float, default=0.5)
    parser.add_argument("--hold", required=True, help="hold messages whose body ID starts with this")
    parser.add_argument("--release", required=True, help="held messages are FINed once this file exists")
    parser.add_argument("--deadline", type=float, default=120.0)
    return parser.parse_args()


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    args = parse_args()
    holder = Holder(args.channel, args.hold)
    consumer = ReportingConsumer(args.topic, args.channel, lookupd_http_addresses=[args.lookupd_http],
                                 max_in_flight=args.max_in_flight, max_tries=0,
                                 lookupd_poll_interval=args.lookupd_poll_interval, lookupd_poll_jitter=0.1)
    consumer.on_message.connect(holder.handle, weak=False)
    consumer.on_error.connect(lambda _consumer, error: emit(event="error", error=str(error)), weak=False)
    consumer.start(block=False)
    gevent.spawn(holder.release_when, args.release)
    gevent.sleep(args.deadline)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
