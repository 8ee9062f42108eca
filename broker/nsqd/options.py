"""nsqd's options: one model for the command line, the config file and the operator.

Field names are NSQ's config-file names; the flag is the same with ``-`` (or the
``flag`` given where NSQ spells it differently). Durations are seconds (Go duration
strings on the command line). Defaults and bounds are nsqd v1.3.0's.
"""
from __future__ import annotations

import hashlib
import socket
import zlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from nsq_protocol.flags import Duration
from nsq_protocol.host_port import BroadcastHost, DialAddress, ListenAddress, OptionalDialAddress
from nsq_protocol.logfmt import LOG_LEVELS, normalize_level
from nsq_protocol.names import is_ephemeral, is_valid_topic_name


def _default_node_id() -> int:
    """Go nsqd's default: the CRC-32 of the hostname's MD5, modulo 1024."""
    return zlib.crc32(hashlib.md5(socket.gethostname().encode()).digest()) % 1024


def _flag(name: str) -> dict:
    return {"flag": name}


class NsqdOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # identity and listeners
    node_id: int = Field(default_factory=_default_node_id, ge=0, lt=1024,
                         description="unique part for message IDs, (int) in range [0,1024)")
    log_level: str = Field("info", description="set log verbosity: debug, info, warn, error, or fatal")
    log_prefix: str = Field("[nsqd] ", description="log message prefix")
    log_format: Literal["text", "json"] = Field("text", description="log line format: text (NSQ's) or json")
    tcp_address: ListenAddress = Field("0.0.0.0:4150", description="<addr>:<port> to listen on for TCP clients")
    http_address: ListenAddress = Field("0.0.0.0:4151", description="<addr>:<port> to listen on for HTTP clients")
    https_address: ListenAddress = Field("0.0.0.0:4152", description="<addr>:<port> to listen on for HTTPS clients")
    broadcast_address: BroadcastHost = Field(default_factory=socket.gethostname,
                                   description="address that will be registered with lookupd (defaults to the OS hostname)")
    broadcast_tcp_port: int = Field(0, ge=0, le=65535, description="TCP port that will be registered with lookupd (defaults to the TCP port that this nsqd is listening on)")
    broadcast_http_port: int = Field(0, ge=0, le=65535, description="HTTP port that will be registered with lookupd (defaults to the HTTP port that this nsqd is listening on)")
    nsqlookupd_tcp_addresses: list[DialAddress] = Field(default_factory=list, json_schema_extra=_flag("lookupd-tcp-address"),
                                                description="lookupd TCP address (may be given multiple times)")
    auth_http_addresses: list[str] = Field(default_factory=list, json_schema_extra=_flag("auth-http-address"),
                                           description="<addr>:<port> or a full url to query auth server (may be given multiple times)")
    auth_http_request_method: Literal["get", "post"] = Field("get", description="HTTP method to use for auth server requests")
    http_client_connect_timeout: Duration = Field(2.0, gt=0, description="timeout for HTTP connect")
    http_client_request_timeout: Duration = Field(5.0, gt=0, description="timeout for HTTP request")
    topology_region: str = Field("", description="region this nsqd runs in")
    topology_zone: str = Field("", description="availability zone this nsqd runs in")

    # disk and queues
    data_path: str = Field("", description="path to store disk-backed messages (default: the working directory)")
    mem_queue_size: int = Field(10000, ge=0, description="number of messages to keep in memory (per topic/channel)")
    max_bytes_per_file: int = Field(104857600, gt=0, description="number of bytes per diskqueue file before rolling")
    sync_every: int = Field(2500, ge=1, description="number of messages per diskqueue fsync")
    sync_timeout: Duration = Field(2.0, gt=0, description="duration of time per diskqueue fsync")
    sync_before_ack: bool = Field(
        False, description="durable mode (beyond NSQ): answer PUB, MPUB, DPUB and HTTP publishes only "
        "once the message is fsynced to disk (concurrent publishers share each fsync), and keep every "
        "message on disk until it is FINed, so acknowledged messages survive kill -9; topics and "
        "channels keep no memory queue (--mem-queue-size applies to ephemeral ones only)")

    # replicated topics (beyond NSQ): docs/replication.md
    replication_address: str = Field(
        "", description="(beyond NSQ) <addr>:<port> to listen on for replication from peer nsqds; "
        "this nsqd's name in --replication-peer (replication is off when empty)")
    replication_listen_address: str = Field(
        "", description="(beyond NSQ) <addr>:<port> the replication listener binds, when it is not "
        "--replication-address (e.g. 0.0.0.0:4153 where that is a DNS name published only once the "
        "node runs, as a StatefulSet pod's)")
    replication_peers: list[str] = Field(
        default_factory=list, json_schema_extra=_flag("replication-peer"),
        description="(beyond NSQ) replication address of every nsqd of the cluster, this one included, "
        "in the same order on each (may be given multiple times or comma separated)")
    topic_replicas: int = Field(
        1, ge=1, le=5, description="(beyond NSQ) nsqds holding each message of a non-ephemeral topic: "
        "the one it was published to and the next ones in --replication-peer order; a publish is "
        "answered once a majority of them holds it (1: no replication); --topic-replicas-for and "
        "POST /topic/create?replicas= choose a topic's own")
    topic_replicas_for: list[str] = Field(
        default_factory=list, json_schema_extra=_flag("topic-replicas-for"),
        description="(beyond NSQ) <topic>:<n>, a topic's own number of copies (1 to 5), instead of "
        "--topic-replicas (may be given multiple times or comma separated); a count above 1 needs "
        "--replication-address and --replication-peer")
    replication_membership_epoch: int = Field(
        0, ge=0, description="(beyond NSQ) the epoch of the --replication-peer list: a list set while "
        "running (PUT /replication/peers) with a higher epoch is kept over it across restarts")
    replication_timeout: Duration = Field(
        5.0, gt=0, description="(beyond NSQ) a publish no majority of replicas acknowledged in this "
        "long fails (E_PUB_FAILED); the message may still be delivered")
    replication_failover_timeout: Duration = Field(
        3.0, gt=0, description="(beyond NSQ) a peer not heard from for this long is lost: its first "
        "live backup delivers the copies it held of that peer's messages")
    replication_buffer_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="(beyond NSQ) bytes of frames kept per backup for "
        "resending after a reconnect; past it the oldest are dropped and the backup reported behind")

    # drain (beyond NSQ): POST /drain, SIGTERM or SIGINT
    drain_timeout: Duration = Field(
        3.0, ge=0, description="how long a drain waits for messages in flight to connected consumers "
        "before requeueing them and stopping")
    drain_accept_publishes: bool = Field(
        False, description="keep accepting (and persisting) publishes while draining, for a node that "
        "comes back on the same disk; by default publishes fail so producers move to another nsqd")

    busy_poll_window: Duration = Field(
        50e-6, ge=0, le=0.01, description="(beyond NSQ) after TCP or HTTP input, keep polling the sockets this "
        "long instead of sleeping, as Go's scheduler spins before parking a thread: a client that "
        "waits for each answer gets it sooner, for a little CPU after each burst (0 disables)")

    queue_scan_interval: Duration = Field(0.1, gt=0, description="how often the queue scan loop samples channels")
    queue_scan_refresh_interval: Duration = Field(5.0, gt=0, description="how often the queue scan loop refreshes its channel list")
    queue_scan_selection_count: int = Field(20, ge=1, description="number of channels sampled per scan")
    queue_scan_worker_pool_max: int = Field(4, ge=1, description="the maximum number of workers scanning channels (nsqd's goroutine pool; here the event loop is the one worker, so it sizes nothing)")
    queue_scan_dirty_percent: float = Field(0.25, gt=0, le=1, description="scan again at once when more than this fraction of sampled channels were dirty")

    # messages and clients
    msg_timeout: Duration = Field(60.0, ge=0.001, description="default duration to wait before auto-requeing a message")
    max_msg_timeout: Duration = Field(900.0, ge=0.001, description="maximum duration before a message will timeout")
    max_msg_size: int = Field(1048576, gt=0, description="maximum size of a single message in bytes")
    max_body_size: int = Field(5242880, gt=0, description="maximum size of a single command body")
    max_req_timeout: Duration = Field(3600.0, ge=0, description="maximum requeuing timeout for a message")
    client_timeout: Duration = Field(60.0, gt=0, description="a client is dropped after this long without a command; heartbeats default to half of it")
    max_heartbeat_interval: Duration = Field(60.0, gt=0, description="maximum client configurable duration of time between client heartbeats")
    max_rdy_count: int = Field(2500, ge=1, description="maximum RDY count for a client")
    max_output_buffer_size: int = Field(65536, ge=64, description="maximum client configurable size (in bytes) for a client output buffer")
    max_output_buffer_timeout: Duration = Field(30.0, gt=0, description="maximum client configurable duration of time between flushing to a client")
    min_output_buffer_timeout: Duration = Field(0.025, ge=0, description="minimum client configurable duration of time between flushing to a client")
    output_buffer_timeout: Duration = Field(0.25, ge=0, description="default duration of time between flushing data to clients")
    max_channel_consumers: int = Field(0, ge=0, description="maximum channel consumer connection count per nsqd instance (default 0, i.e., unlimited)")

    # statsd and latency
    statsd_address: OptionalDialAddress = Field("", description="UDP <addr>:<port> of a statsd daemon for pushing stats")
    statsd_prefix: str = Field("nsq.%s", description="prefix used for keys sent to statsd (%s for host replacement)")
    statsd_interval: Duration = Field(60.0, gt=0, description="duration between pushing to statsd")
    statsd_mem_stats: bool = Field(True, description="toggle sending memory and GC stats to statsd")
    statsd_udp_packet_size: int = Field(508, ge=64, description="the size in bytes of statsd UDP packets")
    statsd_exclude_ephemeral: bool = Field(False, description="skip ephemeral topics and channels when sending stats to statsd")
    e2e_processing_latency_window_time: Duration = Field(600.0, gt=0, description="calculate end to end latency quantiles for this duration of time")
    e2e_processing_latency_percentiles: list[float] = Field(
        default_factory=list, json_schema_extra=_flag("e2e-processing-latency-percentile"),
        description="message processing time percentiles (as float (0, 1.0]) to track (can be specified multiple times or comma separated '1.0,0.99,0.95')")

    # compression
    deflate: bool = Field(True, description="enable deflate feature negotiation (client compression)")
    max_deflate_level: int = Field(6, ge=1, le=9, description="max deflate compression level a client can negotiate (> values == > nsqd CPU usage)")
    snappy: bool = Field(True, description="enable snappy feature negotiation (client compression)")

    # TLS
    tls_cert: str = Field("", description="path to certificate file")
    tls_key: str = Field("", description="path to key file")
    tls_client_auth_policy: Literal["", "require", "require-verify"] = Field("", description="client certificate auth policy ('require' or 'require-verify')")
    tls_root_ca_file: str = Field("", description="path to certificate authority file")
    tls_required: Literal["false", "true", "tcp-https"] = Field("false", description="require TLS for client connections (true, false, tcp-https)")
    tls_min_version: Literal["ssl3.0", "tls1.0", "tls1.1", "tls1.2", "tls1.3"] = Field("tls1.2", description="minimum SSL/TLS version acceptable")

    @field_validator("log_level", mode="before")
    @classmethod
    def _log_level(cls, value: object) -> object:
        return normalize_level(value)

    @field_validator("tls_required", mode="before")
    @classmethod
    def _tls_required(cls, value: object) -> object:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):  # Go's strconv.ParseBool spellings, or tcp-https
            lowered = value.lower()
            if lowered in ("1", "t", "true"):
                return "true"
            if lowered in ("0", "f", "false"):
                return "false"
            return lowered
        return value

    @model_validator(mode="before")
    @classmethod
    def _client_auth_requires_tls(cls, data: object) -> object:
        """nsqd turns a client certificate policy into ``--tls-required=true``."""
        if isinstance(data, dict) and data.get("tls_client_auth_policy"):
            required = cls._tls_required(data.get("tls_required", "false"))
            if required == "false":
                data = {**data, "tls_required": "true"}
        return data

    @field_validator("e2e_processing_latency_percentiles", mode="before")
    @classmethod
    def _split_percentiles(cls, value: object) -> object:
        # like NSQ's flag, each value may be a comma-separated list: "1.0,0.99,0.95"
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list):
            return value
        # a config file's TOML array holds numbers: only strings are split and stripped
        return [part.strip() if isinstance(part, str) else part for item in items
                for part in (item.split(",") if isinstance(item, str) else [item])]

    @field_validator("e2e_processing_latency_percentiles")
    @classmethod
    def _percentiles(cls, values: list[float]) -> list[float]:
        for v in values:
            if not 0 < v <= 1:
                raise ValueError(f"percentile {v} must be in (0, 1.0]")
        return values

    @field_validator("replication_peers", mode="before")
    @classmethod
    def _split_peers(cls, value: object) -> object:
        return _split_list(value)

    @field_validator("topic_replicas_for", mode="before")
    @classmethod
    def _split_topic_replicas(cls, value: object) -> object:
        return _split_list(value)

    @field_validator("topic_replicas_for")
    @classmethod
    def _topic_replicas(cls, values: list[str]) -> list[str]:
        parse_topic_replicas(values)  # raises with the first entry at fault
        return values

    @property
    def topic_replica_counts(self) -> dict[str, int]:
        """--topic-replicas-for as topic -> copies."""
        return parse_topic_replicas(self.topic_replicas_for)

    @property
    def replication_on(self) -> bool:
        """Whether this nsqd runs the replication listener and links: some topic may be
        replicated (the default, a topic's own count, or later through the HTTP API,
        which needs the peers given)."""
        return (bool(self.replication_address) or self.topic_replicas > 1
                or any(n > 1 for n in self.topic_replica_counts.values()))

    @model_validator(mode="after")
    def _replication(self) -> "NsqdOptions":
        if not self.replication_on:
            return self
        widest = max([self.topic_replicas, *self.topic_replica_counts.values()])
        if not self.replication_address:
            what = "topic-replicas" if self.topic_replicas > 1 else "topic-replicas-for with a count"
            raise ValueError(f"{what} above 1 needs a replication-address")
        if self.replication_address not in self.replication_peers and not self.replication_membership_epoch:
            # with an epoch the list is managed while running: a node left out of the newest
            # one runs on with the last list it was in, from its data path (membership.py)
            raise ValueError("replication-address must be one of the replication-peer addresses")
        if len(set(self.replication_peers)) != len(self.replication_peers):
            raise ValueError("replication-peer addresses must differ")
        if len(self.replication_peers) < widest:
            raise ValueError(f"{widest} replicas of a topic need as many replication-peer addresses "
                             f"(there are {len(self.replication_peers)})")
        return self

    @model_validator(mode="after")
    def _consistent(self) -> "NsqdOptions":
        if self.max_msg_timeout < self.msg_timeout:
            raise ValueError("max-msg-timeout must not be below msg-timeout")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls-cert and tls-key must be given together")
        if self.tls_required != "false" and not self.tls_enabled:
            raise ValueError("cannot require TLS client connections without TLS key and cert")
        return self

    # derived values used on hot paths
    @property
    def heartbeat_interval(self) -> float:
        return self.client_timeout / 2

    @property
    def tls_enabled(self) -> bool:
        return bool(self.tls_cert and self.tls_key)

    @property
    def auth_enabled(self) -> bool:
        return bool(self.auth_http_addresses)


