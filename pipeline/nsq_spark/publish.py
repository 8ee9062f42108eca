"""Publishing from an executor: the bodies of a partition's rows go out in MPUB chunks
bounded by count and bytes, a few chunks in flight at once, through the multi-node
:class:`ProducerPool` (a node that fails is skipped for the next). Any publish that no
nsqd accepted raises, so Spark fails the task and runs it again: at least once."""
from __future__ import annotations

import asyncio
from typing import Iterable, Iterator

import pyarrow as pa

from .options import SinkOptions

MPUB_OVERHEAD = 4  # the message count in front of an MPUB body
BODY_OVERHEAD = 4  # the size in front of each message


class BadRowError(ValueError):
    """A row whose body NSQ cannot take (null or empty)."""


def mpub_chunks(bodies: Iterable[bytes], max_messages: int, max_bytes: int) -> Iterator[list[bytes]]:
    """Consecutive chunks of at most ``max_messages`` bodies whose MPUB body stays within
    ``max_bytes`` (a single larger message goes alone: nsqd's limit decides)."""
    chunk: list[bytes] = []
    size = MPUB_OVERHEAD
    for body in bodies:
        if not body:
            raise BadRowError("a row has an empty body: NSQ does not take empty messages")
        cost = BODY_OVERHEAD + len(body)
        if chunk and (len(chunk) >= max_messages or size + cost > max_bytes):
            yield chunk
            chunk, size = [], MPUB_OVERHEAD
        chunk.append(body)
        size += cost
    if chunk:
        yield chunk


def arrow_bodies(batches: Iterable[pa.RecordBatch], column: str) -> Iterator[bytes]:
    """The ``column`` of each record batch as bytes (strings are taken as UTF-8)."""
    for batch in batches:
        index = batch.schema.get_field_index(column)
        if index < 0:
            raise BadRowError(f"no column {column!r} to publish (columns: {batch.schema.names})")
        values = batch.column(index)
        if values.null_count:
            raise BadRowError(f"column {column!r} holds {values.null_count} null value(s): "
                              "NSQ does not take empty messages")
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            values = values.cast(pa.large_binary() if pa.types.is_large_string(values.type) else pa.binary())
        yield from values.to_pylist()


async def publish_chunks(chunks: Iterable[list[bytes]], options: SinkOptions) -> int:
    """MPUB every chunk to ``options.topic``; the number of messages published."""
    from nsq_client.producer_pool import ProducerPool  # only where rows are published: it brings aiohttp
    pool = ProducerPool(options.nsqd_tcp_addresses, options.client_config(),
                        lookupd_addresses=options.lookupd_http_addresses)
    pending: set[asyncio.Future[None]] = set()
    published = 0
    try:
        await pool.connect()
        for chunk in chunks:
            while len(pending) >= options.publish_concurrency:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
            pending.add(asyncio.ensure_future(pool.multi_publish(options.topic, chunk)))
            published += len(chunk)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
    finally:
        for task in pending:
            task.cancel()
        await pool.stop()
    return published


def publish(bodies: Iterable[bytes], options: SinkOptions) -> int:
    """Publish ``bodies`` (blocking); raises when some could not be published."""
    chunks = mpub_chunks(bodies, options.max_mpub_messages, options.max_mpub_bytes)
    return asyncio.run(publish_chunks(chunks, options))
