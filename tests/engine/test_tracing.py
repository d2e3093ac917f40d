"""OpenTelemetry tracing: the span tree run → supersteps → invocations, and its outcomes."""

import asyncio
import datetime as dt
import subprocess
import sys

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from treadle import (
    ExecutionMode,
    ExponentialBackoff,
    RetryPolicy,
    RunStatus,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle.errors import ExecutorFailedError
from treadle.otel import OpenTelemetryTracing
from treadle.stores import MemoryStore
from treadle.testing import FakeClock


class Traced:
    """A provider of its own (the global one stays untouched), exporting to memory."""

    def __init__(self) -> None:
        self.provider = TracerProvider()
        self.exporter = InMemorySpanExporter()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracing = OpenTelemetryTracing(tracer_provider=self.provider)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


@pytest.fixture
def traced():
    traced = Traced()
    yield traced
    traced.provider.shutdown()


def kind(span: ReadableSpan) -> str:
    return span.name.split()[0]


def of_kind(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if kind(s) == name]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def fan_out_workflow(traced):
    @executor(id="split")
    async def split(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(msg)

    def branch(name: str, factor: int):
        @executor(id=name)
        async def work(msg: int, ctx: WorkflowContext[int]) -> None:
            ctx.send_message(msg * factor)

        return work

    branches = [branch("a", 1), branch("b", 2), branch("c", 3)]

    @executor(id="join")
    async def join(msg: list[int], ctx: WorkflowContext) -> None:
        ctx.yield_output(sum(msg))

    return (
        WorkflowBuilder(start=split, name="fan", tracing=traced.tracing)
        .add_fan_out(split, branches)
        .add_fan_in(branches, join)
        .build()
    )


async def test_a_fan_out_run_yields_run_then_supersteps_then_invocations(traced):
    wf = fan_out_workflow(traced)
    result = await wf.run(2, run_id="r1")
    assert result.outputs == [12]
    spans = traced.spans()

    [run] = of_kind(spans, "treadle.run")
    assert run.name == "treadle.run fan"
    assert run.parent is None
    assert dict(run.attributes) == {
        "treadle.run_id": "r1",
        "treadle.workflow": "fan",
        "treadle.status": "completed",
    }
    assert run.status.status_code is StatusCode.UNSET

    supersteps = sorted(of_kind(spans, "treadle.superstep"), key=lambda s: s.start_time)
    assert [s.name for s in supersteps] == [f"treadle.superstep {n}" for n in (1, 2, 3)]
    for number, step in enumerate(supersteps, start=1):
        assert parent_of(step) == run.context.span_id
        assert dict(step.attributes) == {
            "treadle.run_id": "r1",
            "treadle.superstep": number,
            "treadle.status": "completed",
        }

    invocations = of_kind(spans, "treadle.invoke")
    tree = {
        step.attributes["treadle.superstep"]: sorted(
            i.attributes["treadle.executor_id"]
            for i in invocations
            if parent_of(i) == step.context.span_id
        )
        for step in supersteps
    }
    assert tree == {1: ["split"], 2: ["a", "b", "c"], 3: ["join"]}
    assert len(invocations) == 5
    [b] = [i for i in invocations if i.attributes["treadle.executor_id"] == "b"]
    assert b.name == "treadle.invoke b"
    assert dict(b.attributes) == {
        "treadle.run_id": "r1",
        "treadle.superstep": 2,
        "treadle.executor_id": "b",
        "treadle.position": 0,
        "treadle.attempt": 1,
        "treadle.status": "completed",
    }
    assert {s.context.trace_id for s in spans} == {run.context.trace_id}
    # Children end before their parents.
    for step in supersteps:
        assert step.end_time <= run.end_time
    for invocation in invocations:
        [step] = [s for s in supersteps if s.context.span_id == parent_of(invocation)]
        assert invocation.end_time <= step.end_time


@pytest.mark.parametrize("where", ["async", "thread", "loop"])
async def test_a_span_started_in_a_handler_is_a_child_of_its_invocation(traced, where):
    tracer = traced.provider.get_tracer("user code")
    if where == "async":

        @executor(id="work")
        async def work(msg: str, ctx: WorkflowContext) -> None:
            with tracer.start_as_current_span("user work"):
                await asyncio.sleep(0)
            ctx.yield_output(msg)

    else:

        @executor(id="work", sync_handlers=where)
        def work(msg: str, ctx: WorkflowContext) -> None:
            with tracer.start_as_current_span("user work"):
                pass
            ctx.yield_output(msg)

    wf = WorkflowBuilder(start=work, tracing=traced.tracing).build()
    assert (await wf.run("x")).outputs == ["x"]
    spans = traced.spans()
    [user] = [s for s in spans if s.name == "user work"]
    [invocation] = of_kind(spans, "treadle.invoke")
    assert parent_of(user) == invocation.context.span_id
    assert user.context.trace_id == invocation.context.trace_id


async def test_a_failing_handler_marks_its_invocation_error_and_the_run_failed(traced):
    @executor(id="ok")
    async def ok(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(msg)

    @executor(id="boom")
    async def boom(msg: str, ctx: WorkflowContext) -> None:
        raise ValueError("broken " + msg)

    wf = WorkflowBuilder(start=ok, tracing=traced.tracing).add_edge(ok, boom).build()
    with pytest.raises(ExecutorFailedError):
        await wf.run("pipe")
    spans = traced.spans()

    [failed] = [s for s in of_kind(spans, "treadle.invoke") if s.name == "treadle.invoke boom"]
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "ValueError: broken pipe"
    assert failed.attributes["treadle.status"] == "failed"
    [event] = failed.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "ValueError"
    assert event.attributes["exception.message"] == "broken pipe"

    [first, second] = sorted(of_kind(spans, "treadle.superstep"), key=lambda s: s.start_time)
    assert first.attributes["treadle.status"] == "completed"
    assert second.attributes["treadle.status"] == "failed"
    assert second.status.status_code is StatusCode.ERROR
    [run] = of_kind(spans, "treadle.run")
    assert run.attributes["treadle.status"] == "failed"
    assert run.status.status_code is StatusCode.ERROR
    assert run.events[0].attributes["exception.type"].endswith("ExecutorFailedError")


async def test_the_siblings_of_a_failing_invocation_end_cancelled(traced):
    @executor(id="split")
    async def split(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(msg)

    @executor(id="fails")
    async def fails(msg: int, ctx: WorkflowContext) -> None:
        raise RuntimeError("down")

    @executor(id="hangs")
    async def hangs(msg: int, ctx: WorkflowContext) -> None:
        await asyncio.Event().wait()

    wf = (
        WorkflowBuilder(start=split, tracing=traced.tracing)
        .add_fan_out(split, [hangs, fails])
        .build()
    )
    with pytest.raises(ExecutorFailedError):
        await wf.run(1)
    statuses = {
        s.attributes["treadle.executor_id"]: s.attributes["treadle.status"]
        for s in of_kind(traced.spans(), "treadle.invoke")
    }
    assert statuses == {"split": "completed", "fails": "failed", "hangs": "cancelled"}


async def test_every_attempt_of_a_retried_handler_gets_its_own_span(traced):
    clock = FakeClock()
    attempts = 0

    @executor(id="flaky", retry=RetryPolicy(max_attempts=3, backoff=ExponentialBackoff(1.0)))
    async def flaky(msg: str, ctx: WorkflowContext) -> None:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise ConnectionError(f"attempt {attempts}")
        ctx.yield_output(attempts)

    wf = WorkflowBuilder(start=flaky, clock=clock, tracing=traced.tracing).build()
    assert (await clock.run(wf.run("go"))).outputs == [3]
    spans = traced.spans()

    [step] = of_kind(spans, "treadle.superstep")
    invocations = sorted(of_kind(spans, "treadle.invoke"), key=lambda s: s.start_time)
    assert [
        (i.attributes["treadle.attempt"], i.attributes["treadle.status"], i.status.status_code)
        for i in invocations
    ] == [
        (1, "failed", StatusCode.ERROR),
        (2, "failed", StatusCode.ERROR),
        (3, "completed", StatusCode.UNSET),
    ]
    assert {parent_of(i) for i in invocations} == {step.context.span_id}
    [run] = of_kind(spans, "treadle.run")
    assert run.attributes["treadle.status"] == "completed"


@pytest.mark.parametrize("mode", [ExecutionMode.LOCKSTEP, ExecutionMode.OFF_THREAD])
async def test_a_streamed_run_gets_one_run_span_over_all_its_supersteps(traced, mode):
    wf = fan_out_workflow(traced)
    async with wf.stream(2, mode=mode) as events:
        seen = [event async for event in events]
    assert seen
    spans = traced.spans()
    [run] = of_kind(spans, "treadle.run")
    assert run.attributes["treadle.status"] == "completed"
    supersteps = of_kind(spans, "treadle.superstep")
    assert len(supersteps) == 3
    assert {parent_of(s) for s in supersteps} == {run.context.span_id}
    assert len(of_kind(spans, "treadle.invoke")) == 5


async def test_leaving_a_lockstep_stream_early_ends_the_run_span_cancelled(traced):
    @executor(id="tick")
    async def tick(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(msg + 1)

    wf = WorkflowBuilder(start=tick, tracing=traced.tracing).add_edge(tick, tick).build()
    async with wf.stream(0, mode=ExecutionMode.LOCKSTEP) as events:
        async for event in events:
            if event.superstep == 2:
                break
    spans = traced.spans()
    [run] = of_kind(spans, "treadle.run")
    assert run.attributes["treadle.status"] == "cancelled"
    assert run.status.status_code is StatusCode.UNSET
    assert {parent_of(s) for s in of_kind(spans, "treadle.superstep")} == {run.context.span_id}


async def test_the_run_span_is_a_child_of_the_span_current_where_the_run_starts(traced):
    wf = fan_out_workflow(traced)
    with traced.provider.get_tracer("caller").start_as_current_span("request") as request:
        await wf.run(1)
    [run] = of_kind(traced.spans(), "treadle.run")
    assert parent_of(run) == request.get_span_context().span_id


async def test_a_suspended_invocation_rests_its_run_and_the_answer_continues_it(traced):
    @executor(id="ask")
    async def ask(question: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(await ctx.request(question, int))

    wf = WorkflowBuilder(start=ask, store=MemoryStore(), tracing=traced.tracing).build()
    waiting = await wf.run("how many?", run_id="r1")
    assert waiting.status is RunStatus.AWAITING_INPUT
    [run] = of_kind(traced.spans(), "treadle.run")
    [invocation] = of_kind(traced.spans(), "treadle.invoke")
    assert run.attributes["treadle.status"] == "awaiting_input"
    assert invocation.attributes["treadle.status"] == "suspended"
    assert invocation.status.status_code is StatusCode.UNSET

    request_id = waiting.pending_requests[0].request_id
    assert (await wf.respond("r1", {request_id: 3})).outputs == [3]
    runs = of_kind(traced.spans(), "treadle.run")
    assert [r.attributes["treadle.status"] for r in runs] == ["awaiting_input", "completed"]
    assert {r.attributes["treadle.run_id"] for r in runs} == {"r1"}


async def test_a_run_sleeping_through_a_timer_keeps_one_run_span(traced):
    clock = FakeClock()

    @executor(id="nap")
    async def nap(msg: str, ctx: WorkflowContext) -> None:
        await ctx.sleep(dt.timedelta(hours=1))
        ctx.yield_output(msg)

    wf = WorkflowBuilder(start=nap, clock=clock, tracing=traced.tracing).build()
    assert (await clock.run(wf.run("rested"))).outputs == ["rested"]
    spans = traced.spans()
    [run] = of_kind(spans, "treadle.run")
    assert run.attributes["treadle.status"] == "completed"
    supersteps = sorted(of_kind(spans, "treadle.superstep"), key=lambda s: s.start_time)
    assert [s.attributes["treadle.superstep"] for s in supersteps] == [1, 2]
    assert {parent_of(s) for s in supersteps} == {run.context.span_id}
    statuses = [i.attributes["treadle.status"] for i in of_kind(spans, "treadle.invoke")]
    assert sorted(statuses) == ["completed", "suspended"]


async def test_cancelling_a_run_asleep_on_a_timer_ends_its_span_cancelled(traced):
    clock = FakeClock()

    @executor(id="nap")
    async def nap(msg: str, ctx: WorkflowContext) -> None:
        await ctx.sleep(dt.timedelta(hours=1))

    wf = WorkflowBuilder(start=nap, clock=clock, tracing=traced.tracing).build()
    task = asyncio.create_task(wf.run("x"))
    for _ in range(50):  # let the run reach its sleep on the clock
        await asyncio.sleep(0)
    assert clock.next_deadline is not None
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [run] = of_kind(traced.spans(), "treadle.run")
    assert run.attributes["treadle.status"] == "cancelled"
    [step] = of_kind(traced.spans(), "treadle.superstep")
    assert step.attributes["treadle.status"] == "completed"


def test_import_treadle_loads_no_opentelemetry():
    code = (
        "import asyncio, sys\n"
        "from treadle import WorkflowBuilder, WorkflowContext, executor\n"
        "@executor\n"
        "async def echo(msg: str, ctx: WorkflowContext) -> None:\n"
        "    ctx.yield_output(msg)\n"
        "result = asyncio.run(WorkflowBuilder(start=echo).build().run('x'))\n"
        "print(result.outputs, sorted(m for m in sys.modules if m.startswith(('opentelemetry', "
        "'treadle.otel'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['x'] []"
