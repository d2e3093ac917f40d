"""``treadle schedules`` commands racing as separate processes, on SQLite and PostgreSQL.

Each process is told the truth: of six creating one schedule id at once,
one is told it created it and five that it exists; pauses and deletes
racing on it are each either done, and recorded once in the audit log with
the CLI's user, or refused naming why. Nothing is recorded for a refusal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from test_cli_delete_race import race
from treadle_cli import Cli

from postgres import drop_schemas, fresh_schema, postgres_dsn
from treadle import Actor
from treadle.stores import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

CLI_USER = Actor.cli().label
CREATE = ("schedules", "create", "nightly", "--workflow", "digest", "--cron", "0 2 * * *")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
async def cli(request, tmp_path: Path):
    """The CLI on a store that exists already (nothing races on making it)."""
    if request.param == "sqlite":
        store = SqliteStore(tmp_path / "runs.sqlite")
        await store.list_runs(limit=1)
        await store.close()
        yield Cli(tmp_path)
        return
    from treadle.stores import PostgresStore  # noqa: PLC0415 - psycopg only here

    schema = fresh_schema()
    store = PostgresStore(postgres_dsn(), schema=schema)
    await store.list_runs(limit=1)
    await store.close()
    try:
        yield Cli(tmp_path, TREADLE_STORE=postgres_dsn(), TREADLE_SCHEMA=schema)
    finally:
        await drop_schemas([schema])


def _recorded(cli: Cli, action: str) -> list[str]:
    return [
        e["actor"]["label"]
        for e in cli.json("audit")["entries"]
        if e["action"] == action and e["detail"].get("schedule") == "nightly"
    ]


def test_racing_creates_pauses_and_deletes_each_tell_the_truth(cli: Cli) -> None:
    made = race(cli, *[CREATE] * 6)
    assert sorted(p.returncode for p in made) == [0, 2, 2, 2, 2, 2], [p.stderr for p in made]
    for refused in (p for p in made if p.returncode):
        assert "nightly" in refused.stderr, refused.stderr
        assert "exists" in refused.stderr, refused.stderr
    assert _recorded(cli, "schedule_created") == [CLI_USER]

    pausing, deleting = ("schedules", "pause", "nightly"), ("schedules", "delete", "nightly")
    racing = race(cli, *[pausing] * 3, *[deleting] * 3)
    paused = [p for p in racing[:3] if p.returncode == 0]
    deleted = [p for p in racing[3:] if p.returncode == 0]
    assert len(deleted) == 1, [p.stderr for p in racing[3:]]
    for refused in (p for p in racing if p.returncode):
        assert refused.returncode == 2, refused.stderr
        assert "nightly" in refused.stderr, refused.stderr
    assert _recorded(cli, "schedule_deleted") == [CLI_USER]
    assert len(_recorded(cli, "schedule_paused")) == len(paused)
    assert cli.json("schedules", "list")["schedules"] == []
