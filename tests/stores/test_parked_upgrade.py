"""Runs parked by the release before compact frames wake, answer and log as runs parked today.

``data/parked-v11.sqlite`` was written by that release (schema version 11,
checkpoint frames of format 2 in blobs of version 1) running
``parked_app.py``: three runs asleep on a timer, one asleep with state and an
output kept as pieces, one waiting for an answer. Today's treadle opens a
copy, wakes and answers them; each run's event log reads as that of the
same run parked and woken today, and what is written from then on is in
today's compact format. The same rows, loaded into a PostgreSQL schema at
version 11, wake the same way.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from parked_app import ASKER, KEEPER, SLEEP_S, SLEEPERS, build

from postgres import drop_schemas, fresh_schema, postgres_dsn
from treadle import RunStatus, Runtime
from treadle._checkpoints._blob import BOUND_VERSION, FORMAT_VERSION
from treadle._stores._sql_schema import MIGRATIONS
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

FILE = Path(__file__).parent / "data" / "parked-v11.sqlite"
_TABLES = (
    "treadle_runs",
    "treadle_checkpoints",
    "treadle_pieces",
    "treadle_events",
    "treadle_audit",
)


def copy_of_the_old_file(tmp_path: Path) -> Path:
    path = tmp_path / "store.sqlite"
    shutil.copyfile(FILE, path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version FROM treadle_schema").fetchall() == [(11,)]
        versions = {blob[4] for (blob,) in db.execute("SELECT blob FROM treadle_checkpoints")}
        assert versions == {FORMAT_VERSION}  # every frame of the old layout
    return path


async def wake_and_answer(store) -> dict[str, list[str]]:
    """Wake the old runs and answer the asker; return each run's logged event kinds."""
    workflow = build()
    clock = FakeClock(start=SLEEP_S)
    woken = await Runtime(store, [workflow], clock=clock).wake_due()
    assert sorted(r.run_id for r in woken) == sorted([*SLEEPERS, KEEPER])
    results = {r.run_id: r for r in woken}
    for n, run_id in enumerate(SLEEPERS, start=1):
        assert results[run_id].status is RunStatus.COMPLETED
        assert results[run_id].outputs == [n]
        assert results[run_id].state == {"log": [f"woke {n}"]}
    assert results[KEEPER].status is RunStatus.COMPLETED
    assert results[KEEPER].outputs == [107, 7]
    assert results[KEEPER].state == {"log": ["kept 107", "woke 7"]}
    asked = await workflow.resume(ASKER, store=store, clock=clock)
    [request] = asked.pending_requests
    answered = await workflow.respond(ASKER, {request.request_id: "yes"}, store=store, clock=clock)
    assert answered.outputs == ["answered yes"]
    logs = {}
    for run_id in (*SLEEPERS, KEEPER, ASKER):
        events = await store.read_events(run_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))  # no gap, no repeat
        assert events[-1].kind == "status_changed"
        assert events[-1].data["status"] == "completed"
        logs[run_id] = [e.kind for e in events]
    return logs


async def parked_and_woken_today(tmp_path: Path) -> dict[str, list[str]]:
    """The event kinds of the same runs, parked and woken by today's treadle."""
    store = SqliteStore(tmp_path / "today.sqlite")
    workflow = build()
    clock = FakeClock(start=0.0)
    try:
        for n, run_id in enumerate(SLEEPERS, start=1):
            await workflow.run(n, run_id=run_id, store=store, clock=clock)
        await workflow.run(107, run_id=KEEPER, store=store, clock=clock)
        await workflow.run(-1, run_id=ASKER, store=store, clock=clock)
        await clock.advance(SLEEP_S)
        return await wake_and_answer(store)
    finally:
        await store.close()


