"""The store conformance suite's part on call limits: every backend counts slots alike.

A call enters its limit's line under its run's lease (fenced); admitting
grants free slots by priority, then turns across keys, then arrival; a
slot counts while its lease is current, so a dead holder's slot comes
back; a call entered again keeps its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time

import pytest

from treadle._exceptions import LeaseLostError
from treadle._stores._limit_roles import LimitSlots, LimitTerms, SlotEntry
from treadle._stores._sql_limits import admit, release, take
from treadle._stores._sqlite import SqliteStore
from treadle._stores._sqlite_writes import drive
from treadle._stores._store import CheckpointInfo, CheckpointRecord, RunRecord

T0 = 1_700_000_000.0
ONE_AT_A_TIME = LimitTerms("api", concurrency=1)
# A lease a test waits out: long enough for the few calls made under it on a loaded
# machine, short enough that waiting for it to run out costs each backend little.
SHORT_LEASE = 1.0


async def leased_run(store, run_id, owner="me", duration=30.0):
    record = RunRecord(run_id, "wf", "running", 0, None, None, None, T0, T0)
    info = CheckpointInfo(f"{run_id}/0", run_id, 0, "running", None, T0, None)
    await store.create_run(record, b"graph", CheckpointRecord(info, b"blob"))
    return await store.acquire(run_id, owner, duration)


async def test_every_store_keeps_limit_slots(store):
    assert isinstance(store, LimitSlots)


async def test_one_slot_goes_to_the_first_call_and_a_release_hands_it_on(store):
    first, second = await leased_run(store, "r1"), await leased_run(store, "r2")
    taken = await store.take_slot(ONE_AT_A_TIME, SlotEntry("r1/1/a/0"), first, "g1")
    assert taken.granted == ("r1/1/a/0",)
    waiting = await store.take_slot(ONE_AT_A_TIME, SlotEntry("r2/1/a/0"), second, "g2")
    assert waiting.granted == ()
    assert [(w.run_id, w.position) for w in await store.line_waits(["r2"])] == [("r2", 0)]
    handed = await store.release_slot(ONE_AT_A_TIME, "r1/1/a/0", first, "g1")
    assert handed.granted == ()  # granted to g2's call, which g2 hears when it asks
    assert (await store.admit_slots(ONE_AT_A_TIME, "g2")).granted == ("r2/1/a/0",)
    assert (await store.admit_slots(ONE_AT_A_TIME, "g2")).granted == ()  # told once
    assert await store.line_waits(["r2"]) == []


async def test_turns_go_round_the_keys_and_priority_goes_first(store):
    lease = await leased_run(store, "r")
    terms = LimitTerms("api", concurrency=1)
    await store.take_slot(terms, SlotEntry("hold"), lease, "g")
    for n in range(4):
        await store.take_slot(terms, SlotEntry(f"a{n}", key="A"), lease, "g")
    for n in range(2):
        await store.take_slot(terms, SlotEntry(f"b{n}", key="B"), lease, "g")
    await store.take_slot(terms, SlotEntry("urgent", key="A", priority=5), lease, "g")
    order, holding = [], "hold"
    for _ in range(7):
        admitted = await store.release_slot(terms, holding, lease, "g")
        [holding] = admitted.granted
        order.append(holding)
    assert order == ["urgent", "a0", "b0", "a1", "b1", "a2", "a3"]


async def test_a_call_under_a_lost_lease_enters_nothing_and_releases_nothing(store):
    lease = await leased_run(store, "r1")
    taken = await store.take_slot(ONE_AT_A_TIME, SlotEntry("r1/1/a/0"), lease, "g1")
    assert taken.granted == ("r1/1/a/0",)
    await store.release(lease)
    newer = await store.acquire("r1", "other", 30)
    with pytest.raises(LeaseLostError):
        await store.take_slot(ONE_AT_A_TIME, SlotEntry("r1/1/a/1"), lease, "g1")
    # The old holder's slot stopped counting with its lease: the new owner takes one.
    again = await store.take_slot(ONE_AT_A_TIME, SlotEntry("r1/1/a/0"), newer, "g2")
    assert again.granted == ("r1/1/a/0",)
    await store.release_slot(ONE_AT_A_TIME, "r1/1/a/0", lease, "g1")  # stale: no effect
    other = await leased_run(store, "r2")
    assert (await store.take_slot(ONE_AT_A_TIME, SlotEntry("r2/1/a/0"), other, "g3")).granted == ()


async def test_a_dead_holders_slot_comes_back_when_its_lease_runs_out(store):
    dying = await leased_run(store, "r1", owner="dying", duration=SHORT_LEASE)
    await store.take_slot(ONE_AT_A_TIME, SlotEntry("r1/1/a/0"), dying, "g1")
    alive = await leased_run(store, "r2")
    assert (await store.take_slot(ONE_AT_A_TIME, SlotEntry("r2/1/a/0"), alive, "g2")).granted == ()
    while time.time() < dying.until:  # noqa: ASYNC110 - the lease runs out on the wall clock
        await asyncio.sleep(0.1)
    assert (await store.admit_slots(ONE_AT_A_TIME, "g2")).granted == ("r2/1/a/0",)


async def test_a_call_entered_again_after_a_takeover_keeps_its_place(store):
    holder = await leased_run(store, "h")
    await store.take_slot(ONE_AT_A_TIME, SlotEntry("hold"), holder, "g")
    first = await leased_run(store, "r1", owner="first", duration=SHORT_LEASE)
    await store.take_slot(ONE_AT_A_TIME, SlotEntry("r1/1/a/0"), first, "g1")
    later = await leased_run(store, "r2")
    await store.take_slot(ONE_AT_A_TIME, SlotEntry("r2/1/a/0"), later, "g2")
    while time.time() < first.until:  # noqa: ASYNC110 - r1's process died; its lease runs out
        await asyncio.sleep(0.1)
    taken_over = await store.acquire("r1", "second", 30)
    await store.take_slot(ONE_AT_A_TIME, SlotEntry("r1/1/a/0"), taken_over, "g3")
    assert [w.position for w in await store.line_waits(["r1"])] == [0]
    await store.release_slot(ONE_AT_A_TIME, "hold", holder, "g")
    assert (await store.admit_slots(ONE_AT_A_TIME, "g3")).granted == ("r1/1/a/0",)


async def test_a_rate_grants_no_more_calls_in_a_window_and_says_when_the_next_may_start(store):
    lease = await leased_run(store, "r")
    terms = LimitTerms("api", calls=2, per=60.0)
    granted = []
    for n in range(3):
        admitted = await store.take_slot(terms, SlotEntry(f"c{n}"), lease, "g")
        granted.extend(admitted.granted)
    assert granted == ["c0", "c1"]
    assert admitted.next_at is not None
    await store.release_slot(terms, "c0", lease, "g")
    assert (await store.admit_slots(terms, "g")).granted == ()  # released, still in the window
    [wait] = await store.line_waits(["r"])
    assert wait.next_slot_at == pytest.approx(admitted.next_at)


async def test_a_call_entered_again_keeps_its_earlier_grant_in_the_rates_window(store):
    # Tried again (or its run taken over by a process that found its owner dead): the
    # call waits again, and the grant it had still counts, as the call it let start did.
    lease = await leased_run(store, "r")
    terms = LimitTerms("api", calls=2, per=60.0)
    assert (await store.take_slot(terms, SlotEntry("c0"), lease, "g")).granted == ("c0",)
    await store.release_slot(terms, "c0", lease, "g")
    assert (await store.take_slot(terms, SlotEntry("c0"), lease, "g")).granted == ("c0",)
    assert (await store.take_slot(terms, SlotEntry("c1"), lease, "g")).granted == ()
    assert [(w.call_id, w.position) for w in await store.line_waits(["r"])] == [("c1", 0)]


async def test_a_slowed_limit_grants_nothing_until_its_time(store):
    lease = await leased_run(store, "r")
    await store.slow_limit("api", 1e12)
    admitted = await store.take_slot(ONE_AT_A_TIME, SlotEntry("c"), lease, "g")
    assert admitted.granted == ()
    assert admitted.next_at == 1e12


async def test_a_change_to_a_line_reads_the_time_once_it_holds_the_limits_row(tmp_path):
    # Read before, the time could be older than that of a process that held the row
    # meanwhile and pruned grants from its window still inside this one's: 26 calls
    # were granted within a second of a limit of 25 so, on three workers.
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path)
    try:
        lease = await leased_run(store, "r")
    finally:
        await store.close()
    terms = LimitTerms("api", concurrency=1, calls=5, per=1.0)
    statements: list[str] = []
    locked_when_read: list[bool] = []

    def clock() -> float:
        locked = any(s.lstrip().startswith("UPDATE treadle_limits SET") for s in statements)
        locked_when_read.append(locked)
        return time.time()

    plans = [
        lambda: take(terms, SlotEntry("c"), lease, "g", clock),
        lambda: release(terms, "c", lease, "g", clock),
        lambda: admit(terms, "g", clock),
    ]
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.set_trace_callback(statements.append)
        for plan in plans:
            statements.clear()
            db.execute("BEGIN IMMEDIATE")
            drive(plan(), db)
            db.execute("COMMIT")
    assert locked_when_read == [True, True, True]
