"""Scale-out benchmark: supersteps per second with 1, 2 and 4 ``treadle worker`` processes.

    python benchmarks/scaleout.py [--runs 500] [--supersteps 20] [--workers 1,2,4]
                                  [--repeat 3] [--concurrency 8] [--dsn postgresql://...]

What it measures: how fast W worker processes sharing one PostgreSQL database
drain a queue of runs, each a self-loop of no-op supersteps
(``benchmarks/scaleout_app.py``), so the figure is the runtime's cost per
durable superstep (claim, run, commit a checkpoint, release) and how it
changes with more workers.

How, for each worker count W (round-robin over the counts, ``--repeat`` times):

1. make a fresh schema ``bench_scaleout_<random>`` and enqueue every run
   through ``treadle.workers.connect(...).start`` *before* any worker exists;
2. start W ``treadle worker --app scaleout_app --concurrency C
   --poll-interval 0.05`` subprocesses (``TREADLE_SCHEMA`` names the schema)
   and time from their start until the runs table shows every run completed
   (polled every 20 ms); the wall time includes the workers' start-up;
3. SIGTERM the workers and wait for each to exit with status 0;
4. check that every run completed at its last superstep and that
   ``treadle_checkpoints`` holds, for every run, exactly one creation
   checkpoint plus one per superstep, none twice (anything else fails the
   benchmark); then drop the schema.

Reported per W, as medians over repetitions: supersteps/s (committed
supersteps / wall time), runs/s, the ratio to the median of 1 worker, and
supersteps/s over the commit window (first to last checkpoint written: the
rate once the workers are up). One untimed warm-up measurement with a tenth
of the runs comes first. The server is ``--dsn``, else
``$TREADLE_BENCH_POSTGRES_DSN``, else the local one.

Writes benchmarks/SCALEOUT.md and benchmarks/scaleout.json.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, LiteralString

import psycopg
from _scaleout_report import machine_facts, write_json, write_report
from psycopg import sql
from scaleout_app import spin
from scaleout_floor import measure_floor

import treadle.workers

BENCH = Path(__file__).resolve().parent
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
DSN_VARIABLE = "TREADLE_BENCH_POSTGRES_DSN"
APP = "scaleout_app"
POLL_S = 0.02  # how often the runs table is checked for completion
TIMEOUT_S = 300.0  # one measurement, from the workers' start to the last run completed
STOP_TIMEOUT_S = 30.0  # from SIGTERM to a worker's exit
LOG_TAIL = 20  # lines of each worker's log shown when a measurement fails


class ScaleoutError(RuntimeError):
    """A measurement went wrong: a worker died, a run failed, checkpoints do not add up."""


@dataclass(frozen=True)
class Setup:
    """What every measurement runs: the server, the queue and the workers' options."""

    dsn: str
    runs: int
    supersteps: int
    concurrency: int
    poll_interval: float


@dataclass(frozen=True)
class Measurement:
    """One measurement: W workers draining one queue of runs in a schema of its own."""

    workers: int
    rep: int
    runs: int
    supersteps: int  # committed, over all runs
    checkpoints: int
    wall_s: float  # workers' start to every run completed
    commit_window_s: float  # first to last checkpoint written
    startup_s: float  # workers' start to the first checkpoint written
    enqueue_s: float
    claims_per_worker: list[int]

    def figures(self) -> dict[str, Any]:
        return asdict(self) | {
            "supersteps_per_s": self.supersteps / self.wall_s,
            "runs_per_s": self.runs / self.wall_s,
            "window_supersteps_per_s": self.supersteps / self.commit_window_s,
        }


@dataclass
class Worker:
    """A ``treadle worker`` subprocess this benchmark started, and its log."""

    process: subprocess.Popen[bytes]
    log: Path

    def tail(self) -> str:
        lines = self.log.read_text(errors="replace").splitlines()[-LOG_TAIL:]
        return "\n".join(f"    {line}" for line in lines)

    def claims(self) -> int:
        return sum("claimed run" in line for line in self.log.read_text().splitlines())


def _query(schema: str, text: LiteralString) -> sql.Composed:
    """``text`` with ``{runs}`` and ``{checkpoints}`` naming the tables in ``schema``."""
    return sql.SQL(text).format(
        runs=sql.Identifier(schema, "treadle_runs"),
        checkpoints=sql.Identifier(schema, "treadle_checkpoints"),
    )


async def enqueue(setup: Setup, schema: str) -> float:
    """Start every run through the client (no worker runs yet); return the seconds taken."""
    t0 = time.monotonic()
    async with treadle.workers.connect(setup.dsn, schema=schema) as client:
        for i in range(setup.runs):
            await client.start(spin.name, {"supersteps": setup.supersteps}, run_id=f"run-{i:05d}")
    return time.monotonic() - t0


