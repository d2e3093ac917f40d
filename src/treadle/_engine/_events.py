"""What a run reports while it runs.

Every event carries ``run_id``, ``superstep``, ``executor_id`` (``None`` for
run-level events) and ``sequence``: its position in the stream the consumer
sees, starting at 0. In ``LOCKSTEP`` mode and in ``RunResult.events`` the
order is canonical (see :func:`canonical_batch`), hence the same in every
execution; ``OFF_THREAD`` streams publish events the moment they are raised,
so concurrent executors interleave by timing there.

Events are built only when someone listens: a run nobody streams and whose
result does not record events creates none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from treadle._engine._slots import blank as _blank

if TYPE_CHECKING:
    from treadle._engine._result import RunStatus


@dataclass(slots=True, kw_only=True)
class WorkflowEvent:
    """Base of every event; see the module docstring for the common fields."""

    run_id: str
    superstep: int
    executor_id: str | None = None
    sequence: int = field(default=-1, compare=False)
    at: float | None = field(default=None, compare=False, repr=False)
    """When it was raised, by the run's clock, for events kept until their barrier (a
    stored run's log stamps the others as it takes them: the same moment)."""

    ephemeral: ClassVar[bool] = False
    """A class that sets it (an agent's token deltas) is streamed live and never logged:
    there are many, and what they add up to is what is kept."""

    before_barrier: ClassVar[bool] = False
    """A class that sets it (progress) goes to a stored run's followers in any process the
    moment it is raised, and is logged at its barrier as every event is. Ephemeral
    classes go there too (see ``Checkpointing.relay``)."""


@dataclass(slots=True, kw_only=True)
class RunStarted(WorkflowEvent):
    """The run began (or resumed); ``superstep`` is the last committed one."""


@dataclass(slots=True, kw_only=True)
class SuperstepStarted(WorkflowEvent):
    """A superstep began; ``executor_ids`` will run in it, in rank order."""

    executor_ids: tuple[str, ...] = ()


@dataclass(slots=True, kw_only=True)
class SuperstepCompleted(WorkflowEvent):
    """A superstep committed: its state, messages and outputs are visible."""


@dataclass(slots=True, kw_only=True)
class ExecutorInvoked(WorkflowEvent):
    """A handler started on one message (``position`` in the inbox).

    ``attempt`` counts from 1; it grows when a retry policy tries again.
    """

    position: int = 0
    attempt: int = 1


@dataclass(slots=True, kw_only=True)
class ExecutorCompleted(WorkflowEvent):
    """A handler returned; what it wrote commits at the barrier."""

    position: int = 0


@dataclass(slots=True, kw_only=True)
class ExecutorFailed(WorkflowEvent):
    """A handler raised; unless ``retrying`` or ``routed_to``, the superstep will not commit.

    ``routed_to`` names the handler of the executor's error route, which
    receives the failure as an ``ExecutorFailure`` next superstep while
    the rest of this superstep commits.
    """

    position: int = 0
    error: BaseException | None = None
    attempt: int = 1
    retrying: bool = False
    routed_to: str | None = None


@dataclass(slots=True, kw_only=True)
class ExecutorSuspended(WorkflowEvent):
    """A handler reached a durable wait (``"request"``, ``"input"``, ``"timer"``).

    What it sent or wrote is discarded; it re-executes once the wait is
    satisfied.
    """

    position: int = 0
    wait: str = ""
    key: str = ""


@dataclass(slots=True, kw_only=True)
class LimitSlowed(WorkflowEvent):
    """A provider turned a limited call away (a 429): ``limit`` admits no call for ``seconds``.

    Raised for each limit the executor names when its handler raises
    ``ProviderBusyError``; the attempt is made again once its turn comes.
    """

    position: int = 0
    limit: str = ""
    seconds: float = 0.0


@dataclass(slots=True, kw_only=True)
class RequestEvent(WorkflowEvent):
    """A handler asked a question (``ctx.request``); answer with ``respond``.

    ``approvers`` and ``four_eyes`` say who may answer it, in the run's log
    too, so a door without the workflow's code can check an answer.
    """

    request_id: str = ""
    payload: Any = None
    response_type: str | None = None
    approvers: tuple[str, ...] = ()
    four_eyes: bool = False
    deadline_at: float | None = None  # its timeout's end (epoch seconds): webhooks warn before it


@dataclass(slots=True, kw_only=True)
class OutputEvent(WorkflowEvent):
    """A value passed to ``ctx.yield_output``, published once committed."""

    value: Any = None


@dataclass(slots=True, kw_only=True)
class ProgressEvent(WorkflowEvent):
    """Progress reported by ``ctx.report_progress``."""

    before_barrier: ClassVar[bool] = True
    current: float = 0
    total: float | None = None
    message: str | None = None


