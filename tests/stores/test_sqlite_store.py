"""What only SqliteStore promises: a real file that survives, migrates and is shared."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path

import pytest
from test_store_suite import T0, checkpoint, commit_many, kept_ids, new_run

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle._exceptions import (
    CheckpointNotFoundError,
    DurabilityError,
    RunExistsError,
    RunNotFoundError,
)
from treadle._stores import _sql_dialect, _sql_pieces, _sql_schema, _sql_statements, _sqlite_lanes
from treadle._stores._sqlite import SqliteStore
from treadle._stores._store import CheckpointInfo, RunRecord

KNOWN = len(_sql_schema.MIGRATIONS)

# The schema that version 1 (treadle cead48e..1f81ddc) made, spelled out: files
# made by it exist, so neither this nor migration step 1 may ever change.
VERSION_1 = (
    """CREATE TABLE treadle_runs (
        run_id TEXT NOT NULL PRIMARY KEY, workflow TEXT NOT NULL, status TEXT NOT NULL,
        superstep BIGINT NOT NULL, checkpoint_id TEXT, parent_run_id TEXT,
        parent_checkpoint_id TEXT, created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL, error TEXT, graph BLOB NOT NULL)""",
    "CREATE INDEX treadle_runs_status ON treadle_runs (status)",
    "CREATE INDEX treadle_runs_parent ON treadle_runs (parent_run_id)",
    """CREATE TABLE treadle_checkpoints (
        checkpoint_id TEXT NOT NULL PRIMARY KEY, run_id TEXT NOT NULL,
        superstep BIGINT NOT NULL, status TEXT NOT NULL, parent_checkpoint_id TEXT,
        created_at DOUBLE PRECISION NOT NULL, blob BLOB NOT NULL)""",
    "CREATE INDEX treadle_checkpoints_run ON treadle_checkpoints (run_id, superstep, created_at)",
)


def connect(path):
    return closing(sqlite3.connect(path, isolation_level=None))


def schema_version(path):
    with connect(path) as connection:
        return [row[0] for row in connection.execute("SELECT version FROM treadle_schema")]


def wal_exists(path):
    return Path(f"{path}-wal").exists()


async def make_file(path):
    store = SqliteStore(path)
    await new_run(store)
    await commit_many(store, "run-1", ["c1"])
    await store.close()


async def snapshot(store):
    runs = await store.list_runs()
    return runs, {
        run.run_id: (
            await store.get_graph(run.run_id),
            [
                await store.load_checkpoint(run.run_id, info.checkpoint_id)
                for info in await store.list_checkpoints(run.run_id)
            ],
        )
        for run in runs
    }


async def test_everything_committed_is_there_after_reopening(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    await new_run(store)
    await new_run(store, "run-2", first="other", parent="run-1")
    await commit_many(store, "run-1", ["c1", "c2", "c3"], keep_last=3)
    await store.set_status("run-2", "failed", "boom")
    before = await snapshot(store)
    await store.close()
    reopened = SqliteStore(tmp_path / "runs.sqlite")
    try:
        assert await snapshot(reopened) == before
        assert await kept_ids(reopened) == ["c1", "c2", "c3"]
    finally:
        await reopened.close()


async def test_a_commit_failing_inside_its_transaction_leaves_nothing_behind(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path)
    await new_run(store)
    await commit_many(store, "run-1", ["c1", "c2"])
    with connect(path) as connection:
        # Fails the retention step, after the checkpoint insert and the run update.
        connection.execute(
            "CREATE TRIGGER refuse_deletes BEFORE DELETE ON treadle_checkpoints"
            " BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
        )
    before = await store.get_run("run-1")
    with pytest.raises(DurabilityError, match="injected failure"):
        await store.commit(checkpoint("run-1", "c3", 3), keep_last=1)
    assert await store.get_run("run-1") == before
    assert await kept_ids(store) == ["c0", "c1", "c2"]
    with pytest.raises(CheckpointNotFoundError):
        await store.load_checkpoint("run-1", "c3")
    await store.commit(checkpoint("run-1", "c3", 3))  # the store is still usable
    assert (await store.get_run("run-1")).checkpoint_id == "c3"
    await store.close()


async def test_a_version_0_file_made_by_hand_is_migrated_and_keeps_other_tables(tmp_path):
    path = tmp_path / "old.sqlite"
    with connect(path) as connection:
        connection.execute("CREATE TABLE treadle_schema (version INTEGER NOT NULL)")
        connection.execute("INSERT INTO treadle_schema (version) VALUES (0)")
        connection.execute("CREATE TABLE notes (body TEXT)")
        connection.execute("INSERT INTO notes (body) VALUES ('keep me')")
    await make_file(path)
    assert schema_version(path) == [KNOWN]
    with connect(path) as connection:
        assert connection.execute("SELECT body FROM notes").fetchall() == [("keep me",)]
        assert connection.execute("SELECT count(*) FROM treadle_checkpoints").fetchone() == (2,)


def words(sql):
    return " ".join(sql.replace("(", " ( ").replace(")", " ) ").replace(",", " , ").split())


def test_migration_step_1_is_still_the_version_1_schema():
    assert [words(_sql_dialect.SQLITE.render(step)) for step in _sql_schema.MIGRATIONS[0]] == [
        words(statement) for statement in VERSION_1
    ]


async def test_a_version_1_file_is_migrated_with_its_runs_and_checkpoints(tmp_path):
    path = tmp_path / "v1.sqlite"
    with connect(path) as connection:
        connection.execute("PRAGMA journal_mode = WAL")
        for statement in VERSION_1:
            connection.execute(statement)
        connection.execute("CREATE TABLE treadle_schema (version INTEGER NOT NULL)")
        connection.execute("INSERT INTO treadle_schema (version) VALUES (1)")
        connection.executemany(
            "INSERT INTO treadle_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                ("held", "wf", "waiting", 1, "held/1", None, None, T0, T0 + 1, None, b"graph"),
                ("done", "wf", "failed", 0, "done/0", None, None, T0 + 2, T0 + 3, "boom", b""),
            ],
        )
        connection.executemany(
            "INSERT INTO treadle_checkpoints VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                ("held/0", "held", 0, "running", None, T0, b"zero"),
                ("held/1", "held", 1, "waiting", "held/0", T0 + 1, b"one"),
                ("done/0", "done", 0, "running", None, T0 + 2, b"d"),
            ],
        )
    store = SqliteStore(path)
    try:
        held = RunRecord("held", "wf", "waiting", 1, "held/1", None, None, T0, T0 + 1)
        done = RunRecord("done", "wf", "failed", 0, "done/0", None, None, T0 + 2, T0 + 3, "boom")
        assert await store.list_runs() == [done, held]  # new fields: None
        latest = CheckpointInfo("held/1", "held", 1, "waiting", "held/0", T0 + 1)
        assert (await store.list_checkpoints("held"))[1] == latest
        assert (await store.load_checkpoint("held")).blob == b"one"
        assert (await store.get_graph("held"), await store.get_graph("done")) == (b"graph", b"")
        assert await store.due_runs(T0 + 99) == []  # no run had a timer
        await store.commit(checkpoint("held", "held/2", 2, status="waiting", wake_at=T0 + 5))
        await new_run(store, "late", status="awaiting_input", deadline_at=T0 + 4, created_at=T0)
        assert [run.run_id for run in await store.due_runs(T0 + 5)] == ["late", "held"]
        assert await kept_ids(store, "held") == ["held/0", "held/1", "held/2"]
    finally:
        await store.close()
    assert schema_version(path) == [KNOWN] == [20]


async def test_due_runs_read_one_index_that_also_gives_their_order(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    query, parameters = _sql_statements.select_due_runs(T0, 10)

    def plan(connection):
        rows = connection.execute(
            f"EXPLAIN QUERY PLAN {_sql_dialect.SQLITE.render(query)}", parameters
        )
        return " | ".join(row[3] for row in rows)

    steps = await store._call(plan, write=False)
    await store.close()
    assert "USING INDEX treadle_runs_due" in steps
    assert "TEMP B-TREE" not in steps  # no sort: the index is in due order


async def test_a_newer_treadle_upgrades_an_older_file_and_keeps_its_data(tmp_path, monkeypatch):
    path = tmp_path / "runs.sqlite"
    await make_file(path)
    step = (
        "ALTER TABLE treadle_runs ADD COLUMN later TEXT",
        "CREATE INDEX o ON treadle_runs (later)",
    )
    monkeypatch.setattr(_sql_schema, "MIGRATIONS", (*_sql_schema.MIGRATIONS, step))
    store = SqliteStore(path)
    assert await kept_ids(store) == ["c0", "c1"]
    await store.close()
    assert schema_version(path) == [KNOWN + 1]
    with connect(path) as connection:
        assert connection.execute("SELECT later FROM treadle_runs").fetchall() == [(None,)]


async def test_a_migration_that_fails_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "runs.sqlite"
    await make_file(path)
    broken = ("ALTER TABLE treadle_runs ADD COLUMN later TEXT", "CREATE INDEX o ON missing (x)")
    monkeypatch.setattr(_sql_schema, "MIGRATIONS", (*_sql_schema.MIGRATIONS, broken))
    store = SqliteStore(path)
    with pytest.raises(DurabilityError, match=r"no such table: main\.missing"):
        await store.get_run("run-1")
    await store.close()
    assert schema_version(path) == [KNOWN]
    with connect(path) as connection:
        columns = [row[1] for row in connection.execute("PRAGMA table_info(treadle_runs)")]
    assert "later" not in columns
    monkeypatch.undo()
    store = SqliteStore(path)
    assert await kept_ids(store) == ["c0", "c1"]
    await store.close()


async def test_a_file_from_a_newer_treadle_is_refused_untouched(tmp_path):
    path = tmp_path / "runs.sqlite"
    await make_file(path)
    with connect(path) as connection:
        connection.execute("UPDATE treadle_schema SET version = ?", (KNOWN + 1,))
    store = SqliteStore(path)
    with pytest.raises(DurabilityError) as raised:
        await store.get_run("run-1")
    message = str(raised.value)
    assert str(path) in message
    assert f"schema version {KNOWN + 1}, newer than version {KNOWN}" in message
    await store.close()
    assert schema_version(path) == [KNOWN + 1]


async def test_a_file_that_cannot_be_opened_is_named(tmp_path):
    store = SqliteStore(tmp_path / "no-such-dir" / "runs.sqlite")
    with pytest.raises(DurabilityError, match=r"no-such-dir.*unable to open database file"):
        await store.list_runs()
    await store.close()


async def test_the_file_is_in_wal_mode_and_commits_are_fully_synced(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")

    def pragma(name):
        return lambda connection: connection.execute(f"PRAGMA {name}").fetchone()[0]

    assert await store._call(pragma("journal_mode"), write=False) == "wal"
    assert await store._call(pragma("synchronous"), write=False) == 2  # FULL
    await store.close()


async def test_a_write_waiting_for_another_connection_leaves_the_event_loop_free(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path, busy_timeout=5)  # a store blocking the loop fails fast
    await new_run(store)
    with connect(path) as other_connection:
        other_connection.execute("BEGIN IMMEDIATE")
        waiting = asyncio.create_task(store.commit(checkpoint("run-1", "c1", 1)))
        await asyncio.sleep(0)  # let the commit start: it can only wait for the lock
        assert not waiting.done()
        other_connection.execute("ROLLBACK")
        await waiting
    assert await kept_ids(store) == ["c0", "c1"]
    await store.close()


async def test_reads_do_not_wait_behind_a_write_and_see_what_had_committed(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path, busy_timeout=5)
    await new_run(store)
    with connect(path) as other_connection:
        other_connection.execute("BEGIN IMMEDIATE")  # the store's next write must wait
        waiting = asyncio.create_task(store.commit(checkpoint("run-1", "c1", 1)))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        # One writer thread, but reads have their own: they answer while it waits.
        async with asyncio.timeout(2):
            assert await kept_ids(store) == ["c0"]
            assert (await store.get_run("run-1")).checkpoint_id == "c0"
        other_connection.execute("ROLLBACK")
        await waiting
    assert await kept_ids(store) == ["c0", "c1"]  # read after the write returned: seen
    await store.close()


async def test_a_lock_held_past_busy_timeout_is_a_clear_error(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path, busy_timeout=0.1)
    await new_run(store)
    with connect(path) as other_connection:
        other_connection.execute("BEGIN IMMEDIATE")
        with pytest.raises(DurabilityError, match=r"runs.sqlite stayed locked .* for 0.1 s"):
            await store.commit(checkpoint("run-1", "c1", 1))
        other_connection.execute("ROLLBACK")
    await store.commit(checkpoint("run-1", "c2", 2))
    assert await kept_ids(store) == ["c0", "c2"]
    await store.close()


async def test_an_operation_cancelled_before_its_turn_is_not_run(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path, busy_timeout=5)
    await new_run(store)
    with connect(path) as other_connection:
        other_connection.execute("BEGIN IMMEDIATE")
        running = asyncio.create_task(store.commit(checkpoint("run-1", "c1", 1)))
        queued = asyncio.create_task(store.commit(checkpoint("run-1", "c2", 2)))
        await asyncio.sleep(0)  # both are handed over; the first waits for the lock
        queued.cancel()
        other_connection.execute("ROLLBACK")
        await running
    assert queued.cancelled()
    assert await kept_ids(store) == ["c0", "c1"]
    await store.close()


async def test_writes_queued_together_share_one_transaction_and_fail_alone(tmp_path, monkeypatch):
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path, busy_timeout=5)
    for n in range(6):
        await new_run(store, f"run-{n}", first=f"r{n}/0")
    groups: list[int] = []
    run_group = SqliteStore._run_group

    def recorded(self, works):
        groups.append(len(works))
        return run_group(self, works)

    monkeypatch.setattr(SqliteStore, "_run_group", recorded)
    with connect(path) as other_connection:
        other_connection.execute("BEGIN IMMEDIATE")  # the store's thread waits on the first
        first = asyncio.create_task(store.commit(checkpoint("run-0", "r0/1", 1)))
        await asyncio.sleep(0.05)
        queued = {
            "ok-1": store.commit(checkpoint("run-1", "r1/1", 1)),
            "unknown run": store.commit(checkpoint("nobody", "x/1", 1)),
            "ok-2": store.commit(checkpoint("run-2", "r2/1", 1)),
            "taken id": store.commit(checkpoint("run-3", "r0/1", 1)),
            "cancelled": store.commit(checkpoint("run-4", "r4/1", 1)),
            "ok-5": store.commit(checkpoint("run-5", "r5/1", 1)),
            # Run creations and status changes group with commits too.
            "created": store.create_run(
                RunRecord("run-6", "wf", "running", 0, None, None, None, T0, T0),
                b"g",
                checkpoint("run-6", "r6/0", 0),
            ),
            "exists": store.create_run(
                RunRecord("run-1", "wf", "running", 0, None, None, None, T0, T0),
                b"g",
                checkpoint("run-1", "again/0", 0),
            ),
            "status": store.set_status("run-2", "failed", "boom"),
        }
        tasks = {name: asyncio.create_task(commit) for name, commit in queued.items()}
        await asyncio.sleep(0)  # all handed over, behind the first
        tasks["cancelled"].cancel()
        other_connection.execute("ROLLBACK")
        await first
        outcomes = await asyncio.gather(*tasks.values(), return_exceptions=True)
    by_name = dict(zip(tasks, outcomes, strict=True))
    # The eight still wanted went in one transaction, in the order they were called.
    assert groups == [8]
    wanted = ("ok-1", "ok-2", "ok-5", "created", "status")
    assert [by_name[name] for name in wanted] == [None] * 5
    assert isinstance(by_name["exists"], RunExistsError)
    assert isinstance(by_name["unknown run"], RunNotFoundError)
    assert isinstance(by_name["taken id"], ValueError)
    assert isinstance(by_name["cancelled"], asyncio.CancelledError)
    latest = {run.run_id: run.checkpoint_id for run in await store.list_runs()}
    assert latest == {
        "run-0": "r0/1",
        "run-1": "r1/1",
        "run-2": "r2/1",
        "run-3": "r3/0",  # its refused commit rolled back to its own savepoint, row included
        "run-4": "r4/0",  # cancelled before its turn: not run
        "run-5": "r5/1",
        "run-6": "r6/0",
    }
    assert await kept_ids(store, "run-1") == ["r1/0", "r1/1"]  # the second creation left nothing
    failed = await store.get_run("run-2")
    assert (failed.status, failed.error, failed.checkpoint_id) == ("failed", "boom", "r2/1")
    await store.close()


def test_an_operation_outliving_its_event_loop_completes_and_the_store_goes_on(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path, busy_timeout=5)
    asyncio.run(new_run(store))

    async def give_up():
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(store.commit(checkpoint("run-1", "c1", 1)), 0.05)

    with connect(path) as other_connection:
        other_connection.execute("BEGIN IMMEDIATE")
        asyncio.run(give_up())  # that loop is closed while the commit waits for the lock
        other_connection.execute("ROLLBACK")
    # Writes run in call order, so once a later one returns the abandoned one is done:
    # it was running, so it finished.
    asyncio.run(store.commit(checkpoint("run-1", "c2", 2)))
    assert asyncio.run(kept_ids(store)) == ["c0", "c1", "c2"]
    asyncio.run(store.close())


def test_event_loops_in_several_threads_share_one_store_at_once(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    run_ids = [f"thread-{n}" for n in range(4)]
    asyncio.run(new_run(store))  # opens the file before the threads race for it

    async def work(run_id):
        await new_run(store, run_id, first=f"{run_id}/c0")
        await commit_many(store, run_id, [f"{run_id}/c{n}" for n in range(1, 51)])

    threads = [threading.Thread(target=asyncio.run, args=[work(run_id)]) for run_id in run_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [len(asyncio.run(kept_ids(store, run_id))) for run_id in run_ids] == [51] * 4
    asyncio.run(store.close())


async def test_close_closes_the_connection_and_stops_the_thread(tmp_path):
    path = tmp_path / "runs.sqlite"
    threads_before = set(threading.enumerate())
    store = SqliteStore(path)
    await new_run(store)
    store_threads = set(threading.enumerate()) - threads_before
    assert [thread.name.startswith("treadle-sqlite") for thread in store_threads] == [True]
    assert wal_exists(path)
    await store.close()
    # SQLite removes the log when the last connection to the file closes.
    assert not wal_exists(path)
    assert not any(thread.is_alive() for thread in store_threads)


async def test_retention_keeps_the_file_from_growing(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path)
    await new_run(store)

    def size_on_disk():
        return sum(file.stat().st_size for file in [path, Path(f"{path}-wal")] if file.exists())

    parent = "c0"
    for superstep in range(1, 1001):
        record = checkpoint("run-1", f"c{superstep}", superstep, parent=parent)
        record = type(record)(record.info, bytes([superstep % 256]) * 3000)
        await store.commit(record, keep_last=10)
        parent = record.info.checkpoint_id
        if superstep == 500:
            size_at_500 = size_on_disk()
    assert await kept_ids(store) == [f"c{n}" for n in range(991, 1001)]
    assert size_on_disk() <= 1.2 * size_at_500
    await store.close()


WORKER = """
import asyncio, sys
from treadle._stores._sqlite import SqliteStore
from treadle._stores._store import CheckpointInfo, CheckpointRecord, RunRecord

