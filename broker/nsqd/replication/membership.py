"""The peer list as it changes while nsqd runs: each list has an *epoch*, and every list
since the oldest one an owner may still have copies under is kept, so that an adoption
during or after a change fences and pulls every peer that may hold copies.

An owner whose ring changed (peers added or removed) sends the new backups a snapshot
and keeps the old ones in its quorum until the new ones hold it; then it is *settled*
at that epoch, and says so in its PINGs. What an owner settled at epoch S acknowledged
is held by its backups in the lists from S on; before a peer's first PING, what it last
said is read from ``membership.json`` (absent: held by any peer)."""
from __future__ import annotations

import json
import logging
import os
from typing import Sequence

from . import ring

log = logging.getLogger("nsqd")

MEMBERSHIP_FILE = "membership.json"
HISTORY = 64  # lists kept: an owner settles within seconds of a change, far fewer are needed


class MembershipError(ValueError):
    """A peer list that cannot replace the current one (stale epoch, a conflict, too short)."""


class Membership:
    def __init__(self, path: str, epoch: int, peers: list[str], history: dict[int, list[str]],
                 settled: dict[str, int]) -> None:
        self.path = path
        self.epoch = epoch
        self.peers = peers
        self.history = history  # epoch -> peer list, the current one included
        self.settled = settled  # owner -> the epoch it last said its copies sit in its ring of

    @classmethod
    def load(cls, directory: str, peers: Sequence[str], epoch: int) -> "Membership":
        """The list given (flags or config file) unless a newer one was set live (HTTP)."""
        path = os.path.join(directory, MEMBERSHIP_FILE)
        try:
            with open(path) as f:
                doc = json.load(f)
        except FileNotFoundError:
            return cls(path, epoch, list(peers), {epoch: list(peers)}, {})
        stored = cls(path, int(doc["epoch"]), [str(p) for p in doc["peers"]],
                     {int(e): [str(p) for p in ps] for e, ps in doc["history"].items()},
                     {str(o): int(e) for o, e in doc.get("settled", {}).items()})
        if stored.epoch > epoch or (stored.epoch == epoch and stored.peers == list(peers)):
            if stored.peers != list(peers):
                log.warning("REPLICATION: peer list of epoch %d (set while running) is used, not the one "
                            "given at start (epoch %d)", stored.epoch, epoch)
            return stored
        if stored.epoch == epoch:
            raise MembershipError(f"the peer list given at start differs from the one of epoch {epoch} "
                                  f"in {path}: give a higher epoch")
        return stored  # older: the list given is applied once the replicator runs (a change)

    def change(self, peers: Sequence[str], epoch: int) -> bool:
        """Whether ``peers`` at ``epoch`` replaces the current list (False: it is it)."""
        peers = list(peers)
        if epoch == self.epoch and peers == self.peers:
            return False
        if epoch <= self.epoch:
            raise MembershipError(f"epoch {epoch} is not above the current {self.epoch}")
        if not peers or len(set(peers)) != len(peers):
            raise MembershipError("peers must be given, each once")
        self.epoch, self.peers = epoch, peers
        self.history[epoch] = peers
        for old in sorted(self.history)[:-HISTORY]:
            del self.history[old]
        self.save()
        return True

    def heard_settled(self, owner: str, epoch: int) -> None:
        if self.settled.get(owner) != epoch:
            self.settled[owner] = epoch
            self.save()

    def last_list_of(self, owner: str) -> list[str] | None:
        """The newest list ``owner`` is in: its ring's (None: in none kept)."""
        for epoch in sorted(self.history, reverse=True):
            if owner in self.history[epoch]:
                return self.history[epoch]
        return None

    def holders(self, owner: str, replicas: int) -> list[str]:
        """Every peer that may hold copies of ``owner``'s acknowledged messages, in the
        order an adoption prefers them (its current ring first)."""
        if len(self.history) == 1:  # the list never changed here: its ring alone
            return ring.backups_of(owner, self.peers, replicas) if owner in self.peers else []
        settled = self.settled.get(owner)
        if settled is None or settled not in self.history:
            # not known since when its copies sit where: any peer of any list kept
            lists = [self.history[e] for e in sorted(self.history, reverse=True)]
            return _unique([p for peers in lists for p in peers if p != owner])
        lists = [self.history[e] for e in sorted(self.history, reverse=True) if e >= settled]
        last = self.last_list_of(owner)
        if last is not None and last not in lists:
            lists.append(last)
        return _unique([p for peers in lists if owner in peers for p in ring.backups_of(owner, peers, replicas)])

    def save(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"epoch": self.epoch, "peers": self.peers,
                       "history": {str(e): ps for e, ps in self.history.items()},
                       "settled": self.settled}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


def _unique(peers: list[str]) -> list[str]:
    return list(dict.fromkeys(peers))
