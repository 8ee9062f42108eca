"""What a local cluster, its load and the demo are made of; the CLI and the tests build these."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_validator


class ClusterOptions(BaseModel):
    """2 nsqlookupds and N nsqds on loopback ports, each node in its own directory."""

    nsqds: int = Field(default=3, ge=1, le=64, description="number of nsqd processes")
    lookupds: int = Field(default=2, ge=1, le=16, description="number of nsqlookupd processes")
    host: str = Field(default="127.0.0.1", description="loopback address every node listens on")
    workdir: Path = Field(description="each node gets a subdirectory here: its data and its log")
    base_port: int = Field(default=0, ge=0, le=65000, description="0: free ports; else lookupds take "
                           "base, base+1, ... (TCP, HTTP pairs), then the nsqds")
    nsqd_flags: dict[str, str] = Field(default_factory=dict, description="extra nsqd flags "
                                       "(name without dashes -> value)")
    lookupd_flags: dict[str, str] = Field(default_factory=dict, description="extra nsqlookupd flags")
    start_timeout: float = Field(default=30.0, gt=0, description="seconds a node has to answer and register")
    admin: bool = Field(default=False, description="also run nsqadmin (the web UI), asking every lookupd")

    @model_validator(mode="after")
    def _ports_fit(self) -> "ClusterOptions":
        if self.base_port and self.base_port + 2 * (self.nsqds + self.lookupds + self.admin) > 65535:
            raise ValueError(f"base_port {self.base_port} leaves no room for every node's two ports")
        return self


class LoadOptions(BaseModel):
    """Producers through the producer pool, consumers through lookupd, one consumer per
    channel of each topic; every body starts with a unique ID."""

    topics: list[str] = Field(default_factory=lambda: ["orders", "clicks"], min_length=1)
    channels: list[str] = Field(default_factory=lambda: ["archive", "alerts"], min_length=1)
    rate: float = Field(default=1000.0, gt=0, description="messages per second published to each topic")
    batch: int = Field(default=10, ge=1, le=1000, description="messages per MPUB (1: PUB)")
    publishers: int = Field(default=2, ge=1, le=64, description="concurrent publishing tasks per topic")
    body_size: int = Field(default=64, ge=32, le=65536, description="bytes per message body (ID and padding)")
    max_in_flight: int = Field(default=100, ge=1, description="each consumer's RDY budget over its nsqds")
    handlers: int = Field(default=4, ge=1, le=256, description="concurrent handlers per consumer")
    lookupd_poll_interval: float = Field(default=1.0, gt=0, description="seconds between consumers' lookupd polls")
    slow_channel: str | None = Field(default=None, description="a channel whose consumers keep up with only "
                                     "slow_share of the publish rate while publishing goes on, so every "
                                     "nsqd holds a backlog when it is drained; it catches up once "
                                     "publishing stops")
    slow_share: float = Field(default=0.8, gt=0, le=1)

    @model_validator(mode="after")
    def _slow_channel_is_a_channel(self) -> "LoadOptions":
        if self.slow_channel is not None and self.slow_channel not in self.channels:
            raise ValueError(f"slow_channel {self.slow_channel!r} is not one of the channels {self.channels}")
        return self


class DemoOptions(BaseModel):
    """A rolling restart of the cluster's nsqds (or a scale-down of the last ones) under
    load, between a phase of load before and one after, then waiting until every
    acknowledged message was delivered."""

    cluster: ClusterOptions
    load: LoadOptions = Field(default_factory=lambda: LoadOptions())
    before: float = Field(default=5.0, ge=0, description="seconds of load before the rolling restart")
    after: float = Field(default=5.0, ge=0, description="seconds of load after it")
    settle_timeout: float = Field(default=30.0, gt=0, description="seconds for the last messages to be "
                                  "delivered once publishing stopped")
    exit_timeout: float = Field(default=60.0, gt=0, description="seconds a drained nsqd has to exit before "
                                "it is killed")
    drain_by: Literal["auto", "http", "sigterm"] = Field(default=
        "auto", description="how a node is drained: POST /drain (http), SIGTERM, or http where nsqd "
        "offers it, else SIGTERM (auto)")
    scale_down: int = Field(default=0, ge=0, description="0: the rolling restart; N: instead, scale down "
                            "the N last nsqds one at a time, each handing its backlog to the others")
    handoff_timeout: float = Field(default=60.0, gt=0, description="seconds a scaled-down nsqd has to hand "
                                   "its backlog off")

    @model_validator(mode="after")
    def _someone_stays(self) -> "DemoOptions":
        if self.scale_down >= self.cluster.nsqds:
            raise ValueError(f"scale_down {self.scale_down} leaves no nsqd of {self.cluster.nsqds} to hand off to")
        return self
