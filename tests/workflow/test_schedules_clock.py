"""Schedules on a fake clock: a simulated year in Paris and New York, tick by tick.

Every tick starts exactly one run, at its local time, and no run starts a
second before it; the days clocks change behave as docs/schedules.md says
(a time in the skipped hour fires once at the first instant after the
jump, a time in the repeated hour fires once, at its first occurrence).
The expected times are worked out here from ``zoneinfo`` alone, minute by
minute, not by the code under test.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from treadle import Runtime, Schedule, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import MemoryStore, SqliteStore
from treadle.testing import FakeClock

YEAR = 2026


def echo_workflow():
    @executor(id="echo")
    async def echo(text: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(text)

    return WorkflowBuilder(start=echo, name="digest").build()


def first_instant(local: datetime, zone: ZoneInfo) -> datetime:
    """The instant a wall-clock time fires at: its first occurrence, or the end of a gap."""
    for fold in (0, 1):
        candidate = local.replace(tzinfo=zone, fold=fold)
        back = candidate.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
        if back == local:
            return min(
                local.replace(tzinfo=zone, fold=f).astimezone(UTC)
                for f in (0, 1)
                if local.replace(tzinfo=zone, fold=f)
                .astimezone(UTC)
                .astimezone(zone)
                .replace(tzinfo=None)
                == local
            )
    # In a gap: walk minute by minute from an hour before until the wall clock passes it.
    instant = (local - timedelta(hours=1)).replace(tzinfo=zone).astimezone(UTC)
    while instant.astimezone(zone).replace(tzinfo=None) < local:
        instant += timedelta(minutes=1)
    return instant


def expected_ticks(zone_name: str, times: list[tuple[int, int]], weekdays=None) -> list[float]:
    """The year's nominal instants of daily wall-clock ``times`` (on ``weekdays``), deduplicated."""
    zone = ZoneInfo(zone_name)
    found: set[float] = set()
    day = date(YEAR, 1, 1)
    while day.year == YEAR:
        if weekdays is None or day.weekday() in weekdays:
            for hour, minute in times:
                local = datetime(day.year, day.month, day.day, hour, minute)  # noqa: DTZ001
                found.add(first_instant(local, zone).timestamp())
        day += timedelta(days=1)
    return sorted(found)


SCHEDULES = {
    # A time in Paris' skipped hour (last Sunday of March) and repeated hour (October).
    "paris-0230": ("30 2 * * *", "Europe/Paris", [(2, 30)], None),
    # Four times a Sunday inside that hour: all in the gap collapse into one instant.
    "paris-sunday-2am": ("*/15 2 * * 0", "Europe/Paris", [(2, m) for m in (0, 15, 30, 45)], {6}),
    # New York's skipped hour is 02:00-03:00 in March; its repeated one 01:00-02:00 in November.
    "ny-0230": ("30 2 * * *", "America/New_York", [(2, 30)], None),
    "ny-0130": ("30 1 * * *", "America/New_York", [(1, 30)], None),
}


# The whole year runs under `make soak` (about a minute on a loaded machine); the
# default suite runs the two months around each change of both cities' clocks.
WINDOWS = [
    pytest.param((1, 1), (12, 31), id="year", marks=pytest.mark.soak),
    pytest.param((3, 1), (4, 1), id="march"),
    pytest.param((10, 20), (11, 5), id="autumn"),
]


@pytest.mark.parametrize(("first", "last"), WINDOWS)
async def test_a_year_of_ticks_in_paris_and_new_york_each_once_at_its_local_time(
    first, last
) -> None:
    start = datetime(YEAR, *first, tzinfo=UTC).timestamp() - 6 * 3600
    end = datetime(YEAR, *last, 12, tzinfo=UTC).timestamp()
    clock = FakeClock(start)
    store = MemoryStore()
    workflow = echo_workflow()
    runtime = Runtime(store, [workflow], clock=clock)
    expected: dict[float, set[str]] = {}
    local_time: dict[str, str] = {}
    for schedule_id, (cron, tz, times, weekdays) in SCHEDULES.items():
        schedule = Schedule(workflow, cron=cron, tz=tz, id=schedule_id, input="{nominal}")
        await runtime.schedules.create(schedule)
        for nominal in expected_ticks(tz, times, weekdays):
            if start < nominal < end:
                expected.setdefault(nominal, set()).add(schedule.run_id(nominal))
                local_time[schedule.run_id(nominal)] = schedule.local(nominal).isoformat()

    instants = sorted(expected)
    started: set[str] = set()
    for instant in instants:
        await clock.advance_to(instant - 1)
        early = await runtime.wake_due()
        assert early == [], f"runs started before {datetime.fromtimestamp(instant, UTC)}"
        await clock.advance_to(instant)
        results = await runtime.wake_due()
        ids = {result.run_id for result in results}
        assert ids == expected[instant], datetime.fromtimestamp(instant, UTC)
        assert not ids & started
        # Each run's input is its tick's local time, which it output.
        assert all(result.outputs == [local_time[result.run_id]] for result in results)
        started |= ids
    for schedule_id in SCHEDULES:
        runs = await store.list_runs(workflow="digest")
        mine = [r for r in runs if r.run_id.startswith(f"{schedule_id}@")]
        assert mine, schedule_id
        ticks = await runtime.schedules.ticks(schedule_id, limit=1000)
        assert {t.run_id for t in ticks} == {r.run_id for r in mine}
        assert all(t.action == "started" and t.run_status == "completed" for t in ticks)
    assert len(started) == sum(len(ids) for ids in expected.values())


