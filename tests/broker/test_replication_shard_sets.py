"""A shard's bookkeeping of copied runs (resent whole after a reconnect), FIN, EMPTY and
channel changes, done in set operations, checked against the rule stated one message
at a time: a resent message is held once; a channel records a finish of
a message only while it is held; a message goes once every channel of the topic's
list finished it (never while the list is empty); an EMPTY of "" drops its messages
for every channel; a channel left out of the list forgets what it finished."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nsqd.message import encode_payload
from nsqd.payload_run import PayloadRun
from nsqd.replication.shard import Shard

IDS = [b"%016x" % n for n in range(12)]
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
    st.tuples(st.just("publish"), st.integers(0, 4), st.booleans()),  # that many new IDs, or a resend
    st.tuples(st.just("resend"), st.integers(0, 10), st.booleans()),
    st.tuples(st.just("finish"), st.sampled_from(CHANNELS), ids_st),
    st.tuples(st.just("empty"), ids_st),
    st.tuples(st.just("requeue"), st.sampled_from(CHANNELS), ids_st),
    st.tuples(st.just("channels"), st.lists(st.sampled_from(CHANNELS), unique=True, max_size=3)),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(step, max_size=25))
def test_set_operations_keep_what_the_one_at_a_time_rule_keeps(steps: list[tuple]) -> None:
    shard, rule = Shard(), OneAtATime()
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
            payloads = [encode_payload(i, b"x", 0) for i in ids]
            if payloads:
                shard.append_run(PayloadRun.of(payloads) if as_run else payloads, 0)
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
    assert {c: ids for c, ids in shard.finished.items() if ids} == {c: ids for c, ids in rule.finished.items() if ids}
    assert {c: d for c, d in shard.due.items() if d} == {c: d for c, d in rule.due.items() if d}
