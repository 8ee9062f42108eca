"""NSQ's log lines: ``<prefix>YYYY/MM/DD hh:mm:ss.micros LEVEL: text`` in local time, or JSON."""
from __future__ import annotations

import json
import logging
import sys
import time

import pytest

from nsq_protocol.logfmt import LOG_LEVELS, NsqJsonFormatter, NsqTextFormatter, level_number

CREATED = 1_700_000_000.000123  # 2023-11-14 22:13:20 UTC, 123 microseconds


def record(level: int, message: str, *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("boom")
        except ValueError:
            exc_info = sys.exc_info()
    rec = logging.LogRecord("nsqd", level, __file__, 1, message, args, exc_info)
    rec.created = CREATED
    return rec


def local_stamp(created: float) -> str:
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(created))


@pytest.mark.parametrize("level,label", [(logging.DEBUG, "DEBUG"), (logging.INFO, "INFO"),
                                         (logging.WARNING, "WARNING"), (logging.ERROR, "ERROR"),
                                         (logging.CRITICAL, "FATAL")])
def test_text_line_has_prefix_local_time_micros_and_nsqs_level_name(level: int, label: str) -> None:
    line = NsqTextFormatter("[nsqd] ").format(record(level, "TCP: listening on %s", "127.0.0.1:4150"))
    assert line == f"[nsqd] {local_stamp(CREATED)}.000123 {label}: TCP: listening on 127.0.0.1:4150"


def test_text_line_with_an_empty_prefix_starts_with_the_date() -> None:
    assert NsqTextFormatter("").format(record(logging.INFO, "x")) == f"{local_stamp(CREATED)}.000123 INFO: x"


def test_a_traceback_follows_the_text_line() -> None:
    first, *rest = NsqTextFormatter("[p] ").format(record(logging.ERROR, "failed", exc=True)).splitlines()
    assert first.endswith(" ERROR: failed")
    assert rest[0] == "Traceback (most recent call last):" and rest[-1] == "ValueError: boom"


def test_json_line_is_one_object_naming_the_component() -> None:
    line = NsqJsonFormatter("nsqlookupd").format(record(logging.WARNING, "peer %s gone", "a:1"))
    assert "\n" not in line
    assert json.loads(line) == {"ts": CREATED, "level": "warning", "component": "nsqlookupd", "msg": "peer a:1 gone"}


def test_json_line_carries_the_traceback() -> None:
    doc = json.loads(NsqJsonFormatter("nsqd").format(record(logging.CRITICAL, "dead", exc=True)))
    assert doc["level"] == "fatal" and doc["exc"].endswith("ValueError: boom")


def test_log_level_flag_values_map_to_ordered_logging_levels() -> None:
    numbers = [level_number(name) for name in LOG_LEVELS]
    assert LOG_LEVELS == ("debug", "info", "warn", "error", "fatal")
    assert numbers == [logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL]
    with pytest.raises(KeyError):
        level_number("loud")
