"""The client's options: go-nsq's names, defaults and bounds, checked whenever one is set.

Durations are float seconds. They may also be given as Go duration strings
(``"250ms"``, ``"1m30s"``) or :class:`datetime.timedelta`; unlike go-nsq's ``Set``, a bare
number means seconds, as everywhere else in Python. A value outside its bounds raises
:class:`pydantic.ValidationError` whose message names the option and its range.
"""
from __future__ import annotations

import socket
import ssl
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from nsq_protocol.flags import format_duration, parse_duration

from .version import __version__

BackoffStrategyName = Literal["exponential", "full_jitter"]
TlsMinVersion = Literal["tls1.0", "tls1.1", "tls1.2", "tls1.3"]


def _to_seconds(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a duration is expected (seconds, a Go duration string or a timedelta)")
    if isinstance(value, str):
        return parse_duration(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


Seconds = Annotated[
    float,
    BeforeValidator(_to_seconds),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
]


def _show(value: float, is_duration: bool) -> str:
    return format_duration(value) if is_duration else f"{value:g}"


def _within(low: float | None, high: float | None, *, duration: bool = False) -> AfterValidator:
    """go-nsq's ``min``/``max`` tags: the error names the option and the whole range."""
    def check(value: Any, info: ValidationInfo) -> Any:
        if (low is not None and value < low) or (high is not None and value > high):
            lo = _show(low, duration) if low is not None else "-inf"
            hi = _show(high, duration) if high is not None else "inf"
            raise ValueError(f"{info.field_name} must be within [{lo}, {hi}], "
                             f"got {_show(value, duration)}")
        return value
    return AfterValidator(check)


def _short_hostname() -> str:
    return socket.gethostname().split(".")[0]


MINUTE = 60.0
_UNSET = object()


class Config(BaseModel):
    """One model for producers and consumers; unknown options are refused."""

    # each option's docstring is its description (Config.model_fields[name].description)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, arbitrary_types_allowed=True,
                              use_attribute_docstrings=True)

    # network
    dial_timeout: Annotated[Seconds, _within(0, None, duration=True)] = 1.0
    """How long the TCP connect to nsqd may take (0: no limit)."""
    read_timeout: Annotated[Seconds, _within(0.1, 5 * MINUTE, duration=True)] = 60.0
    """A connection silent this long (no message, no heartbeat) is closed as dead; must exceed
    ``heartbeat_interval``."""
    write_timeout: Annotated[Seconds, _within(0.1, 5 * MINUTE, duration=True)] = 1.0
    """How long one write to nsqd may wait for the socket before the connection is closed."""
    local_addr: str | None = Field(default=None, description="host or host:port to bind outgoing connections to")

    # discovery
    lookupd_poll_interval: Annotated[Seconds, _within(0.01, 5 * MINUTE, duration=True)] = 60.0
    """How often consumers (and the producer pool) ask each nsqlookupd which nsqds to use."""
    lookupd_poll_jitter: Annotated[float, _within(0, 1)] = 0.3
    """The first poll after the opening one waits a random part of the interval, up to this
    fraction of it, so that clients started together do not poll together."""
    lookupd_poll_timeout: Annotated[Seconds, _within(0, None, duration=True)] = 60.0
    """How long one query to an nsqlookupd may take (0: five minutes)."""

    # requeue and backoff
    max_requeue_delay: Annotated[Seconds, _within(0, 60 * MINUTE, duration=True)] = 15 * MINUTE
    """The longest delay a requeue asks nsqd for; longer delays are cut to it."""
    default_requeue_delay: Annotated[Seconds, _within(0, 60 * MINUTE, duration=True)] = 90.0
    """The delay of a requeue that names none (a handler that raised), multiplied by the
    message's attempts so far."""
    backoff_strategy: BackoffStrategyName = "exponential"
    """How long to back off after failures: ``exponential`` (doubling) or ``full_jitter``
    (a random time up to the doubling one)."""
    max_backoff_duration: Annotated[Seconds, _within(0, 60 * MINUTE, duration=True)] = 2 * MINUTE
    """The longest backoff; 0 turns backoff off (a failure never pauses delivery)."""
    backoff_multiplier: Annotated[Seconds, _within(0, 60 * MINUTE, duration=True)] = 1.0
    """The unit of backoff: the first backoff is this long, each further level doubles it."""
    max_attempts: Annotated[int, _within(0, 65535)] = 5
    """A message delivered more often than this is given up (finished, after the
    consumer's give-up hook) instead of handled again; 0 never gives up."""

    # RDY distribution
    low_rdy_idle_timeout: Annotated[Seconds, _within(1, 5 * MINUTE, duration=True)] = 10.0
    """With fewer RDY than connections, a connection idle this long gives its RDY to another."""
    low_rdy_timeout: Annotated[Seconds, _within(1, 5 * MINUTE, duration=True)] = 30.0
    """With fewer RDY than connections, a connection's RDY is moved on after this long even
    when it was busy, so that every nsqd is served in turn."""
    rdy_redistribute_interval: Annotated[Seconds, _within(0.001, 5, duration=True)] = 5.0
    """How often RDY is redistributed between a consumer's connections."""
    max_in_flight: Annotated[int, _within(0, None)] = 1
    """How many messages a consumer holds at once, over all its connections (RDY summed)."""

    # identity sent in IDENTIFY
    client_id: str = Field(default_factory=_short_hostname)
    """The client's name in IDENTIFY, as nsqd's stats show it (default: the short hostname)."""
    hostname: str = Field(default_factory=socket.gethostname)
    """The hostname sent in IDENTIFY."""
    user_agent: str = f"nsq_client/{__version__}"
    """The user agent sent in IDENTIFY."""

    # negotiated with nsqd; a negative heartbeat_interval or output_buffer_timeout disables
    # it, 0 keeps nsqd's default, as in IDENTIFY
    heartbeat_interval: Seconds = 30.0
    """How often nsqd sends a heartbeat on an idle connection (negative: never; 0: nsqd's
    default); must be below ``read_timeout``."""
    sample_rate: Annotated[int, _within(0, 99)] = 0
    """Deliver only this percentage of the channel's messages to this client (0: all)."""
    output_buffer_size: Annotated[int, _within(-1, None)] = 16384
    """Bytes nsqd buffers before writing to this client (-1: no buffering; 0: nsqd's default)."""
    output_buffer_timeout: Seconds = 0.25
    """How long nsqd may hold buffered output before writing it (negative: no buffering;
    0: nsqd's default)."""
    msg_timeout: Annotated[Seconds, _within(0, None, duration=True)] = 0.0
    """How long nsqd waits for this client to answer a message before it times out and is
    redelivered (0: nsqd's ``--msg-timeout``)."""

    # TLS: tls_context, when given, is used as is; otherwise one is built from the files
    tls_v1: bool = False
    """Ask nsqd to upgrade the connection to TLS after IDENTIFY."""
    tls_context: ssl.SSLContext | None = Field(default=None, exclude=True)
    """An :class:`ssl.SSLContext` to use as it is, instead of one built from the ``tls_*`` options."""
    tls_root_ca_file: str | None = None
    """A PEM file of the CAs to trust for nsqd's certificate (default: the system's)."""
    tls_insecure_skip_verify: bool = False
    """Accept any certificate from nsqd, unverified (for tests only)."""
    tls_cert: str | None = None
    """A PEM certificate to present to nsqd (with ``tls_key``), for nsqd's client-certificate checks."""
    tls_key: str | None = None
    """The private key of ``tls_cert``."""
    tls_min_version: TlsMinVersion = "tls1.2"
    """The oldest TLS version to accept from nsqd."""
    tls_server_name: str | None = Field(default=None, description="name to verify nsqd's certificate against "
                                                          "(default: the host connected to)")

    # compression
    deflate: bool = False
    """Ask nsqd to compress the connection with deflate (not with ``snappy``)."""
    deflate_level: Annotated[int, _within(1, 9)] = 6
    """The deflate level asked for (nsqd may cap it with ``--max-deflate-level``)."""
    snappy: bool = False
    """Ask nsqd to compress the connection with snappy (not with ``deflate``)."""

    auth_secret: str = ""
    """The secret sent with AUTH when nsqd requires authorization (``--auth-http-address``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        # pydantic keeps an assigned value even when a model-level check then refuses it
        previous = self.__dict__.get(name, _UNSET)
        try:
            super().__setattr__(name, value)
        except ValidationError:
            if previous is not _UNSET:
                self.__dict__[name] = previous
            raise

    @model_validator(mode="after")
    def _consistent(self) -> "Config":
        if self.heartbeat_interval > self.read_timeout:
            raise ValueError(f"heartbeat_interval ({format_duration(self.heartbeat_interval)}) must be "
                             f"less than read_timeout ({format_duration(self.read_timeout)})")
        if self.deflate and self.snappy:
            raise ValueError("deflate and snappy cannot both be enabled")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls_cert and tls_key must be given together")
        return self

    def identify_body(self) -> dict[str, Any]:
        """The IDENTIFY JSON this configuration asks nsqd for."""
        return {
            "client_id": self.client_id,
            "hostname": self.hostname,
            "user_agent": self.user_agent,
            "feature_negotiation": True,
            "heartbeat_interval": _millis_or_disabled(self.heartbeat_interval),
            "output_buffer_size": self.output_buffer_size,
            "output_buffer_timeout": _millis_or_disabled(self.output_buffer_timeout),
            "tls_v1": self.tls_v1,
            "deflate": self.deflate,
            "deflate_level": self.deflate_level,
            "snappy": self.snappy,
            "sample_rate": self.sample_rate,
            "msg_timeout": round(self.msg_timeout * 1000),
        }


def _millis_or_disabled(seconds: float) -> int:
    return -1 if seconds < 0 else round(seconds * 1000)
