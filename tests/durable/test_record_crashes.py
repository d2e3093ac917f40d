"""The record survives SIGKILL (issue 29): never an effect without its entry, nor an entry
without its effect, on SQLite and PostgreSQL, with a real process killed at random moments."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from durable.conftest import drop_schemas, fresh_schema, postgres_dsn
from treadle._operations._audit import verify
from treadle.stores import SqliteStore

if TYPE_CHECKING:
    from treadle.stores import Store

APP = Path(__file__).parent / "record_app.py"
KILLS = int(os.environ.get("TREADLE_RECORD_KILLS", "3"))


async def _kill_at_random(where: str, env: dict[str, str], rng: random.Random) -> None:
    """Start the acting process, let it act for a random while, SIGKILL it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(APP), "kill", where, "4", stdout=asyncio.subprocess.PIPE, env=env
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), timeout=60)
    assert line.strip() in {b"ready", b""}
    await asyncio.sleep(rng.uniform(0.05, 0.6))
    process.send_signal(signal.SIGKILL)
    await process.wait()


async def _check_record(store: Store) -> None:
    """Each action's effect has its entries, and each entry its effect."""
    found = await verify(store)
    assert found.problems == []
    audit = await store.read_audit()
    present = {run.run_id: run for run in await store.list_runs()}
    for run_id, run in present.items():
        logged = [e for e in await store.read_events(run_id) if "actor" in e.data]
        # A run deleted and started again under its id keeps its earlier life's entries.
        ended = max(
            (e.seq for e in audit if e.run_id == run_id and e.action == "run_deleted"), default=0
        )
        entries = [e for e in audit if e.run_id == run_id and e.seq > ended]
        # The run's log and the audit log hold the same actions, in the same order.
        assert [(e.kind, e.data["audit"]["seq"]) for e in logged] == [
            (e.action, e.seq) for e in entries
        ]
        answered = {e.data["request_id"] for e in logged if e.kind == "request_answered"}
        assert answered == await _answers(store, run_id), (
            run_id
        )  # an answer kept has its entry, an entry its answer
        cancelled = any(e.kind == "run_cancelled" for e in logged)
        assert cancelled == (run.status == "cancelled"), run_id


async def _answers(store: Store, run_id: str) -> set[str]:
    """The requests of the run (asked in its log) whose answer the store kept."""
    asked = {
        e.data.get("request_id") for e in await store.read_events(run_id) if e.kind == "request"
    }
    return {rid for rid in asked if rid and await store.answer_of(run_id, rid) is not None}


@pytest.mark.integration
async def test_sigkill_never_splits_an_action_from_its_record_on_sqlite(tmp_path: Path) -> None:
    where = str(tmp_path / "record.sqlite")
    rng = random.Random()
    for _ in range(KILLS):
        await _kill_at_random(where, dict(os.environ), rng)
    store = SqliteStore(where)
    try:
        await _check_record(store)
        assert len(await store.read_audit()) > 4  # it got to act before it was killed
    finally:
        await store.close()


@pytest.mark.integration
async def test_sigkill_never_splits_an_action_from_its_record_on_postgres() -> None:
    from treadle.stores import PostgresStore  # noqa: PLC0415 - psycopg only here

    dsn = postgres_dsn()
    schema = fresh_schema()
    env = {**os.environ, "RECORD_SCHEMA": schema}
    rng = random.Random()
    store = PostgresStore(dsn, schema=schema)
    try:
        for _ in range(KILLS):
            await _kill_at_random(dsn, env, rng)
        await _check_record(store)
        assert len(await store.read_audit()) > 4
    finally:
        await store.close()
        await drop_schemas([schema])
