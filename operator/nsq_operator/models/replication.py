"""Status of replicated topics: where each nsqd's copies stand, as its GET /replication says."""
from __future__ import annotations

from pydantic import Field

from .common import CrdModel


class OwnerCopies(CrdModel):
    """The copies of the messages one nsqd accepted: its own and its backups'."""
    pod: str = Field(description="the nsqd that accepted the messages (their owner)")
    in_sync: list[str] = Field(default_factory=list, description="pods holding every copy: the owner while it "
                                                                 "answers, its backups connected and up to date")
    catching_up: list[str] = Field(default_factory=list, description="backups connected and receiving what they "
                                                                     "were sent while away")
    behind: list[str] = Field(default_factory=list, description="backups connected but lacking older copies their "
                                                                "owner could not keep for them (its resend buffer "
                                                                "overflowed); the owner still holds those messages")
    missing: list[str] = Field(default_factory=list, description="the owner when it does not answer, backups it "
                                                                 "is not connected to")


class ReplicationStatus(CrdModel):
    replicas: int = Field(1, description="copies wanted of each message: on an NsqTopic the topic's own count "
                                         "(its spec.replicas, else the cluster's default), on the NsqCluster the "
                                         "default its nsqds run with (spec.nsqd.replication.replicas)")
    in_sync: int = Field(0, description="copies in sync, over every owner")
    catching_up: int = Field(0, description="copies catching up")
    behind: int = Field(0, description="copies behind (older messages missing)")
    missing: int = Field(0, description="copies missing")
    owners: list[OwnerCopies] = Field(default_factory=list, description="per nsqd, where the copies of the "
                                                                        "messages it accepted stand")
