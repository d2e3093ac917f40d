"""Starting runs on PostgreSQL: what a run's creation costs, one after another and many at once.

    python benchmarks/postgres_starts.py [--runs 300] [--repeat 3] [--dsn postgresql://...]

Three figures, each in a schema of its own on the local server (or ``--dsn``,
else ``$TREADLE_BENCH_POSTGRES_DSN``), after an untimed warm-up:

* ``run``: ``Workflow.run`` of a one-executor workflow on ``PostgresStore``
  (the run created with its first checkpoint, its one superstep committed,
  its lease let go), microseconds a run, ``--runs`` one after another and
  ``--runs`` at once (``asyncio.gather``);
* ``start``: ``treadle.workers.Client.start`` (a run queued for workers, its
  input in the inbox, its start on the audit record), microseconds a start,
  one after another;
* the floor: one transaction a run, one after another, holding what any
  durable start must write, by hand: an ``INSERT`` of a 300-byte row,
  ``COMMIT`` (a round trip and the server's fsync).

Also counted, at psycopg's cursor: the queries one ``Workflow.run`` and one
``Client.start`` send (each query is a round trip). Every measurement is
checked (every run completed, every start queued). Cells are medians over
``--repeat`` repetitions, interleaved.

Writes benchmarks/POSTGRES_STARTS.md and benchmarks/postgres_starts.json.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from _report import NONE, TIMES, _num, _table
from psycopg import sql

import treadle
import treadle.workers
from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.stores import PostgresStore

HERE = Path(__file__).resolve().parent
DSN_VARIABLE = "TREADLE_BENCH_POSTGRES_DSN"
LOCAL_DSN = "postgresql://postgres@127.0.0.1:5432/test"


@executor(id="once")
async def once(x: int, ctx: WorkflowContext[int]) -> None:
    ctx.yield_output(x)


ONE_STEP = WorkflowBuilder(once, name="pg-starts-once").build()


class Queries:
    """Counts the queries psycopg's async cursors send while :attr:`on`."""

    def __init__(self) -> None:
        self.count = 0
        self.on = False
        executed = psycopg.AsyncCursor.execute

        async def counted(cursor: Any, query: Any, *args: Any, **kw: Any) -> Any:
            if self.on and b"pg_prepared_statements" not in _bytes(query):
                self.count += 1
            return await executed(cursor, query, *args, **kw)

        psycopg.AsyncCursor.execute = counted  # type: ignore[method-assign]


def _bytes(query: Any) -> bytes:
    return query if isinstance(query, bytes) else str(query).encode()


async def _runs(dsn: str, runs: int, queries: Queries) -> dict[str, float]:
    schema = f"bench_starts_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(dsn, schema=schema)
    try:
        for i in range(5):  # statements prepared on the pool's connections
            await ONE_STEP.run(i, store=store)
        queries.count, queries.on = 0, True
        await ONE_STEP.run(-1, store=store, run_id="counted")
        queries.on = False
        counted = queries.count
        t0 = time.perf_counter()
        done = [await ONE_STEP.run(i, store=store) for i in range(runs)]
        serial = time.perf_counter() - t0
        t0 = time.perf_counter()
        done += await asyncio.gather(*(ONE_STEP.run(i, store=store) for i in range(runs)))
        together = time.perf_counter() - t0
        if any(
            r.outputs != [r_in] for r, r_in in zip(done, [*range(runs), *range(runs)], strict=True)
        ):
            raise RuntimeError("a run did not complete with its output")
    finally:
        await store.close()
        _drop(dsn, schema)
    return {
        "run_us_serial": serial / runs * 1e6,
        "run_us_together": together / runs * 1e6,
        "run_queries": counted,
    }


async def _starts(dsn: str, runs: int, queries: Queries) -> dict[str, float]:
    schema = f"bench_starts_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(dsn, schema=schema)
    try:
        client = treadle.workers.Client(store, [ONE_STEP])
        for i in range(5):
            await client.start(ONE_STEP.name, i, run_id=f"warm-{i}")
        queries.count, queries.on = 0, True
        await client.start(ONE_STEP.name, -1, run_id="counted")
        queries.on = False
        counted = queries.count
        t0 = time.perf_counter()
        for i in range(runs):
            await client.start(ONE_STEP.name, i, run_id=f"start-{i}")
        serial = time.perf_counter() - t0
        pending = await store.list_runs(status="pending", workflow=ONE_STEP.name, limit=runs + 10)
        if len(pending) != runs + 6:
            raise RuntimeError(f"{len(pending)} runs queued, not {runs + 6}")
    finally:
        await store.close()
        _drop(dsn, schema)
    return {"start_us_serial": serial / runs * 1e6, "start_queries": counted}


