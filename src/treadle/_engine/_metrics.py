"""The metrics port: what treadle counts, and the one catalogue of its names.

The engine, the checkpointer, the worker and the webhook sender report
through :class:`Metrics`, a handful of plain methods, and never import a
metrics library: ``treadle.otel.OpenTelemetryMetrics`` implements the port
on the OpenTelemetry API for those who opt in (``treadle serve`` and
``treadle worker`` do, with the SDK and a Prometheus exporter).

The loop reaches the port through its tracing hooks (:func:`metered`): a
run with metrics gets a :class:`MetricsTracing` (beside the workflow's own
tracing, if any) whose "spans" only time and count. So the engine has one
set of hooks for runs, supersteps and invocations, and a run with neither
tracing nor metrics pays exactly what it paid before: nothing.

:data:`CATALOGUE` is the stable contract: every instrument's OpenTelemetry
name, kind, unit and attributes, and the name Prometheus shows it under.
``docs/observing.md`` documents it, the dashboard and alert rules in
``docs/`` may use only these names (a test checks), and the OpenTelemetry
binding creates its instruments from it.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Iterator

    from treadle._engine._tracing import Tracing

MetricKind: TypeAlias = Literal["counter", "histogram", "gauge"]
"""Counted in a process (counter, histogram), or read from the store at scrape time (gauge)."""


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One instrument: how OpenTelemetry names it and how Prometheus shows it.

    Attributes:
        name: The OpenTelemetry instrument name (``treadle.`` and dots).
        kind: ``counter`` and ``histogram`` are counted by the process that
            does the work; ``gauge`` is read from the store when scraped.
        unit: The UCUM unit (``s``, ``By``, or a ``{thing}`` annotation).
        attributes: The labels every point carries, in this order.
        description: What one point means, for ``# HELP``.
        prometheus: The metric's name in Prometheus' text format (the
            exporter's translation: dots to underscores, ``_seconds`` or
            ``_bytes`` for the unit, ``_total`` for a counter).
    """

    name: str
    kind: MetricKind
    unit: str
    attributes: tuple[str, ...]
    description: str
    prometheus: str


CATALOGUE: tuple[MetricSpec, ...] = (
    MetricSpec(
        "treadle.supersteps",
        "counter",
        "{superstep}",
        ("workflow",),
        "Supersteps run to their barrier",
        "treadle_supersteps_total",
    ),
    MetricSpec(
        "treadle.superstep.duration",
        "histogram",
        "s",
        ("workflow",),
        "Time from a superstep's start to its barrier's commit",
        "treadle_superstep_duration_seconds",
    ),
    MetricSpec(
        "treadle.invocations",
        "counter",
        "{invocation}",
        ("workflow", "executor", "outcome"),
        "Handler attempts, by how they ended (completed, failed, suspended, cancelled)",
        "treadle_invocations_total",
    ),
    MetricSpec(
        "treadle.invocation.duration",
        "histogram",
        "s",
        ("workflow", "executor"),
        "Time one handler attempt ran",
        "treadle_invocation_duration_seconds",
    ),
    MetricSpec(
        "treadle.checkpoint.size",
        "histogram",
        "By",
        ("workflow",),
        "Bytes of one checkpoint written (its blob and its new pieces)",
        "treadle_checkpoint_size_bytes",
    ),
    MetricSpec(
        "treadle.commit.duration",
        "histogram",
        "s",
        ("workflow",),
        "Time one store write of checkpoints took, from its start to durable",
        "treadle_commit_duration_seconds",
    ),
    MetricSpec(
        "treadle.runs.ended",
        "counter",
        "{run}",
        ("workflow", "status"),
        "Runs this process drove to an end (completed, failed, cancelled, stalled)",
        "treadle_runs_ended_total",
    ),
    MetricSpec(
        "treadle.lease.renewals",
        "counter",
        "{renewal}",
        (),
        "Leases a worker's heartbeat renewed",
        "treadle_lease_renewals_total",
    ),
    MetricSpec(
        "treadle.lease.takeovers",
        "counter",
        "{takeover}",
        (),
        "Runs a worker claimed whose previous worker's lease had expired",
        "treadle_lease_takeovers_total",
    ),
    MetricSpec(
        "treadle.webhook.deliveries",
        "counter",
        "{delivery}",
        ("outcome",),
        "Webhook sends, by outcome (delivered, retried, dead)",
        "treadle_webhook_deliveries_total",
    ),
    MetricSpec(
        "treadle.agent.tokens",
        "counter",
        "{token}",
        ("model", "kind"),
        "Tokens agent turns used, by model and kind (input, output)",
        "treadle_agent_tokens_total",
    ),
    MetricSpec(
        "treadle.limit.wait",
        "histogram",
        "s",
        ("limit",),
        "Time a call waited for a slot of a call limit (about 0 when one was free at once)",
        "treadle_limit_wait_seconds",
    ),
    MetricSpec(
        "treadle.runs",
        "gauge",
        "{run}",
        ("workflow", "status"),
        "Runs in the store, by workflow and status",
        "treadle_runs",
    ),
    MetricSpec(
        "treadle.requests.open",
        "gauge",
        "{request}",
        ("workflow",),
        "Requests waiting for an answer in the store",
        "treadle_requests_open",
    ),
    MetricSpec(
        "treadle.requests.oldest_age",
        "gauge",
        "s",
        (),
        "Seconds since the run of the oldest open request came to rest on it",
        "treadle_requests_oldest_age_seconds",
    ),
    MetricSpec(
        "treadle.timers.due",
        "gauge",
        "{run}",
        (),
        "Runs whose timer or deadline has fallen due and that no process has woken yet",
        "treadle_timers_due",
    ),
)
"""Every instrument treadle reports, as documented in ``docs/observing.md``."""


