"""One owner per NSQ name: when several NsqTopic (or NsqChannel) objects of a cluster
name the same topic (or channel), the oldest one (then the first by name) is the only one
applied; the others report a Conflict naming it instead of fighting it on every pass."""
from __future__ import annotations

from typing import Iterable, TypeVar

from .wishes import ChannelWish, TopicWish

W = TypeVar("W", TopicWish, ChannelWish)


def nsq_name(wish: TopicWish | ChannelWish) -> tuple[str, ...]:
    return (wish.topic,) if isinstance(wish, TopicWish) else (wish.topic, wish.channel)


def _age(wish: TopicWish | ChannelWish) -> tuple[str, str]:
    return (wish.created, wish.owner)  # RFC 3339 in UTC sorts as time does


def winner(wish: W, declared: Iterable[W]) -> W:
    """The declaration of ``wish``'s NSQ name that is applied (``wish`` itself, or an older one)."""
    rivals = [w for w in declared if nsq_name(w) == nsq_name(wish) and type(w) is type(wish)]
    return min([wish, *rivals], key=_age)


def winners(declared: Iterable[W]) -> list[W]:
    """One declaration per NSQ name: what every nsqd is made to hold."""
    best: dict[tuple[str, ...], W] = {}
    for wish in declared:
        name = nsq_name(wish)
        if name not in best or _age(wish) < _age(best[name]):
            best[name] = wish
    return list(best.values())
