"""The options of one run: what a caller may set, and what a run runs with.

``RunOptions`` is the one value every entry point takes (``run``, ``stream``,
``resume``, ``respond``, ``send_message``, their sync adapters and the CLI),
so an option exists once, is checked once, where it enters, and cannot drift
between entry points. Each field left ``None`` falls back to the workflow's
default. ``RunSettings`` is the result: the workflow's defaults with a run's
options laid over them, which is all the engine reads.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict

from treadle._engine._clock import Clock, SystemClock
from treadle._engine._metrics import Metrics, metered

if TYPE_CHECKING:
    from treadle._engine._tracing import Tracing
    from treadle._graph._policies import RetryPolicy

Durability: TypeAlias = Literal["sync", "background", "batched"]
"""When a superstep's checkpoint must be durable (see ``docs/durability.md``)."""

DURABILITIES: tuple[Durability, ...] = ("sync", "background", "batched")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """How one run runs; every field left ``None`` takes the workflow's default.

    Pass one to any entry point as ``options=``, or its fields as keywords
    (``workflow.run(x, timeout=60)``); keywords win over ``options``. A bad
    value is refused here, before anything runs, with or without a store.

    Attributes:
        max_supersteps: Stop a runaway loop after this many supersteps.
        max_node_iterations: Stop any one executor after this many invocations.
        max_concurrency: Most handlers running at once.
        deterministic: Run a superstep's executors one at a time in rank
            order (``False`` turns off a workflow-level ``True``).
        clock: Where timers, backoff and timeouts read the time.
        timeout: The run's deadline, in seconds or as a ``timedelta`` from
            now; stored with the run and enforced across restarts. Only a
            new run takes one: a stored run keeps the deadline it started
            with, so ``resume``, ``respond`` and ``send_message`` refuse it.
        durability: ``"sync"``, ``"background"`` or ``"batched"`` checkpoints.
        keep_last: Checkpoints to keep for this run (default: the store's).
        record_events: Keep every event in ``RunResult.events``; ``False``
            builds no events at all (streams always see theirs).
        event_log: Keep a stored run's events in its store's event log,
            written with each checkpoint (what ``treadle watch``, ``logs``
            and the server's event streams read). ``False`` spares a run
            nobody will watch that work; its log then holds only the
            statuses the store itself records (cancel, pause, unpause).
        rest_without_store: A run with no store that comes to rest on a
            request, a handoff approval or session input returns (or ends
            its stream) ``AWAITING_INPUT``, instead of failing with
            ``UnanswerableWaitError``: nothing can answer it without a
            store, so it is an error unless asked for (tests, dry runs).
        metrics: Where the run reports supersteps, invocations, commits and
            its end (e.g. ``treadle.otel.OpenTelemetryMetrics``; see
            ``docs/observing.md``). ``treadle worker`` and ``treadle serve``
            give every run they drive theirs.
    """

    max_supersteps: int | None = None
    max_node_iterations: int | None = None
    max_concurrency: int | None = None
    deterministic: bool | None = None
    clock: Clock | None = None
    timeout: float | dt.timedelta | None = None
    durability: Durability | None = None
    keep_last: int | None = None
    record_events: bool = True
    event_log: bool = True
    rest_without_store: bool = False
    metrics: Metrics | None = None

    def __post_init__(self) -> None:
        _check_count("max_supersteps", self.max_supersteps)
        _check_count("max_node_iterations", self.max_node_iterations)
        _check_count("max_concurrency", self.max_concurrency)
        _check_count("keep_last", self.keep_last)
        _check_metrics(self.metrics)
        _check_flag("deterministic", self.deterministic)
        _check_flag("record_events", self.record_events)
        _check_flag("rest_without_store", self.rest_without_store)
        _check_clock(self.clock)
        _check_durability(self.durability)
        if isinstance(self.timeout, dt.timedelta):
            object.__setattr__(self, "timeout", self.timeout.total_seconds())
        _check_timeout(self.timeout)

    @property
    def timeout_seconds(self) -> float | None:
        """The deadline in seconds from when the run (re)starts, if one was given."""
        timeout = self.timeout
        return timeout.total_seconds() if isinstance(timeout, dt.timedelta) else timeout

    def merged(self, overrides: RunOptionArgs) -> RunOptions:
        """These options with ``overrides`` laid over them (checked again)."""
        return dataclasses.replace(self, **overrides) if overrides else self


class RunOptionArgs(TypedDict, total=False):
    """The fields of :class:`RunOptions`, as keywords of an entry point."""

    max_supersteps: int | None
    max_node_iterations: int | None
    max_concurrency: int | None
    deterministic: bool | None
    clock: Clock | None
    timeout: float | dt.timedelta | None
    durability: Durability | None
    keep_last: int | None
    record_events: bool
    event_log: bool
    rest_without_store: bool
    metrics: Metrics | None


