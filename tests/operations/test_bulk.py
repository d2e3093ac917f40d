"""Bulk actions (issue 34): what a dry run counts, what is skipped, who may, on a real SQLite file.

Runs are written through the store's own ``create_run`` (rows and search
fields, no workflow needed: cancel and pause act on the row). A run that
another actor changes after the bulk action listed it, so that it no longer
passes the filter, is reported as skipped and left as the other actor left it.
"""

from __future__ import annotations

import asyncio

import pytest

from search_support import BASE, SampleRun
from treadle import Actor
from treadle._operations._bulk import BulkAction, run_bulk
from treadle._stores._sqlite import SqliteStore
from treadle._values._actors import Role
from treadle._values._filter import parse_filter
from treadle._workflow import _actions as door
from treadle.errors import ActionRefusedError

OPERATOR = Actor("user", "olga", "api", Role.OPERATOR)


@pytest.fixture
async def store(tmp_path):
    opened = SqliteStore(tmp_path / "bulk.sqlite")
    for number in range(3):
        run = SampleRun(f"r{number}", "waiting", None, "orders", BASE + number, {"batch": "x"})
        await opened.create_run(run.record(), b"", run.first_checkpoint())
    yield opened
    await opened.close()


WHERE = parse_filter('fields.batch == "x" && status == "waiting"')


async def test_a_run_changed_after_listing_is_skipped_not_acted_on(store):
    counted = await run_bulk(store, BulkAction("pause", WHERE, dry_run=True), actor=OPERATOR)
    assert (counted.matched, counted.acted) == (3, [])

    # One run a second, newest first: r2 at once, r1 after a second, r0 after two.
    pausing = asyncio.create_task(
        run_bulk(store, BulkAction("pause", WHERE, rate=1.0), actor=OPERATOR)
    )
    while (await store.get_run("r2")).status != "paused":  # noqa: ASYNC110 - another process's row
        await asyncio.sleep(0.01)
    await door.cancel(store, "r0", actor=Actor.python())  # another actor, meanwhile
    report = await pausing

    assert report.matched == 3
    assert report.acted == ["r2", "r1"]
    assert report.skipped == [("r0", "changed: no longer passes the filter (now cancelled)")]
    assert (await store.get_run("r0")).status == "cancelled"
    entries = [(e.run_id, e.action, e.actor["label"]) for e in await store.read_audit()]
    assert ("r0", "run_paused", "olga") not in entries
    assert entries.count(("r2", "run_paused", "olga")) == 1


async def test_a_refusal_by_the_door_is_reported(store):
    await door.cancel(store, "r1", actor=Actor.python())
    everything = parse_filter('fields.batch == "x"')
    report = await run_bulk(store, BulkAction("cancel", everything), actor=OPERATOR)
    assert report.acted == ["r2", "r0"]
    ((run_id, why),) = report.skipped
    assert run_id == "r1"
    assert why.startswith("refused: ")


async def test_an_actor_without_the_right_is_refused_before_anything(store):
    viewer = Actor("user", "vic", "api", Role.VIEWER)
    with pytest.raises(ActionRefusedError, match="cancel needs the operator role"):
        await run_bulk(store, BulkAction("cancel", WHERE, dry_run=True), actor=viewer)
    with pytest.raises(ActionRefusedError, match="delete needs the admin role"):
        await run_bulk(store, BulkAction("delete", WHERE), actor=OPERATOR)
    assert [run.status for run in await store.list_runs()] == ["waiting"] * 3


def test_a_bulk_action_is_checked_where_it_is_made():
    with pytest.raises(ValueError, match="one of cancel"):
        BulkAction("explode", WHERE)
    with pytest.raises(ValueError, match="above 0"):
        BulkAction("cancel", WHERE, rate=0)
    with pytest.raises(ValueError, match="respond needs the executor"):
        BulkAction("respond", WHERE)


async def test_resume_hands_a_parked_run_back_and_unpause_lets_a_paused_one_go(store):
    lease = await store.acquire("r0", "some-worker", 30.0)
    await store.park(lease, "parked: could not load it")
    assert (await store.get_run("r0")).parked is not None
    resumed = await run_bulk(store, BulkAction("resume", parse_filter("true")), actor=OPERATOR)
    assert resumed.acted == ["r2", "r1", "r0"]
    row = await store.get_run("r0")
    assert (row.parked, row.owner) == (None, None)  # taken up, recorded, and let go

    await run_bulk(store, BulkAction("pause", WHERE), actor=OPERATOR)
    unpaused = await run_bulk(
        store, BulkAction("unpause", parse_filter('status == "paused"')), actor=OPERATOR
    )
    assert unpaused.acted == ["r2", "r1", "r0"]
    entries = [(e.run_id, e.action, e.actor["label"]) for e in await store.read_audit()]
    for run_id in ("r0", "r1", "r2"):
        for action in ("run_resumed", "run_paused", "run_unpaused"):
            assert entries.count((run_id, action, "olga")) == 1, (run_id, action)


