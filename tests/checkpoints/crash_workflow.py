"""A 20-superstep workflow for the crash-and-resume tests, run as a script.

    python crash_workflow.py run    STORE SIDE RUN_ID [DURABILITY]  # prints "started", runs
    python crash_workflow.py resume STORE SIDE RUN_ID [DURABILITY]  # resumes in a new process

The test runs it as ``python -c "import crash_workflow; crash_workflow.script(...)"``,
so that its classes are stored under the module's name, not ``__main__``.

Every invocation records (run, superstep, executor) in a side table of its
own SQLite file before doing its work, so the test can count how many times
each superstep was executed, across processes and kills.
"""

from __future__ import annotations

import asyncio
import json
import operator
import sqlite3
import sys
from dataclasses import dataclass

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore

SUPERSTEPS = 20
SIDE_PATH = ""


@dataclass(frozen=True)
class Tick:
    n: int
    trail: tuple[str, ...]


def record_invocation(run_id: str, superstep: int, executor_id: str) -> None:
    with sqlite3.connect(SIDE_PATH, timeout=30) as side:
        side.execute(
            "CREATE TABLE IF NOT EXISTS invocations (run TEXT, superstep INT, executor TEXT)"
        )
        side.execute("INSERT INTO invocations VALUES (?, ?, ?)", (run_id, superstep, executor_id))


def make_step(name: str):
    @executor(id=name)
    async def step(tick: Tick, ctx: WorkflowContext[Tick]) -> None:
        record_invocation(ctx.run_id, ctx.superstep, ctx.executor_id)
        await asyncio.sleep(0.004)
        ctx.state.update("total", lambda v: v + tick.n)
        ctx.state.set(f"last_{name}", tick.n)
        ctx.state.set("seen", [f"{name}@{tick.n}"])  # a list that grows: stored as appended items
        if tick.n % 5 == 0:
            ctx.yield_output(f"{name}@{tick.n}")
        if tick.n < SUPERSTEPS:
            ctx.send_message(Tick(tick.n + 1, (*tick.trail[-3:], name)))

    return step


def build(store=None, durability="sync"):
    ping, pong = make_step("ping"), make_step("pong")
    return (
        WorkflowBuilder(start=ping, name="crash-test", store=store, durability=durability)
        .add_edge(ping, pong)
        .add_edge(pong, ping)
        .add_state("total", default=0)
        .add_state("seen", default=[], reducer=operator.add)
        .build()
    )


def outcome(result) -> str:
    return json.dumps(
        {"status": result.status.value, "outputs": result.outputs, "state": dict(result.state)},
        sort_keys=True,
    )


async def main(mode: str, store_path: str, run_id: str, durability: str = "sync") -> None:
    store = SqliteStore(store_path)
    workflow = build(store, durability)
    try:
        if mode == "run":
            print("started", flush=True)
            result = await workflow.run(Tick(1, ()), run_id=run_id, record_events=False)
        else:
            result = await workflow.resume(run_id, record_events=False)
        print(outcome(result), flush=True)
    finally:
        await store.close()


def script(args: list[str]) -> None:
    """The script's body: imported by name, its classes are stored as ``crash_workflow.*``,
    the names the test's own process (which resumes) knows them by."""
    global SIDE_PATH  # the side table of this process, set once
    mode, store_path, SIDE_PATH, run_id, *durability = args
    asyncio.run(main(mode, store_path, run_id, *durability))


if __name__ == "__main__":
    script(sys.argv[1:])
