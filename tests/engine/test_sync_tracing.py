"""The sync adapters carry the caller's context: a run_sync/stream_sync run span nests under the
caller's current span, as docs/tracing.md promises for every run."""

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.otel import OpenTelemetryTracing


@pytest.fixture
def provider():
    provider = TracerProvider()
    yield provider
    provider.shutdown()


def traced_echo(provider: TracerProvider):
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    @executor(id="echo")
    async def echo(msg: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(msg)

    workflow = WorkflowBuilder(
        start=echo, name="echo", tracing=OpenTelemetryTracing(tracer_provider=provider)
    ).build()
    return workflow, exporter


def run_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    [run] = [s for s in exporter.get_finished_spans() if s.name == "treadle.run echo"]
    return run


def test_a_run_sync_run_span_is_a_child_of_the_callers_current_span(provider):
    workflow, exporter = traced_echo(provider)
    with provider.get_tracer("caller").start_as_current_span("request") as request:
        assert workflow.run_sync("x").outputs == ["x"]
    run = run_span(exporter)
    assert run.parent is not None
    assert run.parent.span_id == request.get_span_context().span_id
    assert run.context.trace_id == request.get_span_context().trace_id


def test_a_stream_sync_run_span_is_a_child_of_the_callers_current_span(provider):
    workflow, exporter = traced_echo(provider)
    tracer = provider.get_tracer("caller")
    with tracer.start_as_current_span("request") as request, workflow.stream_sync("x") as events:
        assert list(events)
    run = run_span(exporter)
    assert run.parent is not None
    assert run.parent.span_id == request.get_span_context().span_id
    assert run.context.trace_id == request.get_span_context().trace_id
