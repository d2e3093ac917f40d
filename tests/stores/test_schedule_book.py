"""Every store keeps schedules alike, and decides each tick once (``ScheduleBook``)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from treadle import Actor
from treadle._stores._schedules import ScheduleCursor, TickRow, created_row
from treadle.errors import ScheduleExistsError, ScheduleNotFoundError

ANN = Actor("user", "ann", "api", role=Actor.cli().role)
TICKER = Actor.service("schedule:digest", door="schedule")


def row(schedule_id="digest", next_at=100.0):
    return created_row(
        schedule_id, "digest", '{"id": "digest"}', ScheduleCursor(next_at, next_at), ANN
    )


def tick(nominal, action="started", source="schedule"):
    run_id = f"digest@{nominal}" if action == "started" else None
    return TickRow("digest", nominal, source, action, run_id, 1.0, "")


async def test_create_read_list_replace_and_delete(store) -> None:
    created = await store.put_schedule(row(), actor=ANN, action="schedule_created", revision=None)
    assert created.revision == 1
    with pytest.raises(ScheduleExistsError):
        await store.put_schedule(row(), actor=ANN, action="schedule_created", revision=None)
    kept = await store.get_schedule("digest")
    assert (kept.workflow, kept.cursor.next_at, kept.paused) == ("digest", 100.0, False)
    paused = dataclasses.replace(kept, paused=True, note="holiday")
    stored = await store.put_schedule(paused, actor=ANN, action="schedule_paused", revision=1)
    assert stored is not None
    assert stored.revision == 2
    # A change computed from an old revision is refused, not applied.
    assert await store.put_schedule(kept, actor=ANN, action="schedule_updated", revision=1) is None
    again = await store.get_schedule("digest")
    assert (again.paused, again.note, again.updated_by) == (True, "holiday", "ann")
    assert [r.schedule_id for r in await store.list_schedules()] == ["digest"]
    assert await store.list_schedules(workflow="other") == []
    await store.delete_schedule("digest", actor=ANN)
    with pytest.raises(ScheduleNotFoundError):
        await store.get_schedule("digest")
    with pytest.raises(ScheduleNotFoundError):
        await store.delete_schedule("digest", actor=ANN)
    actions = [e.action for e in await store.read_audit() if e.detail.get("schedule") == "digest"]
    assert actions == ["schedule_created", "schedule_paused", "schedule_deleted"]


async def test_a_tick_is_decided_once_when_deciders_race(store) -> None:
    await store.put_schedule(row(), actor=ANN, action="schedule_created", revision=None)
    moved = ScheduleCursor(200.0, 200.0, (), "digest@100.0")

    async def decide():
        return await store.decide_ticks(
            "digest", 1, moved, [tick(100.0)], actor=TICKER, action="schedule_ticked"
        )

    outcomes = await asyncio.gather(*(decide() for _ in range(8)))
    assert sorted(outcomes, key=str) == [None] * 7 + [[100.0]]
    kept = await store.get_schedule("digest")
    assert (kept.revision, kept.cursor) == (2, moved)
    ticks = await store.list_ticks("digest")
    assert [(t.nominal_at, t.action, t.started) for t in ticks] == [(100.0, "started", False)]
    # The decision is audited once, by the schedule as a service; the refused ones record nothing.
    audit = [e for e in await store.read_audit() if e.detail.get("schedule") == "digest"]
    assert [(e.action, e.actor["label"], e.door) for e in audit[1:]] == [
        ("schedule_ticked", "service:schedule:digest", "schedule")
    ]


async def test_unstarted_ticks_make_a_schedule_due_until_marked(store) -> None:
    await store.put_schedule(row(next_at=1e12), actor=ANN, action="schedule_created", revision=None)
    assert await store.due_schedules(500.0, ["digest"], limit=10) == []
    await store.decide_ticks(
        "digest",
        None,
        None,
        [tick(100.0), tick(200.0, "skipped")],
        actor=TICKER,
        action="schedule_ticked",
    )
    assert [r.schedule_id for r in await store.due_schedules(500.0, ["digest"], limit=10)] == [
        "digest"
    ]
    assert await store.due_schedules(500.0, ["other"], limit=10) == []
    assert [t.nominal_at for t in await store.list_ticks("digest", unstarted=True)] == [100.0]
    await store.mark_started("digest", [100.0])
    assert await store.list_ticks("digest", unstarted=True) == []
    assert await store.due_schedules(500.0, ["digest"], limit=10) == []


async def test_a_backfill_starts_a_skipped_tick_but_never_one_started(store) -> None:
    await store.put_schedule(row(), actor=ANN, action="schedule_created", revision=None)
    await store.decide_ticks(
        "digest",
        None,
        None,
        [tick(100.0), tick(200.0, "skipped")],
        actor=TICKER,
        action="schedule_ticked",
    )
    backfilled = [tick(100.0, source="backfill"), tick(200.0, source="backfill")]
    inserted = await store.decide_ticks(
        "digest", None, None, backfilled, actor=ANN, action="schedule_backfilled"
    )
    assert inserted == [200.0]
    ticks = {t.nominal_at: (t.source, t.action) for t in await store.list_ticks("digest")}
    assert ticks == {100.0: ("schedule", "started"), 200.0: ("backfill", "started")}
    again = await store.decide_ticks(
        "digest", None, None, backfilled, actor=ANN, action="schedule_backfilled"
    )
    assert again == []


async def test_due_schedules_skip_paused_and_future_ones(store) -> None:
    for schedule_id, next_at in (("a", 10.0), ("b", 1000.0), ("c", 20.0)):
        await store.put_schedule(
            row(schedule_id, next_at), actor=ANN, action="schedule_created", revision=None
        )
    c = await store.get_schedule("c")
    await store.put_schedule(
        dataclasses.replace(c, paused=True), actor=ANN, action="schedule_paused", revision=1
    )
    due = await store.due_schedules(500.0, ["digest"], limit=10)
    assert [r.schedule_id for r in due] == ["a"]
