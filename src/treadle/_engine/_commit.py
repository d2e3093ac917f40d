"""The barrier of one superstep: what its invocations hand over, committed whole.

Everything is computed first (the state commit, routing into inboxes and
fan-in buffers) and assigned to the run last, so a superstep either commits
whole or leaves the run exactly as the previous barrier left it. Suspended
invocations commit nothing but their suspension; their events are still
published (they did happen).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treadle._engine._delivery import build_inboxes
from treadle._engine._events import output_produced, superstep_completed
from treadle._engine._later import commit_later_work
from treadle._engine._outcomes import decided_outcome
from treadle._engine._state import commit_state
from treadle._engine._waits import invocation_key

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._engine._invocation import Invocation, PlannedSuperstep
    from treadle._engine._loop import RunLoop
    from treadle._engine._outcomes import Outcome
    from treadle._engine._state import Op
    from treadle._engine._waits import Suspension


def commit_superstep(run: RunLoop, plan: PlannedSuperstep) -> None:
    """The barrier: compute everything, then assign everything to ``run``."""
    superstep = plan.number
    invocations = plan.invocations
    handled = run.pending  # the inboxes this superstep handled
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
    state = run.state
    if writes:
        state = commit_state(state, writes, run.state_specs, superstep)
        if run.checkpointer is not None:  # what the next checkpoint must store again
            run.written.update(op[1] for _, ops in writes for op in ops)
    inboxes, buffers = build_inboxes(
        superstep, sent, run.fan_in_edges, run.fan_in_buffers, run.ranks
    )
    decided = decided_outcome(set_by, superstep) if set_by else run.outcome
    # Nothing below can fail: the superstep is committed from here on.
    run.superstep = superstep
    run.state = state
    run.pending = inboxes
    run.fan_in_buffers = buffers
    run.outcome = decided
    if suspended:
        run.waits.suspended.extend(suspended)
    if later:
        _commit_durable_work(run, invocations)
    if run.waits.saved:  # the saved steps of invocations that are over go with them
        _drop_saved_steps(run, invocations)
    iterations = run.iterations
    for executor_id in plan.order:
        iterations[executor_id] = iterations.get(executor_id, 0) + len(handled[executor_id])
    _record_outputs(run, superstep, invocations)


def _drop_saved_steps(run: RunLoop, invocations: list[Invocation]) -> None:
    """Forget the saved steps of the invocations that completed (a suspended one keeps its)."""
    saved = run.waits.saved
    for invocation in invocations:
        if invocation.outcome.suspension is None:
            saved.pop(invocation_key(invocation.executor.id, invocation.envelope.stamp), None)


def _record_outputs(run: RunLoop, superstep: int, invocations: list[Invocation]) -> None:
    """Commit the outputs, and publish the superstep's events if someone listens.

    Both in stamp order: each invocation's events, then its outputs.
    """
    outputs = run.outputs
    listening = run.listening
    publish = run.publish
    for invocation in invocations:
        outcome = invocation.outcome
        if listening:
            for event in outcome.events:
                publish(event)
        if outcome.outputs:  # a suspended invocation has none
            outputs.extend(outcome.outputs)
            if listening:
                executor_id = invocation.executor.id
                for value in outcome.outputs:
                    publish(output_produced(run.run_id, superstep, executor_id, value))
    if listening:
        publish(superstep_completed(run.run_id, superstep))


def _commit_durable_work(run: RunLoop, invocations: list[Invocation]) -> None:
    """Scheduled messages and their cancellations, spawns, approvals, continuations."""
    for invocation in invocations:
        outcome = invocation.outcome
        later = outcome.later
        if later is None:  # also every suspended invocation
            continue
        # Their stamps continue the invocation's send sequence.
        stamp = (invocation.superstep, invocation.rank, invocation.position, len(outcome.sent))
        run.waits.commit_later(
            run.run_id, invocation.executor.id, stamp, later.scheduled, later.approvals
        )
        for record, fn, args in later.spawns:
            run.spawned.queue(record, fn, args)
        if later.cancelled or later.continuing:
            seq = len(outcome.sent) + len(later.scheduled) + len(later.approvals)
            commit_later_work(run, invocation, later, seq)
