"""How a backup answers an owner's HELLO, bytes in and bytes out: a WELCOME to the life
whose copies it holds, nothing (and a fence, for an adoption) to another life of the
owner while live copies of the former one are held, and a WELCOME that drops them when
an adoption of their generation had begun here already (a DROP missed)."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from nsqd.message import encode_payload
from nsqd.replication import wire
from nsqd.replication.backup_server import BackupConnection, BackupSide
from nsqd.replication.generations import Generations
from nsqd.replication.store import ReplicaStore
from nsqd.replication.wire import Entry, Kind

OWNER = "127.0.0.2:4153"


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:  # type: ignore[override]
        self.written += data

    def close(self) -> None:
        self.closed = True


class Backup:
    """A backup holding 3 live copies of the owner's generation 2, life "a"."""

    def __init__(self, path: Path) -> None:
        self.store = ReplicaStore(str(path), durable=False)
        self.store.load()
        self.generations = Generations.load(self.store.path)
        self.side = BackupSide(self.store, self.generations, lambda peer: None, lambda peer: peer == OWNER)
        self.store.begin(OWNER, 2, "a")
        entries = [Entry(encode_payload(b"%016x" % i, b"body", 0)) for i in range(3)]
        [(frame, raw)] = wire.raw_frames(wire.append(0, "orders", entries))
        self.store.apply(OWNER, frame, raw)

    def hello(self, generation: int, incarnation: str) -> tuple[list[wire.Frame], bool]:
        """The frames answered to a new connection's HELLO, and whether it was closed."""
        conn, transport = BackupConnection(self.side), Transport()
        conn.connection_made(transport)
        conn.data_received(wire.hello(OWNER, generation, incarnation))
        decoder = wire.Decoder()
        decoder.feed(bytes(transport.written))
        return decoder.frames(), transport.closed


@pytest.fixture
def backup(tmp_path: Path) -> Backup:
    return Backup(tmp_path)


def test_the_same_life_is_welcomed_and_its_copies_kept(backup: Backup) -> None:
    answer, closed = backup.hello(2, "a")
    assert [f.kind for f in answer] == [Kind.WELCOME] and not closed
    assert backup.store.held(OWNER) == 3 and not backup.generations.refuses(OWNER, 2)


@pytest.mark.parametrize("generation, incarnation", [(2, "b"), (3, "b"), (1, "b"), (1, "")])
def test_another_life_is_answered_nothing_and_the_former_lifes_copies_are_fenced_for_adoption(
        backup: Backup, generation: int, incarnation: str) -> None:
    """Another incarnation, or an older generation (an owner that does not say its
    incarnation: only a lost data path goes back)."""
    answer, closed = backup.hello(generation, incarnation)
    assert answer == [] and closed
    assert backup.generations.refuses(OWNER, 2) and backup.store.held(OWNER) == 3


def test_an_owner_that_does_not_say_its_incarnation_is_taken_for_the_same_life(backup: Backup) -> None:
    answer, closed = backup.hello(2, "")
    assert [f.kind for f in answer] == [Kind.WELCOME] and not closed
    assert backup.store.held(OWNER) == 3


def test_copies_whose_adoption_began_here_go_when_the_next_generation_says_hello(backup: Backup) -> None:
    """A PULL fenced generation 2 here, and this backup was away when the adopter sent
    DROP: the owner's next life, told of the adoption by another peer, speaks in
    generation 3 and is welcomed; the copies go (they were pulled and adopted)."""
    backup.side.fence(OWNER, 2)
    answer, closed = backup.hello(2, "b")  # not yet told: refused, without a new fence
    assert answer == [] and closed and backup.generations.fenced[OWNER] == 2
    answer, closed = backup.hello(3, "b")
    assert [f.kind for f in answer] == [Kind.WELCOME] and not closed
    assert backup.store.held(OWNER) == 0 and backup.store.incarnations[OWNER] == "b"


def test_a_former_life_with_nothing_live_left_is_forgotten(backup: Backup) -> None:
    [(frame, raw)] = wire.raw_frames(wire.empty("orders", "", [b"%016x" % i for i in range(3)]))
    backup.store.apply(OWNER, frame, raw)
    answer, closed = backup.hello(1, "b")
    assert [f.kind for f in answer] == [Kind.WELCOME] and not closed
    assert backup.store.generation(OWNER) == 1 and backup.store.incarnations[OWNER] == "b"
    assert not backup.generations.refuses(OWNER, 1)
