"""Must-show of the call limits: many processes share one limit, a killed one gives its slots back.

Runs of ``limits_app.limited`` (five calls at once under the ``api`` limit:
4 at a time, 25 a second) are driven by three ``treadle worker``
processes on PostgreSQL, and by two processes on one SQLite file; one of
them is SIGKILLed while a call of its own is under way. The handlers write
their start and end times to a file; triggers in the database log every
slot granted and every checkpoint committed. Then:

* no moment had more calls under way than the limit's concurrency (the
  killed process's unfinished call counted until it died);
* no window of one second held more grants than the rate allows (the
  store's own log of grants), nor more handler starts than it allows
  within the window less the longest lag between a call's grant and its
  start (a granted call starts when its process hears of the grant: a
  poll later, or more on a loaded machine; the lag is printed);
* every run completed with its own output, and no superstep was committed twice;
* the killed process's slots came back: after its death (on SQLite, where
  the survivor sees the process gone and takes its runs over at once) or
  its lease (a worker on PostgreSQL), calls again ran as many at once as
  the limit allows.

The default suite drives 40 runs (200 calls) on each, in about 12 s
(SQLite) and 19 s (PostgreSQL, whose killed worker's runs wait out its
5 s lease); ``make soak`` drives 200 runs (1,000 calls) on each. What
they found, now fixed: a run taken over before its fan-out failed every
commit (its fan-in buffers were read back empty) and was claimed again
forever; a call entered again dropped its earlier grant from the rate's
window; a process that read the time before waiting for the limit's row
counted its window after a later one had pruned grants still inside it
(a line now keeps its own clock, never set back);
a service drove runs it had claimed past their lease, as they waited for
one of its slots (their first call's entry in the line was refused).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import limits_app
import pytest
from chaos import install_commit_log, run_sql, worker_dsn
from processes import HERE, PYTHONPATH, start_worker

from postgres import drop_schemas, fresh_schema
from treadle.stores import PostgresStore, SqliteStore
from treadle.workers import Client

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.integration, pytest.mark.fleet, pytest.mark.timeout(900)]

LEASE = 5.0  # generous: a loaded machine delays heartbeats


@dataclass
class Calls:
    """What the handlers wrote: each call's start and end (``None``: its process died first)."""

    starts: list[tuple[float, str, int]] = field(default_factory=list)  # (at, call, pid)
    intervals: list[tuple[float, float | None, int]] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> Calls:
        calls = cls()
        ends: dict[tuple[str, float], float] = {}
        lines = path.read_text().splitlines() if path.exists() else []
        for line in lines:
            parts = line.split()
            if parts[0] == "end":
                ends[(f"{parts[2]}/{parts[3]}/{parts[4]}", float(parts[5]))] = float(parts[1])
        for line in lines:
            parts = line.split()
            if parts[0] == "start":
                at, call, pid = float(parts[1]), f"{parts[2]}/{parts[3]}", int(parts[4])
                calls.starts.append((at, call, pid))
                calls.intervals.append((at, ends.get((f"{call}/{pid}", at)), pid))
        return calls

    def in_flight(self, pid: int) -> bool:
        return any(end is None and who == pid for _, end, who in self.intervals)

    def most_at_once(self, dead: int, died_at: float, after: float = 0.0) -> int:
        """The most calls under way at one moment at or after ``after``."""
        points = []
        for start, end, pid in self.intervals:
            finish = end if end is not None else (died_at if pid == dead else float("inf"))
            if finish <= after:
                continue
            points += [(max(start, after), 1), (finish, -1)]
        most = now = 0
        for _, step in sorted(points, key=lambda p: (p[0], p[1])):  # ends before starts
            now += step
            most = max(most, now)
        return most


