"""The barrier of one superstep: what its invocations hand over, committed whole.

:func:`commit_superstep` is pure: it takes the run's environment, the
committed point the superstep ran against and the planned superstep (each
invocation's outcome set), and returns the next committed point with the
events to publish and the background work to start. It never sees the
loop and mutates none of its arguments, so a superstep either commits
whole (the loop takes the new point) or leaves the run exactly as the
previous barrier left it. Suspended invocations commit nothing but their
suspension; their events are still published (they did happen).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._engine._barrier import BarrierState
from treadle._engine._counts import Counts
from treadle._engine._delivery import build_inboxes
from treadle._engine._events import output_produced, superstep_completed
from treadle._engine._later import commit_later_work
from treadle._engine._outcomes import decided_outcome
from treadle._engine._slots import blank as _blank
from treadle._engine._state import commit_state
from treadle._engine._waits import invocation_key

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from treadle._engine._delivery import Envelope
    from treadle._engine._env import RunEnv
    from treadle._engine._events import WorkflowEvent
    from treadle._engine._invocation import Invocation, PlannedSuperstep
    from treadle._engine._outcomes import Outcome
    from treadle._engine._spawn import SpawnRecord
    from treadle._engine._state import Op
    from treadle._engine._waits import Suspension, WaitBook

Spawn = tuple["SpawnRecord", "Callable[..., Awaitable[Any]]", tuple[Any, ...]]
"""Background work a committed invocation started: its record, function and arguments."""


Committed = tuple[BarrierState, "Sequence[WorkflowEvent]", "Sequence[Spawn]", "Sequence[str]"]
"""What one barrier produced: ``(point, events, spawns, written)``.

