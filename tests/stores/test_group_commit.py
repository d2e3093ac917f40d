"""Group commit: commits of several runs made at once share one transaction, each fenced alone.

On SQLite the writer thread runs the commits queued behind a busy one as
one group; on PostgreSQL the commits an event loop makes while one of its
transactions is in flight go together in the next. Either way each commit
is fenced by its own lease: a run whose lease is gone is refused (as it
would be alone) and the others in its group commit. A commit refused after
it wrote (a taken checkpoint id) is undone alone too.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg import sql
from test_store_suite import T0, checkpoint, kept_ids

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle._exceptions import LeaseLostError, RunNotFoundError
from treadle._stores import _postgres_batch, _postgres_group
from treadle._stores._records import Lease, RunRecord
from treadle._stores._sql_ownership import READY_CHANNEL
from treadle._stores._sqlite import SqliteStore
from treadle._stores._write_steps import ALL
from treadle.stores import PostgresStore

if TYPE_CHECKING:
    from pathlib import Path

    from treadle._stores._store import Store

pytestmark = pytest.mark.integration

RUNS = ("run-a", "run-b", "run-c", "run-d")


async def _leased_runs(store: Store) -> dict[str, Lease]:
    """run-0 (which goes first, alone) and RUNS, each created and leased by "me"."""
    leases = {}
    for run_id in ("run-0", *RUNS):
        run = RunRecord(run_id, "wf", "running", 0, None, None, None, T0, T0)
        await store.create_run(run, b"graph", checkpoint(run_id, f"{run_id}/0", 0))
        leases[run_id] = await store.acquire(run_id, "me", 30.0)
    return leases


def _at_once(store: Store, chosen: dict[str, Lease]) -> dict[str, Any]:
    """Each run's next checkpoint committed under its lease in ``chosen``, all at once."""
    return {
        run_id: asyncio.ensure_future(
            store.commit_many((checkpoint(run_id, f"{run_id}/1", 1),), lease=lease)
        )
        for run_id, lease in chosen.items()
    }


def _group_of_commits(store: Store, leases: dict[str, Lease]) -> dict[str, Any]:
    """Commits of run-a, run-b under a lease since taken over, run-c and run-d, all at once."""
    stale = Lease("run-b", "me", leases["run-b"].epoch - 1, leases["run-b"].until)
    chosen = {"run-a": leases["run-a"], "run-b": stale}
    return _at_once(store, chosen | {"run-c": leases["run-c"], "run-d": leases["run-d"]})


async def _outcomes(tasks: dict[str, Any]) -> dict[str, object]:
    done = await asyncio.gather(*tasks.values(), return_exceptions=True)
    return {run_id: type(outcome) for run_id, outcome in zip(tasks, done, strict=True)}


async def _positions(store: Store) -> dict[str, str | None]:
    return {run_id: (await store.get_run(run_id)).checkpoint_id for run_id in RUNS}


EXPECTED_OUTCOMES = {"run-a": bool, "run-b": LeaseLostError, "run-c": bool, "run-d": bool}
EXPECTED_POSITIONS = {
    "run-a": "run-a/1",
    "run-b": "run-b/0",
    "run-c": "run-c/1",
    "run-d": "run-d/1",
}


async def test_sqlite_a_group_commits_its_runs_and_refuses_the_one_fenced_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path, busy_timeout=10)
    leases = await _leased_runs(store)
    groups: list[int] = []
    run_group = SqliteStore._run_group

    def recorded(self: SqliteStore, works: list[Any]) -> Any:
        groups.append(len(works))
        return run_group(self, works)

    monkeypatch.setattr(SqliteStore, "_run_group", recorded)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # the writer waits on run-0's commit meanwhile
        first = store.commit_many((checkpoint("run-0", "run-0/1", 1),), lease=leases["run-0"])
        await asyncio.sleep(0.05)
        tasks = _group_of_commits(store, leases)
        await asyncio.sleep(0)  # all queued behind run-0's
        other.execute("ROLLBACK")
        await first
        assert await _outcomes(tasks) == EXPECTED_OUTCOMES
    finally:
        other.close()
    assert groups == [4]
    assert await _positions(store) == EXPECTED_POSITIONS
    # The refused run's owner is told so, and its lease is the new owner's to use.
    await store.commit_many((checkpoint("run-b", "run-b/1", 1),), lease=leases["run-b"])
    await store.close()


