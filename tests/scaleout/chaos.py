"""The chaos campaign: real ``treadle worker`` processes, one SIGKILLed, one SIGSTOPped.

One repetition: in a fresh schema with a commit log (a trigger writing every
checkpoint insert into a table without a unique key), a client enqueues 200
``counter`` runs of 20 supersteps and 20 ``napper`` runs sleeping on durable
timers; four worker processes serve them. Once work is under way, one worker
is killed with SIGKILL and another is paused with SIGSTOP until another
worker has taken over a run it was running (so until its lease has expired),
then resumed. :func:`check` then holds the outcome to the guarantees;
:class:`Outcome` keeps the figures (takeover delays, wall time).

The commit log records who committed: each worker connects with its name as
``application_name``, which the trigger writes down with the run row's
``lease_epoch`` as the committing transaction has it. So the paused worker's
commits after its lease was taken over are counted, not inferred, and they
would be counted even if a broken fence let them through.

A worker stopped in the middle of a commit holds that run's row lock until
it is continued, and claims skip locked rows: such a run cannot be taken
over while it is stopped, and once continued the worker rightly commits
under its still-current epoch. So the campaign pauses a worker, asks the
store which of its running runs it holds no lock on, and if none, continues
it at once (stopped far less than a lease) and tries again. Those runs are
then certain to be claimable once the lease expires, and it stays stopped
until the store shows one of them leased under a higher epoch.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import re
import signal
import subprocess
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import scale_app
from processes import start_worker
from psycopg import sql

import treadle.workers
from postgres import drop_schemas, fresh_schema
from treadle.stores import PostgresStore

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

LEASE = 1.5
POLL = 0.1
COUNTERS = 200
SUPERSTEPS = 20  # per counter run: begin + 19 steps
NAPS = 20
NAP_SECONDS = 4.0
_LINE = re.compile(r"^(?P<t>\S+) treadle\.worker \w+ (?P<what>claimed|released) run (?P<run>\S+)")
# The two ways a worker reports a lease found gone: its heartbeat, or a fenced write.
_LOST = re.compile(r"lease lost on run (?P<beat>\S+) \(|run (?P<write>\S+): lease lost")
_EPOCH = re.compile(r" claimed run (?P<run>\S+) epoch (?P<epoch>\d+) ")
PAUSE_ATTEMPTS = 30
# A stopped worker's runs that it holds no row lock on are claimable once its
# lease expires (at most LEASE after the stop): a bound, not an expected delay.
TAKEOVER_BOUND = LEASE + POLL + 3.0


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
    # The paused worker's running runs it held no row lock on (run -> its epoch),
    # those of them leased by another worker while it was stopped, and its
    # commits to those (run -> epoch on the row -> count) before it was
    # continued and at the end.
    pause_attempts: int = 0
    paused_for: float = 0.0
    pause_problem: str = ""
    claimable_at_pause: dict[str, int] = field(default_factory=dict)
    taken_from_paused: dict[str, int] = field(default_factory=dict)
    commits_by_paused_before: dict[str, dict[int, int]] = field(default_factory=dict)
    commits_by_paused_after: dict[str, dict[int, int]] = field(default_factory=dict)
    # Each run's id, status and the outputs its last checkpoint decodes to
    # (or why it does not decode).
    rows: list[tuple[str, str, object]] = field(default_factory=list)
    duplicates: list[tuple[object, ...]] = field(default_factory=list)
    commits: int = 0


async def run_sql(
    dsn: str, schema: str, statement: str, parameters: tuple[object, ...] = ()
) -> list[tuple[object, ...]]:
    """One statement in ``schema``, on a connection of its own; its rows, if any."""
    import psycopg  # noqa: PLC0415

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        await db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        cursor = await db.execute(statement, parameters or None)  # type: ignore[arg-type]
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
    await install_commit_log(dsn, schema)


async def install_commit_log(dsn: str, schema: str) -> None:
    """A trigger writing every checkpoint insert into ``commit_log``, with who and when.

    The table has no unique key, so a superstep committed twice shows twice.
    """
    await run_sql(
        dsn,
        schema,
        "CREATE TABLE commit_log (run_id TEXT, superstep BIGINT, at DOUBLE PRECISION,"
        " worker TEXT, epoch BIGINT)",
    )
    # The committing process (its connection's name) and the run row's epoch as
    # the committing transaction has it (a commit advances the row first).
    await run_sql(
        dsn,
        schema,
        "CREATE FUNCTION log_commit() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN INSERT INTO commit_log SELECT NEW.run_id, NEW.superstep,"
        " EXTRACT(EPOCH FROM clock_timestamp()), current_setting('application_name'),"
        " lease_epoch FROM treadle_runs WHERE run_id = NEW.run_id; RETURN NEW; END $$",
    )
    await run_sql(
        dsn,
        schema,
        "CREATE TRIGGER log_commit AFTER INSERT ON treadle_checkpoints"
        " FOR EACH ROW EXECUTE FUNCTION log_commit()",
    )


def worker_dsn(dsn: str, name: str) -> str:
    """``dsn`` for worker ``name``: its connections carry its name, which commits record.

    Still a ``postgresql://`` URL: ``treadle worker --store`` takes anything else
    for a SQLite file.
    """
    url = urllib.parse.urlsplit(dsn)
    if url.scheme not in ("postgresql", "postgres"):
        msg = f"the workers need a postgresql:// URL, not {url.scheme or 'key=value pairs'}"
        raise ValueError(msg)
    query = [*urllib.parse.parse_qsl(url.query), ("application_name", name)]
    return urllib.parse.urlunsplit(url._replace(query=urllib.parse.urlencode(query)))


async def _commits_by(
    dsn: str, schema: str, worker: str, runs: Iterable[str]
) -> dict[str, dict[int, int]]:
    """The commits ``worker``'s process made to each of ``runs``, by the run row's epoch."""
    found: dict[str, dict[int, int]] = {run: {} for run in runs}
    rows = await run_sql(
        dsn,
        schema,
        "SELECT run_id, epoch, count(*) FROM commit_log"
        " WHERE worker = %s AND run_id = ANY(%s) GROUP BY 1, 2",
        (worker, list(found)),
    )
    for run, epoch, n in rows:
        found[str(run)][int(epoch)] = int(n)  # type: ignore[call-overload]
    return found


async def _pause_until_taken_over(
    dsn: str,
    schema: str,
    outcome: Outcome,
    workers: dict[str, subprocess.Popen[bytes]],
    rng: random.Random,
) -> None:
    """SIGSTOP a worker running runs until another worker leases one of them; then SIGCONT.

    Fills ``claimable_at_pause`` and ``taken_from_paused``, or ``pause_problem``.
    """
    running = "SELECT DISTINCT owner FROM treadle_runs WHERE status = 'running'"
    # Its running runs that no transaction holds locked (its own, stopped, would
    # hold them to the end of the pause). Locked only for this statement.
    unlocked = (
        "SELECT run_id, lease_epoch FROM treadle_runs WHERE owner = %s AND status = 'running'"
        " FOR UPDATE SKIP LOCKED"
    )
    epochs = "SELECT run_id, lease_epoch FROM treadle_runs WHERE run_id = ANY(%s)"
    others = sorted(n for n in workers if n != outcome.killed)
    for attempt in range(1, PAUSE_ATTEMPTS + 1):
        outcome.pause_attempts = attempt
        owners = {str(row[0]) for row in await run_sql(dsn, schema, running)} & set(others)
        if not owners:
            outcome.pause_problem = "no live worker was running a run to pause"
            return
        name = rng.choice(sorted(owners))
        workers[name].send_signal(signal.SIGSTOP)
        stopped = time.time()
        await asyncio.sleep(0.1)  # what it had sent before stopping is done by now
        free = {str(r): int(e) for r, e in await run_sql(dsn, schema, unlocked, (name,))}  # type: ignore[call-overload]
        if free:
            outcome.paused, outcome.claimable_at_pause = name, free
            deadline = stopped + TAKEOVER_BOUND
            while time.time() < deadline:
                rows = await run_sql(dsn, schema, epochs, (list(free),))
                taken = {str(r): free[str(r)] for r, e in rows if int(e) > free[str(r)]}  # type: ignore[call-overload]
                if taken:
                    outcome.taken_from_paused = taken
                    outcome.commits_by_paused_before = await _commits_by(dsn, schema, name, taken)
                    break
                await asyncio.sleep(0.05)
            outcome.paused_for = time.time() - stopped
            if outcome.taken_from_paused:
                workers[name].send_signal(signal.SIGCONT)
                return
            # None taken over: a real failure, unless a transaction it had sent
            # late (a loaded database) has locked every one of them meanwhile.
            still_free = await run_sql(dsn, schema, unlocked, (name,))
            workers[name].send_signal(signal.SIGCONT)
            if still_free:
                outcome.pause_problem = (
                    f"{name} was stopped {outcome.paused_for:.1f} s (lease {LEASE} s) and no other"
                    f" worker took over its unlocked running runs {sorted(free)}"
                )
                return
        else:
            workers[name].send_signal(signal.SIGCONT)  # stopped mid-commit on every run
        await asyncio.sleep(rng.uniform(0.02, 0.1))
    outcome.pause_problem = (
        f"in {PAUSE_ATTEMPTS} attempts no paused worker had a running run it held no lock on"
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
        name: start_worker(
            worker_dsn(dsn, name), schema, logs[name], name=name, lease=LEASE, poll=POLL
        )
        for name in names
    }
    try:
        total = COUNTERS * SUPERSTEPS + NAPS * 2
        threshold = rng.uniform(0.15, 0.45) * total
        progress = "SELECT count(*) FROM commit_log"
        stuck = time.time() + 60
        while (await run_sql(dsn, schema, progress))[0][0] < threshold:
            if time.time() > stuck:
                msg = f"the workers committed under {threshold:.0f} supersteps in 60 s"
                raise AssertionError(msg)
            await asyncio.sleep(0.02)
        # Kill one that has set timers, so their firing elsewhere is tested too.
        setters = [n for n in names if "claimed run nap-" in logs[n].read_text()] or names
        outcome.killed = rng.choice(sorted(setters))
        kill_at = time.time()
        workers[outcome.killed].send_signal(signal.SIGKILL)
        workers[outcome.killed].wait()
        await asyncio.sleep(rng.uniform(0.0, 0.5))
        # Pause a worker that is running runs until one of them is taken over (past its lease).
        await _pause_until_taken_over(dsn, schema, outcome, workers, rng)
        deadline = time.time() + 120
        query = "SELECT count(*) FROM treadle_runs WHERE status <> 'completed'"
        while (await run_sql(dsn, schema, query))[0][0] and time.time() < deadline:  # noqa: ASYNC110
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
            outcome.rows = await _final_outputs(dsn, schema)
            outcome.duplicates = await run_sql(
                dsn,
                schema,
                "SELECT run_id, superstep, count(*) FROM commit_log GROUP BY 1, 2"
                " HAVING count(*) > 1",
            )
            last = "SELECT run_id, max(at) FROM commit_log GROUP BY 1"
            outcome.last_commit_at = {str(r): float(t) for r, t in await run_sql(dsn, schema, last)}  # type: ignore[arg-type]
            if outcome.paused:
                outcome.commits_by_paused_after = await _commits_by(
                    dsn, schema, outcome.paused, outcome.taken_from_paused
                )
            outcome.commits = int(
                (await run_sql(dsn, schema, "SELECT count(*) FROM commit_log"))[0][0]
            )  # type: ignore[call-overload]
        finally:
            await drop_schemas([schema])
    outcome.logs = {name: path.read_text() for name, path in logs.items()}
    _takeovers(outcome, kill_at)
    return outcome


async def _final_outputs(dsn: str, schema: str) -> list[tuple[str, str, object]]:
    """(run id, status, outputs of its last checkpoint) for every run, in run id order."""
    store = PostgresStore(dsn, schema=schema)
    found: list[tuple[str, str, object]] = []
    try:
        for run in sorted(await store.list_runs(), key=lambda r: r.run_id):
            workflow = scale_app.napper if run.run_id.startswith("nap-") else scale_app.counter
            try:
                record = await store.load_checkpoint(run.run_id)
                outputs: object = workflow.codec.decode(record, run_id=run.run_id).outputs
            except Exception as error:  # reported by check(), not raised
                outputs = f"undecodable: {error!r}"
            found.append((run.run_id, run.status, outputs))
    finally:
        await store.close()
    return found


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
    for run_id, _, outputs in outcome.rows:
        if not run_id.startswith("nap-") and outputs != expected:
            problems.append(f"{run_id}: outputs {outputs} != uninterrupted {expected}")
        if run_id.startswith("nap-"):
            if not isinstance(outputs, list) or len(outputs) != 1:
                problems.append(f"{run_id}: outputs {outputs} are not one wake-up")
                continue
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
    late = [d for d in outcome.takeover_delays if d > TAKEOVER_BOUND]
    if late:
        problems.append(f"takeovers later than lease + poll (+3 s scheduling slack): {late}")
    problems += _check_pause(outcome)
    return problems


def _check_pause(outcome: Outcome) -> list[str]:
    """The paused worker, continued, finds the leases taken over gone and commits nothing."""
    if outcome.pause_problem:
        return [outcome.pause_problem]
    if not outcome.taken_from_paused:
        return ["no run of the paused worker was taken over while it was stopped"]
    problems = []
    paused, log = outcome.paused, outcome.logs[outcome.paused]
    found_gone = {m["beat"] or m["write"] for m in _LOST.finditer(log)}
    unnoticed = sorted(set(outcome.taken_from_paused) - found_gone)
    if unnoticed:
        problems.append(f"the paused worker {paused} never found its leases on {unnoticed} gone")
    # Epochs it leased a run under again later, legitimately (not in this campaign).
    reclaimed = {(m["run"], int(m["epoch"])) for m in _EPOCH.finditer(log)}
    for run, epoch in sorted(outcome.taken_from_paused.items()):
        before = sum(outcome.commits_by_paused_before[run].values())
        after = sum(
            n
            for at, n in outcome.commits_by_paused_after[run].items()
            if at <= epoch or (run, at) not in reclaimed
        )
        if after != before:
            problems.append(
                f"the paused worker {paused} committed {after - before} supersteps of {run}"
                f" after it was taken over from its epoch {epoch}"
            )
        if re.search(rf"released run {re.escape(run)} epoch {epoch}$", log, re.MULTILINE):
            problems.append(f"the paused worker {paused} released {run} after it was taken over")
    return problems
