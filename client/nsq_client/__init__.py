"""nsq_client: an asyncio NSQ client with go-nsq's semantics.

    config = Config(max_in_flight=10)
    async with Producer("127.0.0.1:4150", config) as producer:
        await producer.publish("events", b"hello")

    async def handle(message: Message) -> None: ...   # return = FIN, raise = REQ + backoff
    consumer = Consumer("events", "archive", config, handler=handle, concurrency=4)
    await consumer.connect_to_lookupd("127.0.0.1:4161")
    await run_until_signalled(consumer)
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Each name is imported from its module on first use: a program that needs a Connection
# and a Config (the Spark source's processes, started many times) does not pay for
# aiohttp, which only the admin API client uses (the `admin` extra).
_HOMES = {
    "LookupdAdmin": "admin", "NsqdAdmin": "admin",
    "BackoffStrategy": "backoff", "ExponentialStrategy": "backoff", "FullJitterStrategy": "backoff",
    "Config": "config",
    "Connection": "conn", "ConnectionDelegate": "conn",
    "Consumer": "consumer", "ConsumerStats": "consumer", "GiveUpHook": "consumer", "Handler": "consumer",
    "AdminError": "errors", "ConnectionClosedError": "errors", "IdentifyError": "errors",
    "NotConnectedError": "errors", "NsqClientError": "errors", "ProducerStoppedError": "errors",
    "PublishError": "errors", "ServerError": "errors",
    "NsqdNode": "lookup",
    "Message": "message", "MessageAlreadyAnsweredError": "message",
    "Producer": "producer",
    "ProducerPool": "producer_pool",
    "run_until_signalled": "signals", "stop_on_signals": "signals",
    "__version__": "version",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])


if TYPE_CHECKING:
    from .admin import LookupdAdmin, NsqdAdmin
    from .backoff import BackoffStrategy, ExponentialStrategy, FullJitterStrategy
    from .config import Config
    from .conn import Connection, ConnectionDelegate
    from .consumer import Consumer, ConsumerStats, GiveUpHook, Handler
    from .errors import (
        AdminError,
        ConnectionClosedError,
        IdentifyError,
        NotConnectedError,
        NsqClientError,
        ProducerStoppedError,
        PublishError,
        ServerError,
    )
    from .lookup import NsqdNode
    from .message import Message, MessageAlreadyAnsweredError
    from .producer import Producer
    from .producer_pool import ProducerPool
    from .signals import run_until_signalled, stop_on_signals
    from .version import __version__
