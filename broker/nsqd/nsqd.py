"""NSQD: owns the topics, the listeners and the background loops, and starts and stops them.

Start-up: the listeners come up first, then the topics and channels of ``nsqd.dat`` are
loaded in slices between which the event loop serves clients (a large data path takes
seconds). Until the load is done ``/ping`` and ``/ready`` answer ``503 LOADING``, no
metadata is written and nothing registers with lookupd; a client that uses a topic
before its turn gets it opened from its files as the load would."""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import socket
import ssl
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, Sequence

from nsq_protocol import errors as E
from nsq_protocol.commands import CommandLimits
from nsq_protocol.errors import ProtocolError
from nsq_protocol.host_port import split_listen_address
from nsq_protocol.identify import ServerLimits
from nsq_protocol.names import is_ephemeral

from . import __version__, metadata, statsd
from .auth import AuthClient, AuthError
from .background import FailureLog, watch
from .backend import Backend, DiscardingBackend
from .busy_poll import BusyPoller
from .channel import EMPTY_DICT_SIZE, Channel
from .client_conn import ClientConn
from .e2e_latency import LatencyWindow
from .deferrals import DeferralStore, deferrals_path
from .data_listing import DataListing
from .diskqueue import DiskQueue
from .drain import Drain
from .durable_queue import DurableDiskQueue
from .group_commit import GroupCommitter, Syncable
from .guid import GuidFactory
from .http_api import HttpApi
from .http_server import HttpServer
from .lookup import LookupdPeers
from .message import MESSAGE_OVERHEAD, Message, Payload, encode_payload, encode_payloads
from .options import NsqdOptions
from .payload_run import PACK_MIN, Payloads, encode_run
from .queue_scan import QueueScanner
from .tls import peer_common_name, server_context
from .topic import Topic

if TYPE_CHECKING:
    from .replication.replicator import Replicator

log = logging.getLogger("nsqd")

LOAD_SLICE = 0.02  # seconds of loading between two turns of the event loop
PERSIST_THREADS = 32  # queues written and fsynced at once (their fsyncs overlap)
SYNC_BATCH = 128  # queues the periodic sync does per turn of the event loop


