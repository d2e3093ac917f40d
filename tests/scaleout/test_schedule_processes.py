"""Schedules served by real processes that are killed, stopped and raced: one run per tick.

* Three ``treadle worker`` processes and a ``treadle serve`` on PostgreSQL:
  the schedule (every 2 s) is created through the server's API, and
  workers are SIGKILLed at random and started again for 10 s (about four
  kills and five ticks; 60 s under ``make soak``).
* Two ``treadle serve`` processes on one SQLite file, each SIGKILLed at
  random and started again, the same way.
* A serving process stopped (SIGSTOP) for 6 s (30 s under ``make soak``)
  catches up per each schedule's window when it goes on.
* Two ``treadle schedules backfill`` processes racing over one range.

In each, every tick from the first to the last started has exactly one
run, its own (:func:`schedule_processes.check_one_run_per_tick`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import signal
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import httpx
import pytest
from processes import wait_until
from schedule_processes import (
    TREADLE,
    Serve,
    check_one_run_per_tick,
    environment,
    start_worker,
    stop_all,
)

import forked
from treadle.stores import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.fleet, pytest.mark.timeout(900)]  # each wait is bounded

# 10 s holds several ticks (every 2 s) and kills (one each 1-3 s); the minute runs under soak.
LENGTHS = [
    pytest.param(10, id="10s"),
    pytest.param(60, id="60s", marks=pytest.mark.soak),
]
EVERY = 2.0


def create_schedule(server: Serve, **fields) -> dict:
    body = {"id": "digest", "workflow": "digest", "every": EVERY, "input": "{nominal_utc}"}
    with httpx.Client(base_url=server.base, headers=server.headers, timeout=60) as client:
        made = client.post("/api/schedules", json={**body, **fields})
        assert made.status_code == 201, made.text
        return made.json()["schedule"]


def pause_schedule(server: Serve, schedule_id: str = "digest") -> None:
    with httpx.Client(base_url=server.base, headers=server.headers, timeout=60) as client:
        paused = client.post(f"/api/schedules/{schedule_id}/pause")
        assert paused.status_code == 200, paused.text


async def settled(store, schedule_id: str = "digest") -> bool:
    """Every started tick's run exists and has ended."""
    if await store.list_ticks(schedule_id, unstarted=True):
        return False
    runs = await store.list_runs(id_prefix=f"{schedule_id}@")
    return all(run.status in {"completed", "failed", "cancelled"} for run in runs)


@pytest.mark.parametrize("seconds", LENGTHS)
async def test_three_workers_killed_at_random_start_one_run_per_tick(
    seconds, dsn, schema, store, tmp_path: Path
) -> None:
    chance = random.Random(seconds)
    logs = tmp_path / "workers.log"
    workers = [start_worker(dsn, schema, logs, f"w{i}") for i in range(3)]
    server = Serve(dsn, tmp_path / "serve.log", schema).start()
    started = [*workers]
    try:
        create_schedule(server, overlap="allow", catchup=60)
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        kills = 0
        while loop.time() < end:
            await asyncio.sleep(chance.uniform(1.0, 3.0))
            victim = chance.randrange(3)
            workers[victim].send_signal(signal.SIGKILL)
            workers[victim].wait(timeout=30)
            kills += 1
            workers[victim] = start_worker(dsn, schema, logs, f"w{victim}-{kills}")
            started.append(workers[victim])
        pause_schedule(server)
        async with asyncio.timeout(180):
            await wait_until(lambda: settled(store), interval=0.2)
    finally:
        server.stop()
        stop_all(started)
    nominals = await check_one_run_per_tick(store, "digest", EVERY)
    assert kills >= seconds // 3
    assert len(nominals) >= seconds / EVERY * 0.6, (len(nominals), logs.read_text()[-3000:])


@pytest.mark.parametrize("seconds", LENGTHS)
async def test_two_servers_on_one_sqlite_file_killed_at_random_start_one_run_per_tick(
    seconds, tmp_path: Path
) -> None:
    chance = random.Random(seconds + 1)
    path = tmp_path / "runs.db"
    url = f"sqlite:///{path}"
    servers = [Serve(url, tmp_path / f"serve{i}.log").start() for i in range(2)]
    try:
        create_schedule(servers[0], overlap="allow", catchup=60)
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while loop.time() < end:
            await asyncio.sleep(chance.uniform(1.0, 3.0))
            victim = servers[chance.randrange(2)]
            victim.kill()
            victim.start()
        pause_schedule(servers[0])
        store = SqliteStore(path)
        try:
            async with asyncio.timeout(180):
                await wait_until(lambda: settled(store), interval=0.2)
            nominals = await check_one_run_per_tick(store, "digest", EVERY)
        finally:
            await store.close()
    finally:
        for server in servers:
            server.stop()
    assert len(nominals) >= seconds / EVERY * 0.6


