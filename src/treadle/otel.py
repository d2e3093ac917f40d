"""OpenTelemetry spans and metrics for treadle runs (``pip install 'treadle[otel]'``).

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

:class:`OpenTelemetryMetrics` reports what treadle counts (supersteps,
invocations, commits, runs, leases, webhooks, agent tokens; the names are
in ``docs/observing.md``) to a meter provider; ``treadle serve`` and
``treadle worker`` expose it to Prometheus.

Only this module imports OpenTelemetry's API: ``import treadle`` never does.
"""

from __future__ import annotations

from contextlib import contextmanager
from importlib import metadata
from typing import TYPE_CHECKING, Any

from treadle._engine._metrics import CATALOGUE
from treadle._extras import importing_extra

with importing_extra("treadle.otel", "otel"):
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace
    from opentelemetry.trace import StatusCode

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from treadle._engine._metrics import StoreGauges

__all__ = ["OpenTelemetryMetrics", "OpenTelemetryTracing"]

_SECONDS_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300
)  # fmt: skip
_BYTES_BUCKETS = (256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)


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


class OpenTelemetryMetrics:
    """Reports treadle's metrics (``treadle.Metrics``) through the OpenTelemetry API.

    Args:
        meter_provider: Where the points go; the global provider (as set by
            ``opentelemetry.metrics.set_meter_provider``) when omitted.

    Give it to runs as ``RunOptions(metrics=...)``; ``treadle serve`` and
    ``treadle worker`` make one for every run they drive. The instruments
    are those of ``docs/observing.md``; the store's gauges are set by
    :meth:`set_store_gauges` (their owner reads the store when scraped).
    """

    def __init__(self, meter_provider: otel_metrics.MeterProvider | None = None) -> None:
        """Create treadle's instruments on ``meter_provider``'s meter."""
        meter = otel_metrics.get_meter("treadle", _version() or "", meter_provider=meter_provider)
        made: dict[str, Any] = {}
        for spec in CATALOGUE:
            if spec.kind == "counter":
                made[spec.name] = tally = _Tally(spec.attributes)
                meter.create_observable_counter(
                    spec.name, [tally.observe], spec.unit, spec.description
                )
            elif spec.kind == "histogram":
                buckets = _BYTES_BUCKETS if spec.unit == "By" else _SECONDS_BUCKETS
                made[spec.name] = meter.create_histogram(
                    spec.name,
                    spec.unit,
                    spec.description,
                    explicit_bucket_boundaries_advisory=buckets,
                )
            else:
                made[spec.name] = meter.create_gauge(spec.name, spec.unit, spec.description)
        self._supersteps = made["treadle.supersteps"]
        self._superstep_seconds = made["treadle.superstep.duration"]
        self._invocations = made["treadle.invocations"]
        self._invocation_seconds = made["treadle.invocation.duration"]
        self._checkpoint_bytes = made["treadle.checkpoint.size"]
        self._commit_seconds = made["treadle.commit.duration"]
        self._runs_ended = made["treadle.runs.ended"]
        self._renewals = made["treadle.lease.renewals"]
        self._takeovers = made["treadle.lease.takeovers"]
        self._webhooks = made["treadle.webhook.deliveries"]
        self._tokens = made["treadle.agent.tokens"]
        self._limit_wait = made["treadle.limit.wait"]
        self._runs = made["treadle.runs"]
        self._open_requests = made["treadle.requests.open"]
        self._oldest_request = made["treadle.requests.oldest_age"]
        self._timers_due = made["treadle.timers.due"]
        # The label sets each store gauge was last set for: one gone from the
        # store is set to 0, not left at its last value.
        self._runs_seen: set[tuple[str, ...]] = set()
        self._requests_seen: set[tuple[str, ...]] = set()

    def superstep(self, workflow: str, seconds: float) -> None:
        """Count a superstep and its latency."""
        self._supersteps.add((workflow,))
        self._superstep_seconds.record(seconds, {"workflow": workflow})

    def invocation(self, workflow: str, executor: str, outcome: str, seconds: float) -> None:
        """Count a handler attempt and its latency."""
        self._invocations.add((workflow, executor, outcome))
        self._invocation_seconds.record(seconds, {"workflow": workflow, "executor": executor})

    def commit(self, workflow: str, sizes: tuple[int, ...], seconds: float) -> None:
        """Record a store write's latency and each checkpoint's size."""
        labels = {"workflow": workflow}
        self._commit_seconds.record(seconds, labels)
        for size in sizes:
            self._checkpoint_bytes.record(size, labels)

    def run_ended(self, workflow: str, status: str) -> None:
        """Count a run that ended here."""
        self._runs_ended.add((workflow, status))

    def leases(self, renewed: int, taken_over: int) -> None:
        """Count lease renewals and takeovers."""
        if renewed:
            self._renewals.add((), renewed)
        if taken_over:
            self._takeovers.add((), taken_over)

    def webhook_delivery(self, outcome: str) -> None:
        """Count a webhook send by outcome."""
        self._webhooks.add((outcome,))

    def agent_tokens(self, model: str, input_tokens: int, output_tokens: int) -> None:
        """Count an agent turn's tokens."""
        self._tokens.add((model, "input"), input_tokens)
        self._tokens.add((model, "output"), output_tokens)

    def limit_wait(self, limit: str, seconds: float) -> None:
        """Record how long a call waited for a slot of ``limit``."""
        self._limit_wait.record(seconds, {"limit": limit})

    def set_store_gauges(self, gauges: StoreGauges) -> None:
        """Set the store's gauges to what was just read from it."""
        _set_all(self._runs, gauges.runs, self._runs_seen, ("workflow", "status"))
        requests = {(workflow,): n for workflow, n in gauges.open_requests.items()}
        _set_all(self._open_requests, requests, self._requests_seen, ("workflow",))
        self._oldest_request.set(gauges.oldest_request_age or 0.0)
        self._timers_due.set(gauges.timers_due)


class _Tally:
    """A counter kept as a plain dict, read by OpenTelemetry only when it collects.

    Adding to it is a dict update: far cheaper than the SDK's synchronous
    counter (which checks and hashes the attributes of every point), and it
    is added to on every superstep and handler attempt. Exposed as an
    observable counter, so exporters see an ordinary cumulative sum.
    """

    __slots__ = ("counts", "names")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.counts: dict[tuple[str, ...], float] = {}

    def add(self, key: tuple[str, ...], amount: float = 1) -> None:
        counts = self.counts
        counts[key] = counts.get(key, 0) + amount

    def observe(self, options: otel_metrics.CallbackOptions) -> list[otel_metrics.Observation]:  # noqa: ARG002
        """The sums so far, one observation per label set."""
        names = self.names
        return [
            otel_metrics.Observation(value, dict(zip(names, key, strict=True)))
            for key, value in list(self.counts.items())  # a copy: another thread may add
        ]


def _set_all(
    gauge: Any,
    values: Mapping[Any, int],
    seen: set[tuple[str, ...]],
    names: tuple[str, ...],
) -> None:
    """Set ``gauge`` for each label set in ``values``, and to 0 for those seen before only."""
    for key in seen - values.keys():
        gauge.set(0, dict(zip(names, key, strict=True)))
    for key, value in values.items():
        gauge.set(value, dict(zip(names, key, strict=True)))
    seen.clear()
    seen.update(values.keys())