def start_workers(setup: Setup, schema: str, count: int, logs: Path) -> list[Worker]:
    treadle_bin = Path(sys.executable).with_name("treadle")
    if not treadle_bin.exists():
        raise ScaleoutError(f"no `treadle` command beside {sys.executable}: run with the venv's")
    command = [
        str(treadle_bin),
        "worker",
        "--app",
        APP,
        "--store",
        setup.dsn,
        "--concurrency",
        str(setup.concurrency),
        "--poll-interval",
        str(setup.poll_interval),
    ]
    path = os.pathsep.join(p for p in (str(BENCH), os.environ.get("PYTHONPATH")) if p)
    env = os.environ | {"TREADLE_SCHEMA": schema, "PYTHONPATH": path}
    workers = []
    for i in range(count):
        log = logs / f"{schema}-worker-{i}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, cwd=BENCH, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        workers.append(Worker(process, log))
    return workers


def wait_until_completed(
    db: psycopg.Connection, schema: str, runs: int, workers: list[Worker]
) -> None:
    """Poll the runs table until every run has completed; fail on a dead worker or failed run."""
    count = _query(
        schema,
        "SELECT count(*) FILTER (WHERE status = 'completed'),"
        " count(*) FILTER (WHERE status IN ('failed', 'cancelled', 'stalled'))"
        " FROM {runs}",
    )
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        row = db.execute(count).fetchone()
        completed, failed = row if row is not None else (0, 0)
        if completed == runs:
            return
        if failed:
            raise ScaleoutError(f"{failed} run(s) ended without completing")
        for i, worker in enumerate(workers):
            if worker.process.poll() is not None:
                code = worker.process.returncode
                raise ScaleoutError(f"worker {i} exited with status {code} before the end")
        if time.monotonic() > deadline:
            raise ScaleoutError(f"only {completed} of {runs} runs completed in {TIMEOUT_S:.0f} s")
        time.sleep(POLL_S)


def stop_workers(workers: list[Worker]) -> None:
    """SIGTERM the workers and wait; fail unless each exits with status 0 in time."""
    for worker in workers:
        if worker.process.poll() is None:
            worker.process.send_signal(signal.SIGTERM)
    late = []
    for i, worker in enumerate(workers):
        try:
            worker.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()
            late.append(i)
    if late:
        raise ScaleoutError(
            f"worker(s) {late} did not stop within {STOP_TIMEOUT_S:.0f} s of SIGTERM"
        )
    codes = [worker.process.returncode for worker in workers]
    if any(codes):
        raise ScaleoutError(f"workers exited with statuses {codes} after SIGTERM")


def verify(db: psycopg.Connection, schema: str, setup: Setup) -> tuple[int, int, float, float]:
    """Check the runs and their checkpoints; return (supersteps, checkpoints, first, last).

    ``first`` and ``last`` are when the first and last checkpoints were
    written (epoch seconds, the workers' clock).
    """
    runs, supersteps = setup.runs, setup.supersteps
    row = db.execute(
        _query(
            schema,
            "SELECT count(*), count(*) FILTER (WHERE status = 'completed'),"
            " count(*) FILTER (WHERE superstep = %s) FROM {runs}",
        ),
        [supersteps],
    ).fetchone()
    if row != (runs, runs, runs):
        raise ScaleoutError(
            f"expected {runs} runs, all completed at superstep {supersteps}; found (runs, "
            f"completed, at superstep {supersteps}) = {row}"
        )
    row = db.execute(
        _query(
            schema,
            "SELECT count(*), count(DISTINCT (run_id, superstep)), count(DISTINCT run_id),"
            " count(*) FILTER (WHERE superstep > 0), min(created_at), max(created_at)"
            " FROM {checkpoints}",
        )
    ).fetchone()
    if row is None:
        raise ScaleoutError("no checkpoints at all")
    checkpoints, distinct, with_checkpoints, committed, first, last = row
    expected = runs * (1 + supersteps)
    if (checkpoints, distinct, with_checkpoints) != (expected, expected, runs):
        raise ScaleoutError(
            f"expected {expected} checkpoints ({runs} runs x (1 creation + {supersteps} "
            f"supersteps)), one per (run, superstep), over {runs} runs; found {checkpoints}, "
            f"{distinct} distinct (run, superstep), over {with_checkpoints} runs"
        )
    return committed, checkpoints, first, last


