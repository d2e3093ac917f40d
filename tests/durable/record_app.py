"""A workflow whose run asks a question, then reads a session message: every door acts on it.

    python record_app.py kill STORE N   # answer, cancel, pause, ... runs at random, until killed

``ask`` asks ``approve`` (a ``bool``); ``chat`` then waits for one session
message and outputs it. STORE is a SQLite path or a ``postgresql://`` DSN
(schema from ``RECORD_SCHEMA``). ``kill`` starts N runs, then takes one
action after another on them (answers, cancels, pauses, unpauses, forks,
deletes, prunes) as fast as it can, printing ``ready`` once the runs are
there, for a test to SIGKILL it at a random moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sys

from treadle import Actor, WorkflowBuilder, WorkflowContext, executor
from treadle._workflow._actions import delete
from treadle.errors import RunExistsError, TreadleError


@executor
async def ask(topic: str, ctx: WorkflowContext[str]) -> None:
    """Ask whether to go on; the run rests until answered."""
    approved = await ctx.request({"topic": topic}, bool)
    ctx.send_message(f"{topic}: {approved}")


@executor
async def chat(line: str, ctx: WorkflowContext) -> None:
    """Wait for one session message, and output it."""
    said = await ctx.wait_for_input()
    ctx.yield_output(f"{line} / {said}")


record = WorkflowBuilder(start=ask, name="record").add_edge(ask, chat).build()


def open_store(where: str):
    if where.startswith("postgresql://"):
        from treadle.stores import PostgresStore  # noqa: PLC0415

        return PostgresStore(where, schema=os.environ["RECORD_SCHEMA"])
    from treadle.stores import SqliteStore  # noqa: PLC0415

    return SqliteStore(where)


async def act_at_random(where: str, count: int) -> None:
    store = open_store(where)
    ids = [f"k{n}" for n in range(count)]
    asked = {}
    for run_id in ids:
        with contextlib.suppress(RunExistsError):  # made by an earlier process, killed since
            await record.run("t", run_id=run_id, store=store)
        logged = await store.read_events(run_id)
        asked[run_id] = next(e.data["request_id"] for e in logged if e.kind == "request")
    print("ready", flush=True)
    rng = random.Random(os.getpid())
    while True:
        run_id = rng.choice(ids)
        action = rng.choice(["respond", "cancel", "pause", "unpause", "fork", "prune", "delete"])
        try:
            if action == "respond":
                await record.respond(run_id, {asked[run_id]: True}, store=store)
            elif action == "cancel":
                await record.cancel(run_id, store=store)
            elif action == "pause":
                await record.pause(run_id, store=store)
            elif action == "unpause":
                await record.unpause(run_id, store=store)
            elif action == "prune":
                await record.prune(run_id, 1, store=store)
            elif action == "fork":
                first = (await record.history(run_id, store=store)).checkpoints[0]
                await record.fork(run_id, first.checkpoint_id, store=store)
            else:
                await delete(store, run_id, actor=Actor.python())
        except (TreadleError, ValueError):
            continue


if __name__ == "__main__":
    asyncio.run(act_at_random(sys.argv[2], int(sys.argv[3])))
