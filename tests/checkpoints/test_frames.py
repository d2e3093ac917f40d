"""Checkpoint frames of format 3: small, bound to their run, their counts written from the last."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treadle import RunStatus, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle._checkpoints._blob import BOUND_VERSION
from treadle._checkpoints._codec import CheckpointCodec
from treadle._checkpoints._frame import FORMAT, CountsText
from treadle._engine._barrier import BarrierState
from treadle._engine._counts import Counts
from treadle._engine._delivery import Envelope
from treadle._engine._waits import WaitBook
from treadle._stores._store import CheckpointInfo, CheckpointRecord
from treadle._values._serialization import JsonSerializer
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


_EXECUTORS = st.sampled_from(["a", "b", "c", 'd"q', "é", "n10"])


@given(
    start=st.dictionaries(_EXECUTORS, st.integers(1, 50), max_size=4),
    supersteps=st.lists(
        st.tuples(st.lists(_EXECUTORS, max_size=4), st.booleans()), min_size=1, max_size=12
    ),
)
def test_counts_written_from_the_last_frame_equal_the_counts_written_whole(start, supersteps):
    """CountsText encodes again only the executors a superstep ran: the table stays exact.

    Whatever the order of supersteps, executors new or seen, and counts read
    between two frames (which loses what changed: all are written again).
    """
    text = CountsText()
    counts = Counts(dict(start))
    for handled, read_between in supersteps:
        counts = counts.added(handled)
        if read_between:
            len(counts)
        written = text.text(counts)
        table = dict(counts)
        assert (json.loads(written) if written is not None else {}) == table
        assert written is None or list(json.loads(written)) == list(table)


def test_a_frame_with_its_counts_spliced_in_reads_as_the_frame_encoded_whole():
    """frame_text's bytes read as frame_of's, with and without other parts."""
    codec = CheckpointCodec(JsonSerializer())
    one = Counts({"a": 1}).added(["b"])
    for pending in ({}, {"b": (Envelope((2, 0, 0, 0), "a", 7, None, None),)}):
        for iterations in (one, Counts({}), {"x": 3}):
            barrier = BarrierState(
                run_id="r",
                superstep=2,
                status=RunStatus.RUNNING,
                pending=pending,
                fan_in_buffers=(),
                state={},
                iterations=iterations,
                outputs=(),
                waits=WaitBook(),
                deadline_at=None,
                spawned=(),
            )
            encoded = codec.encode(barrier, "fp", {})
            restored = codec.decode(
                CheckpointRecord(_info(), encoded.blob, encoded.refs, encoded.pieces), run_id="r"
            )
            assert restored.iterations == dict(iterations)
            assert {k: [e.payload for e in v] for k, v in restored.pending.items()} == {
                k: [e.payload for e in v] for k, v in pending.items()
            }


def _info() -> CheckpointInfo:
    return CheckpointInfo(
        checkpoint_id="c",
        run_id="r",
        superstep=2,
        status="running",
        parent_checkpoint_id=None,
        created_at=0.0,
    )
