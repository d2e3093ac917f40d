"""The hand-written floor of ``benchmarks/scaleout.py``: fenced inserts from W processes.

What a durable superstep on PostgreSQL cannot do without, written by hand:
W processes (``python scaleout_floor.py DSN SCHEMA CONCURRENCY``), each with
CONCURRENCY connections, claim queued runs (``FOR UPDATE SKIP LOCKED``,
bumping the run's epoch, inserting its creation checkpoint) and commit each
of a run's supersteps as one transaction of its own: the run row moved on
only under the claim (``WHERE owner = ... AND epoch = ...``, the fence) and a
300-byte checkpoint inserted. No engine, no encoding, no event log, no
grouping of commits: one fenced superstep, one transaction, as
``many_durable_runs``' floor commits each superstep alone.

:func:`measure_floor` prepares a schema with the runs queued, starts the W
processes and times them from their start until the last run completed,
then checks every run completed with one checkpoint per superstep plus its
creation's.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, LiteralString

import psycopg
from psycopg import sql

BLOB = b"x" * 300  # the size of a small checkpoint
TIMEOUT_S = 300.0


def _query(schema: str, text: LiteralString) -> sql.Composed:
    return sql.SQL(text).format(
        runs=sql.Identifier(schema, "floor_runs"),
        checkpoints=sql.Identifier(schema, "floor_checkpoints"),
    )


def prepare(dsn: str, schema: str, runs: int, supersteps: int) -> None:
    """A schema with ``runs`` runs queued, each to go ``supersteps`` supersteps."""
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        db.execute(
            _query(
                schema,
                "CREATE TABLE {runs} (run_id text PRIMARY KEY, status text NOT NULL,"
                " supersteps int NOT NULL, superstep int NOT NULL DEFAULT 0,"
                " owner text, epoch int NOT NULL DEFAULT 0)",
            )
        )
        db.execute(
            _query(
                schema,
                "CREATE TABLE {checkpoints} (run_id text NOT NULL, superstep int NOT NULL,"
                " blob bytea NOT NULL, created_at double precision NOT NULL,"
                " PRIMARY KEY (run_id, superstep))",
            )
        )
        db.execute(_query(schema, "CREATE INDEX ON {runs} (status, run_id)"))
        with db.cursor() as cursor:
            cursor.executemany(
                _query(
                    schema, "INSERT INTO {runs} (run_id, status, supersteps) VALUES (%s, %s, %s)"
                ),
                [(f"run-{i:05d}", "queued", supersteps) for i in range(runs)],
            )


async def _drive(dsn: str, schema: str, owner: str) -> None:
    """Claim queued runs one after another and commit each superstep, fenced, until none is left."""
    claim = _query(
        schema,
        "UPDATE {runs} SET status = 'running', owner = %s, epoch = epoch + 1"
        " WHERE run_id = (SELECT run_id FROM {runs} WHERE status = 'queued'"
        " ORDER BY run_id LIMIT 1 FOR UPDATE SKIP LOCKED)"
        " RETURNING run_id, epoch, supersteps",
    )
    advance = _query(
        schema,
        "UPDATE {runs} SET superstep = %s, status = %s"
        " WHERE run_id = %s AND owner = %s AND epoch = %s",
    )
    insert = _query(
        schema,
        "INSERT INTO {checkpoints} (run_id, superstep, blob, created_at) VALUES (%s, %s, %s, %s)",
    )
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        while True:
            async with db.transaction():
                row = await (await db.execute(claim, (owner,))).fetchone()
                if row is None:
                    return
                run_id, epoch, supersteps = row
                await db.execute(insert, (run_id, 0, BLOB, time.time()))
            for superstep in range(1, supersteps + 1):
                status = "completed" if superstep == supersteps else "running"
                async with db.transaction():
                    moved = await db.execute(advance, (superstep, status, run_id, owner, epoch))
                    if moved.rowcount != 1:
                        raise RuntimeError(f"{run_id}: fenced out")
                    await db.execute(insert, (run_id, superstep, BLOB, time.time()))


async def _process(dsn: str, schema: str, concurrency: int) -> None:
    owner = f"floor-{os.getpid()}"
    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(_drive(dsn, schema, owner))


def measure_floor(
    dsn: str, runs: int, supersteps: int, processes: int, concurrency: int
) -> dict[str, Any]:
    """Time ``processes`` floor processes draining ``runs`` runs; check and drop the schema."""
    schema = f"bench_floor_{uuid.uuid4().hex[:12]}"
    try:
        prepare(dsn, schema, runs, supersteps)
        command = [sys.executable, str(Path(__file__)), dsn, schema, str(concurrency)]
        t0 = time.monotonic()
        started = [subprocess.Popen(command) for _ in range(processes)]
        codes = [p.wait(timeout=TIMEOUT_S) for p in started]
        wall_s = time.monotonic() - t0
        if any(codes):
            raise RuntimeError(f"floor processes exited with statuses {codes}")
        with psycopg.connect(dsn, autocommit=True) as db:
            done = db.execute(
                _query(schema, "SELECT count(*) FROM {runs} WHERE status = 'completed'")
            ).fetchone()
            kept = db.execute(_query(schema, "SELECT count(*) FROM {checkpoints}")).fetchone()
        if done != (runs,) or kept != (runs * (supersteps + 1),):
            raise RuntimeError(f"floor: {done} runs completed, {kept} checkpoints")
        return {
            "processes": processes,
            "supersteps_per_s": runs * supersteps / wall_s,
            "wall_s": wall_s,
        }
    finally:
        with psycopg.connect(dsn, autocommit=True) as db:
            db.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    asyncio.run(_process(sys.argv[1], sys.argv[2], int(sys.argv[3])))
