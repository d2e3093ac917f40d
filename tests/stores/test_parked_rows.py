"""What a parked run stores: its rows, on SQLite and PostgreSQL, and what they hold.

A run parked on a timer is its run row, its two checkpoints (the start and
the park), the record of who started it, and its event log in one row per
commit: the start's events and its record share one. On SQLite each
commit's events are in its checkpoint's row (the start's with its record),
so the log's table has no row of the run at all. Nothing else is written
per run, and the log reads the same as when it took rows of its own.
"""

from __future__ import annotations

import sqlite3

import pytest

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import PostgresStore, SqliteStore
from treadle.testing import FakeClock

_COUNTED = ("treadle_runs", "treadle_checkpoints", "treadle_events", "treadle_audit")
_PARKED = {"treadle_runs": 1, "treadle_checkpoints": 2, "treadle_events": 2, "treadle_audit": 1}
# SQLite: each commit's events ride in its checkpoint's row (see _stores/_sql_events.py).
_PARKED_SQLITE = _PARKED | {"treadle_events": 0}
_KINDS = [
    "run_started",
    "checkpoint_saved",
    "status_changed",
    "run_created",
    "superstep_started",
    "executor_invoked",
    "executor_suspended",
    "superstep_completed",
    "checkpoint_saved",
    "status_changed",
]


def _sleeper():
    @executor(id="nap")
    async def nap(n: int, ctx: WorkflowContext[int]) -> None:
        await ctx.sleep(3_600)
        ctx.yield_output(n)

    return WorkflowBuilder(start=nap, name="idle").build()


async def _park(store) -> str:
    parked = await _sleeper().run(7, store=store, clock=FakeClock())
    assert parked.status is RunStatus.WAITING
    events = await store.read_events(parked.run_id)
    assert [e.seq for e in events] == list(range(1, len(_KINDS) + 1))
    assert [e.kind for e in events] == _KINDS
    created = events[3]
    assert created.superstep == 0
    assert created.data["actor"]["kind"] == "python"
    assert created.data["audit"]["seq"] >= 1
    return parked.run_id


async def test_a_run_parked_on_sqlite_is_three_kinds_of_row_and_no_more(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path)
    try:
        run_id = await _park(store)
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        counts = {}
        for table in _COUNTED:
            query = f"SELECT COUNT(*) FROM {table} WHERE run_id = ?"  # noqa: S608 - constant names
            counts[table] = db.execute(query, (run_id,)).fetchone()[0]
        logged = db.execute(
            "SELECT superstep, first_seq, last_seq FROM treadle_checkpoints"
            " WHERE run_id = ? ORDER BY superstep",
            (run_id,),
        ).fetchall()
    assert counts == _PARKED_SQLITE
    assert logged == [(0, 1, 4), (1, 5, len(_KINDS))]  # the start's row holds its record's


@pytest.mark.integration
async def test_a_run_parked_on_postgres_is_four_kinds_of_row_and_no_more(dsn, schema):
    import psycopg  # noqa: PLC0415 - only this test needs it

    store = PostgresStore(dsn, schema=schema)
    try:
        run_id = await _park(store)
    finally:
        await store.close()
    async with await psycopg.AsyncConnection.connect(dsn) as db:
        counts = {}
        for table in _COUNTED:
            cursor = await db.execute(
                f"SELECT COUNT(*) FROM {schema}.{table} WHERE run_id = %s",  # noqa: S608 - constant names
                (run_id,),
            )
            counts[table] = (await cursor.fetchone())[0]
    assert counts == _PARKED


async def _park_three(store) -> list[str]:
    """Three runs of one workflow parked; their graphs read back as one description."""
    run_ids = [await _park(store) for _ in range(3)]
    graphs = {await store.get_graph(run_id) for run_id in run_ids}
    [graph] = graphs
    assert b'"name":"idle"' in graph
    return run_ids


async def test_runs_of_one_workflow_keep_its_graph_once_on_sqlite(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path)
    try:
        run_ids = await _park_three(store)
        graph = await store.get_graph(run_ids[0])
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT graph FROM treadle_graphs").fetchall() == [(graph,)]
        rows = db.execute("SELECT graph, graph_digest FROM treadle_runs").fetchall()
    assert len(rows) == 3
    assert {own for own, _ in rows} == {b""}  # no run row holds the description itself
    assert len({digest for _, digest in rows}) == 1


@pytest.mark.integration
async def test_runs_of_one_workflow_keep_its_graph_once_on_postgres(dsn, schema):
    import psycopg  # noqa: PLC0415 - only this test needs it

    store = PostgresStore(dsn, schema=schema)
    try:
        run_ids = await _park_three(store)
        graph = await store.get_graph(run_ids[0])
    finally:
        await store.close()
    async with await psycopg.AsyncConnection.connect(dsn) as db:
        cursor = await db.execute(f"SELECT graph FROM {schema}.treadle_graphs")  # noqa: S608 - a test schema
        assert await cursor.fetchall() == [(graph,)]
        cursor = await db.execute(f"SELECT graph, graph_digest FROM {schema}.treadle_runs")  # noqa: S608
        rows = await cursor.fetchall()
    assert {bytes(own) for own, _ in rows} == {b""}
    assert len({bytes(digest) for _, digest in rows}) == 1