class Metrics(Protocol):
    """Where treadle reports what it counts (see :data:`CATALOGUE`).

    Each method is called where the thing happens, in the process doing
    it, and must return quickly without raising: it is on the hot path.
    """

    def superstep(self, workflow: str, seconds: float) -> None:
        """A superstep reached its barrier (committed, with a store)."""
        ...

    def invocation(self, workflow: str, executor: str, outcome: str, seconds: float) -> None:
        """One handler attempt ended: ``completed``, ``failed``, ``suspended`` or ``cancelled``."""
        ...

    def commit(self, workflow: str, sizes: tuple[int, ...], seconds: float) -> None:
        """One store write made checkpoints of these sizes (bytes) durable."""
        ...

    def run_ended(self, workflow: str, status: str) -> None:
        """A run this process drove reached a final status."""
        ...

    def leases(self, renewed: int, taken_over: int) -> None:
        """A worker renewed ``renewed`` leases, or took over ``taken_over`` expired ones."""
        ...

    def webhook_delivery(self, outcome: str) -> None:
        """A webhook send ended: ``delivered``, ``retried`` or ``dead``."""
        ...

    def agent_tokens(self, model: str, input_tokens: int, output_tokens: int) -> None:
        """An agent's turn used these tokens of ``model``."""
        ...

    def limit_wait(self, limit: str, seconds: float) -> None:
        """A call held a slot of ``limit`` after waiting ``seconds`` for it (0: free at once)."""
        ...


@dataclass(frozen=True, slots=True)
class RunMeter:
    """One run's metrics and the workflow its points are labelled with (for its checkpointer)."""

    metrics: Metrics
    workflow: str


@dataclass(frozen=True, slots=True)
class StoreGauges:
    """The gauges read from a store at one scrape (see ``treadle._operations._gauges``).

    Attributes:
        runs: Runs by ``(workflow, status)``.
        open_requests: Open requests by workflow.
        oldest_request_age: Seconds since the run of the oldest open request
            came to rest on it; ``None`` when no request is open.
        timers_due: Runs whose timer or deadline is due and not yet woken.
    """

    runs: dict[tuple[str, str], int]
    open_requests: dict[str, int]
    oldest_request_age: float | None
    timers_due: int


