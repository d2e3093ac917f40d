"""User code that fails outside a handler's body fails its run on the record.

A retry policy's predicate, a backoff of thousands of attempts, work
spawned as a plain function, an executor's factory or ``snapshot``, a
``CancelledError`` that a handler let out of a task someone else
cancelled: each once escaped the engine raw, left the stored run
``running`` with no owner (a ``Runtime`` or worker then took it up again,
and again, repeating its side effects), or recorded it as cancelled for
good. Each now fails the run (or the invocation, retried and routed as any
failure), and the store says so. Mistakes a build or a call can see are
refused there: non-text state keys, generator handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from treadle import Executor as ExecutorBase
from treadle import (
    ExecutorFailure,
    ExponentialBackoff,
    RetryPolicy,
    SpawnResult,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
)
from treadle.errors import ExecutorFailedError, WorkflowRunError, WorkflowValidationError
from treadle.stores import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path


async def failed_on_record(workflow, store, error_type=ExecutorFailedError):
    """Run ``workflow`` as run r1 on ``store``; the error it raised, once the store says failed."""
    with pytest.raises(error_type) as failed:
        await workflow.run("input", store=store, run_id="r1")
    row = await store.get_run("r1")
    assert (row.status, row.owner) == ("failed", None)
    assert row.error
    return failed.value


@pytest.fixture
async def store(tmp_path: Path):
    opened = SqliteStore(tmp_path / "runs.sqlite")
    yield opened
    await opened.close()


async def test_a_retry_predicate_that_raises_fails_the_invocation_not_the_engine(store):
    calls = []

    @executor(retry=RetryPolicy(max_attempts=3, retry_on=lambda e: e.status_code >= 500))
    async def call_api(x: str, ctx: WorkflowContext) -> None:
        calls.append(x)
        raise ConnectionError("connection refused")  # has no status_code

    error = await failed_on_record(WorkflowBuilder(start=call_api).build(), store)
    assert isinstance(error.__cause__, ConnectionError)
    assert calls == ["input"]  # not retried: the predicate could not say
    notes = getattr(error.__cause__, "__notes__", [])
    assert any("retry policy's retry_on raised AttributeError" in note for note in notes)


async def test_a_backoff_of_thousands_of_attempts_ends_as_the_last_attempt_fails(store):
    policy = RetryPolicy(max_attempts=1100, backoff=ExponentialBackoff(initial=0, maximum=0))

    @executor(retry=policy)
    async def poll(x: str, ctx: WorkflowContext) -> None:
        raise ConnectionError("still down")

    error = await failed_on_record(WorkflowBuilder(start=poll).build(), store)
    assert error.attempt == 1100  # 2.0 ** 1024 once overflowed at attempt 1025


async def test_work_spawned_as_a_plain_function_is_refused_at_the_call(store):
    def download(url: str) -> str:
        return f"<{url}>"

    class Downloader(ExecutorBase):
        @handler
        async def start(self, url: str, ctx: WorkflowContext) -> None:
            ctx.spawn(download, url)

        @handler
        async def done(self, result: SpawnResult, ctx: WorkflowContext) -> None:
            ctx.yield_output(result.value)

    error = await failed_on_record(WorkflowBuilder(start=Downloader).build(), store)
    assert isinstance(error.__cause__, TypeError)
    assert "ctx.spawn(download): takes an async function" in str(error.__cause__)


async def test_work_that_cannot_start_arrives_as_a_failed_spawn_result(store):
    async def fetch(url: str) -> str:
        return url

    class Fetcher(ExecutorBase):
        @handler
        async def start(self, url: str, ctx: WorkflowContext) -> None:
            ctx.spawn(fetch, url, "one argument too many")

        @handler
        async def done(self, result: SpawnResult, ctx: WorkflowContext) -> None:
            ctx.yield_output(result.error)

    result = await WorkflowBuilder(start=Fetcher).build().run("x", store=store)
    (error,) = result.outputs
    assert error.startswith("TypeError: ")


async def test_an_executor_factory_failing_as_the_run_starts_fails_that_executor(store):
    database = {"up": True}

    class Ledger(ExecutorBase):
        def __init__(self) -> None:
            super().__init__("ledger")
            if not database["up"]:
                raise ConnectionError("database unavailable")

        @handler
        async def on(self, x: str, ctx: WorkflowContext) -> None:
            ctx.yield_output(x)

    workflow = WorkflowBuilder(start=Ledger).build()  # the factory works here
    database["up"] = False
    error = await failed_on_record(workflow, store)
    assert error.executor_id == "ledger"
    assert isinstance(error.__cause__, ConnectionError)


async def test_a_snapshot_that_raises_fails_the_run_outside_its_handlers(store):
    class Counter(ExecutorBase):
        def __init__(self) -> None:
            super().__init__("counter")

        @handler
        async def on(self, x: str, ctx: WorkflowContext) -> None:
            ctx.yield_output(x)

        def snapshot(self) -> object:
            raise ValueError("cannot snapshot the counter")

    error = await failed_on_record(WorkflowBuilder(start=Counter).build(), store, WorkflowRunError)
    assert "failed in superstep 1 outside its handlers: ValueError: cannot snapshot" in str(error)


async def test_a_cancelled_error_nobody_cancelled_the_run_for_is_a_failure_retried_and_routed(
    store,
):
    attempts = []

    @executor(retry=RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(initial=0)))
    async def fetch(url: str, ctx: WorkflowContext) -> None:
        attempts.append(url)
        helper = asyncio.get_running_loop().create_task(asyncio.sleep(10))
        asyncio.get_running_loop().call_later(0.01, helper.cancel)  # a client closing its pool
        await helper  # lets the helper's CancelledError out: nobody cancelled the run

    @executor(id="report")
    async def report(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        ctx.yield_output(failure.message)

    workflow = WorkflowBuilder(start=fetch).add_error_edge(fetch, report).build()
    result = await workflow.run("u", store=store, run_id="r1")
    assert attempts == ["u", "u"]
    assert result.status.value == "completed"
    (message,) = result.outputs
    assert message.startswith("the handler raised CancelledError, yet nothing cancelled it")


async def test_state_keys_that_are_not_text_are_refused_before_a_checkpoint_changes_them(store):
    @executor
    async def take(x: str, ctx: WorkflowContext) -> None:
        ctx.state.set(42, "reserved")  # type: ignore[arg-type]

    error = await failed_on_record(WorkflowBuilder(start=take).build(), store)
    assert "state.set(42): a state key is a str, not int" in str(error.__cause__)

    @executor
    async def echo(x: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(x)

    workflow = WorkflowBuilder(start=echo).build()
    with pytest.raises(TypeError, match=r"state: a state key is a str, not int \(7\)"):
        await workflow.run("x", store=store, run_id="r2", state={7: "seven"})
    assert [run.run_id for run in await store.list_runs()] == ["r1"]


def test_generator_handlers_are_refused_where_they_are_declared():
    with pytest.raises(TypeError, match=r"handler .*summarize is a generator function"):

        @executor
        async def summarize(text: str, ctx: WorkflowContext):
            yield text

    with pytest.raises(TypeError, match=r"handler .*tokenize is a generator function"):

        @executor
        def tokenize(text: str, ctx: WorkflowContext):
            yield from text.split()


def test_an_executor_that_never_ran_executors_init_is_a_build_problem_naming_it():
    class Ledger(ExecutorBase):
        def __init__(self) -> None:
            self.count = 0  # no super().__init__(...)

        @handler
        async def on(self, amount: int, ctx: WorkflowContext) -> None:
            ctx.yield_output(amount)

    with pytest.raises(WorkflowValidationError, match=r"Ledger never ran Executor.__init__"):
        WorkflowBuilder(start=Ledger).build()


async def test_a_handler_timeout_is_seconds_or_a_timedelta_as_a_runs_is():
    @executor(timeout=timedelta(seconds=30))
    async def quick(x: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(x)

    assert (await WorkflowBuilder(start=quick).build().run("x")).outputs == ["x"]
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):

        @executor(timeout=float("inf"))
        async def never(x: str, ctx: WorkflowContext) -> None: ...


@pytest.mark.parametrize("response_type", [None, list[int]])
async def test_a_request_for_what_is_no_class_says_what_to_ask_for(response_type):
    @executor
    async def ask(x: str, ctx: WorkflowContext) -> None:
        await ctx.request("which ids?", response_type)

    with pytest.raises(ExecutorFailedError) as failed:
        await WorkflowBuilder(start=ask).build().run("x")
    assert isinstance(failed.value.__cause__, TypeError)
    assert "is not a class: ask for a builtin" in str(failed.value.__cause__)


async def test_a_handler_timeout_bounds_a_handler_that_will_not_stop():
    gave_up = asyncio.Event()

    @executor(timeout=0.05)
    async def poll(url: str, ctx: WorkflowContext) -> None:
        until = time.monotonic() + 2.5  # then it gives up (the test loop ends)
        while time.monotonic() < until:  # a naive "keep retrying" loop
            with contextlib.suppress(asyncio.CancelledError):  # swallowing its cancellation
                await asyncio.sleep(0.1)
        gave_up.set()

    with pytest.raises(ExecutorFailedError) as failed:
        await WorkflowBuilder(start=poll).build().run("u")  # once: waited as long as it ran
    assert type(failed.value.__cause__).__name__ == "HandlerTimeoutError"
    assert not gave_up.is_set()  # the run ended while the handler, left running, went on


async def test_a_context_used_after_its_invocation_ended_says_so():
    refused: list[str] = []
    called_back = asyncio.Event()

    @executor
    async def start(job: str, ctx: WorkflowContext[str]) -> None:
        async def on_done() -> None:  # a callback the handler left behind
            await asyncio.sleep(0.01)
            for late in (
                lambda: ctx.send_message(f"{job} finished"),
                lambda: ctx.yield_output("late"),
                lambda: ctx.state.set("status", "done"),
            ):
                try:
                    late()
                except RuntimeError as error:
                    refused.append(str(error))
            called_back.set()

        ctx.state.get("status")  # a read, so the invocation has its state
        keep.append(asyncio.get_running_loop().create_task(on_done()))
        ctx.yield_output("started")

    @executor
    async def notify(text: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(text)

    keep: list[asyncio.Task[None]] = []
    workflow = WorkflowBuilder(start=start).add_edge(start, notify).build()
    result = await workflow.run("job-1")
    await called_back.wait()
    assert result.outputs == ["started"]
    assert len(refused) == 3
    assert all("after its invocation ended" in why for why in refused)
    assert [why.split(" after ")[0] for why in refused] == [
        "executor 'start' tried to send a message",
        "executor 'start' tried to yield an output",
        "executor 'start' tried to write state",
    ]


async def test_a_connection_lost_mid_run_fails_nothing_and_the_run_resumes(tmp_path):
    # The backstop is for code at fault, not the machine: a store's driver error or
    # a lost connection that reaches the loop leaves the run to be taken up again
    # (a PostgreSQL restart under load once failed runs that would have gone on).
    class Flaky(SqliteStore):
        lost = 1

        async def commit_many(self, checkpoints, **kwargs):  # type: ignore[no-untyped-def]
            if self.lost and checkpoints[-1].info.superstep == 1:
                self.lost -= 1
                raise ConnectionResetError("the database went away")
            return await super().commit_many(checkpoints, **kwargs)

    @executor
    async def step(x: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(x)

    workflow = WorkflowBuilder(start=step).build()
    store = Flaky(tmp_path / "runs.sqlite")
    try:
        with pytest.raises(ConnectionResetError):
            await workflow.run("x", store=store, run_id="r1")
        assert (await store.get_run("r1")).status == "running"
        assert (await workflow.resume("r1", store=store)).outputs == ["x"]
    finally:
        await store.close()
