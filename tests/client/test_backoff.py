"""Backoff strategies, go-nsq's backoff levels, and how max_in_flight is split (pure logic;
the RDY sequences these produce on the wire are in test_consumer_rdy)."""
from __future__ import annotations

import random

from nsq_client import Config, ExponentialStrategy, FullJitterStrategy
from nsq_client.backoff import Action, BackoffState, Signal, reconnect_delay, strategy_for
from nsq_client.rdy import split_max_in_flight


def test_exponential_doubles_from_twice_the_multiplier() -> None:
    strategy = ExponentialStrategy(multiplier=1.0)
    assert [strategy.calculate(n) for n in (1, 2, 3, 4)] == [2.0, 4.0, 8.0, 16.0]


def test_full_jitter_stays_below_the_exponential_ceiling_and_varies() -> None:
    strategy = FullJitterStrategy(multiplier=1.0, rng=random.Random(7))
    samples = [strategy.calculate(3) for _ in range(200)]
    assert all(0 <= s < 8.0 for s in samples)
    assert len(set(samples)) > 100 and max(samples) > 6 and min(samples) < 2


def test_config_picks_the_strategy() -> None:
    assert isinstance(strategy_for(Config(backoff_strategy="full_jitter")), FullJitterStrategy)
    exponential = strategy_for(Config(backoff_multiplier=0.5))
    assert isinstance(exponential, ExponentialStrategy) and exponential.calculate(1) == 1.0


def test_a_failure_enters_backoff_and_a_success_leaves_it() -> None:
    state = BackoffState(Config(backoff_multiplier=1.0))
    entered = state.signal(Signal.BACKOFF)
    assert (entered.action, entered.duration, state.level) == (Action.ENTER, 2.0, 1)
    state.wait_over()
    left = state.signal(Signal.RESUME)
    assert (left.action, state.level) == (Action.EXIT, 0)
    assert state.signal(Signal.RESUME).action is Action.NONE  # nothing to leave


def test_levels_climb_on_failures_and_descend_one_per_success() -> None:
    state = BackoffState(Config(backoff_multiplier=1.0))
    durations = []
    for _ in range(3):
        durations.append(state.signal(Signal.BACKOFF).duration)
        state.wait_over()
    assert durations == [2.0, 4.0, 8.0] and state.level == 3
    # each success lowers the level by one and backs off at the lower level again
    step = state.signal(Signal.RESUME)
    assert (step.action, step.duration, state.level) == (Action.ENTER, 4.0, 2)


def test_signals_during_a_backoff_wait_change_nothing() -> None:
    state = BackoffState(Config(backoff_multiplier=1.0))
    state.signal(Signal.BACKOFF)
    assert state.signal(Signal.BACKOFF).action is Action.NONE
    assert state.signal(Signal.RESUME).action is Action.NONE
    assert state.level == 1 and state.waiting


def test_continue_keeps_the_level_but_backs_off_again_while_in_backoff() -> None:
    state = BackoffState(Config(backoff_multiplier=1.0))
    assert state.signal(Signal.CONTINUE).action is Action.NONE  # not in backoff: no effect
    state.signal(Signal.BACKOFF)
    state.wait_over()
    again = state.signal(Signal.CONTINUE)
    assert (again.action, again.duration, state.level) == (Action.ENTER, 2.0, 1)


def test_the_level_stops_where_the_next_wait_would_exceed_max_backoff_duration() -> None:
    state = BackoffState(Config(backoff_multiplier=1.0, max_backoff_duration=10))
    for _ in range(6):
        decision = state.signal(Signal.BACKOFF)
        state.wait_over()
    assert state.level == 3 and decision.duration == 8.0


def test_zero_max_backoff_duration_disables_backoff() -> None:
    state = BackoffState(Config(max_backoff_duration=0))
    assert state.signal(Signal.BACKOFF).action is Action.NONE and state.level == 0


def test_reconnect_delays_double_up_to_the_lookupd_poll_interval() -> None:
    config = Config(backoff_multiplier=0.5, lookupd_poll_interval=3)
    assert [reconnect_delay(config, n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert reconnect_delay(Config(backoff_multiplier=0), 1) == 0.01


def test_max_in_flight_is_split_with_the_remainder_to_the_first_connections() -> None:
    assert split_max_in_flight(10, 3) == [4, 3, 3]
    assert split_max_in_flight(9, 3) == [3, 3, 3]
    assert split_max_in_flight(2, 3) == [1, 1, 0]
    assert split_max_in_flight(0, 2) == [0, 0]
    assert split_max_in_flight(5, 0) == []
