"""The operator's log lines name the object they are about.

kopf passes an object's identity with each record it logs for that object (its
``k8s_ref`` extra: kind, namespace, name); a plain formatter drops it, leaving lines such as
"Timer 'drift' succeeded." that no reader can tie to a topic or cluster."""
from __future__ import annotations

import logging

LINE = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class ObjectNamingFormatter(logging.Formatter):
    """``LINE``, with ``[namespace/name]`` (``[name]`` for a cluster-wide object) before
    the message of every record that carries kopf's object reference."""

    def __init__(self) -> None:
        super().__init__(LINE)

    def formatMessage(self, record: logging.LogRecord) -> str:
        ref = getattr(record, "k8s_ref", None)
        if not isinstance(ref, dict) or not ref.get("name"):
            return super().formatMessage(record)
        where = f"{ref['namespace']}/{ref['name']}" if ref.get("namespace") else str(ref["name"])
        named = logging.makeLogRecord({**record.__dict__, "message": f"[{where}] {record.message}"})
        return super().formatMessage(named)


def configure_logging(verbose: bool) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(ObjectNamingFormatter())
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
