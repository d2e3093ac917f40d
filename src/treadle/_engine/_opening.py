"""Opening a run: the one door a loop is made through.

Every run, a workflow's own (``_workflow/_launch.py``) or a sub-workflow's
(``_engine/_subworkflow.py``), is opened by :func:`open_loop` (a new one
by :func:`open_fresh`, which it calls), given what
it is opened with (one :class:`Opening`) and where it starts (a fresh
input, or a committed point to go on from with what arrived meanwhile).
Only this module and the sub-workflow executor import the loop (an
import contract in ``pyproject.toml`` says so); whoever drives a run
holds it as a :class:`DrivenRun`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from treadle._engine._arrivals import INPUT_SOURCE, SpawnDone
from treadle._engine._barrier import BarrierState
from treadle._engine._counts import Counts, counts_of
from treadle._engine._delivery import Envelope
from treadle._engine._events import run_started, status_changed
from treadle._engine._loop import RunLoop
from treadle._engine._result import RunStatus
from treadle._engine._slots import blank as _blank
from treadle._engine._spawn import lost
from treadle._engine._state import initial_state
from treadle._engine._waits import WaitBook

_RUNNING = RunStatus.RUNNING
_start_loop = RunLoop.__init__
_empty_book = WaitBook.__init__

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from treadle._engine._arrivals import Arrival
    from treadle._engine._barrier import CommittedPoint
    from treadle._engine._delivery import FanInBuffer
    from treadle._engine._env import Opening, RunEnv
    from treadle._engine._events import WorkflowEvent
    from treadle._engine._result import RunResult


class FreshStart(NamedTuple):
    """A new run: its input, delivered to the start executor in superstep 1.

    Attributes:
        message: The input.
        state: Initial shared state over the declared defaults.
    """

    message: Any
    state: Mapping[str, Any] | None = None


class Continuation(NamedTuple):
    """A run going on from a committed point (a checkpoint read back, or a sub-workflow's barrier).

    Attributes:
        point: The committed point.
        snapshots: The executors' saved fields at that point.
        arrivals: What arrived since (answers, session input, timeouts),
            applied before it steps.
    """

    point: CommittedPoint
    snapshots: Mapping[str, Any]
    arrivals: Sequence[Arrival] = ()


class DrivenRun(Protocol):
    """A run, as whoever drives it sees it: step it, end it, read it."""

    @property
    def run_id(self) -> str:
        """The run's id."""
        ...

    @property
    def status(self) -> RunStatus:
        """Where the run stands."""
        ...

    @property
    def env(self) -> RunEnv:
        """What the run was opened with (its session inbox, for one)."""
        ...

    async def step(self) -> bool:
        """Run one superstep and its barrier; ``False`` once the run rests or ends."""
        ...

    async def run_to_end(self) -> None:
        """Run supersteps until the run rests or ends."""
        ...

    async def sleep_through_timer(self) -> bool:
        """For a ``WAITING`` run with nowhere to rest, sleep until its timer; ``True`` if it did."""
        ...

    async def cancel(self) -> None:
        """Mark the run ``CANCELLED`` (the caller stops driving it)."""
        ...

    def barrier_state(self) -> BarrierState:
        """The last committed point, as a checkpoint would hold it."""
        ...

    def result(self, events: list[WorkflowEvent] | None = None) -> RunResult:
        """The run as of its last barrier."""
        ...


def open_loop(opening: Opening, start: FreshStart | Continuation) -> RunLoop:
    """A loop ready to step: ``opening``'s run, from ``start``.

    A continued run whose point had ended (completed, stalled) is opened
    with that status, and does not step.

    Raises:
        TypeError: a fresh run's start executor has no handler for its input.
        UnknownRequestError, InvalidResponseError, RequestError: an answer
            or session input it is continued with does not fit.
    """
    if isinstance(start, FreshStart):
        return open_fresh(opening, start.message, start.state)
    point = start.point
    status = RunStatus(point.status)
    ended = status in (RunStatus.COMPLETED, RunStatus.STALLED)
    # Made blank and given its __init__ as a plain function, its point slot by slot
    # (see _fresh_point): every run woken from a checkpoint is opened here.
    loop: RunLoop = _blank(RunLoop)
    _start_loop(loop, opening, _continued_point(opening, point, status if ended else _RUNNING))
    opening.pool.restore(start.snapshots)
    if ended:
        loop.status = status  # nothing left to run
        return loop
    # Background work the point still held died with its process: each executor
    # that spawned it is told so (SpawnResult(lost=True)).
    arrivals = start.arrivals
    if point.spawned:
        died = [SpawnDone(executor_id, result) for executor_id, result in lost(list(point.spawned))]
        arrivals = [*died, *arrivals]
    if arrivals:  # nothing arrived (a timer's wake): the point is copied already
        loop.admit(arrivals)
    _announce_start(loop)
    return loop


def open_fresh(opening: Opening, message: Any, state: Mapping[str, Any] | None = None) -> RunLoop:
    """``open_loop(opening, FreshStart(message, state))``, without the tuple (every new run's way).

    Raises:
        TypeError: the start executor has no handler for ``message``.
    """
    # Made blank and given its __init__ as a plain function (see _fresh_point).
    loop: RunLoop = _blank(RunLoop)
    _start_loop(loop, opening, _fresh_point(opening, message, state))
    _announce_start(loop)
    return loop


def _fan_in_buffers(buffers: tuple[FanInBuffer, ...], count: int) -> tuple[FanInBuffer, ...]:
    """A point's fan-in buffers, one per fan-in of the workflow.

    A checkpoint stores them only when one holds something, and
    reads back ``()`` otherwise; the barrier indexes them by fan-in.
    """
    if len(buffers) >= count:
        return buffers
    return (*buffers, *({} for _ in range(count - len(buffers))))


def _continued_point(opening: Opening, point: CommittedPoint, status: RunStatus) -> BarrierState:
    """``point`` as a loop goes on from it: its mutable parts copied, no spawns nor writes yet."""
    made: Any = _blank(BarrierState)
    made.run_id = opening.run_id
    made.superstep = point.superstep
    made.status = status
    made.pending = {target: list(inbox) for target, inbox in point.pending.items()}
    fan_ins = len(opening.workflow.router.fan_ins)
    made.fan_in_buffers = _fan_in_buffers(point.fan_in_buffers, fan_ins)
    made.state = point.state
    made.iterations = counts_of(point.iterations)
    made.outputs = tuple(point.outputs)
    made.waits = point.waits.copy()
    made.deadline_at = point.deadline_at
    made.spawned = ()
    made.outcome = point.outcome
    made.written = None
    made.branch = point.branch
    continued: BarrierState = made
    return continued


def _fresh_point(opening: Opening, message: Any, state: Mapping[str, Any] | None) -> BarrierState:
    """The point before superstep 1: the input pending at the start executor."""
    workflow = opening.workflow
    first = workflow.start_id
    prototype = workflow.prototype(first)
    if prototype.find_handler(type(message)) is None:
        accepted = ", ".join(t.__qualname__ for t in prototype.accepted_types())
        msg = (
            f"the start executor {first!r} has no handler for the input "
            f"{type(message).__qualname__} (it accepts: {accepted})"
        )
        raise TypeError(msg)
    problems = prototype.input_problems(message)
    if problems:  # a definition's declared inputs: refused before the run exists, as at every door
        msg = f"the input does not fit the start executor {first!r}: {'; '.join(problems)}"
        raise TypeError(msg)
    specs = workflow.state_specs
    fan_ins = workflow.router.fan_ins
    options = opening.options
    deadline_at = opening.deadline_at
    if deadline_at is None and options.timeout:
        deadline_at = options.clock.now() + options.timeout
    # Built slot by slot, as the barrier builds one (see BarrierState), and so are
    # its Counts and first message; its waits are made blank and given their
    # ``__init__`` as a plain function: a class with an ``__init__`` of its own is
    # called the slow way.
    counts: Any = _blank(Counts)
    counts.known = {}
    counts.before = None
    counts.step = ()
    point: Any = _blank(BarrierState)
    point.run_id = opening.run_id
    point.superstep = 0
    point.status = _RUNNING
    envelope: Any = _blank(Envelope)
    envelope.stamp = (0, -1, 0, 0)
    envelope.source = INPUT_SOURCE
    envelope.payload = message
    envelope.handoff = envelope.journal = None
    point.pending = {first: [envelope]}
    point.fan_in_buffers = tuple([{} for _ in fan_ins]) if fan_ins else ()
    point.state = initial_state(specs, state) if specs or state else {}
    point.iterations = counts
    point.outputs = ()
    waits: WaitBook = _blank(WaitBook)
    _empty_book(waits)
    point.waits = waits
    point.deadline_at = deadline_at
    point.spawned = ()
    point.outcome = None
    point.written = None
    point.branch = opening.branch
    fresh: BarrierState = point
    return fresh


def _announce_start(loop: RunLoop) -> None:
    env = loop.env
    if env.listening:
        superstep = loop.point.superstep
        env.publish(run_started(env.run_id, superstep))
        env.publish(status_changed(env.run_id, superstep, RunStatus.RUNNING))
