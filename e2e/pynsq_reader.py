"""pynsq Readers in their own interpreter (tornado owns its loop): the child side of
:mod:`e2e.pynsq_consumers`, run as ``python e2e/pynsq_reader.py '<json settings>'``.

Settings: ``subscriptions`` (list of [topic, channel]), ``lookupd_http_addresses``,
``readers`` (Readers per subscription), ``max_in_flight``, ``lookupd_poll_interval``
(whole seconds, pynsq's rule), ``mode`` ("finish" or "hold": never answer),
``handle_seconds`` ({"topic/channel": seconds a message is held before FIN}),
``tls_ca_file`` (TLS to nsqd, verifying its certificate and name against this CA),
``auth_secret`` (sent with AUTH).

Writes one JSON object a line on stdout, flushed at once:
``{"event": "started"}`` once every Reader exists;
``{"event": "message", "topic", "channel", "nsqd", "id", "attempts", "body"}`` per
delivery (``id`` nsqd's message ID as text, ``body`` base64);
``{"event": "connected" | "closed", "topic", "channel", "nsqd"}`` per connection;
``{"event": "error", "topic", "channel", "nsqd", "kind", "error"}`` per error pynsq reports.
SIGUSR1: from now on every message is finished at once (a slow consumer catches up).
SIGTERM/SIGINT: the Readers are closed (pynsq never sends CLS) and the process exits 0.
"""
from __future__ import annotations

import base64
import json
import logging
import signal
import sys
from typing import Any

import nsq
import tornado.ioloop


def emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def as_text(value: bytes | str) -> str:
    return value.decode("ascii", "replace") if isinstance(value, bytes) else value


class ReportingReader(nsq.Reader):  # type: ignore[misc]
    """A plain pynsq Reader that also reports the nsqd each message and connection event
    comes from (pynsq gives the connection to these hooks, not to the message handler)."""

    def _on_message(self, conn: Any, message: nsq.Message, **kwargs: Any) -> None:
        message.nsqd_address = str(conn)
        super()._on_message(conn, message, **kwargs)

    def _on_connection_ready(self, conn: Any, **kwargs: Any) -> None:
        emit(event="connected", topic=self.topic, channel=self.channel, nsqd=str(conn))
        super()._on_connection_ready(conn, **kwargs)

    def _on_connection_close(self, conn: Any, **kwargs: Any) -> None:
        emit(event="closed", topic=self.topic, channel=self.channel, nsqd=str(conn))
        super()._on_connection_close(conn, **kwargs)

    def _on_connection_error(self, conn: Any, error: Exception, **kwargs: Any) -> None:
        emit(event="error", topic=self.topic, channel=self.channel, nsqd=str(conn),
             kind=type(error).__name__, error=str(error))
        super()._on_connection_error(conn, error, **kwargs)


class Handling:
    """What each Reader does with a message: report it, then answer FIN at once, after
    its subscription's handling time, or never (mode "hold")."""

    def __init__(self, loop: tornado.ioloop.IOLoop, mode: str, handle_seconds: dict[str, float]) -> None:
        self.loop = loop
        self.mode = mode
        self.handle_seconds = handle_seconds
        self.held: list[nsq.Message] = []  # referenced so pynsq never answers them

    def catch_up(self) -> None:
        self.handle_seconds = {}

    def handler(self, topic: str, channel: str) -> Any:
        def handle(message: nsq.Message) -> bool | None:
            emit(event="message", topic=topic, channel=channel, nsqd=message.nsqd_address,
                 id=as_text(message.id), attempts=message.attempts,
                 body=base64.b64encode(message.body).decode("ascii"))
            if self.mode == "hold":
                message.enable_async()
                self.held.append(message)
                return None
            seconds = self.handle_seconds.get(f"{topic}/{channel}", 0.0)
            if seconds <= 0:
                return True
            message.enable_async()
            self.loop.call_later(seconds, message.finish)
            return None
        return handle


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = json.loads(sys.argv[1])
    loop = tornado.ioloop.IOLoop.current()
    handling = Handling(loop, settings.get("mode", "finish"), dict(settings.get("handle_seconds") or {}))
    security: dict[str, Any] = {}
    if settings.get("tls_ca_file"):  # pynsq verifies the certificate and nsqd's name (server_hostname)
        security.update(tls_v1=True, tls_options={"ca_certs": settings["tls_ca_file"]})
    if settings.get("auth_secret"):
        security["auth_secret"] = settings["auth_secret"]
    readers = [ReportingReader(topic=topic, channel=channel, message_handler=handling.handler(topic, channel),
                               lookupd_http_addresses=list(settings["lookupd_http_addresses"]),
                               max_in_flight=int(settings.get("max_in_flight", 100)),
                               lookupd_poll_interval=int(settings.get("lookupd_poll_interval", 1)),
                               max_tries=0, **security)
               for topic, channel in settings["subscriptions"]
               for _ in range(int(settings.get("readers", 1)))]
    # asyncio's own signal handlers wake tornado's loop at once (nsq.run's do not)
    asyncio_loop = loop.asyncio_loop  # type: ignore[attr-defined]
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio_loop.add_signal_handler(sig, loop.stop)
    asyncio_loop.add_signal_handler(signal.SIGUSR1, handling.catch_up)
    loop.add_callback(lambda: emit(event="started"))
    loop.start()
    for reader in readers:
        reader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
