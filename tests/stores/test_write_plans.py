"""The write plans are values a driver may batch: commits of several runs in one transaction.

Each SQL store drives one plan per transaction today (SQLite groups them,
one savepoint each); these tests drive the commit plans of several runs in
one transaction of a real SQLite file and of the real PostgreSQL, with the
drivers the stores use, and show each run's refusal stays its own. That is
what group commit across runs (one transaction, one fsync or round trip for
many runs' barriers) builds on.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import TYPE_CHECKING, Any

import pytest

from treadle._exceptions import LeaseLostError, RunNotFoundError
from treadle._stores import _postgres_writes, _sqlite_writes
from treadle._stores._records import CheckpointInfo, CheckpointRecord, Lease, RunRecord
from treadle._stores._sqlite import SqliteStore
from treadle._stores._sqlite_transactions import each_saved, transaction
from treadle._stores._write_plans import Owned, commit
from treadle._stores._write_steps import POSTGRES_WRITES, SQLITE_WRITES

if TYPE_CHECKING:
    from pathlib import Path

    from treadle._stores._store import Store

T0 = 1_700_000_000.0
RUNS = ("a", "b", "c")


def _checkpoint(run_id: str, superstep: int) -> CheckpointRecord:
    info = CheckpointInfo(f"{run_id}{superstep}", run_id, superstep, "running", None, T0, None)
    return CheckpointRecord(info, b"blob")


async def _three_runs(store: Store) -> dict[str, Lease]:
    leases = {}
    for run_id in RUNS:
        run = RunRecord(run_id, "wf", "running", 0, None, None, None, T0, T0)
        await store.create_run(run, b"graph", _checkpoint(run_id, 0))
        leases[run_id] = await store.acquire(run_id, "me", 30.0)
    return leases


def _plans(leases: dict[str, Lease], backend: Any) -> list[Any]:
    """Commit plans of a, a run that is not there, b under a stale lease, and c."""
    stale = Lease("b", "me", leases["b"].epoch - 1, leases["b"].until)
    chosen = [("a", leases["a"]), ("ghost", leases["a"]), ("b", stale), ("c", leases["c"])]
    return [
        functools.partial(
            commit, (_checkpoint(run_id, 1),), None, Owned(lease, None, False), backend
        )
        for run_id, lease in chosen
    ]


async def _positions(store: Store) -> dict[str, str | None]:
    return {run_id: (await store.get_run(run_id)).checkpoint_id for run_id in RUNS}


async def test_sqlite_commits_of_several_runs_share_one_transaction(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    store = SqliteStore(path)
    leases = await _three_runs(store)
    works = [
        functools.partial(lambda make, c: _sqlite_writes.drive(make(), c), make)
        for make in _plans(leases, SQLITE_WRITES)
    ]
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        outcomes = transaction(connection, functools.partial(each_saved, works), write=True)
    finally:
        connection.close()
    assert [type(error) for _, error in outcomes] == [
        type(None),
        RunNotFoundError,
        LeaseLostError,
        type(None),
    ]
    assert await _positions(store) == {"a": "a1", "b": "b0", "c": "c1"}
    await store.close()


async def test_postgres_commits_of_several_runs_share_one_transaction(
    dsn: str, schema: str
) -> None:
    from treadle._stores._postgres import PostgresStore  # noqa: PLC0415 - psycopg on demand

    store = PostgresStore(dsn, schema=schema)
    try:
        leases = await _three_runs(store)
        plans = _plans(leases, POSTGRES_WRITES)

        async def work(connection: Any) -> list[object]:
            outcomes: list[object] = []
            for make in plans:
                try:
                    async with connection.transaction():  # a savepoint in the outer one
                        outcomes.append(await _postgres_writes.drive(make(), connection))
                except (RunNotFoundError, LeaseLostError) as refused:
                    outcomes.append(type(refused))
            return outcomes

        assert await store.transact(work) == [False, RunNotFoundError, LeaseLostError, False]
        assert await _positions(store) == {"a": "a1", "b": "b0", "c": "c1"}
    finally:
        await store.close()


@pytest.mark.parametrize("backend", [SQLITE_WRITES, POSTGRES_WRITES], ids=["sqlite", "postgres"])
def test_a_plan_is_a_value_until_driven(backend: Any) -> None:
    """Making a plan touches nothing: a driver decides when and where it runs."""
    plan = commit((_checkpoint("a", 1),), None, None, backend)
    template, parameters, _, _ = next(plan)
    assert template == backend.advance
    assert parameters[-1] == "a"
    plan.close()
