"""nsqd ``/stats`` answers reshaped into Go nsqadmin's JSON (``TopicStats``,
``ChannelStats``, ``ClientStats``) and summed across nodes. Pure functions.

A node's entries carry ``node`` (its ``broadcast_address:http_port``) and ``hostname``;
sums carry ``node: "*"`` and the node entries they were made of under ``nodes``.

In a topic's ``channels`` Go (``TopicStats.Add``) walks the nodes by hostname and keeps the
first node's own channel entry, adding any later node's entry for the same channel into
it. So a channel one node holds is that node's entry, and one that several hold is a sum
that keeps the first node's traits: its ``hostname``, and on each latency percentile that
node reported, that node's ``value`` (Go updates the map in place; a quantile only later
nodes report has none). We build the same sum without Go's side effects: it lists every
node under ``nodes`` (Go's lists the later ones only) and the first node's own entry under
the topic's ``nodes`` stays that node's (Go's becomes the sum). The keys are Go's.
"""
from __future__ import annotations

import time
from typing import Any, Iterable

Json = dict[str, Any]

_CLIENT_KEYS = ("remote_address", "version", "client_id", "hostname", "user_agent", "connect_ts")
_CLIENT_COUNTS = ("in_flight_count", "ready_count", "finish_count", "requeue_count", "message_count", "sample_rate")
_CLIENT_FLAGS = ("deflate", "snappy", "authed")
_CLIENT_AUTH = ("auth_identity", "auth_identity_url")
_CHANNEL_SUMS = ("depth", "memory_depth", "backend_depth", "in_flight_count", "deferred_count",
                 "requeue_count", "timeout_count", "message_count", "client_count")
_TOPIC_SUMS = ("depth", "memory_depth", "backend_depth", "message_count")


def node_latency(raw: Json | None) -> Json:
    """A node's e2e processing latency: each percentile's ``value`` is also its min, max
    and average, weighted by the node's sample count."""
    raw = raw or {}
    count = int(raw.get("count") or 0)
    percentiles = None
    if raw.get("percentiles"):
        percentiles = [dict(sorted({**p, "min": p.get("value", 0), "max": p.get("value", 0),
                                    "average": p.get("value", 0), "count": count}.items()))
                       for p in raw["percentiles"]]
    return {"count": count, "percentiles": percentiles, "topic": "", "channel": "", "host": ""}


def sum_latency(parts: Iterable[Json], topic: str, channel: str = "") -> Json:
    """Nodes' latencies together: per quantile the extremes, the sample count and the
    count-weighted average."""
    count = 0
    by_quantile: dict[float, Json] = {}
    for part in parts:
        count += int(part.get("count") or 0)
        for p in part.get("percentiles") or []:
            q = p["quantile"]
            acc = by_quantile.setdefault(q, {"quantile": q, "count": 0, "average": 0.0,
                                              "max": p["max"], "min": p["min"]})
            acc["max"], acc["min"] = max(acc["max"], p["max"]), min(acc["min"], p["min"])
            total = acc["count"] + p["count"]
            if total:
                acc["average"] = (acc["average"] * acc["count"] + p["average"] * p["count"]) / total
            acc["count"] = total
    percentiles = [dict(sorted(v.items())) for _, v in sorted(by_quantile.items(), reverse=True)] or None
    return {"count": count, "percentiles": percentiles, "topic": topic, "channel": channel, "host": "*"}


def node_client(node: str, raw: Json, now: float | None = None) -> Json:
    """A consumer connection as nsqadmin shows it; ``connected`` is how long, in
    nanoseconds of whole seconds, as Go marshals a duration."""
    now = time.time() if now is None else now
    client: Json = {"node": node}
    for key in _CLIENT_KEYS:
        client[key] = raw.get(key, 0 if key == "connect_ts" else "")
    connect_ts = int(client["connect_ts"] or 0)
    client["connected"] = max(0, int(now) - connect_ts) * 1_000_000_000
    for key in _CLIENT_COUNTS:
        client[key] = int(raw.get(key) or 0)
    for key in _CLIENT_FLAGS:
        client[key] = bool(raw.get(key))
    for key in _CLIENT_AUTH:
        client[key] = str(raw.get(key) or "")
    client["tls"] = bool(raw.get("tls"))
    client["tls_cipher_suite"] = str(raw.get("tls_cipher_suite") or "")
    client["tls_version"] = str(raw.get("tls_version") or "")
    client["tls_negotiated_protocol"] = str(raw.get("tls_negotiated_protocol") or "")
    client["tls_negotiated_protocol_is_mutual"] = bool(raw.get("tls_negotiated_protocol_is_mutual"))
    return client


