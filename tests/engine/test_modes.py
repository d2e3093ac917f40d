"""Execution modes: lockstep, off-thread, backpressure, cancel, sync adapters."""

import asyncio
import re
import threading
from dataclasses import fields

import pytest

from treadle import ExecutionMode, RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle._engine import _events as ev
from treadle.errors import ExecutorFailedError
from treadle.events import CustomEvent, OutputEvent, StatusChanged, SuperstepStarted
from treadle.stores import SqliteStore


def counting_chain(length: int, calls: list):
    """A loop executor that runs `length` supersteps, counting invocations."""

    @executor
    async def tick(msg: int, ctx: WorkflowContext[int]) -> None:
        calls.append(msg)
        ctx.add_event(f"tick {msg}")
        if msg < length:
            ctx.send_message(msg + 1)
        else:
            ctx.yield_output(msg)

    return WorkflowBuilder(start=tick).add_edge(tick, tick).build()


async def test_lockstep_runs_no_superstep_ahead_of_the_consumer():
    calls: list[int] = []
    wf = counting_chain(5, calls)
    async with wf.stream(1, mode=ExecutionMode.LOCKSTEP) as events:
        first_batch = []
        async for event in events:
            first_batch.append(event)
            if isinstance(event, CustomEvent):
                break
        # The consumer stops pulling: give any background work every chance to run.
        for _ in range(20):
            await asyncio.sleep(0)
        assert calls == [1]
        rest = [e async for e in events]
    assert calls == [1, 2, 3, 4, 5]
    supersteps = [e.superstep for e in first_batch + rest]
    assert supersteps == sorted(supersteps), "an event of superstep N+1 came before one of N"
    assert isinstance(rest[-1], StatusChanged)
    assert rest[-1].status is RunStatus.COMPLETED


async def test_lockstep_batches_are_canonical_and_numbered_in_order():
    calls: list[int] = []
    wf = counting_chain(3, calls)
    async with wf.stream(1, mode=ExecutionMode.LOCKSTEP) as events:
        seen = [e async for e in events]
    assert [e.sequence for e in seen] == list(range(len(seen)))
    again = await counting_chain(3, []).run(1)
    kinds = [type(e).__name__ for e in seen]
    assert kinds == [type(e).__name__ for e in again.events]


