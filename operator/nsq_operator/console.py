"""The nsq-operator console script, started through :func:`nsq_protocol.launch.launch`:
a module that is not installed (kopf, say) is named, with what to install, instead of a
traceback."""
from __future__ import annotations

from nsq_protocol.launch import launch


def nsq_operator() -> int:
    return launch("nsq-operator", "nsq_operator.cli:main", "nsq-operator")
