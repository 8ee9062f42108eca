"""The queue scan loop on its own: channels that stand in for real ones (deadlines of
in-flight and deferred messages, a log of every visit) and a clock whose time only moves
when the scanner sleeps, so every pass happens at a known instant."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from nsqd.queue_scan import QueueScanner

INTERVAL = 0.1


class Stop(Exception):
    """Raised by the clock to end ``run``: the scan loop itself never ends."""


@dataclass
class Event:
    kind: str  # "visit" or "sleep"
    at: float
    name: str = ""
    dirty: bool = False
    seconds: float = 0.0


MAX_SLEEPS = 1000  # a scan loop that never waits for the clock fails instead of hanging


@dataclass
class FakeClock:
    max_time: float
    time: float = 0.0
    events: list[Event] = field(default_factory=list)
    sleeps: int = 0

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.events.append(Event("sleep", self.time, seconds=seconds))
        self.sleeps += 1
        assert self.sleeps <= MAX_SLEEPS, "the scan loop keeps sampling without waiting"
        if self.time + seconds > self.max_time:
            raise Stop
        self.time += seconds


@dataclass
class FakeChannel:
    """In-flight messages time out at their deadline, deferred ones are released when due;
    every visit of the scan is logged with the instant it happened at."""

    name: str
    clock: FakeClock
    in_flight: dict[str, float] = field(default_factory=dict)  # message -> deadline
    deferred: dict[str, float] = field(default_factory=dict)   # message -> due time
    exiting: bool = False
    timed_out: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    pumps: int = 0
    _dirty: bool = False

    def process_in_flight(self, now: float) -> bool:
        expired = sorted(m for m, deadline in self.in_flight.items() if deadline <= now)
        for m in expired:
            del self.in_flight[m]
        self.timed_out += expired
        self._dirty = bool(expired)
        return self._dirty

    def process_deferred(self, now: float) -> bool:
        due = sorted(m for m, at in self.deferred.items() if at <= now)
        for m in due:
            del self.deferred[m]
        self.released += due
        self.clock.events.append(Event("visit", now, self.name, self._dirty or bool(due)))
        return bool(due)

    def pump(self) -> None:
        self.pumps += 1


def make(count: int, *, selection: int = 20, dirty_percent: float = 0.25,
         max_time: float = 1.0) -> tuple[QueueScanner, FakeClock, list[FakeChannel]]:
    clock = FakeClock(max_time)
    channels = [FakeChannel(f"c{i}", clock) for i in range(count)]
    scanner = QueueScanner(lambda: channels, interval=INTERVAL, refresh_interval=5.0,
                           selection_count=selection, dirty_percent=dirty_percent, clock=clock)
    return scanner, clock, channels


def run_until_stopped(scanner: QueueScanner) -> None:
    with pytest.raises(Stop):
        asyncio.run(scanner.run())


def passes(events: list[Event]) -> list[tuple[float, list[Event]]]:
    """The visits made after each sleep, with the length of that sleep."""
    out: list[tuple[float, list[Event]]] = []
    for event in events:
        if event.kind == "sleep":
            out.append((event.seconds, []))
        else:
            out[-1][1].append(event)
    return [p for p in out if p[1]]


def test_timed_out_and_due_messages_are_processed_when_their_time_comes() -> None:
    scanner, clock, (channel, quiet) = make(2, max_time=0.35)
    channel.in_flight = {"early": 0.1, "late": 0.25, "far": 60.0}
    channel.deferred = {"soon": 0.2, "later": 30.0}
    run_until_stopped(scanner)
    assert channel.timed_out == ["early", "late"] and set(channel.in_flight) == {"far"}
    assert channel.released == ["soon"] and set(channel.deferred) == {"later"}
    # one pump per pass that found work: 0.1 (early), 0.2 (soon), 0.3 (late)
    assert channel.pumps == 3 and quiet.pumps == 0
    visits = [e for e in clock.events if e.kind == "visit" and e.name == "c0"]
    assert [round(e.at, 6) for e in visits if e.dirty] == [0.1, 0.2, 0.3]
    assert {round(e.at, 6) for e in visits} == {0.1, 0.2, 0.3}  # nothing in between


@pytest.mark.parametrize("count,selection,expected", [(50, 20, 20), (10, 20, 10), (20, 20, 20), (7, 1, 1)])
def test_each_pass_samples_up_to_the_selection_count_distinct_channels(
        count: int, selection: int, expected: int) -> None:
    scanner, clock, _ = make(count, selection=selection, max_time=0.55)
    run_until_stopped(scanner)
    found = passes(clock.events)
    assert len(found) == 5
    for _, visits in found:
        names = [v.name for v in visits]
        assert len(names) == expected and len(set(names)) == expected


def test_quiet_channels_are_scanned_only_at_the_scan_interval() -> None:
    scanner, clock, channels = make(5, max_time=1.0)
    run_until_stopped(scanner)
    sleeps = [e.seconds for e in clock.events if e.kind == "sleep"]
    assert sleeps == [INTERVAL] * len(sleeps) and len(sleeps) == 11  # the 11th would pass 1.0
    for channel in channels:
        times = [round(e.at, 6) for e in clock.events if e.kind == "visit" and e.name == channel.name]
        assert times == [round(INTERVAL * i, 6) for i in range(1, 11)]
        assert channel.pumps == 0


@pytest.mark.parametrize("count,dirty_count,loops_again",
                         [(10, 5, True), (10, 3, True), (10, 2, False), (4, 1, False), (10, 0, False)])
def test_a_sample_of_every_channel_is_taken_again_at_once_while_more_than_the_dirty_percent_had_work(
        count: int, dirty_count: int, loops_again: bool) -> None:
    """Every channel is in every sample: 3 of 10 dirty is more than 25%; 2 of 10 and 1 of 4 are not."""
    scanner, clock, channels = make(count, max_time=0.15)
    for channel in channels[:dirty_count]:
        channel.in_flight = {"m": 0.05}
    run_until_stopped(scanner)
    found = passes(clock.events)
    slept = [seconds for seconds, _ in found]
    if loops_again:
        # the dirty pass at 0.1, at once a clean one (everything was requeued), then the interval
        assert slept == [INTERVAL, 0]
        assert [sum(v.dirty for v in visits) for _, visits in found] == [dirty_count, 0]
    else:
        assert slept == [INTERVAL]
    assert all(c.timed_out == ["m"] for c in channels[:dirty_count])


def test_a_smaller_sample_is_taken_again_until_at_most_the_dirty_percent_had_work() -> None:
    """Forty channels with work, samples of eight: passes follow each other at once while
    more than a quarter of the sample was dirty, and the first pass that is not ends the run."""
    scanner, clock, channels = make(40, selection=8, max_time=0.15)
    for channel in channels:
        channel.in_flight = {"m": 0.05}
    run_until_stopped(scanner)
    found = passes(clock.events)
    assert found[0][0] == INTERVAL and len(found) >= 2
    assert all(seconds == 0 for seconds, _ in found[1:])
    dirty = [sum(v.dirty for v in visits) for _, visits in found]
    assert all(d > 2 for d in dirty[:-1]) and dirty[-1] <= 2, dirty
    assert all(len(visits) == 8 for _, visits in found)
    # every pass at the same instant: re-sampling does not wait for the clock
    assert {e.at for e in clock.events if e.kind == "visit"} == {INTERVAL}


def test_channel_list_changes_are_picked_up_at_once_when_signalled_else_at_the_refresh() -> None:
    clock = FakeClock(max_time=10.0)
    listed = [FakeChannel("first", clock)]
    scanner = QueueScanner(lambda: list(listed), interval=INTERVAL, refresh_interval=5.0,
                           selection_count=20, dirty_percent=0.25, clock=clock)
    scanner.scan_once()
    unsignalled = FakeChannel("unsignalled", clock, in_flight={"m": 0.0})
    listed.append(unsignalled)
    scanner.scan_once()
    assert unsignalled.timed_out == []  # not in the list the scanner holds
    clock.time = 5.0  # the refresh interval has passed
    scanner.scan_once()
    assert unsignalled.timed_out == ["m"]

    signalled = FakeChannel("signalled", clock, in_flight={"m": 0.0})
    listed.append(signalled)
    scanner.channels_changed()
    scanner.scan_once()
    assert signalled.timed_out == ["m"]

    leaving = listed[0]
    leaving.exiting = True
    leaving.in_flight = {"m": 0.0}
    scanner.scan_once()
    assert leaving.timed_out == []  # an exiting channel is left alone


@dataclass
class BrokenChannel(FakeChannel):
    """A channel whose processing raises on every visit (a bug in it, say)."""

    visits: int = 0

    def process_in_flight(self, now: float) -> bool:
        self.visits += 1
        raise RuntimeError(f"{self.name} is broken")


def test_a_channel_that_raises_is_logged_with_its_traceback_and_the_scan_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(max_time=0.55)
    broken = BrokenChannel("broken", clock)
    good = FakeChannel("good", clock, in_flight={"early": 0.1, "late": 0.45})
    scanner = QueueScanner(lambda: [broken, good], interval=INTERVAL, refresh_interval=5.0,
                           selection_count=20, dirty_percent=0.25, clock=clock)
    with caplog.at_level("ERROR", logger="nsqd"):
        run_until_stopped(scanner)  # the loop ends only when the clock stops it
    assert good.timed_out == ["early", "late"] and good.pumps == 2
    # passes at 0.1 (twice: "early" made half the sample dirty), 0.2, 0.3, 0.4, 0.5 (twice)
    assert broken.visits == 7 and scanner.failures.count == 7
    # a failure that repeats is logged once, with its traceback, until RELOG_INTERVAL passes
    logged = [r for r in caplog.records if "broken" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None
    assert logged[0].exc_info[0] is RuntimeError


def test_a_pass_that_fails_outside_any_channel_is_retried_at_the_next_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(max_time=0.35)
    good = FakeChannel("good", clock, in_flight={"m": 0.25})
    listings = 0

    def list_channels() -> list[FakeChannel]:
        nonlocal listings
        listings += 1
        if listings == 1:
            raise OSError("listing failed")
        return [good]
    scanner = QueueScanner(list_channels, interval=INTERVAL, refresh_interval=5.0,
                           selection_count=20, dirty_percent=0.25, clock=clock)
    with caplog.at_level("ERROR", logger="nsqd"):
        run_until_stopped(scanner)
    assert good.timed_out == ["m"] and listings == 2
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [OSError]
