"""The nsqd and nsqlookupd options a cluster's owner tunes, keyed by NSQ's flag names
(``mem-queue-size``), with nsqd v1.3.0's defaults and bounds. Listen addresses, data path,
broadcast address and lookupd list are the operator's to set, so they are not here."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from nsq_protocol.flags import parse_duration

from .common import GoDuration, duration_between

LogLevel = Literal["debug", "info", "warn", "error", "fatal"]


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class FlagNamedOptions(BaseModel):
    """Options spelled as NSQ's flags on the wire; ``config_file()`` gives NSQ's config
    file keys (the field names) and values."""

    model_config = ConfigDict(alias_generator=_kebab, populate_by_name=True, extra="forbid")

    def config_file(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def _duration(default: str, description: str) -> Any:
    return Field(default, description=f"{description} (a Go duration such as 60s, 1m30s, 250ms)")


Positive = Annotated[GoDuration, AfterValidator(duration_between(low=0.001))]
NonNegative = Annotated[GoDuration, AfterValidator(duration_between(low=0.0))]
BusyPoll = Annotated[GoDuration, AfterValidator(duration_between(low=0.0, high=0.01))]


class NsqdTunables(FlagNamedOptions):
    # durability: see NsqdSpec.durable for what each promises
    mem_queue_size: int = Field(10000, ge=0, description="number of messages to keep in memory per topic and channel; 0 writes every message to the disk queue before it is acknowledged (messages in flight and deferred still live in memory: spec.nsqd.durable keeps those on disk too)")
    sync_every: int = Field(2500, ge=1, description="number of disk queue writes per fsync; 1 fsyncs each one (bounds what a node crash loses of the disk queue, not what is in memory)")
    sync_timeout: Positive = _duration("2s", "longest time between disk queue fsyncs")
    max_bytes_per_file: int = Field(104857600, ge=1024, description="bytes per disk queue file before rolling to the next")

    msg_timeout: Positive = _duration("60s", "default time a consumer has before a message is requeued")
    max_msg_timeout: Positive = _duration("15m", "longest message timeout a consumer may ask for (TOUCH)")
    max_msg_size: int = Field(1048576, ge=1, description="largest message body in bytes")
    max_body_size: int = Field(5242880, ge=1, description="largest command body (MPUB) in bytes")
    max_req_timeout: NonNegative = _duration("1h", "longest requeue delay a consumer may ask for")
    client_timeout: Positive = _duration("60s", "a client is dropped after this long without a command")
    max_heartbeat_interval: Positive = _duration("60s", "longest heartbeat interval a client may ask for")
    max_rdy_count: int = Field(2500, ge=1, description="largest RDY count a client may send")
    max_output_buffer_size: int = Field(65536, ge=64, description="largest output buffer in bytes a client may ask for")
    max_output_buffer_timeout: Positive = _duration("30s", "longest output buffer flush interval a client may ask for")
    min_output_buffer_timeout: NonNegative = _duration("25ms", "shortest output buffer flush interval a client may ask for")
    output_buffer_timeout: NonNegative = _duration("250ms", "default output buffer flush interval")
    max_channel_consumers: int = Field(0, ge=0, description="most consumers per channel on one nsqd; 0 is unlimited")

    deflate: bool = Field(True, description="let clients negotiate deflate compression")
    max_deflate_level: int = Field(6, ge=1, le=9, description="highest deflate level a client may ask for")
    snappy: bool = Field(True, description="let clients negotiate snappy compression")

    e2e_processing_latency_window_time: Positive = _duration("10m", "window for end to end latency quantiles")
    e2e_processing_latency_percentiles: list[Annotated[float, Field(gt=0, le=1)]] = Field(
        default_factory=list, description="end to end latency percentiles to track, each in (0, 1]")
    log_level: LogLevel = Field("info", description="debug, info, warn, error or fatal")
    # beyond NSQ: see nsqd -h; 0 when CPU time is scarce (a tight CPU limit)
    busy_poll_window: BusyPoll = _duration(
        "50us", "after TCP or HTTP input, how long nsqd keeps polling its sockets instead of sleeping, for "
        "faster answers to clients that wait for each one; costs CPU after each burst, 0 disables, at most 10ms")

    @model_validator(mode="after")
    def _timeouts_in_order(self) -> "NsqdTunables":
        if parse_duration(self.max_msg_timeout) < parse_duration(self.msg_timeout):
            raise ValueError("max-msg-timeout must not be below msg-timeout")
        if parse_duration(self.max_output_buffer_timeout) < parse_duration(self.min_output_buffer_timeout):
            raise ValueError("max-output-buffer-timeout must not be below min-output-buffer-timeout")
        return self


class LookupdTunables(FlagNamedOptions):
    inactive_producer_timeout: Positive = _duration("300s", "an nsqd is forgotten after this long without a ping")
    tombstone_lifetime: Positive = _duration("45s", "how long a tombstoned topic stays hidden from lookups")
    log_level: LogLevel = Field("info", description="debug, info, warn, error or fatal")