def _floor(dsn: str, runs: int) -> dict[str, float]:
    schema = f"bench_starts_{uuid.uuid4().hex[:10]}"
    table = sql.Identifier(schema, "floor_runs")
    try:
        with psycopg.connect(dsn) as db:
            db.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            db.execute(
                sql.SQL("CREATE TABLE {} (run_id text PRIMARY KEY, blob bytea NOT NULL)").format(
                    table
                )
            )
            db.commit()
            insert = sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(table)
            t0 = time.perf_counter()
            for i in range(runs):
                db.execute(insert, (f"run-{i}", b"x" * 300))
                db.commit()
            serial = time.perf_counter() - t0
    finally:
        _drop(dsn, schema)
    return {"floor_us_serial": serial / runs * 1e6}


def _drop(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _write(args: argparse.Namespace, reps: list[dict[str, float]], took: float) -> None:
    keys = list(reps[0])
    medians = {key: statistics.median(rep[key] for rep in reps) for key in keys}
    with psycopg.connect(args.dsn) as db:
        server = db.execute("SELECT version()").fetchone()
    floor = medians["floor_us_serial"]
    version = importlib.metadata.version("treadle")
    machine = (
        f"- Machine: {os.cpu_count()} cores; {platform.platform()}; Python "
        f"{platform.python_version()}; treadle {version}; psycopg {psycopg.__version__}"
    )

    def row(what: str, us: float, queries: str) -> list[str]:
        return [what, _num(us), f"{us / floor:.2f}{TIMES}", queries]

    rows = [
        row("floor: one INSERT and COMMIT a run", floor, "2"),
        row(
            "`Workflow.run`, one executor, one after another",
            medians["run_us_serial"],
            f"{medians['run_queries']:.0f}",
        ),
        row(f"`Workflow.run`, {args.runs} at once", medians["run_us_together"], NONE),
        row(
            "`Client.start`, one after another",
            medians["start_us_serial"],
            f"{medians['start_queries']:.0f}",
        ),
    ]
    lines = [
        "# Starting runs on PostgreSQL",
        "",
        "Generated by `benchmarks/postgres_starts.py`; do not edit by hand. Its docstring says",
        "how it measures.",
        "",
        f"- Date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')} (took {took:.0f} s)",
        machine,
        f"- Server: {(server or ('?',))[0].split(',')[0]}, on this same machine",
        f"- {args.runs} runs a measurement, {args.repeat} repetitions; a cell is the median.",
        "",
        *_table(["what", "µs a run", "vs floor", "queries (round trips)"], rows),
        "",
        "A run is two transactions (its creation, with its first checkpoint and its",
        "audit entry; its one superstep's commit, letting its lease go), so two fsyncs of the",
        "server's log against the floor's one. Starts all extend the one audit chain,",
        "whose lock a start holds from reading the chain's end to its COMMIT.",
        "",
    ]
    (HERE / "POSTGRES_STARTS.md").write_text("\n".join(lines), encoding="utf-8")
    (HERE / "postgres_starts.json").write_text(
        json.dumps({"medians": medians, "repetitions": reps}, indent=2) + "\n", encoding="utf-8"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dsn", default=os.environ.get(DSN_VARIABLE, LOCAL_DSN))
    args = parser.parse_args()
    queries = Queries()
    t0 = time.monotonic()
    asyncio.run(_runs(args.dsn, 20, queries))  # warm-up
    reps = []
    for rep in range(args.repeat):
        figures = _floor(args.dsn, args.runs)
        figures |= asyncio.run(_runs(args.dsn, args.runs, queries))
        figures |= asyncio.run(_starts(args.dsn, args.runs, queries))
        reps.append(figures)
        shown = ", ".join(f"{k} {v:,.0f}" for k, v in figures.items())
        sys.stdout.write(f"[{rep + 1}/{args.repeat}] {shown}\n")
    _write(args, reps, time.monotonic() - t0)
    sys.stdout.write(f"wrote {HERE / 'POSTGRES_STARTS.md'}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
