"""The client's console scripts (nsq_tail, nsq_stat, to_nsq), started through
:func:`nsq_protocol.launch.launch`: a module that is not installed is named, with what
to install, instead of a traceback."""
from __future__ import annotations

from nsq_protocol.launch import launch

DISTRIBUTION = "nsq-client"
EXTRAS = {"aiohttp": "nsq-client[admin]", "uvloop": "nsq-client[uvloop]"}


def nsq_tail() -> int:
    return launch("nsq_tail", "nsq_client.tools.tail:main", DISTRIBUTION, EXTRAS)


def nsq_stat() -> int:
    return launch("nsq_stat", "nsq_client.tools.stat:main", DISTRIBUTION, EXTRAS)


def to_nsq() -> int:
    return launch("to_nsq", "nsq_client.tools.to_nsq:main", DISTRIBUTION, EXTRAS)
