"""NsqTopic and NsqChannel: topics and channels kept on every nsqd of a cluster."""
from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from .common import CrdModel, DeletionPolicy, StatusBase
from .names import ChannelName, TopicName
from .replication import ReplicationStatus

def _same(field: str) -> str:
    """CEL: the field has the value it had (set or unset alike)."""
    return (f"has(self.{field}) == has(oldSelf.{field}) && "
            f"(!has(self.{field}) || self.{field} == oldSelf.{field})")


def immutable(*fields: str) -> ConfigDict:
    """Transition rules (x-kubernetes-validations) by which the API server refuses a change
    of the fields naming what an object declares: a renamed topic would leave the old one
    behind on every nsqd, whatever the deletionPolicy. Delete and create instead."""
    return ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        {"rule": _same(field), "message": f"{field} is immutable: delete this object and create another"}
        for field in fields]})


CLUSTER_NAME = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                     description="name of the NsqCluster in this namespace")


class NsqTopicSpec(CrdModel):
    model_config = immutable("cluster", "topicName")

    cluster: str = CLUSTER_NAME
    topic_name: TopicName | None = Field(None, description="the NSQ topic; metadata.name when unset")
    paused: bool = Field(False, description="stop delivering the topic's messages to its channels")
    replicas: int | None = Field(
        None, ge=1, le=5,
        description="copies of each message of this topic, on as many nsqds (1: not replicated); the cluster's "
                    "spec.nsqd.replication.replicas when unset. Above 1 it needs replication on in the NsqCluster "
                    "(replicas above 1 or perTopic) and at most as many nsqds; otherwise the Ready condition says "
                    "so. A change applies to the messages the topic holds: raised, they are copied to the nsqds "
                    "added; lowered, those removed forget their copies")
    deletion_policy: DeletionPolicy = Field("Retain", description="on deletion of this object: Retain keeps the topic on the nsqds, Delete removes it")
    delete_with_messages: bool = Field(False, description="with deletionPolicy Delete: delete the topic even while it holds messages (they are lost)")


class NsqChannelSpec(CrdModel):
    model_config = immutable("cluster", "topic", "channelName")

    cluster: str = CLUSTER_NAME
    topic: TopicName = Field(description="the NSQ topic the channel belongs to (created when missing)")
    channel_name: ChannelName | None = Field(None, description="the NSQ channel; metadata.name when unset")
    paused: bool = Field(False, description="stop delivering the channel's messages to its consumers")
    deletion_policy: DeletionPolicy = Field("Retain", description="on deletion of this object: Retain keeps the channel on the nsqds, Delete removes it")
    delete_with_messages: bool = Field(False, description="with deletionPolicy Delete: delete the channel even while it holds messages (they are lost)")


class NodeCounts(CrdModel):
    pod: str = Field(description="the nsqd pod")
    depth: int = Field(0, description="messages waiting (memory and disk)")
    in_flight: int = Field(0, description="messages sent to consumers and not yet finished")
    deferred: int = Field(0, description="messages deferred by their publisher or a requeue")
    paused: bool = Field(False, description="paused on this nsqd")


class TopologyStatus(StatusBase):
    name: str | None = Field(None, description="the NSQ topic or channel name being reconciled")
    depth: int = Field(0, description="messages waiting on all nsqds")
    in_flight: int = Field(0, description="messages in flight on all nsqds")
    nodes: list[NodeCounts] = Field(default_factory=list, description="counts per nsqd")
    emptied_request: str | None = Field(None, description="the last empty request (annotation value) acted on")
    replication: ReplicationStatus | None = Field(
        None, description="NsqTopic with replicated topics: where the copies of this topic's messages stand on the "
                          "nsqds that have it; left out when replication is off or the topic is ephemeral")


def named(spec_name: str | None, body: Any) -> str:
    """The NSQ name of an object: its spec's name, else its metadata.name."""
    return spec_name if spec_name else str(body["metadata"]["name"])