def node_channel(node: str, hostname: str, topic: str, raw: Json, now: float | None = None) -> Json:
    depth, backend = int(raw.get("depth") or 0), int(raw.get("backend_depth") or 0)
    clients = [node_client(node, c, now) for c in raw.get("clients") or []]
    return {
        "node": node, "hostname": hostname, "topic_name": topic, "channel_name": raw["channel_name"],
        "depth": depth, "memory_depth": depth - backend, "backend_depth": backend,
        "in_flight_count": int(raw.get("in_flight_count") or 0),
        "deferred_count": int(raw.get("deferred_count") or 0),
        "requeue_count": int(raw.get("requeue_count") or 0),
        "timeout_count": int(raw.get("timeout_count") or 0),
        "message_count": int(raw.get("message_count") or 0),
        "client_count": int(raw.get("client_count", len(clients)) or 0),
        "nodes": None, "clients": clients, "paused": bool(raw.get("paused")),
        "e2e_processing_latency": node_latency(raw.get("e2e_processing_latency")),
    }


def node_topic(node: str, hostname: str, raw: Json, now: float | None = None) -> Json:
    depth, backend = int(raw.get("depth") or 0), int(raw.get("backend_depth") or 0)
    name = raw["topic_name"]
    return {
        "node": node, "hostname": hostname, "topic_name": name,
        "depth": depth, "memory_depth": depth - backend, "backend_depth": backend,
        "message_count": int(raw.get("message_count") or 0), "nodes": None,
        "channels": [node_channel(node, hostname, name, c, now) for c in raw.get("channels") or []],
        "paused": bool(raw.get("paused")),
        "e2e_processing_latency": node_latency(raw.get("e2e_processing_latency")),
    }


def _by_host(entries: list[Json]) -> list[Json]:
    return sorted(entries, key=lambda e: (e["hostname"], e["node"]))


def sum_channel(topic: str, channel: str, parts: list[Json]) -> Json:
    """One channel across nodes: counts summed, paused if paused anywhere, every node's
    clients (by host)."""
    total: Json = {"node": "*", "hostname": "", "topic_name": topic, "channel_name": channel}
    for key in _CHANNEL_SUMS:
        total[key] = sum(p[key] for p in parts)
    clients = [c for p in parts for c in p["clients"]]
    total["nodes"] = _by_host(parts) or None
    total["clients"] = sorted(clients, key=lambda c: (c["hostname"], c["node"])) if clients else None
    total["paused"] = any(p["paused"] for p in parts)
    total["e2e_processing_latency"] = sum_latency((p["e2e_processing_latency"] for p in parts), topic, channel)
    return total


def topic_channel_total(topic: str, channel: str, parts: list[Json]) -> Json:
    """A channel several nodes hold, as a topic's answer lists it: the sum, grown from the
    first node's entry (``parts`` by host) as Go grows it."""
    first = parts[0]
    total = sum_channel(topic, channel, parts)
    total["hostname"] = first["hostname"]
    latency = sum_latency((p["e2e_processing_latency"] for p in parts), "")
    own = {p["quantile"]: p["value"] for p in first["e2e_processing_latency"]["percentiles"] or [] if "value" in p}
    latency["percentiles"] = [dict(sorted({**p, "value": own[p["quantile"]]}.items())) if p["quantile"] in own else p
                              for p in latency["percentiles"] or []] or None
    total["e2e_processing_latency"] = latency
    return total


def sum_topic(topic: str, parts: list[Json]) -> Json:
    """One topic across nodes, with its channels in the order the nodes (by host) list them."""
    total: Json = {"node": "*", "hostname": "", "topic_name": topic}
    for key in _TOPIC_SUMS:
        total[key] = sum(p[key] for p in parts)
    total["nodes"] = _by_host(parts) or None
    channels: dict[str, list[Json]] = {}
    for part in total["nodes"] or []:
        for channel in part["channels"]:
            channels.setdefault(channel["channel_name"], []).append(channel)
    total["channels"] = [chans[0] if len(chans) == 1 else topic_channel_total(topic, name, chans)
                         for name, chans in channels.items()] or None
    total["paused"] = any(p["paused"] for p in parts)
    total["e2e_processing_latency"] = sum_latency((p["e2e_processing_latency"] for p in parts), topic)
    return total


def counters(node_topics: list[Json]) -> dict[str, Json]:
    """``/api/counter``'s ``stats``: messages per channel per node, keyed ``topic:channel:node``."""
    out: dict[str, Json] = {}
    for topic in node_topics:
        for channel in topic["channels"]:
            key = f"{topic['topic_name']}:{channel['channel_name']}:{channel['node']}"
            entry = out.setdefault(key, {"node": channel["node"], "topic_name": topic["topic_name"],
                                         "channel_name": channel["channel_name"], "message_count": 0})
            entry["message_count"] += channel["message_count"]
    return out


def node_totals(node_topics: list[Json]) -> tuple[int, int]:
    """(messages published to the node's topics, clients connected to its channels)."""
    messages = sum(t["message_count"] for t in node_topics)
    clients = sum(c["client_count"] for t in node_topics for c in t["channels"])
    return messages, clients
