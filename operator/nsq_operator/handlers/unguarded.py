"""Timers that put no finalizer on the objects they run for.

kopf puts its finalizer on every object a timer matches, so that it can stop the timer
before the object goes. Nothing of the operator's needs that: the periodic passes only
read and report, an object deleted mid-pass loses a status write it no longer needs. A
finalizer that guards nothing leaves the object Terminating for ever once the operator is
gone (`helm uninstall` removes the operator before the kinds helm does not know). kopf
takes the finalizer off objects that carry one from before, as no handler requires it."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import kopf

Fn = Callable[..., Any]


def timer(registry: kopf.OperatorRegistry, *resource: str, **options: Any) -> Callable[[Fn], Fn]:
    """``kopf.timer(*resource, registry=registry, **options)`` without the finalizer."""
    def decorator(fn: Fn) -> Fn:
        kopf.timer(*resource, registry=registry, **options)(fn)
        spawning = registry._spawning._handlers  # kopf 1.45's list of timers and daemons
        spawning[-1] = dataclasses.replace(spawning[-1], requires_finalizer=False)
        return fn
    return decorator
