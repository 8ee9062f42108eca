"""The operator's log lines say which object they are about: a line per timer pass is of no
use to a reader who cannot tell the topics apart."""
from __future__ import annotations

import logging
from typing import Iterator

import kopf
import pytest

from nsq_operator.log_format import ObjectNamingFormatter


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def captured() -> Iterator[Lines]:
    handler = Lines()
    handler.setFormatter(ObjectNamingFormatter())
    kopf_objects = logging.getLogger("kopf.objects")
    kopf_objects.addHandler(handler)
    level = kopf_objects.level
    kopf_objects.setLevel(logging.INFO)
    yield handler
    kopf_objects.removeHandler(handler)
    kopf_objects.setLevel(level)


def test_a_line_kopf_logs_for_an_object_names_it(captured: Lines) -> None:
    body = kopf.Body({"apiVersion": "nsq.dev/v1alpha1", "kind": "NsqTopic",
                      "metadata": {"namespace": "shop", "name": "orders", "uid": "u-1"}})
    kopf.ObjectLogger(body=body, settings=kopf.OperatorSettings()).info("Timer %r succeeded.", "drift")
    assert captured.lines[-1].endswith(" INFO kopf.objects: [shop/orders] Timer 'drift' succeeded.")


def test_a_line_about_no_object_is_left_as_it_is(captured: Lines) -> None:
    logging.getLogger("kopf.objects").info("the operator %s", "starts")
    assert captured.lines[-1].endswith(" INFO kopf.objects: the operator starts")
