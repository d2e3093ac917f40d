"""A store written by the release before checkpoint pieces opens, migrates and carries its runs on.

``data/store-v4.sqlite`` was written by that release (schema version 4,
checkpoints of format 1, each holding its whole state) running
``upgrade_app.py``. Today's treadle migrates a copy of it in place on open;
its runs resume, answer, fork and travel in time, and what they write from
then on is stored as pieces. The same rows, loaded into a PostgreSQL schema
at version 4, migrate and resume the same way.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
import upgrade_app
from upgrade_app import DONE, FORKED, PAUSED, TRIMMED, build, entry

from postgres import drop_schemas, fresh_schema, postgres_dsn
from treadle._stores._sql_schema import MIGRATIONS
from treadle.stores import SqliteStore

FILE = Path(__file__).parent / "data" / "store-v4.sqlite"


def copy_of_the_old_file(tmp_path: Path) -> Path:
    path = tmp_path / "store.sqlite"
    shutil.copyfile(FILE, path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version FROM treadle_schema").fetchall() == [(4,)]
    return path


def expected_log(*more: str) -> list[str]:
    return [entry(0), entry(1), entry(2), *more]


async def carry_on(store) -> None:
    """What every store that held the old runs must still do with them."""
    workflow = build()
    # A run that waited for its answer across the upgrade gets it, and completes.
    paused = await workflow.resume(PAUSED, store=store)
    [request] = paused.pending_requests
    done = await workflow.respond(PAUSED, {request.request_id: "after the upgrade"}, store=store)
    assert done.status.value == "completed"
    assert done.state == {"log": expected_log("review: after the upgrade"), "count": 2}
    assert done.outputs == [0, 1, 2, "reviewed after the upgrade"]
    # Its old checkpoints are still there, before the new one.
    history = await workflow.history(PAUSED, store=store)
    assert [c.superstep for c in history.checkpoints] == [0, 1, 2, 3, 4, 5]
    # Time travel from an old (format 1) checkpoint, and a fork of one.
    again = await workflow.resume(PAUSED, history.checkpoints[2].checkpoint_id, store=store)
    assert again.state["log"] == [entry(0), entry(1), entry(2)]
    forked = await workflow.fork(
        DONE, (await workflow.history(DONE, store=store)).checkpoints[3].checkpoint_id, store=store
    )
    assert (await workflow.resume(forked, store=store)).pending_requests
    # The fork the old release made, never advanced, goes on from its patched state.
    from_old_fork = await workflow.resume(FORKED, store=store)
    assert from_old_fork.state["count"] == 2  # patched to 100 at superstep 1, then set again
    assert from_old_fork.pending_requests
    # Ended runs read as they were.
    for run_id, verdict in ((DONE, "approved"), (TRIMMED, "fine")):
        ended = await workflow.resume(run_id, store=store)
        assert ended.outputs == [0, 1, 2, f"reviewed {verdict}"]
        assert ended.state["log"] == expected_log(f"review: {verdict}")
    assert len((await workflow.history(TRIMMED, store=store)).checkpoints) == 2


async def test_a_store_file_from_the_release_before_pieces_migrates_and_resumes(tmp_path):
    path = copy_of_the_old_file(tmp_path)
    store = SqliteStore(path)
    try:
        await carry_on(store)
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        newest = len(MIGRATIONS)  # every step since, webhooks' (10) the last
        assert db.execute("SELECT version FROM treadle_schema").fetchall() == [(newest,)]
        # Written after the upgrade: frames naming pieces; before it: whole checkpoints.
        named = db.execute("SELECT COUNT(*) FROM treadle_checkpoints WHERE refs IS NOT NULL")
        assert named.fetchone()[0] > 0
        assert db.execute("SELECT COUNT(*) FROM treadle_pieces").fetchone()[0] > 0


@pytest.mark.integration
async def test_the_same_runs_in_a_version_4_postgres_schema_migrate_and_resume(tmp_path):
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
            for table in ("treadle_runs", "treadle_checkpoints", "treadle_inbox")
        }
    try:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
            await db.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            await db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            async with db.transaction():
                await db.execute(POSTGRES.render(_sql_schema.CREATE_SCHEMA_TABLE))
                for step in _sql_schema.MIGRATIONS[:4]:
                    for statement in step:
                        await db.execute(POSTGRES.render(statement))
                await db.execute("INSERT INTO treadle_schema (version) VALUES (4)")
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
            await carry_on(store)
        finally:
            await store.close()
    finally:
        await drop_schemas([schema])


def test_the_file_was_made_by_the_workflow_beside_it():
    # The maker's runs, by the ids the tests use: a rebuilt file would be the same.
    with sqlite3.connect(FILE) as db:
        runs = dict(db.execute("SELECT run_id, status FROM treadle_runs"))
    assert runs == {
        PAUSED: "awaiting_input",
        DONE: "completed",
        TRIMMED: "completed",
        FORKED: "running",
    }
    assert upgrade_app.__doc__ is not None
    assert "store-v4.sqlite" in upgrade_app.__doc__