async def main(path, run_id):
    print("ready", flush=True)
    sys.stdin.readline()  # every worker opens the new file at once
    store = SqliteStore(path)
    run = RunRecord(run_id, "wf", "running", 0, None, None, None, 0.0, 0.0)
    first = CheckpointInfo(run_id + "/0", run_id, 0, "running", None, 0.0)
    await store.create_run(run, b"graph", CheckpointRecord(first, b"first"))
    for n in range(1, 201):
        info = CheckpointInfo(f"{run_id}/{n}", run_id, n, "running", f"{run_id}/{n - 1}", n)
        await store.commit(CheckpointRecord(info, bytes(300)))
    await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.integration
def test_four_processes_commit_to_one_file_at_once(tmp_path):
    path = tmp_path / "shared.sqlite"
    run_ids = [f"worker-{n}" for n in range(4)]
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path), run_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for run_id in run_ids
    ]
    for worker in workers:
        assert worker.stdout.readline() == "ready\n"
    for worker in workers:
        worker.stdin.write("go\n")
        worker.stdin.flush()
    for worker in workers:
        _, errors = worker.communicate(timeout=120)
        assert (worker.returncode, errors) == (0, "")

    async def check():
        store = SqliteStore(path)
        for run_id in run_ids:
            expected = [f"{run_id}/{n}" for n in range(201)]
            assert await kept_ids(store, run_id) == expected
            assert (await store.get_run(run_id)).checkpoint_id == f"{run_id}/200"
        await store.close()

    asyncio.run(check())