def most_in_a_window(times: list[float], window: float) -> int:
    ordered = sorted(times)
    most, first = 0, 0
    for last, at in enumerate(ordered):
        while first < last and at - ordered[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most


def lags(calls: Calls, grants: list[tuple[str, float]]) -> list[float]:
    """Each call's start less its latest grant before it (its process heard of it that late)."""
    granted: dict[str, list[float]] = {}
    for call_id, at in grants:  # run/superstep/executor/position
        run_id, _, executor_id, _ = call_id.split("/")
        granted.setdefault(f"{run_id}/{executor_id}", []).append(at)
    found = []
    for start, call, _ in calls.starts:
        before = [at for at in granted.get(call, []) if at <= start + 0.01]
        assert before, f"{call} started at {start} with no slot granted before"
        found.append(start - max(before))
    return found


def check(
    calls: Calls,
    grants: list[tuple[str, float]],
    dead: int,
    died_at: float,
    runs: int,
    back_after: float,
) -> None:
    """The campaign's checks; the dead process's slots are back ``back_after`` its death."""
    finished = [1 for _, end, _ in calls.intervals if end is not None]
    assert len(finished) >= runs * 5
    assert calls.most_at_once(dead, died_at) <= limits_app.CONCURRENCY
    assert most_in_a_window([at for _, at in grants], limits_app.PER) <= limits_app.CALLS
    # A call starts once its process hears of its grant: no window shorter by the
    # longest such lag holds more starts than the rate allows.
    lag = max(lags(calls, grants))
    print(f"longest grant-to-start lag: {lag:.3f} s")
    starts = [at for at, _, _ in calls.starts]
    assert most_in_a_window(starts, max(limits_app.PER - lag, 0.0)) <= limits_app.CALLS
    # Its slots came back: calls ran as many at once as the limit allows after it died
    # (it died mid-call: had its slot not come back, at most one fewer could).
    assert calls.most_at_once(dead, died_at, after=died_at + back_after) == limits_app.CONCURRENCY


async def check_outputs(store) -> None:
    """Every run's outputs are those of an uninterrupted run of its input."""
    try:
        for run in await store.list_runs():
            record = await store.load_checkpoint(run.run_id)
            outputs = limits_app.limited.codec.decode(record, run_id=run.run_id).outputs
            assert outputs == [limits_app.expected_output(int(run.run_id.removeprefix("run-")))]
    finally:
        await store.close()


async def until(condition, seconds: float, what: str) -> None:
    deadline = time.time() + seconds
    while not await condition():
        if time.time() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.05)


