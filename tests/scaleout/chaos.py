"""The chaos campaign: real ``treadle worker`` processes, one SIGKILLed, one SIGSTOPped.

One repetition: in a fresh schema with a commit log (a trigger writing every
checkpoint insert into a table without a unique key), a client enqueues 200
``counter`` runs of 20 supersteps and 20 ``napper`` runs sleeping on durable
timers; four worker processes serve them. Once work is under way, one worker
is killed with SIGKILL and another is paused with SIGSTOP for longer than
its lease, then resumed. :func:`check` then holds the outcome to the
guarantees; :class:`Outcome` keeps the figures (takeover delays, wall time).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import scale_app
from processes import start_worker
from psycopg import sql

import treadle.workers
from durable.conftest import drop_schemas, fresh_schema
from treadle.stores import PostgresStore

if TYPE_CHECKING:
    from pathlib import Path

LEASE = 1.5
POLL = 0.1
COUNTERS = 200
SUPERSTEPS = 20  # per counter run: begin + 19 steps
NAPS = 20
NAP_SECONDS = 4.0
_LINE = re.compile(r"^(?P<t>\S+) treadle\.worker \w+ (?P<what>claimed|released) run (?P<run>\S+)")


@dataclass
class Outcome:
    """What one repetition did and measured."""

    seed: int
    wall: float = 0.0
    killed: str = ""
    paused: str = ""
    held_at_kill: set[str] = field(default_factory=set)
    takeover_delays: list[float] = field(default_factory=list)
    # Held at the kill yet finished by the killed worker: its last commit came first.
    finished_before_kill: set[str] = field(default_factory=set)
    last_commit_at: dict[str, float] = field(default_factory=dict)
    naps_started_by_killed: int = 0
    logs: dict[str, str] = field(default_factory=dict)
    rows: list[tuple[object, ...]] = field(default_factory=list)
    duplicates: list[tuple[object, ...]] = field(default_factory=list)
    commits: int = 0


async def _sql(dsn: str, schema: str, statement: str) -> list[tuple[object, ...]]:
    import psycopg  # noqa: PLC0415

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        await db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        cursor = await db.execute(statement)  # type: ignore[arg-type]
        return await cursor.fetchall() if cursor.description else []


async def _prepare(dsn: str, schema: str) -> None:
    store = PostgresStore(dsn, schema=schema)
    try:
        client = treadle.workers.Client(store)
        for n in range(NAPS):  # first, so that the first claims include timers
            await client.start("napper", {"seconds": NAP_SECONDS}, run_id=f"nap-{n:03}")
        for n in range(COUNTERS):
            job = {"total": SUPERSTEPS - 1, "pause": 0.002}
            await client.start("counter", job, run_id=f"count-{n:03}")
    finally:
        await store.close()
    await _sql(
        dsn, schema, "CREATE TABLE commit_log (run_id TEXT, superstep BIGINT, at DOUBLE PRECISION)"
    )
    await _sql(
        dsn,
        schema,
        "CREATE FUNCTION log_commit() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN INSERT INTO commit_log VALUES (NEW.run_id, NEW.superstep,"
        " EXTRACT(EPOCH FROM clock_timestamp())); RETURN NEW; END $$",
    )
    await _sql(
        dsn,
        schema,
        "CREATE TRIGGER log_commit AFTER INSERT ON treadle_checkpoints"
        " FOR EACH ROW EXECUTE FUNCTION log_commit()",
    )


def _claims(log: str) -> list[tuple[float, str, str]]:
    found = []
    for line in log.splitlines():
        if match := _LINE.match(line):
            when = dt.datetime.fromisoformat(match["t"]).timestamp()
            found.append((when, match["what"], match["run"]))
    return found


async def campaign(dsn: str, seed: int, scratch: Path) -> Outcome:
    """One repetition; the schema is dropped afterwards."""
    rng = random.Random(seed)
    outcome = Outcome(seed)
    schema = fresh_schema()
    await _prepare(dsn, schema)
    names = [f"w{n}" for n in range(4)]
    logs = {name: scratch / f"{seed}-{name}.log" for name in names}
    started = time.time()
    workers = {
        name: start_worker(dsn, schema, logs[name], name=name, lease=LEASE, poll=POLL)
        for name in names
    }
    try:
        total = COUNTERS * SUPERSTEPS + NAPS * 2
        threshold = rng.uniform(0.15, 0.45) * total
        progress = "SELECT count(*) FROM commit_log"
        while (await _sql(dsn, schema, progress))[0][0] < threshold:  # noqa: ASYNC110 - polls another process
            await asyncio.sleep(0.02)
        # Kill one that has set timers, so their firing elsewhere is tested too.
        setters = [n for n in names if "claimed run nap-" in logs[n].read_text()] or names
        outcome.killed = rng.choice(sorted(setters))
        kill_at = time.time()
        workers[outcome.killed].send_signal(signal.SIGKILL)
        workers[outcome.killed].wait()
        await asyncio.sleep(rng.uniform(0.0, 0.5))
        # Pause one that holds a running run now, so its lease must be lost
        # (a worker holding nothing has nothing to find gone).
        holding = "SELECT DISTINCT owner FROM treadle_runs WHERE status = 'running'"
        owners = {str(row[0]) for row in await _sql(dsn, schema, holding)}
        others = [n for n in names if n != outcome.killed]
        outcome.paused = rng.choice(sorted(set(others) & owners) or others)
        workers[outcome.paused].send_signal(signal.SIGSTOP)
        await asyncio.sleep(LEASE + 1.0)  # past its lease: its runs are taken over
        workers[outcome.paused].send_signal(signal.SIGCONT)
        deadline = time.time() + 120
        query = "SELECT count(*) FROM treadle_runs WHERE status <> 'completed'"
        while (await _sql(dsn, schema, query))[0][0] and time.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        outcome.wall = time.time() - started
    finally:
        for process in workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.send_signal(signal.SIGTERM)
        for process in workers.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        try:
            outcome.rows = await _sql(
                dsn,
                schema,
                "SELECT r.run_id, r.status, c.blob FROM treadle_runs r"
                " JOIN treadle_checkpoints c ON c.checkpoint_id = r.checkpoint_id ORDER BY 1",
            )
            outcome.duplicates = await _sql(
                dsn,
                schema,
                "SELECT run_id, superstep, count(*) FROM commit_log GROUP BY 1, 2"
                " HAVING count(*) > 1",
            )
            last = "SELECT run_id, max(at) FROM commit_log GROUP BY 1"
            outcome.last_commit_at = {str(r): float(t) for r, t in await _sql(dsn, schema, last)}  # type: ignore[arg-type]
            outcome.commits = int(
                (await _sql(dsn, schema, "SELECT count(*) FROM commit_log"))[0][0]
            )  # type: ignore[call-overload]
        finally:
            await drop_schemas([schema])
    outcome.logs = {name: path.read_text() for name, path in logs.items()}
    _takeovers(outcome, kill_at)
    return outcome


def _takeovers(outcome: Outcome, kill_at: float) -> None:
    held: dict[str, float] = {}
    for when, what, run in _claims(outcome.logs[outcome.killed]):
        if when > kill_at:
            break
        if what == "claimed":
            held[run] = when
        else:
            held.pop(run, None)
    outcome.held_at_kill = set(held)
    claimed_by_killed = {r for t, what, r in _claims(outcome.logs[outcome.killed]) if t <= kill_at}
    outcome.naps_started_by_killed = sum(r.startswith("nap-") for r in claimed_by_killed)
    others = [
        claim
        for name, log in outcome.logs.items()
        if name != outcome.killed
        for claim in _claims(log)
    ]
    for run in held:
        after = [t for t, what, r in others if r == run and what == "claimed" and t > kill_at]
        if after:
            outcome.takeover_delays.append(min(after) - kill_at)
        elif outcome.last_commit_at.get(run, float("inf")) <= kill_at:
            outcome.finished_before_kill.add(run)


async def uninterrupted() -> list[object]:
    """The outputs of a counter run that nothing interrupted, in one process."""
    return (await scale_app.counter.run(scale_app.Job(SUPERSTEPS - 1))).outputs


def check(outcome: Outcome, expected: list[object]) -> list[str]:
    """Every guarantee the campaign holds the runtime to; returns the failures."""
    problems: list[str] = []
    statuses = [row[1] for row in outcome.rows]
    if len(outcome.rows) != COUNTERS + NAPS or set(statuses) != {"completed"}:
        problems.append(f"not every run completed: {sorted(set(statuses))}, {len(statuses)} runs")
    for run_id, _, blob in outcome.rows:
        workflow = scale_app.napper if str(run_id).startswith("nap-") else scale_app.counter
        outputs = workflow.codec.decode(bytes(blob), run_id=str(run_id), checkpoint_id="-").outputs  # type: ignore[arg-type]
        if workflow is scale_app.counter and outputs != expected:
            problems.append(f"{run_id}: outputs {outputs} != uninterrupted {expected}")
        if workflow is scale_app.napper:
            (woke,) = outputs
            if woke["woke"] < woke["started"] + NAP_SECONDS:
                problems.append(f"{run_id}: the timer fired early: {woke}")
    if outcome.duplicates:
        problems.append(f"supersteps committed twice: {outcome.duplicates[:5]}")
    if outcome.commits != COUNTERS * (SUPERSTEPS + 1) + NAPS * 3:
        problems.append(
            f"{outcome.commits} commits, expected {COUNTERS * (SUPERSTEPS + 1) + NAPS * 3}"
        )
    if not outcome.naps_started_by_killed:
        problems.append("the killed worker had set no timer (the campaign tests nothing of timers)")
    if not outcome.held_at_kill:
        problems.append("the killed worker held no run when it was killed")
    taken_over = len(outcome.takeover_delays) + len(outcome.finished_before_kill)
    if taken_over != len(outcome.held_at_kill):
        problems.append("some runs of the killed worker were never taken over")
    late = [d for d in outcome.takeover_delays if d > LEASE + POLL + 0.5]
    if late:
        problems.append(f"takeovers later than lease + poll (+0.5 s scheduling slack): {late}")
    paused_log = outcome.logs[outcome.paused]
    if "lease lost" not in paused_log:
        problems.append(f"the paused worker {outcome.paused} never found its leases gone")
    return problems
