"""What only PostgresStore promises: migrations, many pools, atomic commits, hidden passwords."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
import traceback
from collections import Counter

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from test_store_suite import T0, checkpoint, commit_many, kept_ids, new_run

from treadle import RunStatus
from treadle._exceptions import CheckpointNotFoundError, DurabilityError
from treadle._stores import _sql_dialect, _sql_schema, _sql_statements
from treadle._stores._store import CheckpointInfo, RunRecord
from treadle.stores import PostgresStore
from workflow.test_durable_runs import Count, counting_workflow

pytestmark = pytest.mark.integration

KNOWN = len(_sql_schema.MIGRATIONS)

# The schema migration step 1 makes in PostgreSQL, spelled out: databases made
# by it exist, so neither this nor the step may ever change.
VERSION_1 = (
    """CREATE TABLE treadle_runs (
        seq BIGINT GENERATED ALWAYS AS IDENTITY,
        run_id TEXT NOT NULL PRIMARY KEY, workflow TEXT NOT NULL, status TEXT NOT NULL,
        superstep BIGINT NOT NULL, checkpoint_id TEXT, parent_run_id TEXT,
        parent_checkpoint_id TEXT, created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL, error TEXT, graph BYTEA NOT NULL)""",
    "CREATE INDEX treadle_runs_status ON treadle_runs (status)",
    "CREATE INDEX treadle_runs_parent ON treadle_runs (parent_run_id)",
    """CREATE TABLE treadle_checkpoints (
        seq BIGINT GENERATED ALWAYS AS IDENTITY,
        checkpoint_id TEXT NOT NULL PRIMARY KEY, run_id TEXT NOT NULL,
        superstep BIGINT NOT NULL, status TEXT NOT NULL, parent_checkpoint_id TEXT,
        created_at DOUBLE PRECISION NOT NULL, blob BYTEA NOT NULL)""",
    "CREATE INDEX treadle_checkpoints_run ON treadle_checkpoints (run_id, superstep, created_at)",
)
SECRET = "pw-S3CRET-9f2"  # noqa: S105 - the password that must never show


async def connect(dsn, schema=None):
    """A connection of the test's own, in ``schema`` (created if missing)."""
    connection = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    if schema is not None:
        name = sql.Identifier(schema)
        await connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
        await connection.execute(sql.SQL("SET search_path TO {}").format(name))
    return connection


async def schema_version(dsn, schema):
    async with await connect(dsn, schema) as connection:
        rows = await (await connection.execute("SELECT version FROM treadle_schema")).fetchall()
    return [version for (version,) in rows]


async def make_schema(dsn, schema):
    store = PostgresStore(dsn, schema=schema)
    await new_run(store)
    await commit_many(store, "run-1", ["c1"])
    await store.close()


def words(statement):
    spaced = statement.replace("(", " ( ").replace(")", " ) ").replace(",", " , ")
    return " ".join(spaced.split())


def test_importing_the_stores_namespace_does_not_import_psycopg():
    code = "import sys, treadle.stores; print(sorted(m for m in sys.modules if 'psycopg' in m))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


def test_migration_step_1_is_still_the_version_1_schema():
    assert [words(_sql_dialect.POSTGRES.render(step)) for step in _sql_schema.MIGRATIONS[0]] == [
        words(statement) for statement in VERSION_1
    ]


async def test_a_version_1_schema_is_migrated_with_its_runs_and_checkpoints(dsn, new_schema):
    schema = new_schema()
    async with await connect(dsn, schema) as connection:
        for statement in VERSION_1:
            await connection.execute(statement)
        await connection.execute("CREATE TABLE treadle_schema (version INTEGER NOT NULL)")
        await connection.execute("INSERT INTO treadle_schema (version) VALUES (1)")
        async with connection.cursor() as cursor:
            await cursor.executemany(
                "INSERT INTO treadle_runs (run_id, workflow, status, superstep, checkpoint_id,"
                " parent_run_id, parent_checkpoint_id, created_at, updated_at, error, graph)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    ("held", "wf", "waiting", 1, "held/1", None, None, T0, T0 + 1, None, b"graph"),
                    ("done", "wf", "failed", 0, "done/0", None, None, T0 + 2, T0 + 3, "boom", b""),
                ],
            )
            await cursor.executemany(
                "INSERT INTO treadle_checkpoints (checkpoint_id, run_id, superstep, status,"
                " parent_checkpoint_id, created_at, blob) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [
                    ("held/0", "held", 0, "running", None, T0, b"zero"),
                    ("held/1", "held", 1, "waiting", "held/0", T0 + 1, b"one"),
                    ("done/0", "done", 0, "running", None, T0 + 2, b"d"),
                ],
            )
    store = PostgresStore(dsn, schema=schema)
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
    assert await schema_version(dsn, schema) == [KNOWN] == [20]