async def _hold_run_row(dsn: str, schema: str) -> psycopg.AsyncConnection[Any]:
    """A connection holding run-0's row locked, so its next commit waits (in flight)."""
    other = await psycopg.AsyncConnection.connect(dsn)
    await other.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    await other.execute("SELECT 1 FROM treadle_runs WHERE run_id = 'run-0' FOR UPDATE")
    return other


async def _grouped_on_postgres(
    dsn: str,
    schema: str,
    monkeypatch: pytest.MonkeyPatch,
    commits: Any,
    *,
    leases: dict[str, Lease] | None = None,
) -> tuple[PostgresStore, dict[str, object], list[int]]:
    """Commit run-0 (held, so it stays in flight), then ``commits(store, leases)``, together.

    ``leases``: the runs exist already, so leased.
    """
    store = PostgresStore(dsn, schema=schema)
    if leases is None:
        leases = await _leased_runs(store)
    groups: list[int] = []
    grouped = _postgres_group.GroupCommit._group

    async def recorded(self: Any, makes: list[Any]) -> Any:
        groups.append(len(makes))
        return await grouped(self, makes)

    monkeypatch.setattr(_postgres_group.GroupCommit, "_group", recorded)
    other = await _hold_run_row(dsn, schema)
    try:
        first = asyncio.ensure_future(
            store.commit_many((checkpoint("run-0", "run-0/1", 1),), lease=leases["run-0"])
        )
        await asyncio.sleep(0.2)  # run-0's transaction is in flight, waiting for the row
        assert not first.done()
        tasks = commits(store, leases)
        await asyncio.sleep(0)
        await other.rollback()
        await first
        outcomes = await _outcomes(tasks)
    finally:
        await other.close()
    return store, outcomes, groups


