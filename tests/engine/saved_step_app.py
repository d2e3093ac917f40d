"""A handler with three saved steps, for a process the tests SIGKILL between two of them.

``python saved_step_app.py run|resume STORE SIDE RUN_ID`` runs (or resumes)
the run. Each step counts its calls in the side SQLite file SIDE; the
second step, on its first call, writes a marker and hangs, so the test can
kill the process with step one saved and step two in flight.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore


def count(side: str, name: str) -> int:
    """Record one call of step ``name``; how many calls it has had, this one included."""
    with sqlite3.connect(side, timeout=30) as db:
        db.execute("CREATE TABLE IF NOT EXISTS calls (name TEXT)")
        db.execute("INSERT INTO calls VALUES (?)", (name,))
        return int(db.execute("SELECT COUNT(*) FROM calls WHERE name = ?", (name,)).fetchone()[0])


def build(side: str, hang: bool):
    @executor(id="pay")
    async def pay(order: str, ctx: WorkflowContext[str]) -> None:
        def charge() -> str:
            return f"charge-{count(side, 'charge')}"

        async def ship() -> str:
            calls = count(side, "ship")
            if hang and calls == 1:  # in flight when the process dies
                Path(side + ".shipping").touch()  # noqa: ASYNC240 - a marker for the test
                await asyncio.sleep(3600)
            return f"ship-{calls}"

        charged = await ctx.saved_step("charge", charge)
        shipped = await ctx.saved_step("ship", ship)
        mailed = await ctx.saved_step("mail", lambda: f"mail-{count(side, 'mail')}")
        ctx.yield_output([order, charged, shipped, mailed])

    return WorkflowBuilder(pay, name="shop").build()


async def main(mode: str, store_path: str, side: str, run_id: str) -> None:
    store = SqliteStore(store_path)
    try:
        workflow = build(side, hang=mode == "run")
        if mode == "run":
            result = await workflow.run("order-7", store=store, run_id=run_id)
        else:
            result = await workflow.resume(run_id, store=store)
        print(result.outputs[0])
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
