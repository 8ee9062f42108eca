"""nsq_client: an asyncio NSQ client with go-nsq's semantics.

    config = Config(max_in_flight=10)
    async with Producer("127.0.0.1:4150", config) as producer:
        await producer.publish("events", b"hello")

    async def handle(message: Message) -> None: ...   # return = FIN, raise = REQ + backoff
    consumer = Consumer("events", "archive", config, handler=handle, concurrency=4)
    await consumer.connect_to_lookupd("127.0.0.1:4161")
    await run_until_signalled(consumer)
"""
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

__all__ = [
    "AdminError", "BackoffStrategy", "Config", "Connection", "ConnectionClosedError",
    "ConnectionDelegate", "Consumer", "ConsumerStats", "ExponentialStrategy", "FullJitterStrategy",
    "GiveUpHook", "Handler", "IdentifyError", "LookupdAdmin", "Message",
    "MessageAlreadyAnsweredError", "NotConnectedError", "NsqClientError", "NsqdAdmin", "NsqdNode",
    "Producer", "ProducerPool", "ProducerStoppedError", "PublishError", "ServerError",
    "__version__", "run_until_signalled", "stop_on_signals",
]
