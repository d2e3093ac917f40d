"""Workflows for the ownership races, run as a script by separate processes.

    python race_workflow.py start STORE SIDE KIND RUN_ID       # run until it rests
    python race_workflow.py respond STORE SIDE KIND RUN_ID REQUEST ANSWER [wait]
    python race_workflow.py resume STORE SIDE KIND RUN_ID [wait]
    python race_workflow.py send STORE SIDE KIND RUN_ID MESSAGE [wait]
    python race_workflow.py wake STORE SIDE KIND -     # one timer service's wake_due()

KIND is ``ask`` (a request, then a chain of steps), ``nap`` (a durable
timer already due when resumed, then the chain) or ``chat`` (a session
waiting for its next message, then the chain). STORE is a SQLite path or
a ``postgresql://`` DSN (schema from ``RACE_SCHEMA``). Every invocation
after the wait is recorded in the SIDE SQLite file, so a test counts how
often each executor ran in each superstep. A racing command first waits
for the file ``SIDE.go`` to appear, so all racers start together; it prints
one JSON line: ``{"ok": ...}`` or ``{"error": type, "message": ...}``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from treadle import Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import TreadleError
from treadle.stores import PostgresStore, SqliteStore

CHAIN = 4  # steps after the wait


@dataclass(frozen=True)
class Decision:
    answer: str


@dataclass(frozen=True)
class Step:
    n: int
    answer: str


def record(side: str, executor_id: str, superstep: int, run_id: str) -> None:
    with sqlite3.connect(side, timeout=30) as db:
        db.execute("CREATE TABLE IF NOT EXISTS calls (run_id, executor_id, superstep, pid)")
        db.execute(
            "INSERT INTO calls VALUES (?, ?, ?, ?)", (run_id, executor_id, superstep, os.getpid())
        )


def build(store, side: str, kind: str):
    @executor(id="first")
    async def first(run: str, ctx: WorkflowContext) -> None:
        if kind == "ask":
            decision = await ctx.request({"question": "ship it?"}, Decision)
            answer = decision.answer
        elif kind == "chat":
            answer = str(await ctx.wait_for_input())
        else:
            await ctx.sleep(dt.timedelta(milliseconds=1))
            answer = "woke"
        record(side, "first", ctx.superstep, ctx.run_id)
        ctx.send_message(Step(1, answer))

    @executor(id="step")
    async def step(message: Step, ctx: WorkflowContext) -> None:
        record(side, "step", ctx.superstep, ctx.run_id)
        if message.n < CHAIN:
            ctx.send_message(Step(message.n + 1, message.answer))
        else:
            ctx.yield_output(message.answer)

    return (
        WorkflowBuilder(start=first, store=store, name=f"race-{kind}")
        .add_edge(first, step)
        .add_edge(step, step)
        .register_type(Decision)
        .build()
    )


def open_store(spec: str):
    if spec.startswith("postgresql://"):
        return PostgresStore(spec, schema=os.environ["RACE_SCHEMA"])
    return SqliteStore(spec)


def wait_for_go(side: str) -> None:
    print(json.dumps({"ready": os.getpid()}), flush=True)
    deadline = time.monotonic() + 30
    while not Path(side + ".go").exists():
        if time.monotonic() > deadline:
            raise SystemExit("no go signal")
        time.sleep(0.001)


async def main(command: str, spec: str, side: str, kind: str, run_id: str, *rest: str) -> None:
    store = open_store(spec)
    workflow = build(store, side, kind)
    try:
        if command == "start":
            result = await workflow.run(run_id, run_id=run_id, record_events=False)
            pending = [r.request_id for r in result.pending_requests]
            print(json.dumps({"ok": result.status.value, "requests": pending}), flush=True)
            return
        wait = rest[-1:] == ("wait",)
        await store.list_runs(limit=1)  # the store is open before the race starts
        wait_for_go(side)
        if command == "wake":
            woken = await Runtime(store, [workflow]).wake_due()
            print(json.dumps({"ok": sorted(r.run_id for r in woken)}), flush=True)
            return
        try:
            if command == "respond":
                request_id, answer = rest[0], rest[1]
                result = await workflow.respond(
                    run_id, {request_id: Decision(answer)}, wait=wait, record_events=False
                )
            elif command == "send":
                result = await workflow.send_message(
                    run_id, rest[0], wait=wait, record_events=False
                )
            else:
                result = await workflow.resume(run_id, wait=wait, record_events=False)
        except TreadleError as error:
            print(json.dumps({"error": type(error).__name__, "message": str(error)}), flush=True)
            return
        print(json.dumps({"ok": result.status.value, "outputs": result.outputs}), flush=True)
    finally:
        await store.close()


def cli() -> None:
    """The command line, run as a script or in a process forked for a test (``tests/forked.py``)."""
    asyncio.run(main(*sys.argv[1:]))


if __name__ == "__main__":
    cli()
