"""A plain ``def`` handler that overruns its timeout: failed on time, its thread abandoned.

Python cannot stop a thread, so the hung handler keeps running after its
timeout; what it does from then on must never reach the run. Every test
releases the hung thread before it ends, so none outlives its test.
"""

import threading

import pytest

from treadle import ExponentialBackoff, RetryPolicy, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import ExecutorFailedError, HandlerTimeoutError
from treadle.events import CustomEvent

# Far beyond the handlers' timeouts: only a broken timeout waits this long.
HUNG_FOR = 5.0
NO_DELAY = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(initial=0.0, jitter=0.0))


def test_run_sync_reports_the_timeout_while_the_hung_thread_is_still_blocked():
    release = threading.Event()
    returned = threading.Event()

    @executor(timeout=0.05)
    def hung(msg: str, ctx: WorkflowContext) -> None:
        release.wait(HUNG_FOR)
        returned.set()

    workflow = WorkflowBuilder(start=hung).build()
    try:
        with pytest.raises(ExecutorFailedError) as caught:
            workflow.run_sync("go")
        assert isinstance(caught.value.__cause__, HandlerTimeoutError)
        assert not returned.is_set(), "the timeout was reported only once the thread returned"
    finally:
        release.set()
        assert returned.wait(HUNG_FOR)


def flaky_hanging_once(release: threading.Event, late_done: threading.Event) -> object:
    """Its first attempt hangs past its timeout, then acts; the second waits for that."""
    attempts: list[int] = []

    # The second attempt waits, within the same timeout, for the abandoned
    # thread to wake and act: 0.5 s leaves a loaded machine room for that.
    @executor(id="flaky", timeout=0.5, retry=NO_DELAY)
    def flaky(msg: str, ctx: WorkflowContext[str]) -> None:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            release.wait(HUNG_FOR)
            ctx.add_event("late")  # the attempt was abandoned: none of this may count
            ctx.yield_output("late")
            ctx.state.set("late", True)
            late_done.set()
            return
        release.set()
        assert late_done.wait(HUNG_FOR)  # the abandoned attempt has acted by now
        ctx.add_event("on time")
        ctx.yield_output("on time")

    return flaky


async def test_an_abandoned_attempts_late_events_and_writes_never_reach_the_result():
    release, late_done = threading.Event(), threading.Event()
    workflow = WorkflowBuilder(start=flaky_hanging_once(release, late_done)).build()
    try:
        result = await workflow.run("go")
    finally:
        release.set()
    assert late_done.wait(HUNG_FOR)
    assert result.outputs == ["on time"]
    assert "late" not in result.state
    assert [e.data for e in result.events if isinstance(e, CustomEvent)] == ["on time"]
    failed = [e for e in result.events if type(e).__name__ == "ExecutorFailed"]
    assert [(e.attempt, e.retrying, type(e.error)) for e in failed] == [
        (1, True, HandlerTimeoutError)
    ]


async def test_an_abandoned_attempts_late_events_never_reach_a_live_stream():
    release, late_done = threading.Event(), threading.Event()
    workflow = WorkflowBuilder(start=flaky_hanging_once(release, late_done)).build()
    try:
        async with workflow.stream("go") as events:
            seen = [event async for event in events]
    finally:
        release.set()
    assert late_done.wait(HUNG_FOR)
    assert [e.data for e in seen if isinstance(e, CustomEvent)] == ["on time"]
    assert events.result.outputs == ["on time"]
