"""One RunOptions value: every entry point takes it, a bad value is refused before anything runs."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import typing
from typing import Never

import pytest

from treadle import RunOptions, RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle._engine._options import RunOptionArgs
from treadle.errors import IterationLimitExceeded, RunTimeoutError
from treadle.stores import SqliteStore
from treadle.testing import FakeClock


@executor
async def echo(message: str, ctx: WorkflowContext[Never]) -> None:
    ctx.yield_output(message)


@executor
async def ping(n: int, ctx: WorkflowContext[int]) -> None:
    ctx.send_message(n + 1)


@executor
async def pong(n: int, ctx: WorkflowContext[int]) -> None:
    ctx.send_message(n + 1)


@executor
async def ask(message: str, ctx: WorkflowContext[Never]) -> None:
    answer = await ctx.request(message, response_type=str)
    ctx.yield_output(answer)


def looping(**defaults: typing.Any):
    return WorkflowBuilder(ping, **defaults).add_edge(ping, pong).add_edge(pong, ping).build()


def test_the_keywords_of_an_entry_point_are_exactly_the_fields_of_run_options():
    fields = {f.name for f in dataclasses.fields(RunOptions)}
    assert set(RunOptionArgs.__annotations__) == fields


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"durability": "bogus"}, ValueError, "durability"),
        ({"max_supersteps": 0}, ValueError, "max_supersteps"),
        ({"max_supersteps": "5"}, TypeError, "max_supersteps"),
        ({"max_concurrency": True}, TypeError, "max_concurrency"),
        ({"timeout": -1}, ValueError, "timeout"),
        ({"timeout": "soon"}, TypeError, "timeout"),
        ({"keep_last": 0}, ValueError, "keep_last"),
        ({"deterministic": "yes"}, TypeError, "deterministic"),
        ({"clock": object()}, TypeError, "clock"),
        ({"bogus": 1}, TypeError, "bogus"),
    ],
)
async def test_a_bad_option_is_refused_before_anything_runs_store_or_no_store(
    tmp_path, options, error, named
):
    ran: list[str] = []

    @executor
    async def record(message: str, ctx: WorkflowContext[Never]) -> None:
        ran.append(message)

    workflow = WorkflowBuilder(record).build()
    with pytest.raises(error, match=named):
        await workflow.run("x", **options)
    with pytest.raises(error, match=named):
        workflow.stream("x", **options)
    store = SqliteStore(tmp_path / "runs.db")
    with pytest.raises(error, match=named):
        await workflow.run("x", store=store, run_id="r1", **options)
    with pytest.raises(error, match=named):
        await workflow.respond("r1", {"q": "a"}, store=store, **options)
    with pytest.raises(error, match=named):
        await workflow.resume("r1", store=store, **options)
    assert ran == []
    assert await store.list_runs() == []


def test_a_workflow_level_durability_is_checked_when_the_workflow_is_built():
    with pytest.raises(ValueError, match="durability"):
        WorkflowBuilder(echo, durability="bogus")  # type: ignore[arg-type]


async def test_one_options_value_serves_run_and_stream_and_keywords_win():
    workflow = looping()
    options = RunOptions(max_supersteps=3)
    with pytest.raises(IterationLimitExceeded, match="max_supersteps=3 "):
        await workflow.run(0, options=options)
    with pytest.raises(IterationLimitExceeded, match="max_supersteps=5 "):
        await workflow.run(0, options=options, max_supersteps=5)
    with pytest.raises(IterationLimitExceeded, match="max_supersteps=3 "):
        async with workflow.stream(0, options=options) as events:
            async for _ in events:
                pass


def test_options_must_be_a_run_options_value():
    with pytest.raises(TypeError, match="RunOptions"):
        looping().run_sync(0, options={"max_supersteps": 3})


async def test_a_run_can_turn_off_a_workflow_level_deterministic():
    seen: list[str] = []

    @executor
    async def fan(message: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(message)

    def branch(name: str):
        @executor(id=name)
        async def handler(message: str, ctx: WorkflowContext[str]) -> None:
            seen.append(f"{name} starts")
            await asyncio.sleep(0)  # lets the other branch in, unless run one at a time
            seen.append(f"{name} ends")

        return handler

    a, b = branch("a"), branch("b")
    workflow = WorkflowBuilder(fan, deterministic=True).add_fan_out(fan, [a, b]).build()
    await workflow.run("go")
    assert seen == ["a starts", "a ends", "b starts", "b ends"]
    seen.clear()
    await workflow.run("go", deterministic=False)
    assert seen == ["a starts", "b starts", "a ends", "b ends"]


async def test_stream_takes_a_timeout_and_a_durability(tmp_path):
    clock = FakeClock(start=1_000.0)
    store = SqliteStore(tmp_path / "runs.db")
    workflow = WorkflowBuilder(ask, store=store).build()
    async with workflow.stream(
        "q?", run_id="r1", timeout=dt.timedelta(seconds=60), durability="batched", clock=clock
    ) as events:
        async for _ in events:
            pass
    run = await store.get_run("r1")
    assert run.status == RunStatus.AWAITING_INPUT
    assert run.deadline_at == pytest.approx(1_060.0)


async def test_a_stored_run_keeps_the_deadline_it_started_with(tmp_path):
    clock = FakeClock(start=1_000.0)
    store = SqliteStore(tmp_path / "runs.db")
    workflow = WorkflowBuilder(ask, store=store).build()
    rested = await workflow.run("q?", run_id="r1", timeout=60, clock=clock)
    (request,) = rested.pending_requests
    with pytest.raises(ValueError, match="deadline"):
        await workflow.resume("r1", timeout=600)
    with pytest.raises(ValueError, match="deadline"):
        await workflow.respond("r1", {request.request_id: "yes"}, options=RunOptions(timeout=600))
    with pytest.raises(ValueError, match="deadline"):
        await workflow.send_message("r1", "more", timeout=600)
    assert (await store.get_run("r1")).status == RunStatus.AWAITING_INPUT
    await clock.advance(120)  # past the deadline it started with
    with pytest.raises(RunTimeoutError):
        await workflow.respond("r1", {request.request_id: "yes"}, clock=clock)