async def test_runs_parked_by_the_release_before_compact_frames_wake_and_log_alike(tmp_path):
    path = copy_of_the_old_file(tmp_path)
    store = SqliteStore(path)
    try:
        logs = await wake_and_answer(store)
    finally:
        await store.close()
    assert logs == await parked_and_woken_today(tmp_path)
    with sqlite3.connect(path) as db:
        versions = [blob[4] for (blob,) in db.execute("SELECT blob FROM treadle_checkpoints")]
    # The old frames are kept as they were; every frame written since is compact.
    assert versions.count(FORMAT_VERSION) == 11  # 2 per sleeper and the asker, 3 for the keeper
    assert versions.count(BOUND_VERSION) == 5  # one more per run, the one that completed it


async def test_old_runs_read_the_graphs_their_rows_hold_and_new_runs_keep_theirs_once(tmp_path):
    # Rows written before graph descriptions were kept once hold their own: they read as
    # before the upgrade, and keep holding it; new runs of the same workflow name one.
    path = copy_of_the_old_file(tmp_path)
    with sqlite3.connect(path) as db:
        held = dict(db.execute("SELECT run_id, graph FROM treadle_runs"))
    assert all(held.values())
    store = SqliteStore(path)
    try:
        assert {run_id: await store.get_graph(run_id) for run_id in held} == held
        listed = await store.list_runs(workflow=build().name)
        assert sorted(run.run_id for run in listed) == sorted(held)
        new = [(await build().run(n, store=store, clock=FakeClock())).run_id for n in (1, 2)]
        assert {await store.get_graph(run_id) for run_id in new} == set(held.values())
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version FROM treadle_schema").fetchall() == [(len(MIGRATIONS),)]
        rows = {
            r: (g, d)
            for r, g, d in db.execute("SELECT run_id, graph, graph_digest FROM treadle_runs")
        }
        assert db.execute("SELECT COUNT(*) FROM treadle_graphs").fetchall() == [(1,)]
    assert {run_id: rows[run_id] for run_id in held} == {r: (g, None) for r, g in held.items()}
    assert {rows[run_id][0] for run_id in new} == {b""}


@pytest.mark.integration
async def test_the_same_runs_in_a_version_11_postgres_schema_wake(tmp_path):
    import psycopg  # noqa: PLC0415 - only this test needs it
    from psycopg import sql  # noqa: PLC0415

    from treadle._stores import _sql_schema  # noqa: PLC0415
    from treadle._stores._sql_dialect import POSTGRES  # noqa: PLC0415
    from treadle.stores import PostgresStore  # noqa: PLC0415

    dsn, schema = postgres_dsn(), fresh_schema()
    with sqlite3.connect(copy_of_the_old_file(tmp_path)) as old:
        tables = {
            table: (
                [column[1] for column in old.execute(f"PRAGMA table_info({table})")],
                old.execute(f"SELECT * FROM {table}").fetchall(),  # noqa: S608 - constant names
            )
            for table in _TABLES
        }
    try:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
            await db.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            await db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            async with db.transaction():
                await db.execute(POSTGRES.render(_sql_schema.CREATE_SCHEMA_TABLE))
                for step in _sql_schema.MIGRATIONS[:11]:
                    for statement in step:
                        await db.execute(POSTGRES.render(statement))
                await db.execute("INSERT INTO treadle_schema (version) VALUES (11)")
                for table, (columns, rows) in tables.items():
                    names = sql.SQL(", ").join(map(sql.Identifier, columns))
                    marks = sql.SQL(", ").join(sql.Placeholder() * len(columns))
                    insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                        sql.Identifier(table), names, marks
                    )
                    for row in rows:
                        await db.execute(insert, row)
        store = PostgresStore(dsn, schema=schema)
        try:
            logs = await wake_and_answer(store)
        finally:
            await store.close()
        assert logs == await parked_and_woken_today(tmp_path)
    finally:
        await drop_schemas([schema])


def test_the_file_was_made_by_the_workflow_beside_it():
    # The maker's runs, by the ids the tests use: a rebuilt file would be the same.
    with sqlite3.connect(FILE) as db:
        runs = dict(db.execute("SELECT run_id, status FROM treadle_runs"))
    assert runs == {
        **dict.fromkeys(SLEEPERS, "waiting"),
        KEEPER: "waiting",
        ASKER: "awaiting_input",
    }
