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
from treadle._stores._sql_limits import release, take
from treadle._stores._sqlite import SqliteStore
from treadle._stores._sqlite_writes import run_batch
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


async def test_a_change_to_a_line_never_goes_by_a_time_older_than_one_served_before_it(tmp_path):
    # A process reads its time, then waits for the limit's row; another, whose time is
    # later, is served first and prunes the grants older than its window. Were the
    # first to go by its own older time, it would count too few and stamp its grants
    # earlier than they were made (26 calls were granted within a second of a limit of
    # 25 so, on three workers). The line keeps its clock: the later time wins.
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path)
    try:
        lease = await leased_run(store, "r")
    finally:
        await store.close()
    terms = LimitTerms("api", calls=2, per=1.0)
    t = time.time()
    changes = [
        take(terms, SlotEntry("c1"), lease, "g", t),
        release(terms, "c1", lease, "g", t + 0.5),
        take(terms, SlotEntry("c2"), lease, "g", t + 1.2),  # later: prunes c1 (t + 0.2 on)
        take(terms, SlotEntry("c3"), lease, "g", t + 0.9),  # read earlier, served after
    ]
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        for change in changes:
            db.execute("BEGIN IMMEDIATE")
            change.outcome(run_batch(change.steps, db))
            db.execute("COMMIT")
        granted = dict(
            db.execute("SELECT call_id, granted_at FROM treadle_limit_slots WHERE call_id > 'c1'")
        )
    assert granted == {"c2": t + 1.2, "c3": t + 1.2}


@pytest.mark.integration
async def test_a_take_and_a_release_are_one_round_trip_each_on_postgresql(tmp_path, new_schema):
    import psycopg  # noqa: PLC0415

    from postgres import postgres_dsn  # noqa: PLC0415
    from treadle._stores._postgres_writes import run_batch as run_on_postgres  # noqa: PLC0415
    from treadle.stores import PostgresStore  # noqa: PLC0415

    dsn, schema = postgres_dsn(), new_schema()
    store = PostgresStore(dsn, schema=schema)
    try:
        lease = await leased_run(store, "r")
    finally:
        await store.close()
    terms = LimitTerms("api", concurrency=1, calls=10, per=1.0)
    now = time.time()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        await db.execute(f'SET search_path TO "{schema}"')
        for change in (
            take(terms, SlotEntry("c"), lease, "g", now),
            release(terms, "c", lease, "g", now + 0.1),
        ):
            trace = tmp_path / "trace.txt"
            with trace.open("w") as sink:
                db.pgconn.trace(sink.fileno())
                answers = await run_on_postgres(change.steps, db)
                db.pgconn.untrace()
            sent = [
                line.split("\t")[3] for line in trace.read_text().splitlines() if "\tF\t" in line
            ]
            waited = trace.read_text().count("ReadyForQuery")
            assert (sent, waited) == (["Query"], 1)  # every statement in one message, one reply
            change.outcome(answers)
        held = await (
            await db.execute("SELECT granted_at, released_at FROM treadle_limit_slots")
        ).fetchall()
    assert held == [(now, now + 0.1)]


async def test_a_cancelled_runs_waiting_call_leaves_the_line(store):
    # A run cancelled (or deleted) while its call waited for a slot never takes it up
    # again, but its row stayed in the line for ever: the calls behind it were shown a
    # place behind it ('#2' for the next one served), and such rows piled up.
    holder = await leased_run(store, "h")
    await store.take_slot(ONE_AT_A_TIME, SlotEntry("hold"), holder, "g")
    doomed = await leased_run(store, "r1")
    await store.take_slot(ONE_AT_A_TIME, SlotEntry("r1/1/a/0"), doomed, "g1")
    later = await leased_run(store, "r2")
    await store.take_slot(ONE_AT_A_TIME, SlotEntry("r2/1/a/0"), later, "g2")
    assert [w.position for w in await store.line_waits(["r2"])] == [1]
    await store.cancel("r1")
    assert [w.position for w in await store.line_waits(["r2"])] == [0]
    assert await store.line_waits(["r1"]) == []
