"""Treadle's ids do not follow the program's ``random.seed``.

Checkpoint, piece and owner ids once took their random bits from the
``random`` module, which belongs to the program: a step that reseeded it
made the same ids again, and a piece of state made again under a stored
piece's id is not written (pieces are written once), so later checkpoints
restored an earlier superstep's value, or in a second process seeded
alike, another run's. Each checkpoint is read back here through a fork of
it, whose first superstep outputs the value it found.
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import TYPE_CHECKING

import pytest
from seeded_app import STEPS, workflow

import forked
from postgres import postgres_dsn
from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.stores import PostgresStore, SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

    from treadle import Workflow
    from treadle._stores._store import Store


async def values_found(wf: Workflow, store: Store, run_id: str) -> list[str]:
    """What each checkpoint of the run holds, but the last: its fork's first output.

    A fork keeps the outputs made before its checkpoint: one a superstep.
    """
    history = await wf.history(run_id, store=store)
    found = []
    for checkpoint in history.checkpoints[:-1]:
        fork_id = await wf.fork(run_id, checkpoint.checkpoint_id, store=store)
        outputs = (await wf.resume(fork_id, store=store)).outputs
        found.append(outputs[checkpoint.superstep])
    return found


async def test_a_step_that_reseeds_random_leaves_each_checkpoint_its_own_state(tmp_path):
    @executor(id="step")
    async def step(i: int, ctx: WorkflowContext[int]) -> None:
        random.seed(0)  # reproducible sampling, as a step may want
        ctx.yield_output(ctx.state["value"])
        await asyncio.sleep(0.002)  # the next checkpoint in another millisecond
        ctx.state.set("value", f"at step {i}")
        if i < STEPS:
            ctx.send_message(i + 1)

    wf = WorkflowBuilder(start=step).add_edge(step, step).add_state("value", default="").build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        result = await wf.run(0, store=store)
        found = await values_found(wf, store, result.run_id)
    finally:
        await store.close()
    written = ["", "at step 0", "at step 1", "at step 2"]
    assert result.outputs == written
    assert found == written


def run_in_seeded_processes(store_url: str, env: dict[str, str] | None = None) -> list[str]:
    """Two processes, one after the other, each seeding ``random`` alike; their run ids."""
    run_ids = []
    for label in ("first", "second"):
        process = forked.start("seeded_app:run", store_url, label, env=env)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        run_ids.append(out.strip())
    return run_ids


async def assert_each_run_holds_its_own(store: Store, run_ids: list[str]) -> None:
    try:
        for label, run_id in zip(("first", "second"), run_ids, strict=True):
            found = await values_found(workflow(label), store, run_id)
            assert found == ["", *(f"{label} at step {i}" for i in range(STEPS))], label
    finally:
        await store.close()


async def test_two_processes_seeded_alike_keep_their_runs_apart_on_sqlite(tmp_path: Path):
    path = str(tmp_path / "runs.sqlite")
    run_ids = await asyncio.to_thread(run_in_seeded_processes, path)
    await assert_each_run_holds_its_own(SqliteStore(path), run_ids)


@pytest.mark.integration
async def test_two_processes_seeded_alike_keep_their_runs_apart_on_postgres(schema: str):
    dsn = postgres_dsn()
    env = {**os.environ, "SEEDED_SCHEMA": schema}
    run_ids = await asyncio.to_thread(run_in_seeded_processes, dsn, env)
    await assert_each_run_holds_its_own(PostgresStore(dsn, schema=schema), run_ids)
