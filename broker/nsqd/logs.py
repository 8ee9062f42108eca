"""Log lines as nsqd writes them (``[nsqd] 2006/01/02 15:04:05.000000 INFO: ...``), or JSON."""
from __future__ import annotations

import json
import logging
import sys
import time

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
           "error": logging.ERROR, "fatal": logging.CRITICAL}
_NAMES = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARNING",
          logging.ERROR: "ERROR", logging.CRITICAL: "FATAL"}


def python_level(level: str) -> int:
    return _LEVELS[level]


class NsqFormatter(logging.Formatter):
    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(record.created))
        micros = int((record.created % 1) * 1_000_000)
        line = f"{self.prefix}{stamp}.{micros:06d} {_NAMES.get(record.levelno, record.levelname)}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        doc = {"ts": record.created, "level": _NAMES.get(record.levelno, record.levelname).lower(),
               "component": self.component, "msg": record.getMessage()}
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def setup(component: str, level: str, prefix: str, fmt: str = "text") -> logging.Logger:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(component) if fmt == "json" else NsqFormatter(prefix))
    logger = logging.getLogger(component)
    logger.handlers[:] = [handler]
    logger.setLevel(python_level(level))
    logger.propagate = False
    return logger