async def test_a_migration_that_fails_leaves_the_schema_as_it_was(dsn, new_schema, monkeypatch):
    schema = new_schema()
    await make_schema(dsn, schema)
    broken = ("ALTER TABLE treadle_runs ADD COLUMN later TEXT", "CREATE INDEX o ON missing (x)")
    monkeypatch.setattr(_sql_schema, "MIGRATIONS", (*_sql_schema.MIGRATIONS, broken))
    store = PostgresStore(dsn, schema=schema)
    with pytest.raises(DurabilityError, match='relation "missing" does not exist'):
        await store.get_run("run-1")
    await store.close()
    monkeypatch.undo()
    assert await schema_version(dsn, schema) == [KNOWN]
    store = PostgresStore(dsn, schema=schema)
    assert await kept_ids(store) == ["c0", "c1"]
    await store.close()
    async with await connect(dsn, schema) as connection:
        with pytest.raises(psycopg.errors.UndefinedColumn):
            await connection.execute("SELECT later FROM treadle_runs")


async def test_a_schema_from_a_newer_treadle_is_refused_untouched(dsn, new_schema):
    schema = new_schema()
    await make_schema(dsn, schema)
    async with await connect(dsn, schema) as connection:
        await connection.execute("UPDATE treadle_schema SET version = %s", (KNOWN + 1,))
    store = PostgresStore(dsn, schema=schema)
    with pytest.raises(DurabilityError, match=f"newer than version {KNOWN}"):
        await store.get_run("run-1")
    await store.close()
    assert await schema_version(dsn, schema) == [KNOWN + 1]


async def test_two_stores_open_one_new_schema_and_commit_at_once(dsn, new_schema):
    schema = new_schema()
    # Two pools that both find the schema missing: their migrations take turns.
    stores = [PostgresStore(dsn, schema=schema, max_size=3) for _ in range(2)]

    async def work(store, prefix):
        for n in range(8):
            await new_run(store, f"{prefix}-{n}", first=f"{prefix}-{n}/c0")
        async with asyncio.TaskGroup() as group:
            for n in range(8):
                ids = [f"{prefix}-{n}/c{step}" for step in range(1, 11)]
                group.create_task(commit_many(store, f"{prefix}-{n}", ids, keep_last=4))

    try:
        async with asyncio.TaskGroup() as group:
            for store, prefix in zip(stores, "ab", strict=True):
                group.create_task(work(store, prefix))
        for store in stores:  # each sees both stores' runs, whole
            assert len(await store.list_runs()) == 16
            for run_id in [f"{prefix}-{n}" for prefix in "ab" for n in range(8)]:
                expected = [f"{run_id}/c{step}" for step in range(7, 11)]
                assert await kept_ids(store, run_id) == expected
        # One run, both stores: commits queue on its row, retention counts them all.
        await new_run(stores[0], "shared", first="shared/c0")
        async with asyncio.TaskGroup() as group:
            for n, store in enumerate(stores):
                ids = [f"shared/{n}-{step}" for step in range(10)]
                group.create_task(commit_many(store, "shared", ids, keep_last=3))
        kept = await stores[1].list_checkpoints("shared")
        latest = (await stores[0].get_run("shared")).checkpoint_id
        assert len(kept) == 3
        assert latest in [info.checkpoint_id for info in kept]
    finally:
        for store in stores:
            await store.close()
    assert await schema_version(dsn, schema) == [KNOWN]


async def blocked_backend(watcher, application_name):
    """The pid of the store's connection once it waits for a lock, at most 10 s on."""
    for _ in range(1000):
        found = await watcher.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
            " AND wait_event_type = 'Lock' AND query LIKE '%%DELETE FROM treadle_checkpoints%%'",
            (application_name,),
        )
        if row := await found.fetchone():
            return row[0]
        await asyncio.sleep(0.01)  # the server's time, not ours: nothing to fake
    raise AssertionError("the commit never reached its retention delete")


