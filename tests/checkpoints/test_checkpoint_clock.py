"""Checkpoints are stamped by the run's clock: with a FakeClock, ``history`` shows the fake time."""

import pytest

from treadle import (
    ExponentialBackoff,
    RetryPolicy,
    RunStatus,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle.stores import MemoryStore, SqliteStore
from treadle.testing import FakeClock

START = 1_234_567.0  # far from today: a wall-clock stamp could never equal it
BACKOFF = 100.0


@pytest.fixture(params=["memory", "sqlite"])
async def store(request, tmp_path):
    if request.param == "memory":
        yield MemoryStore()
        return
    store = SqliteStore(tmp_path / "runs.sqlite")
    yield store
    await store.close()


async def test_checkpoints_carry_the_run_clocks_time_not_the_wall_clocks(store):
    clock = FakeClock(start=START)
    attempts = 0

    @executor(id="first")
    async def first(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(msg)

    @executor(
        id="flaky",
        retry=RetryPolicy(
            max_attempts=2, backoff=ExponentialBackoff(BACKOFF, maximum=BACKOFF, jitter=0)
        ),
    )
    async def flaky(msg: str, ctx: WorkflowContext) -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise ConnectionError("once")
        ctx.yield_output(msg)

    workflow = WorkflowBuilder(start=first, store=store).add_edge(first, flaky).build()
    result = await clock.run(workflow.run("x", run_id="r1", clock=clock))
    assert result.status is RunStatus.COMPLETED

    history = await workflow.history("r1")
    stamps = [(c.superstep, c.created_at) for c in history.checkpoints]
    # Created and superstep 1 at the start; superstep 2 after the retry's backoff.
    assert stamps == [(0, START), (1, START), (2, START + BACKOFF)]
    assert history.run.created_at == START
