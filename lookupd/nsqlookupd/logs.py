"""Log lines as NSQ writes them to stderr: ``<prefix>2006/01/02 15:04:05.000000 INFO: text``."""
from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
          "error": logging.ERROR, "fatal": logging.CRITICAL}
_LABELS = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARNING",
           logging.ERROR: "ERROR", logging.CRITICAL: "FATAL"}


class NsqLogFormatter(logging.Formatter):
    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(record.created))
        micros = int((record.created % 1) * 1_000_000)
        label = _LABELS.get(record.levelno, record.levelname)
        text = f"{self.prefix}{stamp}.{micros:06d} {label}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def make_logger(name: str, prefix: str, level: str, stream: TextIO | None = None) -> logging.Logger:
    """A logger of its own (not propagated to the root) writing NSQ-style lines."""
    logger = logging.getLogger(name)
    logger.handlers.clear()
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(NsqLogFormatter(prefix))
    logger.addHandler(handler)
    logger.setLevel(LEVELS[level])
    logger.propagate = False
    return logger
