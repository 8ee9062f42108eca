"""The order test files start in under ``make test``: the longest first.

xdist's ``--dist loadfile`` gives a worker a whole file at a time and, by default, starts
the files with the most tests first, so the few long files (a real Spark cluster, rolling
upgrades under the emulated API server) were left for the end, one running alone while
the other worker idled. ``make test`` passes ``--no-loadscope-reorder`` and these files
start first, longest first, as measured by ``--durations`` (seconds per file, 2 workers
on 2 cores); the many short files fill in behind them."""
from __future__ import annotations

import pytest

LONGEST_FIRST = (
    "tests/pipeline/test_spark_cluster.py",  # about 130 s
    "tests/operator/test_operator_rollout.py",  # 100 s
    "tests/broker/test_replication_failover.py",  # 95 s
    "tests/operator/test_operator_replication.py",  # 80 s
    "tests/broker/test_replication_membership.py",  # 55 s
    "tests/pipeline/test_spark_recovery.py",  # 55 s
    "tests/broker/test_replication_slow_disk.py",  # 40 s
    "e2e/test_operator_rollout.py",  # 37 s
    "e2e/test_operator_tls.py",  # 35 s
    "tests/broker/test_replication_clock.py",  # 37 s
    "tests/broker/test_replication_channel_state.py",  # 35 s
    "tests/interop/test_replicated_topics.py",  # 34 s
    "tests/broker/test_replication_return.py",  # 30 s
    "tests/operator/test_operator_apply.py",  # 26 s
    "tests/broker/test_replication_majority.py",  # 25 s (network namespaces)
    "tests/operator/test_operator_ghosts.py",  # 25 s
    "tests/broker/test_durability_shutdown.py",  # 18 s
    "tests/operator/test_operator_long_drain.py",  # 18 s
    "tests/broker/test_durability_faults.py",  # 17 s
    "tests/operator/test_operator_storage_growth.py",  # 17 s
    "tests/broker/test_replication_adopter_lost.py",  # 16 s (network namespaces)
    "tests/broker/test_replication_snapshot_stream.py",  # 16 s
    "tests/broker/test_replication_pull_slow.py",  # 16 s (network namespaces)
    "tests/broker/test_replication_adopt_asked.py",  # 18 s
    "tests/broker/test_replication_count_change.py",  # 22 s
    "tests/pipeline/test_spark_source.py",  # 16 s
    "tests/operator/test_operator_rollout_resume.py",  # 16 s
)


def longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the listed files first, in the list's order; each file's tests and
    every other file keep their order."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    unlisted = len(LONGEST_FIRST)

    def key(indexed: tuple[int, pytest.Item]) -> tuple[int, int]:
        index, item = indexed
        return rank.get(item.nodeid.split("::", 1)[0], unlisted), index
    return [item for _, item in sorted(enumerate(items), key=key)]
