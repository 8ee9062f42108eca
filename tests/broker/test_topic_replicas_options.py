"""A topic's own number of copies: nsqd's --topic-replicas-for, parsed and checked by the
options model (a one-line error naming the flag), and the counts a running nsqd keeps
(``replication/topic_counts.py``): flag over API, persisted, capped, forgotten."""
from __future__ import annotations

from pathlib import Path

import pytest

from nsqd.cli import load_options
from nsqd.options import NsqdOptions
from nsqd.replication.topic_counts import TopicCountError, TopicCounts

PEERS = "--replication-peer=127.0.0.1:4001,127.0.0.1:4002,127.0.0.1:4003"
ME = "--replication-address=127.0.0.1:4001"


def test_repeated_and_comma_separated_entries_make_one_map() -> None:
    options = load_options([ME, PEERS, "--topic-replicas-for=orders:3,audit:1", "--topic-replicas-for=logs:2"])
    assert isinstance(options, NsqdOptions)
    assert options.topic_replica_counts == {"orders": 3, "audit": 1, "logs": 2}
    assert options.topic_replicas == 1 and options.replication_on


def test_the_config_file_takes_a_list() -> None:
    options = NsqdOptions(replication_address="a:1", replication_peers=["a:1", "b:1"],
                          topic_replicas_for=["orders:2"])
    assert options.topic_replica_counts == {"orders": 2}


def test_peers_alone_turn_the_replication_listener_on_with_one_copy_by_default() -> None:
    options = load_options([ME, PEERS])
    assert isinstance(options, NsqdOptions) and options.replication_on and options.topic_replicas == 1


def test_without_any_replication_flag_replication_stays_off() -> None:
    options = load_options(["--topic-replicas-for=orders:1"])
    assert isinstance(options, NsqdOptions) and not options.replication_on


@pytest.mark.parametrize("entry,says", [
    ("orders", "expected <topic>:<n>"),
    (":3", "expected <topic>:<n>"),
    ("orders:0", "from 1 to 5"),
    ("orders:6", "from 1 to 5"),
    ("orders:x", "from 1 to 5"),
    ("bad/name:2", "not a valid topic name"),
    ("t#ephemeral:2", "ephemeral topic is never replicated"),
    ("orders:2,orders:3", "given twice"),
])
def test_a_bad_entry_is_refused_naming_it(entry: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert load_options([ME, PEERS, f"--topic-replicas-for={entry}"]) == 2
    err = capsys.readouterr().err
    assert "topic-replicas-for" in err and says in err, err


def test_a_count_above_one_needs_the_peers(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_options(["--topic-replicas-for=orders:3"]) == 2
    assert "needs a replication-address" in capsys.readouterr().err
    assert load_options(["--replication-address=127.0.0.1:4001", "--replication-peer=127.0.0.1:4001,127.0.0.1:4002",
                         "--topic-replicas-for=orders:3"]) == 2
    assert "3 replicas of a topic need as many replication-peer addresses (there are 2)" in capsys.readouterr().err


def test_counts_flag_over_api_over_default_persisted_and_forgotten(tmp_path: Path) -> None:
    counts = TopicCounts(str(tmp_path), default=1, fixed={"fixed": 2}, peers=3)
    assert [counts.count(t) for t in ("other", "fixed", "x#ephemeral")] == [1, 2, 1]
    counts.check("chosen", 3)
    counts.set("chosen", 3)
    with pytest.raises(TopicCountError, match="by --topic-replicas-for"):
        counts.check("fixed", 3)
    counts.check("fixed", 2)  # the same count is no change
    with pytest.raises(TopicCountError, match="above the 3 nsqds"):
        counts.check("other", 4)
    with pytest.raises(TopicCountError, match="ephemeral"):
        counts.check("x#ephemeral", 2)
    again = TopicCounts(str(tmp_path), default=1, fixed={}, peers=3)  # after a restart
    assert again.count("chosen") == 3 and again.widest() == 3
    again.forget("chosen")
    assert TopicCounts(str(tmp_path), default=1, fixed={}, peers=3).count("chosen") == 1


def test_counts_are_capped_at_the_peers(tmp_path: Path) -> None:
    counts = TopicCounts(str(tmp_path), default=5, fixed={"t": 4}, peers=3)
    assert counts.count("any") == 3 and counts.count("t") == 3
