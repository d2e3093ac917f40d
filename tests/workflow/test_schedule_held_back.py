"""A schedule that cannot tick where it is served does not keep the others from ticking.

A schedule whose tick cannot start in a process (its input does not fit the
workflow that process hosts under its name, as in a deploy that changed the
workflow) stays due, first in line, for ever. Each round serves at most
``DUE_PAGE`` schedules, earliest due first: as many such schedules as a round
serves stopped every other schedule. Now each one that fails is held back from
that process's rounds for a while (a second, doubling to five minutes), then
tried after the others.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from treadle import Runtime, Schedule, WorkflowBuilder, WorkflowContext, executor
from treadle._workflow import _ticker
from treadle.stores import MemoryStore, SqliteStore
from treadle.testing import FakeClock


def named(name: str, accepts: type):
    @executor(id="start", accepts=accepts)
    async def start(value, ctx: WorkflowContext) -> None:
        ctx.yield_output(value)

    return WorkflowBuilder(start=start, name=name).build()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_schedules_that_cannot_tick_here_leave_the_others_their_rounds(
    tmp_path, monkeypatch, caplog, kind
):
    monkeypatch.setattr(_ticker, "DUE_PAGE", 2)  # a round serves two: three stuck would fill it
    clock = FakeClock(datetime(2026, 5, 1, tzinfo=UTC).timestamp())
    store = MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "runs.db")
    before = Runtime(store, [named("digest", str), named("report", str)], clock=clock)
    for n in range(3):  # due every minute: always first in line
        stuck = Schedule(
            named("digest", str), id=f"digest-{n}", every=timedelta(minutes=1), input="text"
        )
        await before.schedules.create(stuck)
    # Its tick of the first round waits behind them (nothing failed yet): it starts next round.
    report = Schedule(
        named("report", str), id="report", every=timedelta(minutes=2), input="x", overlap="allow"
    )
    await before.schedules.create(report)

    # The deploy: "digest" now takes an int, so its schedules' text cannot start it here.
    after = Runtime(store, [named("digest", int), named("report", str)], clock=clock)
    started = []
    with caplog.at_level(logging.ERROR, logger="treadle.schedules"):
        for _ in range(6):
            await clock.advance(120)
            started += [r.run_id for r in await after.wake_due()]
    assert sorted(started) == [f"report@20260501T00{m:02d}00Z" for m in range(2, 14, 2)]
    ticks = await after.schedules.ticks("report", limit=10)
    assert [t.action for t in ticks] == ["started"] * 6
    # Every stuck schedule is said to fail, with when it is tried here again.
    failures = [r.getMessage() for r in caplog.records]
    for n in range(3):
        assert any(f"schedule digest-{n} cannot tick here" in m for m in failures), failures
    assert all("tried here again in" in m for m in failures)
    await store.close()


def test_a_schedule_is_held_back_twice_as_long_each_time_it_fails_and_freed_when_served():
    held = _ticker.HeldBack()
    assert [held.failed("s", 0.0) for _ in range(11)] == [
        1.0,
        2.0,
        4.0,
        8.0,
        16.0,
        32.0,
        64.0,
        128.0,
        256.0,
        300.0,
        300.0,
    ]
    assert held.held(299.0) == {"s"}
    assert held.held(300.0) == frozenset()
    held.served("s")
    assert held.failed("s", 0.0) == 1.0
    # One no longer due once its hold has ended (deleted, paused, served elsewhere) is forgotten.
    held.failed("gone", 0.0)
    assert held.ordered([], 0.5) == []
    assert set(held.until) == {"s", "gone"}  # still held: kept
    assert held.ordered([], 2.0) == []
    assert held.until == {}
