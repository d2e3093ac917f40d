"""Checkpoint frames of format 3: a parked run's frames are small, and bound to their run."""

from __future__ import annotations

import dataclasses
import json

import pytest

from treadle import RunStatus, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle._checkpoints._blob import BOUND_VERSION
from treadle._checkpoints._frame import FORMAT
from treadle.errors import CheckpointCorruptError
from treadle.stores import SqliteStore
from treadle.testing import FakeClock


def _sleeper():
    @executor(id="nap")
    async def nap(n: int, ctx: WorkflowContext[int]) -> None:
        await ctx.sleep(3_600)
        ctx.yield_output(n)

    return WorkflowBuilder(start=nap, name="idle").build()


async def test_a_run_parked_on_a_timer_stores_two_frames_of_under_200_bytes(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    workflow = _sleeper()
    try:
        parked = await workflow.run(1873, store=store, clock=FakeClock())
        assert parked.status is RunStatus.WAITING
        history = await workflow.history(parked.run_id, store=store)
        frames = [
            (await store.load_checkpoint(parked.run_id, c.checkpoint_id)).blob
            for c in history.checkpoints
        ]
    finally:
        await store.close()
    assert len(frames) == 2
    for blob in frames:
        assert blob[4] == BOUND_VERSION
        assert len(blob) < 200  # format 2 took 476 for each
        assert parked.run_id.encode() not in blob  # the seal binds it; the row holds it
        document = json.loads(blob[22:])
        assert document[0] == FORMAT


async def test_a_frame_read_as_another_runs_checkpoint_is_refused(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    workflow = _sleeper()
    try:
        first = await workflow.run(1, store=store, clock=FakeClock())
        second = await workflow.run(2, store=store, clock=FakeClock())
        theirs = await store.load_checkpoint(first.run_id)
        mine = await store.load_checkpoint(second.run_id)
    finally:
        await store.close()
    swapped = dataclasses.replace(mine, blob=theirs.blob)
    with pytest.raises(CheckpointCorruptError, match="belongs to another run") as raised:
        workflow.codec.decode(swapped, run_id=second.run_id)
    assert raised.value.run_id == second.run_id
    assert workflow.codec.decode(mine, run_id=second.run_id).pending == {}


def _napping_fan():
    """A run that parks before its fan-out: its checkpoint holds no fan-in buffer."""

    @executor(id="nap")
    async def nap(n: int, ctx: WorkflowContext[int]) -> None:
        await ctx.sleep(60)
        ctx.send_message(n)

    def branch(i: int):
        @executor(id=f"b{i}")
        async def add(n: int, ctx: WorkflowContext[int]) -> None:
            ctx.send_message(n * 10 + i)

        return add

    @executor(id="join")
    async def join(values: list, ctx: WorkflowContext) -> None:
        ctx.yield_output(sum(values))

    branches = [branch(i) for i in range(3)]
    return (
        WorkflowBuilder(start=nap, name="napping-fan")
        .add_fan_out(nap, branches)
        .add_fan_in(branches, join)
        .build()
    )


async def test_a_run_read_back_with_empty_fan_in_buffers_fills_its_fan_in(tmp_path):
    # A frame stores the fan-in buffers only when one holds something: read back,
    # the run still has one (empty) buffer per fan-in, and its branches fill it.
    store = SqliteStore(tmp_path / "runs.sqlite")
    workflow = _napping_fan()
    clock = FakeClock()
    try:
        parked = await workflow.run(4, store=store, clock=clock)
        assert parked.status is RunStatus.WAITING
        record = await store.load_checkpoint(parked.run_id)
        assert workflow.codec.decode(record, run_id=parked.run_id).fan_in_buffers == ()
        await clock.advance(61)
        [woken] = await Runtime(store, [workflow], clock=clock).wake_due()
    finally:
        await store.close()
    assert woken.status is RunStatus.COMPLETED
    assert woken.outputs == [sum(40 + i for i in range(3))]
