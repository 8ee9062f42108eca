"""nsqlookupd's logger: NSQ's text lines (``[nsqlookupd] 2006/01/02 15:04:05.000000 INFO: text``)
on stderr, formatted by :mod:`nsq_protocol.logfmt` like nsqd's."""
from __future__ import annotations

import logging
import sys
from typing import TextIO

from nsq_protocol.logfmt import NsqJsonFormatter, NsqTextFormatter, level_number


def make_logger(name: str, prefix: str, level: str, stream: TextIO | None = None,
                fmt: str = "text") -> logging.Logger:
    """A logger of its own (not propagated to the root) writing NSQ-style lines, or one
    JSON object a line with ``fmt="json"``."""
    logger = logging.getLogger(name)
    logger.handlers.clear()
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(NsqJsonFormatter(name) if fmt == "json" else NsqTextFormatter(prefix))
    logger.addHandler(handler)
    logger.setLevel(level_number(level))
    logger.propagate = False
    return logger
