"""Topic and channel name rules: 1 to 64 of ``[.a-zA-Z0-9_-]``, optionally ending ``#ephemeral``."""
from __future__ import annotations

import re

MAX_NAME_LENGTH = 64
EPHEMERAL_SUFFIX = "#ephemeral"
_NAME = re.compile(r"[.a-zA-Z0-9_-]+(#ephemeral)?")


def _is_valid_name(name: str | bytes) -> bool:
    if isinstance(name, bytes):
        try:
            name = name.decode("ascii")
        except UnicodeDecodeError:
            return False
    return 1 <= len(name) <= MAX_NAME_LENGTH and _NAME.fullmatch(name) is not None


def is_valid_topic_name(name: str | bytes) -> bool:
    return _is_valid_name(name)


def is_valid_channel_name(name: str | bytes) -> bool:
    return _is_valid_name(name)


def is_ephemeral(name: str) -> bool:
    return name.endswith(EPHEMERAL_SUFFIX)
