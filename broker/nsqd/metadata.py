"""``nsqd.dat``: which topics and channels exist and whether they are paused.

Same JSON as nsqd writes (``{"topics": [{"name", "paused", "channels": [{"name",
"paused"}]}], "version"}``), written atomically: temp file, fsync, rename, fsync of the
directory. Ephemeral topics and channels are never written.
"""
from __future__ import annotations

import json
import logging
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from nsq_protocol.names import is_valid_channel_name, is_valid_topic_name

log = logging.getLogger("nsqd")

FILE_NAME = "nsqd.dat"


@dataclass
class ChannelMeta:
    name: str
    paused: bool = False


@dataclass
class TopicMeta:
    name: str
    paused: bool = False
    channels: list[ChannelMeta] = field(default_factory=list)


def metadata_path(data_path: str | os.PathLike) -> Path:
    return Path(data_path) / FILE_NAME


def encode(topics: list[TopicMeta], version: str) -> bytes:
    doc = {
        "topics": [{"channels": [{"name": c.name, "paused": c.paused} for c in t.channels],
                    "name": t.name, "paused": t.paused} for t in topics],
        "version": version,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode(data: bytes) -> list[TopicMeta]:
    doc = json.loads(data)
    topics: list[TopicMeta] = []
    for t in doc.get("topics") or []:
        name = t.get("name", "")
        if not is_valid_topic_name(name):
            log.warning("skipping creation of invalid topic %s", name)
            continue
        channels = []
        for c in t.get("channels") or []:
            cname = c.get("name", "")
            if not is_valid_channel_name(cname):
                log.warning("skipping creation of invalid channel %s", cname)
                continue
            channels.append(ChannelMeta(cname, bool(c.get("paused", False))))
        topics.append(TopicMeta(name, bool(t.get("paused", False)), channels))
    return topics


def write(data_path: str | os.PathLike, topics: list[TopicMeta], version: str) -> None:
    target = metadata_path(data_path)
    tmp = target.with_name(f"{FILE_NAME}.{random.getrandbits(63)}.tmp")
    with open(tmp, "wb") as f:
        f.write(encode(topics, version))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read(data_path: str | os.PathLike) -> list[TopicMeta]:
    """The saved topics; none when there is no file. A corrupt file is an error: starting
    without it would silently forget every topic."""
    path = metadata_path(data_path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    try:
        return decode(data)
    except (ValueError, AttributeError, TypeError) as e:
        raise ValueError(f"failed to parse metadata file {path}: {e}") from None
