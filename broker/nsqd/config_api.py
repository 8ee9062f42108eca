"""``GET /config/:opt`` and ``PUT /config/:opt`` as Go's nsqd v1.3.0 answers them.

Go serves every option that is a flag, under its config-file name (``id`` for
``--node-id``), with the value it runs with: strings as they are (the HTTP layer sends
them as text), durations in nanoseconds, the log level, ``tls_required`` and
``tls_min_version`` as Go's numbers, the broadcast ports and the statsd prefix as they
were resolved at start. Options Go has but does not serve there (``node_id``,
``client_timeout``, the queue scan's intervals) are 400 ``INVALID_OPTION`` as in Go;
options only ours has (``busy_poll_window``, ``sync_before_ack``, the drain's ...) are
served like Go's. Only ``nsqlookupd_tcp_addresses`` and ``log_level`` can be set.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from nsq_protocol.flags import is_duration_field
from nsq_protocol.http_api import HttpError

from .options import NsqdOptions
from .statsd import expand_prefix

if TYPE_CHECKING:
    from .nsqd import NSQD

# fields of Go's options struct that carry no flag, or a config name other than ours
GO_OPTIONS_NOT_SERVED = frozenset({
    "node_id", "client_timeout", "queue_scan_interval", "queue_scan_refresh_interval",
    "queue_scan_dirty_percent",
})
GO_LOG_LEVELS = {"debug": 1, "info": 2, "warn": 3, "error": 4, "fatal": 5}
GO_TLS_REQUIRED = {"false": 0, "tcp-https": 1, "true": 2}
GO_TLS_VERSIONS = {"ssl3.0": 0x0300, "tls1.0": 0x0301, "tls1.1": 0x0302, "tls1.2": 0x0303, "tls1.3": 0x0304}


def served_value(nsqd: "NSQD", name: str) -> Any:
    """What ``GET /config/<name>`` answers; HttpError(400, INVALID_OPTION) if nothing."""
    opts = nsqd.options
    if name == "id":
        return opts.node_id
    if name in GO_OPTIONS_NOT_SERVED or name not in NsqdOptions.model_fields:
        raise HttpError(400, "INVALID_OPTION")
    info = nsqd.info()
    resolved: dict[str, Any] = {
        "log_level": lambda: GO_LOG_LEVELS[opts.log_level],
        "tls_required": lambda: GO_TLS_REQUIRED[opts.tls_required],
        "tls_min_version": lambda: GO_TLS_VERSIONS[opts.tls_min_version],
        "broadcast_tcp_port": lambda: info["tcp_port"],
        "broadcast_http_port": lambda: info["http_port"],
        "statsd_prefix": lambda: (expand_prefix(opts.statsd_prefix, opts.broadcast_address, info["http_port"])
                                  if opts.statsd_prefix else ""),
    }
    if name in resolved:
        return resolved[name]()
    value = getattr(opts, name)
    if is_duration_field(NsqdOptions, name):
        return int(round(value * 1e9))  # Go marshals durations as nanoseconds
    return value


def put_value(nsqd: "NSQD", name: str, body: bytes) -> None:
    """``PUT /config/<name>`` with ``body``, validated as Go validates it."""
    if name == "nsqlookupd_tcp_addresses":
        try:
            addresses = json.loads(body)
        except ValueError:
            raise HttpError(400, "INVALID_VALUE") from None
        if addresses is None:  # Go decodes null into an empty list
            addresses = []
        if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
            raise HttpError(400, "INVALID_VALUE")
        try:
            nsqd.set_lookupd_addresses(addresses)
        except ValueError:  # not host:port: Go takes it and fails at every dial
            raise HttpError(400, "INVALID_VALUE") from None
    elif name == "log_level":
        level = body.decode("utf-8", "replace").lower()  # no trimming: Go refuses " info"
        if level not in GO_LOG_LEVELS:
            raise HttpError(400, "INVALID_VALUE")
        nsqd.set_log_level(level)
    else:
        raise HttpError(400, "INVALID_OPTION")
