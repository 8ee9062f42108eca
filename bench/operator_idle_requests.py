"""API requests an idle NsqCluster costs, at the operator's production intervals: the
operator (kopf and its own client) against the test harness's emulated API server and
kubelet, one cluster (1 nsqd, 1 nsqlookupd) with N NsqTopics, all Ready, then a window in
which nothing changes. Prints requests per minute, in all and by verb and resource.

    .venv/bin/python bench/operator_idle_requests.py [--topics 2] [--window 60]"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the harness lives in tests/

from nsq_operator.runtime import Intervals  # noqa: E402
from tests.operator.harness import Backstage, OperatorUnderTest  # noqa: E402
from tests.operator.idle_cost import idle_cluster, idle_cost  # noqa: E402


async def measure(topics: int, window: float, restricted: bool) -> None:
    with tempfile.TemporaryDirectory() as root:
        backstage = Backstage(Path(root), "bench", restricted=restricted).start()
        operator = OperatorUnderTest(backstage, "bench", Intervals())
        try:
            await operator.start()
            await idle_cluster(operator, "idle", topics)
            cost = await idle_cost(operator, window)
        finally:
            await operator.stop()
            backstage.stop()
    intervals = Intervals()
    print(f"idle NsqCluster with {topics} NsqTopics, status every {intervals.cluster_status:g}s, drift every "
          f"{intervals.topology:g}s, roller every {intervals.rollout:g}s; window {cost.seconds:.0f}s")
    print(f"{cost.per_minute:8.1f} requests/min in all ({cost.per_minute / 60:.2f}/s)")
    for key, n in sorted(cost.requests.items(), key=lambda kv: -kv[1]):
        print(f"{n * 60 / cost.seconds:8.1f} /min  {key}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=2)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--unrestricted", action="store_true",
                        help="no Pod Security enforcement (to measure an operator whose pods would not pass it)")
    args = parser.parse_args()
    asyncio.run(measure(args.topics, args.window, not args.unrestricted))


if __name__ == "__main__":
    main()
