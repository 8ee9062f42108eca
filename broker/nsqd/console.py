"""The nsqd console script, started through :func:`nsq_protocol.launch.launch`: a module
that is not installed is named, with what to install, instead of a traceback."""
from __future__ import annotations

from nsq_protocol.launch import launch


def nsqd() -> int:
    return launch("nsqd", "nsqd.cli:main", "nsq-servers")
