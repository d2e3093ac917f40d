"""Runs started with equal options share one settings value, each still on its own clock.

A caller that passes the same keywords to every run (``wf.run(i, clock=c,
record_events=False)``) makes a new, equal ``RunOptions`` each time; the
workflow builds the settings for the first and reuses them for the rest.
Only a value that is the same where it matters may be shared: a run given
another clock object, even one equal to the first, runs on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from treadle import RunOptions, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import MemoryStore
from treadle.testing import FakeClock


@dataclass
class StoppedClock:
    """A clock that compares by value, as a user's dataclass clock would."""

    at: float

    def now(self) -> float:
        return self.at

    async def sleep_until(self, deadline: float) -> None:
        self.at = max(self.at, deadline)


def _workflow():
    @executor(id="stamp")
    async def stamp(n: int, ctx: WorkflowContext[int]) -> None:
        ctx.yield_output(n)

    return WorkflowBuilder(start=stamp, name="stamped").build()


async def _started_at(store: MemoryStore, result) -> float:
    """When the run's log says it started: by the clock it ran on."""
    (started,) = [e for e in await store.read_events(result.run_id) if e.kind == "run_started"]
    return started.at


async def test_equal_options_share_their_settings() -> None:
    wf = _workflow()
    clock = FakeClock(start=100.0)
    first = wf.settings(RunOptions(clock=clock, durability="sync"), sleep_through_timers=False)
    again = wf.settings(RunOptions(clock=clock, durability="sync"), sleep_through_timers=False)
    other = wf.settings(RunOptions(clock=clock, durability="batched"), sleep_through_timers=False)
    assert again is first
    assert other is not first
    assert other.durability == "batched"


async def test_runs_with_equal_keywords_and_other_clocks_each_run_on_their_own() -> None:
    wf, store = _workflow(), MemoryStore()
    for start in (100.0, 500.0, 900.0):
        result = await wf.run(1, store=store, clock=FakeClock(start=start), record_events=False)
        assert await _started_at(store, result) == start
    # Equal clocks that are not the same object are not shared either.
    early, late = StoppedClock(10.0), StoppedClock(10.0)
    assert early == late
    await wf.run(1, store=store, clock=early)
    assert wf.settings(RunOptions(clock=late), sleep_through_timers=False).clock is late
    late.at = 20.0  # ... as they may part later
    assert await _started_at(store, await wf.run(1, store=store, clock=late)) == 20.0