The next committed point (its ``status`` the previous one's: where the run
stands after it is the loop's to say); the superstep's events in stamp
order, to publish (none when nobody listens); background work to start
once the point is durable; the state keys the superstep wrote. A plain
tuple, unpacked by the loop at once: a named one costs each superstep.
"""


def commit_superstep(  # noqa: PLR0915 - the barrier's hot path, kept in one frame
    env: RunEnv, point: BarrierState, plan: PlannedSuperstep
) -> Committed:
    """The barrier: the point after ``plan`` ran against ``point``.

    Raises:
        StateConflictError, OutcomeConflictError: the superstep's writes
            conflict; nothing of it commits.
    """
    superstep = plan.number
    invocations = plan.invocations
    count = len(invocations)
    state = point.state
    waits = point.waits
    # One pass sorts out what each invocation hands to the barrier.
    suspended: list[Suspension] | None = None  # made if needed: they seldom are
    writes: list[tuple[str, Sequence[Op]]] | None = None
    sent = []
    later = False
    set_by: list[tuple[str, Outcome]] | None = None  # who set the run's outcome: seldom any
    for invocation in invocations:
        outcome = invocation.outcome
        if outcome.suspension is not None:
            if suspended is None:
                suspended = []
            suspended.append(outcome.suspension)
            continue
        if outcome.writes:
            if writes is None:
                writes = []
            writes.append((invocation.executor.id, outcome.writes))
        if outcome.later is not None:
            later = True
            if outcome.later.outcome is not None:
                if set_by is None:
                    set_by = []
                set_by.append((invocation.executor.id, outcome.later.outcome))
        sent.append((invocation.executor.id, invocation.rank, invocation.position, outcome.sent))
    written: Sequence[str] = ()
    if writes:
        state = commit_state(state, writes, env.state_specs, superstep)
        if env.checkpointer is not None:  # what the next checkpoint must store again
            written = [op[1] for _, ops in writes for op in ops]
    inboxes, buffers = build_inboxes(
        superstep, sent, env.fan_in_edges, point.fan_in_buffers, env.ranks
    )
    decided = decided_outcome(set_by, superstep) if set_by else point.outcome
    spawns: Sequence[Spawn] = ()
    if suspended or later or waits.saved:  # the waits change: a copy of them does
        waits, spawns = _changed_waits(env, waits, suspended, later, inboxes, invocations)
    counted = point.iterations
    if type(counted) is not Counts:
        counted = Counts(dict(counted))
    order = plan.order
    # As Counts.added makes them, without its frame. One message each (the
    # usual case): the order says it all.
    iterations: Any = _blank(Counts)
    iterations.known = None
    iterations.before = counted
    iterations.step = order if len(order) == count else _handled(point, order)
    if not superstep & 255:  # worked out now and then, so the counts before it can go
        iterations.table()
    events: Sequence[WorkflowEvent]
    # The usual superstep, one invocation (``outcome`` is its, from the pass above) and
    # no output, as _outputs_and_events has it, without its frame: the events tuple is
    # added to, and is () unheard.
    if count == 1 and not outcome.outputs and type(outcome.events) is tuple:
        outputs = point.outputs
        events = (
            outcome.events + (superstep_completed(env.run_id, superstep),)  # noqa: RUF005
            if env.listening
            else ()
        )
    else:
        outputs, events = _outputs_and_events(env, superstep, point.outputs, invocations)
    # Built slot by slot, here: the cheapest way to make one (see BarrierState). ``Any``:
    # its fields are read-only to everyone else.
    committed: Any = _blank(BarrierState)
    committed.run_id = point.run_id
    committed.superstep = superstep
    committed.status = point.status
    committed.pending = inboxes
    committed.fan_in_buffers = buffers
    committed.state = state
    committed.iterations = iterations
    committed.outputs = outputs
    committed.waits = waits
    committed.deadline_at = point.deadline_at
    committed.spawned = point.spawned
    committed.outcome = decided
    committed.written = None
    committed.branch = point.branch
    return committed, events, spawns, written


def _changed_waits(
    env: RunEnv,
    waits: WaitBook,
    suspended: list[Suspension] | None,
    later: bool,
    inboxes: dict[str, list[Envelope]],
    invocations: list[Invocation],
) -> tuple[WaitBook, Sequence[Spawn]]:
    """A copy of ``waits`` with what the superstep changed of them, and its spawns.

    The suspensions are added, the durable work is committed (scheduled
    messages, approvals, continuations), and the saved steps of the
    invocations that are over go with them.
    """
    waits = waits.copy()
    spawns: Sequence[Spawn] = ()
    if suspended:
        waits.suspended = (*waits.suspended, *suspended)
    if later:
        spawns = _commit_durable_work(env, waits, inboxes, invocations)
    if waits.saved:
        _drop_saved_steps(waits, invocations)
    return waits, spawns


def _handled(point: BarrierState, order: tuple[str, ...]) -> list[str]:
    """Each executor in ``order`` as many times as it had messages in ``point``'s inboxes.

    Its own function: a comprehension reading ``point`` in the barrier
    would make ``point`` a cell there, built at every superstep.
    """
    pending = point.pending
    handled: list[str] = []
    for executor_id in order:
        handled.extend([executor_id] * len(pending[executor_id]))
    return handled


def _drop_saved_steps(waits: WaitBook, invocations: list[Invocation]) -> None:
    """Forget the saved steps of the invocations that completed (a suspended one keeps its)."""
    saved = waits.saved
    for invocation in invocations:
        if invocation.outcome.suspension is None:
            saved.pop(invocation_key(invocation.executor.id, invocation.envelope.stamp), None)


def _outputs_and_events(
    env: RunEnv, superstep: int, outputs: tuple[Any, ...], invocations: list[Invocation]
) -> tuple[tuple[Any, ...], Sequence[WorkflowEvent]]:
    """The outputs after this superstep, and its events if someone listens.

    Both in stamp order: each invocation's events, then its outputs.
    """
    listening = env.listening
    if len(invocations) == 1:  # the common case, as one tuple
        invocation = invocations[0]
        outcome = invocation.outcome
        added = outcome.outputs
        if not listening:
            return ((*outputs, *added) if added else outputs), ()
        if not added:
            return outputs, (*outcome.events, superstep_completed(env.run_id, superstep))
        return (*outputs, *added), (
            *outcome.events,
            *_produced(env.run_id, superstep, invocation.executor.id, added),
            superstep_completed(env.run_id, superstep),
        )
    events: list[WorkflowEvent] = []
    for invocation in invocations:
        outcome = invocation.outcome
        if listening:
            events.extend(outcome.events)
        if outcome.outputs:  # a suspended invocation has none
            outputs = (*outputs, *outcome.outputs)
            if listening:
                events.extend(
                    _produced(env.run_id, superstep, invocation.executor.id, outcome.outputs)
                )
    if listening:
        events.append(superstep_completed(env.run_id, superstep))
    return outputs, events


def _produced(
    run_id: str, superstep: int, executor_id: str, values: Sequence[Any]
) -> list[WorkflowEvent]:
    """An ``output_produced`` event for each value an invocation output.

    Its own function: a generator over them in the barrier would make the
    names it reads cells there, built at every superstep. A loop, not a
    comprehension: that is a function of its own on Python 3.11.
    """
    events: list[WorkflowEvent] = []
    for value in values:
        events.append(output_produced(run_id, superstep, executor_id, value))  # noqa: PERF401
    return events


def _commit_durable_work(
    env: RunEnv,
    waits: WaitBook,
    inboxes: dict[str, list[Envelope]],
    invocations: list[Invocation],
) -> list[Spawn]:
    """Scheduled messages and their cancellations, approvals, continuations; the spawns."""
    spawns: list[Spawn] = []
    for invocation in invocations:
        outcome = invocation.outcome
        later = outcome.later
        if later is None:  # also every suspended invocation
            continue
        # Their stamps continue the invocation's send sequence.
        stamp = (invocation.superstep, invocation.rank, invocation.position, len(outcome.sent))
        waits.commit_later(
            env.run_id, invocation.executor.id, stamp, later.scheduled, later.approvals, env.branch
        )
        spawns.extend(later.spawns)
        if later.cancelled or later.continuing:
            seq = len(outcome.sent) + len(later.scheduled) + len(later.approvals)
            commit_later_work(waits, inboxes, invocation, later, seq)
    return spawns
