"""PostgreSQL itself restarted under load: every run completes, nothing twice.

The test makes a PostgreSQL cluster of its own (``initdb`` into a scratch
directory, on a free port), so it can crash and restart the server without
touching the one other tests use. Two ``treadle worker`` processes serve 200
runs (500 under ``make soak``); a third of the way in the server is stopped
with ``-m immediate`` (no shutdown checkpoint: crash recovery on restart) and
started again a second later. Workers see failed statements, leave the runs to their leases, and
carry on once the server is back.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from processes import start_worker, wait_until
from psycopg import sql

from treadle.stores import PostgresStore
from treadle.workers import Client, connect

pytestmark = [pytest.mark.integration, pytest.mark.fleet, pytest.mark.timeout(300)]

BIN = Path("/usr/lib/postgresql/15/bin")
SUPERSTEPS = 5  # per run: begin + 4 steps


def _as_postgres(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", "postgres", "--", *command],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )


@pytest.fixture
def private_cluster():
    """A scratch PostgreSQL server: (dsn, data directory); removed afterwards."""
    if os.geteuid() != 0 or not (BIN / "initdb").exists() or shutil.which("runuser") is None:
        pytest.skip("needs root, runuser and PostgreSQL 15's initdb to make a scratch server")
    data = Path(tempfile.mkdtemp(prefix="treadle-pg-"))
    shutil.chown(data, "postgres", "postgres")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _as_postgres(str(BIN / "initdb"), "-D", str(data / "db"), "-A", "trust", "-U", "postgres")
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=on"
    start = [str(BIN / "pg_ctl"), "-D", str(data / "db"), "-o", options, "-l", str(data / "log")]
    _as_postgres(*start, "-w", "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres", start
    finally:
        subprocess.run(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                str(BIN / "pg_ctl"),
                "-D",
                str(data / "db"),
                "-m",
                "immediate",
                "stop",
            ],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(data, ignore_errors=True)


async def _sql(dsn: str, statement: str) -> list[tuple[object, ...]]:
    import psycopg  # noqa: PLC0415

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        await db.execute(sql.SQL("SET search_path TO treadle"))
        cursor = await db.execute(statement)  # type: ignore[arg-type]
        return await cursor.fetchall() if cursor.description else []


async def _count(dsn: str, statement: str) -> int:
    return int((await _sql(dsn, statement))[0][0])  # type: ignore[call-overload]


# 200 runs (1,200 commits) keep both workers busy through the outage; 500 under soak.
@pytest.mark.parametrize("runs", [200, pytest.param(500, marks=pytest.mark.soak)])
async def test_a_postgres_restart_mid_load_loses_and_duplicates_nothing(
    private_cluster, tmp_path, runs
):
    import scale_app  # noqa: PLC0415 - the workers' app, importable from here

    dsn, start = private_cluster
    store = PostgresStore(dsn, schema="treadle")
    client = Client(store)
    for n in range(runs):
        await client.start("counter", {"total": SUPERSTEPS - 1}, run_id=f"r{n:03}")
    await store.close()
    await _sql(dsn, "CREATE TABLE commit_log (run_id TEXT, superstep BIGINT)")
    await _sql(
        dsn,
        "CREATE FUNCTION log_commit() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN INSERT INTO commit_log VALUES (NEW.run_id, NEW.superstep); RETURN NEW; END $$",
    )
    await _sql(
        dsn,
        "CREATE TRIGGER log_commit AFTER INSERT ON treadle_checkpoints"
        " FOR EACH ROW EXECUTE FUNCTION log_commit()",
    )
    expected_commits = runs * (SUPERSTEPS + 1)

    async def a_third_committed() -> bool:
        return await _count(dsn, "SELECT count(*) FROM commit_log") >= expected_commits / 3

    async def all_completed() -> bool:
        query = "SELECT count(*) FROM treadle_runs WHERE status <> 'completed'"
        return await _count(dsn, query) == 0

    logs = [tmp_path / f"worker-{n}.log" for n in range(2)]
    workers = [
        start_worker(dsn, "treadle", log, name=f"w{n}", lease=2.0, poll=0.1)
        for n, log in enumerate(logs)
    ]
    try:
        await wait_until(a_third_committed)
        _as_postgres(*start, "-m", "immediate", "stop")
        await asyncio.sleep(1.0)
        _as_postgres(*start, "-w", "start")
        async with asyncio.timeout(180):
            await wait_until(all_completed, interval=0.1)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=60)
    statuses = await _sql(dsn, "SELECT status, count(*) FROM treadle_runs GROUP BY 1")
    assert statuses == [("completed", runs)]
    twice = await _sql(
        dsn, "SELECT run_id, superstep FROM commit_log GROUP BY 1, 2 HAVING count(*) > 1"
    )
    assert twice == []
    assert await _count(dsn, "SELECT count(*) FROM commit_log") == expected_commits
    alone = (await scale_app.counter.run(scale_app.Job(SUPERSTEPS - 1))).outputs
    async with connect(dsn, schema="treadle", workflows=[scale_app.counter]) as reader:
        listed = await reader.list_runs()
        outputs = {run.run_id: (await reader.result(run.run_id)).outputs for run in listed}
    assert len(outputs) == runs
    assert all(value == alone for value in outputs.values())
    # The workers did meet the outage (and came through it).
    seen = "".join(log.read_text() for log in logs)
    signs = (
        "cannot claim",
        "cannot heartbeat",
        "cannot listen",
        "release failed",
        "the store failed",
        "discarding closed connection",  # the pool found its connections cut
    )
    assert any(sign in seen for sign in signs), [ln for ln in seen.splitlines() if "INFO" not in ln]
