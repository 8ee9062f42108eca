"""A pynsq ``nsq.Reader`` (tornado) that knows only nsqlookupd HTTP addresses; run as a
script in its own process, until the deadline or SIGTERM.

Every nsqd it reads from was found through ``/lookup``. Output, one JSON line each:
``{"body": <message body>, "nsqd": "<host>:<port>", "attempts": n}`` per message (FIN
at once), where ``nsqd`` is the TCP address of the connection that delivered it.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

import nsq
import tornado.ioloop


def emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class AddressReportingReader(nsq.Reader):
    """pynsq passes the delivering connection only to this hook (pynsq 0.9.x); the
    handler below sees the message alone, so the address is noted here first."""

    def _on_message(self, conn, message, **kwargs):  # type: ignore[no-untyped-def]
        message.delivered_by = f"{conn.host}:{conn.port}"
        return super()._on_message(conn, message, **kwargs)


def handle(message: nsq.Message) -> bool:
    emit(body=message.body.decode("utf-8", "replace"), nsqd=getattr(message, "delivered_by", None),
         attempts=message.attempts)
    return True


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lookupd-http", action="append", required=True, help="host:port of a lookupd's HTTP API")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--deadline", type=float, default=60.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    reader = AddressReportingReader(
        topic=args.topic, channel=args.channel, message_handler=handle,
        lookupd_http_addresses=[f"http://{address}" for address in args.lookupd_http],
        lookupd_poll_interval=1, max_in_flight=100, max_tries=0)
    loop = tornado.ioloop.IOLoop.current()
    loop.call_later(args.deadline, loop.stop)
    nsq.run()
    reader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