# -- SQLite: one file, two processes -----------------------------------------------------
def sqlite_logs(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE grant_log (call_id TEXT, at REAL);
            CREATE TRIGGER log_grant AFTER UPDATE OF granted_at ON treadle_limit_slots
            WHEN NEW.granted_at IS NOT NULL AND OLD.granted_at IS NULL
            BEGIN INSERT INTO grant_log VALUES (NEW.call_id, NEW.granted_at); END;
            CREATE TABLE commit_log (run_id TEXT, superstep INTEGER);
            CREATE TRIGGER log_commit AFTER INSERT ON treadle_checkpoints
            BEGIN INSERT INTO commit_log VALUES (NEW.run_id, NEW.superstep); END;
            """
        )


def driver(path: Path, first: int, count: int, log: Path, calls: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "TREADLE_CALL_LOG": str(calls),
        "PYTHONPATH": PYTHONPATH,
    }
    command = [sys.executable, str(HERE / "limits_driver.py"), str(path), str(first), str(count)]
    with log.open("wb") as sink:
        return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=sink)


async def sqlite_campaign(tmp_path: Path, runs: int) -> None:
    path, calls_file = tmp_path / "runs.db", tmp_path / "calls.log"
    store = SqliteStore(path)
    await store.list_runs()  # the tables, before the triggers
    await store.close()
    sqlite_logs(path)
    half = runs // 2
    drivers = [
        driver(path, 0, half, tmp_path / "d0.log", calls_file),
        driver(path, half, runs - half, tmp_path / "d1.log", calls_file),
    ]
    victim = drivers[0]
    try:

        async def mid_call() -> bool:
            calls = Calls.read(calls_file)
            return len(calls.starts) > runs and calls.in_flight(victim.pid)

        await until(mid_call, 300, "the first driver to be mid-call")
        victim.send_signal(signal.SIGKILL)
        died_at = time.time()
        victim.wait()
        survivor = drivers[1]
        await asyncio.to_thread(survivor.wait, 600)
        assert survivor.returncode == 0, (tmp_path / "d1.log").read_text()
    finally:
        for process in drivers:
            if process.poll() is None:
                process.kill()
                process.wait()
    with sqlite3.connect(path) as db:
        outputs = dict(db.execute("SELECT run_id, status FROM treadle_runs").fetchall())
        grants = db.execute("SELECT call_id, at FROM grant_log").fetchall()
        twice = db.execute(
            "SELECT run_id, superstep FROM commit_log GROUP BY 1, 2 HAVING count(*) > 1"
        ).fetchall()
    assert len(outputs) == runs
    assert set(outputs.values()) == {"completed"}
    assert twice == []
    # On one host the survivor sees the killed process is gone and takes its runs over
    # at once (see owner_is_dead), its slots with them: they are back before any lease.
    check(Calls.read(calls_file), grants, victim.pid, died_at, runs, back_after=0.0)
    await check_outputs(SqliteStore(path))


async def test_two_processes_on_one_sqlite_file_share_a_limit_and_a_killed_ones_slots_return(
    tmp_path,
):
    await sqlite_campaign(tmp_path, 40)


@pytest.mark.soak
async def test_two_hundred_runs_on_one_sqlite_file(tmp_path):
    await sqlite_campaign(tmp_path, 200)


# -- PostgreSQL: three workers ----------------------------------------------------------
async def postgres_logs(dsn: str, schema: str) -> None:
    await run_sql(dsn, schema, "CREATE TABLE grant_log (call_id TEXT, at DOUBLE PRECISION)")
    await run_sql(
        dsn,
        schema,
        "CREATE FUNCTION log_grant() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN IF NEW.granted_at IS NOT NULL AND OLD.granted_at IS NULL THEN"
        " INSERT INTO grant_log VALUES (NEW.call_id, NEW.granted_at); END IF;"
        " RETURN NEW; END $$",
    )
    await run_sql(
        dsn,
        schema,
        "CREATE TRIGGER log_grant AFTER UPDATE ON treadle_limit_slots"
        " FOR EACH ROW EXECUTE FUNCTION log_grant()",
    )
    await install_commit_log(dsn, schema)


async def postgres_campaign(dsn: str, tmp_path: Path, runs: int) -> None:
    schema = fresh_schema()
    calls_file = tmp_path / "calls.log"
    store = PostgresStore(dsn, schema=schema)
    try:
        client = Client(store)
        for n in range(runs):
            await client.start("limited", n, run_id=f"run-{n:04}")
    finally:
        await store.close()
    await postgres_logs(dsn, schema)
    os.environ["TREADLE_CALL_LOG"] = str(calls_file)  # the workers inherit it
    names = [f"w{n}" for n in range(3)]
    try:
        workers = {
            name: start_worker(
                worker_dsn(dsn, name),
                schema,
                tmp_path / f"{name}.log",
                name=name,
                lease=LEASE,
                poll=0.2,
                app="limits_app",
            )
            for name in names
        }
    finally:
        del os.environ["TREADLE_CALL_LOG"]
    try:

        async def mid_call() -> bool:
            calls = Calls.read(calls_file)
            return len(calls.starts) > runs and calls.in_flight(workers["w0"].pid)

        await until(mid_call, 300, "w0 to be mid-call")
        workers["w0"].send_signal(signal.SIGKILL)
        died_at = time.time()
        workers["w0"].wait()
        left = "SELECT count(*) FROM treadle_runs WHERE status <> 'completed'"

        async def all_done() -> bool:
            return (await run_sql(dsn, schema, left))[0][0] == 0

        await until(all_done, 600, "every run to complete")
        rows = await run_sql(dsn, schema, "SELECT run_id, status FROM treadle_runs")
        await check_outputs(PostgresStore(dsn, schema=schema))
        grants = [
            (str(call_id), float(at))  # type: ignore[arg-type]
            for call_id, at in await run_sql(dsn, schema, "SELECT call_id, at FROM grant_log")
        ]
        twice = await run_sql(
            dsn,
            schema,
            "SELECT run_id, superstep FROM commit_log GROUP BY 1, 2 HAVING count(*) > 1",
        )
    finally:
        for process in workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in workers.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        await drop_schemas([schema])
    (tmp_path / "grants.log").write_text("".join(f"{at:.6f} {c}\n" for c, at in grants))
    assert len(rows) == runs
    assert {status for _, status in rows} == {"completed"}
    assert twice == []
    # A worker is judged by its lease alone: its runs, and their slots, come back after it.
    check(Calls.read(calls_file), grants, workers["w0"].pid, died_at, runs, back_after=LEASE)


async def test_three_postgres_workers_share_a_limit_and_a_killed_ones_slots_return(dsn, tmp_path):
    await postgres_campaign(dsn, tmp_path, 40)


@pytest.mark.soak
async def test_two_hundred_runs_on_three_postgres_workers(dsn, tmp_path):
    await postgres_campaign(dsn, tmp_path, 200)
