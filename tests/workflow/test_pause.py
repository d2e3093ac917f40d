"""Pausing runs: stopped at a superstep boundary with a checkpoint, nothing runs, then on.

A run advancing in another process pauses at its next barrier when this one
asks; while it is paused no timer service, ``respond`` or ``send_message``
advances it; unpausing completes it with the outputs of an uninterrupted
run and no superstep committed twice. Callers racing on one run from
separate processes are ``test_pause_race.py``'s.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pause_app import Job, expected_acc, lines, supersteps_logged, ticker

from postgres import drop_schemas_now, fresh_schema, postgres_dsn
from treadle import RunStatus, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import (
    RequestAlreadyAnsweredError,
    RequestError,
    RunBusyError,
    RunPausedError,
)
from treadle.events import StatusChanged
from treadle.stores import MemoryStore, PostgresStore, SqliteStore

HERE = Path(__file__).parent
SCRIPT = HERE / "pause_app.py"


async def uninterrupted(total: int, tmp_path: Path) -> list[object]:
    """The outputs of a run of ``total`` ticks that nobody paused."""
    job = Job(total, 0.0, str(tmp_path / "uninterrupted.log"))
    return (await ticker.run(job, store=MemoryStore())).outputs


async def assert_one_chain(store, run_id: str, last: int) -> None:
    """Every superstep 0..last committed once, each checkpoint following the one before."""
    checkpoints = (await ticker.history(run_id, store=store)).checkpoints
    assert [c.superstep for c in checkpoints] == list(range(last + 1))
    for parent, child in itertools.pairwise(checkpoints):
        assert child.parent_checkpoint_id == parent.checkpoint_id


async def logged(log: Path, count: int, run_id: str | None = None) -> None:
    """Wait until the run (any, or ``run_id``) has logged ``count`` invocations."""
    while sum(1 for rid, _, _, _ in lines(log) if run_id in {None, rid}) < count:  # noqa: ASYNC110 - a file, written by the run: no event to await
        await asyncio.sleep(0.002)


def start_ticker(path: Path, run_id: str, total: int, delay: float, log: Path):
    """``pause_app.py run``: the ticker advancing in a process of its own."""
    command = ["run", str(path), run_id, str(total), str(delay), str(log)]
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE,
    )


# --- pausing a run another process is advancing --------------------------------------


@pytest.mark.integration
@pytest.mark.timeout(120)
async def test_a_run_in_another_process_pauses_at_a_barrier_and_unpause_completes_it(tmp_path):
    path, log = tmp_path / "runs.sqlite", tmp_path / "ticks.log"
    child = start_ticker(path, "p1", 40, 0.05, log)
    store = SqliteStore(path)
    try:
        while len(lines(log)) < 3:
            assert child.poll() is None, child.communicate()  # a few supersteps in, still going
            await asyncio.sleep(0.02)
        assert await ticker.pause("p1", store=store) == "requested"  # its owner is computing

        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        stopped = json.loads(out.strip().splitlines()[-1])
        assert stopped["ok"] == "paused"
        at = stopped["superstep"]
        assert 3 <= at < 41  # stopped mid-run, at a barrier
        row = await store.get_run("p1")
        assert (row.status, row.superstep, row.owner, row.pause_requested) == (
            "paused",
            at,
            None,
            None,
        )
        await assert_one_chain(store, "p1", at)  # the barrier it stopped at is checkpointed
        assert supersteps_logged(log, "p1") == Counter(range(1, at + 1))

        # Nothing runs while it is paused: a timer service passes it over, a session
        # message is refused, and no invocation happens.
        runtime = Runtime(store, [ticker])
        for _ in range(3):
            assert await runtime.wake_due() == []
        with pytest.raises(RunPausedError, match="'p1' is paused"):
            await ticker.send_message("p1", "hello", store=store)
        assert len(lines(log)) == at
        assert (await store.get_run("p1")).status == "paused"

        done = await ticker.unpause("p1", store=store, record_events=False)
        assert done.status is RunStatus.COMPLETED
        assert done.outputs == await uninterrupted(40, tmp_path)
        await assert_one_chain(store, "p1", 41)
        counted = supersteps_logged(log, "p1")
        assert counted == Counter(range(1, 42))  # every superstep ran once, none twice
        here = {pid for _, superstep, _, pid in lines(log) if superstep > at}
        assert here == {os.getpid()}  # the rest ran in this process, after the unpause
    finally:
        child.kill()
        await store.close()


# --- what a paused run does and does not do, in one process ------------------------


@pytest.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.integration)]
)
def any_store(request, tmp_path):
    """A fresh store of each backend; PostgreSQL in a schema of its own, dropped afterwards."""
    if request.param == "memory":
        yield MemoryStore()
        return
    if request.param == "sqlite":
        yield SqliteStore(tmp_path / "runs.sqlite")
        return
    dsn, schema = postgres_dsn(), fresh_schema()
    yield PostgresStore(dsn, schema=schema)
    drop_schemas_now([schema])


async def test_a_paused_run_keeps_answers_for_later_and_resume_applies_them(any_store, tmp_path):
    store, log = any_store, tmp_path / "ticks.log"
    try:
        asked = await ticker.run(Job(3, 0.0, str(log), ask=True), run_id="a1", store=store)
        (request,) = asked.pending_requests
        assert await ticker.pause("a1", store=store) == "paused"  # nobody owns a resting run

        # The answer is kept, and its caller told the run is paused; nothing ran.
        told = await ticker.respond("a1", {request.request_id: "yes"}, store=store)
        assert told.status is RunStatus.PAUSED
        assert [r.request_id for r in told.pending_requests] == [request.request_id]
        assert [item.target for item in await store.inbox("a1")] == [request.request_id]
        with pytest.raises(RequestAlreadyAnsweredError, match="yes"):
            await ticker.respond("a1", {request.request_id: "no"}, store=store)
        assert await Runtime(store, [ticker]).wake_due() == []
        assert lines(log) == []

        # resume unpauses it, applies the answer kept, and completes.
        done = await ticker.resume("a1", store=store)
        assert done.status is RunStatus.COMPLETED
        assert done.outputs == [{"ticks": 3, "acc": expected_acc(3, len("yes"))}]
        assert (await store.get_run("a1")).status == "completed"
        with pytest.raises(RequestError, match=r"'a1' has ended \(completed\)"):
            await ticker.pause("a1", store=store)
    finally:
        await store.close()


async def test_an_unpaused_run_is_taken_up_by_a_timer_service(any_store, tmp_path):
    store, log = any_store, tmp_path / "ticks.log"
    try:
        asked = await ticker.run(Job(2, 0.0, str(log), ask=True), run_id="a2", store=store)
        (request,) = asked.pending_requests
        await ticker.pause("a2", store=store)
        await ticker.respond("a2", {request.request_id: "ok"}, store=store)
        runtime = Runtime(store, [ticker])
        assert await runtime.wake_due() == []
        await store.unpause("a2")  # as `treadle unpause` does: whoever serves it goes on
        (woken,) = await runtime.wake_due()
        assert (woken.run_id, woken.status) == ("a2", RunStatus.COMPLETED)
        # The question in superstep 1; its answer, then two ticks, once each.
        assert supersteps_logged(log, "a2") == Counter(range(2, 5))
    finally:
        await store.close()


@pytest.mark.parametrize("durability", ["sync", "background", "batched"])
async def test_a_run_paused_while_it_computes_stops_at_a_barrier_in_every_durability_mode(
    tmp_path, durability
):
    store, log = MemoryStore(), tmp_path / "ticks.log"
    events: list[StatusChanged] = []
    job = Job(30, 0.005, str(log))

    async def watch() -> object:
        async with ticker.stream(job, run_id="d1", store=store, durability=durability) as stream:
            async for event in stream:
                if isinstance(event, StatusChanged):
                    events.append(event)
            return stream.result

    running = asyncio.create_task(watch())
    await logged(log, 4)
    assert await ticker.pause("d1", store=store) == "requested"
    result = await running
    assert result.status is RunStatus.PAUSED
    assert events[-1].status is RunStatus.PAUSED  # the stream ends on it
    row = await store.get_run("d1")
    assert (row.status, row.checkpoint_id) == ("paused", result.last_checkpoint_id)
    await assert_one_chain(store, "d1", row.superstep)

    done = await ticker.unpause("d1", store=store)
    assert done.outputs == await uninterrupted(30, tmp_path)
    await assert_one_chain(store, "d1", 31)
    # In sync mode the barrier that paused is the last superstep that ran; in the
    # others, supersteps computed past it were not committed and ran again.
    if durability == "sync":
        assert supersteps_logged(log, "d1") == Counter(range(1, 32))


@executor(id="count")
async def count(n: int, ctx: WorkflowContext) -> None:
    ctx.yield_output(n)
    ctx.state.set("n", n)
    await asyncio.sleep(0.001)  # the barrier before this one commits meanwhile
    if n < 200:
        ctx.send_message(n + 1)


counter = WorkflowBuilder(count, name="counter").add_edge(count, count).build()


@pytest.mark.parametrize("durability", ["sync", "background", "batched"])
async def test_a_paused_runs_result_is_the_barrier_it_paused_at_not_supersteps_computed_past_it(
    tmp_path, durability
):
    # In background and batched modes the commit that finds the pause is one the run went
    # past: its result (superstep, outputs, state, the status event) is of that barrier.
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        events: list[StatusChanged] = []

        async def watch() -> object:
            async with counter.stream(0, run_id="c1", store=store, durability=durability) as s:
                events.extend([e async for e in s if isinstance(e, StatusChanged)])
                return s.result

        running = asyncio.create_task(watch())
        while not (await store.list_runs(limit=1)) or (await store.get_run("c1")).superstep < 5:  # noqa: ASYNC110 - the run's row, in another connection: no event to await
            await asyncio.sleep(0.002)
        assert await counter.pause("c1", store=store) == "requested"
        result = await running
        row = await store.get_run("c1")
        assert (result.status, row.status) == (RunStatus.PAUSED, "paused")
        assert result.last_checkpoint_id == row.checkpoint_id
        assert result.superstep == row.superstep
        assert result.outputs == list(range(row.superstep))
        assert result.state == {"n": row.superstep - 1}
        assert (events[-1].status, events[-1].superstep) == (RunStatus.PAUSED, row.superstep)
        done = await counter.unpause("c1", store=store)
        assert done.outputs == list(range(201))
    finally:
        await store.close()


async def test_unpause_waits_for_an_owner_that_has_not_paused_yet_or_refuses(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    log = tmp_path / "ticks.log"
    try:
        running = asyncio.create_task(ticker.run(Job(20, 0.02, str(log)), run_id="w1", store=store))
        await logged(log, 2)
        assert await ticker.pause("w1", store=store) == "requested"
        unpausing = asyncio.create_task(ticker.unpause("w1", store=store, wait=True))
        paused = await running
        assert paused.status is RunStatus.PAUSED
        done = await unpausing  # waited for the owner to pause it, then went on here
        assert done.outputs == await uninterrupted(20, tmp_path)
        await assert_one_chain(store, "w1", 21)

        # Without wait, an owner still computing is named, and nothing changes.
        again = asyncio.create_task(ticker.run(Job(20, 0.02, str(log)), run_id="w2", store=store))
        await logged(log, 1, "w2")
        await ticker.pause("w2", store=store)
        with pytest.raises(RunBusyError, match="'w2' is owned by"):
            await ticker.unpause("w2", store=store)
        assert (await again).status is RunStatus.PAUSED
        with pytest.raises(RequestError, match=r"'w1' has ended \(completed\)"):
            await ticker.unpause("w1", store=store)
    finally:
        await store.close()
