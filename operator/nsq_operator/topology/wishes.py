"""What an NsqTopic or NsqChannel asks for, checked against NSQ's name rules."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from nsq_protocol.names import is_valid_channel_name, is_valid_topic_name

from ..models import NsqChannelSpec, NsqTopicSpec
from ..status.errors import BadSpec, describe


@dataclass(frozen=True)
class TopicWish:
    cluster: str
    namespace: str
    topic: str
    paused: bool
    owner: str = ""  # the object's name: one NSQ name may be declared by one object only
    created: str = ""  # its creationTimestamp: the oldest declaration of a name wins
    replicas: int | None = None  # copies asked of each nsqd (spec.replicas; None: nsqd's default)


@dataclass(frozen=True)
class ChannelWish:
    cluster: str
    namespace: str
    topic: str
    channel: str
    paused: bool
    owner: str = ""
    created: str = ""


def topic_spec(body: Any) -> NsqTopicSpec:
    try:
        return NsqTopicSpec.model_validate(dict(body.get("spec") or {}))
    except ValidationError as e:
        raise BadSpec(describe(e)) from None


def channel_spec(body: Any) -> NsqChannelSpec:
    try:
        return NsqChannelSpec.model_validate(dict(body.get("spec") or {}))
    except ValidationError as e:
        raise BadSpec(describe(e)) from None


def topic_wish(body: Any) -> TopicWish:
    spec = topic_spec(body)
    name = spec.topic_name or body["metadata"]["name"]
    if not is_valid_topic_name(name):
        raise BadSpec(f"metadata.name: {name!r} is not a valid NSQ topic name; set spec.topicName")
    meta = body["metadata"]
    return TopicWish(spec.cluster, meta["namespace"], name, spec.paused, meta["name"], str(meta.get("creationTimestamp") or ""),
                     spec.replicas)


def channel_wish(body: Any) -> ChannelWish:
    spec = channel_spec(body)
    name = spec.channel_name or body["metadata"]["name"]
    if not is_valid_channel_name(name):
        raise BadSpec(f"metadata.name: {name!r} is not a valid NSQ channel name; set spec.channelName")
    meta = body["metadata"]
    return ChannelWish(spec.cluster, meta["namespace"], spec.topic, name, spec.paused, meta["name"],
                       str(meta.get("creationTimestamp") or ""))
