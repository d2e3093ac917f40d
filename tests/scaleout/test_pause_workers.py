"""Pausing runs that ``treadle worker`` processes serve, through the client.

A run a worker is advancing pauses at that worker's next barrier, with a
checkpoint; while it is paused the workers keep serving other runs and never
take it up; unpausing hands it back to them, and it ends with the outputs
of an uninterrupted run, every superstep committed once.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import TYPE_CHECKING

from processes import start_worker, wait_until
from psycopg import sql

import treadle.workers
from treadle import RunStatus
from treadle._stores._postgres_queue import RunQueue
from treadle.stores import MemoryStore
from workflow import pause_app
from workflow.pause_app import Job, lines

if TYPE_CHECKING:
    from pathlib import Path

    from treadle.stores import PostgresStore


async def install_commit_log(dsn: str, schema: str) -> None:
    """Log every checkpoint insert in a table with no unique key, by trigger."""
    import psycopg  # noqa: PLC0415 - the extra's driver, for the test's own table

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        await db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await db.execute("CREATE TABLE commit_log (run_id TEXT, superstep BIGINT)")
        await db.execute(
            "CREATE FUNCTION log_commit() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN INSERT INTO commit_log VALUES (NEW.run_id, NEW.superstep); RETURN NEW; END $$"
        )
        await db.execute(
            "CREATE TRIGGER log_commit AFTER INSERT ON treadle_checkpoints"
            " FOR EACH ROW EXECUTE FUNCTION log_commit()"
        )


async def commits(dsn: str, schema: str, run_id: str) -> Counter[int]:
    """How often each superstep of the run was committed."""
    import psycopg  # noqa: PLC0415

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        await db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        found = await db.execute("SELECT superstep FROM commit_log WHERE run_id = %s", (run_id,))
        return Counter(int(superstep) for (superstep,) in await found.fetchall())


def logged(log: Path, run_id: str) -> Counter[int]:
    return Counter(superstep for rid, superstep, _, _ in lines(log) if rid == run_id)


async def test_workers_pause_a_run_at_a_barrier_serve_others_meanwhile_and_finish_it(
    dsn: str, schema: str, store: PostgresStore, tmp_path: Path
) -> None:
    await store.list_runs(limit=1)  # the tables exist before the trigger
    await install_commit_log(dsn, schema)
    log = tmp_path / "ticks.log"
    workers = [
        start_worker(
            dsn,
            schema,
            tmp_path / f"worker-{n}.log",
            name=f"worker-{n}",
            lease=2.0,
            poll=0.05,
            app="workflow.pause_app",
        )
        for n in range(2)
    ]
    client = treadle.workers.Client(store, [pause_app.ticker])
    try:
        run_id = await client.start("ticker", Job(40, 0.05, str(log)), run_id="pw-1")

        async def ticked(count: int) -> bool:
            return len(logged(log, run_id)) >= count

        await wait_until(lambda: ticked(3))
        assert await client.pause(run_id) == "requested"  # a worker is advancing it

        async def paused() -> bool:
            return (await client.get(run_id)).status == "paused"

        await wait_until(paused)
        row = await client.get(run_id)
        at = row.superstep
        assert 3 <= at < 41
        assert (row.owner, row.pause_requested) == (None, None)
        assert (await store.load_checkpoint(run_id)).info.superstep == at
        assert await commits(dsn, schema, run_id) == Counter(range(at + 1))
        assert logged(log, run_id) == Counter(range(1, at + 1))

        # The workers go on serving: another run completes while this one stays put.
        other = await client.start("ticker", Job(5, 0.0, str(log)), run_id="pw-2")
        assert (await client.wait(other, timeout=60)).status == "completed"
        queue = RunQueue(store, "test", lease=2.0)
        assert await queue.claim([("ticker", 1)], time.time(), 10) == []  # nothing to take up
        assert logged(log, run_id) == Counter(range(1, at + 1))
        assert (await client.get(run_id)).status == "paused"
        paused_result = await client.result(run_id)
        assert (paused_result.status, paused_result.superstep) == (RunStatus.PAUSED, at)

        await client.unpause(run_id)
        done = await client.wait(run_id, timeout=90)
        assert done.status == "completed"
        result = await client.result(run_id)
        alone = await pause_app.ticker.run(
            Job(40, 0.0, str(tmp_path / "x.log")), store=MemoryStore()
        )
        assert result.outputs == alone.outputs
        assert await commits(dsn, schema, run_id) == Counter(range(42))  # each superstep once
        assert logged(log, run_id) == Counter(range(1, 42))
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            await asyncio.to_thread(worker.wait, 30)
        await client.close()


async def test_a_run_no_worker_holds_pauses_at_once_and_its_answer_waits(
    store: PostgresStore, tmp_path: Path
) -> None:
    client = treadle.workers.Client(store, [pause_app.ticker])
    log = tmp_path / "ticks.log"
    run_id = await client.start("ticker", Job(2, 0.0, str(log), ask=True), run_id="pq-1")
    assert await client.pause(run_id) == "paused"  # queued, no worker yet: paused as it is
    assert (await client.get(run_id)).status == "paused"
    worker = treadle.workers.Worker(store, [pause_app.ticker], lease=2.0, poll_interval=0.05)
    assert await worker.run_until_idle() == 0  # a paused run is nobody's to start
    await client.unpause(run_id)
    assert (await client.get(run_id)).status == "pending"  # back where it was: queued
    assert await worker.run_until_idle() == 1
    (request,) = (await client.result(run_id)).pending_requests
    await client.pause(run_id)
    await client.respond(run_id, {request.request_id: "yes"})  # kept in its inbox
    assert await worker.run_until_idle() == 0
    assert lines(log) == []
    await client.unpause(run_id)
    assert await worker.run_until_idle() == 1
    result = await client.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert result.outputs == [{"ticks": 2, "acc": (3 * 31 + 2) % 1_000_003}]
