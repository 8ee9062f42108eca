"""Backoff: how long to wait at each level (the strategies), and go-nsq's consumer backoff
state machine that turns handler outcomes into "stop everything" / "probe with one
message" / "back to full speed" decisions. Pure: the consumer applies the decisions."""
from __future__ import annotations

import enum
import random
from dataclasses import dataclass
from typing import Protocol

from .config import Config


class BackoffStrategy(Protocol):
    """How long each level of backoff lasts (``Config.backoff_strategy`` chooses one)."""

    def calculate(self, attempt: int) -> float:
        """Seconds to back off at level ``attempt`` (1, 2, ...)."""
        ...


class ExponentialStrategy:
    """``multiplier * 2**attempt``."""

    def __init__(self, multiplier: float) -> None:
        self.multiplier = multiplier

    def calculate(self, attempt: int) -> float:
        return self.multiplier * 2.0 ** attempt


class FullJitterStrategy:
    """A uniformly random duration in ``[0, multiplier * 2**attempt)``: consumers that fail
    together do not retry together."""

    def __init__(self, multiplier: float, rng: random.Random | None = None) -> None:
        self.multiplier = multiplier
        self._rng = rng or random.Random()

    def calculate(self, attempt: int) -> float:
        return self._rng.random() * self.multiplier * 2.0 ** attempt


def strategy_for(config: Config) -> BackoffStrategy:
    if config.backoff_strategy == "full_jitter":
        return FullJitterStrategy(config.backoff_multiplier)
    return ExponentialStrategy(config.backoff_multiplier)


def reconnect_delay(config: Config, attempt: int) -> float:
    """Wait before reconnection attempt ``attempt`` (1, 2, ...) to an nsqd given by address:
    ``backoff_multiplier`` doubled each time, never more than ``lookupd_poll_interval``
    (go-nsq's fixed retry period) nor less than 10 ms (its smallest poll interval)."""
    delay = config.backoff_multiplier * 2.0 ** (attempt - 1)
    return max(0.01, min(delay, config.lookupd_poll_interval))


class Signal(enum.Enum):
    RESUME = "resume"      # a message was finished
    BACKOFF = "backoff"    # a message was requeued with backoff (the handler failed)
    CONTINUE = "continue"  # a message was requeued without backoff


class Action(enum.Enum):
    NONE = "none"
    EXIT = "exit"    # back to full speed: every connection gets its share of max_in_flight
    ENTER = "enter"  # RDY 0 everywhere, then after ``duration`` probe with RDY 1 on one


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    duration: float = 0.0


NO_CHANGE = Decision(Action.NONE)


class BackoffState:
    """The level goes up on each failure (unless the next level's wait would exceed
    ``max_backoff_duration``) and down on each success. While a backoff wait runs, signals
    are ignored, so a burst of failures or successes moves the level by one step only."""

    def __init__(self, config: Config, strategy: BackoffStrategy | None = None) -> None:
        self.config = config
        self.strategy = strategy or strategy_for(config)
        self.level = 0
        self.waiting = False

    @property
    def in_backoff(self) -> bool:
        return self.level > 0

    def signal(self, signal: Signal) -> Decision:
        if self.waiting:
            return NO_CHANGE
        changed = False
        if signal is Signal.RESUME and self.level > 0:
            self.level -= 1
            changed = True
        elif signal is Signal.BACKOFF and self.strategy.calculate(self.level + 1) <= self.config.max_backoff_duration:
            self.level += 1
            changed = True
        if self.level == 0:
            return Decision(Action.EXIT) if changed else NO_CHANGE
        self.waiting = True
        return Decision(Action.ENTER, min(self.strategy.calculate(self.level), self.config.max_backoff_duration))

    def wait_over(self) -> None:
        """The backoff wait ended (a probe RDY 1 is about to be sent)."""
        self.waiting = False

    def reset(self) -> None:
        self.level = 0
        self.waiting = False
