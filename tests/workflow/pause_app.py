"""A slow, many-superstep workflow to pause, and the callers that race on it, as a script.

    python pause_app.py run STORE RUN_ID TOTAL DELAY LOG [ask]
        # run it here until it rests, pauses or ends; print how it stopped
    python pause_app.py CALL STORE RUN_ID GO_FILE [ARG ...]
        # wait for GO_FILE, then one caller: pause, unpause, cancel,
        # respond REQUEST ANSWER, send MESSAGE or resume; print its outcome

``ticker`` takes ``TOTAL`` supersteps after its first (a self-loop), each
sleeping ``DELAY`` seconds, so that a pause lands mid-run; with ``ask`` its
first executor asks a question first. Every invocation that commits its
work appends ``run_id superstep executor pid`` to the file ``LOG`` (a
single ``O_APPEND`` write), so a test counts how often each superstep ran.
The outputs depend only on the input: a run paused and unpaused any number
of times ends with the outputs of an uninterrupted one.

STORE is a SQLite path or a ``postgresql://`` DSN (schema from
``PAUSE_SCHEMA``). Each caller prints one JSON line: ``{"ok": ...}`` or
``{"error": type, "message": ...}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from treadle import Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import TreadleError


@dataclass(frozen=True)
class Job:
    total: int
    delay: float
    log: str
    ask: bool = False


@dataclass(frozen=True)
class Tick:
    n: int
    job: Job
    acc: int


def record(log: str, ctx: WorkflowContext, executor_id: str) -> None:
    line = f"{ctx.run_id} {ctx.superstep} {executor_id} {os.getpid()}\n".encode()
    descriptor = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)
    finally:
        os.close(descriptor)


@executor(id="begin")
async def begin(job: Job, ctx: WorkflowContext) -> None:
    answer = await ctx.request("go on?", str) if job.ask else ""
    record(job.log, ctx, "begin")
    ctx.send_message(Tick(1, job, len(answer)))


@executor(id="tick")
async def tick(message: Tick, ctx: WorkflowContext) -> None:
    await asyncio.sleep(message.job.delay)
    record(message.job.log, ctx, "tick")
    if message.n >= message.job.total:
        ctx.yield_output({"ticks": message.n, "acc": message.acc})
        return
    n = message.n + 1
    ctx.send_message(Tick(n, message.job, (message.acc * 31 + n) % 1_000_003))


ticker = (
    WorkflowBuilder(begin, name="ticker", max_supersteps=10_000)
    .add_edge(begin, tick)
    .add_edge(tick, tick)
    .build()
)


def lines(log: Path) -> list[tuple[str, int, str, int]]:
    """The log's lines: (run id, superstep, executor, pid)."""
    if not log.exists():
        return []
    rows = []
    for line in log.read_text().splitlines():
        run_id, superstep, executor_id, pid = line.split()
        rows.append((run_id, int(superstep), executor_id, int(pid)))
    return rows


def supersteps_logged(log: Path, run_id: str) -> Counter[int]:
    """How often each superstep of ``run_id`` ran an invocation that logged."""
    return Counter(superstep for rid, superstep, _, _ in lines(log) if rid == run_id)


def expected_acc(total: int, first: int) -> int:
    """``ticker``'s ``acc`` for ``total`` ticks after an answer of length ``first``."""
    acc = first
    for n in range(2, total + 1):
        acc = (acc * 31 + n) % 1_000_003
    return acc


def open_store(spec: str):
    from treadle.stores import PostgresStore, SqliteStore  # noqa: PLC0415 - psycopg when used

    if spec.startswith("postgresql://"):
        return PostgresStore(spec, schema=os.environ["PAUSE_SCHEMA"])
    return SqliteStore(spec)


def wait_for_go(go: str) -> None:
    print(json.dumps({"ready": os.getpid()}), flush=True)
    deadline = time.monotonic() + 60
    while not Path(go).exists():
        if time.monotonic() > deadline:
            raise SystemExit("no go signal")
        time.sleep(0.001)


async def call(command: str, store, run_id: str, rest: list[str]) -> object:
    """One caller's call; what it returns, as JSON."""
    if command == "pause":
        return await ticker.pause(run_id, store=store)
    if command == "unpause":
        return (await ticker.unpause(run_id, store=store, record_events=False)).status.value
    if command == "cancel":
        await ticker.cancel(run_id, store=store)
        return "cancelled"
    if command == "respond":
        answered = {rest[0]: rest[1]}
        result = await ticker.respond(run_id, answered, store=store, wait=True, record_events=False)
        return result.status.value
    if command == "send":
        return (await ticker.send_message(run_id, rest[0], store=store)).status.value
    if command == "resume":
        return (await ticker.resume(run_id, store=store, wait=True)).status.value
    if command == "wake":
        return sorted(r.run_id for r in await Runtime(store, [ticker]).wake_due())
    raise SystemExit(f"unknown command {command!r}")


async def main(command: str, spec: str, run_id: str, *rest: str) -> None:
    store = open_store(spec)
    try:
        if command == "run":
            total, delay, log = int(rest[0]), float(rest[1]), rest[2]
            job = Job(total, delay, log, ask=rest[3:] == ("ask",))
            result = await ticker.run(job, run_id=run_id, store=store, record_events=False)
            shown = {"ok": result.status.value, "superstep": result.superstep}
            print(json.dumps({**shown, "outputs": result.outputs}), flush=True)
            return
        await store.list_runs(limit=1)  # the store is open before the race starts
        wait_for_go(rest[0])
        try:
            outcome = await call(command, store, run_id, list(rest[1:]))
        except TreadleError as error:
            print(json.dumps({"error": type(error).__name__, "message": str(error)}), flush=True)
            return
        print(json.dumps({"ok": outcome}), flush=True)
    finally:
        await store.close()


def cli() -> None:
    """The command line, run as a script or in a process forked for a test (``tests/forked.py``)."""
    asyncio.run(main(*sys.argv[1:]))


if __name__ == "__main__":
    # Through the module's own name, so that the classes stored are named as the tests name them.
    import pause_app

    pause_app.cli()