class NSQD:
    version = __version__

    def __init__(self, options: NsqdOptions) -> None:
        self.options = options
        self.data_path = options.data_path or os.getcwd()
        self.topics: dict[str, Topic] = {}
        self.clients: dict[int, ClientConn] = {}
        self.exiting = False
        self.health = "OK"
        self.started_at = time.time()
        self.start_time = int(self.started_at)
        self.tcp_port = 0
        self.http_port = 0
        self.https_port = 0

        self._client_ids = itertools.count(1)
        self._guid = GuidFactory(options.node_id)
        self._loading = False  # a slice of the load is running: topics wait to be started
        self.loaded = False  # everything in nsqd.dat is loaded
        self._unloaded: list[metadata.TopicMeta] = []  # what the load has not reached yet
        self._load_task: asyncio.Task[None] | None = None
        self._io_threads: ThreadPoolExecutor | None = None
        # the load or a background loop failed: nsqd stops, the process exits 1
        self.fatal_error: BaseException | None = None
        self._listing: DataListing | None = None  # the data path's files, listed once at start
        self._metadata_pending = False
        self.tls_context: ssl.SSLContext | None = server_context(options)
        self.busy_poller: BusyPoller | None = None
        self.command_limits = CommandLimits(
            max_msg_size=options.max_msg_size, max_body_size=options.max_body_size,
            max_req_timeout_ms=int(options.max_req_timeout * 1000))
        self.identify_limits = self._identify_limits()
        self.auth = AuthClient(options.auth_http_addresses, options.auth_http_request_method,
                               options.http_client_connect_timeout, options.http_client_request_timeout)
        self.scanner = QueueScanner(
            self.all_channels, interval=options.queue_scan_interval,
            refresh_interval=options.queue_scan_refresh_interval,
            selection_count=options.queue_scan_selection_count,
            dirty_percent=options.queue_scan_dirty_percent)
        self.lookup: LookupdPeers | None = None
        # durable mode (--sync-before-ack): publishes wait for a shared fsync round
        self.committer = GroupCommitter(self._durable_files, logger=log) if options.sync_before_ack else None
        self._servers: list[asyncio.AbstractServer] = []
        self._tcp_server: asyncio.AbstractServer | None = None
        self._http: HttpServer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        self._stop_ended = asyncio.Event()  # stop() returned or raised
        self._sync_failures = FailureLog(log)
        self.persisted_count: int | None = None  # messages written to disk by stop()
        self.drain = Drain(self)
        self.replicator: Replicator | None = None
        if options.replication_on:  # some topic may be replicated (by default, by flag or by the HTTP API)
            from .replication.replicator import Replicator
            self.replicator = Replicator(self)

    def _identify_limits(self) -> ServerLimits:
        o = self.options
        return ServerLimits(
            version=self.version, max_rdy_count=o.max_rdy_count,
            msg_timeout_ms=int(o.msg_timeout * 1000), max_msg_timeout_ms=int(o.max_msg_timeout * 1000),
            heartbeat_interval_ms=int(o.heartbeat_interval * 1000),
            max_heartbeat_interval_ms=int(o.max_heartbeat_interval * 1000),
            output_buffer_size=16 * 1024, max_output_buffer_size=o.max_output_buffer_size,
            output_buffer_timeout_ms=int(o.output_buffer_timeout * 1000),
            min_output_buffer_timeout_ms=int(o.min_output_buffer_timeout * 1000),
            max_output_buffer_timeout_ms=int(o.max_output_buffer_timeout * 1000),
            max_deflate_level=o.max_deflate_level, deflate_enabled=o.deflate,
            snappy_enabled=o.snappy, tls_available=self.tls_context is not None,
            auth_required=o.auth_enabled)

    # -- clients --------------------------------------------------------------
    def next_client_id(self) -> int:
        return next(self._client_ids)

    def add_client(self, client: ClientConn) -> None:
        self.clients[client.id] = client

    def remove_client(self, client_id: int) -> None:
        self.clients.pop(client_id, None)
        if not self.clients and sys.getsizeof(self.clients) > EMPTY_DICT_SIZE:
            self.clients = {}  # a dict keeps the table of its peak: a fresh one once all left

    def new_message(self, body: bytes) -> Message:
        return Message.create(self._guid.next_id(), body)

    def new_payload(self, body: bytes) -> Payload:
        return encode_payload(self._guid.next_id(), body, time.time_ns())

    def new_payloads(self, bodies: Sequence[bytes]) -> Payloads:
        """An MPUB's messages: IDs and timestamp taken in one batch, encoded at once (into
        one run when there are enough of them to be worth it)."""
        if len(bodies) == 1:
            return [self.new_payload(bodies[0])]
        if len(bodies) >= PACK_MIN:
            return encode_run(time.time_ns(), self._guid.next_runs(len(bodies)), bodies)
        return encode_payloads(time.time_ns(), self._guid.next_runs(len(bodies)), bodies)

    def publish(self, topic: Topic, bodies: Sequence[bytes], defer: float = 0.0) -> Awaitable[None] | None:
        """Put published messages on ``topic`` (PUB, MPUB, DPUB and HTTP's /pub and /mpub):
        fresh payloads, several at once as one batch; a deferred one as a ``Message``.
        A replicated topic's publish returns what resolves once a quorum holds them."""
        if topic.replicated:
            return self._publish_replicated(topic, bodies, defer)
        if defer > 0:
            msg = self.new_message(bodies[0])
            msg.defer = defer
            topic.put(msg)
        elif len(bodies) == 1:
            topic.put(self.new_payload(bodies[0]))
        elif bodies:
            topic.put_payloads(self.new_payloads(bodies))
        return None

    def _publish_replicated(self, topic: Topic, bodies: Sequence[bytes], defer: float) -> Awaitable[None]:
        assert self.replicator is not None
        payloads = self.new_payloads(bodies)  # an MPUB's as one run, as unreplicated
        if defer > 0:
            msg = Message.from_payload(payloads[0])
            msg.defer = defer
            topic.put(msg)
        elif len(payloads) == 1:
            topic.put(payloads[0])
        else:
            topic.put_payloads(payloads)
        return self.replicator.replicate(topic.name, payloads, defer)

    # -- topics and channels --------------------------------------------------
    def _backend(self, name: str, ephemeral: bool) -> Backend:
        if ephemeral:
            return DiscardingBackend()
        o = self.options
        queue_type = DurableDiskQueue if o.sync_before_ack else DiskQueue
        return queue_type(name, self.data_path, max_bytes_per_file=o.max_bytes_per_file,
                          min_msg_size=MESSAGE_OVERHEAD, max_msg_size=o.max_msg_size + MESSAGE_OVERHEAD,
                          sync_every=o.sync_every, sync_timeout=o.sync_timeout, logger=log,
                          segments=self._listing.take_segments(name) if self._listing is not None else None)

    def _deferrals(self, name: str, ephemeral: bool) -> DeferralStore | None:
        if ephemeral:
            return None
        return DeferralStore(deferrals_path(self.data_path, name), journaled=self.options.sync_before_ack,
                             logger=log,
                             file_exists=self._listing.take_deferrals(name) if self._listing is not None else None)

    def _mem_queue_size(self, ephemeral: bool) -> int:
        return 0 if self.options.sync_before_ack and not ephemeral else self.options.mem_queue_size

    def _durable_files(self) -> list[Syncable]:
        files: list[Syncable] = []
        for topic in self.topics.values():
            for owner in (topic, *topic.channels.values()):
                if isinstance(owner.backend, DurableDiskQueue):
                    files.append(owner.backend)
                if owner.deferrals is not None:
                    files.append(owner.deferrals)
        return files

    def durable_barrier(self) -> Awaitable[None] | None:
        """Durable mode: resolves once every message put so far is fsynced. None otherwise."""
        return self.committer.barrier() if self.committer is not None else None

    def _new_channel(self, topic: Topic, name: str) -> Channel:
        queue_name = f"{topic.name}:{name}"
        ephemeral = topic.ephemeral or is_ephemeral(name)
        channel = Channel(topic.name, name, self._backend(queue_name, ephemeral),
                          mem_queue_size=self._mem_queue_size(ephemeral),
                          max_msg_timeout=self.options.max_msg_timeout,
                          deferrals=self._deferrals(queue_name, ephemeral),
                          on_ephemeral_empty=self._ephemeral_channel_empty)
        if self.options.e2e_processing_latency_percentiles:
            channel.e2e_latency = LatencyWindow(self.options.e2e_processing_latency_window_time)
        if topic.replicated and not ephemeral and self.replicator is not None:
            channel.on_finished = self.replicator.finished
            channel.on_requeued = self.replicator.requeued
        return channel

    def get_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is not None:
            return topic
        ephemeral = is_ephemeral(name)
        topic = Topic(name, self._backend(name, ephemeral),
                      mem_queue_size=self._mem_queue_size(ephemeral), channel_factory=self._new_channel,
                      deferrals=self._deferrals(name, ephemeral),
                      on_channel_added=self._channel_added, on_channel_removed=self._channel_removed,
                      on_ephemeral_empty=self._ephemeral_topic_empty)
        if self.replicator is not None and self.replicator.replicates(name):
            topic.replicated = True
        self.topics[name] = topic
        log.info("TOPIC(%s): created", name)
        if self.lookup is not None:
            self.lookup.register(name)
        self._persist_metadata_soon(topic.ephemeral)
        if self._loading:
            return topic
        if self.lookup is not None and self.lookup.http_addresses():
            asyncio.get_running_loop().create_task(self._start_with_lookupd_channels(topic))
        else:
            topic.start()
        return topic

    async def _start_with_lookupd_channels(self, topic: Topic) -> None:
        """A new topic first creates the channels lookupd knows for it, so none of them
        misses the first messages."""
        assert self.lookup is not None
        try:
            async with asyncio.timeout(self.options.http_client_request_timeout):
                names = await self.lookup.channels_for_topic(topic.name)
        except Exception as e:
            log.warning("TOPIC(%s): failed to fetch channels from lookupd: %s", topic.name, e)
            names = []
        if not topic.exiting:
            for name in names:
                if not is_ephemeral(name):
                    topic.get_channel(name)
            topic.start()

    def delete_topic(self, name: str) -> None:
        topic = self.topics.pop(name)
        log.info("TOPIC(%s): deleting", name)
        if self.lookup is not None:
            for channel_name in topic.channels:
                self.lookup.unregister(name, channel_name)
        topic.delete()
        if self.lookup is not None:
            self.lookup.unregister(name)
        self.scanner.channels_changed()
        self._persist_metadata_soon(topic.ephemeral)
        if topic.replicated and self.replicator is not None:
            self.replicator.topic_deleted(name)
        if self.replicator is not None:
            self.replicator.topic_gone(name)

    def set_topic_replicas(self, name: str, count: int) -> None:
        """``name``'s own number of copies (POST /topic/create?replicas=); a
        ``TopicCountError`` says why not (replication off, too many, fixed by a flag, the
        topic holds messages)."""
        if self.replicator is None:
            if count > 1:
                from .replication.topic_counts import TopicCountError
                raise TopicCountError("replication is off on this nsqd: it runs without --replication-address")
            return
        if self.replicator.set_count(name, count) and name in self.topics:
            topic = self.topics[name]
            topic.replicated = self.replicator.replicates(name)
            for channel in topic.channels.values():
                if not channel.ephemeral:
                    channel.on_finished = self.replicator.finished if topic.replicated else None
                    channel.on_requeued = self.replicator.requeued if topic.replicated else None

    def empty_topic(self, name: str) -> None:
        topic = self.topics[name]
        if topic.replicated and self.replicator is not None:
            self.replicator.topic_emptied(topic)  # before: it names what the topic's queue holds
        topic.empty()

    def empty_channel(self, topic_name: str, channel_name: str) -> None:
        topic = self.topics[topic_name]
        channel = topic.channels[channel_name]
        if topic.replicated and not channel.ephemeral and self.replicator is not None:
            self.replicator.channel_emptied(topic, channel_name)
        channel.empty()

    def set_topic_paused(self, name: str, paused: bool) -> None:
        topic = self.topics[name]
        topic.pause() if paused else topic.unpause()
        self._persist_metadata_soon(topic.ephemeral)
        if topic.replicated and self.replicator is not None:
            self.replicator.paused(name, "", paused)

    def set_channel_paused(self, topic_name: str, channel_name: str, paused: bool) -> None:
        topic = self.topics[topic_name]
        channel = topic.channels[channel_name]
        channel.pause() if paused else channel.unpause()
        self._persist_metadata_soon(channel.ephemeral)
        if topic.replicated and not channel.ephemeral and self.replicator is not None:
            self.replicator.paused(topic_name, channel_name, paused)

    def _channel_added(self, topic: Topic, channel: Channel) -> None:
        log.info("TOPIC(%s): new channel(%s)", topic.name, channel.name)
        if self.lookup is not None:
            self.lookup.register(topic.name, channel.name)
        self.scanner.channels_changed()
        self._persist_metadata_soon(topic.ephemeral or channel.ephemeral)
        if topic.replicated and self.replicator is not None:
            self.replicator.channels_changed(topic.name)

    def _channel_removed(self, topic: Topic, channel: Channel) -> None:
        log.info("TOPIC(%s): deleted channel(%s)", topic.name, channel.name)
        if self.lookup is not None:
            self.lookup.unregister(topic.name, channel.name)
        self.scanner.channels_changed()
        self._persist_metadata_soon(topic.ephemeral or channel.ephemeral)
        if topic.replicated and self.replicator is not None:
            self.replicator.channels_changed(topic.name)

    def _ephemeral_channel_empty(self, channel: Channel) -> None:
        topic = self.topics.get(channel.topic_name)
        if topic is not None and topic.channels.get(channel.name) is channel:
            topic.delete_channel(channel.name)

    def _ephemeral_topic_empty(self, topic: Topic) -> None:
        if self.topics.get(topic.name) is topic:
            self.delete_topic(topic.name)

    def all_channels(self) -> list[Channel]:
        return [c for t in self.topics.values() for c in t.channels.values()]

    def registrations(self) -> list[tuple[str, str | None]]:
        out: list[tuple[str, str | None]] = []
        if self.drain.draining:
            return out
        for topic in self.topics.values():
            if topic.channels:
                out.extend((topic.name, c) for c in topic.channels)
            else:
                out.append((topic.name, None))
        return out

    # -- metadata -------------------------------------------------------------
    def _persist_metadata_soon(self, ephemeral: bool = False) -> None:
        if ephemeral or not self.loaded or self._metadata_pending:
            return
        self._metadata_pending = True
        asyncio.get_running_loop().call_soon(self.persist_metadata)

    def persist_metadata(self) -> None:
        self._metadata_pending = False
        topics = [metadata.TopicMeta(t.name, t.paused,
                                     [metadata.ChannelMeta(c.name, c.paused)
                                      for c in t.channels.values() if not c.ephemeral])
                  for t in self.topics.values() if not t.ephemeral]
        topics += [t for t in self._unloaded if t.name not in self.topics]  # stopped while loading
        try:
            metadata.write(self.data_path, topics, self.version)
        except OSError as e:
            log.error("failed to persist metadata: %s", e)

    async def _load(self, saved: list[metadata.TopicMeta]) -> None:
        """Open every saved topic and channel, a slice at a time; then persist the metadata
        and start talking to lookupd, as a fresh start does."""
        self._unloaded = saved
        done = 0
        while done < len(saved):
            deadline = time.monotonic() + LOAD_SLICE
            self._loading = True
            try:
                while True:  # at least one topic a turn
                    self._load_topic(saved[done])
                    done += 1
                    if done == len(saved) or time.monotonic() >= deadline:
                        break
            except Exception as e:
                log.critical("failed to load topic %s: %s", saved[done].name, e, exc_info=True)
                self.fail(e)
                return
            finally:
                self._loading = False
            self._unloaded = saved[done:]
            await asyncio.sleep(0)
        log.info("NSQ: loaded %d topics", len(saved))
        self.loaded = True
        self.persist_metadata()
        await self._start_lookup()

    def _empty_adopted(self, saved: list[metadata.TopicMeta]) -> None:
        """Load the replicated topics now and empty them: a peer adopted their messages."""
        assert self.replicator is not None
        for meta in saved:
            if self.replicator.replicates(meta.name):
                self._loading = True
                try:
                    self._load_topic(meta)
                finally:
                    self._loading = False
                self.replicator.empty(self.topics[meta.name])

    def _load_topic(self, saved: metadata.TopicMeta) -> None:
        topic = self.get_topic(saved.name)
        if saved.paused:
            topic.pause()
        for c in saved.channels:
            channel = topic.get_channel(c.name)
            if c.paused:
                channel.pause()
        topic.start()

    # -- auth and TLS ---------------------------------------------------------
    def authenticate(self, client: ClientConn, secret: str) -> Awaitable[bytes]:
        async def run() -> bytes:
            client.auth_secret = secret
            await self._query_auth(client)
            state = client.auth_state
            assert state is not None
            if not state.authorizations:
                raise ProtocolError(E.E_UNAUTHORIZED, "AUTH no authorizations found")
            return json.dumps({"identity": state.identity, "identity_url": state.identity_url,
                               "permission_count": len(state.authorizations)}).encode()
        return run()

    async def _query_auth(self, client: ClientConn) -> None:
        ssl_object = client.transport.get_extra_info("ssl_object")
        try:
            state = await self.auth.query(client.auth_secret, client.remote_host,
                                          client.tls, peer_common_name(ssl_object))
        except AuthError as e:
            log.warning("PROTOCOL(V2): [%s] auth failed - %s", client, e)
            raise ProtocolError(E.E_AUTH_FAILED, "AUTH failed") from None
        client.auth_state = state
        client.authed = True
        client.auth_identity, client.auth_identity_url = state.identity, state.identity_url

    def authorize(self, client: ClientConn, command: str, topic: str, channel: str) -> Awaitable[None] | None:
        state = client.auth_state
        if state is None or not state.authorizations:
            raise ProtocolError(E.E_AUTH_FIRST, f"AUTH required before {command}")

        def decide() -> None:
            assert client.auth_state is not None
            if not client.auth_state.allows(topic, channel):
                raise ProtocolError(E.E_UNAUTHORIZED, f'AUTH failed for {command} on "{topic}" "{channel}"')

        if not state.expired:
            decide()
            return None

        async def refresh() -> None:
            await self._query_auth(client)
            decide()
        return refresh()

    # -- lookupd ----------------------------------------------------------------
    def set_lookupd_addresses(self, addresses: list[str]) -> None:
        self.options.nsqlookupd_tcp_addresses = addresses
        if self.lookup is not None:
            self.lookup.set_addresses(addresses)

    def set_log_level(self, level: str) -> None:
        self.options.log_level = level
        from .logs import python_level
        logging.getLogger("nsqd").setLevel(python_level(level))

    def info(self) -> dict:
        o = self.options
        return {
            "version": self.version,
            "broadcast_address": o.broadcast_address,
            "hostname": socket.gethostname(),
            "http_port": o.broadcast_http_port or self.http_port,
            "tcp_port": o.broadcast_tcp_port or self.tcp_port,
            "start_time": self.start_time,
            # what clients read to size their IDENTIFY, as in Go's /info
            "max_heartbeat_interval": int(round(o.max_heartbeat_interval * 1e9)),
            "max_output_buffer_size": o.max_output_buffer_size,
            "max_output_buffer_timeout": int(round(o.max_output_buffer_timeout * 1e9)),
            "max_deflate_level": o.max_deflate_level,
        }

    # -- start and stop -------------------------------------------------------
    async def start(self) -> None:
        """Listen, then load the data path in the background (``loaded`` says when done).
        A metadata file that cannot be read stops the start before anything listens."""
        from .protocol_v2 import V2Protocol

        os.makedirs(self.data_path, exist_ok=True)
        saved = metadata.read(self.data_path)
        self._listing = DataListing(self.data_path)
        loop = asyncio.get_running_loop()
        if self.replicator is not None:
            # before any client: a node whose messages a peer adopted while it was away
            # must not deliver them again
            await self.replicator.start()
            if self.replicator.fenced_at_start:
                self._empty_adopted(saved)
        if self.options.busy_poll_window > 0:
            self.busy_poller = BusyPoller(loop, self.options.busy_poll_window)
        host, port = split_listen_address(self.options.tcp_address)
        tcp = await loop.create_server(lambda: V2Protocol(self), host, port, reuse_address=True, backlog=1024)
        self._servers.append(tcp)
        self._tcp_server = tcp
        self.tcp_port = tcp.sockets[0].getsockname()[1]
        log.info("TCP: listening on %s", _bound(tcp))

        api = HttpApi(self)
        self._http = HttpServer(api.handle, handle_now=api.handle_now, logger=log,
                                on_input=self.busy_poller.poke if self.busy_poller is not None else None)
        host, port = split_listen_address(self.options.http_address)
        http = await self._http.listen(host, port)
        self.http_port = http.sockets[0].getsockname()[1]
        log.info("HTTP: listening on %s", _bound(http))

        if self.tls_context is not None and self.options.https_address:
            host, port = split_listen_address(self.options.https_address)
            https = await self._http.listen(host, port, self.tls_context)
            self.https_port = https.sockets[0].getsockname()[1]
            log.info("HTTPS: listening on %s", _bound(https))

        self._start_task(self.scanner.run(), "QUEUESCAN: the queue scan loop")
        if self.committer is not None:
            self.watch(self.committer.start(), "DURABLE: the group committer")
        else:
            self._start_task(self._sync_loop(), "NSQ: the periodic sync loop")
        if self.options.statsd_address:
            self._start_task(statsd.pusher_for(self).run(), "STATSD: the statsd loop")
        self._load_task = self._start_task(self._load(saved), "NSQ: the load of the data path")

    def _start_task(self, loop_coroutine: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """A background task stop() cancels; its failure stops nsqd (``fail``)."""
        task = self.watch(asyncio.get_running_loop().create_task(loop_coroutine), name)
        self._tasks.append(task)
        return task

    def watch(self, task: asyncio.Task[None], name: str) -> asyncio.Task[None]:
        """``task`` must not end with an exception: if it does, it is logged and nsqd stops."""
        return watch(task, name, log, lambda _, error: self.fail(error))

    def fail(self, error: BaseException) -> None:
        """Something nsqd cannot run without failed (already logged): stop as on SIGTERM,
        writing what is held to disk, and exit 1. When a stop is already under way (a
        failure while stopping or draining), the process ends once it is over, even if
        the stop itself failed or meant to keep HTTP up for a handoff."""
        if self.fatal_error is None:
            self.fatal_error = error
        loop = asyncio.get_running_loop()
        if not self.exiting:
            loop.create_task(self.stop())
            return

        async def end_after_stop() -> None:
            await self._stop_ended.wait()
            await self.close_http()
        loop.create_task(end_after_stop())

    async def _start_lookup(self) -> None:
        self.lookup = LookupdPeers(
            identity={"broadcast_address": self.options.broadcast_address,
                      "hostname": socket.gethostname(),
                      "tcp_port": self.options.broadcast_tcp_port or self.tcp_port,
                      "http_port": self.options.broadcast_http_port or self.http_port,
                      "version": self.version},
            registrations=self.registrations, addresses=list(self.options.nsqlookupd_tcp_addresses),
            http_timeout=self.options.http_client_request_timeout, logger=log)
        await self.lookup.start()

    async def _sync_loop(self) -> None:
        """Default mode's periodic fsync of every queue written or read since its last one.
        Many queues can fall due together (all of them after a large start): their syncs
        run in worker threads, a batch at a time, while the loop waits (nothing touches a
        queue meanwhile), and the loop serves clients between batches."""
        tick = min(1.0, max(0.05, self.options.sync_timeout / 4))
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            due = [owner.backend for topic in list(self.topics.values())
                   for owner in (topic, *topic.channels.values()) if owner.backend.sync_due(now)]
            for start in range(0, len(due), SYNC_BATCH):
                batch = due[start:start + SYNC_BATCH]
                if len(batch) == 1:
                    self._sync_logging_failure(batch[0], now)
                else:
                    list(self._io_pool().map(lambda backend: self._sync_logging_failure(backend, now), batch))
                await asyncio.sleep(0)

    def _sync_logging_failure(self, backend: Backend, now: float) -> None:
        """One queue's periodic sync; a queue that fails is logged and retried next tick."""
        try:
            backend.sync_if_due(now)
        except Exception:
            self._sync_failures.failed(id(backend), f"NSQ: periodic sync of {backend!r} failed")

    def _io_pool(self) -> ThreadPoolExecutor:
        if self._io_threads is None:
            self._io_threads = ThreadPoolExecutor(PERSIST_THREADS, thread_name_prefix="fsync")
        return self._io_threads

    async def stop(self, *, keep_http: bool = False) -> None:
        """Stop accepting, write everything held in memory to disk, close every client.

        ``keep_http``: the HTTP API stays up (a scale-down drain still reports its handoff
        there) until ``close_http``."""
        if self.exiting:
            await self._stopped.wait()
            return
        self.exiting = True
        try:
            await self._stop(keep_http)
        finally:
            self._stop_ended.set()

    async def _stop(self, keep_http: bool) -> None:
        log.info("NSQ: closing")
        for server in self._servers:
            server.close()
        if self._http is not None and not keep_http:
            self._http.stop_listening()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.committer is not None:
            try:
                await self.committer.close()  # answers every publish already waiting for it
            except Exception:
                log.exception("DURABLE: final sync failed")
            await asyncio.sleep(0)  # let those publishes write their OK before clients close
        if self.replicator is not None and not keep_http:
            # (a scale-down's handoff keeps it: the backups forget what is handed off)
            await self.replicator.close()
        self.persist_metadata()
        written, failed = self._persist_topics()
        if self.replicator is not None and not failed:
            self.replicator.stopped_cleanly()
        if self._io_threads is not None:
            self._io_threads.shutdown()
        log.info("NSQ: persisted %d messages to disk", written)
        self.persisted_count = written
        for client in list(self.clients.values()):
            client.close()
        if self.lookup is not None:
            await self.lookup.close()
        await self.auth.close()
        if not keep_http:
            await self.close_http()

    def _persist_topics(self) -> tuple[int, bool]:
        """Every topic and channel writes what it holds to its queue and closes it; how many
        messages were written, and whether some queue failed to. The queues are
        independent, so worker threads write them at once and their fsyncs overlap; the
        event loop waits meanwhile (no callback can touch a queue while a thread writes it)."""
        jobs: list[tuple[Topic, Callable[[], int]]] = [
            (topic, job) for topic in list(self.topics.values()) for job in topic.persist_jobs()]
        failures: list[str] = []

        def run(item: tuple[Topic, Callable[[], int]]) -> int:
            topic, job = item
            try:
                return job()
            except Exception:
                log.exception("TOPIC(%s): failed to persist", topic.name)
                failures.append(topic.name)
                return 0
        if len(jobs) <= 1:
            return sum(map(run, jobs)), bool(failures)
        return sum(self._io_pool().map(run, jobs)), bool(failures)

    async def close_http(self) -> None:
        """The last step of stopping: the HTTP API goes and ``wait_stopped`` returns."""
        if self.replicator is not None:
            await self.replicator.close()
        for server in self._servers:
            server.close()
        if self._http is not None:
            await self._http.close()
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()


def _bound(server: asyncio.AbstractServer) -> str:
    host, port = server.sockets[0].getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
