"""How a micro-batch's messages reach the tasks that read them: fetched from the driver's
reader, not carried inside the tasks.

Spark ships an input partition inside every task it sends, so a partition that holds its
messages crosses the driver's JVM, the task scheduler, the network and the executor's JVM
before the executor's Python worker sees it. Instead, the reader that holds the messages
(in a Python process on the driver) listens on a TCP port, a partition names only a range
of message numbers, and the task's ``read`` asks the reader for exactly those rows, as an
Arrow IPC stream. Nothing but the task's own rows travels, once, and the JVMs never
handle them.

The wire (ours): the task sends one line, ``NSQSPARK1 <token> <session> <after> <through>``;
the reader answers a status byte (``0`` rows follow, ``1`` an error message follows), an
8-byte big-endian length and that many bytes. The token is a secret of the reader
process, carried by the partitions; a request without it gets an error and nothing else.
The rows stay servable until Spark commits their batch, so a task that is retried finds
them again.
"""
from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import os
import secrets
import socket
import struct
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa

from nsq_protocol.host_port import join_host_port, split_dial_address

log = logging.getLogger("nsq_spark")

MAGIC = b"NSQSPARK1"
ROWS, ERROR = 0, 1
ANSWER_HEADER = struct.Struct(">BQ")
MAX_REQUEST_LINE = 256
REQUEST_TIMEOUT = 30.0


class BatchFetchError(RuntimeError):
    """A task could not get its rows from the driver's reader."""


@dataclass(frozen=True)
class RowsRequest:
    session: str
    after: int
    through: int


# -- where the reader listens -------------------------------------------------------------
def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _primary_address() -> str | None:
    """The address this host reaches others from (no packet is sent: UDP connect only
    picks the route)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.254.254.254", 1))
            return str(probe.getsockname()[0])
    except OSError:
        return None


def default_listen_host() -> str:
    """Where the driver's other processes are reachable, as Spark itself would choose:
    ``SPARK_DRIVER_BIND_ADDRESS`` (set in a driver pod on Kubernetes), ``SPARK_LOCAL_IP``,
    else this host's primary address."""
    for variable in ("SPARK_DRIVER_BIND_ADDRESS", "SPARK_LOCAL_IP"):
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    try:
        named = socket.gethostbyname(socket.gethostname())
    except OSError:
        named = ""
    if named and not _is_loopback(named):
        return named
    return _primary_address() or named or "127.0.0.1"


# -- the reader's side ----------------------------------------------------------------------
class BatchServer:
    """Serves rows held by the reader; runs on the reader's event loop, the only thread
    that touches what the reader holds."""

    def __init__(self, rows: Callable[[RowsRequest], pa.RecordBatch]) -> None:
        self._rows = rows
        self.token = secrets.token_hex(16)
        self._server: asyncio.Server | None = None
        self.address = ""

    async def start(self, host: str, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_REQUEST_LINE)
        bound = self._server.sockets[0].getsockname()
        self.address = join_host_port(host, bound[1])
        log.info("serving micro-batch rows to tasks on %s", self.address)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                line = await reader.readline()
            status, payload = self._answer(line)
            writer.write(ANSWER_HEADER.pack(status, len(payload)))
            writer.write(memoryview(payload))
            async with asyncio.timeout(REQUEST_TIMEOUT):
                await writer.drain()
        except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError) as err:
            log.warning("a task's request for rows failed: %r", err)
        finally:
            writer.close()

    def _answer(self, line: bytes) -> tuple[int, bytes | pa.Buffer]:
        parts = line.split()
        if len(parts) != 5 or parts[0] != MAGIC:
            return ERROR, b"not a request for rows of the nsq source"
        if not hmac.compare_digest(parts[1], self.token.encode()):
            return ERROR, b"wrong token: this reader did not plan that batch (was the query restarted?)"
        try:
            request = RowsRequest(parts[2].decode(), int(parts[3]), int(parts[4]))
            batch = self._rows(request)
        except (LookupError, ValueError) as err:
            return ERROR, str(err).encode()
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as stream:
            stream.write_batch(batch)
        return ROWS, sink.getvalue()


# -- the task's side --------------------------------------------------------------------------
def _receive_exactly(sock: socket.socket, size: int) -> bytearray:
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise BatchFetchError(f"the reader closed the connection after {got} of {size} bytes")
        got += n
    return data


def fetch_rows(address: str, token: str, request: RowsRequest,
               timeout: float = REQUEST_TIMEOUT) -> list[pa.RecordBatch]:
    """The rows ``(after, through]`` of ``session`` from the reader at ``address``."""
    line = b" ".join([MAGIC, token.encode(), request.session.encode(),
                      str(request.after).encode(), str(request.through).encode()]) + b"\n"
    try:
        with socket.create_connection(split_dial_address(address), timeout=timeout) as sock:
            sock.sendall(line)
            status, size = ANSWER_HEADER.unpack(_receive_exactly(sock, ANSWER_HEADER.size))
            payload = _receive_exactly(sock, size)
    except OSError as err:
        raise BatchFetchError(f"cannot fetch rows {request.after + 1}..{request.through} from the nsq "
                              f"reader at {address}: {err} (executors must reach the driver there: "
                              "see the source option batch_server_address)") from err
    if status != ROWS:
        raise BatchFetchError(f"the nsq reader at {address} refused rows {request.after + 1}.."
                              f"{request.through}: {bytes(payload).decode(errors='replace')}")
    return list(pa.ipc.open_stream(pa.py_buffer(payload)))