def test_sql_templates_render_for_another_dialect():
    other = _sql_dialect.Dialect(
        blob_type="BYTEA",
        placeholder="%s",
        insertion_order="seq",
        insertion_order_column="seq BIGINT GENERATED ALWAYS AS IDENTITY,",
        id_rows="SELECT unnest(CAST(? AS text[]))",
    )
    assert other.render(_sql_statements.SET_STATUS).count("%s") == 4
    assert "unnest(CAST(%s AS text[]))" in other.render(_sql_pieces.SELECT_NEEDED)
    assert "?" not in other.render(_sql_statements.DELETE_OLD_CHECKPOINTS)
    assert "ORDER BY seq DESC" in other.render(_sql_statements.DELETE_OLD_CHECKPOINTS)
    created = other.render(_sql_schema.MIGRATIONS[0][0])
    assert "seq BIGINT GENERATED ALWAYS AS IDENTITY," in created
    assert "graph BYTEA NOT NULL" in created
    query, parameters = _sql_statements.select_due_runs(T0, 5)
    assert parameters == (T0, 5)
    assert other.render(query).count("%s") == 2
    assert other.render(query).endswith(", seq LIMIT %s")


def chain_of(length):
    @executor
    async def step(n: int, ctx: WorkflowContext[int]) -> None:
        if n < length:
            ctx.send_message(n + 1)

    return WorkflowBuilder(step, name="chain").add_edge(step, step).build()


