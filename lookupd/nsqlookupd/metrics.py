"""Beyond NSQ: what nsqlookupd knows, for Prometheus (text exposition format).

Producers are the nsqd nodes heard from within --inactive-producer-timeout; per topic,
the producers a consumer's /lookup would get (tombstoned ones left out) and the channels.
"""
from __future__ import annotations

from nsq_protocol.prometheus import Exposition

from .registry import Registry


def render(registry: Registry, version: str, now: float) -> str:
    out = Exposition()
    topics = registry.topics()
    out.gauge("nsqlookupd_info", "Always 1; the labels say which nsqlookupd this is.", {"version": version}, 1)
    out.gauge("nsqlookupd_producers", "nsqd nodes registered and not inactive.", {}, len(registry.nodes(now)))
    out.gauge("nsqlookupd_topics", "Topics known.", {}, len(topics))
    out.gauge("nsqlookupd_channels", "Channels known, over all topics.", {},
              sum(len(registry.channels(t)) for t in topics))
    for topic in topics:
        found = registry.lookup(topic, now)
        producers = len(found.producers) if found is not None else 0
        out.gauge("nsqlookupd_topic_producers", "Producers /lookup answers for the topic.", {"topic": topic},
                  producers)
        out.gauge("nsqlookupd_topic_channels", "Channels known for the topic.", {"topic": topic},
                  len(registry.channels(topic)))
    return out.render()
