"""What a run is opened with: one frozen value, made once, read by everything that runs it.

The loop keeps two things: this environment, which never changes while
the run lives, and the committed point (``BarrierState``), which each
barrier replaces. Planning a superstep, committing it, an invocation and
its context read the environment; none of them sees the loop. The few
things an invocation may do to its run while it is under way (save its
steps and its sub-workflow's barriers) go through :attr:`RunEnv.save_progress`.

A frozen slotted dataclass: built once per run, and its fields are read
on the hot path, where the interpreter reads slots fastest (a named
tuple's fields cost about a third more per superstep in a chain).
:func:`build_env` makes one as its unfrozen twin and then turns it into a
``RunEnv`` (see :data:`_Draft`): a frozen dataclass's own ``__init__``
sets each field through ``object.__setattr__``, seven times as slow.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from treadle._engine._slots import blank as _blank
from treadle._engine._slots import unfrozen_twin
from treadle._engine._tracing import RunTrace

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from treadle._engine._barrier import Checkpointing, EventSink
    from treadle._engine._clock import Clock
    from treadle._engine._deadlines import AnswerLedger
    from treadle._engine._events import WorkflowEvent
    from treadle._engine._inputs import InputFeed
    from treadle._engine._limit_scope import LimitScope
    from treadle._engine._limiter import Limiting
    from treadle._engine._options import RunSettings
    from treadle._engine._pool import ExecutorPool
    from treadle._engine._routing import Router
    from treadle._engine._state import StateKey
    from treadle._engine._topology import Topology
    from treadle._graph._edges import FanInEdge


@dataclass(frozen=True, slots=True)
class RunEnv:
    """Everything about a run that no barrier changes.

    Attributes:
        workflow: The graph it runs.
        run_id: Its id.
        options: What it runs with (the workflow's defaults under the run's options).
        clock: Where its timers, backoff and timeouts read the time.
        pool: Its executor instances.
        checkpointer: Where its barriers are saved (``None``: nowhere).
        ledger: Where its request deadlines are decided against answers:
            the store's (``None``: decided in the run).
        wait_scope: What its wait keys are made in: ``""`` for a run of its
            own; a sub-workflow's path in its parent.
        publish: Where its events go (a no-op when nobody listens).
        listening: Whether anybody listens to its events.
        live: Whether events go out the moment they are raised.
        batching: Whether events are kept for each barrier's batch.
        backpressure: Awaited before each invocation and barrier, if set.
        limiter: Its ``max_concurrency``, if any.
        limiting: Its call limits (``None``: no executor of it names one).
        trace: Its spans, if it is traced.
        plain_calls: Whether a handler is simply awaited (no span, no limit).
        inline_calls: Whether it may also be started inline (its events batched).
        save_progress: Checkpoints the last barrier again with the
            invocations' saved steps and sub-workflows as they stand now.
        inputs: Its session inbox, read at every boundary, when its
            workflow's input policy takes messages while a turn runs.
        limit_scope: What its sub-workflows' calls resolve limits in and
            wait at (``None``: no sub-workflow of it names a limit).
        branch: The branch of the run its invocations are on
            (``BarrierState.branch``; a sub-workflow's is its parent's):
            on one, their idempotency keys and the ids of their waits end in
            ``~N``, never an abandoned turn's at the same place.
    """

    workflow: Topology
    run_id: str
    options: RunSettings
    clock: Clock
    pool: ExecutorPool
    checkpointer: Checkpointing | None
    ledger: AnswerLedger | None
    wait_scope: str
    router: Router
    ranks: Mapping[str, int]
    state_specs: Mapping[str, StateKey]
    fan_in_edges: Sequence[FanInEdge]
    publish: Callable[[WorkflowEvent], None]
    listening: bool
    live: bool
    batching: bool
    backpressure: Callable[[], Awaitable[None]] | None
    limiter: asyncio.Semaphore | None
    limiting: Limiting | None
    trace: RunTrace | None
    plain_calls: bool
    inline_calls: bool
    save_progress: Callable[..., Awaitable[str | None]]
    inputs: InputFeed | None = None
    limit_scope: LimitScope | None = None
    branch: int = 0


_Draft = unfrozen_twin(RunEnv)
"""``RunEnv``'s unfrozen twin (see ``_engine/_slots.py``)."""


