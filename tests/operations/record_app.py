"""A workflow whose run asks a question, then reads a session message: every door acts on it.

    python record_app.py kill STORE N   # answer, cancel, pause, ... runs at random, until killed
    python record_app.py client DSN N   # the same runs through the workers' client, meanwhile

``ask`` asks ``approve`` (a ``bool``); ``chat`` then waits for one session
message and outputs it. STORE is a SQLite path or a ``postgresql://`` DSN
(schema from ``RECORD_SCHEMA``). ``kill`` starts N runs, then takes one
action after another on them (answers, cancels, pauses, unpauses, forks,
deletes, prunes) as fast as it can, printing ``ready`` once the runs are
there, for a test to SIGKILL it at a random moment. ``client`` acts on the
same N runs through ``treadle.workers.connect`` (the door ``client``, as
``service:steady``) until its standard input closes, while another process
is killed, and prints how many of its actions were taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sys

from treadle import Actor, WorkflowBuilder, WorkflowContext, executor
from treadle._workflow._actions import delete
from treadle.errors import RunExistsError, RunNotFoundError, TreadleError


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


async def _asked(store, run_id: str) -> str | None:
    """Start the run unless it is there; the id of its request (another process may be
    starting or deleting it meanwhile; ``None``: it does not ask, queued by a client)."""
    for _ in range(100):
        with contextlib.suppress(RunExistsError):  # made by an earlier or another process
            await record.run("t", run_id=run_id, store=store)
        with contextlib.suppress(RunNotFoundError):  # deleted since
            logged = await store.read_events(run_id)
            found = [e.data["request_id"] for e in logged if e.kind == "request"]
            if found:
                return found[0]
        await asyncio.sleep(0.01)  # another process is starting it: it asks in a moment
    return None


async def act_at_random(where: str, count: int) -> None:
    store = open_store(where)
    ids = [f"{os.environ.get('RECORD_PREFIX', 'k')}{n}" for n in range(count)]
    asked = {}
    for run_id in ids:
        asked[run_id] = await _asked(store, run_id)
    print("ready", flush=True)
    rng = random.Random(os.getpid())
    while True:
        run_id = rng.choice(ids)
        action = rng.choice(["respond", "cancel", "pause", "unpause", "fork", "prune", "delete"])
        try:
            if action == "respond":
                if asked[run_id] is None:  # queued by a client: it asks nothing yet
                    continue
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
        except (TreadleError, ValueError, IndexError):  # IndexError: a queued run, unforkable
            continue


async def act_through_client(dsn: str, count: int) -> None:
    from treadle.workers import connect  # noqa: PLC0415 - psycopg only here

    client = connect(
        dsn, schema=os.environ["RECORD_SCHEMA"], actor=Actor.service("steady", "client")
    )
    ids = [f"{os.environ.get('RECORD_PREFIX', 'k')}{n}" for n in range(count)]
    rng = random.Random(os.getpid())
    done = tries_after = 0
    stopped = asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    print("ready", flush=True)
    try:
        # After the stop, on until it has done something (the other process may have
        # cancelled every run: a run deleted meanwhile it starts again, queued).
        while not stopped.done() or (done == 0 and tries_after < 200):
            tries_after += stopped.done()
            run_id = rng.choice(ids)
            action = rng.choice(["start", "respond", "cancel", "pause", "unpause"])
            try:
                if action == "start":
                    await client.start("record", "t", run_id=run_id)
                elif action == "respond":
                    logged = await client.store.read_events(run_id)
                    asked = next(e.data["request_id"] for e in logged if e.kind == "request")
                    await client.respond(run_id, {asked: True})
                else:
                    await getattr(client, action)(run_id)
            except (TreadleError, ValueError, StopIteration):
                await asyncio.sleep(0.01)
                continue
            done += 1
    finally:
        await client.close()
    print(done, flush=True)


def act_in_a_process(how: str, where: str, count: int) -> None:
    """The process's body: ``kill`` (act at random until killed) or ``client``."""
    acting = act_through_client if how == "client" else act_at_random
    asyncio.run(acting(where, count))


if __name__ == "__main__":
    act_in_a_process(sys.argv[1], sys.argv[2], int(sys.argv[3]))
