"""The store conformance suite's part on pausing: every backend, the same decisions and errors.

A pause is decided by the store in one transaction: a run nobody advances
is paused at once; a run whose owner holds a current lease is asked to, and
the owner's next commit (or release) honours that in its own transaction.
``unpause`` puts the run back where its latest checkpoint says, or
withdraws a pause not yet honoured.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from treadle._exceptions import (
    LeaseLostError,
    RequestError,
    RunBusyError,
    RunNotFoundError,
    RunPausedError,
)
from treadle._stores._store import CheckpointInfo, CheckpointRecord, RunRecord
from treadle._values._actors import Actor, Role

T0 = 1_700_000_000.0


def checkpoint(run_id, checkpoint_id, superstep, *, status="running", wake_at=None):
    info = CheckpointInfo(checkpoint_id, run_id, superstep, status, None, T0 + superstep, wake_at)
    return CheckpointRecord(info, f"blob of {checkpoint_id}".encode())


async def new_run(store, run_id="run-1", *, status="running", wake_at=None):
    record = RunRecord(run_id, "wf", status, 0, None, None, None, T0, T0)
    first = checkpoint(run_id, f"{run_id}/0", 0, status=status, wake_at=wake_at)
    await store.create_run(record, b"graph", first)


async def expired_lease(store, run_id, owner):
    """A lease ``owner`` took on ``run_id`` and let run out (as a dead process would)."""
    lease = await store.acquire(run_id, owner, 0.01)
    await asyncio.sleep(0.05)
    return lease


async def claimed_ids(store, now=T0 + 99):
    return sorted(claimed.lease.run_id for claimed in await store.claim("svc", 30, now, limit=50))


async def test_a_run_nobody_advances_is_paused_at_once_and_nothing_takes_it_up(store):
    await new_run(store, "orphan")
    dead = await expired_lease(store, "orphan", "dead")
    await new_run(store, "due", status="waiting", wake_at=T0)
    await new_run(store, "asked", status="awaiting_input")
    for run_id in ("orphan", "due", "asked"):
        assert await store.pause(run_id) == "paused"
        row = await store.get_run(run_id)
        assert (row.status, row.owner, row.lease_until, row.pause_requested) == (
            "paused",
            None,
            None,
            None,
        )
        assert row.checkpoint_id == f"{run_id}/0"  # it stops at its latest checkpoint
        assert await store.pause(run_id) == "paused"  # again: nothing changes
    # The owner presumed dead commits nothing more: the pause moved the epoch on.
    with pytest.raises(LeaseLostError):
        await store.commit_many([checkpoint("orphan", "late", 1)], lease=dead)
    # An answer is kept for later; nothing claims, acquires or finds a paused run due.
    await store.deliver("asked", [("answer", "q", b'"yes"')])
    assert [item.target for item in await store.inbox("asked")] == ["q"]
    assert await claimed_ids(store) == []
    assert await store.due_runs(T0 + 99) == []
    with pytest.raises(RunPausedError, match="'due' is paused"):
        await store.acquire("due", "resumer", 30)
    assert (await store.get_run("due")).owner is None
    assert [row.run_id for row in await store.list_runs(status="paused")] == [
        "asked",
        "due",
        "orphan",
    ]


async def test_unpause_puts_a_run_back_where_its_latest_checkpoint_says_and_it_is_taken_up(
    store,
):
    await new_run(store, "orphan")
    await new_run(store, "due", status="waiting", wake_at=T0)
    await new_run(store, "asked", status="awaiting_input")
    await new_run(store, "idle", status="awaiting_input")
    for run_id in ("orphan", "due", "asked", "idle"):
        await store.pause(run_id)
    await store.deliver("asked", [("answer", "q", b'"yes"')])
    for run_id in ("orphan", "due", "asked", "idle"):
        assert await store.unpause(run_id) == (False, None)
        row = await store.get_run(run_id)
        assert (row.status, row.pause_requested) == (
            {"orphan": "running", "due": "waiting"}.get(run_id, "awaiting_input"),
            None,
        )
    # Orphaned, due and delivered-to: taken up at once; the idle one rests as before.
    claimed = {c.lease.run_id: c.delivered for c in await store.claim("svc", 30, T0, limit=9)}
    assert claimed == {"orphan": False, "due": False, "asked": True}


async def test_unpause_can_lease_the_run_to_its_caller_so_nobody_takes_it_first(store):
    await new_run(store)
    await store.pause("run-1")
    before = time.time()
    unpaused = await store.unpause("run-1", owner="resumer", duration=30)
    assert not unpaused.withdrawn
    lease = unpaused.lease
    assert lease is not None
    assert (lease.run_id, lease.owner) == ("run-1", "resumer")
    assert before + 30 <= lease.until <= time.time() + 30
    row = await store.get_run("run-1")
    assert (row.status, row.owner, row.lease_until) == ("running", "resumer", lease.until)
    assert await claimed_ids(store) == []  # owned: not an orphan
    assert await store.commit_many([checkpoint("run-1", "c1", 1)], lease=lease) is False
    assert (await store.get_run("run-1")).checkpoint_id == "c1"


async def test_an_owned_run_is_asked_to_pause_and_its_next_commit_pauses_it(store):
    await new_run(store)
    lease = await store.acquire("run-1", "owner", 30)
    assert await store.pause("run-1") == "requested"
    asked = await store.get_run("run-1")
    assert (asked.status, asked.owner) == ("running", "owner")
    assert asked.pause_requested is not None
    assert await store.pause("run-1") == "requested"  # asked twice: still asked once
    assert (await store.get_run("run-1")).pause_requested == asked.pause_requested
    # The owner's next commit is its last: committed, paused, the lease given up.
    batch = [checkpoint("run-1", "c1", 1), checkpoint("run-1", "c2", 2)]
    assert await store.commit_many(batch, lease=lease) is True
    row = await store.get_run("run-1")
    assert (row.status, row.superstep, row.checkpoint_id, row.owner, row.pause_requested) == (
        "paused",
        2,
        "c2",
        None,
        None,
    )
    assert [c.checkpoint_id for c in await store.list_checkpoints("run-1")] == [
        "run-1/0",
        "c1",
        "c2",
    ]
    with pytest.raises(LeaseLostError):
        await store.commit_many([checkpoint("run-1", "c3", 3)], lease=lease)
    assert await store.release(lease) is False
    assert (await store.get_run("run-1")).checkpoint_id == "c2"


async def test_a_commit_that_ends_the_run_ends_it_whatever_was_asked(store):
    await new_run(store)
    lease = await store.acquire("run-1", "owner", 30)
    assert await store.pause("run-1") == "requested"
    done = [checkpoint("run-1", "c1", 1, status="completed")]
    assert await store.commit_many(done, lease=lease, release=True) is False
    row = await store.get_run("run-1")
    assert (row.status, row.owner, row.pause_requested) == ("completed", None, None)
    with pytest.raises(
        RequestError, match=r"'run-1' has ended \(completed\); there is nothing to pause"
    ):
        await store.pause("run-1")
    with pytest.raises(RequestError, match=r"has ended \(completed\); there is nothing to unpause"):
        await store.unpause("run-1")


async def test_an_owner_letting_go_without_a_commit_pauses_the_run_unless_it_ends(store):
    await new_run(store)
    await new_run(store, "run-2", status="awaiting_input")
    first = await store.acquire("run-1", "owner", 30)
    second = await store.acquire("run-2", "owner", 30)
    for run_id in ("run-1", "run-2"):
        assert await store.pause(run_id) == "requested"
    assert await store.release(second) is True  # nothing to apply: it rested, now paused
    assert ((await store.get_run("run-2")).status, (await store.get_run("run-2")).owner) == (
        "paused",
        None,
    )
    await store.set_status("run-1", "failed", "boom", lease=first, release=True)
    row = await store.get_run("run-1")
    assert (row.status, row.error, row.owner, row.pause_requested) == ("failed", "boom", None, None)


async def test_unpausing_a_run_not_yet_paused_withdraws_the_pause_asked(store):
    await new_run(store)
    lease = await store.acquire("run-1", "owner", 30)
    await store.pause("run-1")
    # To be leased, it must be free: refused while the owner holds it, and nothing changes.
    with pytest.raises(RunBusyError, match="owner"):
        await store.unpause("run-1", owner="other", duration=30)
    assert (await store.get_run("run-1")).pause_requested is not None
    assert await store.unpause("run-1") == (True, None)
    assert (await store.get_run("run-1")).pause_requested is None
    assert await store.commit_many([checkpoint("run-1", "c1", 1)], lease=lease) is False
    assert ((await store.get_run("run-1")).status, (await store.get_run("run-1")).owner) == (
        "running",
        "owner",
    )


async def test_pause_and_unpause_refuse_what_they_cannot_do_naming_the_run(store):
    await new_run(store)
    await new_run(store, "gone")
    await store.cancel("gone")
    with pytest.raises(RequestError, match=r"'run-1' is not paused \(running\)"):
        await store.unpause("run-1")
    with pytest.raises(RequestError, match=r"'gone' has ended \(cancelled\)"):
        await store.pause("gone")
    for call in (store.pause("ghost"), store.unpause("ghost")):
        with pytest.raises(RunNotFoundError, match="'ghost'"):
            await call
    # A paused run can be cancelled, which is final.
    await store.pause("run-1")
    await store.cancel("run-1")
    assert (await store.get_run("run-1")).status == "cancelled"
    with pytest.raises(RequestError, match="has ended"):
        await store.unpause("run-1")


@pytest.mark.parametrize("rests", [False, True])
async def test_a_commit_racing_a_pause_lands_before_it_or_honours_it_never_both(store, rests):
    status = "awaiting_input" if rests else "running"
    for n in range(12):
        run_id = f"run-{n}"
        await new_run(store, run_id)
        lease = await store.acquire(run_id, "owner", 30)
        commit = store.commit_many(
            [checkpoint(run_id, f"{run_id}/1", 1, status=status)], lease=lease, release=rests
        )
        paused_by_commit, outcome = await asyncio.gather(commit, store.pause(run_id))
        row = await store.get_run(run_id)
        assert row.checkpoint_id == f"{run_id}/1"  # the commit landed, whichever came first
        if paused_by_commit:  # the pause came first: the commit honoured it
            assert (outcome, row.status, row.owner) == ("requested", "paused", None)
        elif rests:  # the commit came first and let the run go: paused at once, at its barrier
            assert (outcome, row.status, row.owner) == ("paused", "paused", None)
        else:  # the commit came first and the owner goes on: its next commit pauses the run
            assert (outcome, row.status, row.owner) == ("requested", "running", "owner")
            assert row.pause_requested is not None


async def test_pausing_a_paused_run_records_nothing_more(store):
    # Each pause of a paused run was recorded again (audit and log), though nothing changed.
    await new_run(store)
    someone = Actor("user", "olga", "cli", Role.OPERATOR)
    assert await store.pause("run-1", actor=someone) == "paused"
    for _ in range(2):
        assert await store.pause("run-1", actor=someone) == "paused"
    audited = [e.action for e in await store.read_audit("run-1")]
    assert audited.count("run_paused") == 1
    logged = [e.kind for e in await store.read_events("run-1")]
    assert logged.count("run_paused") == 1
