"""Retry policies with backoff, and handler timeouts, on a fake clock."""

import asyncio
import itertools
import threading

import pytest

from treadle import (
    ExponentialBackoff,
    RetryPolicy,
    RunStatus,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle.errors import ExecutorFailedError, HandlerTimeoutError
from treadle.testing import FakeClock

BACKOFF = ExponentialBackoff(initial=2.0, maximum=30.0, multiplier=3.0, jitter=0.25)


async def test_a_handler_failing_twice_then_succeeding_is_invoked_three_times_within_backoff():
    clock = FakeClock(start=1000.0)
    attempts: list[float] = []

    @executor(retry=RetryPolicy(max_attempts=5, backoff=BACKOFF))
    async def flaky(msg: str, ctx: WorkflowContext) -> None:
        attempts.append(clock.now())
        if len(attempts) < 3:
            raise ConnectionError("service unavailable")
        ctx.yield_output(f"done after {len(attempts)}")

    wf = WorkflowBuilder(start=flaky, clock=clock).build()
    result = await clock.run(wf.run("go"))
    assert result.outputs == ["done after 3"]
    assert len(attempts) == 3
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    for attempt, gap in enumerate(gaps, start=1):
        low, high = BACKOFF.bounds(attempt)
        assert low <= gap <= high, (attempt, gap, (low, high))
    assert BACKOFF.bounds(1) == (1.5, 2.5)
    assert BACKOFF.bounds(2) == (4.5, 7.5)
    retried = [e for e in result.events if type(e).__name__ == "ExecutorFailed"]
    assert [(e.attempt, e.retrying) for e in retried] == [(1, True), (2, True)]


async def test_max_attempts_three_on_a_handler_that_always_fails_gives_three_then_failed():
    clock = FakeClock()
    calls = 0

    @executor(retry=RetryPolicy(max_attempts=3, backoff=ExponentialBackoff(initial=1, jitter=0)))
    async def doomed(msg: str, ctx: WorkflowContext) -> None:
        nonlocal calls
        calls += 1
        ctx.yield_output("never committed")
        raise ValueError(f"attempt {calls}")

    wf = WorkflowBuilder(start=doomed, clock=clock).build()
    with pytest.raises(ExecutorFailedError, match="attempt 3") as caught:
        await clock.run(wf.run("go"))
    assert calls == 3
    assert caught.value.result.status is RunStatus.FAILED
    assert caught.value.result.outputs == []


async def test_errors_outside_retry_on_fail_at_once():
    clock = FakeClock()
    calls = 0

    @executor(retry=RetryPolicy(max_attempts=5, retry_on=(ConnectionError,)))
    async def picky(msg: str, ctx: WorkflowContext) -> None:
        nonlocal calls
        calls += 1
        raise KeyError("a bug, not an outage")

    wf = WorkflowBuilder(start=picky, clock=clock).build()
    with pytest.raises(ExecutorFailedError):
        await clock.run(wf.run("go"))
    assert calls == 1


async def test_the_workflow_default_policy_applies_where_none_is_declared():
    clock = FakeClock()
    calls = 0

    @executor
    async def flaky(msg: str, ctx: WorkflowContext) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("blip")
        ctx.yield_output("ok")

    wf = WorkflowBuilder(start=flaky, clock=clock, retry=RetryPolicy(max_attempts=2)).build()
    assert (await clock.run(wf.run("go"))).outputs == ["ok"]


async def test_a_handler_timeout_fires_on_the_fake_clock_and_the_late_result_never_commits():
    clock = FakeClock()
    gate = asyncio.Event()
    finished_late = []

    @executor(timeout=1.0)
    async def slow(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.state.set("touched", True)
        try:
            await gate.wait()
        finally:
            finished_late.append(True)
        ctx.yield_output("late")

    wf = WorkflowBuilder(start=slow, clock=clock).build()
    task = asyncio.create_task(wf.run("go"))
    for _ in range(10):
        await asyncio.sleep(0)
    assert not task.done()
    await clock.advance(0.999)
    assert not task.done()
    await clock.advance(0.001)
    with pytest.raises(ExecutorFailedError) as caught:
        await task
    assert isinstance(caught.value.__cause__, HandlerTimeoutError)
    assert "ran past its timeout of 1s" in str(caught.value)
    gate.set()
    await asyncio.sleep(0)
    assert caught.value.result.outputs == []
    assert "touched" not in caught.value.result.state


async def test_a_blocking_sync_handler_that_times_out_cannot_commit_when_it_finishes():
    clock = FakeClock()
    release = threading.Event()
    done = threading.Event()

    @executor(timeout=5.0)
    def stuck(msg: str, ctx: WorkflowContext) -> None:
        release.wait(timeout=10)
        ctx.yield_output("too late")
        done.set()

    wf = WorkflowBuilder(start=stuck, clock=clock).build()
    task = asyncio.create_task(wf.run("go"))
    await asyncio.sleep(0.01)
    await clock.advance(5)
    with pytest.raises(ExecutorFailedError) as caught:
        await task
    release.set()
    assert await asyncio.to_thread(done.wait, 10)
    assert caught.value.result.outputs == []


async def test_a_timed_out_attempt_is_retried():
    clock = FakeClock()
    attempts = 0

    @executor(timeout=2.0, retry=RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(jitter=0)))
    async def sometimes_hangs(msg: str, ctx: WorkflowContext) -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await asyncio.Event().wait()  # hangs forever
        ctx.yield_output(f"attempt {attempts}")

    wf = WorkflowBuilder(start=sometimes_hangs, clock=clock).build()
    result = await clock.run(wf.run("go"))
    assert result.outputs == ["attempt 2"]


def test_policies_reject_nonsense():
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="multiplier"):
        ExponentialBackoff(multiplier=0.5)
    with pytest.raises(ValueError, match="timeout"):
        executor(timeout=0)(lambda m, c: None)


async def test_a_batch_result_keeps_every_attempt_of_a_handler_that_finally_fails():
    clock = FakeClock()

    @executor(retry=RetryPolicy(max_attempts=3, backoff=ExponentialBackoff(jitter=0)))
    async def doomed(msg: str, ctx: WorkflowContext) -> None:
        raise ValueError("always")

    wf = WorkflowBuilder(start=doomed, clock=clock).build()
    with pytest.raises(ExecutorFailedError) as caught:
        await clock.run(wf.run("go"))
    events = caught.value.result.events
    invoked = [e.attempt for e in events if type(e).__name__ == "ExecutorInvoked"]
    failed = [(e.attempt, e.retrying) for e in events if type(e).__name__ == "ExecutorFailed"]
    assert invoked == [1, 2, 3]
    assert failed == [(1, True), (2, True), (3, False)]
