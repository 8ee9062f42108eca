"""NSQ's log line formats, shared by nsqd and nsqlookupd: pure formatting, no handlers.

Text, as NSQ writes to stderr: ``<prefix>2006/01/02 15:04:05.000000 INFO: text`` (local
time, microseconds, the level's upper-case name). JSON, one object a line, for log
collectors: ``{"ts", "level", "component", "msg"}`` plus ``"exc"`` with a traceback.
"""
from __future__ import annotations

import json
import logging
from datetime import datetime

# --log-level values, least to most severe, and the logging level each one means.
LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")
_NUMBERS = dict(zip(LOG_LEVELS, (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)))
_LABELS = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARNING",
           logging.ERROR: "ERROR", logging.CRITICAL: "FATAL"}


def normalize_level(value: object) -> object:
    """A ``--log-level`` as given (any case, ``warning`` for ``warn``) to its canonical
    name; ValueError for an unknown one. Non-strings pass through for the model to judge."""
    if not isinstance(value, str):
        return value
    level = value.lower()
    if level == "warning":
        level = "warn"
    if level not in LOG_LEVELS:
        raise ValueError(f"invalid log level {value!r} ({', '.join(LOG_LEVELS)})")
    return level


def level_number(level: str) -> int:
    """The logging level of a ``--log-level`` value (KeyError for anything else)."""
    return _NUMBERS[level]


def level_label(record: logging.LogRecord) -> str:
    """The level as NSQ names it in a line: DEBUG, INFO, WARNING, ERROR or FATAL."""
    return _LABELS.get(record.levelno, record.levelname)


def text_line(prefix: str, created: float, label: str, message: str) -> str:
    stamp = datetime.fromtimestamp(created).strftime("%Y/%m/%d %H:%M:%S.%f")
    return f"{prefix}{stamp} {label}: {message}"


class NsqTextFormatter(logging.Formatter):
    """Records as NSQ's text lines; a traceback, if any, follows on the next lines."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def format(self, record: logging.LogRecord) -> str:
        line = text_line(self.prefix, record.created, level_label(record), record.getMessage())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class NsqJsonFormatter(logging.Formatter):
    """Records as one JSON object each, naming the component that logged them."""

    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        doc = {"ts": record.created, "level": level_label(record).lower(),
               "component": self.component, "msg": record.getMessage()}
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)
