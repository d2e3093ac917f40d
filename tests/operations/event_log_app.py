"""A run another process follows: twenty supersteps, the tenth held until a gate file exists.

``python event_log_app.py STORE_URL RUN_ID GATE`` runs it to the end on the
store (a SQLite path or a PostgreSQL DSN with ``?schema=``); the follower
opens the gate once it has seen the ninth superstep, so the test knows it
saw events while the run was still going.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from treadle import WorkflowBuilder, WorkflowContext, executor

SUPERSTEPS = 20
HELD = 10


def build(gate: Path | None = None):
    @executor(id="step")
    async def step(n: int, ctx: WorkflowContext[int]) -> None:
        if n == HELD and gate is not None:
            # Another process opens the gate: nothing here to wait on but the file.
            while not gate.exists():  # noqa: ASYNC110, ASYNC240 - polled, and a stat is quick
                await asyncio.sleep(0.01)
        ctx.add_event({"n": n})
        if n < SUPERSTEPS:
            ctx.send_message(n + 1)
        else:
            ctx.yield_output(n)

    return WorkflowBuilder(step, name="gated").add_edge(step, step).build()


def open_store(url: str):
    if url.startswith("postgresql://"):
        from treadle.stores import PostgresStore  # noqa: PLC0415 - psycopg only when asked

        dsn, _, schema = url.partition("?schema=")
        return PostgresStore(dsn, schema=schema)
    from treadle.stores import SqliteStore  # noqa: PLC0415

    return SqliteStore(url)


async def main(url: str, run_id: str, gate: str) -> None:
    store = open_store(url)
    try:
        await build(Path(gate)).run(1, store=store, run_id=run_id)
    finally:
        await store.close()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    asyncio.run(main(*sys.argv[1:4]))