async def test_postgres_a_group_commits_its_runs_and_refuses_the_one_fenced_out(
    dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, outcomes, groups = await _grouped_on_postgres(
        dsn, schema, monkeypatch, _group_of_commits
    )
    try:
        assert outcomes == EXPECTED_OUTCOMES
        assert groups == [4]
        assert await _positions(store) == EXPECTED_POSITIONS
    finally:
        await store.close()


def _with_taken_id_and_unknown_run(store: Store, leases: dict[str, Lease]) -> dict[str, Any]:
    """run-a, run-b reusing run-a's checkpoint id, an unknown run, run-c: all at once."""
    commits = {
        "run-a": checkpoint("run-a", "run-a/1", 1),
        "run-b": checkpoint("run-b", "run-a/1", 1),  # taken: refused after its row moved
        "nobody": checkpoint("nobody", "nobody/1", 1),
        "run-c": checkpoint("run-c", "run-c/1", 1),
    }
    return {
        run_id: asyncio.ensure_future(
            store.commit_many((record,), lease=leases.get(run_id, leases["run-a"]))
        )
        for run_id, record in commits.items()
    }


async def test_postgres_a_commit_refused_after_it_wrote_is_undone_alone(
    dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, outcomes, groups = await _grouped_on_postgres(
        dsn, schema, monkeypatch, _with_taken_id_and_unknown_run
    )
    try:
        assert outcomes == {
            "run-a": bool,
            "run-b": ValueError,
            "nobody": RunNotFoundError,
            "run-c": bool,
        }
        assert groups == [4]
        positions = await _positions(store)
        assert positions == {
            "run-a": "run-a/1",
            "run-b": "run-b/0",  # its row moved on in the group, and back with its refusal
            "run-c": "run-c/1",
            "run-d": "run-d/0",
        }
        assert await kept_ids(store, "run-b") == ["run-b/0"]
    finally:
        await store.close()


async def test_postgres_a_commit_cancelled_while_it_waits_for_its_group_is_not_made(
    dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def cancelling_run_b(store: Store, leases: dict[str, Lease]) -> dict[str, Any]:
        tasks = _at_once(store, {run_id: leases[run_id] for run_id in ("run-a", "run-b", "run-c")})
        asyncio.get_running_loop().call_soon(tasks["run-b"].cancel)  # once it waits
        return tasks

    store, outcomes, groups = await _grouped_on_postgres(dsn, schema, monkeypatch, cancelling_run_b)
    try:
        assert outcomes["run-b"] is asyncio.CancelledError
        assert groups == [2]  # run-a's and run-c's: run-b's was dropped before it began
        assert (await _positions(store))["run-b"] == "run-b/0"
    finally:
        await store.close()


async def test_postgres_a_group_of_commits_is_one_query_its_commit_included(
    dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every commit's usual answers are taken for granted: the group's statements go as one."""
    queries: list[str] = []
    executed = psycopg.AsyncClientCursor.execute
    alone = _postgres_group.GroupCommit._one

    async def recorded(self: psycopg.AsyncClientCursor[Any], query: Any, *args: Any) -> Any:
        queries.append(query.decode() if isinstance(query, bytes) else str(query))
        return await executed(self, query, *args)

    async def not_alone(self: Any, make: Any) -> Any:
        raise AssertionError("the group was driven again, one by one")

    def three(store: Store, leases: dict[str, Lease]) -> dict[str, Any]:
        monkeypatch.setattr(psycopg.AsyncClientCursor, "execute", recorded)
        monkeypatch.setattr(_postgres_group.GroupCommit, "_one", not_alone)
        return _at_once(store, {run_id: leases[run_id] for run_id in ("run-a", "run-c", "run-d")})

    store, outcomes, groups = await _grouped_on_postgres(dsn, schema, monkeypatch, three)
    monkeypatch.setattr(_postgres_group.GroupCommit, "_one", alone)
    try:
        assert outcomes == {"run-a": bool, "run-c": bool, "run-d": bool}
        assert groups == [3]
        [query] = queries  # BEGIN, three commits' statements, COMMIT: one round trip
        assert query.count("EXECUTE treadle_") == 6  # each its fenced advance, its checkpoint
        assert query.startswith(("BEGIN", "PREPARE"))
        assert query.count("BEGIN") == 1
        assert query.endswith(";\nCOMMIT")
        positions = await _positions(store)
        assert [positions[run_id] for run_id in ("run-a", "run-c", "run-d")] == [
            "run-a/1",
            "run-c/1",
            "run-d/1",
        ]
    finally:
        await store.close()


async def test_postgres_a_pause_asked_of_one_run_of_a_group_is_honoured_by_its_commit(
    dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer taken for granted (no pause asked) is wrong for run-c: each commits alone."""

    def asking_run_c(store: Store, leases: dict[str, Lease]) -> dict[str, Any]:
        return _at_once(store, {run_id: leases[run_id] for run_id in ("run-a", "run-c", "run-d")})

    store = PostgresStore(dsn, schema=schema)
    leases = await _leased_runs(store)
    assert await store.pause("run-c") == "requested"
    await store.close()
    store, outcomes, groups = await _grouped_on_postgres(
        dsn, schema, monkeypatch, asking_run_c, leases=leases
    )
    try:
        assert outcomes == {"run-a": bool, "run-c": bool, "run-d": bool}
        assert groups == [3]
        assert {run_id: (await store.get_run(run_id)).status for run_id in RUNS} == {
            "run-a": "running",
            "run-b": "running",
            "run-c": "paused",
            "run-d": "running",
        }
        assert (await _positions(store))["run-c"] == "run-c/1"  # its superstep, then the pause
    finally:
        await store.close()


async def test_postgres_a_batch_quotes_its_parameters_as_psycopg_binds_them(dsn: str) -> None:
    """The batch's query is put together here: each value reaches the server as it was."""
    values = ("it's", "back\\slash %s %% ?", "", None, b"\x00'\xff", 1.5, -(2**62), True)
    casts = ("TEXT", "TEXT", "TEXT", "TEXT", "BYTEA", "DOUBLE PRECISION", "BIGINT", "BOOLEAN")
    rendered = "SELECT " + ", ".join(f"CAST(%s AS {cast})" for cast in casts)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as connection:
        sender = _postgres_batch.BatchSender(connection, _postgres_batch.Prepared())
        sent = sender.send(rendered, values, ALL)
        await sender.flush(last=True)
        assert sender.committed
        assert sent.answer == [values]


async def test_postgres_a_run_is_made_in_three_queries_and_let_go_with_its_last_commit(
    dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's creation waits only for the answers it needs; its last commit lets it go too.

    Creating a run asks whether its id is new, then for the end of the audit
    chain (whose lock goes in the same query: the chain is held for one round
    trip and the COMMIT, not one per statement); the rest goes with the COMMIT.
    The commit that ends the run gives its lease up in the same query,
    taking for granted that nothing came meanwhile (the server checks).
    """

    @executor(id="once")
    async def once(x: int, ctx: WorkflowContext[int]) -> None:
        ctx.yield_output(x)

    workflow = WorkflowBuilder(once, name="once").build()
    store = PostgresStore(dsn, schema=schema)
    try:
        await workflow.run(0, store=store)  # statements prepared on the connection
        queries: list[str] = []
        executed = psycopg.AsyncCursor.execute

        async def recorded(
            self: psycopg.AsyncCursor[Any], query: Any, *args: Any, **kw: Any
        ) -> Any:
            queries.append(query.decode() if isinstance(query, bytes) else str(query))
            return await executed(self, query, *args, **kw)

        monkeypatch.setattr(psycopg.AsyncCursor, "execute", recorded)
        result = await workflow.run(1, store=store, run_id="made")
        monkeypatch.undo()
        assert result.outputs == [1]
        ours = [q for q in queries if "pg_prepared_statements" not in q]
        made, chained, created, finished = ours
        assert made.startswith("BEGIN")
        assert made.count("EXECUTE") == 1  # is the id new?
        assert "LOCK TABLE treadle_audit" in chained  # with the read of the chain's end
        assert created.endswith("COMMIT")
        assert finished.endswith("COMMIT")
        assert finished.startswith("BEGIN")
        row = await store.get_run("made")
        assert (row.status, row.owner) == ("completed", None)
        assert [e.action for e in await store.read_audit("made")] == ["run_created"]
    finally:
        await store.close()


async def test_postgres_a_release_guessed_quiet_is_driven_again_when_a_message_came(
    dsn: str, schema: str
) -> None:
    """A message delivered while the run is owned makes the guess wrong: driven again, seen."""
    store = PostgresStore(dsn, schema=schema)

    @executor(id="listen")
    async def listen(x: int, ctx: WorkflowContext) -> None:
        row = await store.get_run(ctx.run_id)  # another sender, while this process owns the run
        await store.deliver(ctx.run_id, [("message", None, b"1")], version=row.version)
        ctx.state.set("heard", x)  # and the run rests, its lease given up with its commit

    rests = WorkflowBuilder(listen, name="rests").add_state("heard", default=0).build()
    announced = psycopg.connect(dsn, autocommit=True)
    try:
        announced.execute(sql.SQL("LISTEN {}").format(sql.Identifier(READY_CHANNEL)))
        result = await rests.run(1, store=store, run_id="heard")
        assert result.status.value == "completed"
        with psycopg.connect(dsn) as connection:
            ready, owner = connection.execute(
                sql.SQL(
                    "SELECT ready_at, owner FROM {}.treadle_runs WHERE run_id = 'heard'"
                ).format(sql.Identifier(schema))
            ).fetchone() or (None, None)
        assert owner is None
        assert ready is not None
        # The guess (nothing came) was wrong and not taken for true: idle workers were told
        # by the release too, after the delivery's own announcement.
        # (Tests of other schemas, run alongside, announce on the same channel.)
        heard = []
        for notice in announced.notifies(timeout=1.0):
            heard += [notice.payload] if notice.payload == schema else []
            if len(heard) == 2:  # the delivery's and the release's
                break
        assert heard == [schema, schema]
    finally:
        announced.close()
        await store.close()
