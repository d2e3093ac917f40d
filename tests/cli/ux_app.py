"""Workflows for tests/cli/test_cli_ux.py: what a new user's first runs look like."""

from collections import Counter

from treadle import ExponentialBackoff, RetryPolicy, WorkflowBuilder, WorkflowContext, executor

FAILURES = Counter[str]()


@executor
async def partly(steps: int, ctx: WorkflowContext[int]) -> None:
    """Reports progress up to one short of the total, as loops that report before each step do."""
    for done in range(steps):
        ctx.report_progress(done, steps, "partly")
    ctx.send_message(steps)


@executor
async def unsized(steps: int, ctx: WorkflowContext) -> None:
    """Reports progress with no total: the bar cannot know where it ends."""
    ctx.report_progress(0, None, "unsized")
    ctx.yield_output(steps)


progress = WorkflowBuilder(start=partly, name="progress").add_edge(partly, unsized).build()

SHORT = ExponentialBackoff(initial=0.05, maximum=0.05, jitter=0)


@executor(retry=RetryPolicy(max_attempts=3, backoff=SHORT))
async def flaky(times: int, ctx: WorkflowContext) -> None:
    """Fails ``times`` times (in this process), then succeeds."""
    FAILURES["flaky"] += 1
    if FAILURES["flaky"] <= times:
        msg = f"flake {FAILURES['flaky']}"
        raise ConnectionError(msg)
    ctx.yield_output(FAILURES["flaky"])


retrying = WorkflowBuilder(start=flaky, name="retrying").build()


@executor
async def anything(value: int | None, ctx: WorkflowContext) -> None:
    """Takes no input at all as well as a number."""
    ctx.yield_output(value)


optional = WorkflowBuilder(start=anything, name="optional").build()


@executor
async def nap(seconds: float, ctx: WorkflowContext) -> None:
    """Rests on a timer: what a `treadle worker` wakes."""
    await ctx.sleep(seconds)
    ctx.yield_output("woke")


napper = WorkflowBuilder(start=nap, name="napper").build()
