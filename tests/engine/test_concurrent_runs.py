"""One Workflow object serving many runs at once."""

import asyncio
import random

import pytest

from treadle import Executor, WorkflowBuilder, WorkflowContext, handler
from treadle.errors import ExecutorFailedError, ExecutorInUseError


class Accumulator(Executor):
    """Keeps a per-run running total in a field: must never be shared."""

    def __init__(self) -> None:
        super().__init__("acc")
        self.total = 0

    @handler
    async def add(self, msg: int, ctx: WorkflowContext[int]) -> None:
        await asyncio.sleep(random.random() / 1000)
        self.total += msg
        if msg > 0:
            ctx.send_message(msg - 1)
        else:
            ctx.yield_output(self.total)


async def test_fifty_concurrent_runs_from_factories_are_independent():
    wf = WorkflowBuilder(start=Accumulator).add_edge("acc", "acc").build()
    starts = list(range(50))
    results = await asyncio.gather(*(wf.run(n) for n in starts))
    assert [r.outputs for r in results] == [[n * (n + 1) // 2] for n in starts]
    assert len({r.run_id for r in results}) == 50


async def test_a_non_shareable_instance_is_refused_in_a_second_concurrent_run():
    gate = asyncio.Event()

    class Waiter(Executor):
        @handler
        async def on(self, msg: int, ctx: WorkflowContext) -> None:
            await gate.wait()
            ctx.yield_output(msg)

    instance = Waiter("waiter")
    wf = WorkflowBuilder(start=instance).build()
    first = asyncio.create_task(wf.run(1, run_id="first-run"))
    await asyncio.sleep(0)
    with pytest.raises(ExecutorInUseError) as caught:
        await wf.run(2)
    assert caught.value.executor_id == "waiter"
    assert "'waiter'" in str(caught.value)
    assert "'first-run'" in str(caught.value)
    gate.set()
    assert (await first).outputs == [1]
    # Once the first run is over, the instance is free again.
    assert (await wf.run(3)).outputs == [3]


async def test_a_shareable_instance_serves_concurrent_runs():
    class Stateless(Executor):
        @handler
        async def on(self, msg: int, ctx: WorkflowContext) -> None:
            await asyncio.sleep(0.001)
            ctx.yield_output(msg * 2)

    wf = WorkflowBuilder(start=Stateless("s", shareable=True)).build()
    results = await asyncio.gather(*(wf.run(n) for n in range(10)))
    assert [r.output for r in results] == [n * 2 for n in range(10)]


async def test_a_factory_returning_the_wrong_id_is_an_error():
    class Renamed(Accumulator):
        def __init__(self) -> None:
            super().__init__()
            self.id = "other"

    made = iter([Accumulator(), Renamed()])
    wf = WorkflowBuilder(start=lambda: next(made)).build()
    # The executor fails (on the record, for a stored run), as for its handler's error.
    with pytest.raises(ExecutorFailedError, match="returned one with id 'other'") as failed:
        await wf.run(1)
    assert isinstance(failed.value.__cause__, ValueError)
