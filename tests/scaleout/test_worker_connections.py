"""``treadle worker --connections``: how many PostgreSQL connections a worker holds.

Many workers share one server's ``max_connections``; each holds its pool and
one listening connection. An operator sizes that with ``--connections`` (or
``TREADLE_CONNECTIONS``), and the worker then serves as many runs at once on
fewer connections: a statement waits its turn in the pool.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import TYPE_CHECKING

import psycopg
from processes import PYTHONPATH, TREADLE, wait_until

import forked
import treadle.workers

if TYPE_CHECKING:
    from treadle.stores import PostgresStore


async def connections_named(dsn: str, name: str) -> int:
    """The server's connections whose ``application_name`` is ``name`` (libpq's ``PGAPPNAME``)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        cursor = await db.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


RUNS = 24  # more than the worker's 16 at once, and 16 at once far more than its connections


async def test_a_worker_given_two_connections_serves_sixteen_runs_at_once_on_three(
    dsn: str, schema: str, store: PostgresStore
) -> None:
    client = treadle.workers.Client(store)
    for n in range(RUNS):
        await client.start("counter", {"total": 10, "pause": 0.002}, run_id=f"c{n:02}")
    name = f"treadle-test-{uuid.uuid4().hex[:12]}"
    env = {**os.environ, "TREADLE_SCHEMA": schema, "PYTHONPATH": PYTHONPATH, "PGAPPNAME": name}
    env.pop("TREADLE_CONNECTIONS", None)  # the flag alone decides
    argv = [TREADLE, "worker", "--app", "scale_app", "--store", dsn, "--concurrency", "16"]
    argv += ["--connections", "2", "--poll-interval", "0.05"]
    most = 0
    with forked.start("treadle._cli._app:main", env=env, argv=argv) as worker:

        async def all_completed() -> bool:
            nonlocal most
            assert worker.poll() is None, worker.communicate()[1]
            most = max(most, await connections_named(dsn, name))
            runs = [await store.get_run(f"c{n:02}") for n in range(RUNS)]
            return all(run.status == "completed" for run in runs)

        await asyncio.wait_for(wait_until(all_completed, interval=0.05), 45)
        worker.terminate()
        assert worker.wait(30) == 0, worker.communicate()[1]
    assert 1 <= most <= 3  # the pool's two and the one that listens for new runs


def test_connections_for_a_sqlite_store_is_refused_in_one_line(tmp_path) -> None:
    argv = [TREADLE, "worker", "--app", "scale_app", "--store", str(tmp_path / "runs.sqlite")]
    env = {**os.environ, "PYTHONPATH": PYTHONPATH}
    with forked.start(
        "treadle._cli._app:main", env=env, argv=[*argv, "--connections", "2"]
    ) as worker:
        out, err = worker.communicate(timeout=60)
    assert worker.returncode == 2, (out, err)
    assert err.strip().splitlines() == [
        "error: --connections sizes a PostgreSQL store's pool; a SQLite store has none"
    ]


def test_treadle_connections_that_is_no_count_is_named(dsn: str, schema: str) -> None:
    env = {**os.environ, "TREADLE_SCHEMA": schema, "PYTHONPATH": PYTHONPATH}
    env["TREADLE_CONNECTIONS"] = "many"
    argv = [TREADLE, "worker", "--app", "scale_app", "--store", dsn]
    with forked.start("treadle._cli._app:main", env=env, argv=argv) as worker:
        out, err = worker.communicate(timeout=60)
    assert worker.returncode == 2, (out, err)
    assert (
        "TREADLE_CONNECTIONS must be a whole number of connections, at least 1, got 'many'" in err
    )
