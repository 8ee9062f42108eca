"""Answers as Go's nsqadmin writes them (its ``V1`` decorator): JSON with
``X-NSQ-Content-Type``, a string value written as is, errors as ``{"message": CODE}``."""
from __future__ import annotations

import json
from typing import Any

from aiohttp import web

JSON_TYPE = "application/json; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"
NSQ_CONTENT_TYPE = ("X-NSQ-Content-Type", "nsq; version=1.0")


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def encode(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def v1(data: Any, status: int = 200) -> web.Response:
    body = data.encode() if isinstance(data, str) else encode(data)
    return web.Response(status=status, body=body,
                        headers={"Content-Type": JSON_TYPE, NSQ_CONTENT_TYPE[0]: NSQ_CONTENT_TYPE[1]})


def error(status: int, message: str) -> web.Response:
    return v1({"message": message}, status)


def text(body: str) -> web.Response:
    return web.Response(status=200, body=body.encode(), headers={"Content-Type": TEXT_TYPE})


def warnings(messages: list[str]) -> str:
    """Go's ``message`` field: "" or ``WARNING: a; b``."""
    return "WARNING: " + "; ".join(messages) if messages else ""
