"""Scale-down: take an nsqd out for good without stranding its backlog on a disk nobody
will read again.

``POST /drain?handoff=<http address>,...`` runs nsqd's drain (consumers and lookupds let
go, publishes refused, messages in flight settled or requeued, everything persisted),
then publishes each topic's backlog to the other nsqds and only then deletes it there;
the process stays up, answering ``GET /drain`` with the handoff's progress, until
SIGTERM. Here: ask for that drain with every other running nsqd as a target, wait until
the handoff finished without error, SIGTERM, wait for exit 0, and remove the node from
the cluster. A handoff that reports an error or does not finish in time stops the
scale-down loudly (:class:`ScaleDownError`) and leaves the node running with what it
holds, for someone to look at.
"""
from __future__ import annotations

import asyncio
import logging
import signal
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import aiohttp

from nsq_client import AdminError

from .cluster import LocalCluster
from .processes import Node

log = logging.getLogger("nsq_local")

HANDOFF_POLL_INTERVAL = 0.1


@dataclass(frozen=True)
class NodeScaleDown:
    name: str
    targets: tuple[str, ...]   # names of the nsqds its backlog went to
    held: int                  # messages it held (queued, in flight, deferred) just before its drain
    handed_off: int            # messages it published to the targets
    topics: int                # topics whose backlog it handed off
    handoff_seconds: float     # from the drain request to the handoff finished
    stop_seconds: float        # from SIGTERM to the process's exit
    exit_code: int | None      # None: killed after exit_timeout

    @property
    def clean(self) -> bool:
        return self.exit_code == 0


class ScaleDownError(RuntimeError):
    def __init__(self, message: str, done: list[NodeScaleDown]) -> None:
        super().__init__(message)
        self.done = done


@dataclass(frozen=True)
class HandoffState:
    """The ``handoff`` object of nsqd's ``GET /drain``."""

    finished: bool
    error: str
    messages: int
    topics: int
    targets: tuple[str, ...]
    messages_left: int = 0     # still on the node's disk (nsqd counts them per queue)

    @classmethod
    def of(cls, drain: dict[str, Any]) -> "HandoffState | None":
        handoff = drain.get("handoff")
        if not isinstance(handoff, dict):
            return None
        topics = handoff.get("topics")
        return cls(finished=bool(handoff.get("finished")), error=str(handoff.get("error") or ""),
                   messages=int(handoff.get("messages") or 0),
                   topics=len(topics) if isinstance(topics, (list, dict)) else int(topics or 0),
                   targets=tuple(handoff.get("targets") or ()),
                   messages_left=int(handoff.get("messages_left") or 0))


async def hand_off(cluster: LocalCluster, node: Node, targets: list[Node], timeout: float) -> HandoffState:
    """Drain ``node`` handing its backlog to ``targets``; the handoff's final state.
    RuntimeError when it reports an error, dies, or does not finish in time; AdminError
    when nsqd refuses."""
    admin = cluster.nsqd_admin(node)
    await admin.drain(handoff=[t.http_address for t in targets])
    deadline = time.monotonic() + timeout
    while True:
        if not node.running:
            raise RuntimeError(f"{node.name} exited during its handoff (code {node.proc and node.proc.returncode})")
        state = HandoffState.of(await admin.drain_state())
        if state is not None and state.error:
            raise RuntimeError(f"{node.name}: handoff failed after {state.messages} messages, "
                               f"{state.messages_left} left on its disk: {state.error}")
        if state is not None and state.finished:
            return state
        if time.monotonic() > deadline:
            raise RuntimeError(f"{node.name}: handoff not finished within {timeout:g}s ({state})")
        await asyncio.sleep(HANDOFF_POLL_INTERVAL)


async def scale_down(cluster: LocalCluster, node: Node, *, handoff_timeout: float = 60.0,
                     exit_timeout: float = 30.0) -> NodeScaleDown:
    """Drain ``node`` with its backlog handed to every other running nsqd, stop it and
    remove it from ``cluster``. :class:`ScaleDownError` (node left as it is, running when
    the handoff failed) when something goes wrong."""
    targets = [n for n in cluster.nsqds if n is not node and n.running]
    if not targets:
        raise ScaleDownError(f"{node.name}: no other running nsqd to hand its backlog to", [])
    held = await cluster.messages_held(node)
    log.info("%s: draining with handoff to %s (it holds %d messages)", node.name,
             ", ".join(t.name for t in targets), held)
    started = time.monotonic()
    try:
        state = await hand_off(cluster, node, targets, handoff_timeout)
    except (RuntimeError, AdminError, OSError, asyncio.TimeoutError, aiohttp.ClientError) as err:
        kept = "kept running" if node.running else "kept (it is not running)"
        raise ScaleDownError(f"{err}; scale-down stopped, {node.name} {kept}", []) from err
    handoff_seconds = time.monotonic() - started
    log.info("%s: handed off %d messages of %d topics in %.2fs; stopping it", node.name, state.messages,
             state.topics, handoff_seconds)
    stopping = time.monotonic()
    node.signal(signal.SIGTERM)
    code = await node.wait_exited(exit_timeout)
    stop_seconds = time.monotonic() - stopping
    if code is None:
        log.error("%s did not exit within %.0fs of SIGTERM: killing it", node.name, exit_timeout)
        await node.kill()
    cluster.remove_nsqd(node)
    result = NodeScaleDown(node.name, tuple(t.name for t in targets), held, state.messages, state.topics,
                           handoff_seconds, stop_seconds, code)
    if not result.clean:
        raise ScaleDownError(f"{node.name} exited with {code} after its handoff", [result])
    return result


async def scale_down_last(cluster: LocalCluster, count: int, *, handoff_timeout: float = 60.0,
                          exit_timeout: float = 30.0,
                          on_removed: Callable[[Node, NodeScaleDown], Awaitable[None]] | None = None,
                          ) -> list[NodeScaleDown]:
    """Scale down the ``count`` last nsqds (highest ordinal first, as a StatefulSet
    shrinks), one at a time; ``on_removed`` runs after each. :class:`ScaleDownError`
    carries the ones done when one fails; the next ones are not touched."""
    if not 0 < count < len(cluster.nsqds):
        raise ValueError(f"can scale down 1 to {len(cluster.nsqds) - 1} of {len(cluster.nsqds)} nsqds, not {count}")
    done: list[NodeScaleDown] = []
    for node in list(reversed(cluster.nsqds))[:count]:
        try:
            result = await scale_down(cluster, node, handoff_timeout=handoff_timeout, exit_timeout=exit_timeout)
        except ScaleDownError as err:
            raise ScaleDownError(str(err), done + err.done) from err
        done.append(result)
        if on_removed is not None:
            await on_removed(node, result)
    return done

