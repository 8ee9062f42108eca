"""Log lines as nsqd writes them (``[nsqd] 2006/01/02 15:04:05.000000 INFO: ...``), or JSON."""
from __future__ import annotations

import logging
import sys

from nsq_protocol.logfmt import NsqJsonFormatter as JsonFormatter
from nsq_protocol.logfmt import NsqTextFormatter as NsqFormatter
from nsq_protocol.logfmt import level_number as python_level

__all__ = ["JsonFormatter", "NsqFormatter", "python_level", "setup"]


def setup(component: str, level: str, prefix: str, fmt: str = "text") -> logging.Logger:
    # neither formatter shows the thread, the process or the caller's line, which logging
    # would otherwise look up for every record (the caller by walking the stack)
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None  # type: ignore[attr-defined]  # logging's documented switch for the caller lookup
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(component) if fmt == "json" else NsqFormatter(prefix))
    logger = logging.getLogger(component)
    logger.handlers[:] = [handler]
    logger.setLevel(python_level(level))
    logger.propagate = False
    return logger
