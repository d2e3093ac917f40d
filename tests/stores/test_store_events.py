"""The store port's event logs, deleting runs, and paging through them: every backend alike."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest
from test_store_suite import T0, checkpoint, new_run, run_record

from treadle._exceptions import (
    LeaseLostError,
    RunBusyError,
    RunHasForksError,
    RunNotFoundError,
)
from treadle._stores._events import EventEntry


def entry(superstep, kind, executor_id=None, **data):
    return EventEntry(superstep, kind, executor_id, T0 + superstep, json.dumps(data))


def with_events(record, *entries):
    return dataclasses.replace(record, events=entries)


def shape(events):
    return [(e.seq, e.superstep, e.kind, e.executor_id, e.data) for e in events]


async def test_events_ride_with_their_checkpoints_and_are_numbered_in_commit_order(store):
    await new_run(store)
    await store.commit(with_events(checkpoint("run-1", "c1", 1), entry(1, "a", "x", n=1)))
    await store.commit_many(
        [
            with_events(checkpoint("run-1", "c2", 2), entry(2, "b"), entry(2, "c", "y")),
            checkpoint("run-1", "c3", 3),
            with_events(checkpoint("run-1", "c4", 4), entry(4, "d", value=[1, "two"])),
        ]
    )
    assert shape(await store.read_events("run-1")) == [
        (1, 1, "a", "x", {"n": 1}),
        (2, 2, "b", None, {}),
        (3, 2, "c", "y", {}),
        (4, 4, "d", None, {"value": [1, "two"]}),
    ]
    assert [e.seq for e in await store.read_events("run-1", after=2)] == [3, 4]
    assert [e.seq for e in await store.read_events("run-1", after=1, limit=2)] == [2, 3]
    assert await store.read_events("run-1", after=4) == []
    assert await store.read_events("run-1", limit=0) == []  # none asked: none given
    assert await store.last_event_seq("run-1") == 4
    logged = (await store.read_events("run-1", limit=1))[0]
    assert logged.to_json() == {
        "seq": 1,
        "run_id": "run-1",
        "superstep": 1,
        "type": "a",
        "executor_id": "x",
        "at": T0 + 1,
        "data": {"n": 1},
    }


async def test_a_first_checkpoint_and_a_status_carry_events_too(store):
    record = run_record()
    first = with_events(checkpoint("run-1", "c0", 0), entry(0, "run_started"))
    await store.create_run(record, b"graph", first)
    await store.set_status("run-1", "failed", "boom", events=(entry(0, "executor_failed", "x"),))
    assert [e.kind for e in await store.read_events("run-1")] == ["run_started", "executor_failed"]


async def test_an_unknown_run_has_no_log_and_a_new_one_an_empty_one(store):
    with pytest.raises(RunNotFoundError, match="nope"):
        await store.read_events("nope")
    with pytest.raises(RunNotFoundError, match="nope"):
        await store.read_events("nope", limit=0)
    with pytest.raises(RunNotFoundError, match="nope"):
        await store.last_event_seq("nope")
    await new_run(store)
    assert await store.read_events("run-1") == []
    assert await store.last_event_seq("run-1") == 0


async def test_a_write_refused_under_a_lost_lease_logs_nothing(store):
    await new_run(store)
    lease = await store.acquire("run-1", "host:1:a", 30)
    await store.cancel("run-1")  # fences the owner out
    with pytest.raises(LeaseLostError):
        await store.commit_many(
            [with_events(checkpoint("run-1", "c1", 1), entry(1, "late"))], lease=lease
        )
    with pytest.raises(LeaseLostError):
        await store.set_status("run-1", "failed", lease=lease, events=(entry(1, "late"),))
    assert [(e.kind, e.data) for e in await store.read_events("run-1")] == [
        ("status_changed", {"status": "cancelled", "by": "cancel"})
    ]


async def test_the_store_logs_the_statuses_it_gives_runs_for_callers(store):
    await new_run(store, status="awaiting_input")
    await store.set_status("run-1", "awaiting_input")
    assert await store.pause("run-1") == "paused"
    await store.unpause("run-1")
    unpaused = (await store.get_run("run-1")).status
    await store.cancel("run-1")
    logged = [(e.data["status"], e.data["by"]) for e in await store.read_events("run-1")]
    assert logged == [("paused", "pause"), (unpaused, "unpause"), ("cancelled", "cancel")]


async def test_a_pause_honoured_at_a_commit_is_logged_after_its_events(store):
    await new_run(store)
    lease = await store.acquire("run-1", "host:1:a", 30)
    assert await store.pause("run-1") == "requested"
    paused = await store.commit_many(
        [with_events(checkpoint("run-1", "c1", 1), entry(1, "superstep_completed"))], lease=lease
    )
    assert paused
    kinds = [(e.kind, e.data.get("status")) for e in await store.read_events("run-1")]
    assert kinds == [("superstep_completed", None), ("status_changed", "paused")]


async def test_writers_racing_on_one_run_get_every_seq_once(store):
    await new_run(store)
    writes = [
        store.set_status("run-1", "running", events=(entry(n, "tick", n=n), entry(n, "tock")))
        for n in range(20)
    ]
    await asyncio.gather(*writes)
    events = await store.read_events("run-1")
    assert [e.seq for e in events] == list(range(1, 41))
    # Each write's two events are adjacent: a write appends as one.
    for tick, tock in zip(events[::2], events[1::2], strict=True):
        assert (tick.kind, tock.kind, tick.superstep) == ("tick", "tock", tock.superstep)


async def test_delete_run_takes_its_row_checkpoints_inbox_and_log(store):
    await new_run(store)
    await store.commit(with_events(checkpoint("run-1", "c1", 1), entry(1, "a")))
    await store.deliver("run-1", [("answer", "r1", b"{}")])
    await new_run(store, "run-2", first="run-2/c0")
    await store.delete_run("run-1")
    for read in (store.get_run, store.read_events, store.list_checkpoints):
        with pytest.raises(RunNotFoundError):
            await read("run-1")
    assert await store.inbox("run-1") == []
    assert [run.run_id for run in await store.list_runs()] == ["run-2"]
    with pytest.raises(RunNotFoundError):
        await store.delete_run("run-1")
    await new_run(store, first="again")  # the id is free again, with a log of its own
    assert await store.read_events("run-1") == []


async def test_delete_run_refuses_an_owned_run_and_one_with_forks(store):
    await new_run(store)
    await store.acquire("run-1", "host:1:a", 30)
    with pytest.raises(RunBusyError, match="host:1:a"):
        await store.delete_run("run-1")
    await new_run(store, "parent", first="parent/c0")
    await new_run(store, "fork", first="fork/c0", parent="parent")
    with pytest.raises(RunHasForksError, match="fork") as refused:
        await store.delete_run("parent")
    assert refused.value.forks == ["fork"]
    await store.delete_run("fork")
    await store.delete_run("parent")
    assert [run.run_id for run in await store.list_runs()] == ["run-1"]


async def test_runs_are_found_by_id_prefix_and_paged_newest_first(store):
    for n in range(7):  # pairs share created_at
        await new_run(store, f"ab{n}", first=f"ab{n}/c0", created_at=T0 + n // 2)
    await new_run(store, "zz", first="zz/c0", created_at=T0 - 1)
    assert [r.run_id for r in await store.list_runs(id_prefix="ab")] == [
        f"ab{n}" for n in reversed(range(7))
    ]
    assert [r.run_id for r in await store.list_runs(id_prefix="ab3")] == ["ab3"]
    assert await store.list_runs(id_prefix="q") == []
    assert [r.run_id for r in await store.list_runs(id_prefix="%")] == []
    pages, before = [], None
    while True:
        page = await store.list_runs(limit=3, before=before)
        if not page:
            break
        pages.append([r.run_id for r in page])
        before = (page[-1].created_at, page[-1].run_id)
    assert pages == [["ab6", "ab5", "ab4"], ["ab3", "ab2", "ab1"], ["ab0", "zz"]]


async def test_an_answer_is_kept_whole_after_it_is_applied(store):
    await new_run(store)
    long = b'"' + b"x" * 500 + b'"'
    await store.deliver("run-1", [("answer", "r1", long)])
    lease = await store.acquire("run-1", "host:1:a", 30)
    (item,) = await store.inbox("run-1")
    await store.commit_many([checkpoint("run-1", "c1", 1)], lease=lease, consumed=item.seq)
    assert await store.inbox("run-1") == []  # applied
    assert await store.answered_payload("run-1", "r1") == long  # and kept whole
    preview, _ = await store.answer_of("run-1", "r1")
    assert len(preview) < len(long)
    assert await store.answered_payload("run-1", "r2") is None