class Opening(NamedTuple):
    """What the one door (``_engine/_opening.py``) opens a run with, besides its start.

    Attributes:
        workflow: The graph it runs.
        run_id: Its id.
        options: What it runs with.
        pool: Its executor instances.
        sink: Where its events go (``None``: nobody listens).
        checkpointer: Where its barriers are saved.
        ledger: Where its request deadlines are decided.
        wait_scope: See :attr:`RunEnv.wait_scope`.
        deadline_at: When it fails (``None``: from ``options.timeout``, if any).
        limiting: Its call limits, and where its calls wait for them.
        inputs: See :attr:`RunEnv.inputs`.
        limit_scope: See :attr:`RunEnv.limit_scope`.
        branch: See :attr:`RunEnv.branch`.
    """

    workflow: Topology
    run_id: str
    options: RunSettings
    pool: ExecutorPool
    sink: EventSink | None = None
    checkpointer: Checkpointing | None = None
    ledger: AnswerLedger | None = None
    wait_scope: str = ""
    deadline_at: float | None = None
    limiting: Limiting | None = None
    inputs: InputFeed | None = None
    limit_scope: LimitScope | None = None
    branch: int = 0


def _discard(event: WorkflowEvent) -> None:
    """The sink of a run nobody listens to (callers check ``listening``)."""


def build_env(opening: Opening, save_progress: Callable[..., Awaitable[str | None]]) -> RunEnv:
    """The environment of a run opened with ``opening`` (derived fields computed once).

    ``opening`` is unpacked at once: reading a named tuple's fields one by
    one goes the slow way on Python 3.11 (see ``_engine/_barrier.py``).
    """
    (
        workflow,
        run_id,
        options,
        pool,
        sink,
        checkpointer,
        ledger,
        wait_scope,
        _,
        limiting,
        inputs,
        limit_scope,
        branch,
    ) = opening
    router = workflow.router
    listening = sink is not None
    live = sink is not None and sink.live
    backpressure = sink.backpressure if sink is not None else None
    limiter = asyncio.Semaphore(options.max_concurrency) if options.max_concurrency else None
    tracing = options.tracing
    trace = RunTrace(tracing, run_id, workflow.name) if tracing is not None else None
    plain = trace is None and limiter is None and limiting is None
    publish: Callable[[WorkflowEvent], None] = sink.publish if sink is not None else _discard
    # Made blank and set slot by slot: calling _Draft would go through its __init__
    # (25 arguments), the slow way a class with a Python __init__ is called.
    env: Any = _blank(_Draft)
    env.workflow = workflow
    env.run_id = run_id
    env.options = options
    env.clock = options.clock
    env.pool = pool
    env.checkpointer = checkpointer
    env.ledger = ledger
    env.wait_scope = wait_scope
    env.router = router
    env.ranks = workflow.ranks
    env.state_specs = workflow.state_specs
    env.fan_in_edges = router.fan_ins
    env.publish = publish
    env.listening = listening
    env.live = live
    env.batching = listening and not live
    env.backpressure = backpressure
    env.limiter = limiter
    env.limiting = limiting
    env.trace = trace
    env.plain_calls = plain
    env.inline_calls = plain and backpressure is None and not live
    env.save_progress = save_progress
    env.inputs = inputs
    env.limit_scope = limit_scope
    env.branch = branch
    env.__class__ = RunEnv  # frozen from here on (see _Draft)
    result: RunEnv = env
    return result


def no_progress(**_: Any) -> Awaitable[str | None]:
    """``save_progress`` of an environment whose run saves nothing (no store; a model in a test)."""
    return _nothing()


async def _nothing() -> str | None:
    return None


class _Saving(Protocol):
    async def save_progress(self, *, durable: bool = False) -> str | None: ...


class _ProgressOf(weakref.ref[_Saving]):
    """A weak reference to a run's loop that, called, saves the loop's progress.

    Itself the weak reference, rather than a closure over one: one object per
    run where a closure made four (the function, its cell, the cell's tuple and
    the reference), each walked by the garbage collector at every pass while
    the run is in flight.
    """

    __slots__ = ()

    async def __call__(self, *, durable: bool = False) -> str | None:  # type: ignore[override]
        alive = weakref.ref.__call__(self)
        return None if alive is None else await alive.save_progress(durable=durable)


def saving_progress_of(loop: _Saving) -> Callable[..., Awaitable[str | None]]:
    """``RunEnv.save_progress`` for a run's ``loop``, holding it weakly.

    The loop holds its environment; were the environment to hold the loop
    (a bound method would), every run would be a reference cycle, freed
    only by the garbage collector, and each run's whole graph would linger
    until then: a chain of supersteps ran 60% slower for it.
    """
    return _ProgressOf(loop)
