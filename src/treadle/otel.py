"""OpenTelemetry spans for treadle runs (``pip install 'treadle[otel]'``).

Give a workflow an :class:`OpenTelemetryTracing` and every run it makes is
traced::

    from treadle.otel import OpenTelemetryTracing

    workflow = WorkflowBuilder(start=fetch, tracing=OpenTelemetryTracing()).build()

Each run gets a ``treadle.run <workflow>`` span, a child of whatever span
is current where the run starts; each superstep a ``treadle.superstep <n>``
span under it; each invocation (each attempt of a retried one) a
``treadle.invoke <executor id>`` span under its superstep's. The
invocation's span is current while the handler runs, in a worker thread
too, so spans the handler starts nest under it. See ``docs/tracing.md``.

Only this module imports OpenTelemetry: ``import treadle`` never does.
"""

from __future__ import annotations

from contextlib import contextmanager
from importlib import metadata
from typing import TYPE_CHECKING

from treadle._extras import importing_extra

with importing_extra("treadle.otel", "otel"):
    from opentelemetry import trace
    from opentelemetry.trace import StatusCode

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["OpenTelemetryTracing"]


def _version() -> str | None:
    try:
        return metadata.version("treadle")
    except metadata.PackageNotFoundError:
        return None


class _Span:
    """An OpenTelemetry span as the engine's tracing port sees it."""

    __slots__ = ("span",)

    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def set_outcome(self, status: str, error: BaseException | None = None) -> None:
        """Set ``treadle.status``; a failure also records the error and sets ERROR."""
        self.span.set_attribute("treadle.status", status)
        if error is not None:
            self.span.record_exception(error)
        if status == "failed":
            description = f"{type(error).__name__}: {error}" if error is not None else None
            self.span.set_status(StatusCode.ERROR, description)


class OpenTelemetryTracing:
    """Traces runs, supersteps and invocations with OpenTelemetry.

    Args:
        tracer_provider: Where the spans go; the global provider (as set by
            ``opentelemetry.trace.set_tracer_provider``) when omitted.

    Attributes on the spans: ``treadle.run_id`` and ``treadle.status`` on
    all; ``treadle.workflow`` on the run's; ``treadle.superstep`` on
    supersteps' and invocations'; ``treadle.executor_id``,
    ``treadle.position`` and ``treadle.attempt`` on invocations'. A failed
    span records its exception and has status ERROR.
    """

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        """Get treadle's tracer from ``tracer_provider`` (default: the global one)."""
        self._tracer = trace.get_tracer("treadle", _version(), tracer_provider=tracer_provider)

    @contextmanager
    def run(self, *, run_id: str, workflow: str) -> Iterator[_Span]:
        """A run's span, child of the span current where the run starts."""
        span = self._tracer.start_span(
            f"treadle.run {workflow}",
            attributes={"treadle.run_id": run_id, "treadle.workflow": workflow},
        )
        try:
            yield _Span(span)
        finally:
            span.end()

    @contextmanager
    def superstep(self, parent: _Span, *, run_id: str, superstep: int) -> Iterator[_Span]:
        """A superstep's span, child of its run's; never current."""
        span = self._tracer.start_span(
            f"treadle.superstep {superstep}",
            context=trace.set_span_in_context(parent.span),
            attributes={"treadle.run_id": run_id, "treadle.superstep": superstep},
        )
        try:
            yield _Span(span)
        finally:
            span.end()

    @contextmanager
    def invocation(
        self,
        parent: _Span,
        *,
        run_id: str,
        superstep: int,
        executor_id: str,
        position: int,
        attempt: int,
    ) -> Iterator[_Span]:
        """An invocation attempt's span, child of its superstep's and current inside."""
        with self._tracer.start_as_current_span(
            f"treadle.invoke {executor_id}",
            context=trace.set_span_in_context(parent.span),
            attributes={
                "treadle.run_id": run_id,
                "treadle.superstep": superstep,
                "treadle.executor_id": executor_id,
                "treadle.position": position,
                "treadle.attempt": attempt,
            },
            record_exception=False,  # set_outcome records it, once
            set_status_on_exception=False,
        ) as span:
            yield _Span(span)