def drop_schema(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def measure_once(setup: Setup, workers: int, rep: int, logs: Path) -> Measurement:
    """Enqueue, drain with ``workers`` processes, stop them, verify; the schema is dropped."""
    schema = f"bench_scaleout_{uuid.uuid4().hex[:12]}"
    started: list[Worker] = []
    try:
        enqueue_s = asyncio.run(enqueue(setup, schema))
        with psycopg.connect(setup.dsn, autocommit=True) as db:
            wall_start, t0 = time.time(), time.monotonic()
            started = start_workers(setup, schema, workers, logs)
            wait_until_completed(db, schema, setup.runs, started)
            wall_s = time.monotonic() - t0
            stop_workers(started)
            committed, checkpoints, first, last = verify(db, schema, setup)
        return Measurement(
            workers=workers,
            rep=rep,
            runs=setup.runs,
            supersteps=committed,
            checkpoints=checkpoints,
            wall_s=wall_s,
            commit_window_s=last - first,
            startup_s=first - wall_start,
            enqueue_s=enqueue_s,
            claims_per_worker=[w.claims() for w in started],
        )
    except ScaleoutError:
        for i, worker in enumerate(started):
            sys.stderr.write(f"--- worker {i} log (last {LOG_TAIL} lines):\n{worker.tail()}\n")
        raise
    finally:
        for worker in started:  # only after a failure are any still running
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()
        drop_schema(setup.dsn, schema)


def describe(m: Measurement) -> str:
    f = m.figures()
    return (
        f"{f['supersteps_per_s']:8.1f} supersteps/s {f['runs_per_s']:6.1f} runs/s "
        f"(wall {m.wall_s:.2f} s, start-up {m.startup_s:.2f} s, "
        f"claims per worker {m.claims_per_worker})"
    )


def summarize(raw: list[dict[str, Any]], floors: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per worker count: medians over repetitions, spread, the ratios to 1 worker and the floor."""
    out: dict[str, dict[str, Any]] = {}
    for workers in sorted({r["workers"] for r in raw}):
        mine = [r for r in raw if r["workers"] == workers]
        rates = [r["supersteps_per_s"] for r in mine]
        floor = [f["supersteps_per_s"] for f in floors if f["processes"] == workers]
        floor_rate = statistics.median(floor) if floor else None
        out[str(workers)] = {
            "floor_supersteps_per_s": floor_rate,
            "vs_floor": statistics.median(rates) / floor_rate if floor_rate else None,
            "repetitions": len(mine),
            "supersteps_per_s": statistics.median(rates),
            "min": min(rates),
            "max": max(rates),
            **{
                key: statistics.median(r[key] for r in mine)
                for key in ("runs_per_s", "window_supersteps_per_s", "wall_s", "startup_s")
            },
        }
    base = out.get("1")  # no ratios when 1 worker was not measured
    for cell in out.values():
        for ratio, rate in (
            ("scaling", "supersteps_per_s"),
            ("window_scaling", "window_supersteps_per_s"),
        ):
            cell[ratio] = cell[rate] / base[rate] if base else None
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=500, help="runs per measurement")
    parser.add_argument("--supersteps", type=int, default=20, help="supersteps per run")
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions per worker count")
    parser.add_argument("--concurrency", type=int, default=8, help="runs each worker drives")
    parser.add_argument("--poll-interval", type=float, default=0.05, help="workers' poll interval")
    parser.add_argument("--dsn", default=os.environ.get(DSN_VARIABLE, DEFAULT_DSN))
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",") if w]
    if not counts or min(counts) < 1 or args.runs < 1 or args.supersteps < 1 or args.repeat < 1:
        parser.error("--workers, --runs, --supersteps and --repeat must be positive")
    setup = Setup(args.dsn, args.runs, args.supersteps, args.concurrency, args.poll_interval)

    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()[0]
    try:
        machine = machine_facts(setup.dsn)
    except psycopg.OperationalError as error:
        sys.stderr.write(f"scaleout: cannot reach PostgreSQL ({DSN_VARIABLE} or --dsn): {error}\n")
        return 1
    raw: list[dict[str, Any]] = []
    floors: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="treadle-scaleout-") as scratch:
            logs = Path(scratch)
            warm = measure_once(replace(setup, runs=max(1, setup.runs // 10)), 1, 0, logs)
            print(f"[warm-up] 1 worker  {describe(warm)}", flush=True)
            for rep in range(1, args.repeat + 1):
                for workers in counts:
                    m = measure_once(setup, workers, rep, logs)
                    raw.append(m.figures())
                    print(f"[{rep}/{args.repeat}] {workers} worker(s) {describe(m)}", flush=True)
                    floor = measure_floor(
                        setup.dsn, setup.runs, setup.supersteps, workers, setup.concurrency
                    )
                    floors.append(floor | {"rep": rep})
                    print(
                        f"[{rep}/{args.repeat}] {workers} floor process(es) "
                        f"{floor['supersteps_per_s']:8.1f} supersteps/s",
                        flush=True,
                    )
    except ScaleoutError as error:
        sys.stderr.write(f"\nscaleout FAILED: {error}\n")
        return 1
    results = {
        "date": started.isoformat(timespec="seconds"),
        "duration_s": round((dt.datetime.now(dt.UTC) - started).total_seconds(), 1),
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
        "machine": machine,
        "setup": {
            "runs": setup.runs,
            "supersteps": setup.supersteps,
            "workers": counts,
            "repeat": args.repeat,
            "concurrency": setup.concurrency,
            "poll_interval": setup.poll_interval,
        },
        "medians": summarize(raw, floors),
        "raw": raw,
        "floor_raw": floors,
    }
    write_json(results, BENCH / "scaleout.json")
    write_report(results, BENCH / "SCALEOUT.md")
    print(f"\nwrote {BENCH / 'SCALEOUT.md'} and {BENCH / 'scaleout.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
