"""``ctx.continue_later``: end the invocation, commit what it did, handle the same message again."""

import datetime as dt

import pytest

from treadle import RunStatus, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import IterationLimitExceeded
from treadle.stores import MemoryStore
from treadle.testing import FakeClock


def poller(polls_needed: int, *, after=None, store=None, clock=None, seen=None):
    """Poll a job once per invocation; not done yet, continue later."""
    seen = [] if seen is None else seen

    @executor(id="poll")
    async def poll(job: str, ctx: WorkflowContext[str]) -> None:
        ctx.state.update("polls", lambda n: n + 1)
        polls = await ctx.step("poll", lambda: len(seen) + 1)  # a fresh journal each time
        seen.append((ctx.superstep, ctx.idempotency_key, ctx.state.get("polls")))
        ctx.send_message(f"{job}: poll {polls}")
        if polls < polls_needed:
            try:
                ctx.continue_later(after=after)
            except Exception:  # shows it cannot be swallowed
                ctx.yield_output("swallowed")
        ctx.yield_output(f"{job} done after {polls} polls")

    @executor(id="log")
    async def log(line: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(line)

    return (
        WorkflowBuilder(start=poll, store=store, clock=clock)
        .add_edge(poll, log)
        .add_state("polls", default=0)
        .build()
    )


async def test_without_a_delay_the_same_message_comes_back_next_superstep_and_its_work_commits():
    seen = []
    result = await poller(3, seen=seen).run("render")
    assert result.status is RunStatus.COMPLETED
    # What each continuing invocation sent, wrote and output committed; in superstep
    # order: the third poll (rank 0) outputs before "log" handles the second's message.
    assert result.outputs == [
        "render: poll 1",
        "render done after 3 polls",
        "render: poll 2",
        "render: poll 3",
    ]
    assert result.state["polls"] == 3
    assert [superstep for superstep, _, _ in seen] == [1, 2, 3]
    assert [polls for _, _, polls in seen] == [1, 2, 3]  # each reads the last one's write
    assert len({key for _, key, _ in seen}) == 3  # each continuation is an invocation of its own


async def test_with_a_delay_the_run_rests_waiting_and_a_timer_service_continues_it():
    clock, store = FakeClock(start=0.0), MemoryStore()
    wf = poller(3, after=dt.timedelta(minutes=1), store=store, clock=clock)
    rested = await wf.run("render", run_id="p1")
    assert (rested.status, rested.wake_at) == (RunStatus.WAITING, 60.0)
    assert (await store.get_run("p1")).wake_at == 60.0
    runtime = Runtime(store, [wf], clock=clock)
    await clock.advance_to(59)
    assert await runtime.wake_due() == []
    await clock.advance_to(60)
    [second] = await runtime.wake_due()
    assert (second.status, second.wake_at, second.state["polls"]) == (RunStatus.WAITING, 120.0, 2)
    await clock.advance_to(120)
    [done] = await runtime.wake_due()
    assert done.status is RunStatus.COMPLETED
    assert done.outputs == [
        "render: poll 1",
        "render: poll 2",
        "render done after 3 polls",
        "render: poll 3",
    ]


async def test_without_a_store_a_delayed_continuation_sleeps_through_on_the_clock():
    clock = FakeClock(start=0.0)
    result = await clock.run(poller(3, after=30, clock=clock).run("render"))
    assert result.status is RunStatus.COMPLETED
    assert clock.now() == 60


async def test_iteration_limits_count_every_continuation():
    with pytest.raises(IterationLimitExceeded, match="'poll'"):
        await poller(100).run("forever", max_node_iterations=5)
    with pytest.raises(IterationLimitExceeded):
        await poller(100).run("forever", max_supersteps=10)


async def test_a_plain_def_handler_may_continue_later_too():
    calls = []

    @executor
    def tick(n: int, ctx: WorkflowContext) -> None:
        calls.append(n)
        if len(calls) < 3:
            ctx.continue_later()
        ctx.yield_output(len(calls))

    result = await WorkflowBuilder(start=tick).build().run(7)
    assert (calls, result.outputs) == ([7, 7, 7], [3])


@pytest.mark.parametrize(
    ("after", "error"), [(-1, ValueError), ("soon", TypeError), (True, TypeError)]
)
async def test_a_bad_delay_fails_the_handler(after, error):
    @executor
    async def tick(n: int, ctx: WorkflowContext) -> None:
        ctx.continue_later(after=after)

    with pytest.raises(Exception) as caught:
        await WorkflowBuilder(start=tick).build().run(1)
    assert isinstance(caught.value.__cause__, error)
    assert "after must be" in str(caught.value.__cause__)
