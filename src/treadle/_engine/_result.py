"""Run statuses and the value a finished (or paused) run returns."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from treadle._engine._slots import blank as _blank
from treadle._engine._slots import unfrozen_twin

if TYPE_CHECKING:
    from collections.abc import Mapping

    from treadle._engine._delivery import StalledFanIn
    from treadle._engine._events import WorkflowEvent
    from treadle._engine._waits import PendingRequest
    from treadle._exceptions import TreadleError


class RunStatus(enum.StrEnum):
    """Where a run stands.

    ``COMPLETED`` means nothing is pending; ``AWAITING_INPUT`` that requests or
    session input are; ``WAITING`` that only durable timers are; ``STALLED``
    that nothing can move but a fan-in is partly filled. ``PENDING`` is a run
    started through a client (``treadle.workers.connect``), or admitted by its
    start policy, that nobody has begun; ``QUEUED`` one its start policy holds
    back (its key or its workflow's queue is full, or its debounce window is
    open) until whoever serves the store admits it (``docs/flow-control.md``).

    The statuses fall in four groups: moving (``QUEUED``, ``PENDING``, ``RUNNING``);
    resting (:attr:`is_resting`: ``AWAITING_INPUT``, ``WAITING``), stopped
    until an answer, a message or a timer moves the run again; ``PAUSED``,
    stopped at a superstep boundary by ``pause()`` until ``unpause()`` (or
    ``resume``) lets it go on, whatever arrives meanwhile; and ended
    (:attr:`is_final`: ``COMPLETED``, ``FAILED``, ``CANCELLED``,
    ``STALLED``), for good. :attr:`is_stopped` covers the last three: the
    run is not moving now.
    """

    QUEUED = "queued"
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    AWAITING_INPUT = "awaiting_input"
    WAITING = "waiting"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STALLED = "stalled"
    PAUSED = "paused"

    @property
    def is_final(self) -> bool:
        """Whether the run has ended for good: nothing will ever move it again.

        A resting run (``AWAITING_INPUT``, ``WAITING``) is not final, since an
        answer, a message or a due timer moves it on; use :attr:`is_stopped`
        for "resting or ended".
        """
        return self in ENDED

    @property
    def is_resting(self) -> bool:
        """Whether the run rests until an answer, a message or a timer moves it again.

        A resting run holds no process (its lease is given up) yet is not
        over: it can be answered (``respond``), messaged (``send_message``)
        or resumed when its timer is due.
        """
        return self in _RESTING

    @property
    def is_stopped(self) -> bool:
        """Whether the run has stopped moving for now: it rests, is paused or has ended.

        Where stepping a run stops: ``run`` returns, a stream ends, the
        run's span ends and its last checkpoint is made durable.
        ``PENDING`` and ``RUNNING`` runs are still moving; a ``PAUSED`` one
        is stopped, though neither resting nor final.
        """
        return self in _STOPPED


ENDED = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.STALLED})
"""Statuses a run never leaves by itself: nothing more will be delivered to it."""

_RESTING = frozenset({RunStatus.AWAITING_INPUT, RunStatus.WAITING})
_STOPPED = ENDED | _RESTING | {RunStatus.PAUSED}


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a run committed, as of its last barrier.

    Attributes:
        run_id: The run's id.
        status: Where the run stands.
        outputs: Values from ``ctx.yield_output``, in commit order.
        events: Every event, in canonical order, when the run recorded them.
        state: The committed shared state.
        superstep: The last committed superstep.
        stalled: For a ``STALLED`` run, each fan-in and the sources it lacks.
        pending_requests: Requests waiting for an answer (``PendingRequest``).
        wake_at: For a ``WAITING`` run, when its next timer fires.
        last_checkpoint_id: The newest checkpoint, when a store is configured.
        error: For a ``FAILED`` run, the error that failed it.
        outcome: The run's named outcome (``"approved"``, ``"rejected"``, ...),
            as the last handler to call ``ctx.set_outcome`` set it; ``None``: none.
        outcome_summary: The one line given with it, if any.
        deduplicated: The start found the run its deduplication id started
            before: this is that run as its store has it, nothing new was started.
    """

    run_id: str
    status: RunStatus
    outputs: list[Any]
    state: Mapping[str, Any]
    superstep: int
    events: list[WorkflowEvent] = field(default_factory=list)
    stalled: list[StalledFanIn] = field(default_factory=list)
    pending_requests: list[PendingRequest] = field(default_factory=list)
    wake_at: float | None = None
    last_checkpoint_id: str | None = None
    error: TreadleError | None = None
    outcome: str | None = None
    outcome_summary: str | None = None
    deduplicated: bool = False

    @property
    def output(self) -> Any:
        """The last output, for workflows that produce one answer.

        Raises:
            LookupError: The run produced no output.
        """
        if not self.outputs:
            msg = f"run {self.run_id!r} ({self.status}) produced no output"
            raise LookupError(msg)
        return self.outputs[-1]


_Draft = unfrozen_twin(RunResult)
"""``RunResult``'s unfrozen twin (see ``_engine/_slots.py``): every run ends by making one."""


def run_result(
    run_id: str,
    status: RunStatus,
    outputs: list[Any],
    state: Mapping[str, Any],
    superstep: int,
    events: list[WorkflowEvent],
    stalled: list[StalledFanIn],
    pending_requests: list[PendingRequest],
    wake_at: float | None,
    last_checkpoint_id: str | None,
    error: TreadleError | None,
    outcome: str | None,
    outcome_summary: str | None,
) -> RunResult:
    """``RunResult(...)`` of these fields (not deduplicated), as the loop makes one for each run."""
    result: Any = _blank(_Draft)
    result.run_id = run_id
    result.status = status
    result.outputs = outputs
    result.state = state
    result.superstep = superstep
    result.events = events
    result.stalled = stalled
    result.pending_requests = pending_requests
    result.wake_at = wake_at
    result.last_checkpoint_id = last_checkpoint_id
    result.error = error
    result.outcome = outcome
    result.outcome_summary = outcome_summary
    result.deduplicated = False
    result.__class__ = RunResult  # frozen from here on (see _Draft)
    made: RunResult = result
    return made
