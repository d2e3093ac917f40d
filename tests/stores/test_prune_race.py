"""A prune in one process racing a run resumed from an old checkpoint in another.

The resumed run loaded checkpoint 2 and computes its next superstep while a
second process prunes the run to its latest checkpoint, deleting checkpoint 2
and the value only it and its successor held. The resumed run's commit must be
refused with ``CheckpointNotFoundError`` (never a checkpoint naming pieces
that are gone), and the run as the prune left it must still load and resume.
Both on a SQLite file and on PostgreSQL, each caller a process of its own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import prune_race_app
import pytest

from postgres import drop_schemas, fresh_schema, postgres_dsn
from treadle.stores import PostgresStore, SqliteStore

HERE = Path(__file__).parent


def script(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "prune_race_app.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def race(where: str, store, tmp_path: Path) -> None:
    workflow = prune_race_app.build()
    done = await workflow.run(1, store=store)
    history = await workflow.history(done.run_id, store=store)
    second = history.checkpoints[2]  # the barrier of superstep 2: it set "note 2"
    assert second.superstep == 2
    await store.close()

    go = tmp_path / "go"
    resumed = script("resume", where, done.run_id, second.checkpoint_id, str(go))
    assert resumed.stdout.readline() == "running\n"  # checkpoint 2 is loaded, superstep 3 runs
    pruner = script("prune", where, done.run_id)
    pruned, errors = pruner.communicate(timeout=60)
    assert pruner.returncode == 0, errors
    assert pruned == f"pruned {len(history.checkpoints) - 1}\n"
    go.touch()
    out, errors = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, errors
    assert out == f"refused {second.checkpoint_id}\n"

    # What the prune kept is whole: the latest checkpoint loads and resumes as it was.
    reopened = prune_race_app.open_store(where)
    try:
        [kept] = (await workflow.history(done.run_id, store=reopened)).checkpoints
        assert kept.checkpoint_id == history.checkpoints[-1].checkpoint_id
        again = await workflow.resume(done.run_id, store=reopened)
        assert again.state == done.state
    finally:
        await reopened.close()


async def test_a_prune_in_another_process_refuses_the_resumed_runs_commit_on_sqlite(tmp_path):
    where = str(tmp_path / "store.sqlite")
    await race(where, SqliteStore(where), tmp_path)


@pytest.mark.integration
async def test_a_prune_in_another_process_refuses_the_resumed_runs_commit_on_postgres(tmp_path):
    dsn, schema = postgres_dsn(), fresh_schema()
    try:
        await race(f"{dsn}#{schema}", PostgresStore(dsn, schema=schema), tmp_path)
    finally:
        await drop_schemas([schema])