async def test_recorded_events_are_numbered_in_order_in_results_and_failures():
    # A result's events are numbered when handed out, not when published: check both
    # ways out, the returned result and the one carried by a failure.
    result = await counting_chain(3, []).run(1)
    assert [e.sequence for e in result.events] == list(range(len(result.events)))

    @executor
    async def breaks(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.add_event("about to fail")
        if msg == 2:
            raise ValueError("two")
        ctx.send_message(msg + 1)

    wf = WorkflowBuilder(start=breaks).add_edge(breaks, breaks).build()
    with pytest.raises(ExecutorFailedError) as failed:
        await wf.run(1)
    events = failed.value.result.events
    assert len(events) > 5
    assert [e.sequence for e in events] == list(range(len(events)))


def test_the_per_superstep_events_built_fast_equal_their_dataclass_construction():
    pairs = [
        (
            ev.superstep_started("r", 3, ("a", "b")),
            ev.SuperstepStarted(run_id="r", superstep=3, executor_ids=("a", "b")),
        ),
        (ev.superstep_completed("r", 3), ev.SuperstepCompleted(run_id="r", superstep=3)),
        (
            ev.executor_invoked("r", 3, "x", 2, 4),
            ev.ExecutorInvoked(run_id="r", superstep=3, executor_id="x", position=2, attempt=4),
        ),
        (
            ev.executor_completed("r", 3, "x", 2),
            ev.ExecutorCompleted(run_id="r", superstep=3, executor_id="x", position=2),
        ),
    ]
    for fast, slow in pairs:
        assert type(fast) is type(slow)
        # Every field set (an unset slot raises AttributeError), each to the same value.
        assert {f.name: getattr(fast, f.name) for f in fields(fast)} == {
            f.name: getattr(slow, f.name) for f in fields(slow)
        }


async def test_off_thread_publishes_an_event_while_a_slow_sibling_still_runs():
    release_slow = asyncio.Event()
    slow_finished = []

    @executor
    async def kick(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(msg)

    @executor
    async def fast(msg: str, ctx: WorkflowContext) -> None:
        ctx.add_event("fast says hi")

    @executor
    async def slow(msg: str, ctx: WorkflowContext) -> None:
        # Only the consumer can release this executor, and only after it has
        # received fast's event: the run can finish only if events are live.
        await release_slow.wait()
        slow_finished.append(True)

    wf = WorkflowBuilder(start=kick).add_fan_out(kick, [fast, slow]).build()
    async with wf.stream("go") as events:
        async with asyncio.timeout(10):
            async for event in events:
                if isinstance(event, CustomEvent):
                    assert slow_finished == []
                    release_slow.set()
    assert slow_finished == [True]
    assert events.result.status is RunStatus.COMPLETED


async def test_bounded_channel_applies_backpressure_to_the_run():
    calls: list[int] = []
    wf = counting_chain(50, calls)
    async with wf.stream(1, max_buffered_events=4) as events:
        await anext(events)
        for _ in range(50):
            await asyncio.sleep(0)
        stalled_at = len(calls)
        rest = [e async for e in events]
    # With 4 buffered events the run cannot get past a couple of supersteps
    # (each superstep raises about 6 events) while the consumer is idle.
    assert stalled_at <= 2
    assert len(calls) == 50
    assert isinstance(rest[-1], StatusChanged)


@pytest.mark.parametrize("mode", [ExecutionMode.OFF_THREAD, ExecutionMode.LOCKSTEP])
async def test_cancel_stops_the_run_and_invokes_nothing_further(mode):
    calls: list[int] = []

    @executor
    async def tick(msg: int, ctx: WorkflowContext[int]) -> None:
        calls.append(msg)
        await asyncio.sleep(0)
        ctx.send_message(msg + 1)

    wf = WorkflowBuilder(start=tick).add_edge(tick, tick).build()
    async with wf.stream(1, mode=mode) as events:
        async for event in events:
            if isinstance(event, SuperstepStarted) and event.superstep == 3:
                await events.cancel()
        statuses = [e.status for e in [event] if isinstance(e, StatusChanged)]
    count = len(calls)
    await asyncio.sleep(0.01)
    assert len(calls) == count <= 3
    assert events.result.status is RunStatus.CANCELLED
    assert statuses == [RunStatus.CANCELLED]


async def test_leaving_the_stream_block_early_cancels_the_run():
    calls: list[int] = []

    @executor
    async def tick(msg: int, ctx: WorkflowContext[int]) -> None:
        calls.append(msg)
        await asyncio.sleep(0)
        ctx.send_message(msg + 1)

    wf = WorkflowBuilder(start=tick).add_edge(tick, tick).build()
    async with wf.stream(1) as events:
        async for event in events:
            if event.superstep >= 2:
                break
    count = len(calls)
    await asyncio.sleep(0.01)
    assert len(calls) == count
    assert events.result.status is RunStatus.CANCELLED


async def test_a_failed_stream_yields_the_failure_then_raises():
    @executor
    async def bad(msg: int, ctx: WorkflowContext) -> None:
        raise ValueError("nope")

    wf = WorkflowBuilder(start=bad).build()
    for mode in ExecutionMode:
        seen = []
        with pytest.raises(ExecutorFailedError, match="nope"):
            async with wf.stream(1, mode=mode) as events:
                async for event in events:
                    seen.append(event)
        assert seen[-1].status is RunStatus.FAILED
        assert any(type(e).__name__ == "ExecutorFailed" for e in seen)


def test_run_sync_and_stream_sync_from_plain_code():
    calls: list[int] = []
    wf = counting_chain(3, calls)
    result = wf.run_sync(1)
    assert result.outputs == [3]
    caller = threading.get_ident()
    events = list(wf.stream_sync(1, mode=ExecutionMode.LOCKSTEP))
    assert threading.get_ident() == caller
    assert [e.value for e in events if isinstance(e, OutputEvent)] == [3]


def test_closing_stream_sync_early_cancels_the_run():
    calls: list[int] = []

    @executor
    async def tick(msg: int, ctx: WorkflowContext[int]) -> None:
        calls.append(msg)
        await asyncio.sleep(0.001)
        ctx.send_message(msg + 1)

    wf = WorkflowBuilder(start=tick).add_edge(tick, tick).build()
    stream = wf.stream_sync(1)
    for event in stream:
        if event.superstep >= 3:
            break
    stream.close()
    count = len(calls)
    assert count < 20
    assert len(calls) == count


async def test_run_sync_works_inside_a_running_event_loop():
    calls: list[int] = []
    result = counting_chain(2, calls).run_sync(1)
    assert result.outputs == [2]


def test_sync_failures_surface_in_the_caller():
    @executor
    async def bad(msg: int, ctx: WorkflowContext) -> None:
        raise KeyError("lost")

    wf = WorkflowBuilder(start=bad).build()
    with pytest.raises(ExecutorFailedError, match="lost"):
        wf.run_sync(1)
    with pytest.raises(ExecutorFailedError, match="lost"):
        list(wf.stream_sync(1))


async def test_max_concurrency_bounds_handlers_running_at_once():
    running = 0
    peak = 0

    @executor
    async def kick(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(msg)

    workers = []
    for i in range(10):

        @executor(id=f"w{i}")
        async def work(msg: int, ctx: WorkflowContext) -> None:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.002)
            running -= 1

        workers.append(work)
    wf = WorkflowBuilder(start=kick).add_fan_out(kick, workers).build()
    await wf.run(0, max_concurrency=3)
    assert peak == 3
    peak = 0
    await wf.run(0)
    assert peak == 10


async def test_an_executor_with_concurrency_n_still_sends_in_inbox_order():
    @executor
    async def kick(msg: int, ctx: WorkflowContext[int]) -> None:
        for i in range(20):
            ctx.send_message(i)

    active = 0
    peak = 0

    async def slow_double(msg: int, ctx: WorkflowContext[int]) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep((20 - msg) / 10000)  # later messages finish first
        active -= 1
        ctx.send_message(msg * 2)

    double = executor(id="double", concurrency=4)(slow_double)

    @executor
    async def collect(msg: int, ctx: WorkflowContext) -> None:
        ctx.yield_output(msg)

    wf = WorkflowBuilder(start=kick).add_edge(kick, double).add_edge(double, collect).build()
    result = await wf.run(0)
    assert peak == 4
    assert result.outputs == [i * 2 for i in range(20)]


@pytest.mark.parametrize("concurrency", [1, 2, 16])
async def test_a_handler_failure_is_reported_as_itself_whatever_the_executors_concurrency(
    concurrency, tmp_path
):
    # With concurrency 2 or more it was "failed outside its handlers: ExceptionGroup:
    # unhandled errors in a TaskGroup": the executor, the error and its message were lost.
    @executor
    async def split(msg: int, ctx: WorkflowContext[int]) -> None:
        for page in range(4):
            ctx.send_message(page)

    async def work(page: int, ctx: WorkflowContext[int]) -> None:
        await asyncio.sleep((4 - page) / 1000)  # the later pages fail first
        if page >= 1:
            raise ValueError(f"page {page} is bad")
        ctx.send_message(page)

    worker = executor(id="work", concurrency=concurrency)(work)

    @executor
    async def done(msg: int, ctx: WorkflowContext) -> None:
        ctx.yield_output(msg)

    wf = WorkflowBuilder(start=split).add_edge(split, worker).add_edge(worker, done).build()
    store = SqliteStore(tmp_path / "runs.db")
    try:
        with pytest.raises(ExecutorFailedError) as failed:
            await wf.run(0, store=store, run_id="pages")
        assert failed.value.executor_id == "work"
        # In order, page 1 fails first; at once, whichever fails first stops the others.
        page = "1" if concurrency == 1 else "[123]"
        said = rf"executor 'work' failed in superstep 2: ValueError: page {page} is bad"
        assert re.fullmatch(said, str(failed.value))
        assert isinstance(failed.value.__cause__, ValueError)
        stored = await store.get_run("pages")
        assert stored.status == "failed"
        assert re.search(r"ValueError: page [123] is bad", stored.error or "")
        assert "outside its handlers" not in (stored.error or "")
    finally:
        await store.close()
