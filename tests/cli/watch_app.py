"""Workflows the watch, logs and --follow tests follow: one fails after a retry, one counts."""

from treadle import ExponentialBackoff, RetryPolicy, WorkflowBuilder, WorkflowContext, executor

NOW = ExponentialBackoff(initial=0, maximum=0, jitter=0)


def parse_amount(text: str) -> int:
    """Where the failure happens: its frame shows in the traceback."""
    return int(text)


@executor(retry=RetryPolicy(max_attempts=2, backoff=NOW))
async def fragile(text: str, ctx: WorkflowContext) -> None:
    ctx.yield_output(parse_amount(text))


failing = WorkflowBuilder(start=fragile, name="failing").build()


@executor
async def count(steps: int, ctx: WorkflowContext[int]) -> None:
    for done in range(1, steps + 1):
        ctx.report_progress(done, steps, "counting")
    ctx.add_event({"counted": steps})
    ctx.send_message(steps)


@executor
async def confirm(steps: int, ctx: WorkflowContext) -> None:
    ok = await ctx.request({"counted": steps}, bool)
    ctx.yield_output(steps if ok else 0)


counting = WorkflowBuilder(start=count, name="counting").add_edge(count, confirm).build()
