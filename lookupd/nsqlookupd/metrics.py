"""Beyond NSQ: what nsqlookupd knows, for Prometheus, exposed with prometheus_client (a
custom collector over the registry at every scrape, beside the process collector).

Producers are the nsqd nodes heard from within --inactive-producer-timeout; per topic,
the producers a consumer's /lookup would get (tombstoned ones left out) and the channels.
"""
from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from .registry import Registry


def families(registry: Registry, version: str, now: float) -> list[Metric]:
    topics = registry.topics()
    info = GaugeMetricFamily("nsqlookupd_info", "Always 1; the labels say which nsqlookupd this is.",
                             labels=["version"])
    info.add_metric([version], 1)
    producers = GaugeMetricFamily("nsqlookupd_producers", "nsqd nodes registered and not inactive.",
                                  value=len(registry.nodes(now)))
    topic_count = GaugeMetricFamily("nsqlookupd_topics", "Topics known.", value=len(topics))
    channel_count = GaugeMetricFamily("nsqlookupd_channels", "Channels known, over all topics.",
                                      value=sum(len(registry.channels(t)) for t in topics))
    topic_producers = GaugeMetricFamily("nsqlookupd_topic_producers", "Producers /lookup answers for the topic.",
                                        labels=["topic"])
    topic_channels = GaugeMetricFamily("nsqlookupd_topic_channels", "Channels known for the topic.", labels=["topic"])
    for topic in topics:
        found = registry.lookup(topic, now)
        topic_producers.add_metric([topic], len(found.producers) if found is not None else 0)
        topic_channels.add_metric([topic], len(registry.channels(topic)))
    return [info, producers, topic_count, channel_count, topic_producers, topic_channels]


class LookupdCollector(Collector):
    def __init__(self, registry: Registry, version: str, clock: Callable[[], float]) -> None:
        self.registry = registry
        self.version = version
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        yield from families(self.registry, self.version, self.clock())


def registry(collector: Collector) -> CollectorRegistry:
    """A registry of ``collector`` and prometheus_client's process collector."""
    found = CollectorRegistry(auto_describe=False)
    found.register(collector)
    found.register(ProcessCollector(registry=None))
    return found


def exposition(found: CollectorRegistry, accept: str) -> tuple[bytes, str]:
    """The registry in the format the scraper's Accept header asks for (Prometheus' text
    format by default, OpenMetrics when asked): body and Content-Type."""
    encoder, content_type = choose_encoder(accept)
    return encoder(found), content_type
