"""IDENTIFY: the client's JSON, nsqd's bounds, and the negotiated settings and response."""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import E_BAD_BODY, E_IDENTIFY_FAILED, ProtocolError


class IdentifyRequest(BaseModel):
    """What a client may send. Unknown keys are ignored and null means "not set", as in
    nsqd's JSON decoding; a value of the wrong JSON type is an error."""

    model_config = ConfigDict(strict=True, extra="ignore")

    client_id: str | None = None
    hostname: str | None = None
    user_agent: str | None = None
    feature_negotiation: bool | None = None
    heartbeat_interval: int | None = None
    output_buffer_size: int | None = None
    output_buffer_timeout: int | None = None
    tls_v1: bool | None = None
    snappy: bool | None = None
    deflate: bool | None = None
    deflate_level: int | None = None
    sample_rate: int | None = None
    msg_timeout: int | None = None

    @classmethod
    def parse(cls, body: bytes) -> "IdentifyRequest":
        try:
            return cls.model_validate_json(body)
        except ValidationError:
            raise ProtocolError(E_BAD_BODY, "IDENTIFY failed to decode JSON body") from None


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """The nsqd options IDENTIFY is negotiated against (durations in milliseconds)."""

    version: str
    max_rdy_count: int
    msg_timeout_ms: int
    max_msg_timeout_ms: int
    heartbeat_interval_ms: int
    max_heartbeat_interval_ms: int
    output_buffer_size: int
    max_output_buffer_size: int
    output_buffer_timeout_ms: int
    min_output_buffer_timeout_ms: int
    max_output_buffer_timeout_ms: int
    max_deflate_level: int
    deflate_enabled: bool
    snappy_enabled: bool
    tls_available: bool
    auth_required: bool


@dataclass(frozen=True, slots=True)
class Negotiated:
    client_id: str
    hostname: str
    user_agent: str
    feature_negotiation: bool
    heartbeat_interval_ms: int  # 0: heartbeats disabled
    output_buffer_size: int
    output_buffer_timeout_ms: int  # 0: no buffering
    sample_rate: int
    msg_timeout_ms: int
    tls: bool
    snappy: bool
    deflate: bool
    deflate_level: int

    def response(self, limits: ServerLimits) -> dict:
        """The JSON nsqd answers a feature-negotiating IDENTIFY with."""
        return {
            "max_rdy_count": limits.max_rdy_count,
            "version": limits.version,
            "max_msg_timeout": limits.max_msg_timeout_ms,
            "msg_timeout": self.msg_timeout_ms,
            "tls_v1": self.tls,
            "deflate": self.deflate,
            "deflate_level": self.deflate_level,
            "max_deflate_level": limits.max_deflate_level,
            "snappy": self.snappy,
            "sample_rate": self.sample_rate,
            "auth_required": limits.auth_required,
            "output_buffer_size": self.output_buffer_size,
            "output_buffer_timeout": self.output_buffer_timeout_ms,
        }


def _bad(message: str) -> ProtocolError:
    return ProtocolError(E_BAD_BODY, f"IDENTIFY {message}")


def negotiate(req: IdentifyRequest, limits: ServerLimits) -> Negotiated:
    """Apply nsqd's rules: ``0`` keeps the server default, ``-1`` disables where allowed,
    anything else must lie within the server's bounds (else ``E_BAD_BODY``). The names
    are what the client sent, empty when it sent none (nsqd v1.3.0 reads no other key;
    the names it had before IDENTIFY are replaced either way)."""
    heartbeat = limits.heartbeat_interval_ms
    desired = req.heartbeat_interval or 0
    if desired == -1:
        heartbeat = 0
    elif desired != 0:
        if not 1000 <= desired <= limits.max_heartbeat_interval_ms:
            raise _bad(f"heartbeat interval ({desired}) is invalid")
        heartbeat = desired

    buffer_timeout = limits.output_buffer_timeout_ms
    desired = req.output_buffer_timeout or 0
    if desired == -1:
        buffer_timeout = 0
    elif desired != 0:
        if not limits.min_output_buffer_timeout_ms <= desired <= limits.max_output_buffer_timeout_ms:
            raise _bad(f"output buffer timeout ({desired}) is invalid")
        buffer_timeout = desired

    buffer_size = limits.output_buffer_size
    desired = req.output_buffer_size or 0
    if desired == -1:
        buffer_size = 1  # every write goes straight to the socket, so nothing waits either
        buffer_timeout = 0
    elif desired != 0:
        if not 64 <= desired <= limits.max_output_buffer_size:
            raise _bad(f"output buffer size ({desired}) is invalid")
        buffer_size = desired

    sample_rate = req.sample_rate or 0
    if not 0 <= sample_rate <= 99:
        raise _bad(f"sample rate ({sample_rate}) is invalid")

    msg_timeout = limits.msg_timeout_ms
    desired = req.msg_timeout or 0
    if desired != 0:
        if not 1000 <= desired <= limits.max_msg_timeout_ms:
            raise _bad(f"msg timeout ({desired}) is invalid")
        msg_timeout = desired

    negotiating = bool(req.feature_negotiation)
    tls = negotiating and limits.tls_available and bool(req.tls_v1)
    deflate = negotiating and limits.deflate_enabled and bool(req.deflate)
    deflate_level = 6
    if deflate and (req.deflate_level or 0) > 0:
        deflate_level = req.deflate_level or 6
    deflate_level = min(deflate_level, limits.max_deflate_level)
    snappy = negotiating and limits.snappy_enabled and bool(req.snappy)
    if deflate and snappy:
        raise ProtocolError(E_IDENTIFY_FAILED, "cannot enable both deflate and snappy compression")

    return Negotiated(
        client_id=req.client_id or "",
        hostname=req.hostname or "",
        user_agent=req.user_agent or "",
        feature_negotiation=negotiating,
        heartbeat_interval_ms=heartbeat,
        output_buffer_size=buffer_size,
        output_buffer_timeout_ms=buffer_timeout,
        sample_rate=sample_rate,
        msg_timeout_ms=msg_timeout,
        tls=tls,
        snappy=snappy,
        deflate=deflate,
        deflate_level=deflate_level,
    )
