"""Workflows for the cross-process durable-wait tests, run as a script.

    python long_running_app.py STORE SIDE CLOCK hitl-start RUN_ID
    python long_running_app.py STORE SIDE CLOCK hitl-answer RUN_ID REQUEST JSON
    python long_running_app.py STORE SIDE CLOCK poll-start RUN_ID
    python long_running_app.py STORE SIDE CLOCK poll-wake

Time comes from a file the test writes (``FileClock``), so separate
processes share one controllable clock and nothing sleeps for real. The
external "job service" is a side SQLite table: submissions and polls are
counted there, across processes and kills.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

from treadle import ExponentialBackoff, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import TreadleError
from treadle.stores import SqliteStore


class FileClock:
    """The time is whatever number the test last wrote into a file."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def now(self) -> float:
        return float(self.path.read_text())

    async def sleep_until(self, deadline: float) -> None:
        while self.now() < deadline:  # noqa: ASYNC110 - the file is written by another process
            await asyncio.sleep(0.01)


@dataclass(frozen=True)
class Decision:
    approve: bool
    note: str


def side(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30)
    db.execute("CREATE TABLE IF NOT EXISTS events (kind TEXT, detail TEXT)")
    return db


def record(path: str, kind: str, detail: str) -> None:
    with side(path) as db:
        db.execute("INSERT INTO events VALUES (?, ?)", (kind, detail))


def build(side_path: str, store, clock):
    @executor
    async def approve(doc: str, ctx: WorkflowContext) -> None:
        decision = await ctx.request({"please review": doc}, Decision)
        ctx.yield_output(
            f"{doc}: {'approved' if decision.approve else 'rejected'} ({decision.note})"
        )

    @executor
    async def render(name: str, ctx: WorkflowContext) -> None:
        def submit() -> str:
            record(side_path, "submit", name)
            return f"job-{name}"

        def check() -> int:
            record(side_path, "poll", name)
            with side(side_path) as db:
                return db.execute("SELECT COUNT(*) FROM events WHERE kind = 'poll'").fetchone()[0]

        job = await ctx.step("submit", submit)
        polls = await ctx.poll_until_complete(
            check, lambda n: n >= 5, backoff=ExponentialBackoff(initial=60, jitter=0)
        )
        ctx.yield_output(f"{job} done after {polls} polls")

    hitl = (
        WorkflowBuilder(start=approve, name="hitl", store=store, clock=clock)
        .register_type(Decision)
        .build()
    )
    poll = WorkflowBuilder(start=render, name="poll", store=store, clock=clock).build()
    return hitl, poll


def report(result) -> None:
    print(
        json.dumps(
            {
                "status": result.status.value,
                "outputs": result.outputs,
                "requests": [r.request_id for r in result.pending_requests],
            }
        ),
        flush=True,
    )


async def main(store_path: str, side_path: str, clock_path: str, mode: str, *args: str) -> int:
    store, clock = SqliteStore(store_path), FileClock(clock_path)
    hitl, poll = build(side_path, store, clock)
    try:
        if mode == "hitl-start":
            report(await hitl.run("contract.pdf", run_id=args[0]))
        elif mode == "hitl-answer":
            run_id, request_id, answer = args
            try:
                report(await hitl.respond(run_id, {request_id: json.loads(answer)}))
            except TreadleError as error:
                print(f"refused: {type(error).__name__}: {error}", flush=True)
                return 2
        elif mode == "poll-start":
            report(await poll.run("video", run_id=args[0]))
        elif mode == "poll-wake":
            for result in await Runtime(store, [hitl, poll], clock=clock).wake_due():
                report(result)
        print("idle", flush=True)
        if mode.startswith("poll"):
            await asyncio.Event().wait()  # stay up until the test kills this process
    finally:
        await store.close()
    return 0


def cli() -> None:
    """The command line, run as a script or in a process forked for a test (``tests/forked.py``)."""
    sys.exit(asyncio.run(main(*sys.argv[1:])))


if __name__ == "__main__":
    cli()
