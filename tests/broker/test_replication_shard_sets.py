"""A shard's bookkeeping of copied runs (resent whole after a reconnect), FIN, EMPTY and
channel changes, done in set operations, checked against the rule stated one message
at a time: a resent message is held once; a channel records a finish of
a message only while it is held; a message goes once every channel of the topic's
list finished it (never while the list is empty); an EMPTY of "" drops its messages
for every channel; a channel left out of the list forgets what it finished."""
from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqd.message import encode_payload
from nsqd.payload_run import PayloadRun
from nsqd.replication import shard as shard_module
from nsqd.replication.shard import Shard

IDS = [b"%016x" % n for n in range(24)]
CHANNELS = ["a", "b", "c"]


class OneAtATime:
    """The rule, message by message."""

    def __init__(self) -> None:
        self.live: list[bytes] = []
        self.channels: list[str] = []
        self.finished: dict[str, set[bytes]] = {}
        self.due: dict[str, dict[bytes, int]] = {}

    def publish(self, ids: list[bytes]) -> None:
        self.live += [i for i in dict.fromkeys(ids) if i not in self.live]

    def _done(self, msg_id: bytes) -> bool:
        return bool(self.channels) and all(msg_id in self.finished.get(c, ()) for c in self.channels)

    def _forget(self, msg_id: bytes) -> None:
        self.live.remove(msg_id)
        for done in self.finished.values():
            done.discard(msg_id)
        for due in self.due.values():
            due.pop(msg_id, None)

    def finish(self, channel: str, ids: list[bytes]) -> None:
        done = self.finished.setdefault(channel, set())
        for msg_id in ids:
            if msg_id in self.live:
                done.add(msg_id)
                if self._done(msg_id):
                    self._forget(msg_id)

    def empty_all(self, ids: list[bytes]) -> None:
        for msg_id in ids:
            if msg_id in self.live:
                self._forget(msg_id)

    def requeue(self, channel: str, ids: list[bytes]) -> None:
        due = self.due.setdefault(channel, {})
        for msg_id in ids:
            if msg_id in self.live:
                due[msg_id] = 1000

    def set_channels(self, names: list[str]) -> None:
        self.channels = list(names)
        for table in (self.finished, self.due):
            for gone in set(table) - set(names):
                del table[gone]
        for msg_id in list(self.live):
            if self._done(msg_id):
                self._forget(msg_id)


ids_st = st.lists(st.sampled_from(IDS), max_size=6)
step = st.one_of(
    # that many new IDs, or a resend; as a list, a run of one size or a run of mixed sizes
    st.tuples(st.just("publish"), st.integers(0, 8), st.sampled_from(["list", "run", "mixed"])),
    st.tuples(st.just("resend"), st.integers(0, 10), st.sampled_from(["list", "run", "mixed"])),
    st.tuples(st.just("finish"), st.sampled_from(CHANNELS), ids_st),
    st.tuples(st.just("empty"), ids_st),
    st.tuples(st.just("requeue"), st.sampled_from(CHANNELS), ids_st),
    st.tuples(st.just("channels"), st.lists(st.sampled_from(CHANNELS), unique=True, max_size=3)),
)


@pytest.mark.parametrize("compact_after", [shard_module.COMPACT_AFTER, 1])  # 1: publishes mostly gone compacted at every forget
@settings(max_examples=400, deadline=None)
@given(steps=st.lists(step, max_size=25))
def test_set_operations_keep_what_the_one_at_a_time_rule_keeps(compact_after: int, steps: list[tuple]) -> None:
    kept = shard_module.COMPACT_AFTER
    shard_module.COMPACT_AFTER = compact_after
    try:
        _check_against_the_rule(steps)
    finally:
        shard_module.COMPACT_AFTER = kept


def _check_against_the_rule(steps: list[tuple]) -> None:
    shard, rule = Shard(), OneAtATime()
    first: dict[bytes, bytes] = {}  # ID -> the payload it was held with (one resent while held is kept once)
    runs: list[list[bytes]] = []  # as published: a resend after a reconnect repeats a whole one
    unused = iter(IDS)
    for kind, *args in steps:
        if kind in ("publish", "resend"):
            number, as_run = args
            if kind == "publish":
                runs.append([i for _, i in zip(range(number), unused)])
                ids = runs[-1]
            else:
                ids = runs[number % len(runs)] if runs else []
            # a run of one size is read by a struct pass over its bytes, others payload by payload
            payloads = [encode_payload(i, b"x" * (1 + (as_run == "mixed") * k), 0) for k, i in enumerate(ids)]
            for msg_id, payload in zip(ids, payloads):
                if msg_id not in rule.live:
                    first[msg_id] = payload
            if payloads:
                shard.append_run(PayloadRun.of(payloads) if as_run != "list" else payloads, 0)
            rule.publish(ids)
        elif kind == "finish":
            shard.finish(*args)
            rule.finish(*args)
        elif kind == "empty":
            shard.empty("", args[0])
            rule.empty_all(args[0])
        elif kind == "requeue":
            shard.requeue(args[0], 1000, args[1])
            rule.requeue(*args)
        else:
            shard.set_channels(args[0])
            rule.set_channels(args[0])
        assert len(shard) == len(rule.live)
    assert list(shard.messages) == rule.live
    assert {i: e.payload for i, e in shard.messages.items()} == {i: first[i] for i in rule.live}
    assert [(live.entry.payload[10:26], live.entry.payload) for live in shard.live()] == \
        [(i, first[i]) for i in rule.live]  # each run cut first: the same messages, in order
    assert {c: ids for c, ids in shard.finished.items() if ids} == {c: ids for c, ids in rule.finished.items() if ids}
    assert {c: d for c, d in shard.due.items() if d} == {c: d for c, d in rule.due.items() if d}


def test_a_publish_mostly_finished_lets_its_run_go_and_keeps_the_rest() -> None:
    """A message left of a publish (deferred for long, say) must not keep the whole run
    its publish came in: a consumer finishing all but one message of each publish as
    they come, the shard holds little more than those messages, byte for byte, in their
    order, with their due times."""
    runs, per, body = 400, 200, 500
    shard = Shard()
    shard.set_channels(["a"])
    kept: dict[bytes, bytes] = {}
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for r in range(runs):
            payloads = [encode_payload(b"%016x" % (r * per + i), bytes([r % 251]) * body, 0) for i in range(per)]
            shard.append_run(PayloadRun.of(payloads), 5000 + r)
            kept[payloads[7][10:26]] = payloads[7]
            del payloads
            shard.finish("a", [b"%016x" % (r * per + i) for i in range(per) if i != 7])
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    published = runs * per * (body + 26)
    assert held < published / 20, f"{held} bytes held of {published} published"
    messages = shard.messages
    assert list(messages) == list(kept)
    assert [e.payload for e in messages.values()] == list(kept.values())
    assert [e.defer_until_ms for e in messages.values()] == [5000 + r for r in range(runs)]