@pytest.mark.parametrize(
    # 6 s is the least that always misses a tick: "narrow" takes back the last 3 s of the
    # outage, and the 3 s before them hold at least one tick (every 2 s).
    "pause",
    [pytest.param(6, id="6s"), pytest.param(30, id="30s", marks=pytest.mark.soak)],
)
async def test_a_server_stopped_for_a_while_catches_up_per_its_window(pause, tmp_path) -> None:
    path = tmp_path / "runs.db"
    server = Serve(f"sqlite:///{path}", tmp_path / "serve.log").start()
    store = SqliteStore(path)
    try:
        # "wide" takes every tick of the outage back; "narrow" only the last 3 seconds'.
        create_schedule(server, id="wide", overlap="allow", catchup=pause * 4)
        create_schedule(server, id="narrow", overlap="allow", catchup=3)
        async with asyncio.timeout(120):
            await wait_until(lambda: _started(store, "narrow", 2), interval=0.2)
        assert server.process is not None
        server.process.send_signal(signal.SIGSTOP)
        stopped_at = datetime.now(UTC).timestamp()
        await asyncio.sleep(pause)
        server.process.send_signal(signal.SIGCONT)
        resumed_at = datetime.now(UTC).timestamp()
        async with asyncio.timeout(120):
            await wait_until(lambda: _started_after(store, "narrow", resumed_at), interval=0.2)
        pause_schedule(server, "wide")
        pause_schedule(server, "narrow")
        async with asyncio.timeout(180):
            await wait_until(lambda: settled(store, "wide"), interval=0.2)
            await wait_until(lambda: settled(store, "narrow"), interval=0.2)
        await check_one_run_per_tick(store, "wide", EVERY)  # nothing missed: all caught up
        narrow = await store.list_ticks("narrow", limit=1000)
        missed = [t for t in narrow if t.action == "missed"]
        assert len(missed) == 1, narrow
        (row,) = missed
        assert stopped_at - EVERY <= row.nominal_at <= resumed_at
        count = int(row.detail.split(" ", 1)[0])
        assert count >= (pause - 3) / EVERY - 2
        started = sorted(t.nominal_at for t in narrow if t.action == "started")
        assert all(b - a == EVERY for a, b in itertools.pairwise(started) if a > row.nominal_at)
    finally:
        server.stop()
        await store.close()


async def _started(store, schedule_id: str, count: int) -> bool:
    ticks = await store.list_ticks(schedule_id, limit=100)
    return sum(1 for t in ticks if t.action == "started") >= count


async def _started_after(store, schedule_id: str, moment: float) -> bool:
    ticks = await store.list_ticks(schedule_id, limit=100)
    return any(t.action == "started" and t.decided_at >= moment for t in ticks)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_two_backfills_racing_as_processes_start_each_tick_once(
    backend, tmp_path, new_schema
) -> None:
    if backend == "postgres":
        from postgres import postgres_dsn  # noqa: PLC0415

        url, schema = postgres_dsn(), new_schema()
    else:
        url, schema = f"sqlite:///{tmp_path / 'runs.db'}", None
    reports = race_backfills(url, schema)
    assert len(reports[0]["ticks"]) == 24
    # Between them, each tick was recorded to start by exactly one of the two.
    firsts, seconds = (set(r["started"]) for r in reports)
    assert not firsts & seconds
    assert firsts | seconds == set(reports[0]["ticks"])
    # Whatever serves the store starts them, each once.
    if backend == "postgres":
        workers = [start_worker(url, schema, tmp_path / "w.log", f"w{i}") for i in range(2)]
        from treadle.stores import PostgresStore  # noqa: PLC0415

        store = PostgresStore(url, schema=schema)
    else:
        workers = []
        server = Serve(url, tmp_path / "serve.log").start()
        store = SqliteStore(tmp_path / "runs.db")
    try:
        async with asyncio.timeout(180):
            await wait_until(lambda: _all_done(store, 24), interval=0.2)
        ticks = await store.list_ticks("hourly", limit=100)
        assert len(ticks) == 24
        assert {t.source for t in ticks} == {"backfill"}
        runs = await store.list_runs(id_prefix="hourly@")
        assert sorted(r.run_id for r in runs) == sorted(reports[0]["run_ids"])
    finally:
        stop_all(workers)
        if backend != "postgres":
            server.stop()
        await store.close()


def race_backfills(url: str, schema: str | None) -> list[dict]:
    """Create an hourly schedule, then backfill a day of it from two processes at once."""
    env = environment(schema)
    create = [TREADLE, "schedules", "create", "hourly", "--workflow", "digest", "--store", url,
              "--cron", "0 * * * *", "--tz", "Europe/Paris", "--input", '"{nominal}"']  # fmt: skip
    with forked.start("treadle._cli._app:main", env=env, argv=create) as creating:
        code, _, err = creating.finish(120)
    assert code == 0, err
    start = (datetime.now(UTC) - timedelta(days=2)).replace(minute=30, second=0, microsecond=0)
    end = start + timedelta(hours=24)
    backfill = [TREADLE, "schedules", "backfill", "hourly", "--from", start.isoformat(),
                "--to", end.isoformat(), "--store", url, "--json"]  # fmt: skip
    racers = [forked.start("treadle._cli._app:main", env=env, argv=backfill) for _ in range(2)]
    outputs = forked.communicate_all(racers, timeout=120)
    assert [code for code, _, _ in outputs] == [0, 0], outputs
    return [json.loads(out) for _, out, _ in outputs]


async def _all_done(store, count: int) -> bool:
    runs = await store.list_runs(id_prefix="hourly@")
    return len(runs) >= count and all(r.status == "completed" for r in runs)
