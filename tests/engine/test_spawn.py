"""Background work owned by the run: ctx.spawn."""

import asyncio

import pytest

from treadle import (
    Executor,
    RunStatus,
    SpawnResult,
    WorkflowBuilder,
    WorkflowContext,
    handler,
)


class Downloader(Executor):
    def __init__(self, fail: bool = False) -> None:
        super().__init__("downloader")
        self.fail = fail

    @handler
    async def start(self, url: str, ctx: WorkflowContext) -> None:
        async def fetch(address: str) -> int:
            await asyncio.sleep(0.01)
            if self.fail:
                raise ConnectionError(f"{address} unreachable")
            return len(address)

        key = ctx.spawn(fetch, url, name="fetch")
        ctx.yield_output(("spawned", key.split(":")[0]))

    @handler
    async def done(self, result: SpawnResult, ctx: WorkflowContext) -> None:
        ctx.yield_output((result.name, result.value, result.error, result.lost))


async def test_the_run_waits_for_spawned_work_and_gets_its_result_as_a_message():
    wf = WorkflowBuilder(start=Downloader).build()
    result = await wf.run("https://example.org")
    assert result.status is RunStatus.COMPLETED
    assert result.outputs == [("spawned", "downloader"), ("fetch", 19, None, False)]


async def test_a_failure_of_spawned_work_is_reported_as_a_message_not_a_crash():
    wf = WorkflowBuilder(start=lambda: Downloader(fail=True)).build()
    result = await wf.run("https://down.example")
    assert result.outputs[-1] == (
        "fetch",
        None,
        "ConnectionError: https://down.example unreachable",
        False,
    )


async def test_an_invocation_that_fails_starts_no_background_work():
    started = []

    class Careless(Executor):
        @handler
        async def go(self, msg: str, ctx: WorkflowContext) -> None:
            async def work() -> None:
                started.append(True)

            ctx.spawn(work)
            raise RuntimeError("oops")

        @handler
        async def done(self, result: SpawnResult, ctx: WorkflowContext) -> None:
            pass

    with pytest.raises(Exception, match="oops"):
        await WorkflowBuilder(start=Careless).build().run("x")
    await asyncio.sleep(0.01)
    assert started == []


async def test_spawning_without_a_handler_for_the_result_is_refused():
    class Forgetful(Executor):
        @handler
        async def go(self, msg: str, ctx: WorkflowContext) -> None:
            async def work() -> None:
                pass

            ctx.spawn(work)

    with pytest.raises(Exception) as caught:
        await WorkflowBuilder(start=Forgetful).build().run("x")
    assert "no handler for SpawnResult" in str(caught.value.__cause__)
