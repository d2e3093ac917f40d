"""What a run reports while it runs: the events of ``stream`` and ``RunResult.events``.

Every event derives from :class:`WorkflowEvent` and carries ``run_id``,
``superstep``, ``executor_id`` (``None`` for run-level events) and
``sequence`` (its position in the stream the consumer sees). Match on the
classes to react to the ones you care about::

    from treadle.events import OutputEvent, StatusChanged

    async with workflow.stream(x) as stream:
        async for event in stream:
            match event:
                case OutputEvent(value=value):
                    print(value)
                case StatusChanged(status=status):
                    print("run is", status)

In ``RunResult.events`` and lockstep streams a superstep's events come in
canonical order: :class:`SuperstepStarted`; per invocation, in (rank, inbox
position) order, its :class:`ExecutorInvoked`, the events it raised,
:class:`ExecutorCompleted`; then the :class:`OutputEvent` values; then
:class:`SuperstepCompleted`. The last event of every stream is a
:class:`StatusChanged`. ``docs/semantics.md`` (section 7) has the details.
"""

from treadle._agents._events import AgentDelta
from treadle._engine._events import (
    CheckpointSaved,
    CustomEvent,
    ExecutorCompleted,
    ExecutorFailed,
    ExecutorInvoked,
    ExecutorSuspended,
    LimitSlowed,
    OutputEvent,
    ProgressEvent,
    RequestEvent,
    RunStarted,
    StatusChanged,
    SuperstepCompleted,
    SuperstepStarted,
    WorkflowEvent,
)
from treadle._public import publish

__all__ = [
    "AgentDelta",
    "CheckpointSaved",
    "CustomEvent",
    "ExecutorCompleted",
    "ExecutorFailed",
    "ExecutorInvoked",
    "ExecutorSuspended",
    "LimitSlowed",
    "OutputEvent",
    "ProgressEvent",
    "RequestEvent",
    "RunStarted",
    "StatusChanged",
    "SuperstepCompleted",
    "SuperstepStarted",
    "WorkflowEvent",
]

publish(__name__, globals(), __all__)
