"""Starters and servers of policy-started runs, each a process of its own (``test_start_races.py``).

``start SPEC WORKFLOW KEY N DEDUP GO``: says ``ready``, waits for the file
``GO``, starts ``WORKFLOW`` with the input (KEY, N) (``DEDUP``: its
deduplication id, ``-`` for none) and prints what it was told, as JSON.

``serve SPEC runtime|worker``: serves the store as a ``Runtime`` (any
store) or a ``treadle worker`` (PostgreSQL) until killed, starting what the
policies queued.

``admit-and-die SPEC WORKFLOW KEY N``: has a start admitted and leased to
it, then dies (SIGKILL) before starting the run.

``open SPEC``: opens the store (which makes its tables), and closes it.

Each handler appends a line to ``$START_LOG`` as it begins and as it ends
(``{"n", "key", "at", "edge"}``), so the test sees which runs overlapped.
A SPEC starting with ``postgresql`` is a DSN (its schema in ``$START_SCHEMA``);
any other is an SQLite file.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from treadle import Runtime, StartPolicy, WorkflowBuilder, WorkflowContext, executor

HOLD = 0.3  # seconds each handler runs: long enough for runs to overlap, were they let


@dataclass
class Task:
    key: str
    n: int


def _log(task: Task, edge: str) -> None:
    line = json.dumps({"n": task.n, "key": task.key, "at": time.time(), "edge": edge})
    with Path(os.environ["START_LOG"]).open("a") as log:
        log.write(line + "\n")


@executor(id="work")
async def work(task: Task, ctx: WorkflowContext) -> None:
    _log(task, "begin")
    await asyncio.sleep(HOLD)
    _log(task, "end")
    ctx.yield_output(task.n)


def key_of(task: Task) -> str:
    return task.key


def _workflow(name: str, policy: StartPolicy):
    return WorkflowBuilder(start=work, name=name, start_policy=policy).build()


DEBOUNCE = 6.0  # every starter of the race goes within it, even on a loaded machine

WORKFLOWS = {
    "dedup": _workflow("dedup", StartPolicy()),
    "singleton": _workflow("singleton", StartPolicy(key=key_of, singleton=True)),
    "queue": _workflow("queue", StartPolicy(concurrency=2)),
    "debounce": _workflow("debounce", StartPolicy(key=key_of, debounce=DEBOUNCE)),
}


def store_of(spec: str):
    from treadle.stores import PostgresStore, SqliteStore  # noqa: PLC0415 - psycopg when used

    lease = float(os.environ.get("START_LEASE", "30"))
    if spec.startswith("postgresql"):
        return PostgresStore(spec, schema=os.environ["START_SCHEMA"], lease=lease)
    return SqliteStore(spec, lease=lease)


async def start(spec: str, name: str, key: str, n: str, dedup: str, go: str) -> None:
    store = store_of(spec)
    print("ready", flush=True)
    while not Path(go).exists():  # noqa: ASYNC110, ASYNC240 - another process makes it
        await asyncio.sleep(0.005)
    try:
        result = await WORKFLOWS[name].run(
            Task(key, int(n)), store=store, deduplication_id=None if dedup == "-" else dedup
        )
        told = {
            "run_id": result.run_id,
            "status": str(result.status),
            "deduplicated": result.deduplicated,
            "pid": os.getpid(),
        }
    finally:
        await store.close()
    print(json.dumps(told), flush=True)


async def serve(spec: str, kind: str) -> None:
    store = store_of(spec)
    if kind == "worker":
        from treadle.workers import Worker  # noqa: PLC0415 - PostgreSQL only

        worker = Worker(store, WORKFLOWS.values(), poll_interval=0.05, lease=5.0)
        await worker.serve()
    else:
        await Runtime(store, WORKFLOWS.values(), poll_interval=0.05).serve()


async def admit_and_die(spec: str, name: str, key: str, n: str) -> None:
    from treadle._stores._starts import StartRequest  # noqa: PLC0415 - the store's port itself

    store = store_of(spec)
    workflow = WORKFLOWS[name]
    task = Task(key, int(n))
    payload = workflow.serializer.dumps(task)
    request = StartRequest(f"left-{n}", name, workflow.version, payload, key=key, per_key=1)
    admission = await store.admit(request, owner=f"nobody:{os.getpid()}:x", duration=store.lease)
    print(json.dumps({"run_id": admission.run_id, "outcome": admission.outcome}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


async def open_store(spec: str) -> None:
    store = store_of(spec)
    await store.list_runs()
    await store.close()


COMMANDS = {"start": start, "serve": serve, "admit-and-die": admit_and_die, "open": open_store}


def cli() -> None:
    """The command line, run as a script or in a process forked for a test (``tests/forked.py``)."""
    asyncio.run(COMMANDS[sys.argv[1]](*sys.argv[2:]))


if __name__ == "__main__":
    cli()
