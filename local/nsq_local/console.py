"""The nsq-local console script, started through :func:`nsq_protocol.launch.launch`: a
module that is not installed is named, with what to install, instead of a traceback."""
from __future__ import annotations

from nsq_protocol.launch import launch


def nsq_local() -> int:
    return launch("nsq-local", "nsq_local.cli:main", "nsq-servers")