async def test_resume_skips_runs_that_ended_and_records_nothing_for_them(store):
    # bulk resume said it acted on cancelled and completed runs: it changed none of them.
    for run_id, status in (("done", "completed"), ("stopped", "cancelled")):
        run = SampleRun(run_id, status, None, "orders", BASE + 10, {"batch": "y"})
        await store.create_run(run.record(), b"", run.first_checkpoint())
    report = await run_bulk(
        store, BulkAction("resume", parse_filter('fields.batch == "y"')), actor=OPERATOR
    )
    assert report.acted == []
    assert sorted(report.skipped) == [
        ("done", "refused: run 'done' completed: there is nothing to resume"),
        ("stopped", "refused: run 'stopped' was cancelled"),
    ]
    entries = [(e.run_id, e.action) for e in await store.read_audit()]
    assert not [
        entry for entry in entries if entry[0] in {"done", "stopped"} and entry[1] != "run_created"
    ]


async def test_pausing_runs_paused_already_is_not_said_to_act_on_them(store):
    first = await run_bulk(store, BulkAction("pause", parse_filter("true")), actor=OPERATOR)
    assert first.acted == ["r2", "r1", "r0"]
    again = await run_bulk(store, BulkAction("pause", parse_filter("true")), actor=OPERATOR)
    assert again.acted == []
    assert again.skipped == [(r, "unchanged: it is paused already") for r in ("r2", "r1", "r0")]
    paused = [e for e in await store.read_audit() if e.action == "run_paused"]
    assert len(paused) == 3


class _EndsBeforeTheLease:
    """The store, where another caller cancels each run between its read and its lease."""

    def __init__(self, inner: SqliteStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def acquire(self, run_id: str, *args: object, **kwargs: object) -> object:
        await door.cancel(self._inner, run_id, actor=Actor.python())
        return await self._inner.acquire(run_id, *args, **kwargs)


async def test_a_run_that_ends_before_resume_takes_it_up_is_not_said_to_be_resumed(store):
    # The status was read before the lease: a run cancelled in between was reported as
    # resumed, with nothing recorded for it.
    report = await run_bulk(
        _EndsBeforeTheLease(store),  # type: ignore[arg-type]
        BulkAction("resume", parse_filter('fields.batch == "x"')),
        actor=OPERATOR,
    )
    assert report.acted == []
    assert sorted(report.skipped) == [
        (r, f"refused: run {r!r} was cancelled") for r in ("r0", "r1", "r2")
    ]
    entries = [(e.run_id, e.action) for e in await store.read_audit()]
    assert not [entry for entry in entries if entry[1] == "run_resumed"]
    assert {(await store.get_run(r)).lease_until for r in ("r0", "r1", "r2")} <= {None}


async def test_pausing_runs_asked_to_pause_already_is_not_said_to_act_on_them(store):
    # Each run's worker holds its lease: a pause is asked of it, for its next barrier. A
    # second bulk pause asked again, said it acted on every run and recorded each twice.
    for run_id in ("r0", "r1", "r2"):
        await store.acquire(run_id, "some-worker", 30.0)
    first = await run_bulk(store, BulkAction("pause", WHERE), actor=OPERATOR)
    assert first.acted == ["r2", "r1", "r0"]
    again = await run_bulk(store, BulkAction("pause", WHERE), actor=OPERATOR)
    assert again.acted == []
    assert again.skipped == [
        (r, "unchanged: its pause was asked already") for r in ("r2", "r1", "r0")
    ]
    paused = [e for e in await store.read_audit() if e.action == "run_paused"]
    assert len(paused) == 3


async def test_a_run_whose_owner_died_after_a_pause_was_asked_is_paused_now(store):
    lease = await store.acquire("r0", "dead-worker", 0.2)
    await door.pause(store, "r0", actor=Actor.python())  # asked of its owner
    assert (await store.get_run(lease.run_id)).pause_requested is not None
    await asyncio.sleep(0.3)  # the owner's lease runs out: nobody will honour the ask
    report = await run_bulk(store, BulkAction("pause", WHERE), actor=OPERATOR)
    assert "r0" in report.acted
    assert (await store.get_run("r0")).status == "paused"