@pytest.mark.parametrize(
    ("tz", "day", "wall", "fires"),
    [
        # Paris springs forward at 02:00 on 29 March: 02:30 fires at 03:00 CEST.
        ("Europe/Paris", (3, 29), "30 2 * * *", ["2026-03-29T03:00:00+02:00"]),
        # and falls back at 03:00 on 25 October: 02:30 fires once, in summer time.
        ("Europe/Paris", (10, 25), "30 2 * * *", ["2026-10-25T02:30:00+02:00"]),
        # New York falls back on 1 November: 01:30 fires once, in daylight time.
        ("America/New_York", (11, 1), "30 1 * * *", ["2026-11-01T01:30:00-04:00"]),
        # A quarter-hourly time in the gap: all four fire together, once, at 03:00.
        ("Europe/Paris", (3, 29), "*/15 2 * * *", ["2026-03-29T03:00:00+02:00"]),
        # In the repeated hour each of the four fires once, at its first occurrence.
        (
            "Europe/Paris",
            (10, 25),
            "*/15 2 * * *",
            [f"2026-10-25T02:{m:02d}:00+02:00" for m in (0, 15, 30, 45)],
        ),
    ],
)
def test_daylight_saving_days_as_documented(tz, day, wall, fires) -> None:
    schedule = Schedule("digest", cron=wall, tz=tz)
    zone = ZoneInfo(tz)
    midnight = datetime(YEAR, *day, tzinfo=zone)
    times = schedule.ticks_between(midnight.timestamp(), (midnight + timedelta(days=1)).timestamp())
    assert [schedule.local(t).isoformat() for t in times] == fires


async def test_a_clock_jump_forward_starts_only_what_the_catch_up_window_holds(tmp_path) -> None:
    """Nothing served the store for three days: ticks older than the window are missed."""
    clock = FakeClock(datetime(YEAR, 5, 1, tzinfo=UTC).timestamp())
    store = SqliteStore(tmp_path / "runs.db")
    workflow = echo_workflow()
    runtime = Runtime(store, [workflow], clock=clock)
    schedule = Schedule(
        workflow, every=timedelta(hours=1), catchup=timedelta(hours=3), input="x", overlap="allow"
    )
    await runtime.schedules.create(schedule)
    await clock.advance(3 * 86400 + 60)
    results = await runtime.wake_due()
    # The three hours within the window start; the 69 before them are recorded as missed.
    assert len(results) == 3
    ticks = await runtime.schedules.ticks("digest", limit=10)
    missed = [t for t in ticks if t.action == "missed"]
    assert len(missed) == 1
    assert missed[0].detail.startswith("69 tick(s)")
    assert await runtime.wake_due() == []  # nothing twice
    await store.close()


async def test_a_window_shorter_than_the_poll_still_starts_each_tick_served_on_time(
    tmp_path,
) -> None:
    """``catchup=0``: no tick is caught up after an outage, and each one served on time starts.

    A tick is decided a moment after its time (a poll, at most, after it): with a window
    shorter than that, every tick was recorded as missed, "nothing served the store then",
    while a ``Runtime`` served it all along, and the schedule never started a run.
    """
    store = SqliteStore(tmp_path / "runs.db")
    workflow = echo_workflow()
    async with Runtime(store, [workflow], poll_interval=0.5) as runtime:
        await runtime.schedules.create(
            Schedule(workflow, every=timedelta(seconds=1), catchup=0, input="x", overlap="allow")
        )
        await asyncio.sleep(3.6)
        ticks = await runtime.schedules.ticks("digest", limit=20)
    assert [t.action for t in ticks if t.action != "started"] == []
    assert len(ticks) >= 3
    assert len(await store.list_runs(workflow="digest")) == len(ticks)
    await store.close()

    clock = FakeClock(datetime(YEAR, 5, 1, tzinfo=UTC).timestamp())
    store = SqliteStore(tmp_path / "faked.db")
    runtime = Runtime(store, [workflow], clock=clock, poll_interval=1.0)
    await runtime.schedules.create(
        Schedule(workflow, every=timedelta(hours=1), catchup=0, input="x")
    )
    await clock.advance(3600.9)  # within a poll of its time: served on time
    assert len(await runtime.wake_due()) == 1
    await clock.advance(3 * 3600 + 2)  # three ticks, each later than a poll: none caught up
    assert await runtime.wake_due() == []
    (missed, started) = await runtime.schedules.ticks("digest", limit=2)
    assert (missed.action, started.action) == ("missed", "started")
    assert missed.detail.startswith("3 tick(s)")
    await store.close()
