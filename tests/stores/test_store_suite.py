"""The store conformance suite: every backend, the same results and the same errors."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store_backends import on_backends
from treadle._exceptions import (
    CheckpointNotFoundError,
    DurabilityError,
    LeaseLostError,
    RequestAlreadyAnsweredError,
    RequestError,
    RunBusyError,
    RunExistsError,
    RunNotFoundError,
)
from treadle._stores._store import CheckpointInfo, CheckpointRecord, Lease, RunRecord

T0 = 1_700_000_000.0


def run_record(
    run_id="run-1", *, workflow="wf", created_at=T0, parent=None, status="running", **timers
):
    branched_from = None if parent is None else f"{parent}/c0"
    return RunRecord(
        run_id, workflow, status, 0, None, parent, branched_from, created_at, created_at, **timers
    )


def checkpoint(
    run_id, checkpoint_id, superstep, *, created_at=T0, status="running", parent=None, wake_at=None
):
    info = CheckpointInfo(checkpoint_id, run_id, superstep, status, parent, created_at, wake_at)
    return CheckpointRecord(info, f"blob of {checkpoint_id}".encode())


async def new_run(store, run_id="run-1", *, first="c0", wake_at=None, **fields):
    record = run_record(run_id, **fields)
    first_checkpoint = checkpoint(run_id, first, 0, wake_at=wake_at)
    await store.create_run(record, b"graph of " + run_id.encode(), first_checkpoint)
    return dataclasses.replace(record, checkpoint_id=first, wake_at=wake_at)


async def commit_many(store, run_id, ids, **commit_options):
    for superstep, checkpoint_id in enumerate(ids, start=1):
        record = checkpoint(run_id, checkpoint_id, superstep, created_at=T0 + superstep)
        await store.commit(record, **commit_options)


async def kept_ids(store, run_id="run-1"):
    return [info.checkpoint_id for info in await store.list_checkpoints(run_id)]


async def test_create_run_stores_the_row_the_graph_and_the_first_checkpoint(store):
    record = await new_run(store)
    assert await store.get_run("run-1") == dataclasses.replace(record, checkpoint_id="c0")
    assert await store.get_graph("run-1") == b"graph of run-1"
    assert await store.load_checkpoint("run-1") == checkpoint("run-1", "c0", 0)
    assert await store.list_checkpoints("run-1") == [checkpoint("run-1", "c0", 0).info]


async def test_creating_a_run_twice_raises_and_keeps_the_first(store):
    await new_run(store)
    with pytest.raises(RunExistsError, match="run-1") as raised:
        await store.create_run(run_record(workflow="other"), b"other", checkpoint("run-1", "x", 0))
    assert raised.value.run_id == "run-1"
    assert (await store.get_run("run-1")).workflow == "wf"
    assert await store.get_graph("run-1") == b"graph of run-1"
    assert await kept_ids(store) == ["c0"]


async def test_create_run_refuses_a_first_checkpoint_that_does_not_fit(store):
    with pytest.raises(ValueError, match="belongs to run 'run-2'"):
        await store.create_run(run_record(), b"g", checkpoint("run-2", "c0", 0))
    named_elsewhere = dataclasses.replace(run_record(), checkpoint_id="c9")
    with pytest.raises(ValueError, match="'c9'"):
        await store.create_run(named_elsewhere, b"g", checkpoint("run-1", "c0", 0))
    await new_run(store, "run-2", first="taken")
    with pytest.raises(ValueError, match="'taken' is taken"):
        await store.create_run(run_record(), b"g", checkpoint("run-1", "taken", 0))
    assert await store.list_runs() == [await store.get_run("run-2")]


async def test_commit_makes_the_checkpoint_latest_and_moves_the_run_row(store):
    record = await new_run(store)
    await store.set_status("run-1", "failed", "boom")
    resumed = checkpoint("run-1", "c1", 4, status="awaiting_input", created_at=T0 + 9)
    await store.commit(resumed)
    expected = dataclasses.replace(
        record, status="awaiting_input", superstep=4, checkpoint_id="c1", updated_at=T0 + 9
    )
    assert await store.get_run("run-1") == expected
    assert await store.load_checkpoint("run-1") == resumed
    assert await store.load_checkpoint("run-1", "c0") == checkpoint("run-1", "c0", 0)


async def test_timers_and_deadlines_are_kept_and_each_commit_sets_wake_at(store):
    # The run row's wake_at is its first checkpoint's, whatever the record says.
    record = run_record(status="waiting", wake_at=T0 + 99, deadline_at=T0 + 60)
    first = checkpoint("run-1", "c0", 0, status="waiting", wake_at=T0 + 5)
    await store.create_run(record, b"g", first)
    row = dataclasses.replace(record, checkpoint_id="c0", wake_at=T0 + 5)
    assert (await store.get_run("run-1"), await store.list_runs()) == (row, [row])
    assert await store.load_checkpoint("run-1") == first
    for step, wake_at in enumerate([T0 + 30, None, T0 + 1], start=1):
        await store.commit(checkpoint("run-1", f"c{step}", step, status="waiting", wake_at=wake_at))
        row = dataclasses.replace(row, superstep=step, checkpoint_id=f"c{step}", wake_at=wake_at)
        assert await store.get_run("run-1") == row
    wakes = [info.wake_at for info in await store.list_checkpoints("run-1")]
    assert wakes == [T0 + 5, T0 + 30, None, T0 + 1]
    assert (await store.load_checkpoint("run-1", "c1")).info.wake_at == T0 + 30
    await store.set_status("run-1", "cancelled")  # changes neither time
    run = await store.get_run("run-1")
    assert (run.wake_at, run.deadline_at) == (T0 + 1, T0 + 60)


async def test_due_runs_are_waiting_runs_whose_timer_or_deadline_has_come(store):
    cases = [  # run id, status, wake_at, deadline_at
        ("wake", "waiting", T0 + 3, None),
        ("deadline", "awaiting_input", None, T0 + 2),
        ("deadline-first", "waiting", T0 + 5, T0 + 1),
        ("wake-first", "awaiting_input", T0 + 1, T0 + 9),  # due with the one above: a tie
        ("never", "waiting", None, None),
        *[(status, status, T0, T0) for status in ["running", "completed", "failed", "stalled"]],
    ]
    for n, (run_id, status, wake_at, deadline_at) in enumerate(cases):
        # created_at falls as runs are created: ties go by creation, not by created_at.
        fields = {"status": status, "deadline_at": deadline_at, "created_at": T0 - n}
        await new_run(store, run_id, first=run_id, wake_at=wake_at, **fields)

    async def due(now, **limit):
        return [run.run_id for run in await store.due_runs(now, **limit)]

    assert await due(T0 + 0.999) == []
    assert await due(T0 + 1) == ["deadline-first", "wake-first"]  # at now, not only before
    assert await due(T0 + 2.5) == ["deadline-first", "wake-first", "deadline"]
    assert await due(T0 + 99) == ["deadline-first", "wake-first", "deadline", "wake"]
    assert await due(T0 + 99, limit=3) == ["deadline-first", "wake-first", "deadline"]
    assert await due(T0 + 99, limit=0) == []
    assert (await store.due_runs(T0 + 99))[2] == await store.get_run("deadline")
    # A commit moves or clears a run's timer; a status change moves it in or out.
    await store.commit(checkpoint("wake", "w1", 1, status="waiting", wake_at=None))
    await store.commit(checkpoint("never", "n1", 1, status="awaiting_input", wake_at=T0 + 4))
    await store.set_status("deadline-first", "running")
    await store.set_status("running", "waiting")
    assert await due(T0 + 99) == ["running", "wake-first", "deadline", "never"]


async def test_a_refused_commit_changes_nothing(store):
    await new_run(store)
    await new_run(store, "run-2", first="theirs")
    await commit_many(store, "run-1", ["c1"])
    before = await store.get_run("run-1")
    for taken in ["c1", "theirs"]:
        with pytest.raises(ValueError, match=f"'{taken}' is taken"):
            await store.commit(checkpoint("run-1", taken, 7, status="completed"), keep_last=1)
    assert await store.get_run("run-1") == before
    assert await kept_ids(store) == ["c0", "c1"]
    assert await kept_ids(store, "run-2") == ["theirs"]


async def test_commit_many_adds_one_runs_checkpoints_in_order_all_or_none(store):
    record = await new_run(store)
    await new_run(store, "run-2", first="theirs")
    batch = [checkpoint("run-1", f"c{n}", n, created_at=T0 + n) for n in (1, 2)]
    batch.append(checkpoint("run-1", "c3", 3, status="completed", created_at=T0 + 3))
    await store.commit_many(batch)
    assert await kept_ids(store) == ["c0", "c1", "c2", "c3"]
    row = dataclasses.replace(
        record, status="completed", superstep=3, checkpoint_id="c3", updated_at=T0 + 3
    )
    assert await store.get_run("run-1") == row
    assert [await store.load_checkpoint("run-1", c.info.checkpoint_id) for c in batch] == batch
    # One id taken (by another run) refuses the whole batch.
    refused = [checkpoint("run-1", "c4", 4), checkpoint("run-1", "theirs", 5)]
    with pytest.raises(ValueError, match="'theirs'"):
        await store.commit_many(refused)
    assert (await store.get_run("run-1"), await kept_ids(store)) == (row, ["c0", "c1", "c2", "c3"])
    # Batches that cannot be one run's next checkpoints are refused before any write.
    unfit = [
        ([], "at least one"),
        ([checkpoint("run-1", "c5", 5), checkpoint("run-2", "c6", 1)], "one run"),
        ([checkpoint("run-1", "c5", 5), checkpoint("run-1", "c5", 6)], "repeat an id"),
    ]
    for checkpoints, words in unfit:
        with pytest.raises(ValueError, match=words):
            await store.commit_many(checkpoints)
    with pytest.raises(RunNotFoundError):
        await store.commit_many([checkpoint("ghost", "g1", 1)])
    assert await kept_ids(store) == ["c0", "c1", "c2", "c3"]


async def test_a_missing_run_or_checkpoint_is_named(store):
    await new_run(store)
    lookups = [
        store.commit(checkpoint("ghost", "c9", 1)),
        store.set_status("ghost", "failed"),
        store.get_run("ghost"),
        store.get_graph("ghost"),
        store.load_checkpoint("ghost"),
        store.load_checkpoint("ghost", "c0"),
        store.load_resumable("ghost"),
        store.list_checkpoints("ghost"),
        store.prune("ghost", 1),
    ]
    for lookup in lookups:
        with pytest.raises(RunNotFoundError, match="'ghost'") as raised:
            await lookup
        assert raised.value.run_id == "ghost"
    assert await kept_ids(store) == ["c0"]
    await new_run(store, "run-2", first="theirs")
    for missing in ["nope", "theirs"]:
        with pytest.raises(CheckpointNotFoundError, match=f"'run-1' has no checkpoint '{missing}'"):
            await store.load_checkpoint("run-1", missing)


async def test_load_resumable_reads_what_the_three_reads_would_in_one(store):
    await new_run(store)
    await new_run(store, "run-2", first="theirs")
    await commit_many(store, "run-1", ["c1", "c2"])
    for wanted in [None, "c0", "c2"]:
        row, graph, record = await store.load_resumable("run-1", wanted)
        assert row == await store.get_run("run-1")
        assert graph == await store.get_graph("run-1") == b"graph of run-1"
        assert record == await store.load_checkpoint("run-1", wanted)
    for missing in ["nope", "theirs"]:  # a checkpoint of no run, of another run
        _, _, record = await store.load_resumable("run-1", missing)
        assert record is None


async def test_checkpoints_are_listed_by_superstep_then_time_then_commit(store):
    await new_run(store)
    await commit_many(store, "run-1", ["c1", "c2", "c3"])
    # Resumed from c1: supersteps repeat, one at the very time of the original.
    await store.commit(checkpoint("run-1", "d2", 2, created_at=T0 + 10, parent="c1"))
    await store.commit(checkpoint("run-1", "d3", 3, created_at=T0 + 3, parent="d2"))
    assert await kept_ids(store) == ["c0", "c1", "c2", "d2", "c3", "d3"]
    assert (await store.load_checkpoint("run-1")).info.checkpoint_id == "d3"
    assert [info.parent_checkpoint_id for info in await store.list_checkpoints("run-1")][3] == "c1"


async def test_runs_are_listed_newest_first_with_every_filter(store):
    assert await store.list_runs() == []
    await new_run(store, "old", first="o", created_at=T0)
    await new_run(store, "tie-a", first="a", created_at=T0 + 5, workflow="other")
    await new_run(store, "tie-b", first="b", created_at=T0 + 5, parent="old")
    await new_run(store, "new", first="n", created_at=T0 + 9, parent="old")
    await store.set_status("new", "completed")

    async def ids(**filters):
        return [run.run_id for run in await store.list_runs(**filters)]

    assert await ids() == ["new", "tie-b", "tie-a", "old"]
    assert await ids(status="running") == ["tie-b", "tie-a", "old"]
    assert await ids(workflow="other") == ["tie-a"]
    assert await ids(parent_run_id="old") == ["new", "tie-b"]
    assert await ids(parent_run_id="old", status="running") == ["tie-b"]
    assert await ids(status="running", workflow="wf", parent_run_id="old") == ["tie-b"]
    assert await ids(limit=2) == ["new", "tie-b"]
    assert await ids(limit=0) == []
    assert await ids(status="cancelled") == []
    assert (await store.list_runs())[0] == await store.get_run("new")


async def test_set_status_changes_status_error_and_time_only(store):
    record = await new_run(store)
    before = time.time()
    await store.set_status("run-1", "failed", "ValueError: boom")
    after = time.time()
    failed = await store.get_run("run-1")
    assert before <= failed.updated_at <= after
    expected = dataclasses.replace(record, checkpoint_id="c0", status="failed")
    assert failed == dataclasses.replace(
        expected, error="ValueError: boom", updated_at=failed.updated_at
    )
    await store.set_status("run-1", "cancelled")
    assert (await store.get_run("run-1")).error is None
    assert await kept_ids(store) == ["c0"]


async def test_retention_keeps_the_most_recent_commits_and_always_the_latest(store):
    await new_run(store)
    await commit_many(store, "run-1", ["c1", "c2", "c3", "c4", "c5"], keep_last=4)
    assert await kept_ids(store) == ["c2", "c3", "c4", "c5"]
    assert await store.prune("run-1", 3) == 1
    assert await kept_ids(store) == ["c3", "c4", "c5"]
    assert await store.prune("run-1", 3) == 0
    with pytest.raises(CheckpointNotFoundError):
        await store.load_checkpoint("run-1", "c2")
    # Resumed from c3: the latest has the smallest superstep but the last commit.
    await store.commit(checkpoint("run-1", "d4", 1, created_at=T0, parent="c3"))
    assert await store.prune("run-1", 1) == 3
    assert await kept_ids(store) == ["d4"]
    assert (await store.load_checkpoint("run-1")).info.checkpoint_id == "d4"


async def test_store_wide_keep_last_applies_to_each_run_unless_a_commit_overrides_it(make_store):
    store = make_store(keep_last=2)
    await new_run(store)
    await new_run(store, "run-2", first="other")
    await commit_many(store, "run-1", ["c1", "c2", "c3"])
    assert await kept_ids(store) == ["c2", "c3"]
    assert await kept_ids(store, "run-2") == ["other"]
    await commit_many(store, "run-1", ["d1", "d2"], keep_last=3)
    assert await kept_ids(store) == ["d1", "d2", "c3"]


async def test_retention_below_one_and_negative_limits_are_refused(store, make_store):
    await new_run(store)
    with pytest.raises(ValueError, match="keep_last must be at least 1"):
        make_store(keep_last=0)
    with pytest.raises(ValueError, match="keep_last must be at least 1"):
        await store.commit(checkpoint("run-1", "c1", 1), keep_last=0)
    with pytest.raises(ValueError, match="keep_last must be at least 1"):
        await store.prune("run-1", 0)
    for listing in [store.list_runs(limit=-1), store.due_runs(T0, limit=-1)]:
        with pytest.raises(ValueError, match="limit must be 0 or more"):
            await listing
    assert await kept_ids(store) == ["c0"]


@pytest.mark.parametrize(
    "blob",
    [b"", b"\x00", bytes(range(256)) * 3, b"\xff\xfe not utf-8 \x80", os.urandom(1 << 20)],
    ids=["empty", "nul", "every-byte", "not-utf8", "1MiB"],
)
async def test_graphs_and_blobs_come_back_byte_identical(store, blob):
    first = CheckpointRecord(checkpoint("run-1", "c0", 0).info, blob)
    await store.create_run(run_record(), blob, first)
    later = CheckpointRecord(checkpoint("run-1", "c1", 1).info, blob[::-1])
    await store.commit(later)
    for got, want in [
        (await store.get_graph("run-1"), blob),
        ((await store.load_checkpoint("run-1", "c0")).blob, blob),
        ((await store.load_checkpoint("run-1")).blob, blob[::-1]),
    ]:
        assert type(got) is bytes
        assert got == want


async def test_concurrent_commits_to_many_runs_all_land(store):
    run_ids = [f"run-{n}" for n in range(20)]
    for run_id in run_ids:
        await new_run(store, run_id, first=f"{run_id}/c0")
    async with asyncio.TaskGroup() as group:
        for run_id in run_ids:
            ids = [f"{run_id}/c{n}" for n in range(1, 6)]
            group.create_task(commit_many(store, run_id, ids))
    for run_id in run_ids:
        assert await kept_ids(store, run_id) == [f"{run_id}/c{n}" for n in range(6)]
        assert (await store.get_run(run_id)).checkpoint_id == f"{run_id}/c5"


async def test_a_closed_store_refuses_every_operation(store):
    await new_run(store)
    await store.close()
    await store.close()  # closing twice is harmless
    operations = [
        store.create_run(run_record("run-2"), b"g", checkpoint("run-2", "x", 0)),
        store.commit(checkpoint("run-1", "c1", 1)),
        store.set_status("run-1", "failed"),
        store.get_run("run-1"),
        store.get_graph("run-1"),
        store.load_checkpoint("run-1"),
        store.list_checkpoints("run-1"),
        store.list_runs(),
        store.prune("run-1", 1),
        store.due_runs(T0),
    ]
    for operation in operations:
        with pytest.raises(RuntimeError, match="closed"):
            await operation


def test_one_store_serves_several_event_loops_and_threads(make_store):
    store = make_store()
    asyncio.run(new_run(store))
    asyncio.run(commit_many(store, "run-1", ["c1"]))
    thread = threading.Thread(target=asyncio.run, args=[store.commit(checkpoint("run-1", "c2", 2))])
    thread.start()
    thread.join()
    assert asyncio.run(kept_ids(store)) == ["c0", "c1", "c2"]


# --- one owner per run: leases, fencing, the inbox, claims ---------------------


async def expired_lease(store, run_id, owner):
    """A lease ``owner`` took on ``run_id`` and let run out (as a dead process would)."""
    lease = await store.acquire(run_id, owner, 0.01)
    await asyncio.sleep(0.05)
    return lease


async def test_acquire_takes_a_free_run_and_refuses_others_naming_the_owner(store):
    await new_run(store)
    before = time.time()
    lease = await store.acquire("run-1", "host:1:a", 30)
    assert (lease.run_id, lease.owner) == ("run-1", "host:1:a")
    assert before + 30 <= lease.until <= time.time() + 30
    row = await store.get_run("run-1")
    assert (row.owner, row.lease_until, row.parked) == ("host:1:a", lease.until, None)
    assert row.owned(time.time())
    assert not row.orphaned(time.time())
    with pytest.raises(RunBusyError, match="host:1:a") as busy:
        await store.acquire("run-1", "host:2:b", 30)
    assert (busy.value.run_id, busy.value.owner, busy.value.lease_until) == (
        "run-1",
        "host:1:a",
        lease.until,
    )
    assert (await store.get_run("run-1")).owner == "host:1:a"  # the refusal changed nothing
    with pytest.raises(RunNotFoundError, match="'ghost'"):
        await store.acquire("ghost", "host:1:a", 30)


async def test_a_lease_taken_over_after_it_ran_out_fences_the_old_owner_out(store):
    await new_run(store)
    old = await expired_lease(store, "run-1", "dead")
    assert (await store.get_run("run-1")).orphaned(time.time())
    new = await store.acquire("run-1", "alive", 30)
    assert new.epoch > old.epoch
    # Everything the presumed-dead owner tries now changes nothing.
    with pytest.raises(LeaseLostError, match="'run-1'"):
        await store.commit_many([checkpoint("run-1", "c1", 1, status="completed")], lease=old)
    with pytest.raises(LeaseLostError):
        await store.set_status("run-1", "failed", "late", lease=old)
    with pytest.raises(LeaseLostError):
        await store.renew(old, 30)
    with pytest.raises(LeaseLostError):
        await store.park(old, "late")
    assert await store.release(old) is False
    row = await store.get_run("run-1")
    assert (row.status, row.checkpoint_id, row.owner, row.lease_until, row.parked) == (
        "running",
        "c0",
        "alive",
        new.until,
        None,
    )
    assert await kept_ids(store) == ["c0"]
    # The new owner's writes go through; a fenced write to no run names the run.
    await store.commit_many([checkpoint("run-1", "c1", 1)], lease=new)
    assert await kept_ids(store) == ["c0", "c1"]
    with pytest.raises(RunNotFoundError):
        await store.commit_many([checkpoint("ghost", "g1", 1)], lease=new)


async def test_renew_extends_a_current_lease_from_now(store):
    await new_run(store)
    lease = await store.acquire("run-1", "a", 5)
    before = time.time()
    renewed = await store.renew(lease, 60)
    assert (renewed.run_id, renewed.owner, renewed.epoch) == (lease.run_id, "a", lease.epoch)
    assert before + 60 <= renewed.until <= time.time() + 60
    assert (await store.get_run("run-1")).lease_until == renewed.until
    await store.commit_many([checkpoint("run-1", "c1", 1)], lease=renewed)
    assert (await store.get_run("run-1")).checkpoint_id == "c1"


async def test_a_released_run_is_free_for_another_owner_at_once(store):
    await new_run(store)
    first = await store.acquire("run-1", "a", 30)
    assert await store.release(first) is True
    row = await store.get_run("run-1")
    assert (row.owner, row.lease_until) == (None, None)
    second = await store.acquire("run-1", "b", 30)
    assert second.epoch > first.epoch
    assert await store.release(first) is False  # given up already: nothing changes
    assert (await store.get_run("run-1")).owner == "b"


async def test_create_run_with_a_lease_creates_the_run_owned(store):
    lease = Lease("run-1", "host:1:a", 1, time.time() + 30)
    record = run_record()
    await store.create_run(record, b"g", checkpoint("run-1", "c0", 0), lease=lease)
    owned = dataclasses.replace(
        record, checkpoint_id="c0", owner="host:1:a", lease_until=lease.until
    )
    assert await store.get_run("run-1") == owned
    with pytest.raises(RunBusyError, match="host:1:a"):
        await store.acquire("run-1", "b", 30)
    await store.commit_many([checkpoint("run-1", "c1", 1)], lease=lease)  # its first commit
    assert (await store.get_run("run-1")).checkpoint_id == "c1"


async def test_a_last_commit_or_status_with_release_gives_the_lease_up_with_it(store):
    await new_run(store)
    await new_run(store, "run-2", first="d0")
    lease = await store.acquire("run-1", "a", 30)
    batch = [checkpoint("run-1", "c1", 1), checkpoint("run-1", "c2", 2, status="waiting")]
    await store.commit_many(batch, lease=lease, release=True)
    row = await store.get_run("run-1")
    assert (row.status, row.checkpoint_id, row.owner, row.lease_until) == (
        "waiting",
        "c2",
        None,
        None,
    )
    assert await store.release(lease) is False
    other = await store.acquire("run-2", "a", 30)
    await store.set_status("run-2", "failed", "boom", lease=other, release=True)
    row = await store.get_run("run-2")
    assert (row.status, row.error, row.owner, row.lease_until) == ("failed", "boom", None, None)
    assert (await store.acquire("run-1", "b", 30)).owner == "b"


async def test_consumed_marks_inbox_items_applied_with_the_commit_and_keeps_answers(store):
    await new_run(store)
    await store.deliver("run-1", [("message", "exec", b'"m1"'), ("answer", "req-1", b'"yes"')])
    message, answer = await store.inbox("run-1")
    assert (message.kind, message.target, message.payload) == ("message", "exec", b'"m1"')
    assert (answer.kind, answer.target, answer.payload) == ("answer", "req-1", b'"yes"')
    assert message.seq < answer.seq
    lease = await store.acquire("run-1", "a", 30)
    await store.commit_many([checkpoint("run-1", "c1", 1)], lease=lease, consumed=message.seq)
    assert await store.inbox("run-1") == [answer]
    await store.commit_many([checkpoint("run-1", "c2", 2)], lease=lease, consumed=answer.seq)
    assert await store.inbox("run-1") == []
    # An applied answer still decides its request.
    with pytest.raises(RequestAlreadyAnsweredError, match="req-1"):
        await store.deliver("run-1", [("answer", "req-1", b'"no"')])
    kept = await store.answer_of("run-1", "req-1")
    assert kept is not None
    assert kept[0] == '"yes"'
    assert await store.answer_of("run-1", "req-2") is None


async def test_deliver_is_all_or_none_and_the_first_answer_to_a_request_wins(store):
    await new_run(store, status="awaiting_input")
    before = time.time()
    await store.deliver("run-1", [("answer", "r1", b'"first"')])
    after = time.time()
    (first,) = await store.inbox("run-1")
    late = [("message", None, b'"m"'), ("answer", "r2", b'"ok"'), ("answer", "r1", b'"second"')]
    with pytest.raises(RequestAlreadyAnsweredError, match="'r1'") as refused:
        await store.deliver("run-1", late)
    error = refused.value
    assert (error.run_id, error.request_id, error.answer) == ("run-1", "r1", '"first"')
    assert before <= error.answered_at <= after
    assert '"first"' in str(error)
    assert await store.inbox("run-1") == [first]  # nothing of the refused batch
    # One batch answering a request twice is refused whole too.
    with pytest.raises(RequestAlreadyAnsweredError, match="'r3'"):
        await store.deliver("run-1", [("answer", "r3", b"1"), ("answer", "r3", b"2")])
    assert await store.inbox("run-1") == [first]
    await store.deliver("run-1", [("answer", "r2", b'"ok"')])  # r2 was never answered
    assert [item.target for item in await store.inbox("run-1")] == ["r1", "r2"]
    with pytest.raises(RunNotFoundError, match="'ghost'"):
        await store.deliver("ghost", [("message", None, b"1")])


@pytest.mark.parametrize(
    ("item", "error", "named"),
    [
        (("message:bogus", None, b'"m"'), ValueError, "kind 'message:bogus'"),
        (("message:reject", None, b'"m"'), ValueError, "under reject is of kind 'message'"),
        (("message:debounce:soon", None, b'"m"'), ValueError, "debounce needs a window"),
        (("start", None, b'"m"'), ValueError, "kind 'start' is not"),
        (("answer", None, b"1"), ValueError, "names the request it answers"),
        (("message", 7, b'"m"'), TypeError, "a target is text"),
        (("message", None, "m"), TypeError, "a payload is bytes"),
    ],
)
async def test_a_delivery_no_owner_could_apply_is_refused_whole_naming_the_item(
    store, item, error, named
):
    # Store.deliver is a client's own door: what it delivers unchecked is checked for
    # what every owner needs, before anything is written (a policy nobody knows used to
    # fail the run where its owner met it).
    await new_run(store)
    good = ("message", None, b'"fine"')
    with pytest.raises(error, match="item 1") as raised:
        await store.deliver("run-1", [good, item])
    assert named in str(raised.value)
    assert await store.inbox("run-1") == []  # all or none
    await store.deliver("run-1", [good, ("message:debounce:2.5", None, b'"m"')])
    assert [i.kind for i in await store.inbox("run-1")] == ["message", "message:debounce:2.5"]


async def test_an_owner_ending_a_run_refuses_what_its_inbox_holds_unapplied(store):
    await new_run(store)
    await store.deliver("run-1", [("message", None, b'"m"'), ("answer", "r1", b'"a"')])
    lease = await store.acquire("run-1", "owner", 30)
    await store.set_status("run-1", "failed", "boom", lease=lease, release=True)
    # The message is refused; the answer is marked applied (no owner will take it: the run
    # ended), and stays, deciding its request for later callers.
    assert await store.inbox("run-1") == []
    assert await store.answer_of("run-1", "r1") is not None
    (refused,) = [e for e in await store.read_audit("run-1") if e.action == "inbox_refused"]
    assert (refused.detail["kind"], refused.detail["target"]) == ("message", None)
    assert refused.detail["reason"] == "the run failed before taking it"
    assert (refused.actor["name"], refused.door) == ("owner", "worker")
    # Without a lease (a store's own caller), the status changes and nothing is refused.
    await new_run(store, "run-2", first="d0")
    await store.deliver("run-2", [("message", None, b'"m"')])
    await store.set_status("run-2", "failed", "boom")
    assert len(await store.inbox("run-2")) == 1


async def test_nothing_can_be_delivered_to_an_ended_run(store):
    await new_run(store)
    await new_run(store, "run-2", first="d0")
    await store.set_status("run-1", "completed")
    await store.cancel("run-2")
    for run_id, status in [("run-1", "completed"), ("run-2", "cancelled")]:
        with pytest.raises(RequestError, match=f"has ended \\({status}\\)") as refused:
            await store.deliver(run_id, [("answer", "r1", b'"late"')])
        assert not isinstance(refused.value, RequestAlreadyAnsweredError)
        assert await store.inbox(run_id) == []
        assert await store.answer_of(run_id, "r1") is None


async def test_cancel_ends_the_run_wherever_it_is_and_fences_out_its_owner(store):
    await new_run(store)
    lease = await store.acquire("run-1", "a", 30)
    await store.deliver("run-1", [("message", None, b'"m"')])
    await store.cancel("run-1")
    row = await store.get_run("run-1")
    assert (row.status, row.owner, row.lease_until, row.checkpoint_id) == (
        "cancelled",
        None,
        None,
        "c0",
    )
    assert await store.inbox("run-1") == []  # nobody will apply it now
    with pytest.raises(LeaseLostError):
        await store.commit_many([checkpoint("run-1", "c1", 1, status="completed")], lease=lease)
    with pytest.raises(LeaseLostError):
        await store.set_status("run-1", "completed", lease=lease)
    assert (await store.get_run("run-1")).status == "cancelled"
    assert await kept_ids(store) == ["c0"]
    with pytest.raises(RequestError, match="has ended"):
        await store.cancel("run-1")
    with pytest.raises(RunNotFoundError, match="'ghost'"):
        await store.cancel("ghost")


async def test_a_parked_run_is_not_claimed_until_someone_acquires_it(store):
    await new_run(store, status="waiting", wake_at=T0)  # due: a claim would take it
    lease = await store.acquire("run-1", "service", 30)
    await store.park(lease, "GraphChangedError: step 'x' is gone")
    row = await store.get_run("run-1")
    assert (row.parked, row.owner, row.lease_until) == (
        "GraphChangedError: step 'x' is gone",
        None,
        None,
    )
    assert await store.claim("other", 30, T0 + 99, limit=10) == []
    taken = await store.acquire("run-1", "resumer", 30)  # a resume takes it up
    assert (await store.get_run("run-1")).parked is None
    await store.release(taken)
    ((claimed, workflow, _, version),) = await store.claim("other", 30, T0 + 99, limit=10)
    assert (claimed.run_id, claimed.owner, workflow, version) == ("run-1", "other", "wf", 1)


async def test_claim_takes_due_ready_and_orphaned_runs_never_a_currently_owned_one(store):
    await new_run(store, "due", first="due/0", status="waiting", wake_at=T0, workflow="timed")
    await new_run(store, "not-yet", first="n/0", status="waiting", wake_at=T0 + 100)
    await new_run(store, "ready", first="r/0", status="awaiting_input")
    await store.deliver("ready", [("answer", "q", b'"a"')])
    await new_run(store, "idle", first="i/0", status="awaiting_input")
    await new_run(store, "orphan", first="o/0")
    dead = await expired_lease(store, "orphan", "dead")
    await new_run(store, "done", first="d/0", status="completed")
    await new_run(store, "queued", first="q/0", status="pending")  # for workers only
    await store.deliver("queued", [("message", None, b'"go"')])  # ready, but pending
    for run_id, status, wake_at in [("owned", "running", None), ("owned-due", "waiting", T0)]:
        await new_run(store, run_id, first=f"{run_id}/0", status=status, wake_at=wake_at)
        await store.acquire(run_id, "alive", 30)
    await store.deliver("owned", [("message", None, b'"m"')])  # ready, but owned
    before = time.time()
    first = await store.claim("service", 30, T0 + 1, limit=2)
    rest = await store.claim("service", 30, T0 + 1, limit=10)
    assert len(first) == 2
    claimed = {lease.run_id: (lease, workflow) for lease, workflow, _, _ in first + rest}
    # Only a run that was delivered to says so: the service reads no other inbox.
    assert {c.lease.run_id: c.delivered for c in first + rest} == {
        "due": False,
        "orphan": False,
        "ready": True,
    }
    assert sorted(claimed) == ["due", "orphan", "ready"]
    assert {run_id: workflow for run_id, (_, workflow) in claimed.items()} == {
        "due": "timed",
        "orphan": "wf",
        "ready": "wf",
    }
    assert claimed["orphan"][0].epoch > dead.epoch
    for run_id, (lease, _) in claimed.items():
        assert lease.owner == "service"
        assert before + 30 <= lease.until <= time.time() + 30
        row = await store.get_run(run_id)
        assert (row.owner, row.lease_until) == ("service", lease.until)
    for run_id in ["owned", "owned-due"]:
        assert (await store.get_run(run_id)).owner == "alive"
    assert await store.claim("service", 30, T0 + 1, limit=10) == []  # all owned now
    assert await store.claim("service", 30, T0 + 1, limit=0) == []


async def test_concurrent_acquires_of_one_run_let_exactly_one_owner_win(store):
    await new_run(store)
    outcomes = await asyncio.gather(
        *(store.acquire("run-1", f"owner-{n}", 30) for n in range(8)), return_exceptions=True
    )
    won = [outcome for outcome in outcomes if isinstance(outcome, Lease)]
    busy = [outcome for outcome in outcomes if isinstance(outcome, RunBusyError)]
    assert (len(won), len(busy)) == (1, 7), outcomes
    (lease,) = won
    assert {error.owner for error in busy} == {lease.owner}
    assert (await store.get_run("run-1")).owner == lease.owner


async def test_concurrent_claims_never_take_one_run_twice(store):
    for n in range(30):
        await new_run(store, f"run-{n}", first=f"c{n}", status="waiting", wake_at=T0)
    batches = await asyncio.gather(
        *(store.claim(f"service-{n}", 30, T0 + 1, limit=10) for n in range(6))
    )
    claimed = [lease.run_id for batch in batches for lease, _, _, _ in batch]
    assert len(claimed) == len(set(claimed)) == 30
    for batch in batches:
        for lease, _, _, _ in batch:
            assert (await store.get_run(lease.run_id)).owner == lease.owner


# --- every store against a model, over random sequences of operations ---------


run_ids = st.sampled_from(["a", "b", "c"])
checkpoint_ids = st.sampled_from([f"k{n}" for n in range(12)])
times = st.sampled_from([T0, T0 + 1, T0 + 2])
timers = st.none() | times
statuses = st.sampled_from(["running", "completed", "failed", "waiting", "awaiting_input"])
workflows = st.sampled_from(["w1", "w2"])
keep_lasts = st.none() | st.integers(1, 3)
limits = st.none() | st.integers(0, 3)


def op(name, *args, **kwargs):
    return st.tuples(st.just(name), st.tuples(*args), st.fixed_dictionaries(kwargs))


@st.composite
def checkpoints(draw, run_id=run_ids):
    fields = draw(st.integers(0, 3)), draw(statuses), None, draw(times), draw(timers)
    info = CheckpointInfo(draw(checkpoint_ids), draw(run_id), *fields)
    return CheckpointRecord(info, draw(st.binary(max_size=8)))


@st.composite
def creations(draw):
    run_id = draw(run_ids)
    fields = {"workflow": draw(workflows), "created_at": draw(times), "status": draw(statuses)}
    timed = {"wake_at": draw(timers), "deadline_at": draw(timers)}
    record = run_record(run_id, parent=draw(st.none() | run_ids), **fields, **timed)
    first = draw(checkpoints(run_id=st.just(run_id)))
    return "create_run", (record, draw(st.binary(max_size=8)), first), {}


@st.composite
def batches(draw):
    """Mostly one run's next checkpoints; now and then none, or another run's among them."""
    run_id = draw(run_ids)
    batch = draw(st.lists(checkpoints(run_id=st.just(run_id)), max_size=3))
    if batch and draw(st.integers(0, 4)) == 0:
        batch.append(draw(checkpoints()))
    return "commit_many", (batch,), {"keep_last": draw(keep_lasts)}


commits = op("commit", checkpoints(), keep_last=keep_lasts)
operations = st.one_of(
    creations(),
    *[commits] * 3,  # histories must grow past keep_last
    batches(),
    op("set_status", run_ids, statuses, st.none() | st.just("boom")),
    op("get_run", run_ids),
    op("get_graph", run_ids),
    op("load_checkpoint", run_ids, st.none() | checkpoint_ids),
    op("list_checkpoints", run_ids),
    op(
        "list_runs",
        status=st.none() | statuses,
        workflow=st.none() | workflows,
        parent_run_id=st.none() | run_ids,
        limit=limits,
    ),
    op("prune", run_ids, st.integers(1, 3)),
    op("due_runs", st.sampled_from([T0 - 1, T0, T0 + 0.5, T0 + 1, T0 + 2]), limit=limits),
)


async def outcome(call):
    """What a call returned, or the type and ids of what it raised."""
    try:
        return "returned", await call
    except (DurabilityError, ValueError) as error:
        ids = getattr(error, "run_id", None), getattr(error, "checkpoint_id", None)
        return "raised", type(error), ids


async def returned(method, *args, **kwargs):
    return method(*args, **kwargs)


async def awaited(method, *args, **kwargs):
    # Inside the coroutine, so that what a store refuses at call time is an outcome too.
    return await method(*args, **kwargs)


def store_model_property(max_examples: int):
    """The property at a budget of examples (hypothesis fixes the budget as it decorates)."""

    @settings(
        max_examples=max_examples,
        deadline=None,
        # make_store is a factory: each example builds and closes its own store.
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(
        keep_last=keep_lasts,
        first_steps=st.lists(creations(), min_size=1, max_size=3),
        steps=st.lists(operations, min_size=10, max_size=40),
    )
    async def check(make_store, make_model, keep_last, first_steps, steps):
        store, model = make_store(keep_last=keep_last), make_model(keep_last)
        try:
            for name, args, kwargs in first_steps + steps:
                got = await outcome(awaited(getattr(store, name), *args, **kwargs))
                expected = await outcome(returned(getattr(model, name), *args, **kwargs))
                assert got == expected, (name, args, kwargs)
                if name == "set_status" and got[0] == "returned":
                    # Stamped by the wall clock; test_set_status_changes_status_error_and_time_only
                    # checks the value.
                    stamped = (await store.get_run(args[0])).updated_at
                    model.runs[args[0]] = dataclasses.replace(
                        model.runs[args[0]], updated_at=stamped
                    )
            assert await store.list_runs() == model.list_runs()
            assert await store.due_runs(T0 + 2) == model.due_runs(T0 + 2)
            for run_id in model.runs:
                infos = model.list_checkpoints(run_id)
                assert await store.list_checkpoints(run_id) == infos
                for info in infos:
                    assert await store.load_checkpoint(run_id, info.checkpoint_id) == (
                        model.load_checkpoint(run_id, info.checkpoint_id)
                    )
        finally:
            await store.close()

    return check


# 60 examples on memory and SQLite. PostgreSQL pays a round trip per call and a schema
# per example (10 s for 60 on a quiet machine): 20 in the default suite, 60 under soak.
test_every_store_behaves_like_the_model = on_backends("memory", "sqlite")(store_model_property(60))
test_every_store_behaves_like_the_model_on_postgres = on_backends("postgres")(
    store_model_property(20)
)
test_every_store_behaves_like_the_model_on_postgres_at_full_budget = pytest.mark.soak(
    on_backends("postgres")(store_model_property(60))
)
