"""NSQ's topic and channel name rules as schema constraints and validators."""
from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from nsq_protocol.names import MAX_NAME_LENGTH, is_valid_channel_name, is_valid_topic_name

NSQ_NAME_PATTERN = r"^[.a-zA-Z0-9_-]+(#ephemeral)?$"


def _topic(name: str) -> str:
    if not is_valid_topic_name(name):
        raise ValueError(f"{name!r} is not a valid NSQ topic name (1-{MAX_NAME_LENGTH} of [.a-zA-Z0-9_-], optionally #ephemeral)")
    return name


def _channel(name: str) -> str:
    if not is_valid_channel_name(name):
        raise ValueError(f"{name!r} is not a valid NSQ channel name (1-{MAX_NAME_LENGTH} of [.a-zA-Z0-9_-], optionally #ephemeral)")
    return name


TopicName = Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH, pattern=NSQ_NAME_PATTERN), AfterValidator(_topic)]
ChannelName = Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH, pattern=NSQ_NAME_PATTERN), AfterValidator(_channel)]
