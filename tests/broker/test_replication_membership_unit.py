"""The peer list's epochs (membership.py) and the PING fields that carry them: which peers
may hold an owner's copies while and after its ring moves, and which list wins at start."""
from __future__ import annotations

from pathlib import Path

import pytest

from nsqd.replication import wire
from nsqd.replication.membership import Membership, MembershipError
from nsqd.replication.wire import AdoptRequest, Decoder, Kind

SIX = [f"n{i}:1" for i in range(6)]


def _ping(frame: bytes) -> wire.Frame:
    decoder = Decoder()
    decoder.feed(frame)
    [decoded] = decoder.frames()
    assert decoded.kind is Kind.PING
    return decoded


def test_a_ping_carries_the_epochs_and_is_unchanged_without_them() -> None:
    assert wire.ping(5) == wire.ping(5, (), 0, 0), "a peer that never changed its list sends what it did"
    frame = _ping(wire.ping(5, (), 3, 2))
    assert (frame.clock_ms, frame.adopt, frame.epoch, frame.settled) == (5, [], 3, 2)
    asks = [AdoptRequest("n1:1", 4, False)]
    frame = _ping(wire.ping(5, asks, 7, 7))
    assert (frame.adopt, frame.epoch, frame.settled) == (asks, 7, 7)
    assert _ping(wire.ping(5, asks)).epoch == 0


def test_holders_follow_the_lists_since_the_owner_settled(tmp_path: Path) -> None:
    m = Membership.load(str(tmp_path), SIX[:5], 0)
    assert m.holders("n1:1", 2) == ["n2:1"], "a list never changed: the ring alone"
    m.change([SIX[0], SIX[5], *SIX[1:5]], 1)  # n5 placed after n0: n0's backup moves from n1 to n5
    assert sorted(m.holders("n0:1", 2)) == SIX[1:6], "not heard since the change: any peer of any list"
    m.heard_settled("n0:1", 0)
    assert m.holders("n0:1", 2) == ["n5:1", "n1:1"], "moving: the new ring's and the old one's"
    m.heard_settled("n0:1", 1)
    assert m.holders("n0:1", 2) == ["n5:1"], "settled: the new ring's alone"


def test_a_former_member_is_held_by_its_ring_in_the_last_list_it_was_in(tmp_path: Path) -> None:
    m = Membership.load(str(tmp_path), SIX, 0)
    m.change(SIX[:5], 1)  # n5 left out
    m.heard_settled("n5:1", 1)  # its own ring does not move: it settles at once
    assert m.last_list_of("n5:1") == SIX
    assert m.holders("n5:1", 3) == ["n0:1", "n1:1"]


def test_the_list_set_live_wins_over_an_older_one_given_at_start(tmp_path: Path) -> None:
    m = Membership.load(str(tmp_path), SIX[:3], 0)
    m.change(SIX[:4], 1)
    m.heard_settled("n0:1", 1)
    again = Membership.load(str(tmp_path), SIX[:3], 0)
    assert (again.epoch, again.peers, again.settled) == (1, SIX[:4], {"n0:1": 1})
    newer = Membership.load(str(tmp_path), SIX[:5], 2)
    assert newer.epoch == 1, "a newer list given at start is applied as a change once running"
    with pytest.raises(MembershipError, match="give a higher epoch"):
        Membership.load(str(tmp_path), SIX[:5], 1)


def test_a_change_needs_a_higher_epoch_and_distinct_peers(tmp_path: Path) -> None:
    m = Membership.load(str(tmp_path), SIX[:3], 4)
    assert not m.change(SIX[:3], 4), "the same list again changes nothing"
    for peers, epoch in ((SIX[:4], 4), (SIX[:4], 3), ([SIX[0], SIX[0]], 5), ([], 5)):
        with pytest.raises(MembershipError):
            m.change(peers, epoch)
    assert m.change(SIX[:4], 9) and m.epoch == 9
