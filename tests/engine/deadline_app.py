"""Deadlines and continuations across processes, run as a script: one process per step.

    python deadline_app.py STORE SIDE NOW start WORKFLOW RUN_ID
    python deadline_app.py STORE SIDE NOW answer RUN_ID REQUEST_ID ANSWER [GO_FILE]
    python deadline_app.py STORE SIDE NOW wake [GO_FILE]
    python deadline_app.py STORE SIDE NOW resume WORKFLOW RUN_ID

STORE is a SQLite path, or ``postgresql://...#schema``. NOW is the time
(epoch seconds) the process's ``FakeClock`` starts at, so the test moves
time between processes. SIDE is a SQLite file where handlers count their
side effects, across processes. With GO_FILE the process prints ``ready``
and waits for the file to exist before it acts, so racing processes start
together. Each prints one JSON line per run it moved, or ``refused: Error``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sqlite3
import sys
from pathlib import Path

from treadle import Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import RequestTimeoutError, TreadleError
from treadle.stores import PostgresStore, SqliteStore
from treadle.testing import FakeClock

TIMEOUT = dt.timedelta(hours=24)
POLL_EVERY = dt.timedelta(minutes=10)
POLLS_NEEDED = 5


def record(side: str, kind: str, detail: str = "") -> int:
    """Count a side effect; return how many of its kind there are now."""
    with sqlite3.connect(side, timeout=30) as db:
        db.execute("CREATE TABLE IF NOT EXISTS effects (kind TEXT, detail TEXT)")
        db.execute("INSERT INTO effects VALUES (?, ?)", (kind, detail))
        return db.execute("SELECT COUNT(*) FROM effects WHERE kind = ?", (kind,)).fetchone()[0]


def build(store, clock, side: str):
    @executor
    async def approve(doc: str, ctx: WorkflowContext) -> None:
        await ctx.step("ticket", record, side, "ticket", doc)
        try:
            verdict = await ctx.request({"approve": doc}, str, timeout=TIMEOUT)
        except RequestTimeoutError as timeout:
            await ctx.step("timed out", record, side, "timed out", timeout.request_id)
            ctx.yield_output(f"{doc}: timed out")
            return
        await ctx.step("answered", record, side, "answered", verdict)
        ctx.yield_output(f"{doc}: {verdict}")

    @executor
    async def poll(job: str, ctx: WorkflowContext) -> None:
        polls = record(side, "poll", job)  # the external job's status: done on the 5th poll
        ctx.state.update("polls", lambda n: n + 1)
        if polls < POLLS_NEEDED:
            ctx.continue_later(after=POLL_EVERY)
        ctx.yield_output(f"{job} done after {polls} polls")

    approvals = WorkflowBuilder(start=approve, name="approvals", store=store, clock=clock).build()
    polling = (
        WorkflowBuilder(start=poll, name="polling", store=store, clock=clock)
        .add_state("polls", default=0)
        .build()
    )
    return {"approvals": approvals, "polling": polling}


def open_store(where: str):
    if where.startswith("postgresql://"):
        dsn, schema = where.split("#")
        return PostgresStore(dsn, schema=schema)
    return SqliteStore(where)


def report(result) -> None:
    print(
        json.dumps(
            {
                "run": result.run_id,
                "status": result.status.value,
                "outputs": result.outputs,
                "requests": [r.request_id for r in result.pending_requests],
                "wake_at": result.wake_at,
                "polls": result.state.get("polls"),
            }
        ),
        flush=True,
    )


async def ready(go: str | None) -> None:
    if go is not None:
        print("ready", flush=True)
        while not await asyncio.to_thread(Path(go).exists):  # noqa: ASYNC110 - made by the test
            await asyncio.sleep(0.005)


async def main(where: str, side: str, now: str, mode: str, *args: str) -> None:
    store, clock = open_store(where), FakeClock(start=float(now))
    workflows = build(store, clock, side)
    try:
        if mode == "start":
            name, run_id = args
            report(await workflows[name].run(run_id, run_id=run_id))
        elif mode == "resume":
            name, run_id = args
            report(await workflows[name].resume(run_id))
        elif mode == "answer":
            run_id, request_id, answer, *go = args
            await ready(go[0] if go else None)
            try:
                report(
                    await workflows["approvals"].respond(run_id, {request_id: answer}, wait=True)
                )
            except TreadleError as error:
                print(f"refused: {type(error).__name__}", flush=True)
        elif mode == "wake":
            await ready(args[0] if args else None)
            for result in await Runtime(store, workflows.values(), clock=clock).wake_due():
                report(result)
    finally:
        await store.close()


def cli() -> None:
    """The command line, run as a script or in a process forked for a test (``tests/forked.py``)."""
    asyncio.run(main(*sys.argv[1:]))


if __name__ == "__main__":
    cli()
