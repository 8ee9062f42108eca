"""Where copies go and who takes over: pure functions of the peer list.

Every node is given the same ordered list of peers. The replicas of what ``owner``
accepts are the owner and the ``replicas - 1`` peers after it in the list (wrapping
round). When the owner is lost, the first of its backups still alive adopts."""
from __future__ import annotations

from typing import Callable, Sequence


def quorum(replicas: int) -> int:
    """Copies that must hold a message before its publish is answered OK."""
    return replicas // 2 + 1


def backups_of(owner: str, peers: Sequence[str], replicas: int) -> list[str]:
    """The peers that keep copies of what ``owner`` accepts, in adoption order."""
    at = peers.index(owner)
    count = min(replicas, len(peers)) - 1
    return [peers[(at + step) % len(peers)] for step in range(1, count + 1)]


def owners_backed_by(node: str, peers: Sequence[str], replicas: int) -> list[str]:
    """The owners whose copies ``node`` keeps."""
    return [owner for owner in peers if owner != node and node in backups_of(owner, peers, replicas)]


def adopter(owner: str, peers: Sequence[str], replicas: int, alive: Callable[[str], bool]) -> str | None:
    """The backup that takes over a lost owner's messages: the first one alive. None
    when every backup is lost too (nobody can adopt: the messages wait for a copy to
    come back)."""
    return next((b for b in backups_of(owner, peers, replicas) if alive(b)), None)