@pytest.mark.parametrize("interruption", ["cancelled", "connection-killed", "statement-failed"])
async def test_a_commit_interrupted_inside_its_transaction_leaves_nothing_half_written(
    dsn, new_schema, interruption
):
    schema, application_name = new_schema(), f"treadle-{interruption}"
    store = PostgresStore(make_conninfo(dsn, application_name=application_name), schema=schema)
    await new_run(store)
    await commit_many(store, "run-1", ["c1", "c2"])
    before = await store.get_run("run-1")
    async with await connect(dsn, schema) as other:
        if interruption == "statement-failed":
            await other.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql"
                " AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$"
            )
            await other.execute(
                "CREATE TRIGGER refuse BEFORE DELETE ON treadle_checkpoints"
                " FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
            with pytest.raises(DurabilityError, match="injected failure"):
                await store.commit(checkpoint("run-1", "c3", 3), keep_last=1)
            await other.execute("DROP TRIGGER refuse ON treadle_checkpoints")
        else:
            # Hold c0, so the commit stops at its last statement: retention.
            async with other.transaction():
                await other.execute(
                    "SELECT 1 FROM treadle_checkpoints WHERE checkpoint_id = 'c0' FOR UPDATE"
                )
                committing = asyncio.create_task(
                    store.commit(checkpoint("run-1", "c3", 3), keep_last=1)
                )
                async with await connect(dsn) as watcher:
                    pid = await blocked_backend(watcher, application_name)
                    if interruption == "cancelled":
                        committing.cancel()
                    else:
                        await watcher.execute("SELECT pg_terminate_backend(%s)", (pid,))
                # Heard while c0 is still held: a commit driven again on another
                # connection would wait for this transaction, which waits for it.
                with pytest.raises(
                    asyncio.CancelledError if interruption == "cancelled" else DurabilityError
                ):
                    async with asyncio.timeout(10):
                        await committing
    assert await store.get_run("run-1") == before
    assert await kept_ids(store) == ["c0", "c1", "c2"]
    with pytest.raises(CheckpointNotFoundError):
        await store.load_checkpoint("run-1", "c3")
    await store.commit(checkpoint("run-1", "c3", 3), keep_last=1)  # the store goes on
    assert await kept_ids(store) == ["c3"]
    await store.close()


def assert_hidden(error, *texts):
    shown = "".join(traceback.format_exception(error)) + "".join(map(repr, texts))
    assert SECRET not in shown
    assert "***" in str(error)


async def test_the_dsn_password_never_appears_in_errors(dsn, new_schema):
    unreachable = [
        f"postgresql://treadle:{SECRET}@127.0.0.1:1/test",
        f"postgresql://treadle@127.0.0.1:1/test?password={SECRET}&connect_timeout=5",
        f"host=127.0.0.1 port=1 dbname=test user=treadle password={SECRET}",
        f"host=127.0.0.1 port=1 dbname=test password='{SECRET} x'",
    ]
    for wrong in unreachable:
        store = PostgresStore(wrong)
        with pytest.raises(DurabilityError, match="Connection refused") as raised:
            await store.list_runs()
        assert_hidden(raised.value, store)
        await store.close()
    with pytest.raises(ValueError, match="not a PostgreSQL connection string") as raised:
        PostgresStore(f"host=127.0.0.1 {SECRET}")
    assert SECRET not in "".join(traceback.format_exception(raised.value))
    # A reachable server: trust authentication ignores the password; a query fails.
    secret = conninfo_to_dict(dsn).get("password") or SECRET
    schema = new_schema()
    store = PostgresStore(make_conninfo(dsn, password=secret), schema=schema)
    await new_run(store)
    async with await connect(dsn, schema) as other:
        await other.execute("DROP TABLE treadle_checkpoints")
    with pytest.raises(DurabilityError, match="treadle_checkpoints") as raised:
        await store.load_checkpoint("run-1")
    assert_hidden(raised.value, store)
    await store.close()


async def test_due_runs_read_one_index_that_also_gives_their_order(dsn, new_schema):
    schema = new_schema()
    store = PostgresStore(dsn, schema=schema)
    await new_run(store, status="waiting", wake_at=T0)
    await store.close()
    query, parameters = _sql_statements.select_due_runs(T0, 10)
    async with await connect(dsn, schema) as connection, connection.transaction():
        await connection.execute("SET LOCAL enable_seqscan = off")  # a tiny table otherwise
        explained = await connection.execute(
            f"EXPLAIN {_sql_dialect.POSTGRES.render(query)}", parameters
        )
        plan = " | ".join(row[0] for row in await explained.fetchall())
    assert "Index Scan using treadle_runs_due" in plan
    assert "Sort" not in plan  # the index is in due order, ties by insertion


def test_each_event_loop_has_a_pool_closed_with_the_loop(dsn, new_schema, monkeypatch):
    # psycopg_pool logs a connection attempt cut short by its loop's end with the
    # exception, whose frames hold the half-made connection: pytest keeps the
    # records, and so would keep it open till the test's end.
    monkeypatch.setattr(logging.getLogger("psycopg.pool"), "propagate", False)
    application_name = "treadle-loops"
    named = make_conninfo(dsn, application_name=application_name)
    store = PostgresStore(named, schema=new_schema(), min_size=2, max_size=4)

    def connections():
        with psycopg.connect(dsn) as watcher:
            query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            return watcher.execute(query, (application_name,)).fetchone()[0]

    def connections_soon():
        # A backend leaves pg_stat_activity a moment after its client hangs up.
        for _ in range(200):
            if (count := connections()) == 0:
                return 0
            time.sleep(0.01)
        return count

    async def busy(run_id):
        await new_run(store, run_id, first=f"{run_id}/c0")
        async with asyncio.TaskGroup() as group:
            for n in range(1, 9):
                group.create_task(store.commit(checkpoint(run_id, f"{run_id}/c{n}", n)))
        return connections()

    for n in range(3):
        assert 2 <= asyncio.run(busy(f"run-{n}")) <= 4  # min_size, max_size
        assert connections_soon() == 0  # the pool closed as its loop shut down
    assert [len(asyncio.run(kept_ids(store, f"run-{n}"))) for n in range(3)] == [9] * 3
    asyncio.run(store.close())
    assert connections_soon() == 0


async def test_a_workflow_runs_resumes_and_forks_on_postgresql(dsn, new_schema):
    store = PostgresStore(dsn, schema=new_schema())
    calls: Counter = Counter()
    wf = counting_workflow(store, calls)
    first = await wf.run(Count(1), run_id="parent")
    history = await wf.history("parent")
    assert [c.superstep for c in history.checkpoints] == list(range(11))
    k = history.checkpoints[4]
    calls.clear()
    again = await wf.resume("parent", k.checkpoint_id)
    assert sorted(calls) == list(range(5, 11))
    assert (again.outputs, again.state) == (first.outputs, first.state) == ([55], {"sum": 55})
    child_id = await wf.fork("parent", k.checkpoint_id, state_patch={"sum": 1000})
    child = await wf.resume(child_id)
    assert child.outputs == [1000 + 5 + 6 + 7 + 8 + 9 + 10]
    child_history = await wf.history(child_id)
    assert (child_history.run.parent_run_id, child_history.run.parent_checkpoint_id) == (
        "parent",
        k.checkpoint_id,
    )
    assert [run.run_id for run in (await wf.history("parent")).forks] == [child_id]
    assert (await store.get_run("parent")).status == RunStatus.COMPLETED.value
    await store.close()


def test_run_sync_and_resume_sync_each_in_a_fresh_loop(dsn, new_schema):
    store = PostgresStore(dsn, schema=new_schema())
    wf = counting_workflow(store, Counter(), last=4)
    with pytest.raises(Exception, match="max_supersteps=2"):
        wf.run_sync(Count(1), run_id="r1", max_supersteps=2)
    assert wf.resume_sync("r1").outputs == [10]
    asyncio.run(store.close())


async def test_a_release_waiting_on_a_delivery_leaves_the_run_ready_for_its_items(dsn, new_schema):
    # A delivery holds the run row while a release comes in: the release must
    # see the delivered item once it gets the row, or nothing would apply it.
    schema = new_schema()
    store = PostgresStore(dsn, schema=schema)
    try:
        await new_run(store, status="awaiting_input")
        lease = await store.acquire("run-1", "owner", 30)
        async with await connect(dsn, schema) as delivering, delivering.transaction():
            await delivering.execute("SELECT 1 FROM treadle_runs WHERE run_id = 'run-1' FOR UPDATE")
            await delivering.execute(
                "INSERT INTO treadle_inbox (run_id, kind, target, payload, created_at)"
                " VALUES ('run-1', 'answer', 'q', '\"a\"', %s)",
                (time.time(),),
            )
            await delivering.execute(
                "UPDATE treadle_runs SET ready_at = %s WHERE run_id = 'run-1'", (time.time(),)
            )
            releasing = asyncio.create_task(store.release(lease))
            await asyncio.sleep(0.3)  # the release now waits for the row
            assert not releasing.done()
        assert await releasing is True
        row = await store.get_run("run-1")
        assert (row.owner, row.lease_until) == (None, None)
        ((claimed, _, delivered, _),) = await store.claim(
            "service", 30, T0, limit=5
        )  # ready: taken up
        assert (claimed.run_id, delivered) == ("run-1", True)
    finally:
        await store.close()


async def test_a_connection_the_server_ended_while_idle_is_replaced_at_checkout(dsn, new_schema):
    """Checkout asks the server nothing, unless the socket says it spoke (here, its goodbye)."""
    application_name = "treadle-ended-idle"
    store = PostgresStore(
        make_conninfo(dsn, application_name=application_name), schema=new_schema(), max_size=1
    )
    await new_run(store)
    async with await connect(dsn) as watcher:
        await watcher.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (application_name,),
        )
        for _ in range(1000):  # until the backend has gone, its goodbye sent
            gone = await watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                (application_name,),
            )
            if await gone.fetchone() == (0,):
                break
            await asyncio.sleep(0.01)  # the server's time, not ours: nothing to fake
    await commit_many(store, "run-1", ["c1"])  # on a new connection, without an error
    assert await kept_ids(store) == ["c0", "c1"]
    await store.close()
