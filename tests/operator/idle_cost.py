"""What an idle cluster costs the API server: the operator's requests (its own client's,
named nsq-operator, and kopf's) counted by the emulator over a window in which nothing
changes. Shared by the test and by bench/operator_idle_requests.py."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from tests.operator.addresses import KubeletEndpoints
from tests.operator.harness import OperatorUnderTest

OPERATOR_CLIENTS = ("nsq-operator", "kopf")


@dataclass(frozen=True)
class IdleCost:
    seconds: float
    requests: dict[str, int]  # "<client> <verb> <resource>" -> requests in the window
    nsqd_lookups: int  # the operator's passes that talked to an nsqd, one per nsqd each

    @property
    def per_minute(self) -> float:
        return sum(self.requests.values()) * 60.0 / self.seconds

    def count(self, verb: str, resource: str) -> int:
        return sum(n for key, n in self.requests.items() if key.split(" ", 1)[1] == f"{verb} {resource}")


async def idle_cost(operator: OperatorUnderTest, seconds: float) -> IdleCost:
    endpoints = operator.runtime.endpoints
    assert isinstance(endpoints, KubeletEndpoints)
    before, lookups = await operator.api_requests(), endpoints.nsqd_lookups
    began = time.monotonic()
    await asyncio.sleep(seconds)  # the measurement window itself: nothing is waited for
    after = await operator.api_requests()
    spent = {key: n - before.get(key, 0) for key, n in after.items()
             if key.split(" ", 1)[0] in OPERATOR_CLIENTS and n - before.get(key, 0) > 0}
    return IdleCost(time.monotonic() - began, spent, endpoints.nsqd_lookups - lookups)


async def idle_cluster(operator: OperatorUnderTest, name: str, objects: int) -> None:
    """An NsqCluster (1 nsqd, 1 nsqlookupd) with ``objects`` NsqTopics, all Ready."""
    await operator.create("NsqCluster", name, {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1},
                                               "admin": {"enabled": False}})
    for i in range(objects):
        await operator.create("NsqTopic", f"{name}-t{i}", {"cluster": name, "topicName": f"t{i}"})
    await operator.ready("NsqCluster", name, timeout=90)
    for i in range(objects):
        await operator.ready("NsqTopic", f"{name}-t{i}", timeout=60)
