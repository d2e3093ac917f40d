"""A provider's 429 in one process holds back the limit's calls in every process on the store.

``busy_app``'s runs make one call each under a limit of one call at a time;
the first call of ``run-0000`` holds the limit's slot for half a second,
then raises ``ProviderBusyError`` with a ``Retry-After`` of one second. One
process drives the first half of the runs; once the refused call has
started, a second process starts driving the other half, its calls waiting
in the limit's line behind it: two ``Runtime`` processes on one SQLite file,
two ``treadle worker`` processes on PostgreSQL (the first one's runs fill
its concurrency, so the second takes the rest). The calls' own log shows
that after the refused call started, no call started in either process
before its ``Retry-After`` had passed, that calls of both processes waited
it out, and that every run completed, the refused call tried once more.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from typing import TYPE_CHECKING

import busy_app
import pytest
from chaos import worker_dsn
from processes import PYTHONPATH, start_worker, stop_all

import forked
from postgres import drop_schemas, fresh_schema
from treadle.stores import PostgresStore
from treadle.workers import Client

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

RUNS = 16


def check(log: Path) -> None:
    """The calls' log: the refused call, then nothing of either process for its Retry-After."""
    lines = [line.split() for line in log.read_text().splitlines()]
    refused = [line for line in lines if line[0] == "busy"]
    assert len(refused) == 1
    _, at, run_id, pid = refused[0]
    assert run_id == "run-0000"
    starts = [(float(t), run, p) for kind, t, run, p in lines if kind == "start"]
    assert sorted(run for _, run, _ in starts) == [f"run-{n:04}" for n in range(RUNS)]
    later = [(t, p) for t, _, p in starts if t > float(at)]
    assert min(t for t, _ in later) >= float(at) + busy_app.RETRY_AFTER
    assert {p for _, p in later} > {pid}, "the other process had no call held back"


async def until(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not await condition():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        await asyncio.sleep(0.02)


def has_refused(log: Path) -> bool:
    """Whether the refused call has written its line (a small file, read at once)."""
    return log.exists() and "busy" in log.read_text()


def refused_started(log: Path):
    """A condition for :func:`until`: the refused call has written its line."""

    async def condition() -> bool:
        return has_refused(log)

    return condition


async def test_a_429_in_one_process_holds_back_the_other_on_one_sqlite_file(tmp_path):
    path, log, errors = tmp_path / "runs.db", tmp_path / "calls.log", tmp_path / "d.log"
    env = {**os.environ, "TREADLE_CALL_LOG": str(log), "PYTHONPATH": PYTHONPATH}
    half, drivers = RUNS // 2, []
    try:
        for first in (0, half):
            drivers.append(
                forked.start(
                    "busy_app:drive",
                    *(str(path), first, half),
                    env=env,
                    stdout=os.devnull,
                    stderr=errors,
                )
            )
            await until(refused_started(log), 30, "the refused call")
        for driver in drivers:
            assert await asyncio.to_thread(driver.wait, 60) == 0, errors.read_text()
    finally:
        for driver in drivers:
            if driver.poll() is None:
                driver.kill()
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT status, count(*) FROM treadle_runs GROUP BY 1").fetchall()
    assert rows == [("completed", RUNS)]
    check(log)


@pytest.mark.fleet
async def test_a_429_in_one_worker_holds_back_the_other_on_postgres(dsn, tmp_path):
    schema, log = fresh_schema(), tmp_path / "calls.log"
    store = PostgresStore(dsn, schema=schema)
    try:
        client, workers = Client(store), []
        os.environ["TREADLE_CALL_LOG"] = str(log)  # the workers inherit it
        try:
            for name, first in (("w0", 0), ("w1", RUNS // 2)):
                for n in range(first, first + RUNS // 2):
                    await client.start("busy", n, run_id=f"run-{n:04}")
                workers.append(
                    start_worker(
                        worker_dsn(dsn, name),
                        schema,
                        tmp_path / f"{name}.log",
                        name=name,
                        lease=10.0,
                        poll=0.1,
                        app="busy_app",
                    )
                )
                await until(refused_started(log), 30, "the refused call")
        finally:
            del os.environ["TREADLE_CALL_LOG"]
        try:

            async def all_done() -> bool:
                runs = await client.list_runs(limit=RUNS + 1)
                return all(r.status == "completed" for r in runs)

            await until(all_done, 60, "every run to complete")
        finally:
            stop_all(workers)
        assert len(await client.list_runs(limit=RUNS + 1)) == RUNS
    finally:
        await store.close()
        await drop_schemas([schema])
    check(log)