def record_writer_threads(store):
    """Which thread ran each checkpoint insert on the store's writer connection."""
    threads = []

    def traced(statement):
        if statement.lstrip().startswith("INSERT INTO treadle_checkpoints"):
            threads.append(threading.current_thread().name)

    store._connection.set_trace_callback(traced)
    return threads


async def test_a_lone_runs_commits_run_inline_and_others_on_the_thread(tmp_path, monkeypatch):
    store = SqliteStore(tmp_path / "store.sqlite")
    workflow = chain_of(30)
    here = threading.current_thread().name
    # Writes count as quick here whatever this disk does meanwhile (the suite runs
    # tests side by side, and their fsyncs queue): the routing is what is tested.
    monkeypatch.setattr(_sqlite_lanes, "INLINE_UNDER", 1.0)
    # No turns (see test_sqlite_turns.py): what is tested is the thread's routing.
    monkeypatch.setattr(_sqlite_lanes, "TURN_UNDER", 0.0)
    monkeypatch.setattr(_sqlite_lanes, "_PROBE_EVERY", 10**9)
    try:
        await workflow.run(1, store=store)  # opens the file and times the first writes
        store._writer._timing._waits = 1.0
        threads = record_writer_threads(store)
        await workflow.run(1, store=store)
        # One run: inline from its first commit on; its creation, groupable with other
        # runs' (started together), goes to the thread.
        assert threads[0] != here, threads
        assert threads[1:] == [here] * (len(threads) - 1), threads

        # Runs taking turns: their commits go to the writer thread (where they may group).
        threads.clear()
        await asyncio.gather(*(workflow.run(1, store=store) for _ in range(3)))
        assert threads.count(here) <= 10, threads

        # A slow disk (writes over 1 ms on average): the writer thread, always.
        monkeypatch.undo()
        threads.clear()
        store._writer._timing._average = 0.01
        store._writer._timing._waits = 0.01  # each waited on the disk too: no turns either
        store._writer._timing._passed = 0  # and no turn tried for a while
        await workflow.run(1, store=store)
        assert here not in threads[:5], threads
    finally:
        await store.close()


