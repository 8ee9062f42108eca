"""The HTTP calls KEDA's ``nsq`` scaler (keda v2.16+, pkg/scalers/nsq_scaler.go) makes,
made the same way, so a test can check what depth it would read from our servers:

1. ``GET http://<lookupd>/lookup?topic=<topic>`` on every lookupd of
   ``nsqLookupdHTTPAddresses``, with ``Accept: application/json; charset=utf-8``; 404
   means the topic is unknown to that lookupd, any other status but 200 fails the scale;
   each producer is ``<broadcast_address>:<http_port>`` (Go's net.JoinHostPort), deduplicated.
2. ``GET http://<nsqd>/stats?format=json&include_clients=false&include_mem=false&topic=<topic>``
   on each; any status but 200 fails (plain HTTP: an nsqd with --tls-required=true answers 403).
3. Per nsqd, for the entry of the topic: no channels -> the topic's depth; the channel,
   unless paused -> its depth; the topic has channels but not this one -> the topic's depth.
   Summed; the scaler is active when the sum exceeds activationDepthThreshold.

The answers are decoded as Go's encoding/json decodes them into the scaler's structs:
field names matched case-insensitively, integers must be whole JSON numbers, booleans
JSON booleans; a wrong type fails the scale as it would in KEDA."""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

ACCEPT = "application/json; charset=utf-8"


class ScaleError(Exception):
    """What KEDA would report as an error of the scaler (no scaling decision)."""


def _field(obj: Any, name: str) -> Any:
    """Go's json field lookup: exact name first, then a case-insensitive match."""
    if not isinstance(obj, dict):
        raise ScaleError(f"expected a JSON object, got {type(obj).__name__}")
    if name in obj:
        return obj[name]
    return next((v for k, v in obj.items() if k.lower() == name.lower()), None)


def _int(value: Any, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise ScaleError(f"{what}: cannot unmarshal {value!r} into int")
    return int(value)


def _bool(value: Any, what: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ScaleError(f"{what}: cannot unmarshal {value!r} into bool")
    return value


def _str(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ScaleError(f"{what}: cannot unmarshal {value!r} into string")
    return value


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def producers(lookupds: list[str], topic: str) -> list[str]:
    found: set[str] = set()
    for lookupd in lookupds:
        status, body = _get(f"http://{lookupd}/lookup?" + urllib.parse.urlencode({"topic": topic}),
                            {"Accept": ACCEPT})
        if status == 404:
            continue
        if status != 200:
            raise ScaleError(f"lookupd {lookupd}: unexpected status code {status}")
        for producer in _field(json.loads(body), "producers") or []:
            found.add(join_host_port(_str(_field(producer, "broadcast_address"), "broadcast_address"),
                                     _int(_field(producer, "http_port"), "http_port")))
    return sorted(found)


def depth(lookupds: list[str], topic: str, channel: str, resolve: dict[str, str] | None = None) -> int:
    """The depth the scaler reads; ``resolve`` maps a producer address (pod DNS name) to
    where the test reaches it (a cluster's DNS would)."""
    total = 0
    for nsqd in producers(lookupds, topic):
        query = urllib.parse.urlencode({"format": "json", "include_clients": "false", "include_mem": "false",
                                        "topic": topic})
        status, body = _get(f"http://{(resolve or {}).get(nsqd, nsqd)}/stats?{query}")
        if status != 200:
            raise ScaleError(f"nsqd {nsqd}: unexpected status code {status}")
        for entry in _field(json.loads(body), "topics") or []:
            if _str(_field(entry, "topic_name"), "topic_name") != topic:
                continue
            channels = _field(entry, "channels") or []
            if not channels:
                total += _int(_field(entry, "depth"), "depth")
                continue
            named = [c for c in channels if _str(_field(c, "channel_name"), "channel_name") == channel]
            if not named:
                total += _int(_field(entry, "depth"), "depth")
            for found in named:
                if not _bool(_field(found, "paused"), "paused"):
                    total += _int(_field(found, "depth"), "depth")
    return total
