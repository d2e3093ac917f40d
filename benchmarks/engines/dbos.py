"""DBOS Transact: an ``@DBOS.workflow()`` calling five ``@DBOS.step()`` functions.

DBOS records a workflow's start, the output of each step and the workflow's end in its
system database before going on, so every step is a durable superstep. The system
database is SQLite on a file in the scratch directory (``system_database_url=
"sqlite:///path"``); the adapter creates the file first in WAL mode with
``synchronous=FULL``, the pragmas every other durable workload here uses (WAL is stored
in the file, so DBOS's own connections keep it; DBOS otherwise leaves SQLite's rollback
journal). The workflow and the steps are ``async def``, so the runs are coroutines on
the benchmark's event loop: ``asyncio.gather`` of 1,000 direct calls, each a fresh
workflow id. DBOS does its database work in its thread pool (``asyncio.to_thread``).

DBOS is a durable-execution library, not a graph runtime: only ``many_durable_runs``
is written for it.
"""

import asyncio
import contextlib
import sqlite3
from typing import Any

from _workload import DURABLE_RUN_STEPS, DURABLE_RUNS, RunFn, calls, on_exit, scratch_path
from dbos import DBOS, DBOSConfig

_NOT_A_GRAPH = (
    "DBOS runs durable workflows of steps, not graphs of nodes; only `many_durable_runs` "
    "is written for it"
)

ABSENT = {
    "chain": _NOT_A_GRAPH,
    "fanout": _NOT_A_GRAPH,
    "loop": _NOT_A_GRAPH,
    "many_runs": _NOT_A_GRAPH,
    "ckpt_chain": _NOT_A_GRAPH,
    "ckpt_chain_background": _NOT_A_GRAPH,
    "ckpt_chain_batched": _NOT_A_GRAPH,
    "idle_runs": _NOT_A_GRAPH,
    "growing_state": _NOT_A_GRAPH,
}

NOTES = {
    "many_durable_runs": "SQLite system database on a file, put in WAL mode first "
    "(synchronous=FULL, SQLite's default); DBOS's default pool of 20 connections",
}


@DBOS.step()
async def _step(x: int) -> int:
    calls.n += 1
    return x + 1


@DBOS.workflow()
async def _five_steps(x: int) -> int:
    for _ in range(DURABLE_RUN_STEPS):
        x = await _step(x)
    return x


def _launch(path: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")  # persistent: DBOS's connections keep it
    # synchronous is per connection; SQLite's default here is FULL (2), as the floor sets
    config: DBOSConfig = {
        "name": "treadle-bench",
        "system_database_url": f"sqlite:///{path}",
        "log_level": "WARNING",
    }
    DBOS(config=config)
    DBOS.launch()


async def many_durable_runs() -> RunFn:
    path = scratch_path("dbos.sqlite")
    _launch(path)

    async def destroy() -> None:
        DBOS.destroy(destroy_registry=True)

    on_exit(destroy)

    async def run() -> list[Any]:
        return await asyncio.gather(*(_five_steps(0) for _ in range(DURABLE_RUNS)))

    return run