async def test_a_lock_held_by_another_process_never_blocks_the_event_loop(tmp_path):
    # Mid-run, when this run's commits run inline, another process takes the write lock
    # for a second: the commit must wait on the writer thread, not on the event loop.
    path = tmp_path / "store.sqlite"
    store = SqliteStore(path, busy_timeout=10)
    locked = asyncio.Event()
    holder = None
    armed = False

    @executor
    async def step(n: int, ctx: WorkflowContext[int]) -> None:
        nonlocal holder
        if n == 15 and armed:
            holder = subprocess.Popen(  # noqa: ASYNC220 - a real other process, awaited below
                [
                    sys.executable,
                    "-c",
                    (
                        "import sqlite3, sys, time\n"
                        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                        "db.execute('BEGIN IMMEDIATE'); print('locked', flush=True)\n"
                        "time.sleep(1.0); db.execute('COMMIT')"
                    ),
                    str(path),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert await asyncio.to_thread(holder.stdout.readline) == "locked\n"
            locked.set()
        if n < 30:
            ctx.send_message(n + 1)

    workflow = WorkflowBuilder(step, name="chain").add_edge(step, step).build()
    ticks = []

    async def tick():
        await locked.wait()
        while True:
            ticks.append(asyncio.get_running_loop().time())
            await asyncio.sleep(0.01)

    try:
        await workflow.run(1, store=store)  # the writer's timing is known from now on
        armed = True
        ticker = asyncio.create_task(tick())
        result = await workflow.run(1, store=store)
        ticker.cancel()
        await asyncio.to_thread(holder.wait, 10)
        holder.stdout.close()
        assert result.status.value == "completed"
        assert ticks[-1] - ticks[0] > 0.5  # the run did wait for the lock ...
        gaps = [later - earlier for earlier, later in itertools.pairwise(ticks)]
        assert max(gaps) < 0.25, max(gaps)  # ... while the event loop went on
    finally:
        await store.close()