def run_options(options: RunOptions | None, overrides: RunOptionArgs) -> RunOptions:
    """The options an entry point was called with: ``options`` with keywords over it.

    Raises:
        TypeError: ``options`` is not a ``RunOptions``, a keyword is not an
            option, or a value has the wrong type.
        ValueError: a value is out of range.
    """
    if options is None:
        return RunOptions(**overrides) if overrides else DEFAULT_OPTIONS
    if not isinstance(options, RunOptions):
        msg = f"options must be a treadle.RunOptions, got {type(options).__name__}"
        raise TypeError(msg)
    return options.merged(overrides)


def continuing_options(options: RunOptions | None, overrides: RunOptionArgs) -> RunOptions:
    """The options of an entry point that continues a stored run.

    Raises:
        ValueError: a ``timeout`` was given: the run's deadline was fixed
            when it started and is stored with it (its checkpoints carry it).
        TypeError, ValueError: as :func:`run_options`.
    """
    chosen = run_options(options, overrides)
    if chosen.timeout is not None:
        msg = "timeout sets a new run's deadline; a stored run keeps the deadline it started with"
        raise ValueError(msg)
    return chosen


@dataclass(frozen=True, slots=True)
class RunSettings:
    """What a run runs with: the workflow's defaults, then the run's options.

    ``sleep_through_timers`` is not an option: a run with no store has
    nowhere to rest, so it sleeps through its timers instead (and fails
    where it would rest on a request, unless ``rest_without_store``).
    """

    max_supersteps: int = 1000
    max_node_iterations: int | None = None
    max_concurrency: int | None = None
    deterministic: bool = False
    retry: RetryPolicy | None = None
    clock: Clock = field(default_factory=SystemClock)
    timeout: float | None = None
    sleep_through_timers: bool = False
    durability: Durability = "sync"
    tracing: Tracing[Any] | None = None
    rest_without_store: bool = False
    four_eyes: bool = False  # the workflow's: its requests refuse the run's starter
    metrics: Metrics | None = None  # the run's: a worker's or server's, never the workflow's

    def __post_init__(self) -> None:
        _check_count("max_supersteps", self.max_supersteps)
        _check_count("max_node_iterations", self.max_node_iterations)
        _check_count("max_concurrency", self.max_concurrency)
        _check_durability(self.durability)
        _check_timeout(self.timeout)

    def with_options(self, options: RunOptions, *, sleep_through_timers: bool) -> RunSettings:
        """These defaults with a run's options over them."""

        def pick(value: Any, default: Any) -> Any:
            return default if value is None else value

        return RunSettings(
            max_supersteps=pick(options.max_supersteps, self.max_supersteps),
            max_node_iterations=pick(options.max_node_iterations, self.max_node_iterations),
            max_concurrency=pick(options.max_concurrency, self.max_concurrency),
            deterministic=pick(options.deterministic, self.deterministic),
            retry=self.retry,
            clock=pick(options.clock, self.clock),
            timeout=pick(options.timeout_seconds, self.timeout),
            sleep_through_timers=sleep_through_timers,
            durability=pick(options.durability, self.durability),
            tracing=metered(self.tracing, options.metrics),
            rest_without_store=options.rest_without_store,
            four_eyes=self.four_eyes,
            metrics=options.metrics,
        )


def _check_count(name: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{name} must be a whole number, got {value!r}"
        raise TypeError(msg)
    if value < 1:
        msg = f"{name} must be at least 1, got {value}"
        raise ValueError(msg)


def _check_flag(name: str, value: object) -> None:
    if value is not None and not isinstance(value, bool):
        msg = f"{name} must be True or False, got {value!r}"
        raise TypeError(msg)


def _check_metrics(value: object) -> None:
    if value is not None and not (hasattr(value, "superstep") and hasattr(value, "invocation")):
        msg = f"metrics must be like treadle.otel.OpenTelemetryMetrics, got {value!r}"
        raise TypeError(msg)


def _check_clock(value: object) -> None:
    if value is not None and not (hasattr(value, "now") and hasattr(value, "sleep_until")):
        msg = f"clock must be a treadle.Clock (with now() and sleep_until()), got {value!r}"
        raise TypeError(msg)


def _check_durability(value: object) -> None:
    if value is not None and value not in DURABILITIES:
        choices = ", ".join(repr(d) for d in DURABILITIES)
        msg = f"durability must be one of {choices}, got {value!r}"
        raise ValueError(msg)


def _check_timeout(value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"timeout must be seconds or a datetime.timedelta, got {value!r}"
        raise TypeError(msg)
    if not value > 0:
        msg = f"timeout must be a positive number of seconds, got {value!r}"
        raise ValueError(msg)


DEFAULT_OPTIONS = RunOptions()
"""No options: every field takes the workflow's default."""
