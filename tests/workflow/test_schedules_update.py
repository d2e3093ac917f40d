"""Changing a schedule after it exists: ``Schedules.update``, on every store backend.

The new times apply at once (the next tick is the first of them after
now, and the ticker follows them); the change is recorded with its actor,
as is each tick the schedule decides itself (by the schedule, as a
service); a refused change changes nothing; and a change racing a tick
neither fires the tick twice nor is lost: each is applied by the store
only to the revision it was computed from, and the other reads again.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from treadle import Actor, Runtime, Schedule, Schedules, WorkflowBuilder, WorkflowContext, executor
from treadle.testing import FakeClock

ANN = Actor("user", "ann", "api", role=Actor.cli().role)
BOB = Actor("user", "bob", "page", role=Actor.cli().role)
TICKER = "service:schedule:digest"
# Monday 2 March 2026, 07:30 UTC (08:30 in Paris, 02:30 in New York).
START = datetime(2026, 3, 2, 7, 30, tzinfo=UTC).timestamp()


def at(hour: int, minute: int = 0) -> float:
    return datetime(2026, 3, 2, hour, minute, tzinfo=UTC).timestamp()


def echo_workflow():
    @executor(id="echo")
    async def echo(text: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(text)

    return WorkflowBuilder(start=echo, name="digest").build()


async def setup(store, **fields):
    clock = FakeClock(START)
    workflow = echo_workflow()
    runtime = Runtime(store, [workflow], clock=clock)
    spec = {"cron": "0 9 * * *", "tz": "Europe/Paris", "input": "{nominal}", **fields}
    await Schedules(store, actor=ANN, clock=clock).create(Schedule(workflow, **spec))
    return clock, runtime, Schedules(store, actor=BOB, clock=clock)


async def schedule_audit(store) -> list[tuple[str, str]]:
    return [
        (e.action, e.actor["label"])
        for e in await store.read_audit()
        if e.detail.get("schedule") == "digest"
    ]


async def wake_at(runtime, clock, moment: float) -> list[str]:
    await clock.advance_to(moment)
    return [result.run_id for result in await runtime.wake_due()]


async def test_new_times_apply_at_once_and_each_change_and_tick_is_audited_by_its_actor(
    store,
) -> None:
    clock, runtime, schedules = await setup(store)
    before = await schedules.get("digest")
    assert before.next_tick == datetime.fromisoformat("2026-03-02T09:00:00+01:00")

    changed = await schedules.update("digest", cron="30 6 * * *", tz="America/New_York")
    assert changed.next_tick == datetime.fromisoformat("2026-03-02T06:30:00-05:00")
    assert (changed.revision, changed.updated_by, changed.created_by) == (
        before.revision + 1,
        "bob",
        "ann",
    )
    kept = changed.schedule
    assert (kept.input, kept.overlap, kept.every, kept.workflow) == (
        "{nominal}",
        "skip",
        None,
        "digest",
    )
    assert (await schedules.get("digest")).schedule == kept  # stored, not only answered

    # The old time (09:00 Paris) starts nothing; the new one (06:30 New York) starts its run.
    assert await wake_at(runtime, clock, at(8)) == []
    assert await wake_at(runtime, clock, at(11, 30)) == ["digest@20260302T113000Z"]

    # Only the input: the next tick stays; an interval replaces the cron expression.
    same = await schedules.update("digest", input="day {date}")
    assert (same.next_tick, same.schedule.input) == (
        datetime.fromisoformat("2026-03-03T06:30:00-05:00"),
        "day {date}",
    )
    hourly = await schedules.update("digest", every=3600)
    assert (hourly.schedule.cron, hourly.next_tick.timestamp()) == (None, at(12))
    assert await wake_at(runtime, clock, at(12)) == ["digest@20260302T120000Z"]

    # Each change's entry says what it changed, before and after.
    changes = [
        e.detail["changed"] for e in await store.read_audit() if e.action == "schedule_updated"
    ]
    assert changes == [
        {"cron": ["0 9 * * *", "30 6 * * *"], "tz": ["Europe/Paris", "America/New_York"]},
        {"input": ["{nominal}", "day {date}"]},
        {"cron": ["30 6 * * *", None], "every": [None, 3600.0]},
    ]
    assert await schedule_audit(store) == [
        ("schedule_created", "ann"),
        ("schedule_updated", "bob"),
        ("schedule_ticked", TICKER),
        ("schedule_updated", "bob"),
        ("schedule_updated", "bob"),
        ("schedule_ticked", TICKER),
    ]


async def test_trigger_and_backfill_are_audited_by_whoever_asked(store) -> None:
    clock, _, schedules = await setup(store)
    await clock.advance_to(at(12))
    await schedules.trigger("digest")
    await schedules.backfill(
        "digest", datetime(2026, 2, 27, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC)
    )
    assert await schedule_audit(store) == [
        ("schedule_created", "ann"),
        ("schedule_triggered", "bob"),
        ("schedule_backfilled", "bob"),
    ]


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"cron": "0 8 * * *", "every": 60}, "give one of cron= and every=, not both"),
        ({"tz": "Mars/Olympus"}, "tz 'Mars/Olympus' is not an IANA time zone"),
        ({"cron": "61 * * * *"}, "cron '61 * * * *' is not a cron expression"),
        ({"overlap": "sometimes"}, "overlap 'sometimes' is not one of"),
        ({"id": "other"}, "cannot change id (a schedule's id never changes"),
        ({"workflow": "other"}, "cannot change workflow (a schedule's workflow never changes"),
        ({"cron": None}, "give exactly one of cron= and every="),
    ],
)
async def test_a_refused_change_names_the_field_and_changes_nothing(store, changes, named) -> None:
    *_, schedules = await setup(store)
    before = await store.get_schedule("digest")
    with pytest.raises(ValueError, match="schedule 'digest': ") as refused:
        await schedules.update("digest", **changes)
    assert named in str(refused.value)
    assert await store.get_schedule("digest") == before
    assert await schedule_audit(store) == [("schedule_created", "ann")]


async def test_a_whole_schedule_given_to_update_may_not_run_another_workflow(store) -> None:
    *_, schedules = await setup(store)
    before = await store.get_schedule("digest")
    other = Schedule("other", id="digest", cron="0 9 * * *", tz="Europe/Paris")
    with pytest.raises(ValueError, match="runs 'digest', not 'other': a schedule's workflow"):
        await schedules.update(other)
    assert await store.get_schedule("digest") == before


async def test_a_tick_landing_before_a_change_is_decided_once_and_the_change_still_applies(
    store, monkeypatch
) -> None:
    clock, runtime, schedules = await setup(store)
    await clock.advance_to(at(8))  # 09:00 in Paris: the tick is due
    put = store.put_schedule
    raced = []

    async def tick_first(row, **kwargs):
        if not raced:  # between the change's read and its write, the ticker decides the tick
            raced.extend(result.run_id for result in await runtime.wake_due())
        return await put(row, **kwargs)

    monkeypatch.setattr(store, "put_schedule", tick_first)
    changed = await schedules.update("digest", cron="0 10 * * *")
    monkeypatch.undo()

    assert raced == ["digest@20260302T080000Z"]
    assert changed.schedule.cron == "0 10 * * *"  # read again and applied, not lost
    assert changed.next_tick == datetime.fromisoformat("2026-03-02T10:00:00+01:00")
    assert await wake_at(runtime, clock, at(8, 30)) == []  # the tick started once
    assert await wake_at(runtime, clock, at(9)) == ["digest@20260302T090000Z"]
    ticks = [(t.nominal_at, t.action) for t in await schedules.ticks("digest")]
    assert ticks == [(at(9), "started"), (at(8), "started")]
    assert [a for a, _ in await schedule_audit(store)].count("schedule_updated") == 1


async def test_a_change_landing_before_a_tick_is_decided_makes_the_tick_follow_it(
    store, monkeypatch
) -> None:
    clock, runtime, schedules = await setup(store)
    await clock.advance_to(at(8))
    decide = store.decide_ticks

    async def change_first(*args, **kwargs):  # after the ticker read the schedule, a change lands
        monkeypatch.undo()
        await schedules.update("digest", cron="0 10 * * *")
        return await decide(*args, **kwargs)

    monkeypatch.setattr(store, "decide_ticks", change_first)
    assert [r.run_id for r in await runtime.wake_due()] == []  # its decision was refused
    assert (await schedules.get("digest")).schedule.cron == "0 10 * * *"
    assert await wake_at(runtime, clock, at(8, 30)) == []  # the old time does not fire late
    assert await wake_at(runtime, clock, at(9)) == ["digest@20260302T090000Z"]
    assert await wake_at(runtime, clock, at(9, 30)) == []
    ticks = [(t.nominal_at, t.action) for t in await schedules.ticks("digest")]
    assert ticks == [(at(9), "started")]