MAX_TOPIC_REPLICAS = 5


def _split_list(value: object) -> object:
    """A repeated flag whose values may each be comma separated."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        return value
    return [part.strip() for item in items for part in str(item).split(",") if part.strip()]


def parse_topic_replicas(entries: list[str]) -> dict[str, int]:
    """``["orders:3", "audit:1"]`` -> ``{"orders": 3, "audit": 1}``; a ValueError names
    the entry at fault (not <topic>:<n>, a bad or ephemeral topic name, a count outside
    1..5, a topic given twice)."""
    counts: dict[str, int] = {}
    for entry in entries:
        topic, sep, count = entry.rpartition(":")
        if not sep or not topic:
            raise ValueError(f"topic-replicas-for {entry!r}: expected <topic>:<n>, e.g. orders:3")
        if not is_valid_topic_name(topic):
            raise ValueError(f"topic-replicas-for {entry!r}: {topic!r} is not a valid topic name")
        if is_ephemeral(topic):
            raise ValueError(f"topic-replicas-for {entry!r}: an ephemeral topic is never replicated")
        if not count.strip().isdigit() or not 1 <= int(count) <= MAX_TOPIC_REPLICAS:
            raise ValueError(f"topic-replicas-for {entry!r}: the count must be a whole number from 1 to "
                             f"{MAX_TOPIC_REPLICAS}")
        if topic in counts:
            raise ValueError(f"topic-replicas-for: topic {topic!r} is given twice")
        counts[topic] = int(count)
    return counts


# flags nsqd still accepts and ignores (name -> takes no value)
DEPRECATED_FLAGS = {"verbose": True, "worker-id": False}