@dataclass(slots=True, kw_only=True)
class CustomEvent(WorkflowEvent):
    """Any value a handler raised with ``ctx.add_event``."""

    data: Any = None


@dataclass(slots=True, kw_only=True)
class CheckpointSaved(WorkflowEvent):
    """The barrier of ``superstep`` is durable as ``checkpoint_id``."""

    checkpoint_id: str = ""


@dataclass(slots=True, kw_only=True)
class StatusChanged(WorkflowEvent):
    """The run moved to a new status; the last event of every stream.

    ``superstep`` is the last committed superstep, except for ``FAILED``
    when a superstep failed: then it is the one that failed (as its error says).
    """

    status: RunStatus
    error: BaseException | None = None


# --- the events of every run and superstep, built without keyword handling ------
#
# A superstep publishes SuperstepStarted, SuperstepCompleted and, per invocation,
# ExecutorInvoked and ExecutorCompleted; a run RunStarted and a StatusChanged per
# status, and an OutputEvent per output. Calling a keyword-only dataclass costs
# about three times setting its slots directly, and these are built on the hot
# path of every run that records events; each function below sets every field of
# its class (tests/engine/test_hot_path.py compares them with __init__).


def superstep_started(
    run_id: str, superstep: int, executor_ids: tuple[str, ...]
) -> SuperstepStarted:
    """``SuperstepStarted(run_id=..., superstep=..., executor_ids=...)``."""
    event: SuperstepStarted = _blank(SuperstepStarted)
    event.run_id = run_id
    event.superstep = superstep
    event.executor_id = None
    event.sequence = -1
    event.at = None
    event.executor_ids = executor_ids
    return event


def superstep_completed(run_id: str, superstep: int) -> SuperstepCompleted:
    """``SuperstepCompleted(run_id=..., superstep=...)``."""
    event: SuperstepCompleted = _blank(SuperstepCompleted)
    event.run_id = run_id
    event.superstep = superstep
    event.executor_id = None
    event.sequence = -1
    event.at = None
    return event


def executor_invoked(
    run_id: str,
    superstep: int,
    executor_id: str,
    position: int,
    attempt: int,
    at: float | None = None,
) -> ExecutorInvoked:
    """``ExecutorInvoked(run_id=..., superstep=..., executor_id=..., ...)``."""
    event: ExecutorInvoked = _blank(ExecutorInvoked)
    event.run_id = run_id
    event.superstep = superstep
    event.executor_id = executor_id
    event.sequence = -1
    event.at = at
    event.position = position
    event.attempt = attempt
    return event


def executor_completed(
    run_id: str, superstep: int, executor_id: str, position: int, at: float | None = None
) -> ExecutorCompleted:
    """``ExecutorCompleted(run_id=..., superstep=..., executor_id=..., position=...)``."""
    event: ExecutorCompleted = _blank(ExecutorCompleted)
    event.run_id = run_id
    event.superstep = superstep
    event.executor_id = executor_id
    event.sequence = -1
    event.at = at
    event.position = position
    return event


def run_started(run_id: str, superstep: int) -> RunStarted:
    """``RunStarted(run_id=..., superstep=...)``."""
    event: RunStarted = _blank(RunStarted)
    event.run_id = run_id
    event.superstep = superstep
    event.executor_id = None
    event.sequence = -1
    event.at = None
    return event


def status_changed(
    run_id: str, superstep: int, status: RunStatus, error: BaseException | None = None
) -> StatusChanged:
    """``StatusChanged(run_id=..., superstep=..., status=..., error=...)``."""
    event: StatusChanged = _blank(StatusChanged)
    event.run_id = run_id
    event.superstep = superstep
    event.executor_id = None
    event.sequence = -1
    event.at = None
    event.status = status
    event.error = error
    return event


def checkpoint_saved(run_id: str, superstep: int, checkpoint_id: str) -> CheckpointSaved:
    """``CheckpointSaved(run_id=..., superstep=..., checkpoint_id=...)``."""
    event: CheckpointSaved = _blank(CheckpointSaved)
    event.run_id = run_id
    event.superstep = superstep
    event.executor_id = None
    event.sequence = -1
    event.at = None
    event.checkpoint_id = checkpoint_id
    return event


def output_produced(run_id: str, superstep: int, executor_id: str, value: Any) -> OutputEvent:
    """``OutputEvent(run_id=..., superstep=..., executor_id=..., value=...)``."""
    event: OutputEvent = _blank(OutputEvent)
    event.run_id = run_id
    event.superstep = superstep
    event.executor_id = executor_id
    event.sequence = -1
    event.at = None
    event.value = value
    return event
