"""A stored cell overwritten with garbage is a named error, never a raw decoding error.

A checkpoint's ``refs`` (the JSON list of the pieces its frame names), its
blob, and a run's event-log rows are decoded when read. Whatever a bad disk,
a hand edit or a foreign tool leaves there, reading them raises
``CheckpointCorruptError`` (or ``EventLogCorruptError``) naming the run and
the checkpoint (or the events), from the Python API and as one line from
``treadle resume``, ``prune``, ``delete`` and ``logs``, on SQLite and
PostgreSQL.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cli.treadle_cli import Cli
from postgres import drop_schemas, fresh_schema, postgres_dsn
from treadle.errors import CheckpointCorruptError, EventLogCorruptError
from treadle.stores import SqliteStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corrupt_app import review

if TYPE_CHECKING:
    import subprocess
    from collections.abc import AsyncIterator

    from treadle._stores._store import Store

HERE = Path(__file__).resolve().parent
GARBAGE = ["not json", "7", "null", "[[1]]"]


class Stored:
    """A store of one backend, the SQL to corrupt it, and the ``treadle`` command on it."""

    def __init__(self, backend: str, tmp_path: Path) -> None:
        self.backend = backend
        if backend == "sqlite":
            self.url = str(tmp_path / "runs.sqlite")
            self.schema: str | None = None
            self.cli = Cli(tmp_path, PYTHONPATH=str(HERE), TREADLE_STORE=self.url)
        else:
            self.url, self.schema = postgres_dsn(), fresh_schema()
            self.cli = Cli(
                tmp_path, PYTHONPATH=str(HERE), TREADLE_STORE=self.url, TREADLE_SCHEMA=self.schema
            )

    def open(self) -> Store:
        if self.schema is None:
            return SqliteStore(self.url)
        from treadle.stores import PostgresStore  # noqa: PLC0415 - psycopg only when used

        return PostgresStore(self.url, schema=self.schema)

    def execute(self, statement: str, *values: Any) -> None:
        """Run ``statement`` (``?`` placeholders) on the store's tables, behind its back."""
        if self.schema is None:
            with sqlite3.connect(self.url) as db:
                db.execute(statement, values)
            return
        import psycopg  # noqa: PLC0415 - only PostgreSQL tests need it

        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(f'SET search_path TO "{self.schema}"')
            db.execute(statement.replace("?", "%s"), values)

    def treadle(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.cli(*args)


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=[pytest.mark.integration]),
    ]
)
async def stored(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stored]:
    """A store holding one run resting on its question, on each SQL backend in turn."""
    where = Stored(request.param, tmp_path)
    try:
        yield where
    finally:
        if where.schema is not None:
            await drop_schemas([where.schema])


async def park(stored: Stored) -> tuple[str, str]:
    """A run waiting for its answer: its id and its newest checkpoint's."""
    store = stored.open()
    try:
        result = await review.run("budget", store=store)
        latest = (await store.get_run(result.run_id)).checkpoint_id
    finally:
        await store.close()
    assert latest is not None
    return result.run_id, latest


def one_line(done: subprocess.CompletedProcess[str], *names: str) -> None:
    """The command refused with one line naming ``names``, not a traceback."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert all(name in lines[0] for name in names), done.stderr


@pytest.mark.parametrize("garbage", GARBAGE)
async def test_a_corrupt_refs_cell_is_a_checkpoint_corrupt_error_naming_run_and_checkpoint(
    stored: Stored, garbage: str
) -> None:
    run_id, latest = await park(stored)
    stored.execute(
        "UPDATE treadle_checkpoints SET refs = ? WHERE checkpoint_id = ?", garbage, latest
    )
    store = stored.open()
    try:
        with pytest.raises(CheckpointCorruptError) as raised:
            await review.resume(run_id, store=store)
        assert (raised.value.run_id, raised.value.checkpoint_id) == (run_id, latest)
        with pytest.raises(CheckpointCorruptError) as raised:
            await store.delete_run(run_id)
        assert (raised.value.run_id, raised.value.checkpoint_id) == (run_id, latest)
    finally:
        await store.close()


async def test_the_cli_names_a_corrupt_cell_in_one_line(stored: Stored) -> None:
    run_id, latest = await park(stored)
    stored.execute("UPDATE treadle_checkpoints SET refs = '[[1]]' WHERE checkpoint_id = ?", latest)
    app = "corrupt_app:review"
    one_line(stored.treadle("resume", run_id, "--app", app), run_id, latest)
    one_line(stored.treadle("prune", "--keep", "1"), run_id, latest)
    one_line(stored.treadle("delete", run_id, "--yes"), run_id, latest)
    # A checkpoint's blob, and a row of the event log, are read as carefully.
    stored.execute(
        "UPDATE treadle_checkpoints SET refs = NULL, blob = ? WHERE checkpoint_id = ?",
        b"[[1]]",
        latest,
    )
    one_line(stored.treadle("resume", run_id, "--app", app), run_id, latest)
    stored.execute("UPDATE treadle_events SET events = 'null' WHERE run_id = ?", run_id)
    one_line(stored.treadle("logs", run_id), run_id, "event log")
    store = stored.open()
    try:
        with pytest.raises(EventLogCorruptError) as raised:
            await store.read_events(run_id)
        assert raised.value.run_id == run_id
    finally:
        await store.close()
