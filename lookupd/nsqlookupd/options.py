"""nsqlookupd's configuration: NSQ's flag names (``_`` for ``-``), defaults and bounds."""
from __future__ import annotations

import socket
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from nsq_protocol.flags import Duration
from nsq_protocol.host_port import ListenAddress
from nsq_protocol.logfmt import normalize_level

LogLevel = Annotated[str, BeforeValidator(normalize_level)]


class NsqlookupdOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    log_level: LogLevel = Field("info", description="set log verbosity: debug, info, warn, error, or fatal")
    log_prefix: str = Field("[nsqlookupd] ", description="log message prefix")
    log_format: Literal["text", "json"] = Field("text", description="log line format: text (NSQ's) or json")
    tcp_address: ListenAddress = Field("0.0.0.0:4160", description="<addr>:<port> to listen on for TCP clients")
    http_address: ListenAddress = Field("0.0.0.0:4161", description="<addr>:<port> to listen on for HTTP clients")
    broadcast_address: str = Field(default_factory=socket.gethostname,
                                   description="address of this lookupd node, (default to the OS hostname)")
    inactive_producer_timeout: Duration = Field(
        300.0, ge=0, description="duration of time a producer will remain in the active list since its last ping")
    tombstone_lifetime: Duration = Field(
        45.0, ge=0, description="duration of time a producer will remain tombstoned if registration remains")