_FINAL = frozenset({"completed", "failed", "cancelled", "stalled"})
"""The statuses a run's span may end with that end the run (not a rest)."""


class _Timed:
    """What :class:`MetricsTracing` opens instead of a span: a start time and an outcome."""

    __slots__ = ("started", "status", "workflow")

    def __init__(self, workflow: str) -> None:
        self.workflow = workflow
        self.status = "completed"
        self.started = perf_counter()

    def set_outcome(self, status: str, error: BaseException | None = None) -> None:  # noqa: ARG002
        self.status = status


class MetricsTracing:
    """The tracing hooks, used to count: runs ended, supersteps, invocations and their latency.

    A superstep counts once its barrier is committed (its "span" ends after
    the commit, and only a completed one counts); an invocation counts each
    attempt with its outcome; a run counts when its span ends with a final
    status (a run that comes to rest is not counted until it ends).
    """

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    @contextmanager
    def run(self, *, run_id: str, workflow: str) -> Iterator[_Timed]:  # noqa: ARG002
        """Count the run if it ends."""
        timed = _Timed(workflow)
        yield timed
        if timed.status in _FINAL:
            self.metrics.run_ended(workflow, timed.status)

    @contextmanager
    def superstep(
        self,
        parent: _Timed,
        *,
        run_id: str,  # noqa: ARG002
        superstep: int,  # noqa: ARG002
    ) -> Iterator[_Timed]:
        """Count the superstep and its latency, if it reached its barrier."""
        timed = _Timed(parent.workflow)
        yield timed
        if timed.status == "completed":
            self.metrics.superstep(timed.workflow, perf_counter() - timed.started)

    @contextmanager
    def invocation(
        self,
        parent: _Timed,
        *,
        run_id: str,  # noqa: ARG002
        superstep: int,  # noqa: ARG002
        executor_id: str,
        position: int,  # noqa: ARG002
        attempt: int,  # noqa: ARG002
    ) -> Iterator[_Timed]:
        """Count the attempt, with its outcome and latency."""
        timed = _Timed(parent.workflow)
        try:
            yield timed
        finally:
            seconds = perf_counter() - timed.started
            self.metrics.invocation(timed.workflow, executor_id, timed.status, seconds)


class _Both:
    """A span of two tracings at once (the workflow's own, and the metrics')."""

    __slots__ = ("first", "second")

    def __init__(self, first: Any, second: Any) -> None:
        self.first = first
        self.second = second

    def set_outcome(self, status: str, error: BaseException | None = None) -> None:
        self.first.set_outcome(status, error)
        self.second.set_outcome(status, error)


class _BothTracing:
    """Two tracings at once: every hook opens a span of each, the first one's current."""

    def __init__(self, first: Tracing[Any], second: Tracing[Any]) -> None:
        self.first = first
        self.second = second

    @contextmanager
    def run(self, *, run_id: str, workflow: str) -> Iterator[_Both]:
        with (
            self.first.run(run_id=run_id, workflow=workflow) as first,
            self.second.run(run_id=run_id, workflow=workflow) as second,
        ):
            yield _Both(first, second)

    @contextmanager
    def superstep(self, parent: _Both, *, run_id: str, superstep: int) -> Iterator[_Both]:
        with (
            self.first.superstep(parent.first, run_id=run_id, superstep=superstep) as first,
            self.second.superstep(parent.second, run_id=run_id, superstep=superstep) as second,
        ):
            yield _Both(first, second)

    @contextmanager
    def invocation(self, parent: _Both, **where: Any) -> Iterator[_Both]:
        with (
            self.second.invocation(parent.second, **where) as second,
            self.first.invocation(parent.first, **where) as first,  # the current one, inside
        ):
            yield _Both(first, second)


def metered(tracing: Tracing[Any] | None, metrics: Metrics | None) -> Tracing[Any] | None:
    """The tracing a run runs with: the workflow's, with ``metrics`` counted through it too."""
    if metrics is None:
        return tracing
    counting = MetricsTracing(metrics)
    return counting if tracing is None else _BothTracing(tracing, counting)
